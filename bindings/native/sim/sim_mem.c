/*
 * Memory: registrations of host memory on an engine, their packed MemoryDesc, descriptors unpacked
 * from a peer, and the process-wide registry of live local registrations through which a session
 * reaches a peer engine's memory in this process.
 */
#include "sim_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ================================================================================================ */
/*                              the process-wide registry of registrations                          */
/* ================================================================================================ */

/* Process-wide list of live local registrations, so sessions can reach a peer engine's memory. */
static pthread_mutex_t registry_mu = PTHREAD_MUTEX_INITIALIZER;
static struct mem **registry;
static size_t registry_count;
static size_t registry_cap;

static void registry_remove(struct mem *m) {
    pthread_mutex_lock(&registry_mu);
    for (size_t i = 0; i < registry_count; i++) {
        if (registry[i] == m) {
            registry[i] = registry[--registry_count];
            break;
        }
    }
    pthread_mutex_unlock(&registry_mu);
}

/* The live local registration a descriptor names (engine key, id, address, size), with a reference. */
struct mem *resolve_registration(const struct mem *desc) {
    struct mem *found = NULL;
    pthread_mutex_lock(&registry_mu);
    for (size_t i = 0; i < registry_count; i++) {
        struct mem *m = registry[i];
        if (m->id == desc->id && m->data == desc->data && m->size == desc->size &&
            strcmp(m->engine_key, desc->engine_key) == 0) {
            found = m;
            atomic_fetch_add(&found->o.refs, 1);
            break;
        }
    }
    pthread_mutex_unlock(&registry_mu);
    return found;
}

/* ================================================================================================ */
/*                                              memory                                              */
/* ================================================================================================ */

static void mem_destroy_obj(struct obj *o) {
    struct mem *m = MEM(o);
    share_unmap(m);
    pthread_rwlock_destroy(&m->use);
    free(m->engine_key);
    free(m->bus_id);
    free(m->vpod_ppod);
    struct engine *owner = m->o.owner;
    free(m);
    obj_put(&owner->o);
}

/* Deregisters and drops one memory object taken out of the table. */
void mem_release(struct mem *m) {
    if (m->local) {
        pthread_rwlock_wrlock(&m->use);
        m->registered = 0;
        pthread_rwlock_unlock(&m->use);
        registry_remove(m);
    }
    obj_put(&m->o);
}

struct mem *mem_new(struct engine *owner, int local) {
    struct mem *m = calloc(1, sizeof *m);
    if (m == NULL) {
        return NULL;
    }
    obj_init(&m->o, K_MEM, owner, mem_destroy_obj);
    m->local = local;
    pthread_rwlock_init(&m->use, NULL);
    m->device = -1;
    m->numa = -1;
    m->vpod = -1;
    return m;
}

