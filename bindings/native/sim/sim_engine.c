/*
 * Engines: create, the backends (xGMI only), the packed EngineDesc, remote engines, uids, the
 * simulator's controls of an engine (timing, faults), and last destroy, which takes every handle the
 * engine owns with it and stops its copy thread.
 */
#include "sim_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ================================================================================================ */
/*                                              engine                                              */
/* ================================================================================================ */

static void engine_destroy_obj(struct obj *o) {
    struct engine *e = ENGINE(o);
    for (size_t i = 0; i < e->remote_count; i++) {
        free(e->remotes[i]);
    }
    free(e->remotes);
    free(e->key);
    free(e->host);
    pthread_mutex_destroy(&e->mu);
    pthread_cond_destroy(&e->work_cv);
    pthread_cond_destroy(&e->copy_cv);
    free(e);
}

int kvflux_mori_engine_create(const char *key, const char *host, uint16_t port, uint64_t *out_engine) {
    static const char *call = "kvflux_mori_engine_create";
    if (key == NULL || host == NULL || out_engine == NULL) {
        return fail(KVFLUX_MORI_E_NULL_ARG, "%s: %s is NULL", call,
                    key == NULL ? "key" : host == NULL ? "host" : "out_engine");
    }
    if (key[0] == '\0') {
        return fail(KVFLUX_MORI_E_INVALID_ARG, "%s: the engine key is empty; give each engine a unique key", call);
    }
    struct engine *e = calloc(1, sizeof *e);
    if (e == NULL || (e->key = strdup(key)) == NULL || (e->host = strdup(host)) == NULL) {
        if (e != NULL) {
            free(e->key);
        }
        free(e);
        return fail(KVFLUX_MORI_E_NO_MEMORY, "%s: out of memory", call);
    }
    obj_init(&e->o, K_ENGINE, NULL, engine_destroy_obj);
    e->port = port;
    atomic_init(&e->next_uid, 0);
    e->overhead_ns = KVFLUX_SIM_DEFAULT_BLOCK_OVERHEAD_NS;
    e->bytes_per_second = KVFLUX_SIM_DEFAULT_BYTES_PER_SECOND;
    pthread_mutex_init(&e->mu, NULL);
    pthread_cond_init(&e->work_cv, NULL);
    cond_init_monotonic(&e->copy_cv);
    atomic_fetch_add(&e->o.refs, 1);
    int rc = table_add(&e->o, out_engine);
    if (rc != KVFLUX_MORI_OK) {
        obj_put(&e->o);
    }
    return rc;
}

int kvflux_mori_engine_create_xgmi_backend(uint64_t engine, int32_t num_streams, int32_t num_events) {
    static const char *call = "kvflux_mori_engine_create_xgmi_backend";
    if (num_streams <= 0 || num_events <= 0) {
        return fail(KVFLUX_MORI_E_INVALID_ARG, "%s: numStreams (%d) and numEvents (%d) must be positive (MoRI's defaults are 64 and 64)",
                    call, num_streams, num_events);
    }
    struct obj *o = get(engine, K_ENGINE, call);
    if (o == NULL) {
        return KVFLUX_MORI_E_BAD_HANDLE;
    }
    pthread_mutex_lock(&ENGINE(o)->mu);
    ENGINE(o)->xgmi = 1;
    pthread_mutex_unlock(&ENGINE(o)->mu);
    obj_put(o);
    return KVFLUX_MORI_OK;
}

int kvflux_mori_engine_create_rdma_backend(uint64_t engine, int32_t qp_per_transfer, int32_t post_batch_size,
                                           int32_t num_worker_threads, uint32_t poll_cq_mode,
                                           int32_t enable_notification) {
    static const char *call = "kvflux_mori_engine_create_rdma_backend";
    (void)qp_per_transfer;
    (void)post_batch_size;
    (void)num_worker_threads;
    (void)enable_notification;
    struct obj *o = get(engine, K_ENGINE, call);
    if (o == NULL) {
        return KVFLUX_MORI_E_BAD_HANDLE;
    }
    obj_put(o);
    if (poll_cq_mode > 1) {
        return fail(KVFLUX_MORI_E_INVALID_ARG, "%s: pollCqMode %u is neither POLLING (0) nor EVENT (1)", call, poll_cq_mode);
    }
    return fail(KVFLUX_MORI_E_UNSUPPORTED,
                "%s: the simulator models MoRI's xGMI backend only; use kvflux_mori_engine_create_xgmi_backend, "
                "or the real MoRI shim (libkvflux_mori.so) for RDMA", call);
}

static void pack_engine_desc(mp_writer *w, const char *key, const char *host, uint16_t port) {
    char hostname[256] = "";
    gethostname(hostname, sizeof hostname - 1);
    mp_array(w, 6);
    mp_str(w, key);
    mp_str(w, hostname); /* nodeId: the simulator's node is its host */
    mp_str(w, hostname);
    mp_str(w, host);
    mp_int(w, port);
    mp_int(w, getpid());
}

