/* memory.c — device memory behind fake addresses (see vk.h), weight uploads, and the staging paths between host
 * and device. */
#include "vk.h"

#include "core/error.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

enum {
    FAKE_BYTES_LOG2 = 38,            /* 256 GiB of reserved, never-mapped addresses per backend */
    ALIGN = 256,                     /* of every allocation's fake and device start */
    RING_BYTES = 8 << 20,            /* host → device staging ring */
    UPLOAD_BYTES = 64 << 20,         /* weight upload staging */
};
#define WEIGHT_BLOCK (1ull << 30)    /* weights are sub-allocated from blocks of this size (or one per larger matrix) */

static uint64_t round_up(uint64_t x, uint64_t a) { return (x + a - 1) / a * a; }

splash_status sp_vk_buffer_create(sp_vk *vk, uint64_t size, uint32_t mem_type, sp_vk_buffer *b) {
    sp_vk_api *a = &vk->api;
    memset(b, 0, sizeof *b);
    b->size = size;
    VkBufferCreateInfo bi = {.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO, .size = size,
                             .usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT |
                                      VK_BUFFER_USAGE_TRANSFER_DST_BIT | VK_BUFFER_USAGE_SHADER_DEVICE_ADDRESS_BIT |
                                      VK_BUFFER_USAGE_INDIRECT_BUFFER_BIT,
                             .sharingMode = VK_SHARING_MODE_EXCLUSIVE};
    VkResult r = a->vkCreateBuffer(vk->device, &bi, NULL, &b->buffer);
    if (r != VK_SUCCESS) return sp_vk_fail(vk, r, "vkCreateBuffer");
    VkMemoryRequirements req;
    a->vkGetBufferMemoryRequirements(vk->device, b->buffer, &req);
    VkMemoryAllocateFlagsInfo flags = {.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_FLAGS_INFO,
                                       .flags = VK_MEMORY_ALLOCATE_DEVICE_ADDRESS_BIT};
    VkMemoryAllocateInfo ai = {.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO, .pNext = &flags,
                               .allocationSize = req.size, .memoryTypeIndex = mem_type};
    if (!(req.memoryTypeBits & (1u << mem_type))) {
        sp_vk_buffer_destroy(vk, b);
        return sp_vk_fail(vk, VK_ERROR_FEATURE_NOT_PRESENT, "buffer memory type");
    }
    if ((r = a->vkAllocateMemory(vk->device, &ai, NULL, &b->memory)) != VK_SUCCESS ||
        (r = a->vkBindBufferMemory(vk->device, b->buffer, b->memory, 0)) != VK_SUCCESS) {
        sp_vk_buffer_destroy(vk, b);
        return r == VK_ERROR_OUT_OF_DEVICE_MEMORY || r == VK_ERROR_OUT_OF_HOST_MEMORY
                   ? SP_FAIL(SPLASH_ERR_OUT_OF_MEMORY, "vulkan: out of device memory for %llu bytes", (unsigned long long)size)
                   : sp_vk_fail(vk, r, "vkAllocateMemory");
    }
    VkBufferDeviceAddressInfo di = {.sType = VK_STRUCTURE_TYPE_BUFFER_DEVICE_ADDRESS_INFO, .buffer = b->buffer};
    b->addr = a->vkGetBufferDeviceAddress(vk->device, &di);
    if (mem_type == vk->mem_upload || mem_type == vk->mem_readback) {
        if ((r = a->vkMapMemory(vk->device, b->memory, 0, VK_WHOLE_SIZE, 0, &b->map)) != VK_SUCCESS) {
            sp_vk_buffer_destroy(vk, b);
            return sp_vk_fail(vk, r, "vkMapMemory");
        }
    }
    return SPLASH_OK;
}

