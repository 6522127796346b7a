// Push completion over the real MoRI: see kvflux_push.h.
//
// Three parties and their locks:
//   - the GPU runtime's callback thread runs OnCopiesEnded (the hook): it takes signalMu only, appends the batch's
//     key and the time, and wakes one thread: the caller blocked in Take if there is one (so the completion needs
//     one wake-up on its way to Java), the notifier thread (kvflux-push) otherwise; it never calls the runtime and
//     never touches the status;
//   - whichever of the two takes the signals records each armed batch's copy end and, for ON, calls the batch's
//     query outside every lock of this file, then queues the completion under mu;
//   - the ABI's callers arm, disarm, take and ask for copy ends under mu.
// The notifier also asks again, every 1 ms, for batches whose hook ran while their status was still in flight,
// and queries by a sweep every 100 ms a batch whose hook never ran (a launch the runtime refused, a lost signal)
// once it has been armed that long, so a push is late then, never missing; it then carries no copy-end time.
// The hook names a batch by its TransferStatus's address, so no TransferStatus is freed while its hook may still
// run (Retire keeps it until then): an address is never shared by two armed batches.
// Lock order: signalMu is never taken while mu is held.
#include "kvflux_push.h"

#include <time.h>

#include <chrono>
#include <algorithm>
#include <atomic>
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
constexpr int64_t kKeepAtMostNs = 10'000'000'000;

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
  int64_t copyEndNs{0};    // 0: the hook has not run
  int64_t signalledNs{0};  // when a thread of the shim took the hook's signal
  bool queued{false};
  std::unique_ptr<TransferStatus> kept;  // retired before its hook ran: freed once it has
  int64_t retiredNs{0};
};

struct Signal {
  const TransferStatus* key;
  int64_t ns;
};

// Never destroyed: the notifier thread, the runtime's callback thread and a Java thread in Take may still use it
// while the process exits, and destroying a condition variable that a thread waits on blocks the exit.
struct State {
  std::mutex mu;  // armed, retry, ready
  std::unordered_map<const TransferStatus*, Armed> armed;
  std::unordered_set<const TransferStatus*> retry;  // queried after their hook and still in flight: ask again soon
  std::deque<kvflux_mori_push_stages> ready;
  std::atomic<bool> readyPending{false};  // ready is not empty (read under signalMu by a waiting taker)

  std::mutex signalMu;  // signals and takers (the runtime's thread takes only this one)
  std::condition_variable notifierCv;
  std::condition_variable takeCv;
  std::vector<Signal> signals;
  int takers{0};             // callers waiting in Take
  bool retryAdded{false};    // a taker put a batch into retry: the notifier paces it (1 ms), so wake it
};
State& state = *new State();
std::mutex& mu = state.mu;
std::unordered_map<const TransferStatus*, Armed>& armed = state.armed;
std::unordered_set<const TransferStatus*>& retry = state.retry;
std::deque<kvflux_mori_push_stages>& ready = state.ready;
std::atomic<bool>& readyPending = state.readyPending;
std::mutex& signalMu = state.signalMu;
std::condition_variable& notifierCv = state.notifierCv;
std::condition_variable& takeCv = state.takeCv;
std::vector<Signal>& signals = state.signals;

std::once_flag started;
bool hooked = false;
thread_local bool onNotifier = false;  // this thread is the notifier

void OnCopiesEnded(TransferStatus* key) {
  int64_t ns = NowNs();
  bool taker;
  {
    std::lock_guard<std::mutex> lock(signalMu);
    signals.push_back({key, ns});
    taker = state.takers > 0;
  }
  (taker ? takeCv : notifierCv).notify_one();
}

// Wakes a caller waiting in Take for what was just queued (mu not held).
void WakeTaker() {
  { std::lock_guard<std::mutex> lock(signalMu); }  // a taker that saw nothing queued is waiting by now
  takeCv.notify_one();
}

