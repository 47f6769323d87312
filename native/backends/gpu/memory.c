/* memory.c — device memory behind fake addresses (see gpu.h): buffers, weights (wrapped in place, or copied with rows
 * padded to 16 bytes), host access (direct where the host sees the memory, staged copies where it does not), and the
 * ring of host data for kernels. */
#include "gpu.h"

#include "core/error.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

enum {
    FAKE_BYTES_LOG2 = 38,            /* 256 GiB of reserved, never-mapped addresses per backend */
    ALIGN = 256,                     /* of every allocation's fake and device start */
    RING_BYTES = 8 << 20,            /* host data for the kernels of one sync's commands */
    UPLOAD_BYTES = 64 << 20,         /* weight upload staging (device memory without a host view) */
    READBACK_BYTES = 1 << 20,        /* read staging, grown on demand */
};
#define WEIGHT_BLOCK (1ull << 30)    /* copied weights are sub-allocated from blocks of this size (or one per larger matrix) */

static uint64_t round_up(uint64_t x, uint64_t a) { return (x + a - 1) / a * a; }

splash_status sp_gpu_memory_init(sp_gpu *g) {
    g->fake_size = 1ull << FAKE_BYTES_LOG2;
    int flags = MAP_PRIVATE | MAP_ANONYMOUS;
#ifdef MAP_NORESERVE
    flags |= MAP_NORESERVE;
#endif
    void *p = mmap(NULL, (size_t)g->fake_size, PROT_NONE, flags, -1, 0);
    if (p == MAP_FAILED) return SP_FAIL(SPLASH_ERR_OUT_OF_MEMORY, "%s: cannot reserve address space", g->name);
    g->fake_base = p;
    splash_status st = g->dev->buffer(g, RING_BYTES, SP_GPU_DEVICE, &g->ring);
    if (!st && !g->ring.host) st = g->dev->buffer(g, RING_BYTES, SP_GPU_UPLOAD, &g->ring_up);
    return st;
}

void sp_gpu_memory_free(sp_gpu *g) {
    for (int32_t i = 0; i < g->n_chunks; i++)
        if (g->chunks[i].owned) g->dev->release(g, &g->chunks[i].buf);
    free(g->chunks);
    g->chunks = NULL;
    g->n_chunks = 0;
    for (int32_t i = 0; i < g->n_blocks; i++) g->dev->release(g, &g->blocks[i]);
    free(g->blocks);
    g->blocks = NULL;
    g->n_blocks = 0;
    sp_gpu_buffer *bufs[] = {&g->ring, &g->ring_up, &g->upload, &g->readback};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) g->dev->release(g, bufs[i]);
    if (g->fake_base) munmap(g->fake_base, (size_t)g->fake_size);
    g->fake_base = NULL;
}

/* Takes fake addresses for chunk c and records it; returns the fake start or NULL. */
static void *add_chunk(sp_gpu *g, sp_gpu_chunk c) {
    uint64_t size = round_up(c.size ? c.size : 1, ALIGN);
    if (g->fake_used + size > g->fake_size) {
        SP_FAIL(SPLASH_ERR_OUT_OF_MEMORY, "%s: out of reserved address space", g->name);
        return NULL;
    }
    if (g->n_chunks == g->cap_chunks) {
        int32_t cap = g->cap_chunks ? 2 * g->cap_chunks : 256;
        sp_gpu_chunk *n = realloc(g->chunks, sizeof *n * (size_t)cap);
        if (!n) {
            SP_FAIL(SPLASH_ERR_OUT_OF_MEMORY, "out of memory");
            return NULL;
        }
        g->chunks = n;
        g->cap_chunks = cap;
    }
    c.fake = (uintptr_t)g->fake_base + g->fake_used;
    g->fake_used += size;
    g->chunks[g->n_chunks++] = c; /* fake addresses only grow: the table stays sorted */
    return (void *)c.fake;
}

const sp_gpu_chunk *sp_gpu_chunk_of(const sp_gpu *g, const void *p) {
    uintptr_t x = (uintptr_t)p;
    int32_t lo = 0, hi = g->n_chunks - 1;
    while (lo <= hi) {
        int32_t mid = (lo + hi) / 2;
        const sp_gpu_chunk *c = &g->chunks[mid];
        if (x < c->fake) hi = mid - 1;
        else if (x >= c->fake + c->size) lo = mid + 1;
        else return c;
    }
    return NULL;
}

/* Byte offset of fake address p in its chunk's buffer (rows padded for weights). */
static uint64_t buffer_offset(const sp_gpu_chunk *c, const void *p) {
    uint64_t off = (uintptr_t)p - c->fake;
    if (c->host_row) off = off / (uint64_t)c->host_row * (uint64_t)c->dev_row + off % (uint64_t)c->host_row;
    return c->offset + off;
}

