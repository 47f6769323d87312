/* ops.c — the backend.h ops on a GPU: each chooses its kernel and spec constants, fills the kernel's push constants
 * (the structs below mirror the kernels' push_constant blocks field for field; on Metal, backends/metal/backend.c
 * checks their sizes against kernels/msl/manifest.json), sizes its dispatch, declares the memory it reads and writes,
 * and records the dispatch. Kernels: kernels/ (GLSL). Reference for every op: the CPU backend (backends/cpu/). */
#include "gpu.h"

#include "backends/cpu/ops.h"
#include "core/error.h"
#include "core/quant.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* GEMV_MAX_N: x rows up to which a matmul reads each weight once (the GEMV's largest batch bucket); MoE tiles are
 * the NMAX 4 variant's. */
enum { GEMV_MAX_N = 16, ATTN_QV = 16, ATTN_BK = 32, ATTN_HD_MAX = 256, ATTN_MAX_SPLITS = 1024, GDN_COLS = 32, MOE_TILE = 4 };
/* flash_attention_coopmat.comp: 4 subgroups of 32, 16 query vectors each; it takes chunks of FLASH_MIN_ROWS rows up
 * (decode and verify blocks keep the split scalar kernel) */
enum { FLASH_THREADS = 128, FLASH_VECTORS = 64, FLASH_MIN_ROWS = 16 };

static bool fail(sp_gpu *gpu, splash_status st, const char *msg) { return sp_gpu_fail(gpu, st, "%s", msg); }

static uint32_t div_up(uint64_t a, uint64_t b) { return (uint32_t)((a + b - 1) / b); }

/* Kernels by weight type (sp_mtype order): GEMV by batch bucket (1, ≤ 4, ≤ 16 x rows), MoE expert tiles of one pair
 * and of up to MOE_TILE. */
#define BY_TYPE(prefix) {prefix##_F32, prefix##_BF16, prefix##_F16, prefix##_Q8, prefix##_Q4, prefix##_MLX4, prefix##_MLX8}
static const sp_gpu_kernel_id MATMUL[SP_GPU_GEMV_BATCHES][SP_MAT_TYPE_COUNT] = {BY_TYPE(SP_GPU_MATMUL), BY_TYPE(SP_GPU_MATMUL4),
                                                                               BY_TYPE(SP_GPU_MATMUL16)};
static const sp_gpu_kernel_id DENSE_GATE_UP[SP_GPU_GEMV_BATCHES][SP_MAT_TYPE_COUNT] = {
    BY_TYPE(SP_GPU_GATE_UP), BY_TYPE(SP_GPU_GATE_UP4), BY_TYPE(SP_GPU_GATE_UP16)};
static const sp_gpu_kernel_id GATE_UP[2][SP_MAT_TYPE_COUNT] = {BY_TYPE(SP_GPU_MOE_GATE_UP), BY_TYPE(SP_GPU_MOE_GATE_UP4)};
static const sp_gpu_kernel_id DOWN[2][SP_MAT_TYPE_COUNT] = {BY_TYPE(SP_GPU_MOE_DOWN), BY_TYPE(SP_GPU_MOE_DOWN4)};
static const sp_gpu_kernel_id EMBED[SP_MAT_TYPE_COUNT] = BY_TYPE(SP_GPU_EMBED);
#undef BY_TYPE
/* Columns one 16-byte chunk of a GEMV covers, by type: x reads need masking when cols is not a multiple (Q4: the chunk
 * pairs two groups; MLX rows are whole groups of 64, so never). */
static const int64_t CHUNK_COLS[SP_MAT_TYPE_COUNT] = {4, 8, 8, 16, 64, 32, 16};

/* ---- weights ---- */

/* Device address of row 0 of W and its device row stride. */
static bool weights(sp_gpu *gpu, const sp_matrix *W, uint64_t *addr, uint32_t *stride) {
    *addr = 0, *stride = 0;
    if ((unsigned)W->type >= SP_MAT_TYPE_COUNT) return fail(gpu, SPLASH_ERR_UNSUPPORTED, "no kernels for these weights");
    const sp_gpu_chunk *c = sp_gpu_chunk_of(gpu, W->data);
    if (!c) return fail(gpu, SPLASH_ERR_INTERNAL, "a weight matrix that was not uploaded");
    *addr = sp_gpu_addr(gpu, W->data);
    *stride = (uint32_t)(c->host_row ? c->dev_row : W->row_bytes);
    return true;
}

/* ---- dense algebra ---- */

/* Row groups of at least 32 invocations that divide the workgroup (≤ 128), 1..max rows each (matmul.comp). */
static bool gemv_launch_ok(const sp_gpu_mm_launch *l, int max_rows) {
    return l->workgroup >= 32 && l->workgroup <= 128 && l->groups >= 1 && l->workgroup % l->groups == 0 &&
           l->workgroup / l->groups >= 32 && l->rows >= 1 && l->rows <= (uint32_t)max_rows;
}

typedef struct {
    uint64_t w, x, y, plan;
    uint32_t row_bytes, rows, cols, n, x_stride, y_stride, top_k, order_at;
} mm_push;

