/*
 * sim_internal.h - what the simulator's sources (sim_*.c) share: the objects behind handles, the
 * handle table's calls, the status model and copy thread the sessions post to, and the errors and
 * clock. Private to libkvflux_mori_sim.so: nothing here is exported. Every sim_*.c includes it first.
 *
 * What the simulator models, exactly as MoRI's xGMI backend and TransferStatus behave:
 *   - a status completes only when something queries it after its copy finished; no thread and no
 *     callback ever completes it, and nobody notifies a waiter (unless its engine pushes: sim_push.c
 *     models kvflux's patch to MoRI, which does);
 *   - a bounded wait polls once, sleeps until its deadline (woken early only if another thread's
 *     query completes that status), and polls again; WaitAll waits statuses in order against one
 *     deadline; a failure is sticky and wins;
 *   - every batch post queries its status once right after posting.
 * Bytes are really copied (memmove between the registered host buffers) by one copy thread per engine,
 * in post order; the timing model is in kvflux_mori_sim.h. Memory registrations are process-wide, so a
 * session reaches a peer engine's memory when both engines live in this process.
 *
 * The sources, one concern each:
 *   sim_library.c  errors, the clock, copying results out, and the library calls (ABI version, ...);
 *   sim_handles.c  the generation-checked handle table and the object head every handle names;
 *   sim_status.c   the status model, the copy thread, and the status calls (code, wait_all, ...);
 *   sim_engine.c   engines: create, destroy, backends, descriptors, remote engines, faults, timing;
 *   sim_mem.c      memory registrations, their descriptors, and the process-wide registry;
 *   sim_session.c  sessions and the batch post;
 *   sim_push.c     push completion: the timer thread that completes pushed statuses, and the push queue.
 */
#ifndef KVFLUX_SIM_INTERNAL_H
#define KVFLUX_SIM_INTERNAL_H

#define _GNU_SOURCE

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "kvflux_mori_sim.h"
#include "msgpack_lite.h"

#pragma GCC visibility push(hidden)

#define IPC_HANDLE_SIZE 64

/* ---- errors and the clock (sim_library.c) -------------------------------------------------------- */

/* This thread's last error, as kvflux_mori_last_error returns it. */
extern __thread char last_error[1024];

