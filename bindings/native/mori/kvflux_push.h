// Push completion in the shim over the real MoRI (kvflux_push.cpp): the hook kvflux's patch adds to MoRI's xGMI
// backend records when each armed batch's copies ended and wakes the caller blocked in kvflux_mori_push_take (or,
// when none is, a notification thread of the shim's own), which queries the status (legal there, unlike on the GPU
// runtime's callback thread) and hands its completion out. Internal to libkvflux_mori.so.
#ifndef KVFLUX_PUSH_H
#define KVFLUX_PUSH_H

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>

#include "kvflux_mori.h"
#include "mori/io/common.hpp"

namespace kvflux::push {

// Sets MoRI's completion hook once; false when this MoRI has none (built without kvflux's patch) or its GPU
// runtime cannot queue host functions. Then only KVFLUX_MORI_PUSH_OFF is possible.
bool Enable();

// Arms a batch about to be posted with mode TIMES or ON: key is its TransferStatus (used as a key only, never
// dereferenced here), handle its status handle. query drives the status on the notification thread and returns
// its MoRI code, -1 when the status is gone (released, its engine destroyed), or -2 to be asked again soon.
void Arm(const mori::io::TransferStatus* key, uint64_t handle, uint32_t mode, std::function<int()> query);

// Takes a TransferStatus that nobody will query again (its copies over and finalized, or never posted) and frees
// it. An armed one whose hook has not run yet is kept until it has (or for 10 s at most), so that no batch posted
// later gets its address while the hook still names it; a completion not yet taken is dropped. Every
// TransferStatus the shim frees goes through here.
void Retire(std::unique_ptr<mori::io::TransferStatus> status);

// kvflux_mori_push_take_stages (kvflux_mori_push_take keeps the push of each).
int Take(kvflux_mori_push_stages* out, size_t cap, int32_t timeoutMs, size_t* outCount);

// When an armed batch's copies ended (CLOCK_MONOTONIC ns), if its hook has run.
bool CopyEnd(const mori::io::TransferStatus* key, int64_t* outNs);

}  // namespace kvflux::push

#endif  // KVFLUX_PUSH_H
