/*
 * Statuses: MoRI's TransferStatus model over the xGMI backend (a status completes only when something
 * queries it after its copy is over), the copy thread that really copies each batch's bytes, in post
 * order, and the status calls of kvflux_mori.h (code, message, release, wait_all).
 */
#include "sim_internal.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ================================================================================================ */
/*                                 the status model (engine mu held)                                */
/* ================================================================================================ */

void status_destroy_obj(struct obj *o) {
    struct status *st = STATUS(o);
    pthread_cond_destroy(&st->cv);
    struct engine *owner = st->o.owner;
    free(st);
    obj_put(&owner->o);
}

/* TransferStatus::Update: ignored once the code is a failure; notifies on terminal codes. */
void status_update(struct status *st, int code, const char *message) {
    if (st->code > KVFLUX_MORI_STATUS_ERR_BEGIN) {
        return;
    }
    st->code = code;
    snprintf(st->message, sizeof st->message, "%s", message);
    pthread_cond_broadcast(&st->cv);
}

/* The xGMI progress callback: completes the status if its copy is over (the event query). */
void status_progress(struct status *st) {
    if (st->code != KVFLUX_MORI_STATUS_IN_PROGRESS || st->hang) {
        return;
    }
    if (!st->copied || now_ns() < st->finish_ns) {
        return;
    }
    if (st->fail_code != 0) {
        status_update(st, st->fail_code, st->fail_message);
    } else {
        st->code = KVFLUX_MORI_STATUS_SUCCESS;
        pthread_cond_broadcast(&st->cv);
    }
}

/* The xGMI wait callback (event synchronize): blocks until the copy is over, then completes. */
static void status_block(struct engine *e, struct status *st) {
    while (st->code == KVFLUX_MORI_STATUS_IN_PROGRESS && !e->closed) {
        if (!st->hang && st->copied && now_ns() >= st->finish_ns) {
            status_progress(st);
            break;
        }
        if (st->hang || !st->copied) {
            pthread_cond_wait(&e->copy_cv, &e->mu);
        } else {
            struct timespec until = to_timespec(st->finish_ns);
            pthread_cond_timedwait(&e->copy_cv, &e->mu, &until);
        }
    }
    if (st->code == KVFLUX_MORI_STATUS_IN_PROGRESS && e->closed) {
        status_update(st, KVFLUX_MORI_STATUS_ERR_BAD_STATE, "engine destroyed while the transfer was in flight");
    }
}

/* TransferStatus::WaitFor(timeoutMs), line by line. */
static int status_wait_for(struct status *st, int timeout_ms) {
    struct engine *e = st->o.owner;
    pthread_mutex_lock(&e->mu);
    if (st->code != KVFLUX_MORI_STATUS_IN_PROGRESS) {
        int code = st->code;
        pthread_mutex_unlock(&e->mu);
        return code;
    }
    status_progress(st);
    if (timeout_ms < 0) {
        status_block(e, st);
    } else if (timeout_ms > 0) {
        int64_t deadline = now_ns() + (int64_t)timeout_ms * 1000000;
        struct timespec until = to_timespec(deadline);
        while (st->code == KVFLUX_MORI_STATUS_IN_PROGRESS) {
            if (now_ns() >= deadline) {
                break;
            }
            pthread_cond_timedwait(&st->cv, &e->mu, &until);
            status_progress(st);
        }
    }
    int code = st->code;
    pthread_mutex_unlock(&e->mu);
    return code;
}

/* ================================================================================================ */
/*                                          the copy thread                                         */
/* ================================================================================================ */

/* Frees a job that never entered the queue (it holds no references yet). */
void job_discard(struct job *j) {
    if (j != NULL) {
        free(j->src_offsets);
        free(j->dst_offsets);
        free(j->sizes);
        free(j);
    }
}

void job_free(struct job *j) {
    obj_put(&j->status->o);
    obj_put(&j->src->o);
    obj_put(&j->dst->o);
    j->status = NULL;
    job_discard(j);
}

