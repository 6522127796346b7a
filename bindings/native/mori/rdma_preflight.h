// rdma_preflight.h - the check kvflux's shim makes before it lets MoRI create an RDMA backend.
//
// MoRI's RDMA backend maps GPUs to NICs through a topology that loads ROCm SMI, and that code ends the
// process (exit(-1), no exception) when ROCm SMI cannot be loaded or sees no GPU. It is reached only when
// an RDMA device is present (without one MoRI throws "no active RDMA device" first). RdmaPreflight finds
// the cases that would end the process, before MoRI is called. It knows nothing of the C ABI's errors:
// kvflux_mori.cpp turns a refusal into KVFLUX_MORI_E_UNSUPPORTED.
#ifndef KVFLUX_RDMA_PREFLIGHT_H
#define KVFLUX_RDMA_PREFLIGHT_H

#include <optional>
#include <string>

namespace kvflux {

// Why MoRI must not be asked for an RDMA backend on this host, the text starting with call; nothing when
// it may be. ibClassDir: the RDMA device directory (null: /sys/class/infiniband); smiLibrary: the ROCm
// SMI library to try (null: MoRI's own candidates, MORI_ROCM_SMI_PATH first).
std::optional<std::string> RdmaPreflight(const char* call, const char* ibClassDir, const char* smiLibrary);

}  // namespace kvflux

#endif  // KVFLUX_RDMA_PREFLIGHT_H
