/* ops.c — the backend.h ops on Vulkan: each fills its kernel's push constants (the structs below mirror the
 * kernels' push_constant blocks field for field), declares the memory it reads and writes, and records a dispatch.
 * Kernels: kernels/ (GLSL). Reference for every op: the CPU backend (backends/cpu/). */
#include "vk.h"

#include "backends/cpu/ops.h"
#include "core/error.h"
#include "core/quant.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { GEMV_MAX_N = 4, ATTN_QV = 16, ATTN_BK = 32, ATTN_HD_MAX = 256, GDN_COLS = 32, MOE_TILE = GEMV_MAX_N };

static bool fail(sp_vk *vk, splash_status st, const char *msg) {
    if (*vk->status == SPLASH_OK) *vk->status = SP_FAIL(st, "vulkan: %s", msg);
    return false;
}

static uint32_t div_up(uint64_t a, uint64_t b) { return (uint32_t)((a + b - 1) / b); }

/* Kernels by weight type (sp_mtype order): GEMV for one x row and for up to GEMV_MAX_N, MoE expert tiles alike. */
#define BY_TYPE(prefix) {prefix##_F32, prefix##_BF16, prefix##_F16, prefix##_Q8, prefix##_Q4}
static const sp_vk_kernel_id MATMUL[2][5] = {BY_TYPE(SP_VK_MATMUL), BY_TYPE(SP_VK_MATMUL4)};
static const sp_vk_kernel_id GATE_UP[2][5] = {BY_TYPE(SP_VK_MOE_GATE_UP), BY_TYPE(SP_VK_MOE_GATE_UP4)};
static const sp_vk_kernel_id DOWN[2][5] = {BY_TYPE(SP_VK_MOE_DOWN), BY_TYPE(SP_VK_MOE_DOWN4)};
static const sp_vk_kernel_id EMBED[5] = BY_TYPE(SP_VK_EMBED);
#undef BY_TYPE
/* Columns one 16-byte chunk of a GEMV covers, by type: x reads need masking when cols is not a multiple. */
static const int64_t CHUNK_COLS[5] = {4, 8, 8, 16, 64};

/* ---- weights ---- */

/* Device address of row 0 of W and its device row stride; false (and the op's status) for a weight type the kernels
 * do not decode (they cover F32, BF16, F16, Q8 and Q4; MLX's affine types run on the CPU backend). */
static bool weights(sp_vk *vk, const sp_matrix *W, VkDeviceAddress *addr, uint32_t *stride) {
    if ((unsigned)W->type > SP_MAT_Q4) {
        if (*vk->status == SPLASH_OK)
            *vk->status = SP_FAIL(SPLASH_ERR_UNSUPPORTED, "vulkan: no kernels for %s weights; use --quant q8|q4 or the CPU backend",
                                  sp_mtype_name(W->type));
        return false;
    }
    const sp_vk_chunk *c = sp_vk_chunk_of(vk, W->data);
    if (!c) return fail(vk, SPLASH_ERR_INTERNAL, "a weight matrix that was not uploaded");
    *addr = sp_vk_addr(vk, W->data);
    *stride = (uint32_t)(c->host_row ? c->dev_row : W->row_bytes);
    return true;
}


/* The GEMM tile for n rows of x: measured for this shape if tuned, else the narrow tile up to 16 rows (index 1 of
 * sp_vk_tiles, kernels/generate.ts) and the square one above. */
static int gemm_tile(const sp_matrix *W, int64_t n) {
    for (int i = 0; i < sp_vk_gemm_tuning_count; i++) {
        const sp_vk_gemm_tuning *t = &sp_vk_gemm_tunings[i];
        if (t->type == (int)W->type && t->rows == W->rows && t->cols == W->cols && t->tile >= 0) return t->tile;
    }
    return n <= 16 ? 1 : 0;
}

/* ---- dense algebra ---- */

typedef struct {
    uint64_t w, x, y, plan;
    uint32_t row_bytes, rows, cols, n, x_stride, y_stride, top_k, order_at;
} mm_push;

