/* mtl.h — the Metal backend's internals. Two layers:
 *
 * - The portable part (memory.c, record.c, ops.c, backend.c: plain C11) owns every decision: which kernel, which
 *   function constants, how many threadgroups and threads, what goes in the push constants, where each byte lives,
 *   when a barrier is needed. It is compiled and tested on Linux (native/tests/metal_host_test.c runs it against
 *   the CPU backend over the Vulkan device, with every dispatch checked against the kernel table).
 * - The device layer (the sp_mtl_device_* functions below) is the only code that calls Metal: device.m on macOS.
 *   It follows orders and decides nothing.
 *
 * Memory model. Ops take pointers (backends/backend.h). As in the Vulkan backend, every byte the backend owns has
 * an address in a reserved, never-mapped range of this process (a host touch crashes instead of racing the GPU);
 * a sorted chunk table maps it to its buffer, its device address (MTLBuffer.gpuAddress + offset, what kernels read
 * through their push constants) and its host view (unified memory: MTLBuffer.contents + offset, what write, read
 * and clear use). Weight rows are padded on the device to 16 bytes where a row is not already a multiple; weights
 * whose rows need no padding and whose pages belong to a mapped file are wrapped without a copy.
 *
 * Execution model. Ops encode into one compute encoder of one command buffer, open from the first op until a sync
 * (any read back to the host: logits, sampled tokens, which ends a step), so one step is one command buffer. The
 * encoder dispatches concurrently; a barrier (memoryBarrierWithScope:MTLBarrierScopeBuffers) comes only where a
 * dispatch reads or writes memory an earlier one since the last barrier wrote (or, for writes, read): each op
 * declares its device-address ranges. SPLASH_METAL_BARRIERS=all puts one before every dispatch (debugging). Host
 * data a kernel needs (page tables, row lists) is copied into a ring of shared memory at encode time and is valid
 * until the next sync. */
#ifndef SP_MTL_H
#define SP_MTL_H

#include "backends/backend.h"
#include "metal.h"
#include "metal_kernels.h"

#include <stdbool.h>
#include <stdint.h>

enum {
    SP_MTL_MAX_RANGES = 48,     /* hazard ranges remembered between barriers */
    SP_MTL_PUSH_BYTES = 128,    /* the most push bytes a kernel takes (setBytes: well under its 4 KiB) */
    SP_MTL_MAX_PIPELINES = 256,
    SP_MTL_STAGE_CACHE = 64,
    SP_MTL_MAX_EXPERT_TABLES = 1024,
};

/* A device address range [lo, hi) an op reads or writes. */
typedef struct sp_mtl_range {
    uint64_t lo, hi;
} sp_mtl_range;

/* A buffer of the device layer: shared storage, seen by the host at `contents` and by kernels at `gpu`. */
typedef struct sp_mtl_buffer {
    void *handle;       /* the device layer's object (id<MTLBuffer>, retained), NULL = none */
    uint8_t *contents;  /* host view of byte 0 */
    uint64_t gpu;       /* device address of byte 0 */
    uint64_t size;
} sp_mtl_buffer;

/* A run of fake addresses backed by buffer memory. */
typedef struct sp_mtl_chunk {
    uintptr_t fake;          /* first fake address */
    uint64_t size;           /* fake bytes (host layout) */
    void *buffer;            /* the buffer holding it (handle), and where in it */
    uint64_t offset;
    uint8_t *host;           /* host view of the first byte */
    uint64_t gpu;            /* device address of the first byte */
    int64_t host_row, dev_row; /* padded weight rows (row r at fake + r·host_row, gpu + r·dev_row); 0 = linear */
    sp_mtl_buffer own;       /* a buffer of its own, released with the chunk; handle NULL for sub-allocated weights */
} sp_mtl_chunk;

/* Host data staged in the ring at `offset` (valid until the next sync). */
typedef struct sp_mtl_staged {
    const void *host;
    uint64_t bytes, offset;
} sp_mtl_staged;

/* The device table of one MoE layer's expert row-0 addresses, keyed by its gate views and what they view. */
typedef struct sp_mtl_expert_table {
    const sp_matrix *key;
    const void *first;       /* gate[0].data */
    int32_t n_experts;
    const uint64_t *table;   /* backend memory: [E][gate, up, down] */
    uint32_t gate_stride, down_stride;
} sp_mtl_expert_table;

typedef struct sp_mtl_pipeline {
    sp_mtl_kernel_id kernel;
    uint32_t spec[4];
    void *handle;            /* id<MTLComputePipelineState>, retained */
    uint32_t max_threads;    /* its maxTotalThreadsPerThreadgroup */
} sp_mtl_pipeline;

typedef struct sp_mtl {
    sp_metal_info info;
    void *device;            /* the device layer's state */

    /* fake address space */
    uint8_t *fake_base;
    uint64_t fake_size, fake_used;
    sp_mtl_chunk *chunks;
    int32_t n_chunks, cap_chunks;

    /* weights whose rows are copied: sub-allocated from large buffers */
    sp_mtl_buffer *blocks;
    int32_t n_blocks;
    uint64_t block_used;     /* bytes used in the last block */

    /* host data for this command buffer's kernels, and the greedy sampler's results */
    sp_mtl_buffer ring, stats;
    uint64_t ring_used;
    sp_mtl_staged stage_cache[SP_MTL_STAGE_CACHE];
    int32_t n_stage_cache;

    /* pipelines */
    sp_mtl_pipeline pipelines[SP_MTL_MAX_PIPELINES];
    int32_t n_pipelines;

    /* encoding */
    bool open;               /* a command buffer holds encoded work that has not run yet */
    sp_mtl_range reads[SP_MTL_MAX_RANGES], writes[SP_MTL_MAX_RANGES];
    int32_t n_reads, n_writes;
    bool barrier_all;        /* SPLASH_METAL_BARRIERS=all */
    uint64_t n_dispatches, n_barriers, n_commits;

    /* attention split partials (grown on demand) and MoE expert address tables */
    float *part;
    uint64_t part_bytes;
    sp_mtl_expert_table expert_tables[SP_MTL_MAX_EXPERT_TABLES];
    int32_t n_expert_tables;

    splash_status *status;   /* the backend's op status (first failure wins) */
} sp_mtl;

