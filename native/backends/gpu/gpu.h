/* gpu.h — the GPU op layer the Vulkan and Metal backends share, over a small device interface.
 *
 * Both backends run the same kernels (kernels/: SPIR-V on Vulkan, its SPIRV-Cross translation on Metal), so every
 * decision is made once, here, and tested on Linux: which kernel and specialization values an op runs, its push
 * constants and dispatch size (ops*.c), launch parameters per shape (tuning.c), where every byte lives and how the
 * host reaches it (memory.c), when a barrier is needed (record.c). A backend fills an sp_gpu_device: the API calls
 * that make buffers and pipelines and record what they are told, deciding nothing.
 *
 * Memory model. Ops take pointers (backends/backend.h), so every byte the backend owns has an address in a range of
 * this process's virtual address space that is reserved and never mapped (PROT_NONE): a host access is a crash, not
 * silent garbage or a race with the GPU. A sorted table of chunks maps such a pointer to its buffer, to the device
 * address kernels read (push constants carry 64-bit addresses) and, where the host sees the buffer (unified memory),
 * to its host view. Weight rows are padded on the device to 16 bytes for vector loads; their chunk remembers both row
 * sizes. Where the host sees device memory (Metal), write/read/clear are memcpy once the work that may use the bytes
 * has run, and weights in a mapped file may be wrapped without a copy; where it does not (Vulkan on a discrete GPU),
 * they go through host-visible staging buffers and copies in the command stream.
 *
 * Execution model. An op records a dispatch; nothing runs until a submission (a device with `submit` starts one every
 * SP_GPU_SUBMIT_EVERY commands, so the GPU starts while the host records the rest of a step) or a sync: a read back
 * to the host (logits, sampled tokens), which ends a step. A barrier comes only where a command reads or writes
 * memory that an earlier command since the last barrier wrote (or, for writes, read): each op declares its address
 * ranges. SPLASH_VULKAN_BARRIERS=all / SPLASH_METAL_BARRIERS=all put one before every command (debugging). Small host
 * data a kernel needs (page tables, row lists) is staged through a ring, valid until the next sync.
 */
#ifndef SP_GPU_H
#define SP_GPU_H

#include "backends/backend.h"
#include "gpu_kernels.h"

#include <stdbool.h>
#include <stdint.h>

enum {
    SP_GPU_SUBMIT_EVERY = 96,      /* commands per submission, for a device that submits before a sync */
    SP_GPU_MAX_RANGES = 48,        /* hazard ranges remembered between barriers */
    SP_GPU_PUSH_BYTES = 128,       /* the most push-constant bytes a kernel takes (what every Vulkan device has) */
    SP_GPU_MAX_THREADS = 1024,     /* invocations per workgroup any kernel is specialized for */
    SP_GPU_MAX_PIPELINES = 256,
    SP_GPU_STAGE_CACHE = 64,
    SP_GPU_MAX_EXPERT_TABLES = 1024,
    SP_GPU_MAX_TUNINGS = 256,
};

typedef struct sp_gpu sp_gpu;

/* What a buffer is for, so the device can place it. */
typedef enum sp_gpu_memory {
    SP_GPU_DEVICE,   /* what kernels read and write; the host sees it (unified memory) or not */
    SP_GPU_UPLOAD,   /* host-visible, written by the host: staging toward device memory */
    SP_GPU_READBACK, /* host-visible and cached, read by the host */
} sp_gpu_memory;

/* A buffer of the device. */
typedef struct sp_gpu_buffer {
    void *handle, *memory; /* the device's objects (Vulkan: VkBuffer, VkDeviceMemory; Metal: id<MTLBuffer>, unused) */
    uint8_t *host;         /* host view of byte 0; NULL when the host cannot touch it */
    uint64_t addr;         /* device address of byte 0: what kernels are given */
    uint64_t size;
} sp_gpu_buffer;

/* One dispatch as the op layer decided it. */
typedef struct sp_gpu_launch {
    void *pipeline;                  /* from sp_gpu_device.pipeline */
    sp_gpu_kernel_id kernel;
    const char *op;                  /* the op recording it (profiles) */
    uint32_t threads;                /* invocations per workgroup: the kernel's spec constant 0 */
    const void *push;                /* the kernel's push constants (Metal: setBytes at the kernel's push index) */
    uint32_t push_bytes;
    uint32_t groups[3];              /* workgroups, unless indirect */
    const sp_gpu_buffer *indirect;   /* NULL, or the buffer holding the workgroup counts (3 × uint32) … */
    uint64_t indirect_offset;        /* … at this byte offset (a multiple of 4) */
    bool barrier;                    /* first wait for every earlier command and see its writes */
} sp_gpu_launch;

