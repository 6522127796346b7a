/*
 * kvflux_mori_sim.h - controls that only the simulator of kvflux_mori.h has.
 *
 * The simulator implements kvflux_mori.h with MoRI's xGMI completion model: a batch's copy is done by
 * a copy thread (one per engine, batches in post order) and is modelled to finish at
 *
 *     finish = max(post time, previous batch's finish) + blocks * block_overhead + bytes / bandwidth
 *
 * A status becomes terminal only when something queries it after that time and after the copy thread
 * has really copied its bytes; nothing ever notifies a waiter. The defaults (12.5 us per block,
 * 50 GB/s) put the last of 118 batches of 128 blocks of 32 KiB, posted back to back, 0.199 s after the
 * first post: the figure measured for that geometry on MI355X over xGMI.
 */
#ifndef KVFLUX_MORI_SIM_H
#define KVFLUX_MORI_SIM_H

#include <stdint.h>

#include "../kvflux_mori.h"

#ifdef __cplusplus
extern "C" {
#endif

#define KVFLUX_SIM_DEFAULT_BLOCK_OVERHEAD_NS 12500ull
#define KVFLUX_SIM_DEFAULT_BYTES_PER_SECOND 50000000000ull
#define KVFLUX_SIM_MAX_FAULTS 16

/* Number of handles of every kind (engines, memory, sessions, statuses) not yet released: >= 0. */
KVFLUX_MORI_API int kvflux_sim_live_handles(void);

/* Sets the engine's timing model; bytes_per_second must be positive. Applies to later posts. */
KVFLUX_MORI_API int kvflux_sim_set_timing(uint64_t engine, uint64_t block_overhead_ns, uint64_t bytes_per_second);

/*
 * Makes the nth batch posted on this engine (1-based, counted from the engine's creation) fail with
 * code (a MoRI failure code, 11..15) and message, at its modelled finish time; its bytes are not copied.
 */
KVFLUX_MORI_API int kvflux_sim_fail_nth(uint64_t engine, uint32_t nth, int32_t code, const char *message);

#define KVFLUX_SIM_FAULT_FAIL 0
#define KVFLUX_SIM_FAULT_HANG 1
#define KVFLUX_SIM_FAULT_SLOW 2

/*
 * A fault on every batch whose number (1-based) is a multiple of every: KVFLUX_SIM_FAULT_FAIL fails it with code
 * and message, KVFLUX_SIM_FAULT_HANG makes it never complete, KVFLUX_SIM_FAULT_SLOW copies it on time but lets
 * it succeed only slow_ns after its modelled finish. Counts against KVFLUX_SIM_MAX_FAULTS.
 */
KVFLUX_MORI_API int kvflux_sim_fault_every(uint64_t engine, uint32_t every, int32_t kind, int32_t code, int64_t slow_ns,
                                           const char *message);

/* Makes the nth batch posted on this engine never complete: it stays IN_PROGRESS and copies nothing. */
KVFLUX_MORI_API int kvflux_sim_hang_nth(uint64_t engine, uint32_t nth);

/*
 * When the status's copy finished, on CLOCK_MONOTONIC, in nanoseconds: the modelled finish time, or the
 * time the copy thread really finished the bytes if that was later (from then on a query completes it).
 */
KVFLUX_MORI_API int kvflux_sim_status_finish_ns(uint64_t status, int64_t *out_ns);

/* CLOCK_MONOTONIC now, in nanoseconds (the simulator's clock). */
KVFLUX_MORI_API int kvflux_sim_now_ns(int64_t *out_ns);

/*
 * Allocates size zeroed bytes of host memory that a peer engine in another process can reach, as xGMI
 * reaches a peer GPU through an IPC handle: a registration inside it packs an IPC handle naming it, and
 * a session of another process whose remote descriptor carries that handle maps it (see sim_share.c).
 * Free it with kvflux_sim_host_free after deregistering what was registered in it.
 */
KVFLUX_MORI_API int kvflux_sim_host_alloc(uint64_t size, void **out_ptr);
KVFLUX_MORI_API int kvflux_sim_host_free(void *ptr);

/* How many peer processes' memories are mapped into this one for sessions: >= 0. */
KVFLUX_MORI_API int kvflux_sim_open_mappings(void);

#ifdef __cplusplus
}
#endif

#endif /* KVFLUX_MORI_SIM_H */