void *copy_thread(void *arg) {
    struct engine *e = arg;
    pthread_mutex_lock(&e->mu);
    for (;;) {
        while (e->head == NULL && !e->stop) {
            pthread_cond_wait(&e->work_cv, &e->mu);
        }
        if (e->stop) {
            break;
        }
        struct job *j = e->head;
        e->head = j->next;
        if (e->head == NULL) {
            e->tail = NULL;
        }
        pthread_mutex_unlock(&e->mu);

        pthread_rwlock_rdlock(&j->src->use);
        if (j->dst != j->src) {
            pthread_rwlock_rdlock(&j->dst->use);
        }
        int reachable = j->src->registered && j->dst->registered;
        if (reachable) {
            char *src = (char *)(uintptr_t)j->src->data;
            char *dst = (char *)(uintptr_t)j->dst->data;
            for (size_t i = 0; i < j->count; i++) {
                memmove(dst + j->dst_offsets[i], src + j->src_offsets[i], j->sizes[i]);
            }
        }
        if (j->dst != j->src) {
            pthread_rwlock_unlock(&j->dst->use);
        }
        pthread_rwlock_unlock(&j->src->use);

        pthread_mutex_lock(&e->mu);
        if (!reachable && j->status->fail_code == 0) {
            j->status->fail_code = KVFLUX_MORI_STATUS_ERR_NOT_FOUND;
            snprintf(j->status->fail_message, sizeof j->status->fail_message,
                     "XGMI: memory was deregistered before the batch's copy ran");
        }
        j->status->copied = 1;
        j->status->copied_ns = now_ns();
        if (j->status->push_mode == KVFLUX_MORI_PUSH_ON && !j->status->hang) {
            struct status *st = j->status;
            push_schedule(st, st->copied_ns > st->finish_ns ? st->copied_ns : st->finish_ns);
        }
        pthread_cond_broadcast(&e->copy_cv);
        pthread_mutex_unlock(&e->mu);
        job_free(j);
        pthread_mutex_lock(&e->mu);
    }
    pthread_mutex_unlock(&e->mu);
    return NULL;
}

/* ================================================================================================ */
/*                                             statuses                                             */
/* ================================================================================================ */

int kvflux_mori_status_code(uint64_t status) {
    struct obj *o = get(status, K_STATUS, "kvflux_mori_status_code");
    if (o == NULL) {
        return KVFLUX_MORI_E_BAD_HANDLE;
    }
    struct engine *e = o->owner;
    pthread_mutex_lock(&e->mu);
    status_progress(STATUS(o));
    int code = STATUS(o)->code;
    pthread_mutex_unlock(&e->mu);
    obj_put(o);
    return code;
}

int kvflux_mori_status_message(uint64_t status, char *buf, size_t cap, size_t *out_len) {
    static const char *call = "kvflux_mori_status_message";
    struct obj *o = get(status, K_STATUS, call);
    if (o == NULL) {
        return KVFLUX_MORI_E_BAD_HANDLE;
    }
    char message[sizeof STATUS(o)->message];
    pthread_mutex_lock(&o->owner->mu);
    memcpy(message, STATUS(o)->message, sizeof message);
    pthread_mutex_unlock(&o->owner->mu);
    obj_put(o);
    return copy_out_string(message, buf, cap, out_len, call);
}

int kvflux_mori_status_release(uint64_t status) {
    struct obj *o = table_remove(status, K_STATUS, "kvflux_mori_status_release");
    if (o == NULL) {
        return KVFLUX_MORI_E_BAD_HANDLE;
    }
    obj_put(o); /* a queued copy keeps its own reference until it ran */
    return KVFLUX_MORI_OK;
}

int kvflux_sim_status_finish_ns(uint64_t status, int64_t *out_ns) {
    static const char *call = "kvflux_sim_status_finish_ns";
    if (out_ns == NULL) {
        return fail(KVFLUX_MORI_E_NULL_ARG, "%s: out_ns is NULL", call);
    }
    struct obj *o = get(status, K_STATUS, call);
    if (o == NULL) {
        return KVFLUX_MORI_E_BAD_HANDLE;
    }
    pthread_mutex_lock(&o->owner->mu);
    struct status *st = STATUS(o);
    *out_ns = st->copied && st->copied_ns > st->finish_ns ? st->copied_ns : st->finish_ns;
    pthread_mutex_unlock(&o->owner->mu);
    obj_put(o);
    return KVFLUX_MORI_OK;
}