void sp_vk_buffer_destroy(sp_vk *vk, sp_vk_buffer *b) {
    sp_vk_api *a = &vk->api;
    if (b->map) a->vkUnmapMemory(vk->device, b->memory);
    if (b->buffer) a->vkDestroyBuffer(vk->device, b->buffer, NULL);
    if (b->memory) a->vkFreeMemory(vk->device, b->memory, NULL);
    memset(b, 0, sizeof *b);
}

splash_status sp_vk_memory_init(sp_vk *vk) {
    vk->fake_size = 1ull << FAKE_BYTES_LOG2;
    void *p = mmap(NULL, (size_t)vk->fake_size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) return SP_FAIL(SPLASH_ERR_OUT_OF_MEMORY, "vulkan: cannot reserve address space");
    vk->fake_base = p;
    splash_status st;
    if ((st = sp_vk_buffer_create(vk, RING_BYTES, vk->mem_upload, &vk->ring_host)) ||
        (st = sp_vk_buffer_create(vk, RING_BYTES, vk->mem_device, &vk->ring_dev)) ||
        (st = sp_vk_buffer_create(vk, 1 << 20, vk->mem_readback, &vk->readback)) ||
        (st = sp_vk_buffer_create(vk, 4096, vk->mem_device, &vk->stats)))
        return st;
    return SPLASH_OK;
}

void sp_vk_memory_free(sp_vk *vk) {
    for (int32_t i = 0; i < vk->n_chunks; i++) {
        sp_vk_chunk *c = &vk->chunks[i];
        if (c->own_buffer) vk->api.vkDestroyBuffer(vk->device, c->own_buffer, NULL);
        if (c->own_memory) vk->api.vkFreeMemory(vk->device, c->own_memory, NULL);
    }
    free(vk->chunks);
    vk->chunks = NULL;
    vk->n_chunks = 0;
    for (int32_t i = 0; i < vk->n_blocks; i++) sp_vk_buffer_destroy(vk, &vk->blocks[i]);
    free(vk->blocks);
    vk->blocks = NULL;
    sp_vk_buffer *bufs[] = {&vk->ring_host, &vk->ring_dev, &vk->readback, &vk->upload, &vk->stats};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) sp_vk_buffer_destroy(vk, bufs[i]);
    if (vk->fake_base) munmap(vk->fake_base, (size_t)vk->fake_size);
    vk->fake_base = NULL;
}

/* Takes `bytes` of fake addresses and records the chunk behind them; returns the fake start or NULL. */
static void *add_chunk(sp_vk *vk, sp_vk_chunk c) {
    uint64_t size = round_up(c.size ? c.size : 1, ALIGN);
    if (vk->fake_used + size > vk->fake_size) {
        SP_FAIL(SPLASH_ERR_OUT_OF_MEMORY, "vulkan: out of reserved address space");
        return NULL;
    }
    if (vk->n_chunks == vk->cap_chunks) {
        int32_t cap = vk->cap_chunks ? 2 * vk->cap_chunks : 256;
        sp_vk_chunk *n = realloc(vk->chunks, sizeof *n * (size_t)cap);
        if (!n) return NULL;
        vk->chunks = n;
        vk->cap_chunks = cap;
    }
    c.fake = (uintptr_t)vk->fake_base + vk->fake_used;
    vk->fake_used += size;
    vk->chunks[vk->n_chunks++] = c; /* fake addresses only grow: the table stays sorted */
    return (void *)c.fake;
}

const sp_vk_chunk *sp_vk_chunk_of(const sp_vk *vk, const void *p) {
    uintptr_t x = (uintptr_t)p;
    int32_t lo = 0, hi = vk->n_chunks - 1;
    while (lo <= hi) {
        int32_t mid = (lo + hi) / 2;
        const sp_vk_chunk *c = &vk->chunks[mid];
        if (x < c->fake) hi = mid - 1;
        else if (x >= c->fake + c->size) lo = mid + 1;
        else return c;
    }
    return NULL;
}

