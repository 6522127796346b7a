/*
 * The part of msgpack the simulator needs to write and read MoRI's descriptors: arrays, strings,
 * binaries and integers, each written in its smallest form (non-negative integers as unsigned, as
 * msgpack-c does), and a reader that accepts every integer form and skips values it does not need.
 */
#ifndef KVFLUX_MSGPACK_LITE_H
#define KVFLUX_MSGPACK_LITE_H

#include <stddef.h>
#include <stdint.h>

/* Internal to the simulator library: not exported. */
#pragma GCC visibility push(hidden)

typedef struct {
    uint8_t *data;
    size_t len;
    size_t cap;
    int oom; /* set when growing failed; every later write is dropped */
} mp_writer;

void mp_writer_free(mp_writer *w);
void mp_array(mp_writer *w, uint32_t n);
void mp_uint(mp_writer *w, uint64_t v);
void mp_int(mp_writer *w, int64_t v);
void mp_str(mp_writer *w, const char *s);
void mp_bin(mp_writer *w, const uint8_t *b, uint32_t n);

typedef struct {
    const uint8_t *data;
    size_t len;
    size_t pos;
    char error[160]; /* empty while reading went well */
} mp_reader;

/* Each returns 0 on success, -1 with r->error set otherwise. */
int mp_read_array(mp_reader *r, uint32_t *n);
int mp_read_int(mp_reader *r, int64_t *v);
int mp_read_uint(mp_reader *r, uint64_t *v);
/* A str (or bin) copied into a new NUL-terminated string the caller frees. */
int mp_read_str(mp_reader *r, char **s);
/* A bin (or str) of exactly n bytes, copied into out. */
int mp_read_fixed_bin(mp_reader *r, uint8_t *out, uint32_t n);
/* Skips one value of any type, nested ones included. */
int mp_skip(mp_reader *r);

#pragma GCC visibility pop

#endif