void sp_vk_matmul_launch(const sp_backend *be, float *y, const sp_matrix *W, const float *x, int64_t n,
                         const sp_vk_mm_launch *force) {
    sp_vk *vk = sp_vk_of(be);
    VkDeviceAddress w;
    uint32_t stride;
    if (!weights(vk, W, &w, &stride)) return;
    VkDeviceAddress xa = sp_vk_addr(vk, x), ya = sp_vk_addr(vk, y);
    if (W->cols % 4 || xa % 16) {
        fail(vk, SPLASH_ERR_UNSUPPORTED, "matmul needs cols % 4 == 0 and 16-byte aligned inputs");
        return;
    }
    sp_vk_range reads[2] = {{w, w + (uint64_t)W->rows * stride}, {xa, xa + (uint64_t)n * (uint64_t)W->cols * 4}};
    sp_vk_range write = {ya, ya + (uint64_t)n * (uint64_t)W->rows * 4};
    if (n <= GEMV_MAX_N) {
        uint32_t wg, R, groups[3];
        sp_vk_gemv_params(vk, W, &wg, &R);
        if (force) wg = force->workgroup, R = force->rows;
        sp_vk_grid(div_up((uint64_t)W->rows, R), groups);
        mm_push p = {w, xa, ya, 0, stride, (uint32_t)W->rows, (uint32_t)W->cols, (uint32_t)n, (uint32_t)W->cols,
                     (uint32_t)W->rows, 0, 0};
        uint32_t check = W->cols % CHUNK_COLS[W->type] != 0;
        sp_vk_dispatch(vk, "matmul", MATMUL[n > 1][W->type], (uint32_t[4]){wg, R, check, 0}, &p, sizeof p, groups, reads, 2,
                       &write, 1, NULL);
        return;
    }
    int tile = force ? force->tile : gemm_tile(W, n);
    const sp_vk_tile *t = &sp_vk_tiles[tile];
    struct {
        uint64_t w, x, y;
        uint32_t row_bytes, rows, cols, n, x_stride, y_stride;
    } p = {w, xa, ya, stride, (uint32_t)W->rows, (uint32_t)W->cols, (uint32_t)n, (uint32_t)W->cols, (uint32_t)W->rows};
    uint32_t groups[3] = {div_up((uint64_t)W->rows, (uint64_t)t->bm), div_up((uint64_t)n, (uint64_t)t->bn), 1};
    uint32_t wg = (uint32_t)((t->bm / t->tm) * (t->bn / t->tn));
    sp_vk_dispatch(vk, "gemm", (sp_vk_kernel_id)(sp_vk_gemm_first[W->type] + tile), (uint32_t[4]){wg, 0, 0, 0}, &p,
                   sizeof p, groups, reads, 2, &write, 1, NULL);
}

static void vk_matmul(const sp_backend *be, float *y, const sp_matrix *W, const float *x, int64_t n) {
    sp_vk_matmul_launch(be, y, W, x, n, NULL);
}

typedef struct {
    uint64_t y, x, g;
    uint32_t n, d, x_stride, y_stride;
} ew_push;

static void elementwise(sp_vk *vk, const char *name, sp_vk_kernel_id k, ew_push p, const sp_vk_range *reads,
                        int32_t n_reads, sp_vk_range write) {
    uint32_t groups[3];
    sp_vk_grid(div_up(p.n, 256), groups);
    sp_vk_dispatch(vk, name, k, (uint32_t[4]){256, 0, 0, 0}, &p, sizeof p, groups, reads, n_reads, &write, 1, NULL);
}

static void vk_embed(const sp_backend *be, float *x, const sp_matrix *table, const int32_t *tokens, int64_t n) {
    sp_vk *vk = sp_vk_of(be);
    VkDeviceAddress w;
    uint32_t stride;
    if (!weights(vk, table, &w, &stride)) return;
    sp_vk_range reads[2] = {{w, w + (uint64_t)table->rows * stride}, sp_vk_span(vk, tokens, (uint64_t)n * 4)};
    ew_push p = {sp_vk_addr(vk, x), w, sp_vk_addr(vk, tokens), (uint32_t)(n * table->cols), (uint32_t)table->cols, stride, 0};
    elementwise(vk, "embed", EMBED[table->type], p, reads, 2, sp_vk_span(vk, x, (uint64_t)n * (uint64_t)table->cols * 4));
}

static void vk_add(const sp_backend *be, float *y, const float *x, int64_t n) {
    sp_vk *vk = sp_vk_of(be);
    sp_vk_range r[2] = {sp_vk_span(vk, x, (uint64_t)n * 4), sp_vk_span(vk, y, (uint64_t)n * 4)};
    elementwise(vk, "add", SP_VK_ADD, (ew_push){r[1].lo, r[0].lo, 0, (uint32_t)n, 1, 0, 0}, r, 2, r[1]);
}

static void vk_silu_mul(const sp_backend *be, float *y, const float *g, const float *u, int64_t n) {
    sp_vk *vk = sp_vk_of(be);
    sp_vk_range r[2] = {sp_vk_span(vk, g, (uint64_t)n * 4), sp_vk_span(vk, u, (uint64_t)n * 4)};
    sp_vk_range w = sp_vk_span(vk, y, (uint64_t)n * 4);
    elementwise(vk, "silu_mul", SP_VK_SILU_MUL, (ew_push){w.lo, r[1].lo, r[0].lo, (uint32_t)n, 1, 0, 0}, r, 2, w);
}