/* The API calls of a device. Each fails with SP_FAIL (the message) and a status; the op layer records it as the op
 * status. Commands (dispatch, copy, fill) are recorded in order into the device's open command buffer, made on first
 * use, and run no earlier than the next submit or finish. */
typedef struct sp_gpu_device {
    /* A buffer of `bytes` for `mem`, with its device address and, when the host can see it, its host view. DEVICE
     * memory with a host view comes zero-filled (the op layer fills device-only memory itself). */
    splash_status (*buffer)(sp_gpu *g, uint64_t bytes, sp_gpu_memory mem, sp_gpu_buffer *b);
    /* (optional) The pages of a mapped file that hold [data, data + bytes) as a buffer without a copy; *offset is
     * data's offset in it. SPLASH_ERR_UNSUPPORTED, without a message, when they cannot be wrapped. */
    splash_status (*wrap)(sp_gpu *g, const void *data, uint64_t bytes, sp_gpu_buffer *b, uint64_t *offset);
    /* Releases a buffer no recorded command still uses (the op layer syncs first); no-op when b->handle is NULL. */
    void (*release)(sp_gpu *g, sp_gpu_buffer *b);
    /* The pipeline of kernel k with spec constant i = spec[i] for each constant the kernel declares (constant 0 is
     * the workgroup size); *max_threads = the most invocations per workgroup it runs. NULL on failure. */
    void *(*pipeline)(sp_gpu *g, sp_gpu_kernel_id k, const uint32_t spec[4], uint32_t *max_threads);
    void (*release_pipeline)(sp_gpu *g, void *pipeline);
    /* Records one dispatch (see sp_gpu_launch). */
    splash_status (*dispatch)(sp_gpu *g, const sp_gpu_launch *l);
    /* (optional: needed when DEVICE memory has no host view) Record a copy of `bytes` between buffers and a zero fill,
     * after a barrier when `barrier` is set, ordered like dispatches. */
    splash_status (*copy)(sp_gpu *g, const sp_gpu_buffer *src, uint64_t src_offset, const sp_gpu_buffer *dst,
                          uint64_t dst_offset, uint64_t bytes, bool barrier);
    splash_status (*fill)(sp_gpu *g, const sp_gpu_buffer *dst, uint64_t offset, uint64_t bytes, bool barrier);
    /* (optional) Starts running what is recorded without waiting for it (NULL: recorded work runs at finish). */
    splash_status (*submit)(sp_gpu *g);
    /* Runs everything recorded and waits until all of it has run. */
    splash_status (*finish)(sp_gpu *g);
} sp_gpu_device;

/* A device address range [lo, hi) a command reads or writes. */
typedef struct sp_gpu_range {
    uint64_t lo, hi;
} sp_gpu_range;

/* A run of fake addresses backed by a buffer. */
typedef struct sp_gpu_chunk {
    uintptr_t fake;            /* first fake address */
    uint64_t size;             /* fake bytes (host layout) */
    sp_gpu_buffer buf;         /* the buffer holding them (for sub-allocated weights, a copy of its block's) … */
    uint64_t offset;           /* … from this byte on */
    int64_t host_row, dev_row; /* padded weight rows (row r at fake + r·host_row, device + r·dev_row); 0 = linear */
    bool owned;                /* buf is the chunk's own, released with it */
} sp_gpu_chunk;

/* Host data staged at ring offset `offset` (valid until the next sync). */
typedef struct sp_gpu_staged {
    const void *host;
    uint64_t bytes, offset;
} sp_gpu_staged;

/* The device table of one MoE layer's expert row-0 addresses, keyed by its gate views and where they point. */
typedef struct sp_gpu_expert_table {
    const sp_matrix *key;
    const void *first;       /* key[0].data */
    int32_t n_experts;
    const uint64_t *table;   /* backend memory: [E][gate, up, down] */
    uint32_t gate_stride, down_stride;
} sp_gpu_expert_table;