uint64_t sp_gpu_addr(sp_gpu *g, const void *p) {
    const sp_gpu_chunk *c = sp_gpu_chunk_of(g, p);
    if (!c) {
        sp_gpu_fail(g, SPLASH_ERR_INTERNAL, "pointer %p is not backend memory", p);
        return 0;
    }
    return c->buf.addr + buffer_offset(c, p);
}

sp_gpu_range sp_gpu_span(sp_gpu *g, const void *p, uint64_t bytes) {
    uint64_t a = sp_gpu_addr(g, p);
    return (sp_gpu_range){a, a + bytes};
}

/* Bytes [offset, offset + bytes) of a buffer as a hazard range. */
static sp_gpu_range range(const sp_gpu_buffer *b, uint64_t offset, uint64_t bytes) {
    return (sp_gpu_range){b->addr + offset, b->addr + offset + bytes};
}

void *sp_gpu_alloc(const sp_backend *be, uint64_t bytes) {
    sp_gpu *g = sp_gpu_of(be);
    uint64_t size = round_up(bytes ? bytes : 4, ALIGN);
    if (size > g->max_buffer) {
        SP_FAIL(SPLASH_ERR_OUT_OF_MEMORY, "%s: %llu bytes is more than one buffer of %s holds (%llu)", g->name,
                (unsigned long long)size, g->device_name, (unsigned long long)g->max_buffer);
        return NULL;
    }
    sp_gpu_buffer b;
    if (g->dev->buffer(g, size, SP_GPU_DEVICE, &b)) return NULL;
    void *p = add_chunk(g, (sp_gpu_chunk){.size = size, .buf = b, .owned = true});
    if (!p) g->dev->release(g, &b);
    else if (!b.host) sp_gpu_fill(g, &b, 0, size, range(&b, 0, size)); /* zeroed, as alloc promises */
    return p;
}

void *sp_gpu_scratch(const sp_backend *be, void **buf, uint64_t *have, uint64_t bytes, uint64_t alloc, const char *what) {
    sp_gpu *g = sp_gpu_of(be);
    if (bytes <= *have) return *buf;
    sp_gpu_sync(g); /* the commands recorded so far may use the old buffer */
    if (*buf) sp_gpu_free(be, *buf);
    *have = alloc > bytes ? alloc : bytes;
    if (!(*buf = sp_gpu_alloc(be, *have))) {
        *have = 0;
        sp_gpu_fail_msg(g, SPLASH_ERR_OUT_OF_MEMORY, what);
    }
    return *buf;
}

void sp_gpu_free(const sp_backend *be, void *p) {
    sp_gpu *g = sp_gpu_of(be);
    const sp_gpu_chunk *c = p ? sp_gpu_chunk_of(g, p) : NULL;
    if (!c || !c->owned) return;
    sp_gpu_sync(g); /* recorded commands may still use it */
    int32_t i = (int32_t)(c - g->chunks);
    g->dev->release(g, &g->chunks[i].buf);
    memmove(&g->chunks[i], &g->chunks[i + 1], sizeof *c * (size_t)(g->n_chunks - i - 1));
    g->n_chunks--;
}

/* Space for `bytes` of copied weights: the last block if it fits, else a new block. The space is fresh: no recorded
 * command reads it, and in memory the host sees it is still zero. */
static bool weight_space(sp_gpu *g, uint64_t bytes, sp_gpu_buffer *block, uint64_t *off) {
    if (bytes > g->max_buffer) {
        SP_FAIL(SPLASH_ERR_OUT_OF_MEMORY, "%s: a %llu-byte weight is more than one buffer of %s holds", g->name,
                (unsigned long long)bytes, g->device_name);
        return false;
    }
    if (!g->n_blocks || g->block_used + bytes > g->blocks[g->n_blocks - 1].size) {
        sp_gpu_buffer *n = realloc(g->blocks, sizeof *n * (size_t)(g->n_blocks + 1));
        if (!n) {
            SP_FAIL(SPLASH_ERR_OUT_OF_MEMORY, "out of memory");
            return false;
        }
        g->blocks = n;
        uint64_t size = bytes > WEIGHT_BLOCK ? bytes : WEIGHT_BLOCK;
        if (size > g->max_buffer) size = g->max_buffer;
        if (g->dev->buffer(g, size, SP_GPU_DEVICE, &g->blocks[g->n_blocks])) return false;
        g->n_blocks++;
        g->block_used = 0;
    }
    *block = g->blocks[g->n_blocks - 1];
    *off = g->block_used;
    g->block_used = round_up(g->block_used + bytes, ALIGN);
    return true;
}