/* IOEngine::WaitAll, line by line, over resolved statuses (NULL entries skipped). */
static int wait_all(struct status **st, size_t count, int timeout_ms) {
    if (count == 0) {
        return KVFLUX_MORI_STATUS_SUCCESS;
    }
    if (timeout_ms == 0) {
        int any_in_progress = 0;
        for (size_t i = 0; i < count; i++) {
            if (st[i] == NULL) continue;
            int rc = status_wait_for(st[i], 0);
            if (rc == KVFLUX_MORI_STATUS_IN_PROGRESS) {
                any_in_progress = 1;
                continue;
            }
            if (rc != KVFLUX_MORI_STATUS_SUCCESS) return rc;
        }
        return any_in_progress ? KVFLUX_MORI_STATUS_IN_PROGRESS : KVFLUX_MORI_STATUS_SUCCESS;
    }
    int first_error = KVFLUX_MORI_STATUS_SUCCESS;
    if (timeout_ms < 0) {
        for (size_t i = 0; i < count; i++) {
            if (st[i] == NULL) continue;
            int rc = status_wait_for(st[i], -1);
            if (rc != KVFLUX_MORI_STATUS_SUCCESS && first_error == KVFLUX_MORI_STATUS_SUCCESS) first_error = rc;
        }
        return first_error;
    }
    int64_t deadline = now_ns() + (int64_t)timeout_ms * 1000000;
    for (size_t i = 0; i < count; i++) {
        if (st[i] == NULL) continue;
        int64_t now = now_ns();
        if (now >= deadline) {
            return first_error != KVFLUX_MORI_STATUS_SUCCESS ? first_error : KVFLUX_MORI_STATUS_IN_PROGRESS;
        }
        int64_t remaining_ms = (deadline - now) / 1000000; /* truncated, as duration_cast does */
        int rc = status_wait_for(st[i], remaining_ms > INT_MAX ? INT_MAX : (int)remaining_ms);
        if (rc == KVFLUX_MORI_STATUS_IN_PROGRESS) {
            return first_error != KVFLUX_MORI_STATUS_SUCCESS ? first_error : KVFLUX_MORI_STATUS_IN_PROGRESS;
        }
        if (rc != KVFLUX_MORI_STATUS_SUCCESS && first_error == KVFLUX_MORI_STATUS_SUCCESS) first_error = rc;
    }
    return first_error;
}

int kvflux_mori_wait_all(uint64_t engine, const uint64_t *statuses, size_t count, int32_t timeout_ms,
                         int32_t *out_code) {
    static const char *call = "kvflux_mori_wait_all";
    if (out_code == NULL || (count > 0 && statuses == NULL)) {
        return fail(KVFLUX_MORI_E_NULL_ARG, "%s: %s is NULL", call, out_code == NULL ? "out_code" : "statuses");
    }
    struct obj *eo = get(engine, K_ENGINE, call);
    if (eo == NULL) {
        return KVFLUX_MORI_E_BAD_HANDLE;
    }
    struct status **resolved = calloc(count ? count : 1, sizeof *resolved);
    int rc = resolved == NULL ? fail(KVFLUX_MORI_E_NO_MEMORY, "%s: out of memory for %zu statuses", call, count)
                              : KVFLUX_MORI_OK;
    for (size_t i = 0; rc == KVFLUX_MORI_OK && i < count; i++) {
        if (statuses[i] == 0) {
            continue; /* MoRI skips null entries */
        }
        struct obj *o = get(statuses[i], K_STATUS, call);
        if (o == NULL) {
            char inner[sizeof last_error];
            snprintf(inner, sizeof inner, "%s", last_error);
            rc = fail(KVFLUX_MORI_E_BAD_HANDLE, "status %zu of %zu: %s", i, count, inner);
        } else {
            resolved[i] = STATUS(o);
        }
    }
    if (rc == KVFLUX_MORI_OK) {
        *out_code = wait_all(resolved, count, timeout_ms);
    }
    for (size_t i = 0; resolved != NULL && i < count; i++) {
        if (resolved[i] != NULL) {
            obj_put(&resolved[i]->o);
        }
    }
    free(resolved);
    obj_put(eo);
    return rc;
}
