/*
 * kvflux_mori_checks.h - the argument checks both implementations of kvflux_mori.h make, written once:
 * the simulator (sim/, C) and the shim over the real MoRI (mori/, C++) include it, so both accept the
 * same calls and refuse the others with the same code and the same text.
 *
 * Each check returns KVFLUX_MORI_OK, or a KVFLUX_MORI_E_* code and then writes why (a NUL-terminated
 * text starting with call, at most why_cap bytes with its NUL) for the caller to make its last error.
 * On success why is left as it was. Not part of the ABI: nothing here is exported.
 */
#ifndef KVFLUX_MORI_CHECKS_H
#define KVFLUX_MORI_CHECKS_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "kvflux_mori.h"

/* Room enough for every text below with a call name of up to a few hundred characters. */
#define KVFLUX_MORI_CHECK_WHY_CAP 512

#if defined(__GNUC__)
__attribute__((format(printf, 4, 5)))
#endif
static inline int kvflux_mori_refuse(char *why, size_t why_cap, int code, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, why_cap, fmt, ap);
    va_end(ap);
    return code;
}

/*
 * The blocks of a batch: one local offset, one remote offset and one size per block (the three lengths
 * equal), no array NULL when there are blocks, every size positive, and every block inside both the
 * local region (local_size bytes) and the remote one (remote_size bytes), without wrapping around.
 */
static inline int kvflux_mori_check_blocks(const uint64_t *local_offsets, size_t n_local,
                                           const uint64_t *remote_offsets, size_t n_remote,
                                           const uint64_t *sizes, size_t n_sizes, uint64_t local_size,
                                           uint64_t remote_size, const char *call, char *why,
                                           size_t why_cap) {
    if (n_local != n_sizes || n_remote != n_sizes) {
        return kvflux_mori_refuse(why, why_cap, KVFLUX_MORI_E_INVALID_ARG,
                                  "%s: the arrays differ in length: %zu local offsets, %zu remote offsets, "
                                  "%zu sizes; give one local offset, one remote offset and one size per block",
                                  call, n_local, n_remote, n_sizes);
    }
    if (n_sizes > 0 && (local_offsets == NULL || remote_offsets == NULL || sizes == NULL)) {
        return kvflux_mori_refuse(why, why_cap, KVFLUX_MORI_E_NULL_ARG,
                                  "%s: %zu blocks but an offset or size array is NULL", call, n_sizes);
    }
    for (size_t i = 0; i < n_sizes; i++) {
        if (sizes[i] == 0) {
            return kvflux_mori_refuse(why, why_cap, KVFLUX_MORI_E_INVALID_ARG,
                                      "%s: block %zu has size 0; every block copies at least one byte", call, i);
        }
        const char *side = NULL;
        uint64_t offset = 0, limit = 0;
        if (sizes[i] > local_size || local_offsets[i] > local_size - sizes[i]) {
            side = "local";
            offset = local_offsets[i];
            limit = local_size;
        } else if (sizes[i] > remote_size || remote_offsets[i] > remote_size - sizes[i]) {
            side = "remote";
            offset = remote_offsets[i];
            limit = remote_size;
        }
        if (side != NULL) {
            return kvflux_mori_refuse(why, why_cap, KVFLUX_MORI_E_INVALID_ARG,
                                      "%s: block %zu, [%llu, +%llu), runs past the %s region's %llu bytes", call, i,
                                      (unsigned long long)offset, (unsigned long long)sizes[i], side,
                                      (unsigned long long)limit);
        }
    }
    return KVFLUX_MORI_OK;
}

/*
 * A text of len bytes (no NUL among them) into a caller's buffer with the two-call pattern: *out_len is
 * set to len; a buffer too small (or NULL) gets an empty string where it has room and the call fails
 * with KVFLUX_MORI_E_BUFFER_TOO_SMALL. out_len NULL is refused only when the size would be needed.
 */
static inline int kvflux_mori_copy_out_string(const char *text, size_t len, char *buf, size_t cap,
                                              size_t *out_len, const char *call, char *why, size_t why_cap) {
    if (out_len != NULL) {
        *out_len = len;
    }
    if (buf == NULL || cap < len + 1) {
        if (buf != NULL && cap > 0) {
            buf[0] = '\0';
        }
        if (out_len == NULL) {
            return kvflux_mori_refuse(why, why_cap, KVFLUX_MORI_E_NULL_ARG,
                                      "%s: out_len is NULL, so the needed size cannot be reported", call);
        }
        return kvflux_mori_refuse(why, why_cap, KVFLUX_MORI_E_BUFFER_TOO_SMALL,
                                  "%s needs %zu bytes with its NUL, the buffer has %zu", call, len + 1, cap);
    }
    memcpy(buf, text, len);
    buf[len] = '\0';
    return KVFLUX_MORI_OK;
}

/* Packed bytes into a caller's buffer with the two-call pattern; out_len is required. */
static inline int kvflux_mori_copy_out_bytes(const void *bytes, size_t len, uint8_t *buf, size_t cap,
                                             size_t *out_len, const char *call, char *why, size_t why_cap) {
    if (out_len == NULL) {
        return kvflux_mori_refuse(why, why_cap, KVFLUX_MORI_E_NULL_ARG, "%s: out_len is NULL", call);
    }
    *out_len = len;
    if (buf == NULL || cap < len) {
        return kvflux_mori_refuse(why, why_cap, KVFLUX_MORI_E_BUFFER_TOO_SMALL,
                                  "%s needs %zu bytes, the buffer has %zu", call, len, cap);
    }
    if (len > 0) {
        memcpy(buf, bytes, len);
    }
    return KVFLUX_MORI_OK;
}

#endif /* KVFLUX_MORI_CHECKS_H */