void sp_gpu_matmul_launch(const sp_backend *be, float *y, const sp_matrix *W, const float *x, int64_t n,
                          const sp_gpu_mm_launch *force) {
    sp_gpu *gpu = sp_gpu_of(be);
    uint64_t w;
    uint32_t stride;
    if (!weights(gpu, W, &w, &stride)) return;
    uint64_t xa = sp_gpu_addr(gpu, x), ya = sp_gpu_addr(gpu, y);
    if (W->cols % 4 || xa % 16) {
        fail(gpu, SPLASH_ERR_UNSUPPORTED, "matmul needs cols % 4 == 0 and 16-byte aligned inputs");
        return;
    }
    sp_gpu_range reads[2] = {{w, w + (uint64_t)W->rows * stride}, {xa, xa + (uint64_t)n * (uint64_t)W->cols * 4}};
    sp_gpu_range write = {ya, ya + (uint64_t)n * (uint64_t)W->rows * 4};
    if (force ? force->workgroup != 0 : n <= GEMV_MAX_N) {
        uint32_t groups[3];
        int bucket = sp_gpu_gemv_bucket(n);
        sp_gpu_mm_launch l = force ? *force : sp_gpu_gemv_params(gpu, W, bucket);
        if (n > GEMV_MAX_N || !gemv_launch_ok(&l, sp_gpu_gemv_max_rows(bucket, 1))) {
            fail(gpu, SPLASH_ERR_INVALID_ARGUMENT, "a GEMV launch the kernel cannot take");
            return;
        }
        sp_gpu_grid(div_up((uint64_t)W->rows, (uint64_t)l.rows * l.groups), groups);
        mm_push p = {w, xa, ya, 0, stride, (uint32_t)W->rows, (uint32_t)W->cols, (uint32_t)n, (uint32_t)W->cols,
                     (uint32_t)W->rows, 0, 0};
        uint32_t check = W->cols % CHUNK_COLS[W->type] != 0;
        sp_gpu_dispatch(gpu, "matmul", MATMUL[bucket][W->type], (uint32_t[4]){l.workgroup, l.rows, check, l.groups}, &p, sizeof p,
                        groups, reads, 2, &write, 1, NULL);
        return;
    }
    struct {
        uint64_t w, x, y;
        uint32_t row_bytes, rows, cols, n, x_stride, y_stride;
    } p = {w, xa, ya, stride, (uint32_t)W->rows, (uint32_t)W->cols, (uint32_t)n, (uint32_t)W->cols, (uint32_t)W->rows};
    /* the matrix units where the device has them (f16 operands), unless the weights are f32 */
    bool coop = force ? force->coopmat : !gpu->no_coopmat && sp_gpu_gemm_coop_first[W->type] >= 0;
    if (coop && (gpu->no_coopmat || sp_gpu_gemm_coop_first[W->type] < 0)) {
        fail(gpu, SPLASH_ERR_UNSUPPORTED, "no cooperative-matrix GEMM for these weights on this device");
        return;
    }
    uint32_t groups[3] = {0, 0, 1}, wg;
    sp_gpu_kernel_id k;
    if (coop) {
        /* x in f16 first (rows padded to 8 halves), into scratch kept between products */
        uint64_t stride16 = ((uint64_t)W->cols + 7) / 8 * 8, bytes16 = (uint64_t)n * stride16 * 2;
        if (bytes16 > gpu->x16_bytes) {
            sp_gpu_sync(gpu);
            if (gpu->x16) sp_gpu_free(be, gpu->x16);
            gpu->x16_bytes = bytes16 * 2;
            gpu->x16 = sp_gpu_alloc(be, gpu->x16_bytes);
            if (!gpu->x16) {
                gpu->x16_bytes = 0;
                fail(gpu, SPLASH_ERR_OUT_OF_MEMORY, "f16 copy of a GEMM's x");
                return;
            }
        }
        sp_gpu_range r16 = sp_gpu_span(gpu, gpu->x16, bytes16);
        p.y = r16.lo;
        p.y_stride = (uint32_t)stride16;
        uint32_t hg[3];
        sp_gpu_grid(div_up(bytes16 / 16, 256), hg);
        sp_gpu_dispatch(gpu, "gemm_halves", SP_GPU_GEMM_HALVES, (uint32_t[4]){256, 0, 0, 0}, &p, sizeof p, hg, &reads[1], 1,
                        &r16, 1, NULL);
        p.x = r16.lo;
        p.y = ya;
        p.x_stride = (uint32_t)stride16;
        p.y_stride = (uint32_t)W->rows;
        reads[1] = r16;
        int tile = force ? force->tile : sp_gpu_gemm_coop_tile(gpu, W, n);
        const sp_gpu_coop_tile *t = &sp_gpu_coop_tiles[tile];
        groups[0] = div_up((uint64_t)W->rows, (uint64_t)t->bm), groups[1] = div_up((uint64_t)n, (uint64_t)t->bn);
        wg = (uint32_t)((t->bm / t->wm) * (t->bn / t->wn) * 32);
        k = (sp_gpu_kernel_id)(sp_gpu_gemm_coop_first[W->type] + tile);
    } else {
        int tile = force ? force->tile : sp_gpu_gemm_tile(gpu, W, n);
        const sp_gpu_tile *t = &sp_gpu_tiles[tile];
        groups[0] = div_up((uint64_t)W->rows, (uint64_t)t->bm), groups[1] = div_up((uint64_t)n, (uint64_t)t->bn);
        wg = (uint32_t)((t->bm / t->tm) * (t->bn / t->tn));
        k = (sp_gpu_kernel_id)(sp_gpu_gemm_first[W->type] + tile);
    }
    sp_gpu_dispatch(gpu, "gemm", k, (uint32_t[4]){wg, 0, 0, 0}, &p, sizeof p, groups, reads, 2, &write, 1, NULL);
}

static void gpu_matmul(const sp_backend *be, float *y, const sp_matrix *W, const float *x, int64_t n) {
    sp_gpu_matmul_launch(be, y, W, x, n, NULL);
}

typedef struct {
    uint64_t y, x, g;
    uint32_t n, d, x_stride, y_stride;
} ew_push;

static void elementwise(sp_gpu *gpu, const char *name, sp_gpu_kernel_id k, ew_push p, const sp_gpu_range *reads,
                        int32_t n_reads, sp_gpu_range write) {
    uint32_t groups[3];
    sp_gpu_grid(div_up(p.n, 256), groups);
    sp_gpu_dispatch(gpu, name, k, (uint32_t[4]){256, 0, 0, 0}, &p, sizeof p, groups, reads, n_reads, &write, 1, NULL);
}

static void gpu_embed(const sp_backend *be, float *x, const sp_matrix *table, const int32_t *tokens, int64_t n) {
    sp_gpu *gpu = sp_gpu_of(be);
    uint64_t w;
    uint32_t stride;
    if (!weights(gpu, table, &w, &stride)) return;
    sp_gpu_range reads[2] = {{w, w + (uint64_t)table->rows * stride}, sp_gpu_span(gpu, tokens, (uint64_t)n * 4)};
    ew_push p = {sp_gpu_addr(gpu, x), w, sp_gpu_addr(gpu, tokens), (uint32_t)(n * table->cols), (uint32_t)table->cols, stride, 0};
    elementwise(gpu, "embed", EMBED[table->type], p, reads, 2, sp_gpu_span(gpu, x, (uint64_t)n * (uint64_t)table->cols * 4));
}

static void gpu_add(const sp_backend *be, float *y, const float *x, int64_t n) {
    sp_gpu *gpu = sp_gpu_of(be);
    sp_gpu_range r[2] = {sp_gpu_span(gpu, x, (uint64_t)n * 4), sp_gpu_span(gpu, y, (uint64_t)n * 4)};
    elementwise(gpu, "add", SP_GPU_ADD, (ew_push){r[1].lo, r[0].lo, 0, (uint32_t)n, 1, 0, 0}, r, 2, r[1]);
}

static void gpu_silu_mul(const sp_backend *be, float *y, const float *g, const float *u, int64_t n) {
    sp_gpu *gpu = sp_gpu_of(be);
    sp_gpu_range r[2] = {sp_gpu_span(gpu, g, (uint64_t)n * 4), sp_gpu_span(gpu, u, (uint64_t)n * 4)};
    sp_gpu_range w = sp_gpu_span(gpu, y, (uint64_t)n * 4);
    elementwise(gpu, "silu_mul", SP_GPU_SILU_MUL, (ew_push){w.lo, r[1].lo, r[0].lo, (uint32_t)n, 1, 0, 0}, r, 2, w);
}

/* Few rows: one GEMV over the gate and up rows of each index (matmul.comp MODE 3), with the launch measured for the
 * gate matrix, half its rows per group for two matrices: the same lanes sum each row as in separate matmuls, so the
 * products are theirs bit for bit. More rows: the two GEMMs and the gate. */
