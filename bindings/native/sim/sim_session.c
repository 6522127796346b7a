/*
 * Sessions: one local registration and the remote one a peer's descriptor names, and the batch post,
 * which checks the blocks, models the batch's finish time, applies the engine's faults, and queues the
 * copy on the engine's copy thread.
 */
#include "sim_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../kvflux_mori_checks.h"

/* ================================================================================================ */
/*                                             sessions                                             */
/* ================================================================================================ */

static void session_destroy_obj(struct obj *o) {
    struct session *s = SESSION(o);
    obj_put(&s->local->o);
    obj_put(&s->target->o);
    struct engine *owner = s->o.owner;
    free(s);
    obj_put(&owner->o);
}

int kvflux_mori_session_create(uint64_t engine, uint64_t local_mem, uint64_t remote_mem, uint64_t *out_session) {
    static const char *call = "kvflux_mori_session_create";
    if (out_session == NULL) {
        return fail(KVFLUX_MORI_E_NULL_ARG, "%s: out_session is NULL", call);
    }
    struct obj *eo = get(engine, K_ENGINE, call);
    if (eo == NULL) {
        return KVFLUX_MORI_E_BAD_HANDLE;
    }
    struct obj *lo = get(local_mem, K_MEM, call);
    struct obj *ro = lo != NULL ? get(remote_mem, K_MEM, call) : NULL;
    struct engine *e = ENGINE(eo);
    struct mem *target = NULL;
    int rc = KVFLUX_MORI_OK;
    if (lo == NULL || ro == NULL) {
        rc = KVFLUX_MORI_E_BAD_HANDLE;
    } else if (lo->owner != e || !MEM(lo)->local) {
        rc = fail(KVFLUX_MORI_E_INVALID_ARG, "%s: the local memory must be registered on this engine ('%s')", call, e->key);
    } else if (ro->owner != e) {
        rc = fail(KVFLUX_MORI_E_INVALID_ARG, "%s: the remote memory descriptor belongs to another engine; unpack the "
                  "peer's packed MemoryDesc on this engine", call);
    } else {
        pthread_mutex_lock(&e->mu);
        int xgmi = e->xgmi;
        int known = strcmp(MEM(ro)->engine_key, e->key) == 0;
        for (size_t i = 0; !known && i < e->remote_count; i++) {
            known = strcmp(e->remotes[i], MEM(ro)->engine_key) == 0;
        }
        pthread_mutex_unlock(&e->mu);
        if (!xgmi) {
            rc = fail(KVFLUX_MORI_E_BAD_STATE, "%s: engine '%s' has no backend; create an xGMI backend first", call, e->key);
        } else if (!known) {
            rc = fail(KVFLUX_MORI_E_NOT_FOUND, "%s: remote engine '%s' is not registered with engine '%s'; register its "
                      "packed EngineDesc first", call, MEM(ro)->engine_key, e->key);
        } else if (MEM(ro)->local) {
            target = MEM(ro);
            atomic_fetch_add(&target->o.refs, 1);
        } else if ((target = resolve_registration(MEM(ro))) == NULL &&
                   (target = share_map_peer(e, MEM(ro), call)) == NULL) {
            rc = KVFLUX_MORI_E_NOT_FOUND;
        }
    }
    if (rc == KVFLUX_MORI_OK) {
        struct session *s = calloc(1, sizeof *s);
        if (s == NULL) {
            obj_put(&target->o);
            rc = fail(KVFLUX_MORI_E_NO_MEMORY, "%s: out of memory", call);
        } else {
            obj_init(&s->o, K_SESSION, e, session_destroy_obj);
            s->local = MEM(lo);
            atomic_fetch_add(&lo->refs, 1);
            s->target = target;
            atomic_fetch_add(&s->o.refs, 1);
            rc = table_add(&s->o, out_session);
            if (rc != KVFLUX_MORI_OK) {
                obj_put(&s->o);
            }
        }
    }
    obj_put(ro);
    obj_put(lo);
    obj_put(eo);
    return rc;
}