typedef struct sp_gpu_pipeline {
    sp_gpu_kernel_id kernel;
    uint32_t spec[4];
    void *handle;
    uint32_t max_threads;
} sp_gpu_pipeline;

struct sp_gpu {
    /* set by the backend before sp_gpu_init */
    const sp_gpu_device *dev;
    void *device;              /* the device's state */
    const char *name;          /* "vulkan", "metal": messages start with it */
    const char *device_name;   /* the GPU's name, for messages */
    uint64_t max_buffer;       /* the largest buffer the device makes */
    bool submission_barrier;   /* the first command after a submission gets a barrier (Vulkan: a fence makes earlier
                                * writes available, not visible, to later submissions) */
    bool measured;             /* use the launch parameters measured on Vulkan GPUs (models/<id>/vulkan.json) */
    bool barrier_all;          /* a barrier before every command (debugging) */
    const char *no_coopmat;    /* why the cooperative-matrix kernels (matmul_coopmat.comp, flash_attention_coopmat.comp)
                                * cannot run, NULL when they do: then GEMMs and prefill attention take f16 operands on
                                * the matrix units, else the tiled f32 GEMM and the scalar attention kernel run */
    bool simdgroup_gemm;       /* Metal: GEMMs of every weight type but f32 take f16 operands on simdgroup matrices
                                * (kernels/matmul_simdgroup.metal) instead of the tiled f32 GEMM */
    const char *no_int_dot;    /* why the integer-dot GEMV (matmul.comp DOT: Q4/Q8 weights against x quantized to int8,
                                * the CPU backend's numerics) cannot run, NULL when it does; else the float GEMV */
    char description[192];     /* what the backend reports at load (sp_backend.device): the device and its GEMM path */

    splash_status *status;     /* the backend's op status (first failure wins) */

    /* fake address space */
    uint8_t *fake_base;
    uint64_t fake_size, fake_used;
    sp_gpu_chunk *chunks;
    int32_t n_chunks, cap_chunks;

    /* weights (those not wrapped in place) are sub-allocated from large DEVICE buffers */
    sp_gpu_buffer *blocks;
    int32_t n_blocks;
    uint64_t block_used;       /* bytes used in the last block */

    /* host data for kernels: `ring` (device memory), written through `ring_up` where the host cannot see it; the
     * staging buffers of uploads and reads where device memory has no host view (made on first use) */
    sp_gpu_buffer ring, ring_up, upload, readback;
    uint64_t ring_used;
    sp_gpu_staged stage_cache[SP_GPU_STAGE_CACHE]; /* what the ring holds: a page table staged by one layer serves all */
    int32_t n_stage_cache;

    /* pipelines */
    sp_gpu_pipeline pipelines[SP_GPU_MAX_PIPELINES];
    int32_t n_pipelines;

    /* recording */
    bool pending;              /* commands recorded since the last sync */
    bool fresh;                /* the next command gets a barrier (submission_barrier) */
    int32_t since_submit;      /* commands recorded since the last submission */
    sp_gpu_range reads[SP_GPU_MAX_RANGES], writes[SP_GPU_MAX_RANGES];
    int32_t n_reads, n_writes;
    uint64_t n_commands, n_barriers, n_submits;

    /* op state: attention split partials and the f16 copy of a cooperative-matrix GEMM's x (grown on demand), greedy
     * sampling results, MoE expert tables */
    void *part;
    uint64_t part_bytes, part_next; /* part_next: where the next attention's partials go (a ring of regions) */
    void *x16;
    uint64_t x16_bytes;
    void *gemm_parts; /* a cooperative-matrix GEMM split over its columns: the splits' products */
    uint64_t gemm_parts_bytes;
    void *x8;                  /* x quantized for the integer-dot GEMV (quantize.comp): of the x at x8_of, x8_cols wide;
                                * kept while nothing writes that x, so GEMVs of one x quantize it once */
    uint64_t x8_bytes;
    sp_gpu_range x8_of;
    uint32_t x8_cols;
    void *stats;
    void *gdn_work;            /* the chunked Gated DeltaNet's per-chunk products (gdn_chunked.comp) */
    uint64_t gdn_work_bytes;
    sp_gpu_expert_table expert_tables[SP_GPU_MAX_EXPERT_TABLES];
    int32_t n_expert_tables;