static VkDeviceAddress chunk_addr(const sp_vk_chunk *c, const void *p) {
    uint64_t off = (uintptr_t)p - c->fake;
    if (!c->host_row) return c->addr + off;
    return c->addr + off / (uint64_t)c->host_row * (uint64_t)c->dev_row + off % (uint64_t)c->host_row;
}

VkDeviceAddress sp_vk_addr(sp_vk *vk, const void *p) {
    const sp_vk_chunk *c = sp_vk_chunk_of(vk, p);
    if (!c) {
        if (*vk->status == SPLASH_OK)
            *vk->status = SP_FAIL(SPLASH_ERR_INTERNAL, "vulkan: pointer %p is not backend memory", p);
        return 0;
    }
    return chunk_addr(c, p);
}

sp_vk_range sp_vk_span(sp_vk *vk, const void *p, uint64_t bytes) {
    VkDeviceAddress a = sp_vk_addr(vk, p);
    return (sp_vk_range){a, a + bytes};
}

void *sp_vk_alloc(const sp_backend *be, uint64_t bytes) {
    sp_vk *vk = sp_vk_of(be);
    uint64_t size = round_up(bytes ? bytes : 4, ALIGN);
    if (size > vk->max_buffer) {
        SP_FAIL(SPLASH_ERR_OUT_OF_MEMORY, "vulkan: %llu bytes is more than one buffer of %s holds (%llu)",
                (unsigned long long)size, vk->props.deviceName, (unsigned long long)vk->max_buffer);
        return NULL;
    }
    sp_vk_buffer b;
    if (sp_vk_buffer_create(vk, size, vk->mem_device, &b)) return NULL;
    void *p = add_chunk(vk, (sp_vk_chunk){.size = size, .buffer = b.buffer, .addr = b.addr, .own_memory = b.memory,
                                          .own_buffer = b.buffer});
    if (!p) {
        sp_vk_buffer_destroy(vk, &b);
        return NULL;
    }
    sp_vk_fill(vk, b.buffer, 0, size, (sp_vk_range){b.addr, b.addr + size}); /* zeroed, as alloc promises */
    return p;
}

void sp_vk_free(const sp_backend *be, void *p) {
    sp_vk *vk = sp_vk_of(be);
    const sp_vk_chunk *c = p ? sp_vk_chunk_of(vk, p) : NULL;
    if (!c || !c->own_buffer) return;
    sp_vk_sync(vk); /* commands in flight may still use it */
    vk->api.vkDestroyBuffer(vk->device, c->own_buffer, NULL);
    vk->api.vkFreeMemory(vk->device, c->own_memory, NULL);
    int32_t i = (int32_t)(c - vk->chunks);
    memmove(&vk->chunks[i], &vk->chunks[i + 1], sizeof *c * (size_t)(vk->n_chunks - i - 1));
    vk->n_chunks--;
}

/* Device space for `bytes` of weights: the last block if it fits, else a new block. */
static splash_status weight_space(sp_vk *vk, uint64_t bytes, VkBuffer *buf, uint64_t *off, VkDeviceAddress *addr) {
    if (bytes > vk->max_buffer)
        return SP_FAIL(SPLASH_ERR_OUT_OF_MEMORY, "vulkan: a %llu-byte weight is more than one buffer of %s holds",
                       (unsigned long long)bytes, vk->props.deviceName);
    if (!vk->n_blocks || vk->block_used + bytes > vk->blocks[vk->n_blocks - 1].size) {
        sp_vk_buffer *n = realloc(vk->blocks, sizeof *n * (size_t)(vk->n_blocks + 1));
        if (!n) return SP_FAIL(SPLASH_ERR_OUT_OF_MEMORY, "out of memory");
        vk->blocks = n;
        uint64_t size = bytes > WEIGHT_BLOCK ? bytes : WEIGHT_BLOCK;
        if (size > vk->max_buffer) size = vk->max_buffer;
        splash_status st = sp_vk_buffer_create(vk, size, vk->mem_device, &vk->blocks[vk->n_blocks]);
        if (st) return st;
        vk->n_blocks++;
        vk->block_used = 0;
    }
    sp_vk_buffer *b = &vk->blocks[vk->n_blocks - 1];
    *buf = b->buffer;
    *off = vk->block_used;
    *addr = b->addr + vk->block_used;
    vk->block_used = round_up(vk->block_used + bytes, ALIGN);
    return SPLASH_OK;
}

