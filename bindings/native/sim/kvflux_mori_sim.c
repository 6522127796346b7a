/*
 * A simulator of MoRI IO's xGMI backend behind kvflux_mori.h, for tests and reproducers on machines
 * without AMD GPUs. What it models, exactly as MoRI's xGMI backend and TransferStatus behave:
 *   - a status completes only when something queries it after its copy finished; no thread and no
 *     callback ever completes it, and nobody notifies a waiter;
 *   - a bounded wait polls once, sleeps until its deadline (woken early only if another thread's
 *     query completes that status), and polls again; WaitAll waits statuses in order against one
 *     deadline; a failure is sticky and wins;
 *   - every batch post queries its status once right after posting.
 * Bytes are really copied (memmove between the registered host buffers) by one copy thread per engine,
 * in post order; the timing model is in kvflux_mori_sim.h. Memory registrations are process-wide, so a
 * session reaches a peer engine's memory when both engines live in this process.
 */
#define _GNU_SOURCE
#include "kvflux_mori_sim.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../kvflux_mori.h"
#include "msgpack_lite.h"

#define IPC_HANDLE_SIZE 64

/* ================================================================================================ */
/*                                       errors and the clock                                       */
/* ================================================================================================ */

static __thread char last_error[1024];

static int fail(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static int fail(int code, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_error, sizeof last_error, fmt, ap);
    va_end(ap);
    return code;
}

static int64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static struct timespec to_timespec(int64_t ns) {
    struct timespec ts = {(time_t)(ns / 1000000000), (long)(ns % 1000000000)};
    return ts;
}

static void cond_init_monotonic(pthread_cond_t *cv) {
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(cv, &attr);
    pthread_condattr_destroy(&attr);
}

/* Writes a string into a caller's buffer with the two-call pattern. */
static int copy_out_string(const char *s, char *buf, size_t cap, size_t *out_len, const char *what) {
    size_t n = strlen(s);
    if (out_len != NULL) {
        *out_len = n;
    }
    if (buf == NULL || cap < n + 1) {
        if (buf != NULL && cap > 0) {
            buf[0] = '\0';
        }
        if (out_len == NULL) {
            return fail(KVFLUX_MORI_E_NULL_ARG, "%s: out_len is NULL, so the needed size cannot be reported", what);
        }
        return fail(KVFLUX_MORI_E_BUFFER_TOO_SMALL, "%s needs %zu bytes with its NUL, the buffer has %zu", what,
                    n + 1, cap);
    }
    memcpy(buf, s, n + 1);
    return KVFLUX_MORI_OK;
}

static int copy_out_bytes(const mp_writer *w, uint8_t *buf, size_t cap, size_t *out_len, const char *what) {
    if (w->oom) {
        return fail(KVFLUX_MORI_E_NO_MEMORY, "%s: out of memory while packing", what);
    }
    if (out_len == NULL) {
        return fail(KVFLUX_MORI_E_NULL_ARG, "%s: out_len is NULL", what);
    }
    *out_len = w->len;
    if (buf == NULL || cap < w->len) {
        return fail(KVFLUX_MORI_E_BUFFER_TOO_SMALL, "%s needs %zu bytes, the buffer has %zu", what, w->len, cap);
    }
    memcpy(buf, w->data, w->len);
    return KVFLUX_MORI_OK;
}

/* ================================================================================================ */
/*                                 handles: a generation-checked table                              */
/* ================================================================================================ */

enum kind { K_ENGINE = 1, K_MEM = 2, K_SESSION = 3, K_STATUS = 4 };

static const char *kind_name(int kind) {
    switch (kind) {
    case K_ENGINE: return "engine";
    case K_MEM: return "memory";
    case K_SESSION: return "session";
    case K_STATUS: return "status";
    default: return "unknown";
    }
}

struct engine;

/* The head of every object: its kind, its references, how to free it and the engine that owns it. */
struct obj {
    int kind;
    atomic_int refs;
    uint64_t handle;
    struct engine *owner; /* NULL for engines */
    void (*destroy)(struct obj *);
};

struct slot {
    uint32_t gen;
    struct obj *obj; /* NULL when free */
    uint32_t next_free;
};

#define SLOT_NONE UINT32_MAX
#define MAX_SLOTS (1u << 24)

static pthread_mutex_t table_mu = PTHREAD_MUTEX_INITIALIZER;
static struct slot *slots;
static uint32_t slot_count;
static uint32_t slot_cap;
static uint32_t free_head = SLOT_NONE;
static int live_count;

static void obj_put(struct obj *o) {
    if (o != NULL && atomic_fetch_sub(&o->refs, 1) == 1) {
        o->destroy(o);
    }
}

/* Enters o in the table (taking one reference for the table) and writes its handle. */
static int table_add(struct obj *o, uint64_t *out) {
    pthread_mutex_lock(&table_mu);
    uint32_t index;
    if (free_head != SLOT_NONE) {
        index = free_head;
        free_head = slots[index].next_free;
    } else {
        if (slot_count == slot_cap) {
            uint32_t cap = slot_cap ? slot_cap * 2 : 256;
            struct slot *grown = cap <= MAX_SLOTS ? realloc(slots, cap * sizeof *slots) : NULL;
            if (grown == NULL) {
                pthread_mutex_unlock(&table_mu);
                return fail(KVFLUX_MORI_E_NO_MEMORY, "no room for another handle (%d live)", live_count);
            }
            slots = grown;
            slot_cap = cap;
        }
        index = slot_count++;
        slots[index].gen = 0;
    }
    slots[index].gen = (slots[index].gen + 1) & 0xffffffffu;
    if (slots[index].gen == 0) {
        slots[index].gen = 1;
    }
    slots[index].obj = o;
    o->handle = ((uint64_t)slots[index].gen << 32) | ((uint64_t)o->kind << 24) | index;
    live_count++;
    pthread_mutex_unlock(&table_mu);
    *out = o->handle;
    return KVFLUX_MORI_OK;
}

/* The slot of a handle of the given kind that is live now, or NULL. table_mu must be held. */
static struct slot *slot_of(uint64_t h, int kind) {
    uint32_t index = (uint32_t)(h & 0xffffff);
    int hkind = (int)((h >> 24) & 0xff);
    uint32_t gen = (uint32_t)(h >> 32);
    if (h == 0 || hkind != kind || index >= slot_count) {
        return NULL;
    }
    struct slot *s = &slots[index];
    return (s->obj != NULL && s->gen == gen) ? s : NULL;
}

static int bad_handle(uint64_t h, int kind, const char *call) {
    if (h == 0) {
        return fail(KVFLUX_MORI_E_BAD_HANDLE, "%s: the %s handle is 0 (null)", call, kind_name(kind));
    }
    int hkind = (int)((h >> 24) & 0xff);
    if (hkind != kind) {
        return fail(KVFLUX_MORI_E_BAD_HANDLE, "%s: handle 0x%llx is of kind '%s', not '%s'", call,
                    (unsigned long long)h, kind_name(hkind), kind_name(kind));
    }
    return fail(KVFLUX_MORI_E_BAD_HANDLE, "%s: %s handle 0x%llx was released or never issued", call,
                kind_name(kind), (unsigned long long)h);
}

/* Looks a handle up and takes a reference on its object; on failure sets the error and returns NULL. */
static struct obj *get(uint64_t h, int kind, const char *call) {
    pthread_mutex_lock(&table_mu);
    struct slot *s = slot_of(h, kind);
    struct obj *o = s ? s->obj : NULL;
    if (o != NULL) {
        atomic_fetch_add(&o->refs, 1);
    }
    pthread_mutex_unlock(&table_mu);
    if (o == NULL) {
        bad_handle(h, kind, call);
    }
    return o;
}