/* A host-visible staging buffer of at least `bytes` in *b (made, or remade larger, after a sync). */
static bool staging(sp_gpu *g, sp_gpu_buffer *b, sp_gpu_memory mem, uint64_t bytes) {
    if (b->handle && b->size >= bytes) return true;
    if (b->handle && sp_gpu_sync(g)) return false;
    g->dev->release(g, b);
    return g->dev->buffer(g, bytes, mem, b) == SPLASH_OK;
}

/* Rows [r0, r0 + n) of host weights into dst, each padded with zeros from row_bytes to dev_row. */
static void copy_rows(uint8_t *dst, const void *data, int64_t r0, int64_t n, int64_t row_bytes, uint64_t dev_row) {
    for (int64_t r = 0; r < n; r++) {
        memcpy(dst + (uint64_t)r * dev_row, (const uint8_t *)data + (r0 + r) * row_bytes, (size_t)row_bytes);
        memset(dst + (uint64_t)r * dev_row + (uint64_t)row_bytes, 0, (size_t)(dev_row - (uint64_t)row_bytes));
    }
}

const void *sp_gpu_upload(const sp_backend *be, const void *data, int64_t rows, int64_t row_bytes) {
    sp_gpu *g = sp_gpu_of(be);
    uint64_t bytes = (uint64_t)rows * (uint64_t)row_bytes, dev_row = round_up((uint64_t)row_bytes, 16);
    /* rows already 16-byte aligned and in a mapped file: the GPU reads the file's pages where they are */
    if (g->dev->wrap && dev_row == (uint64_t)row_bytes && (uintptr_t)data % 16 == 0 && bytes) {
        sp_gpu_buffer b;
        uint64_t off;
        splash_status st = g->dev->wrap(g, data, bytes, &b, &off);
        if (!st) {
            void *p = add_chunk(g, (sp_gpu_chunk){.size = bytes, .buf = b, .offset = off, .owned = true});
            if (!p) g->dev->release(g, &b);
            return p;
        }
        if (st != SPLASH_ERR_UNSUPPORTED) return NULL;
    }
    uint64_t total = (uint64_t)rows * dev_row;
    sp_gpu_buffer block;
    uint64_t off;
    if (!weight_space(g, total ? total : 16, &block, &off)) return NULL;
    if (block.host) {
        copy_rows(block.host + off, data, 0, rows, row_bytes, dev_row);
    } else { /* through the upload buffer, as many rows at a time as fit */
        int64_t per = (int64_t)(UPLOAD_BYTES / dev_row);
        if (per < 1) {
            SP_FAIL(SPLASH_ERR_UNSUPPORTED, "%s: a weight row of %lld bytes is larger than the upload buffer", g->name,
                    (long long)row_bytes);
            return NULL;
        }
        if (!staging(g, &g->upload, SP_GPU_UPLOAD, UPLOAD_BYTES)) return NULL;
        for (int64_t r0 = 0; r0 < rows; r0 += per) {
            int64_t n = rows - r0 < per ? rows - r0 : per;
            copy_rows(g->upload.host, data, r0, n, row_bytes, dev_row);
            uint64_t at = off + (uint64_t)r0 * dev_row, len = (uint64_t)n * dev_row;
            sp_gpu_copy(g, &g->upload, 0, &block, at, len, (sp_gpu_range){0, 0}, range(&block, at, len));
            if (sp_gpu_sync(g)) return NULL;
        }
    }
    sp_gpu_chunk c = {.size = bytes, .buf = block, .offset = off};
    if (dev_row != (uint64_t)row_bytes) c.host_row = row_bytes, c.dev_row = (int64_t)dev_row;
    return add_chunk(g, c);
}

/* The chunk holding [p, p + bytes), which must lie in one linear chunk (memory the backend allocated). */
static const sp_gpu_chunk *linear(sp_gpu *g, const void *p, uint64_t bytes) {
    const sp_gpu_chunk *c = sp_gpu_chunk_of(g, p);
    if (!c || c->host_row || (uintptr_t)p + bytes > c->fake + c->size) {
        sp_gpu_fail(g, SPLASH_ERR_INTERNAL, "%llu bytes at %p are not one backend buffer", (unsigned long long)bytes, p);
        return NULL;
    }
    return c;
}

/* Where the host sees device memory it touches it directly, so recorded work that has not run must finish first: it
 * could read what the host is about to change, or write over it. A step writes its inputs before its first op, when
 * nothing is recorded, so this costs no wait there. */
static bool settle(sp_gpu *g) { return !g->pending || sp_gpu_sync(g) == SPLASH_OK; }