static void gpu_matmul_gate_up(const sp_backend *be, float *h, float *u, const sp_matrix *gate, const sp_matrix *up,
                               const float *x, int64_t n) {
    sp_gpu *gpu = sp_gpu_of(be);
    uint64_t wg, wu;
    uint32_t stride, stride_up;
    if (!weights(gpu, gate, &wg, &stride) || !weights(gpu, up, &wu, &stride_up)) return;
    uint64_t xa = sp_gpu_addr(gpu, x);
    if (n > GEMV_MAX_N || gate->type != up->type || gate->rows != up->rows || gate->cols != up->cols || stride != stride_up ||
        gate->cols % 4 || xa % 16) {
        gpu_matmul(be, h, gate, x, n);
        gpu_matmul(be, u, up, x, n);
        gpu_silu_mul(be, h, h, u, n * gate->rows);
        return;
    }
    int bucket = sp_gpu_gemv_bucket(n);
    sp_gpu_mm_launch l = sp_gpu_gemv_params(gpu, gate, bucket);
    uint32_t max_rows = (uint32_t)sp_gpu_gemv_max_rows(bucket, 2);
    l.rows = l.rows > 1 ? l.rows / 2 : 1; /* two matrices: the accumulators per invocation the measured launch had */
    if (l.rows > max_rows) l.rows = max_rows;
    if (!gemv_launch_ok(&l, (int)max_rows)) {
        fail(gpu, SPLASH_ERR_INVALID_ARGUMENT, "a GEMV launch the kernel cannot take");
        return;
    }
    sp_gpu_range reads[3] = {{wg, wg + (uint64_t)gate->rows * stride}, {wu, wu + (uint64_t)up->rows * stride},
                             {xa, xa + (uint64_t)n * (uint64_t)gate->cols * 4}};
    sp_gpu_range write = sp_gpu_span(gpu, h, (uint64_t)n * (uint64_t)gate->rows * 4);
    uint32_t groups[3];
    sp_gpu_grid(div_up((uint64_t)gate->rows, (uint64_t)l.rows * l.groups), groups);
    mm_push p = {wg, xa, write.lo, wu, stride, (uint32_t)gate->rows, (uint32_t)gate->cols, (uint32_t)n, (uint32_t)gate->cols,
                 (uint32_t)gate->rows, 0, 0};
    uint32_t check = gate->cols % CHUNK_COLS[gate->type] != 0;
    sp_gpu_dispatch(gpu, "matmul_gate_up", DENSE_GATE_UP[bucket][gate->type], (uint32_t[4]){l.workgroup, l.rows, check, l.groups},
                    &p, sizeof p, groups, reads, 3, &write, 1, NULL);
}

static void gpu_sigmoid_mul(const sp_backend *be, float *y, const float *g, int64_t n) {
    sp_gpu *gpu = sp_gpu_of(be);
    sp_gpu_range r[2] = {sp_gpu_span(gpu, g, (uint64_t)n * 4), sp_gpu_span(gpu, y, (uint64_t)n * 4)};
    elementwise(gpu, "sigmoid_mul", SP_GPU_SIGMOID_MUL, (ew_push){r[1].lo, 0, r[0].lo, (uint32_t)n, 1, 0, 0}, r, 2, r[1]);
}

static void gpu_add_sigmoid_scaled(const sp_backend *be, float *y, const float *x, const float *g, int64_t n, int64_t d) {
    sp_gpu *gpu = sp_gpu_of(be);
    sp_gpu_range r[3] = {sp_gpu_span(gpu, x, (uint64_t)(n * d) * 4), sp_gpu_span(gpu, g, (uint64_t)n * 4),
                        sp_gpu_span(gpu, y, (uint64_t)(n * d) * 4)};
    elementwise(gpu, "add_sigmoid_scaled", SP_GPU_ADD_SIGMOID_SCALED,
                (ew_push){r[2].lo, r[0].lo, r[1].lo, (uint32_t)(n * d), (uint32_t)d, 0, 0}, r, 3, r[2]);
}

static void gpu_copy_rows(const sp_backend *be, float *dst, int64_t dst_stride, const float *src, int64_t src_stride,
                          int64_t rows, int64_t cols) {
    sp_gpu *gpu = sp_gpu_of(be);
    if (rows <= 0 || cols <= 0) return;
    sp_gpu_range r = sp_gpu_span(gpu, src, (uint64_t)((rows - 1) * src_stride + cols) * 4);
    sp_gpu_range w = sp_gpu_span(gpu, dst, (uint64_t)((rows - 1) * dst_stride + cols) * 4);
    elementwise(gpu, "copy_rows", SP_GPU_COPY2D,
                (ew_push){w.lo, r.lo, 0, (uint32_t)(rows * cols), (uint32_t)cols, (uint32_t)src_stride, (uint32_t)dst_stride},
                &r, 1, w);
}

/* ---- norms ---- */

typedef struct {
    uint64_t y, x, z, w;
    uint32_t rows, d;
    float eps;
} norm_push;

/* norm.comp; z: the gate (rmsnorm_gated) or the residual added to x, which the kernel then also writes (add_rmsnorm). */
static void norm(sp_gpu *gpu, sp_gpu_kernel_id k, const char *name, float *y, const float *x, const float *z, const float *w,
                 int64_t n, int64_t d, float eps) {
    uint64_t bytes = (uint64_t)(n * d) * 4;
    sp_gpu_range r[3] = {sp_gpu_span(gpu, x, bytes), sp_gpu_span(gpu, w, (uint64_t)d * 4), z ? sp_gpu_span(gpu, z, bytes) : (sp_gpu_range){0, 0}};
    sp_gpu_range wr[2] = {sp_gpu_span(gpu, y, bytes), r[0]};
    norm_push p = {wr[0].lo, r[0].lo, r[2].lo, r[1].lo, (uint32_t)n, (uint32_t)d, eps};
    uint32_t groups[3], wg = d >= 1024 ? 256 : d >= 256 ? 128 : 64;
    sp_gpu_grid((uint64_t)n, groups);
    sp_gpu_dispatch(gpu, name, k, (uint32_t[4]){wg, 0, 0, 0}, &p, sizeof p, groups, r, 3, wr, k == SP_GPU_ADD_RMSNORM ? 2 : 1, NULL);
}

static void gpu_rmsnorm(const sp_backend *be, float *y, const float *x, const float *w, int64_t n, int64_t d, float eps) {
    norm(sp_gpu_of(be), SP_GPU_RMSNORM, "rmsnorm", y, x, NULL, w, n, d, eps);
}

static void gpu_add_rmsnorm(const sp_backend *be, float *y, float *x, const float *r, const float *w, int64_t n, int64_t d,
                            float eps) {
    norm(sp_gpu_of(be), SP_GPU_ADD_RMSNORM, "add_rmsnorm", y, x, r, w, n, d, eps);
}

static void gpu_rmsnorm_gated(const sp_backend *be, float *y, const float *x, const float *z, const float *w, int64_t n,
                              int64_t d, float eps) {
    norm(sp_gpu_of(be), SP_GPU_RMSNORM_GATED, "rmsnorm_gated", y, x, z, w, n, d, eps);
}

/* ---- positions ---- */

static void gpu_rope(const sp_backend *be, float *x, int64_t n, int32_t n_heads, int32_t head_dim, int32_t rot_dim,
                     const int32_t *pos, const int32_t *mrope_section, const float *inv_freq) {
    sp_gpu *gpu = sp_gpu_of(be);
    struct {
        uint64_t x, pos, inv_freq;
        uint32_t n, heads, head_dim, half_rot;
        int32_t s0, s1, s2;
    } p = {sp_gpu_addr(gpu, x), sp_gpu_addr(gpu, pos), sp_gpu_addr(gpu, inv_freq), (uint32_t)n, (uint32_t)n_heads,
           (uint32_t)head_dim, (uint32_t)rot_dim / 2, 0, 0, 0};
    if (mrope_section) p.s0 = mrope_section[0], p.s1 = mrope_section[1], p.s2 = mrope_section[2];
    sp_gpu_range r[2] = {sp_gpu_span(gpu, pos, (uint64_t)n * (mrope_section ? 12 : 4)), sp_gpu_span(gpu, inv_freq, (uint64_t)rot_dim * 2)};
    sp_gpu_range w = sp_gpu_span(gpu, x, (uint64_t)n * (uint64_t)n_heads * (uint64_t)head_dim * 4);
    uint32_t groups[3];
    sp_gpu_grid(div_up((uint64_t)n * (uint64_t)n_heads * (uint64_t)(rot_dim / 2), 256), groups);
    sp_gpu_dispatch(gpu, "rope", SP_GPU_ROPE, (uint32_t[4]){256, 0, 0, 0}, &p, sizeof p, groups, r, 2, &w, 1, NULL);
}

