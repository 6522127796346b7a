/*
 * The simulator's errors and clock, the two-call copy-out of results, and the library-wide calls of
 * kvflux_mori.h (ABI version, implementation name, last error) and kvflux_mori_sim.h (the clock).
 */
#include "sim_internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "../kvflux_mori_checks.h"

/* ================================================================================================ */
/*                                       errors and the clock                                       */
/* ================================================================================================ */

__thread char last_error[1024];

int fail(int code, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_error, sizeof last_error, fmt, ap);
    va_end(ap);
    return code;
}

int64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

struct timespec to_timespec(int64_t ns) {
    struct timespec ts = {(time_t)(ns / 1000000000), (long)(ns % 1000000000)};
    return ts;
}

void cond_init_monotonic(pthread_cond_t *cv) {
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(cv, &attr);
    pthread_condattr_destroy(&attr);
}

/* The two-call copy-outs of kvflux_mori_checks.h, a refusal becoming this thread's last error. */
int copy_out_string(const char *s, char *buf, size_t cap, size_t *out_len, const char *what) {
    return kvflux_mori_copy_out_string(s, strlen(s), buf, cap, out_len, what, last_error, sizeof last_error);
}

int copy_out_bytes(const mp_writer *w, uint8_t *buf, size_t cap, size_t *out_len, const char *what) {
    if (w->oom) {
        return fail(KVFLUX_MORI_E_NO_MEMORY, "%s: out of memory while packing", what);
    }
    return kvflux_mori_copy_out_bytes(w->data, w->len, buf, cap, out_len, what, last_error, sizeof last_error);
}

/* ================================================================================================ */
/*                                              library                                             */
/* ================================================================================================ */

int kvflux_mori_abi_version(uint32_t *out_version) {
    if (out_version == NULL) {
        return fail(KVFLUX_MORI_E_NULL_ARG, "kvflux_mori_abi_version: out_version is NULL");
    }
    *out_version = KVFLUX_MORI_ABI_VERSION;
    return KVFLUX_MORI_OK;
}

int kvflux_mori_implementation(char *buf, size_t cap, size_t *out_len) {
    return copy_out_string("native-sim", buf, cap, out_len, "kvflux_mori_implementation");
}

int kvflux_mori_last_error(char *buf, size_t cap, size_t *out_len) {
    size_t n = strlen(last_error);
    if (out_len != NULL) {
        *out_len = n;
    }
    if (buf != NULL && cap > 0) {
        size_t k = n < cap - 1 ? n : cap - 1;
        memcpy(buf, last_error, k);
        buf[k] = '\0';
    }
    return KVFLUX_MORI_OK;
}

int kvflux_sim_now_ns(int64_t *out_ns) {
    if (out_ns == NULL) {
        return fail(KVFLUX_MORI_E_NULL_ARG, "kvflux_sim_now_ns: out_ns is NULL");
    }
    *out_ns = now_ns();
    return KVFLUX_MORI_OK;
}