static void vk_sigmoid_mul(const sp_backend *be, float *y, const float *g, int64_t n) {
    sp_vk *vk = sp_vk_of(be);
    sp_vk_range r[2] = {sp_vk_span(vk, g, (uint64_t)n * 4), sp_vk_span(vk, y, (uint64_t)n * 4)};
    elementwise(vk, "sigmoid_mul", SP_VK_SIGMOID_MUL, (ew_push){r[1].lo, 0, r[0].lo, (uint32_t)n, 1, 0, 0}, r, 2, r[1]);
}

static void vk_add_sigmoid_scaled(const sp_backend *be, float *y, const float *x, const float *g, int64_t n, int64_t d) {
    sp_vk *vk = sp_vk_of(be);
    sp_vk_range r[3] = {sp_vk_span(vk, x, (uint64_t)(n * d) * 4), sp_vk_span(vk, g, (uint64_t)n * 4),
                        sp_vk_span(vk, y, (uint64_t)(n * d) * 4)};
    elementwise(vk, "add_sigmoid_scaled", SP_VK_ADD_SIGMOID_SCALED,
                (ew_push){r[2].lo, r[0].lo, r[1].lo, (uint32_t)(n * d), (uint32_t)d, 0, 0}, r, 3, r[2]);
}

static void vk_copy_rows(const sp_backend *be, float *dst, int64_t dst_stride, const float *src, int64_t src_stride,
                         int64_t rows, int64_t cols) {
    sp_vk *vk = sp_vk_of(be);
    if (rows <= 0 || cols <= 0) return;
    sp_vk_range r = sp_vk_span(vk, src, (uint64_t)((rows - 1) * src_stride + cols) * 4);
    sp_vk_range w = sp_vk_span(vk, dst, (uint64_t)((rows - 1) * dst_stride + cols) * 4);
    elementwise(vk, "copy_rows", SP_VK_COPY2D,
                (ew_push){w.lo, r.lo, 0, (uint32_t)(rows * cols), (uint32_t)cols, (uint32_t)src_stride, (uint32_t)dst_stride},
                &r, 1, w);
}

/* ---- norms ---- */

typedef struct {
    uint64_t y, x, z, w;
    uint32_t rows, d;
    float eps;
} norm_push;

static void norm(sp_vk *vk, sp_vk_kernel_id k, const char *name, float *y, const float *x, const float *z, const float *w,
                 int64_t n, int64_t d, float eps) {
    uint64_t bytes = (uint64_t)(n * d) * 4;
    sp_vk_range r[3] = {sp_vk_span(vk, x, bytes), sp_vk_span(vk, w, (uint64_t)d * 4), z ? sp_vk_span(vk, z, bytes) : (sp_vk_range){0, 0}};
    sp_vk_range wr = sp_vk_span(vk, y, bytes);
    norm_push p = {wr.lo, r[0].lo, r[2].lo, r[1].lo, (uint32_t)n, (uint32_t)d, eps};
    uint32_t groups[3], wg = d >= 1024 ? 256 : d >= 256 ? 128 : 64;
    sp_vk_grid((uint64_t)n, groups);
    sp_vk_dispatch(vk, name, k, (uint32_t[4]){wg, 0, 0, 0}, &p, sizeof p, groups, r, 3, &wr, 1, NULL);
}

static void vk_rmsnorm(const sp_backend *be, float *y, const float *x, const float *w, int64_t n, int64_t d, float eps) {
    norm(sp_vk_of(be), SP_VK_RMSNORM, "rmsnorm", y, x, NULL, w, n, d, eps);
}

static void vk_rmsnorm_gated(const sp_backend *be, float *y, const float *x, const float *z, const float *w, int64_t n,
                             int64_t d, float eps) {
    norm(sp_vk_of(be), SP_VK_RMSNORM_GATED, "rmsnorm_gated", y, x, z, w, n, d, eps);
}

/* ---- positions ---- */

static void vk_rope(const sp_backend *be, float *x, int64_t n, int32_t n_heads, int32_t head_dim, int32_t rot_dim,
                    const int32_t *pos, const int32_t *mrope_section, const float *inv_freq) {
    sp_vk *vk = sp_vk_of(be);
    struct {
        uint64_t x, pos, inv_freq;
        uint32_t n, heads, head_dim, half_rot;
        int32_t s0, s1, s2;
    } p = {sp_vk_addr(vk, x), sp_vk_addr(vk, pos), sp_vk_addr(vk, inv_freq), (uint32_t)n, (uint32_t)n_heads,
           (uint32_t)head_dim, (uint32_t)rot_dim / 2, 0, 0, 0};
    if (mrope_section) p.s0 = mrope_section[0], p.s1 = mrope_section[1], p.s2 = mrope_section[2];
    sp_vk_range r[2] = {sp_vk_span(vk, pos, (uint64_t)n * (mrope_section ? 12 : 4)), sp_vk_span(vk, inv_freq, (uint64_t)rot_dim * 2)};
    sp_vk_range w = sp_vk_span(vk, x, (uint64_t)n * (uint64_t)n_heads * (uint64_t)head_dim * 4);
    uint32_t groups[3];
    sp_vk_grid(div_up((uint64_t)n * (uint64_t)n_heads * (uint64_t)(rot_dim / 2), 256), groups);
    sp_vk_dispatch(vk, "rope", SP_VK_ROPE, (uint32_t[4]){256, 0, 0, 0}, &p, sizeof p, groups, r, 2, &w, 1, NULL);
}