/* ---- attention ---- */

/* The KV row types kv_write and the attention kernels (attention.comp, attention_ext.comp; kernels/kv_rows.glsl) take:
 * f32, and f16 and int8 converted on write and read back to f32 for the arithmetic. */
#define GPU_KV_TYPES (1u << SPLASH_KV_F32 | 1u << SPLASH_KV_F16 | 1u << SPLASH_KV_INT8)

typedef struct {
    uint64_t dst, src, k, v, pages, part;
    uint32_t n_past, n, heads, kv_heads, page_tokens, page_stride, split_len, n_splits, hb, rt;
    float scale;
    uint32_t kv_type; /* SPLASH_KV_*: the type of every row */
    uint64_t src2;
} attn_push;

/* The whole KV allocation as one range (pages are scattered; kernels touch only the sequence's). */
static sp_gpu_range kv_range(sp_gpu *gpu, const sp_kv_view *kv) {
    const sp_gpu_chunk *c = sp_gpu_chunk_of(gpu, kv->k);
    return c ? (sp_gpu_range){c->buf.addr + c->offset, c->buf.addr + c->offset + c->size} : (sp_gpu_range){0, 0};
}

static bool attn_base(sp_gpu *gpu, const sp_kv_view *kv, int32_t n_past, int64_t n, int32_t head_dim, attn_push *p,
                      sp_gpu_range *pages) {
    if (head_dim > ATTN_HD_MAX || head_dim % 8) return fail(gpu, SPLASH_ERR_UNSUPPORTED, "attention needs head_dim ≤ 256, a multiple of 8");
    if (!(GPU_KV_TYPES & 1u << kv->type)) return fail(gpu, SPLASH_ERR_UNSUPPORTED, "attention reads f32, f16 or int8 KV rows");
    if (kv->page_stride > UINT32_MAX) return fail(gpu, SPLASH_ERR_UNSUPPORTED, "a KV page of more than 4 GiB");
    uint64_t n_pages = ((uint64_t)n_past + (uint64_t)n + (uint64_t)kv->page_tokens - 1) / (uint64_t)kv->page_tokens;
    uint64_t pa = sp_gpu_stage(gpu, kv->pages, n_pages * 4);
    if (!pa) return false;
    *pages = (sp_gpu_range){pa, pa + n_pages * 4};
    *p = (attn_push){.k = sp_gpu_addr(gpu, kv->k), .v = sp_gpu_addr(gpu, kv->v), .pages = pa, .n_past = (uint32_t)n_past,
                     .n = (uint32_t)n, .page_tokens = (uint32_t)kv->page_tokens,
                     .page_stride = (uint32_t)kv->page_stride, .kv_type = (uint32_t)kv->type};
    return true;
}

static void gpu_kv_write(const sp_backend *be, const sp_kv_view *kv, const float *k, const float *v, int32_t n_past,
                         int64_t n, int32_t n_kv_heads, int32_t head_dim) {
    sp_gpu *gpu = sp_gpu_of(be);
    attn_push p;
    sp_gpu_range pages;
    if (!attn_base(gpu, kv, n_past, n, head_dim, &p, &pages)) return;
    uint64_t bytes = (uint64_t)n * (uint64_t)n_kv_heads * (uint64_t)head_dim * 4;
    sp_gpu_range r[3] = {sp_gpu_span(gpu, k, bytes), sp_gpu_span(gpu, v, bytes), pages}, w = kv_range(gpu, kv);
    p.src = r[0].lo;
    p.src2 = r[1].lo;
    p.kv_heads = (uint32_t)n_kv_heads;
    uint32_t groups[3];
    if (kv->type == SPLASH_KV_INT8) {
        /* a workgroup per K or V row; two rows that share a word are one workgroup's, which needs the K and V
         * halves and pages to start on words (2-byte aligned rows: an even page_tokens · n_kv_heads) */
        if ((p.k | p.v | p.page_stride) % 4) {
            sp_gpu_fail(gpu, SPLASH_ERR_UNSUPPORTED, "int8 KV rows of %lld bytes need K, V and pages 4-byte aligned (page_tokens %d)",
                        (long long)sp_kv_row_bytes(kv->type, head_dim), kv->page_tokens);
            return;
        }
        sp_gpu_grid(2 * (uint64_t)n * (uint64_t)n_kv_heads, groups);
        sp_gpu_dispatch(gpu, "kv_write", SP_GPU_KV_WRITE, (uint32_t[4]){64, (uint32_t)head_dim, 0, 0}, &p, sizeof p, groups, r, 3,
                        &w, 1, NULL);
        return;
    }
    sp_gpu_grid(div_up(bytes / 8, 256), groups); /* an invocation per pair of values */
    sp_gpu_dispatch(gpu, "kv_write", SP_GPU_KV_WRITE, (uint32_t[4]){256, (uint32_t)head_dim, 0, 0}, &p, sizeof p, groups, r, 3,
                    &w, 1, NULL);
}

/* Split-key partials of one attention call: n · heads · splits · (head_dim + 2) floats, grown on demand. */
static float *attn_partials(sp_gpu *gpu, const sp_backend *be, uint64_t floats) {
    if (floats * 4 <= gpu->part_bytes) return gpu->part;
    sp_gpu_sync(gpu);
    if (gpu->part) sp_gpu_free(be, gpu->part);
    gpu->part_bytes = floats * 4 * 2;
    gpu->part = sp_gpu_alloc(be, gpu->part_bytes);
    if (!gpu->part) gpu->part_bytes = 0;
    return gpu->part;
}

/* Not for int8 rows: the matrix-unit kernel loads f32/f16 tiles only, and no device this project is tested on before
 * release (lavapipe has no matrix units) could check an int8 variant; those caches take attention.comp. */
bool sp_gpu_flash_attention(const sp_gpu *g, int32_t kv_type, int32_t head_dim, int64_t n) {
    return !g->no_coopmat && kv_type != SPLASH_KV_INT8 && n >= FLASH_MIN_ROWS && sp_gpu_flash_kernel(head_dim) >= 0;
}

