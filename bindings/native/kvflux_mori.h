/*
 * kvflux_mori.h - a small, stable C ABI over MoRI IO.
 *
 * MoRI IO (namespace mori::io) has a C++ API only. kvflux reaches it from Java through Panama FFM, so
 * it binds to this header instead. Two libraries implement it:
 *   - libkvflux_mori.so       over the real MoRI (bindings/native/mori, built with CMake);
 *   - libkvflux_mori_sim.so   a simulator of MoRI's xGMI completion model (bindings/native/sim), built
 *                             by the Maven build and shipped inside the jar.
 *
 * Rules every function follows:
 *   - it returns an int: 0 (KVFLUX_MORI_OK) on success, a negative KVFLUX_MORI_E_* code on failure,
 *     and on failure sets a thread-local text that kvflux_mori_last_error() returns;
 *   - no C++ exception ever crosses this ABI;
 *   - handles are opaque 64-bit values; 0 is never a valid handle; a released handle, or a handle of
 *     another kind, is reported as KVFLUX_MORI_E_BAD_HANDLE, never dereferenced;
 *   - arrays come with their lengths; lengths that disagree, offsets or sizes past a registered
 *     region, and unknown enum values are KVFLUX_MORI_E_INVALID_ARG.
 *
 * Values of MoRI's enums (BackendType, MemoryLocationType, StatusCode, PollCqMode) are passed as their
 * uint32 numbers, unchanged.
 */
#ifndef KVFLUX_MORI_H
#define KVFLUX_MORI_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define KVFLUX_MORI_ABI_VERSION 1

/* The library exports these functions only; both implementations build with hidden visibility. */
#if defined(__GNUC__)
#define KVFLUX_MORI_API __attribute__((visibility("default")))
#else
#define KVFLUX_MORI_API
#endif

/* ---- return codes ------------------------------------------------------------------------------ */
#define KVFLUX_MORI_OK 0
#define KVFLUX_MORI_E_NULL_ARG (-1)         /* a required pointer argument is NULL */
#define KVFLUX_MORI_E_BAD_HANDLE (-2)       /* handle is 0, released, or of another kind */
#define KVFLUX_MORI_E_INVALID_ARG (-3)      /* lengths disagree, out of range, unknown enum value */
#define KVFLUX_MORI_E_BUFFER_TOO_SMALL (-4) /* output buffer too small; *out_len holds the size needed */
#define KVFLUX_MORI_E_DECODE (-5)           /* bytes are not a descriptor in MoRI's msgpack layout */
#define KVFLUX_MORI_E_NOT_FOUND (-6)        /* remote engine or memory unknown to this engine */
#define KVFLUX_MORI_E_BAD_STATE (-7)        /* call not valid now (no backend yet, region deregistered) */
#define KVFLUX_MORI_E_NO_MEMORY (-8)        /* allocation failed */
#define KVFLUX_MORI_E_BACKEND (-9)          /* MoRI raised an error; the last-error text carries it */
#define KVFLUX_MORI_E_UNSUPPORTED (-10)     /* not available in this implementation */

/* ---- MoRI's enums (numbers as in mori/io/enum.hpp) ----------------------------------------------- */
#define KVFLUX_MORI_BACKEND_XGMI 1u
#define KVFLUX_MORI_BACKEND_RDMA 2u

#define KVFLUX_MORI_LOC_CPU 1u
#define KVFLUX_MORI_LOC_GPU 2u

#define KVFLUX_MORI_STATUS_SUCCESS 0
#define KVFLUX_MORI_STATUS_INIT 1
#define KVFLUX_MORI_STATUS_IN_PROGRESS 2
#define KVFLUX_MORI_STATUS_ERR_BEGIN 10
#define KVFLUX_MORI_STATUS_ERR_INVALID_ARGS 11
#define KVFLUX_MORI_STATUS_ERR_NOT_FOUND 12
#define KVFLUX_MORI_STATUS_ERR_RDMA_OP 13
#define KVFLUX_MORI_STATUS_ERR_BAD_STATE 14
#define KVFLUX_MORI_STATUS_ERR_GPU_OP 15