/* Ring space for `bytes`, syncing first when the ring is full (a sync empties it); UINT64_MAX on failure. */
static uint64_t ring_take(sp_gpu *g, uint64_t bytes) {
    bytes = round_up(bytes ? bytes : 4, 16);
    if (bytes > g->ring.size) {
        sp_gpu_fail(g, SPLASH_ERR_UNSUPPORTED, "%llu bytes of staged data exceed the ring", (unsigned long long)bytes);
        return UINT64_MAX;
    }
    if (g->ring_used + bytes > g->ring.size && sp_gpu_sync(g)) return UINT64_MAX;
    uint64_t at = g->ring_used;
    g->ring_used += bytes;
    return at;
}

/* The host view of ring offset `at`: the ring itself, or its upload twin. */
static uint8_t *ring_host(sp_gpu *g, uint64_t at) { return (g->ring.host ? g->ring.host : g->ring_up.host) + at; }

void sp_gpu_write(const sp_backend *be, void *dst, const void *src, uint64_t bytes) {
    sp_gpu *g = sp_gpu_of(be);
    const sp_gpu_chunk *c = bytes ? linear(g, dst, bytes) : NULL;
    if (!c) return;
    uint64_t off = buffer_offset(c, dst);
    if (c->buf.host) {
        sp_gpu_wrote(g, range(&c->buf, off, bytes));
        if (settle(g)) memcpy(c->buf.host + off, src, (size_t)bytes);
        return;
    }
    sp_gpu_buffer buf = c->buf; /* the chunk table may move while the ring syncs */
    for (uint64_t done = 0; done < bytes;) { /* through the ring, half of it at a time */
        uint64_t n = bytes - done < g->ring.size / 2 ? bytes - done : g->ring.size / 2;
        uint64_t at = ring_take(g, n);
        if (at == UINT64_MAX) return;
        memcpy(ring_host(g, at), (const uint8_t *)src + done, (size_t)n);
        sp_gpu_copy(g, &g->ring_up, at, &buf, off + done, n, (sp_gpu_range){0, 0}, range(&buf, off + done, n));
        done += n;
    }
}

void sp_gpu_read(const sp_backend *be, void *dst, const void *src, uint64_t bytes) {
    sp_gpu *g = sp_gpu_of(be);
    const sp_gpu_chunk *c = bytes ? linear(g, src, bytes) : NULL;
    if (!c) return;
    uint64_t off = buffer_offset(c, src);
    if (c->buf.host) {
        if (sp_gpu_sync(g) == SPLASH_OK) memcpy(dst, c->buf.host + off, (size_t)bytes);
        return;
    }
    sp_gpu_buffer buf = c->buf;
    if (!staging(g, &g->readback, SP_GPU_READBACK, bytes > READBACK_BYTES ? round_up(bytes, READBACK_BYTES) : READBACK_BYTES))
        return;
    sp_gpu_copy(g, &buf, off, &g->readback, 0, bytes, range(&buf, off, bytes), range(&g->readback, 0, bytes));
    if (sp_gpu_sync(g) == SPLASH_OK) memcpy(dst, g->readback.host, (size_t)bytes);
}

void sp_gpu_clear(const sp_backend *be, void *dst, uint64_t bytes) {
    sp_gpu *g = sp_gpu_of(be);
    const sp_gpu_chunk *c = bytes ? linear(g, dst, bytes) : NULL;
    if (!c) return;
    uint64_t off = buffer_offset(c, dst);
    if (c->buf.host) {
        sp_gpu_wrote(g, range(&c->buf, off, bytes));
        if (settle(g)) memset(c->buf.host + off, 0, (size_t)bytes);
        return;
    }
    sp_gpu_fill(g, &c->buf, off, bytes, range(&c->buf, off, bytes));
}

uint64_t sp_gpu_stage(sp_gpu *g, const void *host, uint64_t bytes) {
    for (int32_t i = 0; i < g->n_stage_cache; i++) {
        const sp_gpu_staged *s = &g->stage_cache[i];
        if (s->host == host && s->bytes == bytes && !memcmp(ring_host(g, s->offset), host, (size_t)bytes))
            return g->ring.addr + s->offset;
    }
    uint64_t at = ring_take(g, bytes);
    if (at == UINT64_MAX) return 0;
    memcpy(ring_host(g, at), host, (size_t)bytes);
    if (!g->ring.host)
        sp_gpu_copy(g, &g->ring_up, at, &g->ring, at, round_up(bytes, 4), (sp_gpu_range){0, 0}, range(&g->ring, at, bytes));
    if (g->n_stage_cache < SP_GPU_STAGE_CACHE) g->stage_cache[g->n_stage_cache++] = (sp_gpu_staged){host, bytes, at};
    return g->ring.addr + at;
}
