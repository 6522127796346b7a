#include "msgpack_lite.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- writer ------------------------------------------------------------------------------------ */

void mp_writer_free(mp_writer *w) {
    free(w->data);
    w->data = NULL;
    w->len = w->cap = 0;
}

static void put(mp_writer *w, const void *bytes, size_t n) {
    if (w->oom) {
        return;
    }
    if (w->len + n > w->cap) {
        size_t cap = w->cap ? w->cap : 128;
        while (cap < w->len + n) {
            cap *= 2;
        }
        uint8_t *grown = realloc(w->data, cap);
        if (grown == NULL) {
            w->oom = 1;
            return;
        }
        w->data = grown;
        w->cap = cap;
    }
    memcpy(w->data + w->len, bytes, n);
    w->len += n;
}

static void put_be(mp_writer *w, uint8_t tag, uint64_t v, int bytes) {
    uint8_t out[9];
    out[0] = tag;
    for (int i = 0; i < bytes; i++) {
        out[1 + i] = (uint8_t)(v >> (8 * (bytes - 1 - i)));
    }
    put(w, out, (size_t)bytes + 1);
}

void mp_array(mp_writer *w, uint32_t n) {
    if (n < 16) {
        uint8_t tag = (uint8_t)(0x90 | n);
        put(w, &tag, 1);
    } else if (n <= 0xffff) {
        put_be(w, 0xdc, n, 2);
    } else {
        put_be(w, 0xdd, n, 4);
    }
}

void mp_uint(mp_writer *w, uint64_t v) {
    if (v < 128) {
        uint8_t tag = (uint8_t)v;
        put(w, &tag, 1);
    } else if (v <= 0xff) {
        put_be(w, 0xcc, v, 1);
    } else if (v <= 0xffff) {
        put_be(w, 0xcd, v, 2);
    } else if (v <= 0xffffffffull) {
        put_be(w, 0xce, v, 4);
    } else {
        put_be(w, 0xcf, v, 8);
    }
}

void mp_int(mp_writer *w, int64_t v) {
    if (v >= 0) {
        mp_uint(w, (uint64_t)v);
    } else if (v >= -32) {
        uint8_t tag = (uint8_t)(int8_t)v;
        put(w, &tag, 1);
    } else if (v >= INT8_MIN) {
        put_be(w, 0xd0, (uint64_t)v & 0xff, 1);
    } else if (v >= INT16_MIN) {
        put_be(w, 0xd1, (uint64_t)v & 0xffff, 2);
    } else if (v >= INT32_MIN) {
        put_be(w, 0xd2, (uint64_t)v & 0xffffffffull, 4);
    } else {
        put_be(w, 0xd3, (uint64_t)v, 8);
    }
}

void mp_str(mp_writer *w, const char *s) {
    size_t n = strlen(s);
    if (n < 32) {
        uint8_t tag = (uint8_t)(0xa0 | n);
        put(w, &tag, 1);
    } else if (n <= 0xff) {
        put_be(w, 0xd9, n, 1);
    } else if (n <= 0xffff) {
        put_be(w, 0xda, n, 2);
    } else {
        put_be(w, 0xdb, n, 4);
    }
    put(w, s, n);
}

void mp_bin(mp_writer *w, const uint8_t *b, uint32_t n) {
    if (n <= 0xff) {
        put_be(w, 0xc4, n, 1);
    } else if (n <= 0xffff) {
        put_be(w, 0xc5, n, 2);
    } else {
        put_be(w, 0xc6, n, 4);
    }
    put(w, b, n);
}

/* ---- reader ------------------------------------------------------------------------------------ */

static int bad(mp_reader *r, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->error, sizeof r->error, fmt, ap);
    va_end(ap);
    return -1;
}

static int take(mp_reader *r, size_t n, const uint8_t **out) {
    if (r->len - r->pos < n) {
        return bad(r, "input ends at byte %zu, %zu more bytes expected", r->len, n - (r->len - r->pos));
    }
    *out = r->data + r->pos;
    r->pos += n;
    return 0;
}

