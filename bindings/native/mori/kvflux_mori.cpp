// kvflux_mori.h over the real MoRI IO (mori::io::IOEngine, IOEngineSession, TransferStatus).
//
// Every entry point runs inside Guard(), which turns any C++ exception into a return code and a
// thread-local error text, so none crosses the C ABI. Handles are 64-bit values that are never reused
// (a counter shifted left by 8, the low byte naming the kind), looked up in one registry, so a released
// or foreign handle is reported, not dereferenced. Descriptors are packed and unpacked with MoRI's own
// msgpack definitions (MSGPACK_DEFINE on EngineDesc and MemoryDesc), so the layout is MoRI's by
// construction.
#include "kvflux_mori.h"
#include "kvflux_mori_checks.h"
#include "kvflux_push.h"

#include <hip/hip_runtime_api.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <exception>
#include <memory>
#include <msgpack.hpp>
#include <mutex>
#include <new>
#include <optional>
#include <shared_mutex>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "mori/io/backend.hpp"
#include "mori/io/common.hpp"
#include "mori/io/engine.hpp"
#include "mori/io/enum.hpp"
#include "rdma_preflight.h"

namespace {

using mori::io::BackendType;
using mori::io::EngineDesc;
using mori::io::IOEngine;
using mori::io::IOEngineConfig;
using mori::io::IOEngineSession;
using mori::io::MemoryDesc;
using mori::io::MemoryLocationType;
using mori::io::PollCqMode;
using mori::io::RdmaBackendConfig;
using mori::io::StatusCode;
using mori::io::TransferStatus;
using mori::io::XgmiBackendConfig;

thread_local std::string lastError;

int Fail(int code, std::string message) {
  lastError = std::move(message);
  return code;
}

// Runs body and maps every exception to a code; body returns an int code itself.
template <typename Body>
int Guard(const char* call, Body&& body) noexcept {
  try {
    return body();
  } catch (const std::bad_alloc&) {
    return Fail(KVFLUX_MORI_E_NO_MEMORY, std::string(call) + ": out of memory");
  } catch (const msgpack::type_error& e) {
    return Fail(KVFLUX_MORI_E_DECODE,
                std::string(call) + ": not a descriptor in MoRI's msgpack layout (" + e.what() + ")");
  } catch (const msgpack::unpack_error& e) {
    return Fail(KVFLUX_MORI_E_DECODE, std::string(call) + ": not valid msgpack (" + e.what() + ")");
  } catch (const std::exception& e) {
    return Fail(KVFLUX_MORI_E_BACKEND, std::string(call) + ": MoRI raised: " + e.what());
  } catch (...) {
    return Fail(KVFLUX_MORI_E_BACKEND, std::string(call) + ": MoRI raised an exception of unknown type");
  }
}

// ---- objects behind handles ----------------------------------------------------------------------

enum Kind : uint8_t { kEngine = 1, kMem = 2, kSession = 3, kStatus = 4 };

const char* KindName(int kind) {
  switch (kind) {
    case kEngine: return "engine";
    case kMem: return "memory";
    case kSession: return "session";
    case kStatus: return "status";
    default: return "unknown";
  }
}

struct Object {
  explicit Object(Kind k) : kind(k) {}
  virtual ~Object() = default;
  const Kind kind;
};

struct Engine : Object {
  Engine() : Object(kEngine) {}
  std::shared_mutex life;  // shared by every call on the engine's objects, exclusive while destroying
  bool alive{true};
  std::string key;
  std::unique_ptr<IOEngine> engine;
  std::mutex orphansMu;
  std::vector<std::unique_ptr<TransferStatus>> orphans;  // released while in flight
  std::atomic<uint32_t> pushMode{KVFLUX_MORI_PUSH_OFF};  // for batches posted from now on