/* ---- library ----------------------------------------------------------------------------------- */

/* Writes KVFLUX_MORI_ABI_VERSION of the library into *out_version. */
KVFLUX_MORI_API int kvflux_mori_abi_version(uint32_t *out_version);

/*
 * Writes the implementation's name ("mori" or "native-sim"), NUL-terminated, into buf.
 * If cap is too small, returns KVFLUX_MORI_E_BUFFER_TOO_SMALL; *out_len is always the length without NUL.
 */
KVFLUX_MORI_API int kvflux_mori_implementation(char *buf, size_t cap, size_t *out_len);

/*
 * Copies this thread's last error text, NUL-terminated and truncated to cap, into buf; *out_len is
 * the full length without NUL. Empty when the last failing call on this thread set none.
 */
KVFLUX_MORI_API int kvflux_mori_last_error(char *buf, size_t cap, size_t *out_len);

/* ---- engine ------------------------------------------------------------------------------------ */

/* An IOEngine with the given key and out-of-band TCP host / port. */
KVFLUX_MORI_API int kvflux_mori_engine_create(const char *key, const char *host, uint16_t port, uint64_t *out_engine);

/*
 * Destroys the engine and everything still open on it: statuses (in-flight ones are waited for first,
 * except on the simulator, which drops them), sessions, memory registrations and unpacked descriptors.
 * Their handles become invalid.
 */
KVFLUX_MORI_API int kvflux_mori_engine_destroy(uint64_t engine);

/* XgmiBackendConfig(numStreams, numEvents); MoRI's defaults are 64 and 64. Both must be positive. */
KVFLUX_MORI_API int kvflux_mori_engine_create_xgmi_backend(uint64_t engine, int32_t num_streams, int32_t num_events);

/*
 * RdmaBackendConfig(qpPerTransfer, postBatchSize, numWorkerThreads, pollCqMode, enableNotification);
 * MoRI's defaults are 1, -1, 1, POLLING (0), 1.
 */
KVFLUX_MORI_API int kvflux_mori_engine_create_rdma_backend(uint64_t engine, int32_t qp_per_transfer,
                                           int32_t post_batch_size, int32_t num_worker_threads,
                                           uint32_t poll_cq_mode, int32_t enable_notification);

/* The engine's EngineDesc, packed as MoRI packs it (msgpack array of 6). Two-call pattern via out_len. */
KVFLUX_MORI_API int kvflux_mori_engine_desc_pack(uint64_t engine, uint8_t *buf, size_t cap, size_t *out_len);

/* Unpacks a peer's EngineDesc and registers it (IOEngine::RegisterRemoteEngine). */
KVFLUX_MORI_API int kvflux_mori_engine_register_remote(uint64_t engine, const uint8_t *packed, size_t len);

/* Unpacks a peer's EngineDesc and deregisters it. */
KVFLUX_MORI_API int kvflux_mori_engine_deregister_remote(uint64_t engine, const uint8_t *packed, size_t len);

/* IOEngine::AllocateTransferUniqueId. */
KVFLUX_MORI_API int kvflux_mori_engine_allocate_uid(uint64_t engine, uint64_t *out_uid);

/* ---- memory ------------------------------------------------------------------------------------ */

/*
 * Registers size bytes at data on device (-1 for host memory) and location (KVFLUX_MORI_LOC_*),
 * returning a memory descriptor handle. size must be positive and data non-NULL.
 */
KVFLUX_MORI_API int kvflux_mori_mem_register(uint64_t engine, void *data, uint64_t size, int32_t device,
                             uint32_t location, uint64_t *out_mem);

/*
 * Releases a memory descriptor handle. A registration made here is deregistered from its engine
 * (IOEngine::DeregisterMemory); a descriptor from kvflux_mori_mem_unpack is only dropped.
 */