/* ---- attention ---- */

typedef struct {
    uint64_t dst, src, k, v, pages, part;
    uint32_t n_past, n, heads, kv_heads, page_tokens, page_stride, split_len, n_splits, hb, rt;
    float scale;
    uint32_t pad;
    uint64_t src2;
} attn_push;

/* The whole KV allocation as one range (pages are scattered; kernels touch only the sequence's). */
static sp_vk_range kv_range(sp_vk *vk, const sp_kv_view *kv) {
    const sp_vk_chunk *c = sp_vk_chunk_of(vk, kv->k);
    return c ? (sp_vk_range){c->addr, c->addr + c->size} : (sp_vk_range){0, 0};
}

static bool attn_base(sp_vk *vk, const sp_kv_view *kv, int32_t n_past, int64_t n, int32_t head_dim, attn_push *p,
                      sp_vk_range *pages) {
    if (head_dim > ATTN_HD_MAX || head_dim % 4) return fail(vk, SPLASH_ERR_UNSUPPORTED, "attention needs head_dim ≤ 256, a multiple of 4");
    uint64_t n_pages = ((uint64_t)n_past + (uint64_t)n + (uint64_t)kv->page_tokens - 1) / (uint64_t)kv->page_tokens;
    VkDeviceAddress pa = sp_vk_stage(vk, kv->pages, n_pages * 4);
    if (!pa) return false;
    *pages = (sp_vk_range){pa, pa + n_pages * 4};
    *p = (attn_push){.k = sp_vk_addr(vk, kv->k), .v = sp_vk_addr(vk, kv->v), .pages = pa, .n_past = (uint32_t)n_past,
                     .n = (uint32_t)n, .page_tokens = (uint32_t)kv->page_tokens, .page_stride = (uint32_t)kv->page_stride};
    return true;
}

static void vk_kv_write(const sp_backend *be, const sp_kv_view *kv, const float *k, const float *v, int32_t n_past,
                        int64_t n, int32_t n_kv_heads, int32_t head_dim) {
    sp_vk *vk = sp_vk_of(be);
    attn_push p;
    sp_vk_range pages;
    if (!attn_base(vk, kv, n_past, n, head_dim, &p, &pages)) return;
    uint64_t bytes = (uint64_t)n * (uint64_t)n_kv_heads * (uint64_t)head_dim * 4;
    sp_vk_range r[3] = {sp_vk_span(vk, k, bytes), sp_vk_span(vk, v, bytes), pages}, w = kv_range(vk, kv);
    p.src = r[0].lo;
    p.src2 = r[1].lo;
    p.kv_heads = (uint32_t)n_kv_heads;
    uint32_t groups[3];
    sp_vk_grid(div_up(bytes / 4, 256), groups);
    sp_vk_dispatch(vk, "kv_write", SP_VK_KV_WRITE, (uint32_t[4]){256, (uint32_t)head_dim, 0, 0}, &p, sizeof p, groups, r, 3,
                   &w, 1, NULL);
}

/* Split-key partials of one attention call: n · heads · splits · (head_dim + 2) floats, grown on demand. */
static float *attn_partials(sp_vk *vk, const sp_backend *be, uint64_t floats) {
    if (floats * 4 <= vk->part_bytes) return vk->part;
    sp_vk_sync(vk);
    if (vk->part) sp_vk_free(be, vk->part);
    vk->part_bytes = floats * 4 * 2;
    vk->part = sp_vk_alloc(be, vk->part_bytes);
    if (!vk->part) vk->part_bytes = 0;
    return vk->part;
}

