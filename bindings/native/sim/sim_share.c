/*
 * Memory another process reaches, as xGMI reaches a peer GPU's memory through an IPC handle.
 *
 * kvflux_sim_host_alloc gives host memory backed by a memfd and mapped shared. A registration whose bytes
 * lie in such an allocation gets an IPC handle in its MemoryDesc: a magic, the owner's pid, the memfd's
 * number there, the allocation's length and a random token that is also in the memfd's name. A session
 * whose remote descriptor names memory of no engine in this process opens /proc/PID/fd/FD, checks that
 * the file is that memfd (its name has the token, its length is the allocation's), maps it shared and
 * copies into the mapping; the mapping is closed when the session's last copy and the session are gone.
 * The pages live on until every process has unmapped them, so a killed owner never makes a copy fault.
 */
#define _GNU_SOURCE
#include "sim_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "kvflux_mori_sim.h"

#define SHARE_MAGIC "kvflux-sim-memfd"
#define SHARE_MAGIC_LEN 16

/* The IPC handle's layout inside MemoryDesc's 64-byte ipcHandle. */
struct share_handle {
    char magic[SHARE_MAGIC_LEN];
    uint32_t pid;
    int32_t fd;
    uint64_t length;
    uint64_t token;
};

_Static_assert(sizeof(struct share_handle) <= IPC_HANDLE_SIZE, "the IPC handle must fit MemoryDesc's");

struct share {
    void *base;
    size_t length;
    int fd;
    uint64_t token;
};

static pthread_mutex_t shares_mu = PTHREAD_MUTEX_INITIALIZER;
static struct share *shares;
static size_t share_count;
static size_t share_cap;
static atomic_int open_mappings;

static uint64_t random_token(void) {
    uint64_t token = 0;
    int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        if (read(fd, &token, sizeof token) != (ssize_t)sizeof token) {
            token = 0;
        }
        close(fd);
    }
    if (token == 0) {
        token = (uint64_t)now_ns() ^ ((uint64_t)getpid() << 32);
    }
    return token | 1;
}

int kvflux_sim_host_alloc(uint64_t size, void **out_ptr) {
    static const char *call = "kvflux_sim_host_alloc";
    if (out_ptr == NULL) {
        return fail(KVFLUX_MORI_E_NULL_ARG, "%s: out_ptr is NULL", call);
    }
    if (size == 0) {
        return fail(KVFLUX_MORI_E_INVALID_ARG, "%s: size is 0; allocate at least one byte", call);
    }
    uint64_t token = random_token();
    char name[64];
    snprintf(name, sizeof name, "kvflux-sim-%016llx", (unsigned long long)token);
    int fd = (int)syscall(SYS_memfd_create, name, 0u);
    if (fd < 0) {
        return fail(KVFLUX_MORI_E_NO_MEMORY, "%s: memfd_create failed: %s", call, strerror(errno));
    }
    if (ftruncate(fd, (off_t)size) != 0) {
        int err = errno;
        close(fd);
        return fail(KVFLUX_MORI_E_NO_MEMORY, "%s: cannot size shared memory to %llu bytes: %s", call,
                    (unsigned long long)size, strerror(err));
    }
    void *base = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, fd, 0);
    if (base == MAP_FAILED) {
        int err = errno;
        close(fd);
        return fail(KVFLUX_MORI_E_NO_MEMORY, "%s: cannot map %llu bytes of shared memory: %s", call,
                    (unsigned long long)size, strerror(err));
    }
    pthread_mutex_lock(&shares_mu);
    int rc = KVFLUX_MORI_OK;
    if (share_count == share_cap) {
        size_t cap = share_cap ? share_cap * 2 : 8;
        struct share *grown = realloc(shares, cap * sizeof *grown);
        if (grown == NULL) {
            rc = fail(KVFLUX_MORI_E_NO_MEMORY, "%s: out of memory", call);
        } else {
            shares = grown;
            share_cap = cap;
        }
    }
    if (rc == KVFLUX_MORI_OK) {
        shares[share_count++] = (struct share){.base = base, .length = size, .fd = fd, .token = token};
    }
    pthread_mutex_unlock(&shares_mu);
    if (rc != KVFLUX_MORI_OK) {
        munmap(base, size);
        close(fd);
        return rc;
    }
    *out_ptr = base;
    return KVFLUX_MORI_OK;
}

int kvflux_sim_host_free(void *ptr) {
    pthread_mutex_lock(&shares_mu);
    for (size_t i = 0; i < share_count; i++) {
        if (shares[i].base == ptr) {
            struct share s = shares[i];
            shares[i] = shares[--share_count];
            pthread_mutex_unlock(&shares_mu);
            munmap(s.base, s.length);
            close(s.fd);
            return KVFLUX_MORI_OK;
        }
    }
    pthread_mutex_unlock(&shares_mu);
    return fail(KVFLUX_MORI_E_INVALID_ARG, "kvflux_sim_host_free: %p was not allocated by kvflux_sim_host_alloc", ptr);
}

