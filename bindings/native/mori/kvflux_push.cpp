// Push completion over the real MoRI: see kvflux_push.h.
//
// Three parties and their locks:
//   - the GPU runtime's callback thread runs OnCopiesEnded (the hook): it takes signalMu only, appends the batch's
//     key and the time, and wakes the notifier; it never calls the runtime and never touches the status;
//   - the notifier thread (kvflux-push) takes the signals, records each armed batch's copy end and, for ON, calls
//     the batch's query outside every lock of this file, then queues the completion under mu;
//   - the ABI's callers arm, disarm, take and ask for copy ends under mu.
// A batch whose hook never runs (a launch the runtime refused, a lost signal) is queried by a sweep every 100 ms
// once it has been armed that long, so a push is late then, never missing.
#include "kvflux_push.h"

#include <time.h>

#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

namespace kvflux::push {
namespace {

using mori::io::TransferStatus;

constexpr auto kSweepEvery = std::chrono::milliseconds(100);
constexpr int64_t kSweepAfterNs = 100'000'000;
constexpr auto kRetryEvery = std::chrono::milliseconds(1);

int64_t NowNs() {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

bool Terminal(int code) { return code == KVFLUX_MORI_STATUS_SUCCESS || code > KVFLUX_MORI_STATUS_ERR_BEGIN; }

struct Armed {
  uint64_t handle;
  uint32_t mode;
  std::function<int()> query;
  int64_t armedNs;
  int64_t copyEndNs{0};  // 0: the hook has not run
  bool queued{false};
};

struct Signal {
  const TransferStatus* key;
  int64_t ns;
};

std::mutex mu;  // armed, ready
std::condition_variable readyCv;
std::unordered_map<const TransferStatus*, Armed> armed;
std::unordered_set<const TransferStatus*> retry;  // queried after their hook and still in flight: ask again soon
std::deque<kvflux_mori_push> ready;

std::mutex signalMu;  // signals (the runtime's thread takes only this one)
std::condition_variable signalCv;
std::vector<Signal> signals;

std::once_flag started;
bool hooked = false;

void OnCopiesEnded(TransferStatus* key) {
  int64_t ns = NowNs();
  {
    std::lock_guard<std::mutex> lock(signalMu);
    signals.push_back({key, ns});
  }
  signalCv.notify_one();
}

// Queries one armed ON batch (outside mu) and queues it if it is terminal.
void Drive(const TransferStatus* key) {
  std::function<int()> query;
  uint64_t handle;
  {
    std::lock_guard<std::mutex> lock(mu);
    auto it = armed.find(key);
    if (it == armed.end() || it->second.mode != KVFLUX_MORI_PUSH_ON || it->second.queued) return;
    query = it->second.query;
    handle = it->second.handle;
  }
  int code = query();
  std::lock_guard<std::mutex> lock(mu);
  auto it = armed.find(key);
  if (it == armed.end() || it->second.handle != handle || it->second.queued) return;
  retry.erase(key);
  if (code < 0) {
    armed.erase(it);  // gone: nobody can take its push
  } else if (Terminal(code)) {
    it->second.queued = true;
    int64_t end = it->second.copyEndNs != 0 ? it->second.copyEndNs : NowNs();
    ready.push_back(kvflux_mori_push{handle, code, 0, end});
    readyCv.notify_all();
  } else {
    retry.insert(key);
  }
}

void Notify() {
  auto lastSweep = std::chrono::steady_clock::now();
  std::vector<Signal> taken;
  std::vector<const TransferStatus*> drive;
  for (;;) {
    bool retrying;
    {
      std::lock_guard<std::mutex> lock(mu);
      retrying = !retry.empty();
    }
    {
      std::unique_lock<std::mutex> lock(signalMu);
      signalCv.wait_for(lock, retrying ? kRetryEvery : kSweepEvery, [] { return !signals.empty(); });
      taken.swap(signals);
    }
    drive.clear();
    bool sweep = std::chrono::steady_clock::now() - lastSweep >= kSweepEvery;
    {
      std::lock_guard<std::mutex> lock(mu);
      for (const Signal& s : taken) {
        auto it = armed.find(s.key);
        if (it == armed.end()) continue;
        if (it->second.copyEndNs == 0) it->second.copyEndNs = s.ns;
        drive.push_back(s.key);
      }
      drive.insert(drive.end(), retry.begin(), retry.end());
      if (sweep) {
        int64_t now = NowNs();
        for (auto& [key, a] : armed) {
          if (a.mode == KVFLUX_MORI_PUSH_ON && !a.queued && a.copyEndNs == 0 && now - a.armedNs >= kSweepAfterNs) {
            drive.push_back(key);
          }
        }
      }
    }
    taken.clear();
    if (sweep) lastSweep = std::chrono::steady_clock::now();
    for (const TransferStatus* key : drive) Drive(key);
  }
}

}  // namespace

bool Enable() {
#ifdef MORI_IO_XGMI_COMPLETION_HOOK
  std::call_once(started, [] {
    hooked = mori::io::SetXgmiCompletionHook(OnCopiesEnded);
    if (hooked) std::thread(Notify).detach();
  });
  return hooked;
#else
  return false;
#endif
}

void Arm(const TransferStatus* key, uint64_t handle, uint32_t mode, std::function<int()> query) {
  std::lock_guard<std::mutex> lock(mu);
  armed[key] = Armed{handle, mode, std::move(query), NowNs()};
}

void Disarm(const TransferStatus* key) {
  std::function<int()> dropped;  // destroyed after the lock: it may hold the last reference to a status
  std::lock_guard<std::mutex> lock(mu);
  auto it = armed.find(key);
  if (it == armed.end()) return;
  uint64_t handle = it->second.handle;
  dropped.swap(it->second.query);
  armed.erase(it);
  retry.erase(key);
  for (auto r = ready.begin(); r != ready.end(); ++r) {
    if (r->status == handle) {
      ready.erase(r);
      break;
    }
  }
}

int Take(kvflux_mori_push* out, size_t cap, int32_t timeoutMs, size_t* outCount) {
  std::unique_lock<std::mutex> lock(mu);
  auto any = [] { return !ready.empty(); };
  if (timeoutMs < 0) {
    readyCv.wait(lock, any);
  } else if (timeoutMs > 0) {
    readyCv.wait_for(lock, std::chrono::milliseconds(timeoutMs), any);
  }
  size_t n = 0;
  while (n < cap && !ready.empty()) {
    out[n++] = ready.front();
    ready.pop_front();
  }
  *outCount = n;
  return KVFLUX_MORI_OK;
}

bool CopyEnd(const TransferStatus* key, int64_t* outNs) {
  std::lock_guard<std::mutex> lock(mu);
  auto it = armed.find(key);
  if (it == armed.end() || it->second.copyEndNs == 0) return false;
  *outNs = it->second.copyEndNs;
  return true;
}

}  // namespace kvflux::push