static void vk_attention(const sp_backend *be, float *out, const float *q, const sp_kv_view *kv, int32_t n_past,
                         int64_t n, int32_t n_heads, int32_t n_kv_heads, int32_t head_dim, float scale) {
    sp_vk *vk = sp_vk_of(be);
    attn_push p;
    sp_vk_range pages;
    if (!attn_base(vk, kv, n_past, n, head_dim, &p, &pages)) return;
    uint32_t G = (uint32_t)(n_heads / n_kv_heads);
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
    if (wgs < vk->attention_workgroups && keys > 4 * ATTN_BK) {
        uint64_t want = div_up(vk->attention_workgroups, wgs), len = div_up(keys, want);
        len = (len + ATTN_BK - 1) / ATTN_BK * ATTN_BK;
        if (len < 4 * ATTN_BK) len = 4 * ATTN_BK;
        p.split_len = (uint32_t)len;
        splits = div_up(keys, len);
    }
    p.n_splits = splits;
    uint64_t qbytes = (uint64_t)n * (uint64_t)n_heads * (uint64_t)head_dim * 4;
    sp_vk_range r[3] = {sp_vk_span(vk, q, qbytes), kv_range(vk, kv), pages};
    sp_vk_range w = sp_vk_span(vk, out, qbytes);
    p.src = r[0].lo;
    p.dst = w.lo;
    uint32_t spec[4] = {128, (uint32_t)head_dim, 0, 0};
    if (splits == 1) {
        sp_vk_dispatch(vk, "attention", SP_VK_ATTEND, spec, &p, sizeof p, (uint32_t[3]){n_kv_heads * blocks, tiles, 1}, r,
                       3, &w, 1, NULL);
        return;
    }
    float *part = attn_partials(vk, be, (uint64_t)n * (uint64_t)n_heads * splits * (uint64_t)(head_dim + 2));
    if (!part) {
        fail(vk, SPLASH_ERR_OUT_OF_MEMORY, "attention partials");
        return;
    }
    sp_vk_range pr = sp_vk_span(vk, part, (uint64_t)n * (uint64_t)n_heads * splits * (uint64_t)(head_dim + 2) * 4);
    p.part = pr.lo;
    sp_vk_dispatch(vk, "attention", SP_VK_ATTEND, spec, &p, sizeof p, (uint32_t[3]){n_kv_heads * blocks, tiles, splits}, r,
                   3, &pr, 1, NULL);
    uint32_t groups[3];
    sp_vk_grid((uint64_t)n * (uint64_t)n_heads, groups);
    spec[0] = head_dim >= 128 ? 128 : 64;
    sp_vk_dispatch(vk, "attention_reduce", SP_VK_ATTEND_REDUCE, spec, &p, sizeof p, groups, &pr, 1, &w, 1, NULL);
}

/* ---- Gated DeltaNet ---- */

static void vk_conv_silu(const sp_backend *be, float *y, const float *x, int64_t n, int64_t channels, const float *w,
                         int32_t kernel, float *tail) {
    sp_vk *vk = sp_vk_of(be);
    if (kernel > 16) {
        fail(vk, SPLASH_ERR_UNSUPPORTED, "conv kernel longer than 16");
        return;
    }
    uint64_t bytes = (uint64_t)n * (uint64_t)channels * 4;
    sp_vk_range r[3] = {sp_vk_span(vk, x, bytes), sp_vk_span(vk, w, (uint64_t)channels * (uint64_t)kernel * 4),
                        sp_vk_span(vk, tail, (uint64_t)(kernel - 1) * (uint64_t)channels * 4)};
    sp_vk_range wr[2] = {sp_vk_span(vk, y, bytes), r[2]};
    struct {
        uint64_t y, x, w, tail;
        uint32_t n, channels, kernel;
    } p = {wr[0].lo, r[0].lo, r[1].lo, r[2].lo, (uint32_t)n, (uint32_t)channels, (uint32_t)kernel};
    uint32_t groups[3];
    sp_vk_grid(div_up((uint64_t)channels, 64), groups);
    sp_vk_dispatch(vk, "conv_silu", SP_VK_CONV_SILU, (uint32_t[4]){64, 0, 0, 0}, &p, sizeof p, groups, r, 3, wr, 2, NULL);
}

static void vk_gdn(const sp_backend *be, float *out, const float *qkv, const float *a, const float *b,
                   const sp_gdn_shape *s, float *S, int64_t n) {
    sp_vk *vk = sp_vk_of(be);
    if (s->k_dim > 512) {
        fail(vk, SPLASH_ERR_UNSUPPORTED, "GDN key head dim above 512");
        return;
    }
    uint64_t width = 2 * (uint64_t)s->n_k_heads * (uint64_t)s->k_dim + (uint64_t)s->n_v_heads * (uint64_t)s->v_dim;
    uint64_t state = (uint64_t)s->n_v_heads * (uint64_t)s->k_dim * (uint64_t)s->v_dim * 4;
    sp_vk_range r[6] = {sp_vk_span(vk, qkv, (uint64_t)n * width * 4), sp_vk_span(vk, a, (uint64_t)n * (uint64_t)s->n_v_heads * 4),
                        sp_vk_span(vk, b, (uint64_t)n * (uint64_t)s->n_v_heads * 4), sp_vk_span(vk, s->A, (uint64_t)s->n_v_heads * 4),
                        sp_vk_span(vk, s->dt_bias, (uint64_t)s->n_v_heads * 4), sp_vk_span(vk, S, state)};
    sp_vk_range w[2] = {sp_vk_span(vk, out, (uint64_t)n * (uint64_t)s->n_v_heads * (uint64_t)s->v_dim * 4), r[5]};
    struct {
        uint64_t o, qkv, a, b, S, A, dt_bias;
        uint32_t n, k_heads, v_heads;
    } p = {w[0].lo, r[0].lo, r[1].lo, r[2].lo, r[5].lo, r[3].lo, r[4].lo, (uint32_t)n, (uint32_t)s->n_k_heads, (uint32_t)s->n_v_heads};
    uint32_t groups[3] = {(uint32_t)s->n_v_heads, div_up((uint64_t)s->v_dim, GDN_COLS), 1};
    sp_vk_dispatch(vk, "gdn", SP_VK_GDN, (uint32_t[4]){128, (uint32_t)s->k_dim, (uint32_t)s->v_dim, 0}, &p, sizeof p, groups,
                   r, 6, w, 2, NULL);
}

