/*
 * The handle table: every engine, memory descriptor, session and status is an object with a
 * reference-counted head (struct obj), entered in one process-wide table. A handle is the slot's
 * generation, the object's kind and the slot's index, so a released handle, one of another kind, or 0
 * is reported as KVFLUX_MORI_E_BAD_HANDLE and never dereferenced, even after its slot is reused.
 */
#include "sim_internal.h"

#include <stdlib.h>

/* ================================================================================================ */
/*                                 handles: a generation-checked table                              */
/* ================================================================================================ */

static const char *kind_name(int kind) {
    switch (kind) {
    case K_ENGINE: return "engine";
    case K_MEM: return "memory";
    case K_SESSION: return "session";
    case K_STATUS: return "status";
    default: return "unknown";
    }
}

struct slot {
    uint32_t gen;
    struct obj *obj; /* NULL when free */
    uint32_t next_free;
};

#define SLOT_NONE UINT32_MAX
#define MAX_SLOTS (1u << 24)

static pthread_mutex_t table_mu = PTHREAD_MUTEX_INITIALIZER;
static struct slot *slots;
static uint32_t slot_count;
static uint32_t slot_cap;
static uint32_t free_head = SLOT_NONE;
static int live_count;

void obj_put(struct obj *o) {
    if (o != NULL && atomic_fetch_sub(&o->refs, 1) == 1) {
        o->destroy(o);
    }
}

/* Enters o in the table (taking one reference for the table) and writes its handle. */
int table_add(struct obj *o, uint64_t *out) {
    pthread_mutex_lock(&table_mu);
    uint32_t index;
    if (free_head != SLOT_NONE) {
        index = free_head;
        free_head = slots[index].next_free;
    } else {
        if (slot_count == slot_cap) {
            uint32_t cap = slot_cap ? slot_cap * 2 : 256;
            struct slot *grown = cap <= MAX_SLOTS ? realloc(slots, cap * sizeof *slots) : NULL;
            if (grown == NULL) {
                pthread_mutex_unlock(&table_mu);
                return fail(KVFLUX_MORI_E_NO_MEMORY, "no room for another handle (%d live)", live_count);
            }
            slots = grown;
            slot_cap = cap;
        }
        index = slot_count++;
        slots[index].gen = 0;
    }
    slots[index].gen = (slots[index].gen + 1) & 0xffffffffu;
    if (slots[index].gen == 0) {
        slots[index].gen = 1;
    }
    slots[index].obj = o;
    o->handle = ((uint64_t)slots[index].gen << 32) | ((uint64_t)o->kind << 24) | index;
    live_count++;
    pthread_mutex_unlock(&table_mu);
    *out = o->handle;
    return KVFLUX_MORI_OK;
}

/* The slot of a handle of the given kind that is live now, or NULL. table_mu must be held. */
static struct slot *slot_of(uint64_t h, int kind) {
    uint32_t index = (uint32_t)(h & 0xffffff);
    int hkind = (int)((h >> 24) & 0xff);
    uint32_t gen = (uint32_t)(h >> 32);
    if (h == 0 || hkind != kind || index >= slot_count) {
        return NULL;
    }
    struct slot *s = &slots[index];
    return (s->obj != NULL && s->gen == gen) ? s : NULL;
}

static int bad_handle(uint64_t h, int kind, const char *call) {
    if (h == 0) {
        return fail(KVFLUX_MORI_E_BAD_HANDLE, "%s: the %s handle is 0 (null)", call, kind_name(kind));
    }
    int hkind = (int)((h >> 24) & 0xff);
    if (hkind != kind) {
        return fail(KVFLUX_MORI_E_BAD_HANDLE, "%s: handle 0x%llx is of kind '%s', not '%s'", call,
                    (unsigned long long)h, kind_name(hkind), kind_name(kind));
    }
    return fail(KVFLUX_MORI_E_BAD_HANDLE, "%s: %s handle 0x%llx was released or never issued", call,
                kind_name(kind), (unsigned long long)h);
}

/* Looks a handle up and takes a reference on its object; on failure sets the error and returns NULL. */
struct obj *get(uint64_t h, int kind, const char *call) {
    pthread_mutex_lock(&table_mu);
    struct slot *s = slot_of(h, kind);
    struct obj *o = s ? s->obj : NULL;
    if (o != NULL) {
        atomic_fetch_add(&o->refs, 1);
    }
    pthread_mutex_unlock(&table_mu);
    if (o == NULL) {
        bad_handle(h, kind, call);
    }
    return o;
}

static void slot_free(struct slot *s) {
    uint32_t index = (uint32_t)(s - slots);
    s->obj = NULL;
    s->next_free = free_head;
    free_head = index;
    live_count--;
}

/* Takes a handle out of the table; returns its object with the table's reference, or NULL. */
struct obj *table_remove(uint64_t h, int kind, const char *call) {
    pthread_mutex_lock(&table_mu);
    struct slot *s = slot_of(h, kind);
    struct obj *o = s ? s->obj : NULL;
    if (s != NULL) {
        slot_free(s);
    }
    pthread_mutex_unlock(&table_mu);
    if (o == NULL) {
        bad_handle(h, kind, call);
    }
    return o;
}

struct obj **table_remove_owned(const struct engine *e, size_t *count) {
    struct obj **owned = NULL;
    size_t owned_count = 0;
    pthread_mutex_lock(&table_mu);
    for (uint32_t i = 0; i < slot_count; i++) {
        if (slots[i].obj != NULL && slots[i].obj->owner == e) {
            struct obj **grown = realloc(owned, (owned_count + 1) * sizeof *owned);
            if (grown == NULL) {
                continue; /* left in the table; its owner reference keeps the engine memory alive */
            }
            owned = grown;
            owned[owned_count++] = slots[i].obj;
            slot_free(&slots[i]);
        }
    }
    pthread_mutex_unlock(&table_mu);
    *count = owned_count;
    return owned;
}

void obj_init(struct obj *o, int kind, struct engine *owner, void (*destroy)(struct obj *)) {
    o->kind = kind;
    atomic_init(&o->refs, 0);
    o->owner = owner;
    o->destroy = destroy;
    if (owner != NULL) {
        atomic_fetch_add(&owner->o.refs, 1);
    }
}

int kvflux_sim_live_handles(void) {
    pthread_mutex_lock(&table_mu);
    int n = live_count;
    pthread_mutex_unlock(&table_mu);
    return n;
}
