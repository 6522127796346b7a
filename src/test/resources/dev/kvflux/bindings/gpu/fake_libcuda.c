/* A stand-in for libcuda.so.1 with the calls the scatter/gather path makes: it checks what kvflux passes
 * and records the last launch, so the FFM plumbing can be tested without a GPU. */
#include <stdint.h>
#include <string.h>

#define INVALID_PTX 218
#define NOT_FOUND 500

static uint64_t launch[12];
static int refuse_modules;

int cuInit(unsigned int flags) { return flags == 0 ? 0 : 1; }

int cuGetErrorName(int code, const char **name) {
    *name = code == INVALID_PTX ? "CUDA_ERROR_INVALID_PTX" : code == NOT_FOUND ? "CUDA_ERROR_NOT_FOUND" : 0;
    return *name ? 0 : 1;
}

int cuGetErrorString(int code, const char **text) {
    *text = code == INVALID_PTX ? "a PTX JIT compilation failed" : 0;
    return *text ? 0 : 1;
}

int cuModuleLoadData(void **module, const void *image) {
    if (refuse_modules || strstr((const char *)image, ".entry kvflux_scatter_gather(") == 0) {
        return INVALID_PTX;
    }
    *module = (void *)0x1000;
    return 0;
}

int cuModuleUnload(void *module) { return module == (void *)0x1000 ? 0 : 1; }

int cuModuleGetFunction(void **function, void *module, const char *name) {
    if (module != (void *)0x1000 || strcmp(name, "kvflux_scatter_gather") != 0) {
        return NOT_FOUND;
    }
    *function = (void *)0x2000;
    return 0;
}

int cuLaunchKernel(void *function, unsigned int gx, unsigned int gy, unsigned int gz, unsigned int bx,
                   unsigned int by, unsigned int bz, unsigned int shared, void *stream, void **params,
                   void **extra) {
    if (function != (void *)0x2000 || extra != 0) {
        return 1;
    }
    uint64_t values[] = {gx, gy, gz, bx, by, bz, shared, (uint64_t)stream,
                         *(uint64_t *)params[0], *(uint64_t *)params[1], *(uint64_t *)params[2],
                         *(uint32_t *)params[3]};
    memcpy(launch, values, sizeof launch);
    return 0;
}

uint64_t fake_launch(int i) { return launch[i]; }

void fake_refuse_modules(int refuse) { refuse_modules = refuse; }