// Tells the notifier that a taker put a batch into retry (mu not held): otherwise it would sleep out its 100 ms.
void WakeNotifier() {
  {
    std::lock_guard<std::mutex> lock(signalMu);
    state.retryAdded = true;
  }
  notifierCv.notify_one();
}

// Queries one armed ON batch (outside mu) and queues it if it is terminal; true if it queued it.
bool Drive(const TransferStatus* key) {
  std::function<int()> query;
  uint64_t handle;
  {
    std::lock_guard<std::mutex> lock(mu);
    auto it = armed.find(key);
    if (it == armed.end() || it->second.mode != KVFLUX_MORI_PUSH_ON || it->second.queued || it->second.kept ||
        !it->second.query) {
      return false;
    }
    query = it->second.query;
    handle = it->second.handle;
  }
  int code = query();
  query = nullptr;  // before the lock: it may hold the last reference to a status
  bool retried = false;
  bool queued = false;
  {
    std::lock_guard<std::mutex> lock(mu);
    auto it = armed.find(key);
    if (it == armed.end() || it->second.handle != handle || it->second.queued || it->second.kept) return false;
    retry.erase(key);
    if (code == -1) {
      it->second.query = nullptr;  // gone: nobody can take its push; Retire frees it
    } else if (code == -2) {
      retry.insert(key);
      retried = true;
    } else if (Terminal(code)) {
      it->second.queued = true;
      // copy end and signalled 0: its hook has not run (a sweep found it)
      ready.push_back(kvflux_mori_push_stages{kvflux_mori_push{handle, code, 0, it->second.copyEndNs},
                                              it->second.signalledNs, NowNs(), 0});
      readyPending.store(true);
      queued = true;
    } else if (it->second.copyEndNs != 0) {
      retry.insert(key);  // its hook ran, yet it is in flight: ask again soon; otherwise the sweep asks
      retried = true;
    }
  }
  if (retried && !onNotifier) WakeNotifier();
  return queued;
}

// Takes the hook's signals: records each armed batch's copy end, frees a retired one whose hook was pending, and
// drives the others on this thread. True if it queued a completion.
bool Signalled(std::vector<Signal>& taken) {
  std::vector<const TransferStatus*> drive;
  std::vector<std::unique_ptr<TransferStatus>> freed;
  int64_t now = NowNs();
  {
    std::lock_guard<std::mutex> lock(mu);
    for (const Signal& s : taken) {
      auto it = armed.find(s.key);
      if (it == armed.end()) continue;
      if (it->second.kept) {  // retired while its hook was pending: now it may go
        freed.push_back(std::move(it->second.kept));
        armed.erase(it);
        continue;
      }
      if (it->second.copyEndNs == 0) {
        it->second.copyEndNs = s.ns;
        it->second.signalledNs = now;
      }
      drive.push_back(s.key);
    }
  }
  taken.clear();
  freed.clear();  // outside the lock
  bool queued = false;
  for (const TransferStatus* key : drive) queued |= Drive(key);
  return queued;
}

void Notify() {
  onNotifier = true;
  auto lastSweep = std::chrono::steady_clock::now();
  std::vector<Signal> taken;
  std::vector<const TransferStatus*> drive;
  std::vector<std::unique_ptr<TransferStatus>> freed;
  for (;;) {
    bool retrying;
    {
      std::lock_guard<std::mutex> lock(mu);
      retrying = !retry.empty();
    }
    {
      std::unique_lock<std::mutex> lock(signalMu);
      notifierCv.wait_for(lock, retrying ? kRetryEvery : kSweepEvery,
                          [] { return !signals.empty() || state.retryAdded; });
      state.retryAdded = false;  // the retry set is asked below, this round
      taken.swap(signals);  // a taker that comes later finds none: they are this thread's now
    }
    bool queued = Signalled(taken);
    drive.clear();
    freed.clear();
    bool sweep = std::chrono::steady_clock::now() - lastSweep >= kSweepEvery;
    {
      std::lock_guard<std::mutex> lock(mu);
      drive.insert(drive.end(), retry.begin(), retry.end());
      if (sweep) {
        int64_t now = NowNs();
        for (auto it = armed.begin(); it != armed.end();) {
          Armed& a = it->second;
          if (a.kept && now - a.retiredNs >= kKeepAtMostNs) {  // a hook that never ran (a post MoRI refused)
            freed.push_back(std::move(a.kept));
            it = armed.erase(it);
            continue;
          }
          if (!a.kept && a.mode == KVFLUX_MORI_PUSH_ON && !a.queued && a.copyEndNs == 0 &&
              now - a.armedNs >= kSweepAfterNs) {
            drive.push_back(it->first);
          }
          ++it;
        }
      }
    }
    freed.clear();  // outside the lock
    if (sweep) lastSweep = std::chrono::steady_clock::now();
    for (const TransferStatus* key : drive) queued |= Drive(key);
    if (queued) WakeTaker();
  }
}

