/* memory.c — the Metal backend's memory behind fake addresses (see mtl.h): buffers, weights (wrapped in place or
 * copied with padded rows), host access through the shared storage, and the ring of host data for kernels. */
#include "mtl.h"

#include "core/error.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

enum {
    FAKE_BYTES_LOG2 = 38,   /* 256 GiB of reserved, never-mapped addresses per backend */
    ALIGN = 256,            /* of every allocation's fake and device start */
    RING_BYTES = 8 << 20,   /* host data for one command buffer's kernels */
    STATS_BYTES = 4096,     /* greedy sampling results: 64 rows × (argmax, max, Σ exp) */
};
#define WEIGHT_BLOCK (1ull << 30) /* copied weights are sub-allocated from buffers of this size (or one per larger matrix) */

static uint64_t round_up(uint64_t x, uint64_t a) { return (x + a - 1) / a * a; }

bool sp_mtl_fail(sp_mtl *m, splash_status st, const char *fmt, ...) {
    if (*m->status == SPLASH_OK) {
        char msg[512];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof msg, fmt, ap);
        va_end(ap);
        *m->status = SP_FAIL(st, "metal: %s", msg);
    }
    return false;
}

splash_status sp_mtl_memory_init(sp_mtl *m) {
    m->fake_size = 1ull << FAKE_BYTES_LOG2;
    int flags = MAP_PRIVATE | MAP_ANONYMOUS;
#ifdef MAP_NORESERVE
    flags |= MAP_NORESERVE;
#endif
    void *p = mmap(NULL, (size_t)m->fake_size, PROT_NONE, flags, -1, 0);
    if (p == MAP_FAILED) return SP_FAIL(SPLASH_ERR_OUT_OF_MEMORY, "metal: cannot reserve address space");
    m->fake_base = p;
    splash_status st = sp_mtl_device_buffer(m, RING_BYTES, &m->ring);
    if (!st) st = sp_mtl_device_buffer(m, STATS_BYTES, &m->stats);
    return st;
}

void sp_mtl_memory_free(sp_mtl *m) {
    for (int32_t i = 0; i < m->n_chunks; i++) sp_mtl_device_release(m, &m->chunks[i].own);
    free(m->chunks);
    m->chunks = NULL;
    m->n_chunks = 0;
    for (int32_t i = 0; i < m->n_blocks; i++) sp_mtl_device_release(m, &m->blocks[i]);
    free(m->blocks);
    m->blocks = NULL;
    m->n_blocks = 0;
    sp_mtl_device_release(m, &m->ring);
    sp_mtl_device_release(m, &m->stats);
    if (m->fake_base) munmap(m->fake_base, (size_t)m->fake_size);
    m->fake_base = NULL;
}

/* Takes fake addresses for chunk c and records it; returns the fake start or NULL. */
static void *add_chunk(sp_mtl *m, sp_mtl_chunk c) {
    uint64_t size = round_up(c.size ? c.size : 1, ALIGN);
    if (m->fake_used + size > m->fake_size) {
        SP_FAIL(SPLASH_ERR_OUT_OF_MEMORY, "metal: out of reserved address space");
        return NULL;
    }
    if (m->n_chunks == m->cap_chunks) {
        int32_t cap = m->cap_chunks ? 2 * m->cap_chunks : 256;
        sp_mtl_chunk *n = realloc(m->chunks, sizeof *n * (size_t)cap);
        if (!n) {
            SP_FAIL(SPLASH_ERR_OUT_OF_MEMORY, "out of memory");
            return NULL;
        }
        m->chunks = n;
        m->cap_chunks = cap;
    }
    c.fake = (uintptr_t)m->fake_base + m->fake_used;
    m->fake_used += size;
    m->chunks[m->n_chunks++] = c; /* fake addresses only grow: the table stays sorted */
    return (void *)c.fake;
}

const sp_mtl_chunk *sp_mtl_chunk_of(const sp_mtl *m, const void *p) {
    uintptr_t x = (uintptr_t)p;
    int32_t lo = 0, hi = m->n_chunks - 1;
    while (lo <= hi) {
        int32_t mid = (lo + hi) / 2;
        const sp_mtl_chunk *c = &m->chunks[mid];
        if (x < c->fake) hi = mid - 1;
        else if (x >= c->fake + c->size) lo = mid + 1;
        else return c;
    }
    return NULL;
}