static int take_be(mp_reader *r, int bytes, uint64_t *v) {
    const uint8_t *p = NULL;
    if (take(r, (size_t)bytes, &p) != 0) {
        return -1;
    }
    uint64_t x = 0;
    for (int i = 0; i < bytes; i++) {
        x = (x << 8) | p[i];
    }
    *v = x;
    return 0;
}

static int peek(mp_reader *r, uint8_t *tag) {
    if (r->pos >= r->len) {
        return bad(r, "input ends at byte %zu where a value was expected", r->len);
    }
    *tag = r->data[r->pos];
    return 0;
}

int mp_read_array(mp_reader *r, uint32_t *n) {
    uint8_t tag = 0;
    uint64_t v;
    if (peek(r, &tag) != 0) {
        return -1;
    }
    if ((tag & 0xf0) == 0x90) {
        r->pos++;
        *n = tag & 0x0f;
        return 0;
    }
    if (tag == 0xdc || tag == 0xdd) {
        r->pos++;
        if (take_be(r, tag == 0xdc ? 2 : 4, &v) != 0) {
            return -1;
        }
        *n = (uint32_t)v;
        return 0;
    }
    return bad(r, "byte %zu: expected an array, found type byte 0x%02x", r->pos, tag);
}

int mp_read_int(mp_reader *r, int64_t *v) {
    uint8_t tag = 0;
    uint64_t x;
    size_t at = r->pos;
    if (peek(r, &tag) != 0) {
        return -1;
    }
    r->pos++;
    if (tag < 0x80) {
        *v = tag;
        return 0;
    }
    if (tag >= 0xe0) {
        *v = (int8_t)tag;
        return 0;
    }
    switch (tag) {
    case 0xcc: case 0xcd: case 0xce: case 0xcf: {
        int bytes = 1 << (tag - 0xcc);
        if (take_be(r, bytes, &x) != 0) {
            return -1;
        }
        if (x > (uint64_t)INT64_MAX) {
            return bad(r, "byte %zu: integer %llu does not fit a signed field", at, (unsigned long long)x);
        }
        *v = (int64_t)x;
        return 0;
    }
    case 0xd0: if (take_be(r, 1, &x) != 0) return -1; *v = (int8_t)x; return 0;
    case 0xd1: if (take_be(r, 2, &x) != 0) return -1; *v = (int16_t)x; return 0;
    case 0xd2: if (take_be(r, 4, &x) != 0) return -1; *v = (int32_t)x; return 0;
    case 0xd3: if (take_be(r, 8, &x) != 0) return -1; *v = (int64_t)x; return 0;
    default:
        r->pos = at;
        return bad(r, "byte %zu: expected an integer, found type byte 0x%02x", at, tag);
    }
}

int mp_read_uint(mp_reader *r, uint64_t *v) {
    uint8_t tag = 0;
    size_t at = r->pos;
    if (peek(r, &tag) != 0) {
        return -1;
    }
    if (tag >= 0xcc && tag <= 0xcf) {
        r->pos++;
        return take_be(r, 1 << (tag - 0xcc), v);
    }
    int64_t s;
    if (mp_read_int(r, &s) != 0) {
        return -1;
    }
    if (s < 0) {
        return bad(r, "byte %zu: negative integer %lld in an unsigned field", at, (long long)s);
    }
    *v = (uint64_t)s;
    return 0;
}

/* Reads a str or bin header; sets *n to the payload length. */
static int read_raw_header(mp_reader *r, uint32_t *n, const char *what) {
    uint8_t tag = 0;
    uint64_t v;
    if (peek(r, &tag) != 0) {
        return -1;
    }
    if ((tag & 0xe0) == 0xa0) {
        r->pos++;
        *n = tag & 0x1f;
        return 0;
    }
    int bytes;
    switch (tag) {
    case 0xd9: case 0xc4: bytes = 1; break;
    case 0xda: case 0xc5: bytes = 2; break;
    case 0xdb: case 0xc6: bytes = 4; break;
    default:
        return bad(r, "byte %zu: expected %s, found type byte 0x%02x", r->pos, what, tag);
    }
    r->pos++;
    if (take_be(r, bytes, &v) != 0) {
        return -1;
    }
    *n = (uint32_t)v;
    return 0;
}