    /* launch parameters read from the backend's tuning file (tuning.c) */
    sp_gpu_gemv_tuning gemv[SP_GPU_MAX_TUNINGS];
    int32_t n_gemv;
    sp_gpu_gemm_tuning gemm_coop[SP_GPU_MAX_TUNINGS]; /* the tuning file's "gemmCoopmat" (tile: sp_gpu_coop_tiles index) */
    int32_t n_gemm_coop;
    uint32_t attention_workgroups; /* ATTEND workgroups a split decode aims for */
    int32_t step_tokens;           /* the tuning file's "prefillChunk" (any model), 0 = none */
    uint64_t int_dot_min_bytes;    /* a batch-1 GEMV whose x is not quantized yet quantizes it for the integer-dot GEMV
                                    * from this many bytes of weights (below, a dispatch more costs more than it saves) */
};

/* The op layer behind a GPU backend made by sp_gpu_init. */
static inline sp_gpu *sp_gpu_of(const sp_backend *be) { return (sp_gpu *)be->impl; }

/* Records a failure in *g->status (the first one stays; the message starts with g->name) and returns false. */
bool sp_gpu_fail(sp_gpu *g, splash_status st, const char *fmt, ...);

/* ---- backend.c ---- */
/* Makes *be the backend over g (be->impl = g), whose fields above `status` the backend has set and whose device is
 * open: memory, default launch parameters, the op table. Op failures land in *status. */
splash_status sp_gpu_init(sp_backend *be, sp_gpu *g, sp_threadpool *pool, int n_threads, splash_status *status);
/* Waits for recorded work and releases pipelines and memory; the device itself stays (the backend closes it). */
void sp_gpu_release(sp_gpu *g);
/* Waits until everything recorded has run (benchmarks time whole steps with it). */
splash_status sp_gpu_finish(const sp_backend *be);
/* The device's memory read bandwidth in GB/s: `passes` reads of a `bytes` buffer in one submission, best of `reps`
 * (kernels/stream.comp). The denominator of every roofline fraction the lab and the benchmarks print. */
splash_status sp_gpu_read_bandwidth(const sp_backend *be, uint64_t bytes, int32_t passes, int32_t reps, double *gbs);

/* ---- memory.c ---- */
/* Reserves the fake address space and makes the staging ring. */
splash_status sp_gpu_memory_init(sp_gpu *g);
void sp_gpu_memory_free(sp_gpu *g);
/* The chunk holding fake address p, or NULL. */
const sp_gpu_chunk *sp_gpu_chunk_of(const sp_gpu *g, const void *p);
/* Device address of fake address p (0 and a recorded failure when p is not the backend's). */
uint64_t sp_gpu_addr(sp_gpu *g, const void *p);
/* [addr(p), addr(p) + bytes) as a hazard range. */
sp_gpu_range sp_gpu_span(sp_gpu *g, const void *p, uint64_t bytes);
/* Stages `bytes` of host data for the kernels of this command stream; returns its device address (0 on failure). */
uint64_t sp_gpu_stage(sp_gpu *g, const void *host, uint64_t bytes);
void *sp_gpu_alloc(const sp_backend *be, uint64_t bytes);
void sp_gpu_free(const sp_backend *be, void *p);
/* An op's device scratch *buf of *have bytes, grown to `alloc` (at least `bytes`) when it holds fewer than `bytes`
 * (after a sync: recorded commands may use the old one); NULL and a recorded failure (`what`) when out of memory. */
void *sp_gpu_scratch(const sp_backend *be, void **buf, uint64_t *have, uint64_t bytes, uint64_t alloc, const char *what);
const void *sp_gpu_upload(const sp_backend *be, const void *data, int64_t rows, int64_t row_bytes);
void sp_gpu_write(const sp_backend *be, void *dst, const void *src, uint64_t bytes);
void sp_gpu_read(const sp_backend *be, void *dst, const void *src, uint64_t bytes);
void sp_gpu_clear(const sp_backend *be, void *dst, uint64_t bytes);

/* ---- record.c ---- */
/* Records kernel k with spec constants spec[0..3] (spec[0] = workgroup size; constants the kernel does not declare
 * must be 0) and push constants `push`, after the barrier its ranges need. indirect: backend memory holding the
 * workgroup counts (3 × uint32) instead of groups. `op` names the op in profiles. */