const void *sp_vk_upload(const sp_backend *be, const void *data, int64_t rows, int64_t row_bytes) {
    sp_vk *vk = sp_vk_of(be);
    uint64_t dev_row = round_up((uint64_t)row_bytes, 16), total = (uint64_t)rows * dev_row;
    VkBuffer buf = VK_NULL_HANDLE;
    uint64_t off = 0;
    VkDeviceAddress addr = 0;
    if (weight_space(vk, total ? total : 16, &buf, &off, &addr)) return NULL;
    if (!vk->upload.buffer && sp_vk_buffer_create(vk, UPLOAD_BYTES, vk->mem_upload, &vk->upload)) return NULL;
    /* rows go through the staging buffer, padded, as many at a time as fit */
    int64_t per = (int64_t)(UPLOAD_BYTES / dev_row);
    if (per < 1) {
        SP_FAIL(SPLASH_ERR_UNSUPPORTED, "vulkan: a weight row of %lld bytes is larger than the upload buffer", (long long)row_bytes);
        return NULL;
    }
    for (int64_t r0 = 0; r0 < rows; r0 += per) {
        int64_t n = rows - r0 < per ? rows - r0 : per;
        uint8_t *dst = vk->upload.map;
        for (int64_t r = 0; r < n; r++) {
            memcpy(dst + r * dev_row, (const uint8_t *)data + (r0 + r) * row_bytes, (size_t)row_bytes);
            memset(dst + r * dev_row + row_bytes, 0, (size_t)(dev_row - (uint64_t)row_bytes));
        }
        uint64_t at = off + (uint64_t)r0 * dev_row, bytes = (uint64_t)n * dev_row;
        sp_vk_copy(vk, vk->upload.buffer, 0, buf, at, bytes, (sp_vk_range){0, 0},
                   (sp_vk_range){addr + (uint64_t)r0 * dev_row, addr + (uint64_t)r0 * dev_row + bytes});
        if (sp_vk_sync(vk)) return NULL;
    }
    sp_vk_chunk c = {.size = (uint64_t)rows * (uint64_t)row_bytes, .buffer = buf, .offset = off, .addr = addr};
    if (dev_row != (uint64_t)row_bytes) c.host_row = row_bytes, c.dev_row = (int64_t)dev_row;
    return add_chunk(vk, c);
}

/* Where in its buffer fake address p lives (device-linear chunks only: buffers the backend allocated). */
static bool locate(sp_vk *vk, const void *p, uint64_t bytes, VkBuffer *buf, uint64_t *off) {
    const sp_vk_chunk *c = sp_vk_chunk_of(vk, p);
    if (!c || c->host_row || (uintptr_t)p + bytes > c->fake + c->size) {
        if (*vk->status == SPLASH_OK)
            *vk->status = SP_FAIL(SPLASH_ERR_INTERNAL, "vulkan: %llu bytes at %p are not one backend buffer",
                                  (unsigned long long)bytes, p);
        return false;
    }
    *buf = c->buffer;
    *off = c->offset + ((uintptr_t)p - c->fake);
    return true;
}

/* Ring space for `bytes`, syncing first when the ring is full (a sync empties it); UINT64_MAX on failure. */
static uint64_t ring_take(sp_vk *vk, uint64_t bytes) {
    bytes = round_up(bytes, 16);
    if (vk->ring_used + bytes > vk->ring_host.size) {
        if (sp_vk_sync(vk)) return UINT64_MAX;
    }
    uint64_t at = vk->ring_used;
    vk->ring_used += bytes;
    return at;
}