  // Frees released statuses that have become terminal (each query drives their progress).
  void ReapOrphans() {
    std::lock_guard<std::mutex> lock(orphansMu);
    std::vector<std::unique_ptr<TransferStatus>> kept;
    for (auto& status : orphans) {
      StatusCode code = status->Code();
      if (code == StatusCode::INIT || code == StatusCode::IN_PROGRESS) {
        kept.push_back(std::move(status));
      } else {
        kvflux::push::Retire(std::move(status));  // held on while its completion hook may still name it
      }
    }
    orphans.swap(kept);
  }
};

struct Owned : Object {
  Owned(Kind k, std::shared_ptr<Engine> e) : Object(k), engine(std::move(e)) {}
  std::shared_ptr<Engine> engine;
};

struct Mem : Owned {
  Mem(std::shared_ptr<Engine> e, MemoryDesc d, bool l) : Owned(kMem, std::move(e)), desc(std::move(d)), local(l) {}
  MemoryDesc desc;
  bool local;
};

struct Session : Owned {
  Session(std::shared_ptr<Engine> e, IOEngineSession s, uint64_t ls, uint64_t rs)
      : Owned(kSession, std::move(e)), session(std::move(s)), localSize(ls), remoteSize(rs) {}
  IOEngineSession session;
  uint64_t localSize;
  uint64_t remoteSize;
};

struct Status : Owned {
  explicit Status(std::shared_ptr<Engine> e)
      : Owned(kStatus, std::move(e)), status(std::make_unique<TransferStatus>()) {}
  ~Status() override {
    if (armed && status) kvflux::push::Retire(std::move(status));
  }
  std::mutex mu;  // held while status is queried by the push notifier or moved to the orphans
  std::unique_ptr<TransferStatus> status;
  bool armed{false};  // posted with a push mode other than OFF (kvflux_push.h)
};

// What the push notifier calls to drive an armed status: its code, or -1 once it is gone. Never blocks on an
// engine being destroyed (that engine's statuses are gone, or about to be).
std::function<int()> QueryOf(const std::shared_ptr<Status>& status) {
  std::weak_ptr<Status> weak = status;
  return [weak]() -> int {
    std::shared_ptr<Status> s = weak.lock();
    if (!s) return -1;
    std::shared_lock<std::shared_mutex> life(s->engine->life, std::try_to_lock);
    if (!life.owns_lock()) return -2;  // being destroyed (Retire then ends it), or a spurious failure: ask again
    if (!s->engine->alive) return -1;
    std::lock_guard<std::mutex> lock(s->mu);
    return s->status ? static_cast<int>(s->status->Code()) : -1;
  };
}

class Registry {
 public:
  uint64_t Add(std::shared_ptr<Object> object) {
    std::lock_guard<std::mutex> lock(mu_);
    uint64_t handle = (++counter_ << 8) | object->kind;
    objects_.emplace(handle, std::move(object));
    return handle;
  }

  template <typename T>
  std::shared_ptr<T> Get(uint64_t handle, Kind kind, const char* call) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = (handle & 0xff) == kind ? objects_.find(handle) : objects_.end();
    if (it == objects_.end()) {
      BadHandle(handle, kind, call);
      return nullptr;
    }
    return std::static_pointer_cast<T>(it->second);
  }

  template <typename T>
  std::shared_ptr<T> Remove(uint64_t handle, Kind kind, const char* call) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = (handle & 0xff) == kind ? objects_.find(handle) : objects_.end();
    if (it == objects_.end()) {
      BadHandle(handle, kind, call);
      return nullptr;
    }
    auto object = std::static_pointer_cast<T>(it->second);
    objects_.erase(it);
    return object;
  }

  // How many handles are open, of every kind: 0 after everything was released.
  size_t Size() {
    std::lock_guard<std::mutex> lock(mu_);
    return objects_.size();
  }

  // Takes every object owned by engine out of the registry.
  std::vector<std::shared_ptr<Object>> RemoveOwnedBy(const Engine* engine) {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<std::shared_ptr<Object>> owned;
    for (auto it = objects_.begin(); it != objects_.end();) {
      auto* child = dynamic_cast<Owned*>(it->second.get());
      if (child != nullptr && child->engine.get() == engine) {
        owned.push_back(std::move(it->second));
        it = objects_.erase(it);
      } else {
        ++it;
      }
    }
    return owned;
  }

 private:
  static void BadHandle(uint64_t handle, Kind kind, const char* call) {
    char hex[32];
    snprintf(hex, sizeof hex, "0x%llx", static_cast<unsigned long long>(handle));
    if (handle == 0) {
      Fail(KVFLUX_MORI_E_BAD_HANDLE, std::string(call) + ": the " + KindName(kind) + " handle is 0 (null)");
    } else if ((handle & 0xff) != kind) {
      Fail(KVFLUX_MORI_E_BAD_HANDLE, std::string(call) + ": handle " + hex + " is of kind '" +
                                         KindName(static_cast<int>(handle & 0xff)) + "', not '" +
                                         KindName(kind) + "'");
    } else {
      Fail(KVFLUX_MORI_E_BAD_HANDLE,
           std::string(call) + ": " + KindName(kind) + " handle " + hex + " was released or never issued");
    }
  }

  std::mutex mu_;
  uint64_t counter_{0};
  std::unordered_map<uint64_t, std::shared_ptr<Object>> objects_;
};

Registry& Handles() {
  static Registry* registry = new Registry();  // never destroyed: safe during process exit
  return *registry;
}

// RdmaPreflight (rdma_preflight.cpp) as this ABI's result: KVFLUX_MORI_E_UNSUPPORTED with its reason
// where MoRI would end the process, else KVFLUX_MORI_OK.
int CheckRdmaBackend(const char* call, const char* ibClassDir, const char* smiLibrary) {
  std::optional<std::string> refused = kvflux::RdmaPreflight(call, ibClassDir, smiLibrary);
  return refused ? Fail(KVFLUX_MORI_E_UNSUPPORTED, std::move(*refused)) : KVFLUX_MORI_OK;
}