void sp_gpu_dispatch(sp_gpu *g, const char *op, sp_gpu_kernel_id k, const uint32_t spec[4], const void *push,
                     uint32_t push_bytes, const uint32_t groups[3], const sp_gpu_range *reads, int32_t n_reads,
                     const sp_gpu_range *writes, int32_t n_writes, const void *indirect);
/* A copy or zero fill in the command stream (devices whose memory the host cannot see), ordered like a dispatch. */
void sp_gpu_copy(sp_gpu *g, const sp_gpu_buffer *src, uint64_t src_offset, const sp_gpu_buffer *dst, uint64_t dst_offset,
                 uint64_t bytes, sp_gpu_range read, sp_gpu_range write);
void sp_gpu_fill(sp_gpu *g, const sp_gpu_buffer *dst, uint64_t offset, uint64_t bytes, sp_gpu_range write);
/* Memory in r is being written (by a command, or by the host): forgets a quantized copy of it (gpu->x8). */
void sp_gpu_wrote(sp_gpu *g, sp_gpu_range r);
/* Runs what is recorded and waits; the staging ring is free again after it. */
splash_status sp_gpu_sync(sp_gpu *g);
/* Releases every pipeline (after a sync). */
void sp_gpu_pipelines_free(sp_gpu *g);
/* Splits n workgroups into a 2-D grid (x ≤ 65535), as the kernels' flat_group() expects. */
void sp_gpu_grid(uint64_t n, uint32_t groups[3]);

/* ---- tuning.c ---- */
/* A matmul launch: the GEMV (n ≤ 16) as `groups` row groups of `workgroup` / `groups` invocations with `rows` rows
 * each, or, with workgroup 0, the GEMM tile: an index into sp_gpu_coop_tiles when coopmat, else into sp_gpu_tiles. */
typedef struct sp_gpu_mm_launch {
    uint32_t workgroup, groups, rows;
    int tile;
    bool coopmat;
} sp_gpu_mm_launch;
/* The GEMV launch for W in a batch bucket: the tuning file's entry, else a measured one, else the defaults. */
sp_gpu_mm_launch sp_gpu_gemv_params(const sp_gpu *g, const sp_matrix *W, int bucket);
/* Reads the tuning file the environment variable `env` names, when set (the defaults apply either way). */
splash_status sp_gpu_tuning_load(sp_gpu *g, const char *env);
/* be->step_tokens: the tuning file's prefill chunk, else the one measured for a model of this width and depth, else 0. */
int32_t sp_gpu_step_tokens(const sp_backend *be, int64_t hidden, int32_t layers);
/* The GEMV batch bucket (index into sp_gpu_gemv_batch: matmul.comp's NMAX variants) of n x rows (n ≤ 16). */
int sp_gpu_gemv_bucket(int64_t n);
/* The most rows per row group the bucket's kernel carries with `mats` matrices (2: MoE gate and up together). */
int sp_gpu_gemv_max_rows(int bucket, int mats);
/* The GEMM tile (index into sp_gpu_tiles) for n rows of x. */
int sp_gpu_gemm_tile(const sp_gpu *g, const sp_matrix *W, int64_t n);
/* The cooperative-matrix GEMM tile (index into sp_gpu_coop_tiles) for n rows of x. */
int sp_gpu_gemm_coop_tile(const sp_gpu *g, const sp_matrix *W, int64_t n);

/* ---- ops.c, ops_matmul.c, ops_attention.c, ops_moe.c, ops_sample.c: the backend.h ops ---- */
void sp_gpu_ops_install(sp_backend *be);
void sp_gpu_install_matmul(sp_backend *be);
void sp_gpu_install_attention(sp_backend *be);
void sp_gpu_install_moe(sp_backend *be);
void sp_gpu_install_sample(sp_backend *be);
/* A kernel id per weight type, in sp_mtype order. */
#define SP_GPU_BY_TYPE(prefix) {prefix##_F32, prefix##_BF16, prefix##_F16, prefix##_Q8, prefix##_Q4, prefix##_MLX4, prefix##_MLX8}
/* x rows up to which a matmul reads each weight once (the GEMV's largest batch bucket). */
enum { SP_GPU_GEMV_MAX_N = 16 };
/* matmul.comp's push constants. */
typedef struct {
    uint64_t w, x, y, plan;
    uint32_t row_bytes, rows, cols, n, x_stride, y_stride, top_k, order_at;
} sp_gpu_mm_push;
/* Columns one 16-byte chunk of a GEMV covers, by type: x reads need masking when cols is not a multiple (Q4: the chunk
 * pairs two groups; MLX rows are whole groups of 64, so never). */