int kvflux_mori_session_destroy(uint64_t session) {
    struct obj *o = table_remove(session, K_SESSION, "kvflux_mori_session_destroy");
    if (o == NULL) {
        return KVFLUX_MORI_E_BAD_HANDLE;
    }
    obj_put(o);
    return KVFLUX_MORI_OK;
}

int kvflux_mori_session_allocate_uid(uint64_t session, uint64_t *out_uid) {
    static const char *call = "kvflux_mori_session_allocate_uid";
    if (out_uid == NULL) {
        return fail(KVFLUX_MORI_E_NULL_ARG, "%s: out_uid is NULL", call);
    }
    struct obj *o = get(session, K_SESSION, call);
    if (o == NULL) {
        return KVFLUX_MORI_E_BAD_HANDLE;
    }
    *out_uid = atomic_fetch_add(&o->owner->next_uid, 1);
    obj_put(o);
    return KVFLUX_MORI_OK;
}

static uint64_t *dup_array(const uint64_t *a, size_t n) {
    uint64_t *copy = malloc((n ? n : 1) * sizeof *copy);
    if (copy != NULL && n > 0) {
        memcpy(copy, a, n * sizeof *copy);
    }
    return copy;
}

static int batch(uint64_t session, const uint64_t *local_offsets, size_t n_local, const uint64_t *remote_offsets,
                 size_t n_remote, const uint64_t *sizes, size_t n_sizes, uint64_t *out_status, int is_read,
                 const char *call) {
    if (out_status == NULL) {
        return fail(KVFLUX_MORI_E_NULL_ARG, "%s: out_status is NULL", call);
    }
    struct obj *so = get(session, K_SESSION, call);
    if (so == NULL) {
        return KVFLUX_MORI_E_BAD_HANDLE;
    }
    struct session *s = SESSION(so);
    struct engine *e = so->owner;
    int rc = kvflux_mori_check_blocks(local_offsets, n_local, remote_offsets, n_remote, sizes, n_sizes,
                                      s->local->size, s->target->size, call, last_error, sizeof last_error);
    if (rc == KVFLUX_MORI_OK && (!s->local->registered || !s->target->registered)) {
        rc = fail(KVFLUX_MORI_E_BAD_STATE, "%s: the session's %s memory was deregistered; create a new session", call,
                  s->local->registered ? "remote" : "local");
    }
    struct status *st = NULL;
    struct job *j = NULL;
    if (rc == KVFLUX_MORI_OK) {
        st = calloc(1, sizeof *st);
        j = n_sizes > 0 ? calloc(1, sizeof *j) : NULL;
        if (j != NULL) {
            j->count = n_sizes;
            j->src_offsets = dup_array(is_read ? remote_offsets : local_offsets, n_sizes);
            j->dst_offsets = dup_array(is_read ? local_offsets : remote_offsets, n_sizes);
            j->sizes = dup_array(sizes, n_sizes);
        }
        if (st == NULL || (n_sizes > 0 && (j == NULL || !j->src_offsets || !j->dst_offsets || !j->sizes))) {
            job_discard(j);
            free(st);
            st = NULL;
            rc = fail(KVFLUX_MORI_E_NO_MEMORY, "%s: out of memory for a batch of %zu blocks", call, n_sizes);
        }
    }
    if (rc != KVFLUX_MORI_OK || st == NULL) {
        obj_put(so);
        return rc;
    }
    obj_init(&st->o, K_STATUS, e, status_destroy_obj);
    cond_init_monotonic(&st->cv);
    st->code = KVFLUX_MORI_STATUS_INIT;
    atomic_fetch_add(&st->o.refs, 2); /* the table's, and this call's until the post is over */
    /* The handle exists before the batch can complete: a push names its status by it. */
    int added = table_add(&st->o, out_status);
    if (added != KVFLUX_MORI_OK) {
        job_discard(j);
        atomic_fetch_sub(&st->o.refs, 1);
        obj_put(&st->o);
        obj_put(so);
        return added;
    }

    uint64_t bytes = 0;
    for (size_t i = 0; i < n_sizes; i++) {
        bytes += sizes[i];
    }
    pthread_mutex_lock(&e->mu);
    if (e->closed) {
        status_update(st, KVFLUX_MORI_STATUS_ERR_BAD_STATE, "engine destroyed while the batch was posted");
        job_discard(j);
    } else if (n_sizes == 0) {
        st->code = KVFLUX_MORI_STATUS_SUCCESS; /* MoRI: an empty batch succeeds at once */
    } else {
        uint32_t nth = ++e->posted;
        int64_t now = now_ns();
        int64_t start = e->last_finish_ns > now ? e->last_finish_ns : now;
        double cost = (double)n_sizes * (double)e->overhead_ns + (double)bytes * 1e9 / (double)e->bytes_per_second;
        st->finish_ns = start + (int64_t)cost;
        e->last_finish_ns = st->finish_ns;
        st->code = KVFLUX_MORI_STATUS_IN_PROGRESS;
        st->push_mode = e->push_mode;
        int skip_copy = 0;
        for (size_t i = 0; i < e->fault_count; i++) {
            const struct fault *f = &e->faults[i];
            if (f->every ? nth % f->nth == 0 : f->nth == nth) {
                if (f->slow_ns > 0) {
                    st->finish_ns += f->slow_ns; /* copied on time, seen late */
                    continue;
                }
                skip_copy = 1;
                if (e->faults[i].hang) {
                    st->hang = 1;
                } else {
                    st->fail_code = e->faults[i].code;
                    snprintf(st->fail_message, sizeof st->fail_message, "%s", e->faults[i].message);
                    st->copied = 1;
                }
            }
        }
        if (skip_copy) {
            job_discard(j);
            if (st->copied && st->push_mode == KVFLUX_MORI_PUSH_ON) {
                push_schedule(st, st->finish_ns); /* an injected failure is pushed at its finish too */
            }
        } else {
            j->status = st;
            atomic_fetch_add(&st->o.refs, 1);
            j->src = is_read ? s->target : s->local;
            j->dst = is_read ? s->local : s->target;
            atomic_fetch_add(&j->src->o.refs, 1);
            atomic_fetch_add(&j->dst->o.refs, 1);
            if (e->tail != NULL) {
                e->tail->next = j;
            } else {
                e->head = j;
            }
            e->tail = j;
            if (!e->started) {
                if (pthread_create(&e->worker, NULL, copy_thread, e) == 0) {
                    e->started = 1;
                } else {
                    status_update(st, KVFLUX_MORI_STATUS_ERR_BAD_STATE, "XGMI: could not start the copy thread");
                }
            }
            pthread_cond_signal(&e->work_cv);
        }
        status_progress(st); /* every submit queries its status once right after posting */
    }
    pthread_mutex_unlock(&e->mu);
    obj_put(so);
    obj_put(&st->o); /* this call's reference; the table keeps its own */
    return KVFLUX_MORI_OK;
}

int kvflux_mori_session_batch_write(uint64_t session, const uint64_t *local_offsets, size_t n_local,
                                    const uint64_t *remote_offsets, size_t n_remote, const uint64_t *sizes,
                                    size_t n_sizes, uint64_t transfer_uid, uint64_t *out_status) {
    (void)transfer_uid;
    return batch(session, local_offsets, n_local, remote_offsets, n_remote, sizes, n_sizes, out_status, 0,
                 "kvflux_mori_session_batch_write");
}

int kvflux_mori_session_batch_read(uint64_t session, const uint64_t *local_offsets, size_t n_local,
                                   const uint64_t *remote_offsets, size_t n_remote, const uint64_t *sizes,
                                   size_t n_sizes, uint64_t transfer_uid, uint64_t *out_status) {
    (void)transfer_uid;
    return batch(session, local_offsets, n_local, remote_offsets, n_remote, sizes, n_sizes, out_status, 1,
                 "kvflux_mori_session_batch_read");
}