static void gpu_attention(const sp_backend *be, float *out, const float *q, const sp_kv_view *kv, int32_t n_past,
                          int64_t n, int32_t n_heads, int32_t n_kv_heads, int32_t head_dim, float scale) {
    sp_gpu *gpu = sp_gpu_of(be);
    attn_push p;
    sp_gpu_range pages;
    if (!attn_base(gpu, kv, n_past, n, head_dim, &p, &pages)) return;
    uint32_t G = (uint32_t)(n_heads / n_kv_heads);
    uint64_t qbytes = (uint64_t)n * (uint64_t)n_heads * (uint64_t)head_dim * 4;
    if (sp_gpu_flash_attention(gpu, kv->type, head_dim, n)) {
        sp_gpu_range r[3] = {sp_gpu_span(gpu, q, qbytes), kv_range(gpu, kv), pages}, w = sp_gpu_span(gpu, out, qbytes);
        p.src = r[0].lo, p.dst = w.lo, p.heads = (uint32_t)n_heads, p.kv_heads = (uint32_t)n_kv_heads, p.scale = scale;
        sp_gpu_dispatch(gpu, "flash_attention", (sp_gpu_kernel_id)sp_gpu_flash_kernel(head_dim), (uint32_t[4]){FLASH_THREADS, 0, 0, 0},
                        &p, sizeof p, (uint32_t[3]){(uint32_t)n_kv_heads, div_up((uint64_t)n * G, FLASH_VECTORS), 1}, r, 3, &w, 1,
                        NULL);
        return;
    }
    p.hb = G <= ATTN_QV ? G : ATTN_QV;
    p.rt = G <= ATTN_QV ? ATTN_QV / G : 1;
    p.heads = (uint32_t)n_heads;
    p.kv_heads = (uint32_t)n_kv_heads;
    p.scale = scale;
    uint32_t blocks = div_up(G, p.hb), tiles = div_up((uint64_t)n, p.rt);
    uint64_t keys = (uint64_t)n_past + (uint64_t)n, wgs = (uint64_t)n_kv_heads * blocks * tiles;
    /* flash decoding: few query tiles → split the keys so about attention_workgroups workgroups run */
    uint32_t splits = 1;
    p.split_len = (uint32_t)((keys + ATTN_BK - 1) / ATTN_BK * ATTN_BK);
    if (wgs < gpu->attention_workgroups && keys > 4 * ATTN_BK) {
        uint64_t want = div_up(gpu->attention_workgroups, wgs), len = div_up(keys, want);
        len = (len + ATTN_BK - 1) / ATTN_BK * ATTN_BK;
        if (len < 4 * ATTN_BK) len = 4 * ATTN_BK;
        if (div_up(keys, len) > ATTN_MAX_SPLITS) len = (div_up(keys, ATTN_MAX_SPLITS) + ATTN_BK - 1) / ATTN_BK * ATTN_BK;
        p.split_len = (uint32_t)len;
        splits = div_up(keys, len);
    }
    p.n_splits = splits;
    sp_gpu_range r[3] = {sp_gpu_span(gpu, q, qbytes), kv_range(gpu, kv), pages};
    sp_gpu_range w = sp_gpu_span(gpu, out, qbytes);
    p.src = r[0].lo;
    p.dst = w.lo;
    uint32_t spec[4] = {128, (uint32_t)head_dim, 0, 0};
    if (splits == 1) {
        sp_gpu_dispatch(gpu, "attention", SP_GPU_ATTEND, spec, &p, sizeof p, (uint32_t[3]){n_kv_heads * blocks, tiles, 1}, r,
                        3, &w, 1, NULL);
        return;
    }
    float *part = attn_partials(gpu, be, (uint64_t)n * (uint64_t)n_heads * splits * (uint64_t)(head_dim + 2));
    if (!part) {
        fail(gpu, SPLASH_ERR_OUT_OF_MEMORY, "attention partials");
        return;
    }
    sp_gpu_range pr = sp_gpu_span(gpu, part, (uint64_t)n * (uint64_t)n_heads * splits * (uint64_t)(head_dim + 2) * 4);
    p.part = pr.lo;
    sp_gpu_dispatch(gpu, "attention", SP_GPU_ATTEND, spec, &p, sizeof p, (uint32_t[3]){n_kv_heads * blocks, tiles, splits}, r,
                    3, &pr, 1, NULL);
    uint32_t groups[3];
    sp_gpu_grid((uint64_t)n * (uint64_t)n_heads, groups);
    spec[0] = head_dim >= 128 ? 128 : 64;
    sp_gpu_dispatch(gpu, "attention_reduce", SP_GPU_ATTEND_REDUCE, spec, &p, sizeof p, groups, &pr, 1, &w, 1, NULL);
}

/* Drafters' attention (kernels/attention_ext.comp): one workgroup per (row, query head). */
static void gpu_attention_ext(const sp_backend *be, float *out, const float *q, int32_t n_heads, int32_t n_kv_heads,
                              int32_t head_dim, float scale, const sp_attn_ext *x) {
    sp_gpu *gpu = sp_gpu_of(be);
    if (head_dim > ATTN_HD_MAX || head_dim % 4) {
        fail(gpu, SPLASH_ERR_UNSUPPORTED, "attention_ext needs head_dim ≤ 256, a multiple of 4");
        return;
    }
    if (x->kv && !(GPU_KV_TYPES & 1u << x->kv->type)) {
        fail(gpu, SPLASH_ERR_UNSUPPORTED, "attention_ext reads f32, f16 or int8 KV rows");
        return;
    }
    struct {
        uint64_t dst, q, k, v, pages, k_blk, v_blk;
        uint32_t n_rows, heads, kv_heads, page_tokens, page_stride;
        uint32_t q_pos0, page_lo, page_hi, page_causal, window, blk_causal;
        float scale;
        uint32_t kv_type;
    } p = {0};
    uint64_t qbytes = (uint64_t)x->n_rows * (uint64_t)n_heads * (uint64_t)head_dim * 4;
    uint64_t blk = (uint64_t)x->n_rows * (uint64_t)n_kv_heads * (uint64_t)head_dim * 4;
    sp_gpu_range r[5];
    int nr = 0;
    r[nr++] = sp_gpu_span(gpu, q, qbytes);
    /* pages cover every position a row may see: page_hi + (n_rows − 1) when causal */
    int64_t last = (int64_t)x->page_hi + (x->page_causal ? x->n_rows - 1 : 0);
    if (x->kv && last > x->page_lo) {
        uint64_t n_pages = (uint64_t)(last + x->kv->page_tokens - 1) / (uint64_t)x->kv->page_tokens;
        uint64_t pa = sp_gpu_stage(gpu, x->kv->pages, n_pages * 4);
        if (!pa) return;
        r[nr++] = (sp_gpu_range){pa, pa + n_pages * 4};
        r[nr++] = kv_range(gpu, x->kv);
        p.pages = pa, p.k = sp_gpu_addr(gpu, x->kv->k), p.v = sp_gpu_addr(gpu, x->kv->v);
        p.page_tokens = (uint32_t)x->kv->page_tokens, p.page_stride = (uint32_t)x->kv->page_stride;
        p.kv_type = (uint32_t)x->kv->type;
        p.page_lo = (uint32_t)x->page_lo, p.page_hi = (uint32_t)x->page_hi, p.page_causal = (uint32_t)x->page_causal;
    }
    if (x->k_blk) {
        r[nr++] = sp_gpu_span(gpu, x->k_blk, blk);
        r[nr++] = sp_gpu_span(gpu, x->v_blk, blk);
        p.k_blk = r[nr - 2].lo, p.v_blk = r[nr - 1].lo, p.blk_causal = (uint32_t)x->blk_causal;
    }
    sp_gpu_range w = sp_gpu_span(gpu, out, qbytes);
    p.dst = w.lo, p.q = r[0].lo, p.n_rows = (uint32_t)x->n_rows, p.heads = (uint32_t)n_heads, p.kv_heads = (uint32_t)n_kv_heads;
    p.q_pos0 = (uint32_t)x->q_pos0, p.window = (uint32_t)x->window, p.scale = scale;
    uint32_t groups[3];
    sp_gpu_grid((uint64_t)x->n_rows * (uint64_t)n_heads, groups);
    sp_gpu_dispatch(gpu, "attention_ext", SP_GPU_ATTENTION_EXT, (uint32_t[4]){128, (uint32_t)head_dim, 0, 0}, &p, sizeof p,
                    groups, r, nr, &w, 1, NULL);
}