int kvflux_mori_engine_desc_pack(uint64_t engine, uint8_t *buf, size_t cap, size_t *out_len) {
    static const char *call = "kvflux_mori_engine_desc_pack";
    struct obj *o = get(engine, K_ENGINE, call);
    if (o == NULL) {
        return KVFLUX_MORI_E_BAD_HANDLE;
    }
    mp_writer w = {0};
    pack_engine_desc(&w, ENGINE(o)->key, ENGINE(o)->host, ENGINE(o)->port);
    int rc = copy_out_bytes(&w, buf, cap, out_len, call);
    mp_writer_free(&w);
    obj_put(o);
    return rc;
}

/* Reads an EngineDesc's key; the other five fields are checked for type and dropped. */
static int unpack_engine_key(const uint8_t *packed, size_t len, char **key, const char *call) {
    if (packed == NULL) {
        return fail(KVFLUX_MORI_E_NULL_ARG, "%s: packed is NULL", call);
    }
    mp_reader r = {.data = packed, .len = len};
    uint32_t n;
    char *fields[4] = {NULL, NULL, NULL, NULL};
    int64_t ints[2];
    int ok = mp_read_array(&r, &n) == 0;
    for (uint32_t i = 0; ok && i < n; i++) {
        if (i < 4) {
            ok = mp_read_str(&r, &fields[i]) == 0;
        } else if (i < 6) {
            ok = mp_read_int(&r, &ints[i - 4]) == 0;
        } else {
            ok = mp_skip(&r) == 0;
        }
    }
    for (int i = 1; i < 4; i++) {
        free(fields[i]);
    }
    if (!ok) {
        free(fields[0]);
        return fail(KVFLUX_MORI_E_DECODE, "%s: not a packed EngineDesc [key, nodeId, hostname, host, port, pid]: %s",
                    call, r.error);
    }
    if (fields[0] == NULL || fields[0][0] == '\0') {
        free(fields[0]);
        return fail(KVFLUX_MORI_E_DECODE, "%s: the packed EngineDesc has no key", call);
    }
    *key = fields[0];
    return KVFLUX_MORI_OK;
}

/* Adds (register) or removes (deregister) a peer engine's key from the engine's known remotes. */
static int remote_engine(uint64_t engine, const uint8_t *packed, size_t len, int add, const char *call) {
    char *key = NULL;
    int rc = unpack_engine_key(packed, len, &key, call);
    if (rc != KVFLUX_MORI_OK) {
        return rc;
    }
    struct obj *o = get(engine, K_ENGINE, call);
    if (o == NULL) {
        free(key);
        return KVFLUX_MORI_E_BAD_HANDLE;
    }
    struct engine *e = ENGINE(o);
    pthread_mutex_lock(&e->mu);
    size_t found = e->remote_count;
    for (size_t i = 0; i < e->remote_count; i++) {
        if (strcmp(e->remotes[i], key) == 0) {
            found = i;
        }
    }
    if (!add && found < e->remote_count) {
        free(e->remotes[found]);
        e->remotes[found] = e->remotes[--e->remote_count];
    } else if (add && found == e->remote_count) {
        char **grown = realloc(e->remotes, (e->remote_count + 1) * sizeof *grown);
        if (grown == NULL) {
            rc = fail(KVFLUX_MORI_E_NO_MEMORY, "%s: out of memory", call);
        } else {
            e->remotes = grown;
            e->remotes[e->remote_count++] = key;
            key = NULL;
        }
    }
    pthread_mutex_unlock(&e->mu);
    free(key);
    obj_put(o);
    return rc;
}

int kvflux_mori_engine_register_remote(uint64_t engine, const uint8_t *packed, size_t len) {
    return remote_engine(engine, packed, len, 1, "kvflux_mori_engine_register_remote");
}

int kvflux_mori_engine_deregister_remote(uint64_t engine, const uint8_t *packed, size_t len) {
    return remote_engine(engine, packed, len, 0, "kvflux_mori_engine_deregister_remote");
}

int kvflux_mori_engine_allocate_uid(uint64_t engine, uint64_t *out_uid) {
    static const char *call = "kvflux_mori_engine_allocate_uid";
    if (out_uid == NULL) {
        return fail(KVFLUX_MORI_E_NULL_ARG, "%s: out_uid is NULL", call);
    }
    struct obj *o = get(engine, K_ENGINE, call);
    if (o == NULL) {
        return KVFLUX_MORI_E_BAD_HANDLE;
    }
    *out_uid = atomic_fetch_add(&ENGINE(o)->next_uid, 1);
    obj_put(o);
    return KVFLUX_MORI_OK;
}

int kvflux_sim_set_timing(uint64_t engine, uint64_t block_overhead_ns, uint64_t bytes_per_second) {
    static const char *call = "kvflux_sim_set_timing";
    if (bytes_per_second == 0) {
        return fail(KVFLUX_MORI_E_INVALID_ARG, "%s: bytes_per_second must be positive", call);
    }
    struct obj *o = get(engine, K_ENGINE, call);
    if (o == NULL) {
        return KVFLUX_MORI_E_BAD_HANDLE;
    }
    pthread_mutex_lock(&ENGINE(o)->mu);
    ENGINE(o)->overhead_ns = block_overhead_ns;
    ENGINE(o)->bytes_per_second = bytes_per_second;
    pthread_mutex_unlock(&ENGINE(o)->mu);
    obj_put(o);
    return KVFLUX_MORI_OK;
}