extern const int64_t sp_gpu_chunk_cols[SP_MAT_TYPE_COUNT];
static inline uint32_t sp_gpu_div_up(uint64_t a, uint64_t b) { return (uint32_t)((a + b - 1) / b); }
/* sp_gpu_fail with a fixed message (no format: messages may contain '%'). */
static inline bool sp_gpu_fail_msg(sp_gpu *g, splash_status st, const char *msg) { return sp_gpu_fail(g, st, "%s", msg); }
/* Device address of row 0 of W and its device row stride. */
bool sp_gpu_weights(sp_gpu *g, const sp_matrix *W, uint64_t *addr, uint32_t *stride);
/* Row groups of at least 32 invocations that divide the workgroup (≤ 128), 1..max rows each (matmul.comp). */
bool sp_gpu_gemv_launch_ok(const sp_gpu_mm_launch *l, int max_rows);
/* matmul with a chosen launch (the lab measures each); NULL: the tuned or default choice, as the op makes it. */
void sp_gpu_matmul_launch(const sp_backend *be, float *y, const sp_matrix *W, const float *x, int64_t n,
                          const sp_gpu_mm_launch *force);
/* matmul_coopmat.comp's push constants (matmul_tiled.comp's end before k_split). */
typedef struct sp_gpu_gemm_push {
    uint64_t w, x, y;
    uint32_t row_bytes, rows, cols, n, x_stride, y_stride, k_split;
    uint64_t parts;
} sp_gpu_gemm_push;
/* The f16 copy of x [n][cols] (the range *x) for the cooperative-matrix GEMMs (gpu->x16, grown on demand): rows of
 * *stride halves (cols padded to 8 with zeros), zero rows from n to `rows`; replaces *x with its range. */
bool sp_gpu_x16(const sp_backend *be, sp_gpu_range *x, int64_t cols, int64_t n, uint64_t rows, uint32_t *stride);
/* Whether the routed experts of n tokens run on the matrix units (matmul_coopmat.comp MOE) rather than the GEMV tiles. */
bool sp_gpu_moe_coop(const sp_gpu *g, const sp_moe_experts *ex, int64_t n);
/* moe_experts on the path *force_coop names (the lab and the ops test run each); NULL: the op's choice. */
void sp_gpu_moe_experts_launch(const sp_backend *be, float *y, const float *x, const int32_t *ids, const float *w, int64_t n,
                               const sp_moe_experts *ex, float *scratch, const float *shared, const float *shared_gate,
                               const bool *force_coop);
/* The int8 copy of an x [n][cols] for the integer-dot GEMV (gpu->x8, grown on demand; quantize.comp's layout): its
 * range and row stride in bytes. */
bool sp_gpu_x8_space(const sp_backend *be, int64_t cols, int64_t n, sp_gpu_range *q, uint32_t *row_bytes);
/* Whether a norm's output of n rows of d values is also quantized for the integer-dot GEMVs after it (norm.comp
 * QUANT): rows as wide as a model's hidden size (at most 8192), few of them, on a device with the integer-dot GEMV. */
bool sp_gpu_quantize_rows(const sp_gpu *g, int64_t n, int64_t d);
/* The Gated DeltaNet recurrence token by token (gdn.comp) or in chunks of 64 (gdn_chunked.comp, where
 * sp_gpu_gdn_chunked_ok); the op picks by length (the lab and the ops test run each). */
void sp_gpu_gdn(const sp_backend *be, float *out, const float *qkv, const float *a, const float *b, const sp_gdn_shape *s,
                float *S, int64_t n, bool chunked);
bool sp_gpu_gdn_chunked_ok(const sp_gdn_shape *s);
/* Whether attention of n rows with this head dim over a cache of kv_type (SPLASH_KV_*) runs on the matrix units
 * (flash_attention_coopmat.comp, f16 operands) rather than attention.comp's scalar kernel. */
bool sp_gpu_flash_attention(const sp_gpu *g, int32_t kv_type, int32_t head_dim, int64_t n);

#endif