/* DFlash2's dynamic convolution (kernels/block_conv.comp): one invocation per (block, channel). */
static void gpu_block_conv(const sp_backend *be, float *x, const float *dyn, int64_t dyn_stride, const float *base, int64_t H,
                           int32_t K, int32_t G, const int64_t *row0, const int32_t *len, int32_t n_blocks) {
    sp_gpu *gpu = sp_gpu_of(be);
    int32_t blocks[2 * 64];
    int64_t rows = 0;
    if (n_blocks > 64) {
        fail(gpu, SPLASH_ERR_UNSUPPORTED, "block_conv over more than 64 blocks");
        return;
    }
    for (int32_t b = 0; b < n_blocks; b++) {
        blocks[2 * b] = (int32_t)row0[b], blocks[2 * b + 1] = len[b];
        if (row0[b] + len[b] > rows) rows = row0[b] + len[b];
    }
    uint64_t ba = sp_gpu_stage(gpu, blocks, 8 * (uint64_t)n_blocks);
    if (!ba) return;
    sp_gpu_range r[4] = {sp_gpu_span(gpu, x, (uint64_t)rows * (uint64_t)H * 4),
                         sp_gpu_span(gpu, dyn, ((uint64_t)(rows - 1) * (uint64_t)dyn_stride + (uint64_t)K * (uint64_t)(H / G)) * 4),
                         sp_gpu_span(gpu, base, (uint64_t)K * (uint64_t)H * 4), {ba, ba + 8 * (uint64_t)n_blocks}};
    struct {
        uint64_t x, dyn, base, blocks;
        uint32_t H, K, G, dyn_stride, n_blocks;
    } p = {r[0].lo, r[1].lo, r[2].lo, ba, (uint32_t)H, (uint32_t)K, (uint32_t)G, (uint32_t)dyn_stride, (uint32_t)n_blocks};
    uint32_t groups[3];
    sp_gpu_grid(div_up((uint64_t)n_blocks * (uint64_t)H, 64), groups);
    sp_gpu_dispatch(gpu, "block_conv", SP_GPU_BLOCK_CONV, (uint32_t[4]){64, 0, 0, 0}, &p, sizeof p, groups, r, 4, r, 1, NULL);
}

/* ---- Gated DeltaNet ---- */

static void gpu_conv_silu(const sp_backend *be, float *y, const float *x, int64_t n, int64_t channels, const float *w,
                          int32_t kernel, float *tail) {
    sp_gpu *gpu = sp_gpu_of(be);
    if (kernel > 16) {
        fail(gpu, SPLASH_ERR_UNSUPPORTED, "conv kernel longer than 16");
        return;
    }
    uint64_t bytes = (uint64_t)n * (uint64_t)channels * 4;
    sp_gpu_range r[3] = {sp_gpu_span(gpu, x, bytes), sp_gpu_span(gpu, w, (uint64_t)channels * (uint64_t)kernel * 4),
                        sp_gpu_span(gpu, tail, (uint64_t)(kernel - 1) * (uint64_t)channels * 4)};
    sp_gpu_range wr[2] = {sp_gpu_span(gpu, y, bytes), r[2]};
    struct {
        uint64_t y, x, w, tail;
        uint32_t n, channels, kernel;
    } p = {wr[0].lo, r[0].lo, r[1].lo, r[2].lo, (uint32_t)n, (uint32_t)channels, (uint32_t)kernel};
    uint32_t groups[3];
    sp_gpu_grid(div_up((uint64_t)channels, 64), groups);
    sp_gpu_dispatch(gpu, "conv_silu", SP_GPU_CONV_SILU, (uint32_t[4]){64, 0, 0, 0}, &p, sizeof p, groups, r, 3, wr, 2, NULL);
}

static void gpu_gdn(const sp_backend *be, float *out, const float *qkv, const float *a, const float *b,
                    const sp_gdn_shape *s, float *S, int64_t n) {
    sp_gpu *gpu = sp_gpu_of(be);
    if (s->k_dim > 512) {
        fail(gpu, SPLASH_ERR_UNSUPPORTED, "GDN key head dim above 512");
        return;
    }
    uint64_t width = 2 * (uint64_t)s->n_k_heads * (uint64_t)s->k_dim + (uint64_t)s->n_v_heads * (uint64_t)s->v_dim;
    uint64_t state = (uint64_t)s->n_v_heads * (uint64_t)s->k_dim * (uint64_t)s->v_dim * 4;
    sp_gpu_range r[6] = {sp_gpu_span(gpu, qkv, (uint64_t)n * width * 4), sp_gpu_span(gpu, a, (uint64_t)n * (uint64_t)s->n_v_heads * 4),
                        sp_gpu_span(gpu, b, (uint64_t)n * (uint64_t)s->n_v_heads * 4), sp_gpu_span(gpu, s->A, (uint64_t)s->n_v_heads * 4),
                        sp_gpu_span(gpu, s->dt_bias, (uint64_t)s->n_v_heads * 4), sp_gpu_span(gpu, S, state)};
    sp_gpu_range w[2] = {sp_gpu_span(gpu, out, (uint64_t)n * (uint64_t)s->n_v_heads * (uint64_t)s->v_dim * 4), r[5]};
    struct {
        uint64_t o, qkv, a, b, S, A, dt_bias;
        uint32_t n, k_heads, v_heads;
    } p = {w[0].lo, r[0].lo, r[1].lo, r[2].lo, r[5].lo, r[3].lo, r[4].lo, (uint32_t)n, (uint32_t)s->n_k_heads, (uint32_t)s->n_v_heads};
    uint32_t groups[3] = {(uint32_t)s->n_v_heads, div_up((uint64_t)s->v_dim, GDN_COLS), 1};
    sp_gpu_dispatch(gpu, "gdn", SP_GPU_GDN, (uint32_t[4]){128, (uint32_t)s->k_dim, (uint32_t)s->v_dim, 0}, &p, sizeof p, groups,
                    r, 6, w, 2, NULL);
}

/* ---- mixture of experts ---- */

typedef struct {
    uint64_t ids, w, src, dst, plan;
    uint32_t n, n_experts, top_k, d, down_blocks, max_tiles, tile;
} moe_push;

static void gpu_moe_route(const sp_backend *be, int32_t *ids, float *w, const float *logits, int64_t n, int32_t n_experts,
                          int32_t top_k) {
    sp_gpu *gpu = sp_gpu_of(be);
    if (n_experts > 1024 || top_k > 64) {
        fail(gpu, SPLASH_ERR_UNSUPPORTED, "MoE routing above 1024 experts or 64 per token");
        return;
    }
    sp_gpu_range r = sp_gpu_span(gpu, logits, (uint64_t)n * (uint64_t)n_experts * 4);
    sp_gpu_range wr[2] = {sp_gpu_span(gpu, ids, (uint64_t)n * (uint64_t)top_k * 4), sp_gpu_span(gpu, w, (uint64_t)n * (uint64_t)top_k * 4)};
    moe_push p = {wr[0].lo, wr[1].lo, r.lo, 0, 0, (uint32_t)n, (uint32_t)n_experts, (uint32_t)top_k, 0, 0, 0, 0};
    uint32_t groups[3];
    sp_gpu_grid((uint64_t)n, groups);
    sp_gpu_dispatch(gpu, "moe_route", SP_GPU_MOE_ROUTE, (uint32_t[4]){n_experts >= 256 ? 256 : 64, 0, 0, 0}, &p, sizeof p, groups,
                    &r, 1, wr, 2, NULL);
}