static int add_fault(uint64_t engine, uint32_t nth, int hang, int32_t code, const char *message, const char *call) {
    if (nth == 0) {
        return fail(KVFLUX_MORI_E_INVALID_ARG, "%s: nth counts batches from 1, got 0", call);
    }
    if (!hang && (code <= KVFLUX_MORI_STATUS_ERR_BEGIN || code > KVFLUX_MORI_STATUS_ERR_GPU_OP)) {
        return fail(KVFLUX_MORI_E_INVALID_ARG, "%s: code %d is not a MoRI failure code (11..15)", call, code);
    }
    struct obj *o = get(engine, K_ENGINE, call);
    if (o == NULL) {
        return KVFLUX_MORI_E_BAD_HANDLE;
    }
    struct engine *e = ENGINE(o);
    int rc = KVFLUX_MORI_OK;
    pthread_mutex_lock(&e->mu);
    if (e->fault_count == KVFLUX_SIM_MAX_FAULTS) {
        rc = fail(KVFLUX_MORI_E_INVALID_ARG, "%s: at most %d faults per engine", call, KVFLUX_SIM_MAX_FAULTS);
    } else {
        struct fault *f = &e->faults[e->fault_count++];
        f->nth = nth;
        f->hang = hang;
        f->code = code;
        snprintf(f->message, sizeof f->message, "%s", message != NULL ? message : "");
    }
    pthread_mutex_unlock(&e->mu);
    obj_put(o);
    return rc;
}

int kvflux_sim_fault_every(uint64_t engine, uint32_t every, int32_t kind, int32_t code, int64_t slow_ns,
                           const char *message) {
    static const char *call = "kvflux_sim_fault_every";
    if (kind < KVFLUX_SIM_FAULT_FAIL || kind > KVFLUX_SIM_FAULT_SLOW) {
        return fail(KVFLUX_MORI_E_INVALID_ARG, "%s: kind %d is not fail (0), hang (1) or slow (2)", call, kind);
    }
    if (kind == KVFLUX_SIM_FAULT_SLOW && slow_ns <= 0) {
        return fail(KVFLUX_MORI_E_INVALID_ARG, "%s: a slow fault needs a positive delay, got %lld ns", call,
                    (long long)slow_ns);
    }
    int rc = add_fault(engine, every, kind == KVFLUX_SIM_FAULT_HANG, kind == KVFLUX_SIM_FAULT_FAIL ? code
                       : KVFLUX_MORI_STATUS_ERR_GPU_OP, message, call);
    if (rc == KVFLUX_MORI_OK) {
        struct obj *o = get(engine, K_ENGINE, call);
        if (o != NULL) {
            struct engine *e = ENGINE(o);
            pthread_mutex_lock(&e->mu);
            struct fault *f = &e->faults[e->fault_count - 1];
            f->every = 1;
            f->slow_ns = kind == KVFLUX_SIM_FAULT_SLOW ? slow_ns : 0;
            pthread_mutex_unlock(&e->mu);
            obj_put(o);
        }
    }
    return rc;
}

int kvflux_sim_fail_nth(uint64_t engine, uint32_t nth, int32_t code, const char *message) {
    return add_fault(engine, nth, 0, code, message, "kvflux_sim_fail_nth");
}

int kvflux_sim_hang_nth(uint64_t engine, uint32_t nth) {
    return add_fault(engine, nth, 1, 0, NULL, "kvflux_sim_hang_nth");
}

/* An engine's end: every handle it owns is released with it, and its copy thread stops. */
int kvflux_mori_engine_destroy(uint64_t engine) {
    struct obj *o = table_remove(engine, K_ENGINE, "kvflux_mori_engine_destroy");
    if (o == NULL) {
        return KVFLUX_MORI_E_BAD_HANDLE;
    }
    struct engine *e = ENGINE(o);

    /* Take every handle the engine owns out of the table. */
    size_t owned_count = 0;
    struct obj **owned = table_remove_owned(e, &owned_count);

    /* Stop the copy thread; queued jobs are dropped. */
    pthread_mutex_lock(&e->mu);
    e->stop = 1;
    e->closed = 1;
    int started = e->started;
    pthread_cond_broadcast(&e->work_cv);
    pthread_cond_broadcast(&e->copy_cv);
    pthread_mutex_unlock(&e->mu);
    if (started) {
        pthread_join(e->worker, NULL);
    }
    struct job *j = e->head;
    e->head = e->tail = NULL;
    while (j != NULL) {
        struct job *next = j->next;
        job_free(j);
        j = next;
    }

    for (size_t i = 0; i < owned_count; i++) {
        if (owned[i]->kind == K_MEM) {
            mem_release(MEM(owned[i]));
        } else {
            obj_put(owned[i]);
        }
    }
    free(owned);
    obj_put(o);
    return KVFLUX_MORI_OK;
}
