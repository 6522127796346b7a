// kvflux's scatter/gather copy: one kernel launch moves every segment of a batch.
//
// The host sorts a batch's blocks by remote offset, merges neighbours that are contiguous on both sides,
// and uploads one metadata buffer of 3 * n unsigned 64-bit values:
//
//   meta[0 .. n)      source offsets      (from src)
//   meta[n .. 2n)     destination offsets (from dst)
//   meta[2n .. 3n)    sizes in bytes
//
// The grid is (segments, chunks): block (s, c) copies chunks c, c + gridDim.y, ... of segment s, each
// KVFLUX_SG_CHUNK bytes. A segment whose source, destination and size are all multiples of 16 is copied
// with 16-byte vector loads and stores; any other segment byte by byte. dst may be a peer GPU's buffer
// mapped through an IPC handle: the stores then travel over NVLink (or PCIe).
//
// Built to PTX by the Maven build when nvcc is installed:
//   nvcc -ptx -arch=compute_90 kvflux_scatter_gather.cu

#define KVFLUX_SG_CHUNK 65536ULL

extern "C" __global__ void kvflux_scatter_gather(const unsigned char *__restrict__ src,
                                                 unsigned char *__restrict__ dst,
                                                 const unsigned long long *__restrict__ meta,
                                                 unsigned int segments) {
    unsigned int s = blockIdx.x;
    if (s >= segments) {
        return;
    }
    unsigned long long srcOff = meta[s];
    unsigned long long dstOff = meta[segments + s];
    unsigned long long size = meta[2ULL * segments + s];
    const unsigned char *from = src + srcOff;
    unsigned char *to = dst + dstOff;
    bool vector = ((((unsigned long long)from) | ((unsigned long long)to) | size) & 15ULL) == 0ULL;

    for (unsigned long long start = (unsigned long long)blockIdx.y * KVFLUX_SG_CHUNK; start < size;
         start += (unsigned long long)gridDim.y * KVFLUX_SG_CHUNK) {
        unsigned long long end = start + KVFLUX_SG_CHUNK < size ? start + KVFLUX_SG_CHUNK : size;
        if (vector) {
            const uint4 *in = reinterpret_cast<const uint4 *>(from + start);
            uint4 *out = reinterpret_cast<uint4 *>(to + start);
            unsigned long long words = (end - start) / 16ULL;
            for (unsigned long long i = threadIdx.x; i < words; i += blockDim.x) {
                out[i] = in[i];
            }
        } else {
            for (unsigned long long i = start + threadIdx.x; i < end; i += blockDim.x) {
                to[i] = from[i];
            }
        }
    }
}