VkDeviceAddress sp_vk_stage(sp_vk *vk, const void *host, uint64_t bytes) {
    for (int32_t i = 0; i < vk->n_stage_cache; i++)
        if (vk->stage_cache[i].host == host && vk->stage_cache[i].bytes == bytes &&
            !memcmp((uint8_t *)vk->ring_host.map + vk->stage_cache[i].offset, host, (size_t)bytes))
            return vk->ring_dev.addr + vk->stage_cache[i].offset;
    if (bytes > vk->ring_host.size) {
        SP_FAIL(SPLASH_ERR_UNSUPPORTED, "vulkan: %llu bytes of staged data exceed the ring", (unsigned long long)bytes);
        if (*vk->status == SPLASH_OK) *vk->status = SPLASH_ERR_UNSUPPORTED;
        return 0;
    }
    uint64_t at = ring_take(vk, bytes);
    if (at == UINT64_MAX) return 0;
    memcpy((uint8_t *)vk->ring_host.map + at, host, (size_t)bytes);
    sp_vk_copy(vk, vk->ring_host.buffer, at, vk->ring_dev.buffer, at, round_up(bytes, 4), (sp_vk_range){0, 0},
               (sp_vk_range){vk->ring_dev.addr + at, vk->ring_dev.addr + at + bytes});
    if (vk->n_stage_cache < SP_VK_STAGE_CACHE) vk->stage_cache[vk->n_stage_cache++] = (sp_vk_staged){host, bytes, at};
    return vk->ring_dev.addr + at;
}

void sp_vk_write(const sp_backend *be, void *dst, const void *src, uint64_t bytes) {
    sp_vk *vk = sp_vk_of(be);
    VkBuffer buf;
    uint64_t off;
    if (!bytes || !locate(vk, dst, bytes, &buf, &off)) return;
    VkDeviceAddress a = sp_vk_addr(vk, dst);
    for (uint64_t done = 0; done < bytes;) {
        uint64_t n = bytes - done < vk->ring_host.size / 2 ? bytes - done : vk->ring_host.size / 2;
        uint64_t at = ring_take(vk, n);
        if (at == UINT64_MAX) return;
        memcpy((uint8_t *)vk->ring_host.map + at, (const uint8_t *)src + done, (size_t)n);
        sp_vk_copy(vk, vk->ring_host.buffer, at, buf, off + done, n, (sp_vk_range){0, 0},
                   (sp_vk_range){a + done, a + done + n});
        done += n;
    }
}

void sp_vk_read(const sp_backend *be, void *dst, const void *src, uint64_t bytes) {
    sp_vk *vk = sp_vk_of(be);
    VkBuffer buf;
    uint64_t off;
    if (!bytes || !locate(vk, src, bytes, &buf, &off)) return;
    if (bytes > vk->readback.size) {
        sp_vk_sync(vk);
        sp_vk_buffer_destroy(vk, &vk->readback);
        if (sp_vk_buffer_create(vk, round_up(bytes, 1 << 20), vk->mem_readback, &vk->readback)) return;
    }
    VkDeviceAddress a = sp_vk_addr(vk, src);
    sp_vk_copy(vk, buf, off, vk->readback.buffer, 0, bytes, (sp_vk_range){a, a + bytes},
               (sp_vk_range){vk->readback.addr, vk->readback.addr + bytes});
    if (sp_vk_sync(vk) == SPLASH_OK) memcpy(dst, vk->readback.map, (size_t)bytes);
}

void sp_vk_clear(const sp_backend *be, void *dst, uint64_t bytes) {
    sp_vk *vk = sp_vk_of(be);
    VkBuffer buf;
    uint64_t off;
    if (!bytes || !locate(vk, dst, bytes, &buf, &off)) return;
    VkDeviceAddress a = sp_vk_addr(vk, dst);
    sp_vk_fill(vk, buf, off, round_up(bytes, 4), (sp_vk_range){a, a + bytes});
}