static void slot_free(struct slot *s) {
    uint32_t index = (uint32_t)(s - slots);
    s->obj = NULL;
    s->next_free = free_head;
    free_head = index;
    live_count--;
}

/* Takes a handle out of the table; returns its object with the table's reference, or NULL. */
static struct obj *table_remove(uint64_t h, int kind, const char *call) {
    pthread_mutex_lock(&table_mu);
    struct slot *s = slot_of(h, kind);
    struct obj *o = s ? s->obj : NULL;
    if (s != NULL) {
        slot_free(s);
    }
    pthread_mutex_unlock(&table_mu);
    if (o == NULL) {
        bad_handle(h, kind, call);
    }
    return o;
}

#define ENGINE(o) ((struct engine *)(o))
#define MEM(o) ((struct mem *)(o))
#define SESSION(o) ((struct session *)(o))
#define STATUS(o) ((struct status *)(o))

/* ================================================================================================ */
/*                                             objects                                              */
/* ================================================================================================ */

struct fault {
    uint32_t nth;
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

/* Process-wide list of live local registrations, so sessions can reach a peer engine's memory. */
static pthread_mutex_t registry_mu = PTHREAD_MUTEX_INITIALIZER;
static struct mem **registry;
static size_t registry_count;
static size_t registry_cap;

static void engine_destroy_obj(struct obj *o) {
    struct engine *e = ENGINE(o);
    for (size_t i = 0; i < e->remote_count; i++) {
        free(e->remotes[i]);
    }
    free(e->remotes);
    free(e->key);
    free(e->host);
    pthread_mutex_destroy(&e->mu);
    pthread_cond_destroy(&e->work_cv);
    pthread_cond_destroy(&e->copy_cv);
    free(e);
}

static void mem_destroy_obj(struct obj *o) {
    struct mem *m = MEM(o);
    pthread_rwlock_destroy(&m->use);
    free(m->engine_key);
    free(m->bus_id);
    free(m->vpod_ppod);
    struct engine *owner = m->o.owner;
    free(m);
    obj_put(&owner->o);
}

static void session_destroy_obj(struct obj *o) {
    struct session *s = SESSION(o);
    obj_put(&s->local->o);
    obj_put(&s->target->o);
    struct engine *owner = s->o.owner;
    free(s);
    obj_put(&owner->o);
}

static void status_destroy_obj(struct obj *o) {
    struct status *st = STATUS(o);
    pthread_cond_destroy(&st->cv);
    struct engine *owner = st->o.owner;
    free(st);
    obj_put(&owner->o);
}

static void obj_init(struct obj *o, int kind, struct engine *owner, void (*destroy)(struct obj *)) {
    o->kind = kind;
    atomic_init(&o->refs, 0);
    o->owner = owner;
    o->destroy = destroy;
    if (owner != NULL) {
        atomic_fetch_add(&owner->o.refs, 1);
    }
}

/* Frees a job that never entered the queue (it holds no references yet). */
static void job_discard(struct job *j) {
    if (j != NULL) {
        free(j->src_offsets);
        free(j->dst_offsets);
        free(j->sizes);
        free(j);
    }
}

static void job_free(struct job *j) {
    obj_put(&j->status->o);
    obj_put(&j->src->o);
    obj_put(&j->dst->o);
    j->status = NULL;
    job_discard(j);
}

/* ================================================================================================ */
/*                                 the status model (engine mu held)                                */
/* ================================================================================================ */

/* TransferStatus::Update: ignored once the code is a failure; notifies on terminal codes. */
static void status_update(struct status *st, int code, const char *message) {
    if (st->code > KVFLUX_MORI_STATUS_ERR_BEGIN) {
        return;
    }
    st->code = code;
    snprintf(st->message, sizeof st->message, "%s", message);
    pthread_cond_broadcast(&st->cv);
}

/* The xGMI progress callback: completes the status if its copy is over (the event query). */
static void status_progress(struct status *st) {
    if (st->code != KVFLUX_MORI_STATUS_IN_PROGRESS || st->hang) {
        return;
    }
    if (!st->copied || now_ns() < st->finish_ns) {
        return;
    }
    if (st->fail_code != 0) {
        status_update(st, st->fail_code, st->fail_message);
    } else {
        st->code = KVFLUX_MORI_STATUS_SUCCESS;
        pthread_cond_broadcast(&st->cv);
    }
}

/* The xGMI wait callback (event synchronize): blocks until the copy is over, then completes. */
static void status_block(struct engine *e, struct status *st) {
    while (st->code == KVFLUX_MORI_STATUS_IN_PROGRESS && !e->closed) {
        if (!st->hang && st->copied && now_ns() >= st->finish_ns) {
            status_progress(st);
            break;
        }
        if (st->hang || !st->copied) {
            pthread_cond_wait(&e->copy_cv, &e->mu);
        } else {
            struct timespec until = to_timespec(st->finish_ns);
            pthread_cond_timedwait(&e->copy_cv, &e->mu, &until);
        }
    }
    if (st->code == KVFLUX_MORI_STATUS_IN_PROGRESS && e->closed) {
        status_update(st, KVFLUX_MORI_STATUS_ERR_BAD_STATE, "engine destroyed while the transfer was in flight");
    }
}

/* TransferStatus::WaitFor(timeoutMs), line by line. */
static int status_wait_for(struct status *st, int timeout_ms) {
    struct engine *e = st->o.owner;
    pthread_mutex_lock(&e->mu);
    if (st->code != KVFLUX_MORI_STATUS_IN_PROGRESS) {
        int code = st->code;
        pthread_mutex_unlock(&e->mu);
        return code;
    }
    status_progress(st);
    if (timeout_ms < 0) {
        status_block(e, st);
    } else if (timeout_ms > 0) {
        int64_t deadline = now_ns() + (int64_t)timeout_ms * 1000000;
        struct timespec until = to_timespec(deadline);
        while (st->code == KVFLUX_MORI_STATUS_IN_PROGRESS) {
            if (now_ns() >= deadline) {
                break;
            }
            pthread_cond_timedwait(&st->cv, &e->mu, &until);
            status_progress(st);
        }
    }
    int code = st->code;
    pthread_mutex_unlock(&e->mu);
    return code;
}

/* ================================================================================================ */
/*                                          the copy thread                                         */
/* ================================================================================================ */

static void *copy_thread(void *arg) {
    struct engine *e = arg;
    pthread_mutex_lock(&e->mu);
    for (;;) {
        while (e->head == NULL && !e->stop) {
            pthread_cond_wait(&e->work_cv, &e->mu);
        }
        if (e->stop) {
            break;
        }
        struct job *j = e->head;
        e->head = j->next;
        if (e->head == NULL) {
            e->tail = NULL;
        }
        pthread_mutex_unlock(&e->mu);

        pthread_rwlock_rdlock(&j->src->use);
        if (j->dst != j->src) {
            pthread_rwlock_rdlock(&j->dst->use);
        }
        int reachable = j->src->registered && j->dst->registered;
        if (reachable) {
            char *src = (char *)(uintptr_t)j->src->data;
            char *dst = (char *)(uintptr_t)j->dst->data;
            for (size_t i = 0; i < j->count; i++) {
                memmove(dst + j->dst_offsets[i], src + j->src_offsets[i], j->sizes[i]);
            }
        }
        if (j->dst != j->src) {
            pthread_rwlock_unlock(&j->dst->use);
        }
        pthread_rwlock_unlock(&j->src->use);

        pthread_mutex_lock(&e->mu);
        if (!reachable && j->status->fail_code == 0) {
            j->status->fail_code = KVFLUX_MORI_STATUS_ERR_NOT_FOUND;
            snprintf(j->status->fail_message, sizeof j->status->fail_message,
                     "XGMI: memory was deregistered before the batch's copy ran");
        }
        j->status->copied = 1;
        j->status->copied_ns = now_ns();
        pthread_cond_broadcast(&e->copy_cv);
        pthread_mutex_unlock(&e->mu);
        job_free(j);
        pthread_mutex_lock(&e->mu);
    }
    pthread_mutex_unlock(&e->mu);
    return NULL;
}

/* ================================================================================================ */
/*                                              library                                             */
/* ================================================================================================ */

int kvflux_mori_abi_version(uint32_t *out_version) {
    if (out_version == NULL) {
        return fail(KVFLUX_MORI_E_NULL_ARG, "kvflux_mori_abi_version: out_version is NULL");
    }
    *out_version = KVFLUX_MORI_ABI_VERSION;
    return KVFLUX_MORI_OK;
}

int kvflux_mori_implementation(char *buf, size_t cap, size_t *out_len) {
    return copy_out_string("native-sim", buf, cap, out_len, "kvflux_mori_implementation");
}

int kvflux_mori_last_error(char *buf, size_t cap, size_t *out_len) {
    size_t n = strlen(last_error);
    if (out_len != NULL) {
        *out_len = n;
    }
    if (buf != NULL && cap > 0) {
        size_t k = n < cap - 1 ? n : cap - 1;
        memcpy(buf, last_error, k);
        buf[k] = '\0';
    }
    return KVFLUX_MORI_OK;
}

int kvflux_sim_live_handles(void) {
    pthread_mutex_lock(&table_mu);
    int n = live_count;
    pthread_mutex_unlock(&table_mu);
    return n;
}

int kvflux_sim_now_ns(int64_t *out_ns) {
    if (out_ns == NULL) {
        return fail(KVFLUX_MORI_E_NULL_ARG, "kvflux_sim_now_ns: out_ns is NULL");
    }
    *out_ns = now_ns();
    return KVFLUX_MORI_OK;
}

/* ================================================================================================ */
/*                                              engine                                              */
/* ================================================================================================ */

int kvflux_mori_engine_create(const char *key, const char *host, uint16_t port, uint64_t *out_engine) {
    static const char *call = "kvflux_mori_engine_create";
    if (key == NULL || host == NULL || out_engine == NULL) {
        return fail(KVFLUX_MORI_E_NULL_ARG, "%s: %s is NULL", call,
                    key == NULL ? "key" : host == NULL ? "host" : "out_engine");
    }
    if (key[0] == '\0') {
        return fail(KVFLUX_MORI_E_INVALID_ARG, "%s: the engine key is empty; give each engine a unique key", call);
    }
    struct engine *e = calloc(1, sizeof *e);
    if (e == NULL || (e->key = strdup(key)) == NULL || (e->host = strdup(host)) == NULL) {
        if (e != NULL) {
            free(e->key);
        }
        free(e);
        return fail(KVFLUX_MORI_E_NO_MEMORY, "%s: out of memory", call);
    }
    obj_init(&e->o, K_ENGINE, NULL, engine_destroy_obj);
    e->port = port;
    atomic_init(&e->next_uid, 0);
    e->overhead_ns = KVFLUX_SIM_DEFAULT_BLOCK_OVERHEAD_NS;
    e->bytes_per_second = KVFLUX_SIM_DEFAULT_BYTES_PER_SECOND;
    pthread_mutex_init(&e->mu, NULL);
    pthread_cond_init(&e->work_cv, NULL);
    cond_init_monotonic(&e->copy_cv);
    atomic_fetch_add(&e->o.refs, 1);
    int rc = table_add(&e->o, out_engine);
    if (rc != KVFLUX_MORI_OK) {
        obj_put(&e->o);
    }
    return rc;
}

static void registry_remove(struct mem *m) {
    pthread_mutex_lock(&registry_mu);
    for (size_t i = 0; i < registry_count; i++) {
        if (registry[i] == m) {
            registry[i] = registry[--registry_count];
            break;
        }
    }
    pthread_mutex_unlock(&registry_mu);
}

/* Deregisters and drops one memory object taken out of the table. */
static void mem_release(struct mem *m) {
    if (m->local) {
        pthread_rwlock_wrlock(&m->use);
        m->registered = 0;
        pthread_rwlock_unlock(&m->use);
        registry_remove(m);
    }
    obj_put(&m->o);
}

int kvflux_mori_engine_destroy(uint64_t engine) {
    struct obj *o = table_remove(engine, K_ENGINE, "kvflux_mori_engine_destroy");
    if (o == NULL) {
        return KVFLUX_MORI_E_BAD_HANDLE;
    }
    struct engine *e = ENGINE(o);

    /* Take every handle the engine owns out of the table. */
    struct obj **owned = NULL;
    size_t owned_count = 0;
    pthread_mutex_lock(&table_mu);
    for (uint32_t i = 0; i < slot_count; i++) {
        if (slots[i].obj != NULL && slots[i].obj->owner == e) {
            struct obj **grown = realloc(owned, (owned_count + 1) * sizeof *owned);
            if (grown == NULL) {
                continue; /* left in the table; its owner reference keeps the engine memory alive */
            }
            owned = grown;
            owned[owned_count++] = slots[i].obj;
            slot_free(&slots[i]);
        }
    }
    pthread_mutex_unlock(&table_mu);

    /* Stop the copy thread; queued jobs are dropped. */
    pthread_mutex_lock(&e->mu);
    e->stop = 1;
    e->closed = 1;
    int started = e->started;
    pthread_cond_broadcast(&e->work_cv);
    pthread_cond_broadcast(&e->copy_cv);
    pthread_mutex_unlock(&e->mu);
    if (started) {
        pthread_join(e->worker, NULL);
    }
    struct job *j = e->head;
    e->head = e->tail = NULL;
    while (j != NULL) {
        struct job *next = j->next;
        job_free(j);
        j = next;
    }

    for (size_t i = 0; i < owned_count; i++) {
        if (owned[i]->kind == K_MEM) {
            mem_release(MEM(owned[i]));
        } else {
            obj_put(owned[i]);
        }
    }
    free(owned);
    obj_put(o);
    return KVFLUX_MORI_OK;
}

int kvflux_mori_engine_create_xgmi_backend(uint64_t engine, int32_t num_streams, int32_t num_events) {
    static const char *call = "kvflux_mori_engine_create_xgmi_backend";
    if (num_streams <= 0 || num_events <= 0) {
        return fail(KVFLUX_MORI_E_INVALID_ARG, "%s: numStreams (%d) and numEvents (%d) must be positive (MoRI's defaults are 64 and 64)",
                    call, num_streams, num_events);
    }
    struct obj *o = get(engine, K_ENGINE, call);
    if (o == NULL) {
        return KVFLUX_MORI_E_BAD_HANDLE;
    }
    pthread_mutex_lock(&ENGINE(o)->mu);
    ENGINE(o)->xgmi = 1;
    pthread_mutex_unlock(&ENGINE(o)->mu);
    obj_put(o);
    return KVFLUX_MORI_OK;
}

int kvflux_mori_engine_create_rdma_backend(uint64_t engine, int32_t qp_per_transfer, int32_t post_batch_size,
                                           int32_t num_worker_threads, uint32_t poll_cq_mode,
                                           int32_t enable_notification) {
    static const char *call = "kvflux_mori_engine_create_rdma_backend";
    (void)qp_per_transfer;
    (void)post_batch_size;
    (void)num_worker_threads;
    (void)enable_notification;
    struct obj *o = get(engine, K_ENGINE, call);
    if (o == NULL) {
        return KVFLUX_MORI_E_BAD_HANDLE;
    }
    obj_put(o);
    if (poll_cq_mode > 1) {
        return fail(KVFLUX_MORI_E_INVALID_ARG, "%s: pollCqMode %u is neither POLLING (0) nor EVENT (1)", call, poll_cq_mode);
    }
    return fail(KVFLUX_MORI_E_UNSUPPORTED,
                "%s: the simulator models MoRI's xGMI backend only; use kvflux_mori_engine_create_xgmi_backend, "
                "or the real MoRI shim (libkvflux_mori.so) for RDMA", call);
}

static void pack_engine_desc(mp_writer *w, const char *key, const char *host, uint16_t port) {
    char hostname[256] = "";
    gethostname(hostname, sizeof hostname - 1);
    mp_array(w, 6);
    mp_str(w, key);
    mp_str(w, hostname); /* nodeId: the simulator's node is its host */
    mp_str(w, hostname);
    mp_str(w, host);
    mp_int(w, port);
    mp_int(w, getpid());
}

int kvflux_mori_engine_desc_pack(uint64_t engine, uint8_t *buf, size_t cap, size_t *out_len) {
    static const char *call = "kvflux_mori_engine_desc_pack";
    struct obj *o = get(engine, K_ENGINE, call);
    if (o == NULL) {
        return KVFLUX_MORI_E_BAD_HANDLE;
    }
    mp_writer w = {0};
    pack_engine_desc(&w, ENGINE(o)->key, ENGINE(o)->host, ENGINE(o)->port);
    int rc = copy_out_bytes(&w, buf, cap, out_len, call);
    mp_writer_free(&w);
    obj_put(o);
    return rc;
}

/* Reads an EngineDesc's key; the other five fields are checked for type and dropped. */
static int unpack_engine_key(const uint8_t *packed, size_t len, char **key, const char *call) {
    if (packed == NULL) {
        return fail(KVFLUX_MORI_E_NULL_ARG, "%s: packed is NULL", call);
    }
    mp_reader r = {.data = packed, .len = len};
    uint32_t n;
    char *fields[4] = {NULL, NULL, NULL, NULL};
    int64_t ints[2];
    int ok = mp_read_array(&r, &n) == 0;
    for (uint32_t i = 0; ok && i < n; i++) {
        if (i < 4) {
            ok = mp_read_str(&r, &fields[i]) == 0;
        } else if (i < 6) {
            ok = mp_read_int(&r, &ints[i - 4]) == 0;
        } else {
            ok = mp_skip(&r) == 0;
        }
    }
    for (int i = 1; i < 4; i++) {
        free(fields[i]);
    }
    if (!ok) {
        free(fields[0]);
        return fail(KVFLUX_MORI_E_DECODE, "%s: not a packed EngineDesc [key, nodeId, hostname, host, port, pid]: %s",
                    call, r.error);
    }
    if (fields[0] == NULL || fields[0][0] == '\0') {
        free(fields[0]);
        return fail(KVFLUX_MORI_E_DECODE, "%s: the packed EngineDesc has no key", call);
    }
    *key = fields[0];
    return KVFLUX_MORI_OK;
}

/* Adds (register) or removes (deregister) a peer engine's key from the engine's known remotes. */
static int remote_engine(uint64_t engine, const uint8_t *packed, size_t len, int add, const char *call) {
    char *key = NULL;
    int rc = unpack_engine_key(packed, len, &key, call);
    if (rc != KVFLUX_MORI_OK) {
        return rc;
    }
    struct obj *o = get(engine, K_ENGINE, call);
    if (o == NULL) {
        free(key);
        return KVFLUX_MORI_E_BAD_HANDLE;
    }
    struct engine *e = ENGINE(o);
    pthread_mutex_lock(&e->mu);
    size_t found = e->remote_count;
    for (size_t i = 0; i < e->remote_count; i++) {
        if (strcmp(e->remotes[i], key) == 0) {
            found = i;
        }
    }
    if (!add && found < e->remote_count) {
        free(e->remotes[found]);
        e->remotes[found] = e->remotes[--e->remote_count];
    } else if (add && found == e->remote_count) {
        char **grown = realloc(e->remotes, (e->remote_count + 1) * sizeof *grown);
        if (grown == NULL) {
            rc = fail(KVFLUX_MORI_E_NO_MEMORY, "%s: out of memory", call);
        } else {
            e->remotes = grown;
            e->remotes[e->remote_count++] = key;
            key = NULL;
        }
    }
    pthread_mutex_unlock(&e->mu);
    free(key);
    obj_put(o);
    return rc;
}

int kvflux_mori_engine_register_remote(uint64_t engine, const uint8_t *packed, size_t len) {
    return remote_engine(engine, packed, len, 1, "kvflux_mori_engine_register_remote");
}

int kvflux_mori_engine_deregister_remote(uint64_t engine, const uint8_t *packed, size_t len) {
    return remote_engine(engine, packed, len, 0, "kvflux_mori_engine_deregister_remote");
}

int kvflux_mori_engine_allocate_uid(uint64_t engine, uint64_t *out_uid) {
    static const char *call = "kvflux_mori_engine_allocate_uid";
    if (out_uid == NULL) {
        return fail(KVFLUX_MORI_E_NULL_ARG, "%s: out_uid is NULL", call);
    }
    struct obj *o = get(engine, K_ENGINE, call);
    if (o == NULL) {
        return KVFLUX_MORI_E_BAD_HANDLE;
    }
    *out_uid = atomic_fetch_add(&ENGINE(o)->next_uid, 1);
    obj_put(o);
    return KVFLUX_MORI_OK;
}

int kvflux_sim_set_timing(uint64_t engine, uint64_t block_overhead_ns, uint64_t bytes_per_second) {
    static const char *call = "kvflux_sim_set_timing";
    if (bytes_per_second == 0) {
        return fail(KVFLUX_MORI_E_INVALID_ARG, "%s: bytes_per_second must be positive", call);
    }
    struct obj *o = get(engine, K_ENGINE, call);
    if (o == NULL) {
        return KVFLUX_MORI_E_BAD_HANDLE;
    }
    pthread_mutex_lock(&ENGINE(o)->mu);
    ENGINE(o)->overhead_ns = block_overhead_ns;
    ENGINE(o)->bytes_per_second = bytes_per_second;
    pthread_mutex_unlock(&ENGINE(o)->mu);
    obj_put(o);
    return KVFLUX_MORI_OK;
}

static int add_fault(uint64_t engine, uint32_t nth, int hang, int32_t code, const char *message, const char *call) {
    if (nth == 0) {
        return fail(KVFLUX_MORI_E_INVALID_ARG, "%s: nth counts batches from 1, got 0", call);
    }
    if (!hang && (code <= KVFLUX_MORI_STATUS_ERR_BEGIN || code > KVFLUX_MORI_STATUS_ERR_GPU_OP)) {
        return fail(KVFLUX_MORI_E_INVALID_ARG, "%s: code %d is not a MoRI failure code (11..15)", call, code);
    }
    struct obj *o = get(engine, K_ENGINE, call);
    if (o == NULL) {
        return KVFLUX_MORI_E_BAD_HANDLE;
    }
    struct engine *e = ENGINE(o);
    int rc = KVFLUX_MORI_OK;
    pthread_mutex_lock(&e->mu);
    if (e->fault_count == KVFLUX_SIM_MAX_FAULTS) {
        rc = fail(KVFLUX_MORI_E_INVALID_ARG, "%s: at most %d faults per engine", call, KVFLUX_SIM_MAX_FAULTS);
    } else {
        struct fault *f = &e->faults[e->fault_count++];
        f->nth = nth;
        f->hang = hang;
        f->code = code;
        snprintf(f->message, sizeof f->message, "%s", message != NULL ? message : "");
    }
    pthread_mutex_unlock(&e->mu);
    obj_put(o);
    return rc;
}

int kvflux_sim_fail_nth(uint64_t engine, uint32_t nth, int32_t code, const char *message) {
    return add_fault(engine, nth, 0, code, message, "kvflux_sim_fail_nth");
}

int kvflux_sim_hang_nth(uint64_t engine, uint32_t nth) {
    return add_fault(engine, nth, 1, 0, NULL, "kvflux_sim_hang_nth");
}

/* ================================================================================================ */
/*                                              memory                                              */
/* ================================================================================================ */

static struct mem *mem_new(struct engine *owner, int local) {
    struct mem *m = calloc(1, sizeof *m);
    if (m == NULL) {
        return NULL;
    }
    obj_init(&m->o, K_MEM, owner, mem_destroy_obj);
    m->local = local;
    pthread_rwlock_init(&m->use, NULL);
    m->device = -1;
    m->numa = -1;
    m->vpod = -1;
    return m;
}

int kvflux_mori_mem_register(uint64_t engine, void *data, uint64_t size, int32_t device, uint32_t location,
                             uint64_t *out_mem) {
    static const char *call = "kvflux_mori_mem_register";
    if (data == NULL || out_mem == NULL) {
        return fail(KVFLUX_MORI_E_NULL_ARG, "%s: %s is NULL", call, data == NULL ? "data" : "out_mem");
    }
    if (size == 0) {
        return fail(KVFLUX_MORI_E_INVALID_ARG, "%s: size is 0; register at least one byte", call);
    }
    if (location != KVFLUX_MORI_LOC_CPU && location != KVFLUX_MORI_LOC_GPU) {
        return fail(KVFLUX_MORI_E_INVALID_ARG, "%s: location %u is neither CPU (1) nor GPU (2)", call, location);
    }
    if (location == KVFLUX_MORI_LOC_GPU) {
        return fail(KVFLUX_MORI_E_UNSUPPORTED,
                    "%s: the simulator has no GPU; register host memory (location CPU, device -1)", call);
    }
    if (device < -1) {
        return fail(KVFLUX_MORI_E_INVALID_ARG, "%s: device %d is negative; use -1 for host memory", call, device);
    }
    struct obj *o = get(engine, K_ENGINE, call);
    if (o == NULL) {
        return KVFLUX_MORI_E_BAD_HANDLE;
    }
    struct engine *e = ENGINE(o);
    struct mem *m = mem_new(e, 1);
    if (m == NULL || (m->engine_key = strdup(e->key)) == NULL || (m->bus_id = strdup("")) == NULL ||
        (m->vpod_ppod = strdup("")) == NULL) {
        if (m != NULL) {
            atomic_fetch_add(&m->o.refs, 1);
            obj_put(&m->o);
        }
        obj_put(o);
        return fail(KVFLUX_MORI_E_NO_MEMORY, "%s: out of memory", call);
    }
    pthread_mutex_lock(&e->mu);
    m->id = e->next_mem_id++;
    pthread_mutex_unlock(&e->mu);
    m->device = device;
    m->data = (uint64_t)(uintptr_t)data;
    m->size = size;
    m->loc = location;
    m->registered = 1;

    pthread_mutex_lock(&registry_mu);
    int rc = KVFLUX_MORI_OK;
    if (registry_count == registry_cap) {
        size_t cap = registry_cap ? registry_cap * 2 : 32;
        struct mem **grown = realloc(registry, cap * sizeof *grown);
        if (grown == NULL) {
            rc = fail(KVFLUX_MORI_E_NO_MEMORY, "%s: out of memory", call);
        } else {
            registry = grown;
            registry_cap = cap;
        }
    }
    if (rc == KVFLUX_MORI_OK) {
        registry[registry_count++] = m;
    }
    pthread_mutex_unlock(&registry_mu);

    atomic_fetch_add(&m->o.refs, 1);
    if (rc == KVFLUX_MORI_OK) {
        rc = table_add(&m->o, out_mem);
        if (rc != KVFLUX_MORI_OK) {
            mem_release(m);
        }
    } else {
        obj_put(&m->o);
    }
    obj_put(o);
    return rc;
}

int kvflux_mori_mem_deregister(uint64_t mem) {
    struct obj *o = table_remove(mem, K_MEM, "kvflux_mori_mem_deregister");
    if (o == NULL) {
        return KVFLUX_MORI_E_BAD_HANDLE;
    }
    mem_release(MEM(o));
    return KVFLUX_MORI_OK;
}

int kvflux_mori_mem_pack(uint64_t mem, uint8_t *buf, size_t cap, size_t *out_len) {
    static const char *call = "kvflux_mori_mem_pack";
    struct obj *o = get(mem, K_MEM, call);
    if (o == NULL) {
        return KVFLUX_MORI_E_BAD_HANDLE;
    }
    struct mem *m = MEM(o);
    mp_writer w = {0};
    mp_array(&w, 15);
    mp_str(&w, m->engine_key);
    mp_uint(&w, m->id);
    mp_int(&w, m->device);
    mp_str(&w, m->bus_id);
    mp_uint(&w, m->data);
    mp_uint(&w, m->size);
    mp_uint(&w, m->loc);
    mp_bin(&w, m->ipc, IPC_HANDLE_SIZE);
    mp_int(&w, m->numa);
    mp_uint(&w, m->ipc_offset);
    mp_bin(&w, m->fabric, IPC_HANDLE_SIZE);
    mp_int(&w, m->vpod);
    mp_str(&w, m->vpod_ppod);
    mp_uint(&w, m->fabric_offset);
    mp_uint(&w, m->fabric_alloc_size);
    int rc = copy_out_bytes(&w, buf, cap, out_len, call);
    mp_writer_free(&w);
    obj_put(o);
    return rc;
}

/* Reads one MemoryDesc field by position; returns 0 or -1 with r->error set. */
static int read_mem_field(mp_reader *r, struct mem *m, uint32_t index) {
    int64_t s;
    uint64_t u;
    switch (index) {
    case 0: free(m->engine_key); m->engine_key = NULL; return mp_read_str(r, &m->engine_key);
    case 1: if (mp_read_uint(r, &u) != 0) return -1; m->id = (uint32_t)u; return 0;
    case 2: if (mp_read_int(r, &s) != 0) return -1; m->device = (int32_t)s; return 0;
    case 3: free(m->bus_id); m->bus_id = NULL; return mp_read_str(r, &m->bus_id);
    case 4: return mp_read_uint(r, &m->data);
    case 5: return mp_read_uint(r, &m->size);
    case 6: if (mp_read_uint(r, &u) != 0) return -1; m->loc = (uint32_t)u; return 0;
    case 7: return mp_read_fixed_bin(r, m->ipc, IPC_HANDLE_SIZE);
    case 8: if (mp_read_int(r, &s) != 0) return -1; m->numa = (int32_t)s; return 0;
    case 9: return mp_read_uint(r, &m->ipc_offset);
    case 10: return mp_read_fixed_bin(r, m->fabric, IPC_HANDLE_SIZE);
    case 11: if (mp_read_int(r, &s) != 0) return -1; m->vpod = (int32_t)s; return 0;
    case 12: free(m->vpod_ppod); m->vpod_ppod = NULL; return mp_read_str(r, &m->vpod_ppod);
    case 13: return mp_read_uint(r, &m->fabric_offset);
    case 14: return mp_read_uint(r, &m->fabric_alloc_size);
    default: return mp_skip(r);
    }
}

static const char *const MEM_FIELDS =
    "[engineKey, id, deviceId, deviceBusId, data, size, loc, ipcHandle, numaNode, ipcOffset, fabricHandle, "
    "vpodId, vpodPpodId, fabricOffset, fabricAllocSize]";

int kvflux_mori_mem_unpack(uint64_t engine, const uint8_t *packed, size_t len, uint64_t *out_mem) {
    static const char *call = "kvflux_mori_mem_unpack";
    if (packed == NULL || out_mem == NULL) {
        return fail(KVFLUX_MORI_E_NULL_ARG, "%s: %s is NULL", call, packed == NULL ? "packed" : "out_mem");
    }
    struct obj *o = get(engine, K_ENGINE, call);
    if (o == NULL) {
        return KVFLUX_MORI_E_BAD_HANDLE;
    }
    struct mem *m = mem_new(ENGINE(o), 0);
    obj_put(o);
    if (m == NULL) {
        return fail(KVFLUX_MORI_E_NO_MEMORY, "%s: out of memory", call);
    }
    atomic_fetch_add(&m->o.refs, 1);
    mp_reader r = {.data = packed, .len = len};
    uint32_t n;
    int ok = mp_read_array(&r, &n) == 0;
    for (uint32_t i = 0; ok && i < n; i++) {
        ok = read_mem_field(&r, m, i) == 0;
    }
    if (ok && m->engine_key == NULL) {
        ok = 0;
        snprintf(r.error, sizeof r.error, "the descriptor has no engineKey");
    }
    if (ok && ((m->bus_id == NULL && (m->bus_id = strdup("")) == NULL) ||
               (m->vpod_ppod == NULL && (m->vpod_ppod = strdup("")) == NULL))) {
        ok = 0;
        snprintf(r.error, sizeof r.error, "out of memory");
    }
    if (!ok) {
        obj_put(&m->o);
        return fail(KVFLUX_MORI_E_DECODE, "%s: not a packed MemoryDesc %s: %s", call, MEM_FIELDS, r.error);
    }
    int rc = table_add(&m->o, out_mem);
    if (rc != KVFLUX_MORI_OK) {
        obj_put(&m->o);
    }
    return rc;
}

int kvflux_mori_mem_query(uint64_t mem, uint32_t *out_id, uint64_t *out_size, int32_t *out_device,
                          uint32_t *out_location) {
    struct obj *o = get(mem, K_MEM, "kvflux_mori_mem_query");
    if (o == NULL) {
        return KVFLUX_MORI_E_BAD_HANDLE;
    }
    struct mem *m = MEM(o);
    if (out_id != NULL) *out_id = m->id;
    if (out_size != NULL) *out_size = m->size;
    if (out_device != NULL) *out_device = m->device;
    if (out_location != NULL) *out_location = m->loc;
    obj_put(o);
    return KVFLUX_MORI_OK;
}

/* ================================================================================================ */
/*                                             sessions                                             */
/* ================================================================================================ */

/* The live local registration a descriptor names (engine key, id, address, size), with a reference. */
static struct mem *resolve_registration(const struct mem *desc) {
    struct mem *found = NULL;
    pthread_mutex_lock(&registry_mu);
    for (size_t i = 0; i < registry_count; i++) {
        struct mem *m = registry[i];
        if (m->id == desc->id && m->data == desc->data && m->size == desc->size &&
            strcmp(m->engine_key, desc->engine_key) == 0) {
            found = m;
            atomic_fetch_add(&found->o.refs, 1);
            break;
        }
    }
    pthread_mutex_unlock(&registry_mu);
    return found;
}

int kvflux_mori_session_create(uint64_t engine, uint64_t local_mem, uint64_t remote_mem, uint64_t *out_session) {
    static const char *call = "kvflux_mori_session_create";
    if (out_session == NULL) {
        return fail(KVFLUX_MORI_E_NULL_ARG, "%s: out_session is NULL", call);
    }
    struct obj *eo = get(engine, K_ENGINE, call);
    if (eo == NULL) {
        return KVFLUX_MORI_E_BAD_HANDLE;
    }
    struct obj *lo = get(local_mem, K_MEM, call);
    struct obj *ro = lo != NULL ? get(remote_mem, K_MEM, call) : NULL;
    struct engine *e = ENGINE(eo);
    struct mem *target = NULL;
    int rc = KVFLUX_MORI_OK;
    if (lo == NULL || ro == NULL) {
        rc = KVFLUX_MORI_E_BAD_HANDLE;
    } else if (lo->owner != e || !MEM(lo)->local) {
        rc = fail(KVFLUX_MORI_E_INVALID_ARG, "%s: the local memory must be registered on this engine ('%s')", call, e->key);
    } else if (ro->owner != e) {
        rc = fail(KVFLUX_MORI_E_INVALID_ARG, "%s: the remote memory descriptor belongs to another engine; unpack the "
                  "peer's packed MemoryDesc on this engine", call);
    } else {
        pthread_mutex_lock(&e->mu);
        int xgmi = e->xgmi;
        int known = strcmp(MEM(ro)->engine_key, e->key) == 0;
        for (size_t i = 0; !known && i < e->remote_count; i++) {
            known = strcmp(e->remotes[i], MEM(ro)->engine_key) == 0;
        }
        pthread_mutex_unlock(&e->mu);
        if (!xgmi) {
            rc = fail(KVFLUX_MORI_E_BAD_STATE, "%s: engine '%s' has no backend; create an xGMI backend first", call, e->key);
        } else if (!known) {
            rc = fail(KVFLUX_MORI_E_NOT_FOUND, "%s: remote engine '%s' is not registered with engine '%s'; register its "
                      "packed EngineDesc first", call, MEM(ro)->engine_key, e->key);
        } else if (MEM(ro)->local) {
            target = MEM(ro);
            atomic_fetch_add(&target->o.refs, 1);
        } else if ((target = resolve_registration(MEM(ro))) == NULL) {
            rc = fail(KVFLUX_MORI_E_NOT_FOUND, "%s: memory %u of engine '%s' is not registered in this process; the "
                      "simulator reaches only memory registered by an engine of the same process", call,
                      MEM(ro)->id, MEM(ro)->engine_key);
        }
    }
    if (rc == KVFLUX_MORI_OK) {
        struct session *s = calloc(1, sizeof *s);
        if (s == NULL) {
            obj_put(&target->o);
            rc = fail(KVFLUX_MORI_E_NO_MEMORY, "%s: out of memory", call);
        } else {
            obj_init(&s->o, K_SESSION, e, session_destroy_obj);
            s->local = MEM(lo);
            atomic_fetch_add(&lo->refs, 1);
            s->target = target;
            atomic_fetch_add(&s->o.refs, 1);
            rc = table_add(&s->o, out_session);
            if (rc != KVFLUX_MORI_OK) {
                obj_put(&s->o);
            }
        }
    }
    obj_put(ro);
    obj_put(lo);
    obj_put(eo);
    return rc;
}

int kvflux_mori_session_destroy(uint64_t session) {
    struct obj *o = table_remove(session, K_SESSION, "kvflux_mori_session_destroy");
    if (o == NULL) {
        return KVFLUX_MORI_E_BAD_HANDLE;
    }
    obj_put(o);
    return KVFLUX_MORI_OK;
}

int kvflux_mori_session_allocate_uid(uint64_t session, uint64_t *out_uid) {
    static const char *call = "kvflux_mori_session_allocate_uid";
    if (out_uid == NULL) {
        return fail(KVFLUX_MORI_E_NULL_ARG, "%s: out_uid is NULL", call);
    }
    struct obj *o = get(session, K_SESSION, call);
    if (o == NULL) {
        return KVFLUX_MORI_E_BAD_HANDLE;
    }
    *out_uid = atomic_fetch_add(&o->owner->next_uid, 1);
    obj_put(o);
    return KVFLUX_MORI_OK;
}

static int check_blocks(const uint64_t *local_offsets, size_t n_local, const uint64_t *remote_offsets,
                        size_t n_remote, const uint64_t *sizes, size_t n_sizes, const struct session *s,
                        const char *call) {
    if (n_local != n_sizes || n_remote != n_sizes) {
        return fail(KVFLUX_MORI_E_INVALID_ARG, "%s: the arrays differ in length: %zu local offsets, %zu remote offsets, "
                    "%zu sizes; give one local offset, one remote offset and one size per block", call, n_local,
                    n_remote, n_sizes);
    }
    if (n_sizes > 0 && (local_offsets == NULL || remote_offsets == NULL || sizes == NULL)) {
        return fail(KVFLUX_MORI_E_NULL_ARG, "%s: %zu blocks but an offset or size array is NULL", call, n_sizes);
    }
    uint64_t local_size = s->local->size;
    uint64_t remote_size = s->target->size;
    for (size_t i = 0; i < n_sizes; i++) {
        if (sizes[i] == 0) {
            return fail(KVFLUX_MORI_E_INVALID_ARG, "%s: block %zu has size 0; every block copies at least one byte", call, i);
        }
        if (sizes[i] > local_size || local_offsets[i] > local_size - sizes[i]) {
            return fail(KVFLUX_MORI_E_INVALID_ARG, "%s: block %zu, [%llu, +%llu), runs past the local region's %llu bytes",
                        call, i, (unsigned long long)local_offsets[i], (unsigned long long)sizes[i],
                        (unsigned long long)local_size);
        }
        if (sizes[i] > remote_size || remote_offsets[i] > remote_size - sizes[i]) {
            return fail(KVFLUX_MORI_E_INVALID_ARG, "%s: block %zu, [%llu, +%llu), runs past the remote region's %llu bytes",
                        call, i, (unsigned long long)remote_offsets[i], (unsigned long long)sizes[i],
                        (unsigned long long)remote_size);
        }
    }
    return KVFLUX_MORI_OK;
}

static uint64_t *dup_array(const uint64_t *a, size_t n) {
    uint64_t *copy = malloc((n ? n : 1) * sizeof *copy);
    if (copy != NULL && n > 0) {
        memcpy(copy, a, n * sizeof *copy);
    }
    return copy;
}

static int batch(uint64_t session, const uint64_t *local_offsets, size_t n_local, const uint64_t *remote_offsets,
                 size_t n_remote, const uint64_t *sizes, size_t n_sizes, uint64_t *out_status, int is_read,
                 const char *call) {
    if (out_status == NULL) {
        return fail(KVFLUX_MORI_E_NULL_ARG, "%s: out_status is NULL", call);
    }
    struct obj *so = get(session, K_SESSION, call);
    if (so == NULL) {
        return KVFLUX_MORI_E_BAD_HANDLE;
    }
    struct session *s = SESSION(so);
    struct engine *e = so->owner;
    int rc = check_blocks(local_offsets, n_local, remote_offsets, n_remote, sizes, n_sizes, s, call);
    if (rc == KVFLUX_MORI_OK && (!s->local->registered || !s->target->registered)) {
        rc = fail(KVFLUX_MORI_E_BAD_STATE, "%s: the session's %s memory was deregistered; create a new session", call,
                  s->local->registered ? "remote" : "local");
    }
    struct status *st = NULL;
    struct job *j = NULL;
    if (rc == KVFLUX_MORI_OK) {
        st = calloc(1, sizeof *st);
        j = n_sizes > 0 ? calloc(1, sizeof *j) : NULL;
        if (j != NULL) {
            j->count = n_sizes;
            j->src_offsets = dup_array(is_read ? remote_offsets : local_offsets, n_sizes);
            j->dst_offsets = dup_array(is_read ? local_offsets : remote_offsets, n_sizes);
            j->sizes = dup_array(sizes, n_sizes);
        }
        if (st == NULL || (n_sizes > 0 && (j == NULL || !j->src_offsets || !j->dst_offsets || !j->sizes))) {
            job_discard(j);
            free(st);
            rc = fail(KVFLUX_MORI_E_NO_MEMORY, "%s: out of memory for a batch of %zu blocks", call, n_sizes);
        }
    }
    if (rc != KVFLUX_MORI_OK) {
        obj_put(so);
        return rc;
    }
    obj_init(&st->o, K_STATUS, e, status_destroy_obj);
    cond_init_monotonic(&st->cv);
    st->code = KVFLUX_MORI_STATUS_INIT;
    atomic_fetch_add(&st->o.refs, 1);

    uint64_t bytes = 0;
    for (size_t i = 0; i < n_sizes; i++) {
        bytes += sizes[i];
    }
    pthread_mutex_lock(&e->mu);
    if (e->closed) {
        status_update(st, KVFLUX_MORI_STATUS_ERR_BAD_STATE, "engine destroyed while the batch was posted");
        job_discard(j);
    } else if (n_sizes == 0) {
        st->code = KVFLUX_MORI_STATUS_SUCCESS; /* MoRI: an empty batch succeeds at once */
    } else {
        uint32_t nth = ++e->posted;
        int64_t now = now_ns();
        int64_t start = e->last_finish_ns > now ? e->last_finish_ns : now;
        double cost = (double)n_sizes * (double)e->overhead_ns + (double)bytes * 1e9 / (double)e->bytes_per_second;
        st->finish_ns = start + (int64_t)cost;
        e->last_finish_ns = st->finish_ns;
        st->code = KVFLUX_MORI_STATUS_IN_PROGRESS;
        int skip_copy = 0;
        for (size_t i = 0; i < e->fault_count; i++) {
            if (e->faults[i].nth == nth) {
                skip_copy = 1;
                if (e->faults[i].hang) {
                    st->hang = 1;
                } else {
                    st->fail_code = e->faults[i].code;
                    snprintf(st->fail_message, sizeof st->fail_message, "%s", e->faults[i].message);
                    st->copied = 1;
                }
            }
        }
        if (skip_copy) {
            job_discard(j);
        } else {
            j->status = st;
            atomic_fetch_add(&st->o.refs, 1);
            j->src = is_read ? s->target : s->local;
            j->dst = is_read ? s->local : s->target;
            atomic_fetch_add(&j->src->o.refs, 1);
            atomic_fetch_add(&j->dst->o.refs, 1);
            if (e->tail != NULL) {
                e->tail->next = j;
            } else {
                e->head = j;
            }
            e->tail = j;
            if (!e->started) {
                if (pthread_create(&e->worker, NULL, copy_thread, e) == 0) {
                    e->started = 1;
                } else {
                    status_update(st, KVFLUX_MORI_STATUS_ERR_BAD_STATE, "XGMI: could not start the copy thread");
                }
            }
            pthread_cond_signal(&e->work_cv);
        }
        status_progress(st); /* every submit queries its status once right after posting */
    }
    pthread_mutex_unlock(&e->mu);
    obj_put(so);

    rc = table_add(&st->o, out_status);
    if (rc != KVFLUX_MORI_OK) {
        obj_put(&st->o);
    }
    return rc;
}

int kvflux_mori_session_batch_write(uint64_t session, const uint64_t *local_offsets, size_t n_local,
                                    const uint64_t *remote_offsets, size_t n_remote, const uint64_t *sizes,
                                    size_t n_sizes, uint64_t transfer_uid, uint64_t *out_status) {
    (void)transfer_uid;
    return batch(session, local_offsets, n_local, remote_offsets, n_remote, sizes, n_sizes, out_status, 0,
                 "kvflux_mori_session_batch_write");
}

int kvflux_mori_session_batch_read(uint64_t session, const uint64_t *local_offsets, size_t n_local,
                                   const uint64_t *remote_offsets, size_t n_remote, const uint64_t *sizes,
                                   size_t n_sizes, uint64_t transfer_uid, uint64_t *out_status) {
    (void)transfer_uid;
    return batch(session, local_offsets, n_local, remote_offsets, n_remote, sizes, n_sizes, out_status, 1,
                 "kvflux_mori_session_batch_read");
}

/* ================================================================================================ */
/*                                             statuses                                             */
/* ================================================================================================ */

int kvflux_mori_status_code(uint64_t status) {
    struct obj *o = get(status, K_STATUS, "kvflux_mori_status_code");
    if (o == NULL) {
        return KVFLUX_MORI_E_BAD_HANDLE;
    }
    struct engine *e = o->owner;
    pthread_mutex_lock(&e->mu);
    status_progress(STATUS(o));
    int code = STATUS(o)->code;
    pthread_mutex_unlock(&e->mu);
    obj_put(o);
    return code;
}

int kvflux_mori_status_message(uint64_t status, char *buf, size_t cap, size_t *out_len) {
    static const char *call = "kvflux_mori_status_message";
    struct obj *o = get(status, K_STATUS, call);
    if (o == NULL) {
        return KVFLUX_MORI_E_BAD_HANDLE;
    }
    char message[sizeof STATUS(o)->message];
    pthread_mutex_lock(&o->owner->mu);
    memcpy(message, STATUS(o)->message, sizeof message);
    pthread_mutex_unlock(&o->owner->mu);
    obj_put(o);
    return copy_out_string(message, buf, cap, out_len, call);
}

int kvflux_mori_status_release(uint64_t status) {
    struct obj *o = table_remove(status, K_STATUS, "kvflux_mori_status_release");
    if (o == NULL) {
        return KVFLUX_MORI_E_BAD_HANDLE;
    }
    obj_put(o); /* a queued copy keeps its own reference until it ran */
    return KVFLUX_MORI_OK;
}

int kvflux_sim_status_finish_ns(uint64_t status, int64_t *out_ns) {
    static const char *call = "kvflux_sim_status_finish_ns";
    if (out_ns == NULL) {
        return fail(KVFLUX_MORI_E_NULL_ARG, "%s: out_ns is NULL", call);
    }
    struct obj *o = get(status, K_STATUS, call);
    if (o == NULL) {
        return KVFLUX_MORI_E_BAD_HANDLE;
    }
    pthread_mutex_lock(&o->owner->mu);
    struct status *st = STATUS(o);
    *out_ns = st->copied && st->copied_ns > st->finish_ns ? st->copied_ns : st->finish_ns;
    pthread_mutex_unlock(&o->owner->mu);
    obj_put(o);
    return KVFLUX_MORI_OK;
}

/* IOEngine::WaitAll, line by line, over resolved statuses (NULL entries skipped). */
static int wait_all(struct status **st, size_t count, int timeout_ms) {
    if (count == 0) {
        return KVFLUX_MORI_STATUS_SUCCESS;
    }
    if (timeout_ms == 0) {
        int any_in_progress = 0;
        for (size_t i = 0; i < count; i++) {
            if (st[i] == NULL) continue;
            int rc = status_wait_for(st[i], 0);
            if (rc == KVFLUX_MORI_STATUS_IN_PROGRESS) {
                any_in_progress = 1;
                continue;
            }
            if (rc != KVFLUX_MORI_STATUS_SUCCESS) return rc;
        }
        return any_in_progress ? KVFLUX_MORI_STATUS_IN_PROGRESS : KVFLUX_MORI_STATUS_SUCCESS;
    }
    int first_error = KVFLUX_MORI_STATUS_SUCCESS;
    if (timeout_ms < 0) {
        for (size_t i = 0; i < count; i++) {
            if (st[i] == NULL) continue;
            int rc = status_wait_for(st[i], -1);
            if (rc != KVFLUX_MORI_STATUS_SUCCESS && first_error == KVFLUX_MORI_STATUS_SUCCESS) first_error = rc;
        }
        return first_error;
    }
    int64_t deadline = now_ns() + (int64_t)timeout_ms * 1000000;
    for (size_t i = 0; i < count; i++) {
        if (st[i] == NULL) continue;
        int64_t now = now_ns();
        if (now >= deadline) {
            return first_error != KVFLUX_MORI_STATUS_SUCCESS ? first_error : KVFLUX_MORI_STATUS_IN_PROGRESS;
        }
        int64_t remaining_ms = (deadline - now) / 1000000; /* truncated, as duration_cast does */
        int rc = status_wait_for(st[i], remaining_ms > INT_MAX ? INT_MAX : (int)remaining_ms);
        if (rc == KVFLUX_MORI_STATUS_IN_PROGRESS) {
            return first_error != KVFLUX_MORI_STATUS_SUCCESS ? first_error : KVFLUX_MORI_STATUS_IN_PROGRESS;
        }
        if (rc != KVFLUX_MORI_STATUS_SUCCESS && first_error == KVFLUX_MORI_STATUS_SUCCESS) first_error = rc;
    }
    return first_error;
}

int kvflux_mori_wait_all(uint64_t engine, const uint64_t *statuses, size_t count, int32_t timeout_ms,
                         int32_t *out_code) {
    static const char *call = "kvflux_mori_wait_all";
    if (out_code == NULL || (count > 0 && statuses == NULL)) {
        return fail(KVFLUX_MORI_E_NULL_ARG, "%s: %s is NULL", call, out_code == NULL ? "out_code" : "statuses");
    }
    struct obj *eo = get(engine, K_ENGINE, call);
    if (eo == NULL) {
        return KVFLUX_MORI_E_BAD_HANDLE;
    }
    struct status **resolved = calloc(count ? count : 1, sizeof *resolved);
    int rc = resolved == NULL ? fail(KVFLUX_MORI_E_NO_MEMORY, "%s: out of memory for %zu statuses", call, count)
                              : KVFLUX_MORI_OK;
    for (size_t i = 0; rc == KVFLUX_MORI_OK && i < count; i++) {
        if (statuses[i] == 0) {
            continue; /* MoRI skips null entries */
        }
        struct obj *o = get(statuses[i], K_STATUS, call);
        if (o == NULL) {
            char inner[sizeof last_error];
            snprintf(inner, sizeof inner, "%s", last_error);
            rc = fail(KVFLUX_MORI_E_BAD_HANDLE, "status %zu of %zu: %s", i, count, inner);
        } else {
            resolved[i] = STATUS(o);
        }
    }
    if (rc == KVFLUX_MORI_OK) {
        *out_code = wait_all(resolved, count, timeout_ms);
    }
    for (size_t i = 0; resolved != NULL && i < count; i++) {
        if (resolved[i] != NULL) {
            obj_put(&resolved[i]->o);
        }
    }
    free(resolved);
    obj_put(eo);
    return rc;
}