/* Byte offset of fake address p inside its chunk's device layout (rows padded for weights). */
static uint64_t device_offset(const sp_mtl_chunk *c, const void *p) {
    uint64_t off = (uintptr_t)p - c->fake;
    if (!c->host_row) return off;
    return off / (uint64_t)c->host_row * (uint64_t)c->dev_row + off % (uint64_t)c->host_row;
}

uint64_t sp_mtl_addr(sp_mtl *m, const void *p) {
    const sp_mtl_chunk *c = sp_mtl_chunk_of(m, p);
    if (!c) {
        sp_mtl_fail(m, SPLASH_ERR_INTERNAL, "pointer %p is not backend memory", p);
        return 0;
    }
    return c->gpu + device_offset(c, p);
}

sp_mtl_range sp_mtl_span(sp_mtl *m, const void *p, uint64_t bytes) {
    uint64_t a = sp_mtl_addr(m, p);
    return (sp_mtl_range){a, a + bytes};
}

void *sp_mtl_alloc(const sp_backend *be, uint64_t bytes) {
    sp_mtl *m = sp_mtl_of(be);
    uint64_t size = round_up(bytes ? bytes : 4, ALIGN);
    if (size > m->info.max_buffer) {
        SP_FAIL(SPLASH_ERR_OUT_OF_MEMORY, "metal: %llu bytes is more than one buffer of %s holds (%llu)",
                (unsigned long long)size, m->info.name, (unsigned long long)m->info.max_buffer);
        return NULL;
    }
    sp_mtl_buffer b;
    if (sp_mtl_device_buffer(m, size, &b)) return NULL; /* zero-filled, as alloc promises */
    void *p = add_chunk(m, (sp_mtl_chunk){.size = size, .buffer = b.handle, .host = b.contents, .gpu = b.gpu, .own = b});
    if (!p) sp_mtl_device_release(m, &b);
    return p;
}

void sp_mtl_free(const sp_backend *be, void *p) {
    sp_mtl *m = sp_mtl_of(be);
    const sp_mtl_chunk *c = p ? sp_mtl_chunk_of(m, p) : NULL;
    if (!c || !c->own.handle) return;
    sp_mtl_sync(m); /* encoded work may still use it */
    int32_t i = (int32_t)(c - m->chunks);
    sp_mtl_device_release(m, &m->chunks[i].own);
    memmove(&m->chunks[i], &m->chunks[i + 1], sizeof *c * (size_t)(m->n_chunks - i - 1));
    m->n_chunks--;
}

/* Space for `bytes` of copied weights: the last block if it fits, else a new block. Fresh space, so writing it
 * from the host needs no sync: no encoded work reads it. */
static bool weight_space(sp_mtl *m, uint64_t bytes, sp_mtl_buffer **block, uint64_t *off) {
    if (bytes > m->info.max_buffer) {
        SP_FAIL(SPLASH_ERR_OUT_OF_MEMORY, "metal: a %llu-byte weight is more than one buffer of %s holds",
                (unsigned long long)bytes, m->info.name);
        return false;
    }
    if (!m->n_blocks || m->block_used + bytes > m->blocks[m->n_blocks - 1].size) {
        sp_mtl_buffer *n = realloc(m->blocks, sizeof *n * (size_t)(m->n_blocks + 1));
        if (!n) {
            SP_FAIL(SPLASH_ERR_OUT_OF_MEMORY, "out of memory");
            return false;
        }
        m->blocks = n;
        uint64_t size = bytes > WEIGHT_BLOCK ? bytes : WEIGHT_BLOCK;
        if (size > m->info.max_buffer) size = m->info.max_buffer;
        if (sp_mtl_device_buffer(m, size, &m->blocks[m->n_blocks])) return false;
        m->n_blocks++;
        m->block_used = 0;
    }
    *block = &m->blocks[m->n_blocks - 1];
    *off = m->block_used;
    m->block_used = round_up(m->block_used + bytes, ALIGN);
    return true;
}