KVFLUX_MORI_API int kvflux_mori_mem_deregister(uint64_t mem);

/* The descriptor's MemoryDesc, packed as MoRI packs it (msgpack array of 15). Two-call via out_len. */
KVFLUX_MORI_API int kvflux_mori_mem_pack(uint64_t mem, uint8_t *buf, size_t cap, size_t *out_len);

/* Unpacks a peer's MemoryDesc into a descriptor handle owned by engine (a remote memory). */
KVFLUX_MORI_API int kvflux_mori_mem_unpack(uint64_t engine, const uint8_t *packed, size_t len, uint64_t *out_mem);

/* The descriptor's id, size in bytes, device and location. Any output pointer may be NULL. */
KVFLUX_MORI_API int kvflux_mori_mem_query(uint64_t mem, uint32_t *out_id, uint64_t *out_size, int32_t *out_device,
                          uint32_t *out_location);

/* ---- sessions and transfers ------------------------------------------------------------------- */

/*
 * IOEngine::CreateSession(local, remote): local must be registered on engine; remote must be a
 * descriptor of a remote engine that engine knows (kvflux_mori_engine_register_remote) or its own.
 */
KVFLUX_MORI_API int kvflux_mori_session_create(uint64_t engine, uint64_t local_mem, uint64_t remote_mem,
                               uint64_t *out_session);

KVFLUX_MORI_API int kvflux_mori_session_destroy(uint64_t session);

/* IOEngineSession::AllocateTransferUniqueId. */
KVFLUX_MORI_API int kvflux_mori_session_allocate_uid(uint64_t session, uint64_t *out_uid);

/*
 * IOEngineSession::BatchWrite: copies block i, sizes[i] bytes, from local_offsets[i] in the local
 * region to remote_offsets[i] in the remote region, as one batch with one status. The three lengths
 * must be equal; every block must lie inside both registered regions. The status has been queried
 * once after posting, as MoRI does; release it with kvflux_mori_status_release.
 */
KVFLUX_MORI_API int kvflux_mori_session_batch_write(uint64_t session, const uint64_t *local_offsets, size_t n_local,
                                    const uint64_t *remote_offsets, size_t n_remote,
                                    const uint64_t *sizes, size_t n_sizes, uint64_t transfer_uid,
                                    uint64_t *out_status);

/* IOEngineSession::BatchRead: the same from the remote region into the local one. */
KVFLUX_MORI_API int kvflux_mori_session_batch_read(uint64_t session, const uint64_t *local_offsets, size_t n_local,
                                   const uint64_t *remote_offsets, size_t n_remote,
                                   const uint64_t *sizes, size_t n_sizes, uint64_t transfer_uid,
                                   uint64_t *out_status);

/* ---- statuses ---------------------------------------------------------------------------------- */

/*
 * TransferStatus::Code(): queries the backend (which may complete the status) and returns the MoRI
 * status code (>= 0), or a negative KVFLUX_MORI_E_* code for a bad handle. Never blocks; cheap.
 */
KVFLUX_MORI_API int kvflux_mori_status_code(uint64_t status);

/* TransferStatus::Message(), NUL-terminated into buf; two-call via out_len. */
KVFLUX_MORI_API int kvflux_mori_status_message(uint64_t status, char *buf, size_t cap, size_t *out_len);

/*
 * Releases a status. A status still in flight is kept by the library until its copy is over (so the
 * backend never touches freed memory), but its handle is invalid at once.
 */
KVFLUX_MORI_API int kvflux_mori_status_release(uint64_t status);

/*
 * IOEngine::WaitAll over count status handles, with MoRI's semantics: count 0 is SUCCESS; a 0 handle
 * is skipped; timeout_ms == 0 polls each once; < 0 blocks until all are terminal; > 0 waits them in
 * order against one deadline and yields IN_PROGRESS if one is still in flight at the deadline, a
 * failure taking precedence. The MoRI status code is written to *out_code. Blocks the calling thread.
 */