/* ---- mixture of experts ---- */

typedef struct {
    uint64_t ids, w, src, dst, plan;
    uint32_t n, n_experts, top_k, d, down_blocks, max_tiles, tile;
} moe_push;

static void vk_moe_route(const sp_backend *be, int32_t *ids, float *w, const float *logits, int64_t n, int32_t n_experts,
                         int32_t top_k) {
    sp_vk *vk = sp_vk_of(be);
    if (n_experts > 1024 || top_k > 64) {
        fail(vk, SPLASH_ERR_UNSUPPORTED, "MoE routing above 1024 experts or 64 per token");
        return;
    }
    sp_vk_range r = sp_vk_span(vk, logits, (uint64_t)n * (uint64_t)n_experts * 4);
    sp_vk_range wr[2] = {sp_vk_span(vk, ids, (uint64_t)n * (uint64_t)top_k * 4), sp_vk_span(vk, w, (uint64_t)n * (uint64_t)top_k * 4)};
    moe_push p = {wr[0].lo, wr[1].lo, r.lo, 0, 0, (uint32_t)n, (uint32_t)n_experts, (uint32_t)top_k, 0, 0, 0, 0};
    uint32_t groups[3];
    sp_vk_grid((uint64_t)n, groups);
    sp_vk_dispatch(vk, "moe_route", SP_VK_MOE_ROUTE, (uint32_t[4]){n_experts >= 256 ? 256 : 64, 0, 0, 0}, &p, sizeof p, groups,
                   &r, 1, wr, 2, NULL);
}

/* The device table of an expert set's row-0 addresses, [E][gate, up, down], made on first use and kept. */
static const uint64_t *expert_table(sp_vk *vk, const sp_backend *be, const sp_moe_experts *ex, uint32_t *gate_stride,
                                    uint32_t *down_stride) {
    int32_t i = 0;
    while (i < vk->n_expert_tables && (vk->expert_tables[i].key != ex->gate || vk->expert_tables[i].first != ex->gate[0].data ||
                                       vk->expert_tables[i].n_experts != ex->n_experts))
        i++;
    if (i == vk->n_expert_tables) {
        if (i == SP_VK_MAX_EXPERT_TABLES) return fail(vk, SPLASH_ERR_UNSUPPORTED, "too many MoE layers"), NULL;
        uint64_t *host = malloc(sizeof(uint64_t) * 3 * (size_t)ex->n_experts);
        uint64_t *dev = sp_vk_alloc(be, sizeof(uint64_t) * 3 * (uint64_t)ex->n_experts);
        if (!host || !dev) {
            free(host);
            return fail(vk, SPLASH_ERR_OUT_OF_MEMORY, "MoE expert table"), NULL;
        }
        uint32_t strides[3] = {0, 0, 0};
        for (int32_t e = 0; e < ex->n_experts; e++) {
            const sp_matrix *m[3] = {&ex->gate[e], &ex->up[e], &ex->down[e]};
            for (int j = 0; j < 3; j++) {
                VkDeviceAddress a;
                uint32_t s;
                if (!weights(vk, m[j], &a, &s) || m[j]->type != ex->gate[0].type) {
                    free(host);
                    return fail(vk, SPLASH_ERR_UNSUPPORTED, "MoE experts of mixed weight types"), NULL;
                }
                host[3 * e + j] = a;
                strides[j] = s;
            }
        }
        sp_vk_write(be, dev, host, sizeof(uint64_t) * 3 * (uint64_t)ex->n_experts);
        free(host);
        vk->expert_tables[i] = (sp_vk_expert_table){ex->gate, ex->gate[0].data, ex->n_experts, dev, strides[0], strides[2]};
        vk->n_expert_tables++;
    }
    *gate_stride = vk->expert_tables[i].gate_stride;
    *down_stride = vk->expert_tables[i].down_stride;
    return vk->expert_tables[i].table;
}