int kvflux_sim_open_mappings(void) {
    return atomic_load(&open_mappings);
}

void share_describe(struct mem *m) {
    uintptr_t start = (uintptr_t)m->data;
    pthread_mutex_lock(&shares_mu);
    for (size_t i = 0; i < share_count; i++) {
        uintptr_t base = (uintptr_t)shares[i].base;
        if (start >= base && start - base <= shares[i].length && m->size <= shares[i].length - (start - base)) {
            struct share_handle h = {.pid = (uint32_t)getpid(), .fd = shares[i].fd, .length = shares[i].length,
                                     .token = shares[i].token};
            memcpy(h.magic, SHARE_MAGIC, SHARE_MAGIC_LEN);
            memset(m->ipc, 0, IPC_HANDLE_SIZE);
            memcpy(m->ipc, &h, sizeof h);
            m->ipc_offset = start - base;
            break;
        }
    }
    pthread_mutex_unlock(&shares_mu);
}

/* Opens the memfd that h names in its owner process; -1 with the error set if it is not that memfd. */
static int open_peer(const struct share_handle *h, const char *call) {
    char path[64];
    snprintf(path, sizeof path, "/proc/%u/fd/%d", h->pid, h->fd);
    int fd = open(path, O_RDWR | O_CLOEXEC);
    if (fd < 0) {
        fail(KVFLUX_MORI_E_NOT_FOUND, "%s: cannot open the peer's memory %s: %s; is the peer process still running, "
             "as the same user?", call, path, strerror(errno));
        return -1;
    }
    char self[64];
    char link[256];
    snprintf(self, sizeof self, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(self, link, sizeof link - 1);
    char expected[64];
    snprintf(expected, sizeof expected, "/memfd:kvflux-sim-%016llx", (unsigned long long)h->token);
    struct stat st;
    if (n <= 0 || (link[n] = '\0', strncmp(link, expected, strlen(expected)) != 0) || fstat(fd, &st) != 0 ||
        (uint64_t)st.st_size != h->length) {
        close(fd);
        fail(KVFLUX_MORI_E_NOT_FOUND, "%s: %s is no longer the memory the descriptor names (its process restarted?)",
             call, path);
        return -1;
    }
    return fd;
}

struct mem *share_map_peer(struct engine *e, const struct mem *desc, const char *call) {
    struct share_handle h;
    memcpy(&h, desc->ipc, sizeof h);
    if (memcmp(h.magic, SHARE_MAGIC, SHARE_MAGIC_LEN) != 0 || (pid_t)h.pid == getpid()) {
        fail(KVFLUX_MORI_E_NOT_FOUND, "%s: memory %u of engine '%s' is not registered in this process and its "
             "descriptor names no shared memory of another; the simulator reaches memory registered in this process, "
             "or host memory from kvflux_sim_host_alloc in another", call, desc->id, desc->engine_key);
        return NULL;
    }
    if (h.length == 0 || desc->ipc_offset > h.length || desc->size > h.length - desc->ipc_offset) {
        fail(KVFLUX_MORI_E_INVALID_ARG, "%s: the descriptor's %llu bytes at offset %llu pass its shared memory of %llu "
             "bytes", call, (unsigned long long)desc->size, (unsigned long long)desc->ipc_offset,
             (unsigned long long)h.length);
        return NULL;
    }
    int fd = open_peer(&h, call);
    if (fd < 0) {
        return NULL;
    }
    void *base = mmap(NULL, h.length, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, fd, 0);
    int err = errno;
    close(fd);
    if (base == MAP_FAILED) {
        fail(KVFLUX_MORI_E_NO_MEMORY, "%s: cannot map the peer's memory: %s", call, strerror(err));
        return NULL;
    }
    struct mem *m = mem_new(e, 0);
    if (m == NULL || (m->engine_key = strdup(desc->engine_key)) == NULL || (m->bus_id = strdup("")) == NULL ||
        (m->vpod_ppod = strdup("")) == NULL) {
        if (m != NULL) {
            atomic_fetch_add(&m->o.refs, 1);
            obj_put(&m->o);
        }
        munmap(base, h.length);
        fail(KVFLUX_MORI_E_NO_MEMORY, "%s: out of memory", call);
        return NULL;
    }
    m->map_base = base;
    m->map_len = h.length;
    atomic_fetch_add(&open_mappings, 1);
    m->id = desc->id;
    m->device = desc->device;
    m->data = (uint64_t)(uintptr_t)base + desc->ipc_offset;
    m->size = desc->size;
    m->loc = desc->loc;
    m->registered = 1;
    atomic_fetch_add(&m->o.refs, 1);
    return m;
}

void share_unmap(struct mem *m) {
    if (m->map_base != NULL) {
        munmap(m->map_base, m->map_len);
        m->map_base = NULL;
        atomic_fetch_sub(&open_mappings, 1);
    }
}