static inline sp_mtl *sp_mtl_of(const sp_backend *be) { return (sp_mtl *)be->impl; }

/* Records a failure (the first one stays) in *m->status and returns false. */
bool sp_mtl_fail(sp_mtl *m, splash_status st, const char *fmt, ...);

/* ---- the device layer (device.m on macOS; the host test's adapter on Linux) ---- */

/* Opens the default GPU: device, queue, residency set; fills m->info. Fails with SPLASH_ERR_UNSUPPORTED and a
 * message naming what is missing when the GPU cannot run the kernels. */
splash_status sp_mtl_device_open(sp_mtl *m);
void sp_mtl_device_close(sp_mtl *m);
/* A new shared buffer of `bytes`, zero-filled, resident for every command buffer until released. */
splash_status sp_mtl_device_buffer(sp_mtl *m, uint64_t bytes, sp_mtl_buffer *b);
/* Wraps the pages holding [data, data + bytes) without copying them, when they belong to a mapped file; *offset is
 * data's offset in the buffer. SPLASH_ERR_UNSUPPORTED (and no message) when the memory cannot be wrapped. */
splash_status sp_mtl_device_map(sp_mtl *m, const void *data, uint64_t bytes, sp_mtl_buffer *b, uint64_t *offset);
/* Releases a buffer (none of the encoded work may still use it: callers sync first); no-op when b->handle is NULL. */
void sp_mtl_device_release(sp_mtl *m, sp_mtl_buffer *b);
/* The pipeline of kernel k with function constant i = spec[i] for each constant i the kernel declares;
 * *max_threads = the most threads per threadgroup it can run. NULL (and a message) on failure. */
void *sp_mtl_device_pipeline(sp_mtl *m, sp_mtl_kernel_id k, const uint32_t spec[4], uint32_t *max_threads);
void sp_mtl_device_release_pipeline(sp_mtl *m, void *pipeline);
/* Encodes one dispatch: optionally a barrier first, then the pipeline, `push` at buffer index push_index, and
 * groups[0..2] threadgroups of threads[0..2] threads, or the threadgroup counts at indirect + indirect_offset. */
splash_status sp_mtl_device_dispatch(sp_mtl *m, void *pipeline, const void *push, uint32_t push_bytes, uint32_t push_index,
                                     const uint32_t groups[3], const uint32_t threads[3], bool barrier,
                                     void *indirect, uint64_t indirect_offset);
/* Ends encoding, commits the command buffer and waits for it; no-op when nothing is encoded. */
splash_status sp_mtl_device_finish(sp_mtl *m);

/* ---- memory.c ---- */
splash_status sp_mtl_memory_init(sp_mtl *m);
void sp_mtl_memory_free(sp_mtl *m);
/* The chunk holding fake address p, or NULL. */
const sp_mtl_chunk *sp_mtl_chunk_of(const sp_mtl *m, const void *p);
/* Device address of fake address p (0 and a recorded failure when p is not the backend's). */
uint64_t sp_mtl_addr(sp_mtl *m, const void *p);
/* [addr(p), addr(p) + bytes) as a hazard range. */
sp_mtl_range sp_mtl_span(sp_mtl *m, const void *p, uint64_t bytes);
/* Copies `bytes` of host data for the kernels of this command buffer; returns its device address (0 on failure). */
uint64_t sp_mtl_stage(sp_mtl *m, const void *host, uint64_t bytes);
void *sp_mtl_alloc(const sp_backend *be, uint64_t bytes);
void sp_mtl_free(const sp_backend *be, void *p);
const void *sp_mtl_upload(const sp_backend *be, const void *data, int64_t rows, int64_t row_bytes);
void sp_mtl_write(const sp_backend *be, void *dst, const void *src, uint64_t bytes);
void sp_mtl_read(const sp_backend *be, void *dst, const void *src, uint64_t bytes);
void sp_mtl_clear(const sp_backend *be, void *dst, uint64_t bytes);

/* ---- record.c ---- */
/* Encodes kernel k with function constants spec[0..3] (spec[0] = threads per threadgroup, the kernels' x size;
 * constants the kernel does not declare must be 0) and push constants `push`, after the barrier its ranges need.
 * indirect: backend memory holding the threadgroup counts (3 × uint32) instead of groups. Checks the dispatch
 * against the kernel table (push size, declared constants, thread limits) and fails the op status otherwise. */
void sp_mtl_dispatch(sp_mtl *m, sp_mtl_kernel_id k, const uint32_t spec[4], const void *push, uint32_t push_bytes,
                     const uint32_t groups[3], const sp_mtl_range *reads, int32_t n_reads, const sp_mtl_range *writes,
                     int32_t n_writes, const void *indirect);
/* Runs what is encoded and waits; the ring is free again after it. */
splash_status sp_mtl_sync(sp_mtl *m);
/* Splits n threadgroups into a 2-D grid (x ≤ 65535), as the kernels' flat_group() expects. */
void sp_mtl_grid(uint64_t n, uint32_t groups[3]);
void sp_mtl_record_free(sp_mtl *m);

/* ---- ops.c ---- */
void sp_mtl_ops_install(sp_backend *be);

#endif