const void *sp_mtl_upload(const sp_backend *be, const void *data, int64_t rows, int64_t row_bytes) {
    sp_mtl *m = sp_mtl_of(be);
    uint64_t bytes = (uint64_t)rows * (uint64_t)row_bytes, dev_row = round_up((uint64_t)row_bytes, 16);
    /* rows already 16-byte aligned and in a mapped file: the GPU reads the file's pages where they are */
    if (dev_row == (uint64_t)row_bytes && (uintptr_t)data % 16 == 0 && bytes) {
        sp_mtl_buffer b;
        uint64_t off;
        splash_status st = sp_mtl_device_map(m, data, bytes, &b, &off);
        if (!st) {
            void *p = add_chunk(m, (sp_mtl_chunk){.size = bytes, .buffer = b.handle, .offset = off, .host = b.contents + off,
                                                  .gpu = b.gpu + off, .own = b});
            if (!p) sp_mtl_device_release(m, &b);
            return p;
        }
        if (st != SPLASH_ERR_UNSUPPORTED) return NULL;
    }
    uint64_t total = (uint64_t)rows * dev_row;
    sp_mtl_buffer *block;
    uint64_t off;
    if (!weight_space(m, total ? total : 16, &block, &off)) return NULL;
    uint8_t *dst = block->contents + off;
    if (dev_row == (uint64_t)row_bytes) memcpy(dst, data, (size_t)bytes);
    else
        for (int64_t r = 0; r < rows; r++) /* the padding stays zero: fresh buffers are zero-filled */
            memcpy(dst + (uint64_t)r * dev_row, (const uint8_t *)data + r * row_bytes, (size_t)row_bytes);
    sp_mtl_chunk c = {.size = bytes, .buffer = block->handle, .offset = off, .host = dst, .gpu = block->gpu + off};
    if (dev_row != (uint64_t)row_bytes) c.host_row = row_bytes, c.dev_row = (int64_t)dev_row;
    return add_chunk(m, c);
}

/* The host view of [p, p + bytes), which must lie in one linear chunk (memory the backend allocated). */
static uint8_t *host_view(sp_mtl *m, const void *p, uint64_t bytes) {
    const sp_mtl_chunk *c = sp_mtl_chunk_of(m, p);
    if (!c || c->host_row || (uintptr_t)p + bytes > c->fake + c->size) {
        sp_mtl_fail(m, SPLASH_ERR_INTERNAL, "%llu bytes at %p are not one backend buffer", (unsigned long long)bytes, p);
        return NULL;
    }
    return c->host + ((uintptr_t)p - c->fake);
}

/* The host touches shared memory directly, so encoded work that has not run must finish first: it could read what
 * the host is about to change, or write over it. A step writes its inputs before its first op, when nothing is
 * encoded, so this costs no wait there. */
static bool settle(sp_mtl *m) { return !m->open || sp_mtl_sync(m) == SPLASH_OK; }

void sp_mtl_write(const sp_backend *be, void *dst, const void *src, uint64_t bytes) {
    sp_mtl *m = sp_mtl_of(be);
    uint8_t *h = bytes ? host_view(m, dst, bytes) : NULL;
    if (h && settle(m)) memcpy(h, src, (size_t)bytes);
}

void sp_mtl_read(const sp_backend *be, void *dst, const void *src, uint64_t bytes) {
    sp_mtl *m = sp_mtl_of(be);
    uint8_t *h = bytes ? host_view(m, src, bytes) : NULL;
    if (h && sp_mtl_sync(m) == SPLASH_OK) memcpy(dst, h, (size_t)bytes);
}

void sp_mtl_clear(const sp_backend *be, void *dst, uint64_t bytes) {
    sp_mtl *m = sp_mtl_of(be);
    uint8_t *h = bytes ? host_view(m, dst, bytes) : NULL;
    if (h && settle(m)) memset(h, 0, (size_t)bytes);
}

uint64_t sp_mtl_stage(sp_mtl *m, const void *host, uint64_t bytes) {
    for (int32_t i = 0; i < m->n_stage_cache; i++) {
        const sp_mtl_staged *s = &m->stage_cache[i];
        if (s->host == host && s->bytes == bytes && !memcmp(m->ring.contents + s->offset, host, (size_t)bytes))
            return m->ring.gpu + s->offset;
    }
    uint64_t need = round_up(bytes ? bytes : 4, 16);
    if (need > m->ring.size) {
        sp_mtl_fail(m, SPLASH_ERR_UNSUPPORTED, "%llu bytes of staged data exceed the ring", (unsigned long long)bytes);
        return 0;
    }
    if (m->ring_used + need > m->ring.size && sp_mtl_sync(m)) return 0; /* a sync empties the ring */
    uint64_t at = m->ring_used;
    m->ring_used += need;
    memcpy(m->ring.contents + at, host, (size_t)bytes);
    if (m->n_stage_cache < SP_MTL_STAGE_CACHE) m->stage_cache[m->n_stage_cache++] = (sp_mtl_staged){host, bytes, at};
    return m->ring.gpu + at;
}
