/*
 * Push completion: what kvflux's patch gives the real MoRI (a host function behind each batch's event),
 * modelled. A batch posted with KVFLUX_MORI_PUSH_ON is scheduled once its bytes are copied, at its modelled
 * finish; one timer thread per process completes it at that time and queues it, once, for
 * kvflux_mori_push_take. Batches posted with OFF keep MoRI's model: only a query completes them.
 *
 * Locks: an engine's mu may be held while taking push_mu (push_schedule), never the other way round.
 */
#include "sim_internal.h"

#include <stdlib.h>
#include <sys/prctl.h>

struct timer {
    int64_t due_ns;
    struct status *st; /* reference held */
};

static pthread_mutex_t push_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t push_once = PTHREAD_ONCE_INIT;
static pthread_cond_t timer_cv; /* a timer earlier than the first was added */
static pthread_cond_t ready_cv; /* a completion was queued */
static int timer_started;

/* A binary min-heap of timers by due time. */
static struct timer *timers;
static size_t timer_count;
static size_t timer_cap;

/* The completions not yet taken, oldest first; each holds a reference on its status. */
static struct status *ready_head;
static struct status *ready_tail;

static void push_init(void) {
    cond_init_monotonic(&timer_cv);
    cond_init_monotonic(&ready_cv);
}

static void heap_swap(size_t a, size_t b) {
    struct timer t = timers[a];
    timers[a] = timers[b];
    timers[b] = t;
}

static int heap_push(int64_t due_ns, struct status *st) {
    if (timer_count == timer_cap) {
        size_t cap = timer_cap ? timer_cap * 2 : 256;
        struct timer *grown = realloc(timers, cap * sizeof *grown);
        if (grown == NULL) {
            return 0;
        }
        timers = grown;
        timer_cap = cap;
    }
    size_t i = timer_count++;
    timers[i] = (struct timer){due_ns, st};
    while (i > 0 && timers[(i - 1) / 2].due_ns > timers[i].due_ns) {
        heap_swap(i, (i - 1) / 2);
        i = (i - 1) / 2;
    }
    return 1;
}

static struct timer heap_pop(void) {
    struct timer top = timers[0];
    timers[0] = timers[--timer_count];
    size_t i = 0;
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, least = i;
        if (l < timer_count && timers[l].due_ns < timers[least].due_ns) least = l;
        if (r < timer_count && timers[r].due_ns < timers[least].due_ns) least = r;
        if (least == i) break;
        heap_swap(i, least);
        i = least;
    }
    return top;
}

/* Completes one due status (if its copies are over) and queues it; reschedules it if they are not. */
static void fire(struct status *st, int64_t due_ns) {
    struct engine *e = st->o.owner;
    int64_t fired = now_ns();
    pthread_mutex_lock(&e->mu);
    status_progress(st);
    int queue = 0;
    int again = 0;
    if (st->code != KVFLUX_MORI_STATUS_IN_PROGRESS && st->code != KVFLUX_MORI_STATUS_INIT) {
        queue = !st->pushed;
        st->pushed = 1;
    } else if (!st->hang && !e->closed) {
        again = 1; /* not over yet (its finish moved): look again a little later */
    }
    pthread_mutex_unlock(&e->mu);

    pthread_mutex_lock(&push_mu);
    if (queue) {
        st->fired_ns = fired;
        st->queued_ns = now_ns();
        st->push_next = NULL;
        if (ready_tail != NULL) {
            ready_tail->push_next = st;
        } else {
            ready_head = st;
        }
        ready_tail = st;
        pthread_cond_broadcast(&ready_cv);
        st = NULL; /* the queue keeps the timer's reference */
    } else if (again && heap_push(due_ns + 1000000, st)) {
        st = NULL;
    }
    pthread_mutex_unlock(&push_mu);
    if (st != NULL) {
        obj_put(&st->o);
    }
}

static void *timer_thread(void *arg) {
    (void)arg;
    /* The hook it models runs when the copies end, not up to the kernel's default 50 us of timer slack later. */
    prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL);
    pthread_mutex_lock(&push_mu);
    for (;;) {
        if (timer_count == 0) {
            pthread_cond_wait(&timer_cv, &push_mu);
            continue;
        }
        int64_t due = timers[0].due_ns;
        if (now_ns() < due) {
            struct timespec until = to_timespec(due);
            pthread_cond_timedwait(&timer_cv, &push_mu, &until);
            continue;
        }
        struct timer t = heap_pop();
        pthread_mutex_unlock(&push_mu);
        fire(t.st, t.due_ns);
        pthread_mutex_lock(&push_mu);
    }
    return NULL;
}

void push_schedule(struct status *st, int64_t due_ns) {
    pthread_once(&push_once, push_init);
    atomic_fetch_add(&st->o.refs, 1);
    pthread_mutex_lock(&push_mu);
    if (!timer_started) {
        pthread_t thread;
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        timer_started = pthread_create(&thread, &attr, timer_thread, NULL) == 0;
        pthread_attr_destroy(&attr);
    }
    int kept = timer_started && heap_push(due_ns, st);
    if (kept && timers[0].st == st) {
        pthread_cond_signal(&timer_cv);
    }
    pthread_mutex_unlock(&push_mu);
    if (!kept) {
        /* No timer: the status is left to queries, as an OFF batch is (a waiter's poll or timeout ends it). */
        atomic_fetch_sub(&st->o.refs, 1);
    }
}