/* The device table of an expert set's row-0 addresses, [E][gate, up, down], made on first use and kept; keyed by the
 * views and what they view: a freed set's views may come back at the same address. */
static const uint64_t *expert_table(sp_gpu *gpu, const sp_backend *be, const sp_moe_experts *ex, uint32_t *gate_stride,
                                    uint32_t *down_stride) {
    int32_t i = 0;
    while (i < gpu->n_expert_tables && (gpu->expert_tables[i].key != ex->gate || gpu->expert_tables[i].first != ex->gate[0].data ||
                                        gpu->expert_tables[i].n_experts != ex->n_experts))
        i++;
    if (i == gpu->n_expert_tables) {
        if (i == SP_GPU_MAX_EXPERT_TABLES) return fail(gpu, SPLASH_ERR_UNSUPPORTED, "too many MoE layers"), NULL;
        uint64_t *host = malloc(sizeof(uint64_t) * 3 * (size_t)ex->n_experts);
        uint64_t *dev = sp_gpu_alloc(be, sizeof(uint64_t) * 3 * (uint64_t)ex->n_experts);
        if (!host || !dev) {
            free(host);
            return fail(gpu, SPLASH_ERR_OUT_OF_MEMORY, "MoE expert table"), NULL;
        }
        uint32_t strides[3] = {0, 0, 0};
        for (int32_t e = 0; e < ex->n_experts; e++) {
            const sp_matrix *m[3] = {&ex->gate[e], &ex->up[e], &ex->down[e]};
            for (int j = 0; j < 3; j++) {
                uint64_t a;
                uint32_t s;
                if (!weights(gpu, m[j], &a, &s) || m[j]->type != ex->gate[0].type) {
                    free(host);
                    return fail(gpu, SPLASH_ERR_UNSUPPORTED, "MoE experts of mixed weight types"), NULL;
                }
                host[3 * e + j] = a;
                strides[j] = s;
            }
        }
        sp_gpu_write(be, dev, host, sizeof(uint64_t) * 3 * (uint64_t)ex->n_experts);
        free(host);
        gpu->expert_tables[i] = (sp_gpu_expert_table){ex->gate, ex->gate[0].data, ex->n_experts, dev, strides[0], strides[2]};
        gpu->n_expert_tables++;
    }
    *gate_stride = gpu->expert_tables[i].gate_stride;
    *down_stride = gpu->expert_tables[i].down_stride;
    return gpu->expert_tables[i].table;
}

/* A chunk's whole device range (weight rows padded). */
static sp_gpu_range chunk_range(const sp_gpu_chunk *c) {
    uint64_t lo = c->buf.addr + c->offset;
    return (sp_gpu_range){lo, lo + (c->host_row ? c->size / (uint64_t)c->host_row * (uint64_t)c->dev_row : c->size)};
}

static void gpu_moe_experts(const sp_backend *be, float *y, const float *x, const int32_t *ids, const float *w, int64_t n,
                            const sp_moe_experts *ex, float *scratch) {
    sp_gpu *gpu = sp_gpu_of(be);
    uint32_t gate_stride, down_stride;
    const uint64_t *table = expert_table(gpu, be, ex, &gate_stride, &down_stride);
    if (!table) return;
    if (ex->n_experts > 1024 || ex->hidden % 4 || ex->inter % 4) {
        fail(gpu, SPLASH_ERR_UNSUPPORTED, "MoE shapes (≤ 1024 experts, dims multiples of 4)");
        return;
    }
    uint64_t H = (uint64_t)ex->hidden, I = (uint64_t)ex->inter, K = (uint64_t)ex->top_k, pairs = (uint64_t)n * K;
    uint64_t max_tiles = div_up(pairs, MOE_TILE) + (pairs < (uint64_t)ex->n_experts ? pairs : (uint64_t)ex->n_experts);
    /* scratch (sp_moe_scratch_floats): h [pairs][I], yo [pairs][H], then the plan (ints) */
    float *h = scratch, *yo = h + pairs * I;
    int32_t *plan = (int32_t *)(yo + pairs * H);
    if (8 + 3 * max_tiles + pairs > pairs * (H + I + 1)) {
        fail(gpu, SPLASH_ERR_UNSUPPORTED, "MoE scratch too small for the expert plan");
        return;
    }
    uint32_t single = n == 1; /* one token: tiles of one pair */
    int bucket = single ? 0 : 1;
    sp_gpu_mm_launch lg = sp_gpu_gemv_params(gpu, &ex->gate[0], bucket), ld = sp_gpu_gemv_params(gpu, &ex->down[0], bucket);
    uint32_t max_gu = (uint32_t)sp_gpu_gemv_max_rows(bucket, 2);
    lg.rows = lg.rows > max_gu ? max_gu : lg.rows; /* gate and up rows together (matmul.comp MODE 1) */
    if (!gemv_launch_ok(&lg, (int)max_gu) || !gemv_launch_ok(&ld, sp_gpu_gemv_max_rows(bucket, 1))) {
        fail(gpu, SPLASH_ERR_INVALID_ARGUMENT, "an expert GEMV launch the kernel cannot take");
        return;
    }
    uint32_t up_blocks = div_up(I, (uint64_t)lg.rows * lg.groups), down_blocks = div_up(H, (uint64_t)ld.rows * ld.groups);
    sp_gpu_kernel_id gate_up = GATE_UP[!single][ex->gate[0].type], down = DOWN[!single][ex->down[0].type];
    uint32_t check_gu = ex->hidden % CHUNK_COLS[ex->gate[0].type] != 0, check_d = ex->inter % CHUNK_COLS[ex->down[0].type] != 0;
    sp_gpu_range rx = sp_gpu_span(gpu, x, (uint64_t)n * H * 4), rids = sp_gpu_span(gpu, ids, pairs * 4),
                rw = sp_gpu_span(gpu, w, pairs * 4), rh = sp_gpu_span(gpu, h, pairs * I * 4), ryo = sp_gpu_span(gpu, yo, pairs * H * 4),
                rplan = sp_gpu_span(gpu, plan, (8 + 3 * max_tiles + pairs) * 4), rtab = sp_gpu_span(gpu, table, 24 * (uint64_t)ex->n_experts),
                ry = sp_gpu_span(gpu, y, (uint64_t)n * H * 4);
    /* every expert's weights could be read: the chunks of gate, up and down as a whole */
    const sp_gpu_chunk *cg = sp_gpu_chunk_of(gpu, ex->gate[0].data), *cd = sp_gpu_chunk_of(gpu, ex->down[0].data);
    sp_gpu_range rwg = cg ? chunk_range(cg) : rtab, rwd = cd ? chunk_range(cd) : rtab;

    moe_push mp = {rids.lo, rw.lo, ryo.lo, ry.lo, rplan.lo, (uint32_t)n, (uint32_t)ex->n_experts, (uint32_t)K, up_blocks,
                   down_blocks, (uint32_t)max_tiles, single ? 1 : MOE_TILE};
    sp_gpu_dispatch(gpu, "moe_plan", SP_GPU_MOE_PLAN, (uint32_t[4]){256, 0, 0, 0}, &mp, sizeof mp, (uint32_t[3]){1, 1, 1}, &rids,
                    1, &rplan, 1, NULL);
    mm_push gp = {rtab.lo, rx.lo, rh.lo, rplan.lo + 32, gate_stride, (uint32_t)I, (uint32_t)H, 0, 0, 0, (uint32_t)K,
                  (uint32_t)(3 * max_tiles)};
    sp_gpu_range gr[4] = {rtab, rx, rplan, rwg};
    sp_gpu_dispatch(gpu, "moe_gate_up", gate_up, (uint32_t[4]){lg.workgroup, lg.rows, check_gu, lg.groups}, &gp, sizeof gp, NULL, gr, 4, &rh, 1, plan);
    mm_push dp = {rtab.lo, rh.lo, ryo.lo, rplan.lo + 32, down_stride, (uint32_t)H, (uint32_t)I, 0, 0, 0, (uint32_t)K,
                  (uint32_t)(3 * max_tiles)};
    sp_gpu_range dr[4] = {rtab, rh, rplan, rwd};
    sp_gpu_dispatch(gpu, "moe_down", down, (uint32_t[4]){ld.workgroup, ld.rows, check_d, ld.groups}, &dp, sizeof dp, NULL, dr, 4, &ryo, 1, plan + 3);
    mp.d = (uint32_t)H;
    sp_gpu_range cr[3] = {rids, rw, ryo};
    uint32_t groups[3];
    sp_gpu_grid((uint64_t)n, groups);
    sp_gpu_dispatch(gpu, "moe_combine", SP_GPU_MOE_COMBINE, (uint32_t[4]){H >= 1024 ? 256 : 64, 0, 0, 0}, &mp, sizeof mp, groups,
                    cr, 3, &ry, 1, NULL);
}