// Moves up to cap queued completions into out, stamped as taken now; mu not held. Wakes another taker for what it
// leaves queued.
size_t PopReady(kvflux_mori_push_stages* out, size_t cap) {
  size_t n = 0;
  bool more;
  {
    std::lock_guard<std::mutex> lock(mu);
    int64_t now = ready.empty() ? 0 : NowNs();
    while (n < cap && !ready.empty()) {
      out[n] = ready.front();
      out[n++].taken_ns = now;
      ready.pop_front();
    }
    more = !ready.empty();
    readyPending.store(more);
  }
  if (more && n > 0) WakeTaker();
  return n;
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

void Retire(std::unique_ptr<TransferStatus> status) {
  std::unique_ptr<TransferStatus> freed;  // destroyed after the lock
  std::function<int()> dropped;           // likewise: it may hold the last reference to a status
  std::lock_guard<std::mutex> lock(mu);
  auto it = status ? armed.find(status.get()) : armed.end();
  if (it == armed.end()) {
    freed = std::move(status);
    return;
  }
  uint64_t handle = it->second.handle;
  dropped.swap(it->second.query);
  retry.erase(it->first);
  for (auto r = ready.begin(); r != ready.end(); ++r) {  // linear, but only in what is not taken yet
    if (r->push.status == handle) {
      ready.erase(r);
      break;
    }
  }
  if (it->second.copyEndNs != 0) {
    armed.erase(it);
    freed = std::move(status);
  } else {
    it->second.kept = std::move(status);
    it->second.retiredNs = NowNs();
  }
}

int Take(kvflux_mori_push_stages* out, size_t cap, int32_t timeoutMs, size_t* outCount) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(std::max<int32_t>(timeoutMs, 0));
  std::vector<Signal> taken;
  for (;;) {
    {
      std::lock_guard<std::mutex> lock(signalMu);
      taken.swap(signals);
    }
    if (!taken.empty()) Signalled(taken);  // the hook's signals, driven on this thread: no hand-over
    size_t n = PopReady(out, cap);
    if (n > 0 || timeoutMs == 0) {
      *outCount = n;
      return KVFLUX_MORI_OK;
    }
    std::unique_lock<std::mutex> lock(signalMu);
    auto any = [] { return !signals.empty() || readyPending.load(); };
    ++state.takers;
    bool woken = true;
    if (timeoutMs < 0) {
      takeCv.wait(lock, any);
    } else {
      woken = takeCv.wait_until(lock, deadline, any);
    }
    --state.takers;
    if (!woken) {
      lock.unlock();
      *outCount = PopReady(out, cap);
      return KVFLUX_MORI_OK;
    }
  }
}

bool CopyEnd(const TransferStatus* key, int64_t* outNs) {
  std::lock_guard<std::mutex> lock(mu);
  auto it = armed.find(key);
  if (it == armed.end() || it->second.copyEndNs == 0 || it->second.kept) return false;
  *outNs = it->second.copyEndNs;
  return true;
}

}  // namespace kvflux::push