static void vk_moe_experts(const sp_backend *be, float *y, const float *x, const int32_t *ids, const float *w, int64_t n,
                           const sp_moe_experts *ex, float *scratch) {
    sp_vk *vk = sp_vk_of(be);
    uint32_t gate_stride, down_stride;
    const uint64_t *table = expert_table(vk, be, ex, &gate_stride, &down_stride);
    if (!table) return;
    if (ex->n_experts > 1024 || ex->hidden % 4 || ex->inter % 4) {
        fail(vk, SPLASH_ERR_UNSUPPORTED, "MoE shapes (≤ 1024 experts, dims multiples of 4)");
        return;
    }
    uint64_t H = (uint64_t)ex->hidden, I = (uint64_t)ex->inter, K = (uint64_t)ex->top_k, pairs = (uint64_t)n * K;
    uint64_t max_tiles = div_up(pairs, MOE_TILE) + (pairs < (uint64_t)ex->n_experts ? pairs : (uint64_t)ex->n_experts);
    /* scratch (sp_moe_scratch_floats): h [pairs][I], yo [pairs][H], then the plan (ints) */
    float *h = scratch, *yo = h + pairs * I;
    int32_t *plan = (int32_t *)(yo + pairs * H);
    if (8 + 3 * max_tiles + pairs > pairs * (H + I + 1)) {
        fail(vk, SPLASH_ERR_UNSUPPORTED, "MoE scratch too small for the expert plan");
        return;
    }
    uint32_t wg, R, Rd, wgd;
    sp_vk_gemv_params(vk, &ex->gate[0], &wg, &R);
    sp_vk_gemv_params(vk, &ex->down[0], &wgd, &Rd);
    R = R > 2 ? 2 : R; /* gate and up rows together: at most 2 of each (matmul.comp MODE 1) */
    uint32_t up_blocks = div_up(I, R), down_blocks = div_up(H, Rd), single = n == 1; /* one token: tiles of one pair */
    sp_vk_kernel_id gate_up = GATE_UP[!single][ex->gate[0].type], down = DOWN[!single][ex->down[0].type];
    uint32_t check_gu = ex->hidden % CHUNK_COLS[ex->gate[0].type] != 0, check_d = ex->inter % CHUNK_COLS[ex->down[0].type] != 0;
    sp_vk_range rx = sp_vk_span(vk, x, (uint64_t)n * H * 4), rids = sp_vk_span(vk, ids, pairs * 4),
                rw = sp_vk_span(vk, w, pairs * 4), rh = sp_vk_span(vk, h, pairs * I * 4), ryo = sp_vk_span(vk, yo, pairs * H * 4),
                rplan = sp_vk_span(vk, plan, (8 + 3 * max_tiles + pairs) * 4), rtab = sp_vk_span(vk, table, 24 * (uint64_t)ex->n_experts),
                ry = sp_vk_span(vk, y, (uint64_t)n * H * 4);
    /* every expert's weights could be read: the chunks of gate, up and down as a whole */
    const sp_vk_chunk *cg = sp_vk_chunk_of(vk, ex->gate[0].data), *cd = sp_vk_chunk_of(vk, ex->down[0].data);
    sp_vk_range rwg = cg ? (sp_vk_range){cg->addr, cg->addr + (cg->host_row ? cg->size / cg->host_row * cg->dev_row : cg->size)} : rtab;
    sp_vk_range rwd = cd ? (sp_vk_range){cd->addr, cd->addr + (cd->host_row ? cd->size / cd->host_row * cd->dev_row : cd->size)} : rtab;

    moe_push mp = {rids.lo, rw.lo, ryo.lo, ry.lo, rplan.lo, (uint32_t)n, (uint32_t)ex->n_experts, (uint32_t)K, up_blocks,
                   down_blocks, (uint32_t)max_tiles, single ? 1 : MOE_TILE};
    sp_vk_dispatch(vk, "moe_plan", SP_VK_MOE_PLAN, (uint32_t[4]){256, 0, 0, 0}, &mp, sizeof mp, (uint32_t[3]){1, 1, 1}, &rids,
                   1, &rplan, 1, NULL);
    mm_push gp = {rtab.lo, rx.lo, rh.lo, rplan.lo + 32, gate_stride, (uint32_t)I, (uint32_t)H, 0, 0, 0, (uint32_t)K,
                  (uint32_t)(3 * max_tiles)};
    sp_vk_range gr[4] = {rtab, rx, rplan, rwg};
    sp_vk_dispatch(vk, "moe_gate_up", gate_up, (uint32_t[4]){wg, R, check_gu, 0}, &gp, sizeof gp, NULL, gr, 4, &rh, 1, plan);
    mm_push dp = {rtab.lo, rh.lo, ryo.lo, rplan.lo + 32, down_stride, (uint32_t)H, (uint32_t)I, 0, 0, 0, (uint32_t)K,
                  (uint32_t)(3 * max_tiles)};
    sp_vk_range dr[4] = {rtab, rh, rplan, rwd};
    sp_vk_dispatch(vk, "moe_down", down, (uint32_t[4]){wgd, Rd, check_d, 0}, &dp, sizeof dp, NULL, dr, 4, &ryo, 1, plan + 3);
    mp.d = (uint32_t)H;
    sp_vk_range cr[3] = {rids, rw, ryo};
    uint32_t groups[3];
    sp_vk_grid((uint64_t)n, groups);
    sp_vk_dispatch(vk, "moe_combine", SP_VK_MOE_COMBINE, (uint32_t[4]){H >= 1024 ? 256 : 64, 0, 0, 0}, &mp, sizeof mp, groups,
                   cr, 3, &ry, 1, NULL);
}