// Holds an engine's life lock (shared) for one call; fails if the engine was destroyed meanwhile.
struct Alive {
  explicit Alive(Engine& e) : lock(e.life), ok(e.alive) {}
  std::shared_lock<std::shared_mutex> lock;
  bool ok;
};

int EngineGone(const char* call) {
  return Fail(KVFLUX_MORI_E_BAD_HANDLE, std::string(call) + ": the engine was destroyed");
}

int NullArg(const char* call, const char* what) {
  return Fail(KVFLUX_MORI_E_NULL_ARG, std::string(call) + ": " + what + " is NULL");
}

// A refusal of one of kvflux_mori_checks.h's checks (rc, why) as this thread's last error.
int Refused(int rc, const char* why) { return rc == KVFLUX_MORI_OK ? rc : Fail(rc, why); }

// The simulator accepts a NULL out_len when the text fits; the shim has always asked for it first.
int CopyOut(const std::string& text, char* buf, size_t cap, size_t* outLen, const char* call) {
  if (outLen == nullptr) return NullArg(call, "out_len");
  char why[KVFLUX_MORI_CHECK_WHY_CAP];
  return Refused(kvflux_mori_copy_out_string(text.data(), text.size(), buf, cap, outLen, call, why, sizeof why), why);
}

int CopyOutBytes(const msgpack::sbuffer& bytes, uint8_t* buf, size_t cap, size_t* outLen, const char* call) {
  char why[KVFLUX_MORI_CHECK_WHY_CAP];
  return Refused(kvflux_mori_copy_out_bytes(bytes.data(), bytes.size(), buf, cap, outLen, call, why, sizeof why), why);
}

template <typename T>
T Unpack(const uint8_t* packed, size_t len) {
  msgpack::object_handle handle = msgpack::unpack(reinterpret_cast<const char*>(packed), len);
  return handle.get().as<T>();
}

int Batch(uint64_t sessionHandle, const uint64_t* localOffsets, size_t nLocal, const uint64_t* remoteOffsets,
          size_t nRemote, const uint64_t* sizes, size_t nSizes, uint64_t uid, uint64_t* outStatus, bool isRead,
          const char* call) {
  return Guard(call, [&]() -> int {
    if (outStatus == nullptr) return NullArg(call, "out_status");
    auto s = Handles().Get<Session>(sessionHandle, kSession, call);
    if (!s) return KVFLUX_MORI_E_BAD_HANDLE;
    char why[KVFLUX_MORI_CHECK_WHY_CAP];
    int rc = Refused(kvflux_mori_check_blocks(localOffsets, nLocal, remoteOffsets, nRemote, sizes, nSizes,
                                              s->localSize, s->remoteSize, call, why, sizeof why),
                     why);
    if (rc != KVFLUX_MORI_OK) return rc;
    Alive alive(*s->engine);
    if (!alive.ok) return EngineGone(call);
    s->engine->ReapOrphans();
    mori::io::SizeVec local(localOffsets, localOffsets + nSizes);
    mori::io::SizeVec remote(remoteOffsets, remoteOffsets + nSizes);
    mori::io::SizeVec size(sizes, sizes + nSizes);
    auto status = std::make_shared<Status>(s->engine);
    uint32_t mode = s->engine->pushMode.load();
    uint64_t handle = 0;
    if (mode != KVFLUX_MORI_PUSH_OFF) {
      // Armed before the post: the batch's hook may run before BatchWrite returns.
      handle = Handles().Add(status);
      status->armed = true;
      kvflux::push::Arm(status->status.get(), handle, mode, QueryOf(status));
    }
    try {
      if (isRead) {
        s->session.BatchRead(local, remote, size, status->status.get(), uid);
      } else {
        s->session.BatchWrite(local, remote, size, status->status.get(), uid);
      }
    } catch (...) {
      if (handle != 0) Handles().Remove<Status>(handle, kStatus, call);
      throw;
    }
    *outStatus = handle != 0 ? handle : Handles().Add(status);
    return KVFLUX_MORI_OK;
  });
}

}  // namespace

// ================================================================================================
//                                            the C ABI
// ================================================================================================