int mp_read_str(mp_reader *r, char **s) {
    uint32_t n;
    const uint8_t *p = NULL;
    if (read_raw_header(r, &n, "a string") != 0 || take(r, n, &p) != 0) {
        return -1;
    }
    char *copy = malloc((size_t)n + 1);
    if (copy == NULL) {
        return bad(r, "out of memory for a %u-byte string", n);
    }
    memcpy(copy, p, n);
    copy[n] = '\0';
    *s = copy;
    return 0;
}

int mp_read_fixed_bin(mp_reader *r, uint8_t *out, uint32_t n) {
    uint32_t got;
    const uint8_t *p = NULL;
    size_t at = r->pos;
    if (read_raw_header(r, &got, "binary data") != 0) {
        return -1;
    }
    if (got != n) {
        return bad(r, "byte %zu: expected %u bytes of binary data, found %u", at, n, got);
    }
    if (take(r, n, &p) != 0) {
        return -1;
    }
    memcpy(out, p, n);
    return 0;
}

static int skip_depth(mp_reader *r, int depth) {
    uint8_t tag = 0;
    uint64_t n = 0;
    const uint8_t *p = NULL;
    if (depth > 64) {
        return bad(r, "byte %zu: values nested more than 64 deep", r->pos);
    }
    if (peek(r, &tag) != 0) {
        return -1;
    }
    r->pos++;
    if (tag < 0x80 || tag >= 0xe0 || tag == 0xc0 || tag == 0xc2 || tag == 0xc3) {
        return 0;
    }
    if ((tag & 0xe0) == 0xa0) {
        return take(r, tag & 0x1f, &p);
    }
    if ((tag & 0xf0) == 0x90 || (tag & 0xf0) == 0x80) {
        n = (uint64_t)(tag & 0x0f) * ((tag & 0xf0) == 0x80 ? 2 : 1);
        for (uint64_t i = 0; i < n; i++) {
            if (skip_depth(r, depth + 1) != 0) {
                return -1;
            }
        }
        return 0;
    }
    switch (tag) {
    case 0xcc: case 0xd0: return take(r, 1, &p);
    case 0xcd: case 0xd1: return take(r, 2, &p);
    case 0xce: case 0xd2: case 0xca: return take(r, 4, &p);
    case 0xcf: case 0xd3: case 0xcb: return take(r, 8, &p);
    case 0xd4: return take(r, 2, &p);
    case 0xd5: return take(r, 3, &p);
    case 0xd6: return take(r, 5, &p);
    case 0xd7: return take(r, 9, &p);
    case 0xd8: return take(r, 17, &p);
    case 0xc4: case 0xd9: if (take_be(r, 1, &n) != 0) return -1; return take(r, n, &p);
    case 0xc5: case 0xda: if (take_be(r, 2, &n) != 0) return -1; return take(r, n, &p);
    case 0xc6: case 0xdb: if (take_be(r, 4, &n) != 0) return -1; return take(r, n, &p);
    case 0xc7: if (take_be(r, 1, &n) != 0) return -1; return take(r, n + 1, &p);
    case 0xc8: if (take_be(r, 2, &n) != 0) return -1; return take(r, n + 1, &p);
    case 0xc9: if (take_be(r, 4, &n) != 0) return -1; return take(r, n + 1, &p);
    case 0xdc: case 0xdd: case 0xde: case 0xdf: {
        if (take_be(r, (tag == 0xdc || tag == 0xde) ? 2 : 4, &n) != 0) {
            return -1;
        }
        if (tag >= 0xde) {
            n *= 2;
        }
        for (uint64_t i = 0; i < n; i++) {
            if (skip_depth(r, depth + 1) != 0) {
                return -1;
            }
        }
        return 0;
    }
    default:
        return bad(r, "byte %zu: type byte 0x%02x is not valid msgpack", r->pos - 1, tag);
    }
}

int mp_skip(mp_reader *r) {
    return skip_depth(r, 0);
}