int kvflux_mori_engine_set_push(uint64_t engine, uint32_t mode) {
    static const char *call = "kvflux_mori_engine_set_push";
    if (mode > KVFLUX_MORI_PUSH_ON) {
        return fail(KVFLUX_MORI_E_INVALID_ARG, "%s: unknown push mode %u; use KVFLUX_MORI_PUSH_OFF (0), _TIMES (1) or _ON (2)",
                    call, mode);
    }
    struct obj *o = get(engine, K_ENGINE, call);
    if (o == NULL) {
        return KVFLUX_MORI_E_BAD_HANDLE;
    }
    pthread_mutex_lock(&ENGINE(o)->mu);
    ENGINE(o)->push_mode = mode;
    pthread_mutex_unlock(&ENGINE(o)->mu);
    obj_put(o);
    return KVFLUX_MORI_OK;
}

/* kvflux_mori_push_take (plain) and kvflux_mori_push_take_stages (staged): one of the two is NULL. */
static int take(const char *call, kvflux_mori_push *plain, kvflux_mori_push_stages *staged, size_t cap,
                int32_t timeout_ms, size_t *out_count) {
    void *out = plain != NULL ? (void *)plain : (void *)staged;
    if (out == NULL || out_count == NULL) {
        return fail(KVFLUX_MORI_E_NULL_ARG, "%s: %s is NULL", call, out == NULL ? "out" : "out_count");
    }
    *out_count = 0;
    if (cap == 0) {
        return fail(KVFLUX_MORI_E_INVALID_ARG, "%s: cap is 0; pass room for at least one completion", call);
    }
    pthread_once(&push_once, push_init);
    int64_t deadline = now_ns() + (int64_t)timeout_ms * 1000000;
    struct status *taken = NULL;
    pthread_mutex_lock(&push_mu);
    while (ready_head == NULL && timeout_ms != 0) {
        if (timeout_ms < 0) {
            pthread_cond_wait(&ready_cv, &push_mu);
        } else {
            if (now_ns() >= deadline) break;
            struct timespec until = to_timespec(deadline);
            pthread_cond_timedwait(&ready_cv, &push_mu, &until);
        }
    }
    /* Detach up to cap completions; they are copied out after the lock is let go. */
    size_t n = 0;
    struct status **tail = &taken;
    while (ready_head != NULL && n < cap) {
        struct status *st = ready_head;
        ready_head = st->push_next;
        if (ready_head == NULL) ready_tail = NULL;
        st->push_next = NULL;
        *tail = st;
        tail = &st->push_next;
        n++;
    }
    pthread_mutex_unlock(&push_mu);

    size_t count = 0;
    while (taken != NULL) {
        struct status *st = taken;
        taken = st->push_next;
        struct engine *e = st->o.owner;
        pthread_mutex_lock(&e->mu);
        int code = st->code;
        int64_t end = st->copied && st->copied_ns > st->finish_ns ? st->copied_ns : st->finish_ns;
        int64_t fired = st->fired_ns, queued = st->queued_ns;
        pthread_mutex_unlock(&e->mu);
        struct obj *live = get(st->o.handle, K_STATUS, call); /* the handle is set before the batch is posted */
        if (live != NULL) { /* a released status's push is dropped */
            kvflux_mori_push push = {.status = st->o.handle, .code = code, .reserved = 0, .copy_end_ns = end};
            if (plain != NULL) {
                plain[count++] = push;
            } else {
                staged[count++] = (kvflux_mori_push_stages){
                    .push = push, .signalled_ns = fired, .queued_ns = queued, .taken_ns = now_ns()};
            }
            obj_put(live);
        }
        obj_put(&st->o);
    }
    last_error[0] = '\0';
    *out_count = count;
    return KVFLUX_MORI_OK;
}

int kvflux_mori_push_take(kvflux_mori_push *out, size_t cap, int32_t timeout_ms, size_t *out_count) {
    return take("kvflux_mori_push_take", out, NULL, cap, timeout_ms, out_count);
}

int kvflux_mori_push_take_stages(kvflux_mori_push_stages *out, size_t cap, int32_t timeout_ms, size_t *out_count) {
    return take("kvflux_mori_push_take_stages", NULL, out, cap, timeout_ms, out_count);
}

int kvflux_mori_status_copy_end_ns(uint64_t status, int64_t *out_ns) {
    static const char *call = "kvflux_mori_status_copy_end_ns";
    if (out_ns == NULL) {
        return fail(KVFLUX_MORI_E_NULL_ARG, "%s: out_ns is NULL", call);
    }
    struct obj *o = get(status, K_STATUS, call);
    if (o == NULL) {
        return KVFLUX_MORI_E_BAD_HANDLE;
    }
    struct status *st = STATUS(o);
    pthread_mutex_lock(&o->owner->mu);
    int64_t end = st->copied && st->copied_ns > st->finish_ns ? st->copied_ns : st->finish_ns;
    int over = st->copied && !st->hang && st->fail_code == 0 && now_ns() >= end;
    pthread_mutex_unlock(&o->owner->mu);
    obj_put(o);
    if (!over) {
        return fail(KVFLUX_MORI_E_BAD_STATE, "%s: the batch's copies have not ended", call);
    }
    *out_ns = end;
    return KVFLUX_MORI_OK;
}