KVFLUX_MORI_API int kvflux_mori_wait_all(uint64_t engine, const uint64_t *statuses, size_t count, int32_t timeout_ms,
                         int32_t *out_code);

/* ---- push completion ------------------------------------------------------------------------ */

/*
 * What an engine does with the batches it posts from now on (kvflux_mori_engine_set_push):
 *   OFF    nothing beyond MoRI's own model: a status completes when it is queried after its copies end;
 *   TIMES  it also records when each batch's copies ended (kvflux_mori_status_copy_end_ns), completing nothing;
 *   ON     it records that time, completes the status as soon as the copies end, and queues it once for
 *          kvflux_mori_push_take, so that a waiter needs no poll.
 * Over the real MoRI both TIMES and ON need kvflux's patch to MoRI's xGMI backend (a host function queued
 * behind each batch's event); the shim then drives the completion from one thread of its own, never from the
 * GPU runtime's.
 */
#define KVFLUX_MORI_PUSH_OFF 0u
#define KVFLUX_MORI_PUSH_TIMES 1u
#define KVFLUX_MORI_PUSH_ON 2u

/* One pushed completion. */
typedef struct kvflux_mori_push {
    uint64_t status;     /* the status handle (a released status's push is dropped, never handed out) */
    int32_t code;        /* its terminal MoRI status code: SUCCESS or a failure */
    int32_t reserved;    /* 0 */
    int64_t copy_end_ns; /* CLOCK_MONOTONIC nanoseconds at which the batch's copies ended */
} kvflux_mori_push;

/*
 * Sets what the engine does with the batches it posts from now on (KVFLUX_MORI_PUSH_*). A batch keeps the
 * mode it was posted with. KVFLUX_MORI_E_UNSUPPORTED for TIMES or ON when the library cannot know when a
 * copy ends (a MoRI without kvflux's patch); OFF always succeeds.
 */
KVFLUX_MORI_API int kvflux_mori_engine_set_push(uint64_t engine, uint32_t mode);

/*
 * Takes up to cap pushed completions of every engine of the process, in the order they completed, into out;
 * *out_count is how many. If none is queued, waits up to timeout_ms for one (0: does not wait; < 0: waits
 * until one comes). Each status posted with KVFLUX_MORI_PUSH_ON is queued exactly once, when it becomes
 * terminal, unless it is terminal when posted (an empty batch, a batch refused at once) or never ends.
 * Meant for one notification thread per process.
 */
KVFLUX_MORI_API int kvflux_mori_push_take(kvflux_mori_push *out, size_t cap, int32_t timeout_ms, size_t *out_count);

/*
 * One pushed completion and when it passed each stage on its way out of the library, on CLOCK_MONOTONIC in
 * nanoseconds (0 for a stage this library does not have): what a caller needs to tell where a push's lag goes.
 */
typedef struct kvflux_mori_push_stages {
    kvflux_mori_push push;
    int64_t signalled_ns; /* a thread of the library took the copies' end from the GPU runtime's callback thread */
    int64_t queued_ns;    /* the status was found terminal and queued for take */
    int64_t taken_ns;     /* kvflux_mori_push_take_stages handed it out */
} kvflux_mori_push_stages;

/*
 * kvflux_mori_push_take with each completion's stages. Both calls take from the one queue of the process.
 */
KVFLUX_MORI_API int kvflux_mori_push_take_stages(kvflux_mori_push_stages *out, size_t cap, int32_t timeout_ms,
                                                 size_t *out_count);

/*
 * When the status's copies ended, on CLOCK_MONOTONIC, in nanoseconds, for a batch posted with
 * KVFLUX_MORI_PUSH_TIMES or ON. KVFLUX_MORI_E_BAD_STATE while they have not ended, or when the batch was
 * posted with OFF (only the simulator knows then: it models the time).
 */
KVFLUX_MORI_API int kvflux_mori_status_copy_end_ns(uint64_t status, int64_t *out_ns);

#ifdef __cplusplus
}
#endif

#endif /* KVFLUX_MORI_H */