int kvflux_mori_mem_register(uint64_t engine, void *data, uint64_t size, int32_t device, uint32_t location,
                             uint64_t *out_mem) {
    static const char *call = "kvflux_mori_mem_register";
    if (data == NULL || out_mem == NULL) {
        return fail(KVFLUX_MORI_E_NULL_ARG, "%s: %s is NULL", call, data == NULL ? "data" : "out_mem");
    }
    if (size == 0) {
        return fail(KVFLUX_MORI_E_INVALID_ARG, "%s: size is 0; register at least one byte", call);
    }
    if (location != KVFLUX_MORI_LOC_CPU && location != KVFLUX_MORI_LOC_GPU) {
        return fail(KVFLUX_MORI_E_INVALID_ARG, "%s: location %u is neither CPU (1) nor GPU (2)", call, location);
    }
    if (location == KVFLUX_MORI_LOC_GPU) {
        return fail(KVFLUX_MORI_E_UNSUPPORTED,
                    "%s: the simulator has no GPU; register host memory (location CPU, device -1)", call);
    }
    if (device < -1) {
        return fail(KVFLUX_MORI_E_INVALID_ARG, "%s: device %d is negative; use -1 for host memory", call, device);
    }
    struct obj *o = get(engine, K_ENGINE, call);
    if (o == NULL) {
        return KVFLUX_MORI_E_BAD_HANDLE;
    }
    struct engine *e = ENGINE(o);
    struct mem *m = mem_new(e, 1);
    if (m == NULL || (m->engine_key = strdup(e->key)) == NULL || (m->bus_id = strdup("")) == NULL ||
        (m->vpod_ppod = strdup("")) == NULL) {
        if (m != NULL) {
            atomic_fetch_add(&m->o.refs, 1);
            obj_put(&m->o);
        }
        obj_put(o);
        return fail(KVFLUX_MORI_E_NO_MEMORY, "%s: out of memory", call);
    }
    pthread_mutex_lock(&e->mu);
    m->id = e->next_mem_id++;
    pthread_mutex_unlock(&e->mu);
    m->device = device;
    m->data = (uint64_t)(uintptr_t)data;
    m->size = size;
    m->loc = location;
    m->registered = 1;
    share_describe(m);

    pthread_mutex_lock(&registry_mu);
    int rc = KVFLUX_MORI_OK;
    if (registry_count == registry_cap) {
        size_t cap = registry_cap ? registry_cap * 2 : 32;
        struct mem **grown = realloc(registry, cap * sizeof *grown);
        if (grown == NULL) {
            rc = fail(KVFLUX_MORI_E_NO_MEMORY, "%s: out of memory", call);
        } else {
            registry = grown;
            registry_cap = cap;
        }
    }
    if (rc == KVFLUX_MORI_OK) {
        registry[registry_count++] = m;
    }
    pthread_mutex_unlock(&registry_mu);

    atomic_fetch_add(&m->o.refs, 1);
    if (rc == KVFLUX_MORI_OK) {
        rc = table_add(&m->o, out_mem);
        if (rc != KVFLUX_MORI_OK) {
            mem_release(m);
        }
    } else {
        obj_put(&m->o);
    }
    obj_put(o);
    return rc;
}

int kvflux_mori_mem_deregister(uint64_t mem) {
    struct obj *o = table_remove(mem, K_MEM, "kvflux_mori_mem_deregister");
    if (o == NULL) {
        return KVFLUX_MORI_E_BAD_HANDLE;
    }
    mem_release(MEM(o));
    return KVFLUX_MORI_OK;
}

int kvflux_mori_mem_pack(uint64_t mem, uint8_t *buf, size_t cap, size_t *out_len) {
    static const char *call = "kvflux_mori_mem_pack";
    struct obj *o = get(mem, K_MEM, call);
    if (o == NULL) {
        return KVFLUX_MORI_E_BAD_HANDLE;
    }
    struct mem *m = MEM(o);
    mp_writer w = {0};
    mp_array(&w, 15);
    mp_str(&w, m->engine_key);
    mp_uint(&w, m->id);
    mp_int(&w, m->device);
    mp_str(&w, m->bus_id);
    mp_uint(&w, m->data);
    mp_uint(&w, m->size);
    mp_uint(&w, m->loc);
    mp_bin(&w, m->ipc, IPC_HANDLE_SIZE);
    mp_int(&w, m->numa);
    mp_uint(&w, m->ipc_offset);
    mp_bin(&w, m->fabric, IPC_HANDLE_SIZE);
    mp_int(&w, m->vpod);
    mp_str(&w, m->vpod_ppod);
    mp_uint(&w, m->fabric_offset);
    mp_uint(&w, m->fabric_alloc_size);
    int rc = copy_out_bytes(&w, buf, cap, out_len, call);
    mp_writer_free(&w);
    obj_put(o);
    return rc;
}