extern "C" {

int kvflux_mori_abi_version(uint32_t* out_version) {
  if (out_version == nullptr) return NullArg("kvflux_mori_abi_version", "out_version");
  *out_version = KVFLUX_MORI_ABI_VERSION;
  return KVFLUX_MORI_OK;
}

int kvflux_mori_implementation(char* buf, size_t cap, size_t* out_len) {
  return Guard("kvflux_mori_implementation",
               [&] { return CopyOut("mori", buf, cap, out_len, "kvflux_mori_implementation"); });
}

int kvflux_mori_last_error(char* buf, size_t cap, size_t* out_len) {
  if (out_len != nullptr) *out_len = lastError.size();
  if (buf != nullptr && cap > 0) {
    size_t n = std::min(lastError.size(), cap - 1);
    lastError.copy(buf, n);
    buf[n] = '\0';
  }
  return KVFLUX_MORI_OK;
}

int kvflux_mori_engine_create(const char* key, const char* host, uint16_t port, uint64_t* out_engine) {
  static const char* call = "kvflux_mori_engine_create";
  return Guard(call, [&]() -> int {
    if (key == nullptr || host == nullptr || out_engine == nullptr) {
      return NullArg(call, key == nullptr ? "key" : host == nullptr ? "host" : "out_engine");
    }
    if (key[0] == '\0') {
      return Fail(KVFLUX_MORI_E_INVALID_ARG, std::string(call) + ": the engine key is empty; give each engine a unique key");
    }
    auto e = std::make_shared<Engine>();
    e->key = key;
    e->engine = std::make_unique<IOEngine>(std::string(key), IOEngineConfig{std::string(host), port});
    *out_engine = Handles().Add(e);
    return KVFLUX_MORI_OK;
  });
}

int kvflux_mori_engine_destroy(uint64_t engine) {
  static const char* call = "kvflux_mori_engine_destroy";
  return Guard(call, [&]() -> int {
    auto e = Handles().Remove<Engine>(engine, kEngine, call);
    if (!e) return KVFLUX_MORI_E_BAD_HANDLE;
    std::unique_lock<std::shared_mutex> exclusive(e->life);
    e->alive = false;
    std::vector<std::shared_ptr<Object>> owned = Handles().RemoveOwnedBy(e.get());
    // Statuses first: a copy in flight must finish before its memory is deregistered.
    for (auto& object : owned) {
      if (object->kind == kStatus) static_cast<Status*>(object.get())->status->Wait();
    }
    {
      std::lock_guard<std::mutex> lock(e->orphansMu);
      for (auto& status : e->orphans) {
        status->Wait();
        kvflux::push::Retire(std::move(status));
      }
      e->orphans.clear();
    }
    for (auto& object : owned) {
      if (object->kind == kMem && static_cast<Mem*>(object.get())->local) {
        e->engine->DeregisterMemory(static_cast<Mem*>(object.get())->desc);
      }
    }
    owned.clear();
    e->engine.reset();
    return KVFLUX_MORI_OK;
  });
}

int kvflux_mori_engine_create_xgmi_backend(uint64_t engine, int32_t num_streams, int32_t num_events) {
  static const char* call = "kvflux_mori_engine_create_xgmi_backend";
  return Guard(call, [&]() -> int {
    if (num_streams <= 0 || num_events <= 0) {
      return Fail(KVFLUX_MORI_E_INVALID_ARG,
                  std::string(call) + ": numStreams (" + std::to_string(num_streams) + ") and numEvents (" +
                      std::to_string(num_events) + ") must be positive (MoRI's defaults are 64 and 64)");
    }
    auto e = Handles().Get<Engine>(engine, kEngine, call);
    if (!e) return KVFLUX_MORI_E_BAD_HANDLE;
    Alive alive(*e);
    if (!alive.ok) return EngineGone(call);
    // MoRI's xGMI backend only logs a warning when the GPU runtime sees no device, then fails every copy
    // later; the runtime's own error (no driver, no device) is clearer here.
    int devices = 0;
    hipError_t err = hipGetDeviceCount(&devices);
    if (err != hipSuccess || devices <= 0) {
      (void)hipGetLastError();
      return Fail(KVFLUX_MORI_E_BACKEND,
                  std::string(call) + ": MoRI's xGMI backend copies between GPUs, and the GPU runtime sees none: " +
                      (err != hipSuccess ? std::string(hipGetErrorName(err)) + " (" + hipGetErrorString(err) + ")"
                                         : std::string("0 devices")));
    }
    e->engine->CreateBackend(BackendType::XGMI, XgmiBackendConfig(num_streams, num_events));
    return KVFLUX_MORI_OK;
  });
}

int kvflux_mori_engine_create_rdma_backend(uint64_t engine, int32_t qp_per_transfer, int32_t post_batch_size,
                                           int32_t num_worker_threads, uint32_t poll_cq_mode,
                                           int32_t enable_notification) {
  static const char* call = "kvflux_mori_engine_create_rdma_backend";
  return Guard(call, [&]() -> int {
    if (poll_cq_mode > static_cast<uint32_t>(PollCqMode::EVENT)) {
      return Fail(KVFLUX_MORI_E_INVALID_ARG, std::string(call) + ": pollCqMode " + std::to_string(poll_cq_mode) +
                                                 " is neither POLLING (0) nor EVENT (1)");
    }
    if (qp_per_transfer <= 0 || num_worker_threads <= 0) {
      return Fail(KVFLUX_MORI_E_INVALID_ARG,
                  std::string(call) + ": qpPerTransfer and numWorkerThreads must be positive (defaults 1 and 1)");
    }
    auto e = Handles().Get<Engine>(engine, kEngine, call);
    if (!e) return KVFLUX_MORI_E_BAD_HANDLE;
    Alive alive(*e);
    if (!alive.ok) return EngineGone(call);
    int refused = CheckRdmaBackend(call, nullptr, nullptr);
    if (refused != KVFLUX_MORI_OK) return refused;
    RdmaBackendConfig config(qp_per_transfer, post_batch_size, num_worker_threads,
                             static_cast<PollCqMode>(poll_cq_mode), enable_notification != 0);
    e->engine->CreateBackend(BackendType::RDMA, config);
    return KVFLUX_MORI_OK;
  });
}

int kvflux_mori_engine_desc_pack(uint64_t engine, uint8_t* buf, size_t cap, size_t* out_len) {
  static const char* call = "kvflux_mori_engine_desc_pack";
  return Guard(call, [&]() -> int {
    auto e = Handles().Get<Engine>(engine, kEngine, call);
    if (!e) return KVFLUX_MORI_E_BAD_HANDLE;
    Alive alive(*e);
    if (!alive.ok) return EngineGone(call);
    msgpack::sbuffer bytes;
    msgpack::pack(bytes, e->engine->GetEngineDesc());
    return CopyOutBytes(bytes, buf, cap, out_len, call);
  });
}

static int RemoteEngine(uint64_t engine, const uint8_t* packed, size_t len, bool add, const char* call) {
  return Guard(call, [&]() -> int {
    if (packed == nullptr) return NullArg(call, "packed");
    EngineDesc desc = Unpack<EngineDesc>(packed, len);
    auto e = Handles().Get<Engine>(engine, kEngine, call);
    if (!e) return KVFLUX_MORI_E_BAD_HANDLE;
    Alive alive(*e);
    if (!alive.ok) return EngineGone(call);
    if (add) {
      e->engine->RegisterRemoteEngine(desc);
    } else {
      e->engine->DeregisterRemoteEngine(desc);
    }
    return KVFLUX_MORI_OK;
  });
}

int kvflux_mori_engine_register_remote(uint64_t engine, const uint8_t* packed, size_t len) {
  return RemoteEngine(engine, packed, len, true, "kvflux_mori_engine_register_remote");
}

int kvflux_mori_engine_deregister_remote(uint64_t engine, const uint8_t* packed, size_t len) {
  return RemoteEngine(engine, packed, len, false, "kvflux_mori_engine_deregister_remote");
}

int kvflux_mori_engine_allocate_uid(uint64_t engine, uint64_t* out_uid) {
  static const char* call = "kvflux_mori_engine_allocate_uid";
  return Guard(call, [&]() -> int {
    if (out_uid == nullptr) return NullArg(call, "out_uid");
    auto e = Handles().Get<Engine>(engine, kEngine, call);
    if (!e) return KVFLUX_MORI_E_BAD_HANDLE;
    Alive alive(*e);
    if (!alive.ok) return EngineGone(call);
    *out_uid = e->engine->AllocateTransferUniqueId();
    return KVFLUX_MORI_OK;
  });
}

int kvflux_mori_mem_register(uint64_t engine, void* data, uint64_t size, int32_t device, uint32_t location,
                             uint64_t* out_mem) {
  static const char* call = "kvflux_mori_mem_register";
  return Guard(call, [&]() -> int {
    if (data == nullptr || out_mem == nullptr) return NullArg(call, data == nullptr ? "data" : "out_mem");
    if (size == 0) return Fail(KVFLUX_MORI_E_INVALID_ARG, std::string(call) + ": size is 0; register at least one byte");
    if (location != KVFLUX_MORI_LOC_CPU && location != KVFLUX_MORI_LOC_GPU) {
      return Fail(KVFLUX_MORI_E_INVALID_ARG,
                  std::string(call) + ": location " + std::to_string(location) + " is neither CPU (1) nor GPU (2)");
    }
    auto e = Handles().Get<Engine>(engine, kEngine, call);
    if (!e) return KVFLUX_MORI_E_BAD_HANDLE;
    Alive alive(*e);
    if (!alive.ok) return EngineGone(call);
    MemoryDesc desc = e->engine->RegisterMemory(data, size, device, static_cast<MemoryLocationType>(location));
    *out_mem = Handles().Add(std::make_shared<Mem>(e, desc, true));
    return KVFLUX_MORI_OK;
  });
}

int kvflux_mori_mem_deregister(uint64_t mem) {
  static const char* call = "kvflux_mori_mem_deregister";
  return Guard(call, [&]() -> int {
    auto m = Handles().Remove<Mem>(mem, kMem, call);
    if (!m) return KVFLUX_MORI_E_BAD_HANDLE;
    Alive alive(*m->engine);
    if (alive.ok && m->local) m->engine->engine->DeregisterMemory(m->desc);
    return KVFLUX_MORI_OK;
  });
}

int kvflux_mori_mem_pack(uint64_t mem, uint8_t* buf, size_t cap, size_t* out_len) {
  static const char* call = "kvflux_mori_mem_pack";
  return Guard(call, [&]() -> int {
    auto m = Handles().Get<Mem>(mem, kMem, call);
    if (!m) return KVFLUX_MORI_E_BAD_HANDLE;
    msgpack::sbuffer bytes;
    msgpack::pack(bytes, m->desc);
    return CopyOutBytes(bytes, buf, cap, out_len, call);
  });
}

int kvflux_mori_mem_unpack(uint64_t engine, const uint8_t* packed, size_t len, uint64_t* out_mem) {
  static const char* call = "kvflux_mori_mem_unpack";
  return Guard(call, [&]() -> int {
    if (packed == nullptr || out_mem == nullptr) return NullArg(call, packed == nullptr ? "packed" : "out_mem");
    MemoryDesc desc = Unpack<MemoryDesc>(packed, len);
    auto e = Handles().Get<Engine>(engine, kEngine, call);
    if (!e) return KVFLUX_MORI_E_BAD_HANDLE;
    *out_mem = Handles().Add(std::make_shared<Mem>(e, desc, false));
    return KVFLUX_MORI_OK;
  });
}

int kvflux_mori_mem_query(uint64_t mem, uint32_t* out_id, uint64_t* out_size, int32_t* out_device,
                          uint32_t* out_location) {
  static const char* call = "kvflux_mori_mem_query";
  return Guard(call, [&]() -> int {
    auto m = Handles().Get<Mem>(mem, kMem, call);
    if (!m) return KVFLUX_MORI_E_BAD_HANDLE;
    if (out_id != nullptr) *out_id = m->desc.id;
    if (out_size != nullptr) *out_size = m->desc.size;
    if (out_device != nullptr) *out_device = m->desc.deviceId;
    if (out_location != nullptr) *out_location = static_cast<uint32_t>(m->desc.loc);
    return KVFLUX_MORI_OK;
  });
}

int kvflux_mori_session_create(uint64_t engine, uint64_t local_mem, uint64_t remote_mem, uint64_t* out_session) {
  static const char* call = "kvflux_mori_session_create";
  return Guard(call, [&]() -> int {
    if (out_session == nullptr) return NullArg(call, "out_session");
    auto e = Handles().Get<Engine>(engine, kEngine, call);
    if (!e) return KVFLUX_MORI_E_BAD_HANDLE;
    auto local = Handles().Get<Mem>(local_mem, kMem, call);
    if (!local) return KVFLUX_MORI_E_BAD_HANDLE;
    auto remote = Handles().Get<Mem>(remote_mem, kMem, call);
    if (!remote) return KVFLUX_MORI_E_BAD_HANDLE;
    if (local->engine != e || !local->local) {
      return Fail(KVFLUX_MORI_E_INVALID_ARG,
                  std::string(call) + ": the local memory must be registered on this engine ('" + e->key + "')");
    }
    if (remote->engine != e) {
      return Fail(KVFLUX_MORI_E_INVALID_ARG, std::string(call) +
                                                 ": the remote memory descriptor belongs to another engine; unpack "
                                                 "the peer's packed MemoryDesc on this engine");
    }
    Alive alive(*e);
    if (!alive.ok) return EngineGone(call);
    std::optional<IOEngineSession> session = e->engine->CreateSession(local->desc, remote->desc);
    if (!session.has_value()) {
      return Fail(KVFLUX_MORI_E_NOT_FOUND,
                  std::string(call) + ": MoRI found no backend for memory " + std::to_string(local->desc.id) +
                      " to memory " + std::to_string(remote->desc.id) + " of engine '" + remote->desc.engineKey +
                      "'; create a backend and register the remote engine first");
    }
    *out_session = Handles().Add(std::make_shared<Session>(e, std::move(*session), local->desc.size, remote->desc.size));
    return KVFLUX_MORI_OK;
  });
}

int kvflux_mori_session_destroy(uint64_t session) {
  static const char* call = "kvflux_mori_session_destroy";
  return Guard(call, [&]() -> int {
    return Handles().Remove<Session>(session, kSession, call) ? KVFLUX_MORI_OK : KVFLUX_MORI_E_BAD_HANDLE;
  });
}

int kvflux_mori_session_allocate_uid(uint64_t session, uint64_t* out_uid) {
  static const char* call = "kvflux_mori_session_allocate_uid";
  return Guard(call, [&]() -> int {
    if (out_uid == nullptr) return NullArg(call, "out_uid");
    auto s = Handles().Get<Session>(session, kSession, call);
    if (!s) return KVFLUX_MORI_E_BAD_HANDLE;
    Alive alive(*s->engine);
    if (!alive.ok) return EngineGone(call);
    *out_uid = s->session.AllocateTransferUniqueId();
    return KVFLUX_MORI_OK;
  });
}

int kvflux_mori_session_batch_write(uint64_t session, const uint64_t* local_offsets, size_t n_local,
                                    const uint64_t* remote_offsets, size_t n_remote, const uint64_t* sizes,
                                    size_t n_sizes, uint64_t transfer_uid, uint64_t* out_status) {
  return Batch(session, local_offsets, n_local, remote_offsets, n_remote, sizes, n_sizes, transfer_uid, out_status,
               false, "kvflux_mori_session_batch_write");
}

int kvflux_mori_session_batch_read(uint64_t session, const uint64_t* local_offsets, size_t n_local,
                                   const uint64_t* remote_offsets, size_t n_remote, const uint64_t* sizes,
                                   size_t n_sizes, uint64_t transfer_uid, uint64_t* out_status) {
  return Batch(session, local_offsets, n_local, remote_offsets, n_remote, sizes, n_sizes, transfer_uid, out_status,
               true, "kvflux_mori_session_batch_read");
}

int kvflux_mori_status_code(uint64_t status) {
  static const char* call = "kvflux_mori_status_code";
  return Guard(call, [&]() -> int {
    auto s = Handles().Get<Status>(status, kStatus, call);
    if (!s) return KVFLUX_MORI_E_BAD_HANDLE;
    Alive alive(*s->engine);
    if (!alive.ok) return EngineGone(call);
    return static_cast<int>(s->status->Code());
  });
}

int kvflux_mori_status_message(uint64_t status, char* buf, size_t cap, size_t* out_len) {
  static const char* call = "kvflux_mori_status_message";
  return Guard(call, [&]() -> int {
    auto s = Handles().Get<Status>(status, kStatus, call);
    if (!s) return KVFLUX_MORI_E_BAD_HANDLE;
    return CopyOut(s->status->Message(), buf, cap, out_len, call);
  });
}

int kvflux_mori_status_release(uint64_t status) {
  static const char* call = "kvflux_mori_status_release";
  return Guard(call, [&]() -> int {
    auto s = Handles().Remove<Status>(status, kStatus, call);
    if (!s) return KVFLUX_MORI_E_BAD_HANDLE;
    Alive alive(*s->engine);
    if (!alive.ok) return KVFLUX_MORI_OK;
    StatusCode code = s->status->Code();
    if (code == StatusCode::IN_PROGRESS) {
      // The backend still reaches this TransferStatus: keep it until its copy is over.
      // Its push entry stays until the orphan is freed (through kvflux::push::Retire); nobody takes its push.
      std::lock_guard<std::mutex> statusLock(s->mu);
      s->armed = false;
      std::lock_guard<std::mutex> lock(s->engine->orphansMu);
      s->engine->orphans.push_back(std::move(s->status));
    }
    return KVFLUX_MORI_OK;
  });
}

int kvflux_mori_wait_all(uint64_t engine, const uint64_t* statuses, size_t count, int32_t timeout_ms,
                         int32_t* out_code) {
  static const char* call = "kvflux_mori_wait_all";
  return Guard(call, [&]() -> int {
    if (out_code == nullptr) return NullArg(call, "out_code");
    if (count > 0 && statuses == nullptr) return NullArg(call, "statuses");
    auto e = Handles().Get<Engine>(engine, kEngine, call);
    if (!e) return KVFLUX_MORI_E_BAD_HANDLE;
    std::vector<std::shared_ptr<Status>> held;  // keeps each status alive during the wait
    std::vector<TransferStatus*> pointers(count, nullptr);
    for (size_t i = 0; i < count; i++) {
      if (statuses[i] == 0) continue;  // MoRI skips null entries
      auto s = Handles().Get<Status>(statuses[i], kStatus, call);
      if (!s) {
        std::string inner = lastError;
        return Fail(KVFLUX_MORI_E_BAD_HANDLE,
                    "status " + std::to_string(i) + " of " + std::to_string(count) + ": " + inner);
      }
      pointers[i] = s->status.get();
      held.push_back(std::move(s));
    }
    Alive alive(*e);
    if (!alive.ok) return EngineGone(call);
    *out_code = static_cast<int32_t>(e->engine->WaitAll(pointers, timeout_ms));
    return KVFLUX_MORI_OK;
  });
}

int kvflux_mori_engine_set_push(uint64_t engine, uint32_t mode) {
  static const char* call = "kvflux_mori_engine_set_push";
  return Guard(call, [&]() -> int {
    if (mode > KVFLUX_MORI_PUSH_ON) {
      return Fail(KVFLUX_MORI_E_INVALID_ARG, std::string(call) + ": unknown push mode " + std::to_string(mode) +
                                                 "; use KVFLUX_MORI_PUSH_OFF (0), _TIMES (1) or _ON (2)");
    }
    auto e = Handles().Get<Engine>(engine, kEngine, call);
    if (!e) return KVFLUX_MORI_E_BAD_HANDLE;
    if (mode != KVFLUX_MORI_PUSH_OFF && !kvflux::push::Enable()) {
      return Fail(KVFLUX_MORI_E_UNSUPPORTED,
                  std::string(call) + ": this MoRI cannot tell when a copy ends: it was built without kvflux's "
                                      "completion hook (bindings/native/mori/build.sh applies it), or its GPU "
                                      "runtime cannot queue host functions");
    }
    e->pushMode.store(mode);
    return KVFLUX_MORI_OK;
  });
}

namespace {

int TakeChecked(const char* call, kvflux_mori_push_stages* out, size_t cap, int32_t timeout_ms, size_t* out_count) {
  if (out == nullptr) return NullArg(call, "out");
  if (out_count == nullptr) return NullArg(call, "out_count");
  *out_count = 0;
  if (cap == 0) {
    return Fail(KVFLUX_MORI_E_INVALID_ARG, std::string(call) + ": cap is 0; pass room for at least one completion");
  }
  return kvflux::push::Take(out, cap, timeout_ms, out_count);
}

}  // namespace

int kvflux_mori_push_take_stages(kvflux_mori_push_stages* out, size_t cap, int32_t timeout_ms, size_t* out_count) {
  static const char* call = "kvflux_mori_push_take_stages";
  return Guard(call, [&]() -> int { return TakeChecked(call, out, cap, timeout_ms, out_count); });
}

int kvflux_mori_push_take(kvflux_mori_push* out, size_t cap, int32_t timeout_ms, size_t* out_count) {
  static const char* call = "kvflux_mori_push_take";
  return Guard(call, [&]() -> int {
    if (out == nullptr) return NullArg(call, "out");
    std::vector<kvflux_mori_push_stages> staged(std::min<size_t>(cap, 256));
    int rc = TakeChecked(call, staged.data(), staged.size(), timeout_ms, out_count);
    if (rc == KVFLUX_MORI_OK) {
      for (size_t i = 0; i < *out_count; i++) out[i] = staged[i].push;
    }
    return rc;
  });
}

int kvflux_mori_status_copy_end_ns(uint64_t status, int64_t* out_ns) {
  static const char* call = "kvflux_mori_status_copy_end_ns";
  return Guard(call, [&]() -> int {
    if (out_ns == nullptr) return NullArg(call, "out_ns");
    auto s = Handles().Get<Status>(status, kStatus, call);
    if (!s) return KVFLUX_MORI_E_BAD_HANDLE;
    std::lock_guard<std::mutex> lock(s->mu);
    if (!s->armed || !s->status || !kvflux::push::CopyEnd(s->status.get(), out_ns)) {
      return Fail(KVFLUX_MORI_E_BAD_STATE, std::string(call) + ": the batch's copies have not ended, or it was "
                                                             "posted with KVFLUX_MORI_PUSH_OFF");
    }
    return KVFLUX_MORI_OK;
  });
}

// ---- beyond kvflux_mori.h: checks for tests and reproducers (looked up as optional symbols) ----------

// The number of handles open in this library, every kind and engine together: 0 once all are released.
KVFLUX_MORI_API int kvflux_mori_live_handles(uint64_t* out_count) {
  if (out_count == nullptr) return NullArg("kvflux_mori_live_handles", "out_count");
  *out_count = Handles().Size();
  return KVFLUX_MORI_OK;
}

// The check kvflux_mori_engine_create_rdma_backend makes before calling MoRI, with the RDMA device
// directory (null: /sys/class/infiniband) and the ROCm SMI library (null: MoRI's candidates) given:
// KVFLUX_MORI_OK when MoRI may be called, KVFLUX_MORI_E_UNSUPPORTED with the reason when MoRI would end the
// process.
KVFLUX_MORI_API int kvflux_mori_rdma_preflight(const char* ib_class_dir, const char* smi_library) {
  static const char* call = "kvflux_mori_rdma_preflight";
  return Guard(call, [&]() -> int { return CheckRdmaBackend(call, ib_class_dir, smi_library); });
}

}  // extern "C"