/* ---- sampling ---- */

/* Greedy rows without penalties, a bias, masks or top logprobs need only (argmax, max, Σ exp) over the first `vocab` entries
 * — computed on the device, so 12 bytes come back instead of the row. Every other row is read back and sampled by
 * the CPU backend's sampler. */
static bool greedy_plain(const sp_sample_job *j) {
    const splash_sampling *s = j->params;
    return s->temperature == 0 && s->repetition_penalty == 1.0f && s->presence_penalty == 0 && s->frequency_penalty == 0 &&
           s->n_bias == 0 && !j->allowed && !j->tokens && j->n_top == 0;
}

static splash_status gpu_sample(const sp_backend *be, sp_sample_job *jobs, int32_t n_jobs, int32_t vocab, void *scratch,
                                uint64_t scratch_bytes_per_thread) {
    sp_gpu *gpu = sp_gpu_of(be);
    uint64_t rows[64];
    int32_t fast[64], n_fast = 0;
    for (int32_t j = 0; j < n_jobs; j++)
        if (greedy_plain(&jobs[j]) && n_fast < 64) {
            rows[n_fast] = sp_gpu_addr(gpu, jobs[j].logits);
            fast[n_fast++] = j;
        }
    if (n_fast) {
        uint64_t ra = sp_gpu_stage(gpu, rows, sizeof(uint64_t) * (uint64_t)n_fast);
        if (!ra) return *gpu->status ? *gpu->status : SPLASH_ERR_INTERNAL;
        sp_gpu_range r[2] = {{ra, ra + 8 * (uint64_t)n_fast}, {0, 0}};
        for (int32_t i = 0; i < n_fast; i++) {
            sp_gpu_range row = sp_gpu_span(gpu, jobs[fast[i]].logits, (uint64_t)vocab * 4);
            if (!r[1].hi || row.lo < r[1].lo) r[1].lo = row.lo;
            if (row.hi > r[1].hi) r[1].hi = row.hi;
        }
        if (!gpu->stats) gpu->stats = sp_gpu_alloc(be, 12 * 64);
        if (!gpu->stats) {
            fail(gpu, SPLASH_ERR_OUT_OF_MEMORY, "greedy sampling results");
            return *gpu->status;
        }
        sp_gpu_range w = sp_gpu_span(gpu, gpu->stats, 12 * (uint64_t)n_fast);
        struct {
            uint64_t rows, stats;
            uint32_t n, vocab;
        } p = {ra, w.lo, (uint32_t)n_fast, (uint32_t)vocab};
        sp_gpu_dispatch(gpu, "sample_stats", SP_GPU_SAMPLE_STATS, (uint32_t[4]){256, 0, 0, 0}, &p, sizeof p,
                        (uint32_t[3]){(uint32_t)n_fast, 1, 1}, r, 2, &w, 1, NULL);
        float stats[3 * 64];
        sp_gpu_read(be, stats, gpu->stats, 12 * (uint64_t)n_fast);
        if (*gpu->status) return *gpu->status;
        for (int32_t i = 0; i < n_fast; i++) {
            uint32_t arg;
            memcpy(&arg, &stats[3 * i], 4);
            jobs[fast[i]].token = (int32_t)arg;
            jobs[fast[i]].logprob = -logf(stats[3 * i + 2]);
        }
    }
    if (n_fast == n_jobs) return SPLASH_OK;
    /* the rest on the CPU, from host copies of their rows */
    int32_t n_slow = n_jobs - n_fast;
    sp_sample_job *slow = malloc(sizeof *slow * (size_t)n_slow);
    float *host = malloc(sizeof(float) * (size_t)vocab * (size_t)n_slow);
    if (!slow || !host) {
        free(slow), free(host);
        return SP_FAIL(SPLASH_ERR_OUT_OF_MEMORY, "out of memory for %d logits rows", n_slow);
    }
    int32_t k = 0;
    for (int32_t j = 0, f = 0; j < n_jobs; j++) {
        if (f < n_fast && fast[f] == j) {
            f++;
            continue;
        }
        slow[k] = jobs[j];
        sp_gpu_read(be, host + (size_t)k * (size_t)vocab, jobs[j].logits, (uint64_t)vocab * 4);
        slow[k].logits = host + (size_t)k * (size_t)vocab;
        k++;
    }
    splash_status st = *gpu->status ? *gpu->status : sp_cpu_sample(be, slow, n_slow, vocab, scratch, scratch_bytes_per_thread);
    for (int32_t j = 0, f = 0, s = 0; j < n_jobs && !st; j++) {
        if (f < n_fast && fast[f] == j) {
            f++;
            continue;
        }
        jobs[j].token = slow[s].token;
        jobs[j].logprob = slow[s].logprob;
        s++;
    }
    free(slow);
    free(host);
    return st;
}

void sp_gpu_ops_install(sp_backend *be) {
    be->alloc = sp_gpu_alloc;
    be->free = sp_gpu_free;
    be->upload = sp_gpu_upload;
    be->write = sp_gpu_write;
    be->read = sp_gpu_read;
    be->clear = sp_gpu_clear;
    be->copy_rows = gpu_copy_rows;
    be->matmul = gpu_matmul;
    be->embed = gpu_embed;
    be->add = gpu_add;
    be->add_sigmoid_scaled = gpu_add_sigmoid_scaled;
    be->silu_mul = gpu_silu_mul;
    be->matmul_gate_up = gpu_matmul_gate_up;
    be->sigmoid_mul = gpu_sigmoid_mul;
    be->rmsnorm = gpu_rmsnorm;
    be->add_rmsnorm = gpu_add_rmsnorm;
    be->rmsnorm_gated = gpu_rmsnorm_gated;
    be->rope = gpu_rope;
    be->kv_write = gpu_kv_write;
    be->attention = gpu_attention;
    be->attention_ext = gpu_attention_ext;
    be->block_conv = gpu_block_conv;
    be->kv_types = GPU_KV_TYPES;
    be->conv_silu = gpu_conv_silu;
    be->gdn_recurrent = gpu_gdn;
    be->moe_route = gpu_moe_route;
    be->moe_experts = gpu_moe_experts;
    be->sample = gpu_sample;
}