/* Sets this thread's last error and returns code. */
int fail(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* CLOCK_MONOTONIC now, in nanoseconds. */
int64_t now_ns(void);
struct timespec to_timespec(int64_t ns);
/* A condition variable whose timed waits run on CLOCK_MONOTONIC. */
void cond_init_monotonic(pthread_cond_t *cv);

/* Writes a string into a caller's buffer with the two-call pattern. */
int copy_out_string(const char *s, char *buf, size_t cap, size_t *out_len, const char *what);
/* Writes packed bytes into a caller's buffer with the two-call pattern. */
int copy_out_bytes(const mp_writer *w, uint8_t *buf, size_t cap, size_t *out_len, const char *what);

/* ---- the objects behind handles ------------------------------------------------------------------ */

enum kind { K_ENGINE = 1, K_MEM = 2, K_SESSION = 3, K_STATUS = 4 };

struct engine;

/* The head of every object: its kind, its references, how to free it and the engine that owns it. */
struct obj {
    int kind;
    atomic_int refs;
    uint64_t handle;
    struct engine *owner; /* NULL for engines */
    void (*destroy)(struct obj *);
};

struct fault {
    uint32_t nth;   /* the batch it hits, or with every, the period */
    int every;      /* hits every nth batch instead of the nth only */
    int64_t slow_ns; /* a slow fault: the batch succeeds this long after its copy */
    int hang;
    int32_t code;
    char message[256];
};

struct job;

struct engine {
    struct obj o;
    char *key;
    char *host;
    uint16_t port;
    int xgmi;
    atomic_uint next_uid;
    uint32_t next_mem_id;

    pthread_mutex_t mu; /* guards everything below and every status of this engine */
    char **remotes;
    size_t remote_count;
    uint64_t overhead_ns;
    uint64_t bytes_per_second;
    int64_t last_finish_ns;
    uint32_t posted;
    struct fault faults[KVFLUX_SIM_MAX_FAULTS];
    size_t fault_count;
    uint32_t push_mode; /* KVFLUX_MORI_PUSH_* for batches posted from now on */

    /* the copy thread */
    pthread_cond_t work_cv; /* a job was queued, or stop */
    pthread_cond_t copy_cv; /* a job was copied, or the engine closed: wakes blocking waits only */
    struct job *head;
    struct job *tail;
    int started;
    int stop;
    int closed;
    pthread_t worker;
};

struct mem {
    struct obj o;
    int local; /* registered here (1) or unpacked from a peer (0) */
    pthread_rwlock_t use; /* held for reading while copying, for writing while deregistering */
    int registered;
    char *engine_key;
    uint32_t id;
    int32_t device;
    char *bus_id;
    uint64_t data;
    uint64_t size;
    uint32_t loc;
    uint8_t ipc[IPC_HANDLE_SIZE];
    int32_t numa;
    uint64_t ipc_offset;
    uint8_t fabric[IPC_HANDLE_SIZE];
    int32_t vpod;
    char *vpod_ppod;
    uint64_t fabric_offset;
    uint64_t fabric_alloc_size;
    void *map_base; /* a peer process's memory mapped here for a session (sim_share.c); NULL otherwise */
    size_t map_len;
};

struct session {
    struct obj o;
    struct mem *local;  /* reference held */
    struct mem *target; /* the registration the remote descriptor names; reference held */
};

struct status {
    struct obj o;
    int code;
    char message[256];
    int64_t finish_ns; /* modelled */
    int64_t copied_ns; /* when the copy thread finished its bytes */
    int copied;
    int hang;
    int32_t fail_code;
    char fail_message[256];
    pthread_cond_t cv; /* notified on terminal transitions only, as MoRI's condition variable */
    uint32_t push_mode; /* the engine's KVFLUX_MORI_PUSH_* when the batch was posted */
    int pushed;         /* queued for kvflux_mori_push_take already */
    struct status *push_next; /* in the push queue (sim_push.c), which holds a reference */
    int64_t fired_ns;         /* when the push thread took it off its timers (the hook's run, modelled) */
    int64_t queued_ns;        /* when it was queued for kvflux_mori_push_take */
};

struct job {
    struct job *next;
    struct status *status; /* reference held */
    struct mem *src;       /* references held */
    struct mem *dst;
    size_t count;
    uint64_t *src_offsets;
    uint64_t *dst_offsets;
    uint64_t *sizes;
};

#define ENGINE(o) ((struct engine *)(o))
#define MEM(o) ((struct mem *)(o))
#define SESSION(o) ((struct session *)(o))
#define STATUS(o) ((struct status *)(o))

/* ---- memory another process reaches (sim_share.c) ---------------------------------------------- */

/* Fills m's IPC handle and offset when its bytes lie in one kvflux_sim_host_alloc allocation. */
void share_describe(struct mem *m);
/*
 * A registration of engine e standing for the peer process's memory that desc's IPC handle names, mapped
 * into this process, with one reference; NULL with the error set if the handle names none or it cannot be
 * mapped. Its mapping is closed when the last reference goes (mem_destroy_obj calls share_unmap).
 */
/* A new memory object of owner (local: registered here), with no references yet (sim_mem.c). */
struct mem *mem_new(struct engine *owner, int local);
struct mem *share_map_peer(struct engine *e, const struct mem *desc, const char *call);
void share_unmap(struct mem *m);

/* ---- the handle table (sim_handles.c) ------------------------------------------------------------ */

/* Fills an object's head: no references yet; an owned object takes one on its owner. */
void obj_init(struct obj *o, int kind, struct engine *owner, void (*destroy)(struct obj *));
/* Drops one reference; the last one frees the object. NULL is ignored. */
void obj_put(struct obj *o);
/* Enters o in the table (taking one reference for the table) and writes its handle. */
int table_add(struct obj *o, uint64_t *out);
/* Looks a handle up and takes a reference on its object; on failure sets the error and returns NULL. */
struct obj *get(uint64_t h, int kind, const char *call);
/* Takes a handle out of the table; returns its object with the table's reference, or NULL. */
struct obj *table_remove(uint64_t h, int kind, const char *call);
/*
 * Takes every handle that engine e owns out of the table and returns their objects, each with the
 * table's reference, in an array the caller frees (*count of them). One that finds no room in the array
 * is left in the table; its owner reference keeps the engine's memory alive.
 */
struct obj **table_remove_owned(const struct engine *e, size_t *count);

/* ---- the status model and the copy thread (sim_status.c) ----------------------------------------- */

/* Frees a status object (its destroy). */
void status_destroy_obj(struct obj *o);
/* TransferStatus::Update: ignored once the code is a failure; notifies on terminal codes. Engine mu held. */
void status_update(struct status *st, int code, const char *message);
/* The xGMI progress callback: completes the status if its copy is over. Engine mu held. */
void status_progress(struct status *st);
/* An engine's copy thread: copies its queued jobs in post order until the engine stops. */
void *copy_thread(void *arg);
/* Frees a job that never entered the queue (it holds no references yet). */
void job_discard(struct job *j);
/* Frees a job taken off the queue, with the references it holds. */
void job_free(struct job *j);

/* ---- push completion (sim_push.c) ---------------------------------------------------------------- */

/*
 * Schedules st's completion at due_ns (its copies' end) for a batch posted with a push mode other than OFF:
 * with KVFLUX_MORI_PUSH_ON the push thread completes it then and queues it for kvflux_mori_push_take. Takes
 * a reference on st. Engine mu held.
 */
void push_schedule(struct status *st, int64_t due_ns);

/* ---- memory (sim_mem.c) -------------------------------------------------------------------------- */

/* Deregisters and drops one memory object taken out of the table. */
void mem_release(struct mem *m);
/* The live local registration a descriptor names (engine key, id, address, size), with a reference. */
struct mem *resolve_registration(const struct mem *desc);

#pragma GCC visibility pop

#endif /* KVFLUX_SIM_INTERNAL_H */