/* Reads one MemoryDesc field by position; returns 0 or -1 with r->error set. */
static int read_mem_field(mp_reader *r, struct mem *m, uint32_t index) {
    int64_t s;
    uint64_t u;
    switch (index) {
    case 0: free(m->engine_key); m->engine_key = NULL; return mp_read_str(r, &m->engine_key);
    case 1: if (mp_read_uint(r, &u) != 0) return -1; m->id = (uint32_t)u; return 0;
    case 2: if (mp_read_int(r, &s) != 0) return -1; m->device = (int32_t)s; return 0;
    case 3: free(m->bus_id); m->bus_id = NULL; return mp_read_str(r, &m->bus_id);
    case 4: return mp_read_uint(r, &m->data);
    case 5: return mp_read_uint(r, &m->size);
    case 6: if (mp_read_uint(r, &u) != 0) return -1; m->loc = (uint32_t)u; return 0;
    case 7: return mp_read_fixed_bin(r, m->ipc, IPC_HANDLE_SIZE);
    case 8: if (mp_read_int(r, &s) != 0) return -1; m->numa = (int32_t)s; return 0;
    case 9: return mp_read_uint(r, &m->ipc_offset);
    case 10: return mp_read_fixed_bin(r, m->fabric, IPC_HANDLE_SIZE);
    case 11: if (mp_read_int(r, &s) != 0) return -1; m->vpod = (int32_t)s; return 0;
    case 12: free(m->vpod_ppod); m->vpod_ppod = NULL; return mp_read_str(r, &m->vpod_ppod);
    case 13: return mp_read_uint(r, &m->fabric_offset);
    case 14: return mp_read_uint(r, &m->fabric_alloc_size);
    default: return mp_skip(r);
    }
}

static const char *const MEM_FIELDS =
    "[engineKey, id, deviceId, deviceBusId, data, size, loc, ipcHandle, numaNode, ipcOffset, fabricHandle, "
    "vpodId, vpodPpodId, fabricOffset, fabricAllocSize]";

int kvflux_mori_mem_unpack(uint64_t engine, const uint8_t *packed, size_t len, uint64_t *out_mem) {
    static const char *call = "kvflux_mori_mem_unpack";
    if (packed == NULL || out_mem == NULL) {
        return fail(KVFLUX_MORI_E_NULL_ARG, "%s: %s is NULL", call, packed == NULL ? "packed" : "out_mem");
    }
    struct obj *o = get(engine, K_ENGINE, call);
    if (o == NULL) {
        return KVFLUX_MORI_E_BAD_HANDLE;
    }
    struct mem *m = mem_new(ENGINE(o), 0);
    obj_put(o);
    if (m == NULL) {
        return fail(KVFLUX_MORI_E_NO_MEMORY, "%s: out of memory", call);
    }
    atomic_fetch_add(&m->o.refs, 1);
    mp_reader r = {.data = packed, .len = len};
    uint32_t n;
    int ok = mp_read_array(&r, &n) == 0;
    for (uint32_t i = 0; ok && i < n; i++) {
        ok = read_mem_field(&r, m, i) == 0;
    }
    if (ok && m->engine_key == NULL) {
        ok = 0;
        snprintf(r.error, sizeof r.error, "the descriptor has no engineKey");
    }
    if (ok && ((m->bus_id == NULL && (m->bus_id = strdup("")) == NULL) ||
               (m->vpod_ppod == NULL && (m->vpod_ppod = strdup("")) == NULL))) {
        ok = 0;
        snprintf(r.error, sizeof r.error, "out of memory");
    }
    if (!ok) {
        obj_put(&m->o);
        return fail(KVFLUX_MORI_E_DECODE, "%s: not a packed MemoryDesc %s: %s", call, MEM_FIELDS, r.error);
    }
    int rc = table_add(&m->o, out_mem);
    if (rc != KVFLUX_MORI_OK) {
        obj_put(&m->o);
    }
    return rc;
}

int kvflux_mori_mem_query(uint64_t mem, uint32_t *out_id, uint64_t *out_size, int32_t *out_device,
                          uint32_t *out_location) {
    struct obj *o = get(mem, K_MEM, "kvflux_mori_mem_query");
    if (o == NULL) {
        return KVFLUX_MORI_E_BAD_HANDLE;
    }
    struct mem *m = MEM(o);
    if (out_id != NULL) *out_id = m->id;
    if (out_size != NULL) *out_size = m->size;
    if (out_device != NULL) *out_device = m->device;
    if (out_location != NULL) *out_location = m->loc;
    obj_put(o);
    return KVFLUX_MORI_OK;
}
