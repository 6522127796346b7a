// The RDMA preflight of rdma_preflight.h: a scan of the kernel's RDMA devices, then, on AMD, the dlopen of
// ROCm SMI and the GPU count MoRI's topology code would need.
#include "rdma_preflight.h"

#include <dirent.h>
#include <dlfcn.h>
#include <hip/hip_runtime_api.h>

#include <cstdlib>
#include <vector>

namespace kvflux {
namespace {

// The RDMA devices the kernel lists (entries of /sys/class/infiniband, or of dir), names joined by ", ".
std::string RdmaDevices(const char* dir) {
  std::string names;
  DIR* d = opendir(dir);
  if (d == nullptr) return names;
  while (dirent* entry = readdir(d)) {
    if (entry->d_name[0] == '.') continue;
    if (!names.empty()) names += ", ";
    names += entry->d_name;
  }
  closedir(d);
  return names;
}

}  // namespace

std::optional<std::string> RdmaPreflight(const char* call, const char* ibClassDir, const char* smiLibrary) {
  std::string devices = RdmaDevices(ibClassDir != nullptr ? ibClassDir : "/sys/class/infiniband");
  if (devices.empty()) return std::nullopt;
#if defined(__HIP_PLATFORM_NVIDIA__)
  (void)smiLibrary;
  return std::string(call) + ": this host has RDMA devices (" + devices +
         "); MoRI's RDMA backend would map GPUs to them through ROCm SMI, which sees no GPU on an "
         "NVIDIA host, and MoRI would end the process (exit(-1)). Refused: use the xGMI backend "
         "between GPUs of one host";
#else
  std::vector<std::string> candidates;
  if (smiLibrary != nullptr) {
    candidates.emplace_back(smiLibrary);
  } else {
    const char* env = std::getenv("MORI_ROCM_SMI_PATH");
    if (env != nullptr && env[0] != '\0') candidates.emplace_back(env);
    candidates.insert(candidates.end(),
                      {"librocm_smi64.so.1", "librocm_smi64.so", "/opt/rocm/lib/librocm_smi64.so.1"});
  }
  void* smi = nullptr;
  for (const std::string& candidate : candidates) {
    smi = dlopen(candidate.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (smi != nullptr) break;
  }
  if (smi == nullptr) {
    const char* why = dlerror();
    return std::string(call) + ": this host has RDMA devices (" + devices + ") and librocm_smi64 cannot be "
           "loaded (" + (why != nullptr ? why : "not found") + "); MoRI would end the process "
           "(exit(-1)). Refused: install ROCm SMI (librocm-smi64) or set MORI_ROCM_SMI_PATH";
  }
  dlclose(smi);
  int gpus = 0;
  hipError_t err = hipGetDeviceCount(&gpus);
  if (err != hipSuccess || gpus == 0) {
    (void)hipGetLastError();
    return std::string(call) + ": this host has RDMA devices (" + devices + ") but no GPU is visible (" +
           hipGetErrorName(err) + "); ROCm SMI would report none and MoRI would end the process "
           "(exit(-1)). Refused";
  }
  return std::nullopt;
#endif
}

}  // namespace kvflux