/* ---- sampling ---- */

/* Greedy rows without penalties, mask or top logprobs need only (argmax, max, Σ exp) — computed on the device, so
 * 12 bytes come back instead of the row. Every other row is read back and sampled by the CPU backend's sampler. */
static bool greedy_plain(const sp_sample_job *j) {
    const splash_sampling *s = j->params;
    return s->temperature == 0 && s->repetition_penalty == 1.0f && s->presence_penalty == 0 && s->frequency_penalty == 0 &&
           !j->allowed && j->n_top == 0;
}

static splash_status vk_sample(const sp_backend *be, sp_sample_job *jobs, int32_t n_jobs, int32_t vocab, void *scratch,
                               uint64_t scratch_bytes_per_thread) {
    sp_vk *vk = sp_vk_of(be);
    uint64_t rows[64];
    int32_t fast[64], n_fast = 0;
    for (int32_t j = 0; j < n_jobs; j++)
        if (greedy_plain(&jobs[j]) && n_fast < 64) {
            rows[n_fast] = sp_vk_addr(vk, jobs[j].logits);
            fast[n_fast++] = j;
        }
    if (n_fast) {
        VkDeviceAddress ra = sp_vk_stage(vk, rows, sizeof(uint64_t) * (uint64_t)n_fast);
        if (!ra) return *vk->status ? *vk->status : SPLASH_ERR_INTERNAL;
        sp_vk_range r[2] = {{ra, ra + 8 * (uint64_t)n_fast}, {0, 0}};
        for (int32_t i = 0; i < n_fast; i++) {
            sp_vk_range row = sp_vk_span(vk, jobs[fast[i]].logits, (uint64_t)vocab * 4);
            if (!r[1].hi || row.lo < r[1].lo) r[1].lo = row.lo;
            if (row.hi > r[1].hi) r[1].hi = row.hi;
        }
        sp_vk_range w = {vk->stats.addr, vk->stats.addr + 12 * (uint64_t)n_fast};
        struct {
            uint64_t rows, stats;
            uint32_t n, vocab;
        } p = {ra, vk->stats.addr, (uint32_t)n_fast, (uint32_t)vocab};
        sp_vk_dispatch(vk, "sample_stats", SP_VK_SAMPLE_STATS, (uint32_t[4]){256, 0, 0, 0}, &p, sizeof p,
                       (uint32_t[3]){(uint32_t)n_fast, 1, 1}, r, 2, &w, 1, NULL);
        sp_vk_copy(vk, vk->stats.buffer, 0, vk->readback.buffer, 0, 12 * (uint64_t)n_fast, w,
                   (sp_vk_range){vk->readback.addr, vk->readback.addr + 12 * (uint64_t)n_fast});
        splash_status st = sp_vk_sync(vk);
        if (st) return st;
        const float *stats = vk->readback.map;
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
        sp_vk_read(be, host + (size_t)k * (size_t)vocab, jobs[j].logits, (uint64_t)vocab * 4);
        slow[k].logits = host + (size_t)k * (size_t)vocab;
        k++;
    }
    splash_status st = *vk->status ? *vk->status : sp_cpu_sample(be, slow, n_slow, vocab, scratch, scratch_bytes_per_thread);
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

void sp_vk_ops_install(sp_backend *be) {
    be->alloc = sp_vk_alloc;
    be->free = sp_vk_free;
    be->upload = sp_vk_upload;
    be->write = sp_vk_write;
    be->read = sp_vk_read;
    be->clear = sp_vk_clear;
    be->copy_rows = vk_copy_rows;
    be->matmul = vk_matmul;
    be->embed = vk_embed;
    be->add = vk_add;
    be->add_sigmoid_scaled = vk_add_sigmoid_scaled;
    be->silu_mul = vk_silu_mul;
    be->sigmoid_mul = vk_sigmoid_mul;
    be->rmsnorm = vk_rmsnorm;
    be->rmsnorm_gated = vk_rmsnorm_gated;
    be->rope = vk_rope;
    be->kv_write = vk_kv_write;
    be->attention = vk_attention;
    be->conv_silu = vk_conv_silu;
    be->gdn_recurrent = vk_gdn;
    be->gdn_chunked = vk_gdn;
    be->moe_route = vk_moe_route;
    be->moe_experts = vk_moe_experts;
    be->sample = vk_sample;
}
