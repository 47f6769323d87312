/* ops.c — the backend.h ops on Metal: each fills its kernel's push constants (the structs below mirror the kernels'
 * push_constant blocks field for field; record.c checks their sizes against kernels/msl/manifest.json), declares
 * the memory it reads and writes, and encodes a dispatch. Kernels: kernels/ (GLSL), translated to kernels/msl/.
 * Reference for every op: the CPU backend (backends/cpu/).
 *
 * The dispatch shapes, function constants and push layouts are the Vulkan backend's (backends/vulkan/ops.c), since
 * both run the same SPIR-V: what differs is memory (unified, no staging copies) and tuning (the Vulkan tables were
 * measured on other GPUs, so Metal uses the defaults until an Apple GPU is measured). */
#include "mtl.h"

#include "backends/cpu/ops.h"
#include "core/error.h"
#include "core/quant.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { GEMV_MAX_N = 4, ATTN_QV = 16, ATTN_BK = 32, ATTN_HD_MAX = 256, GDN_COLS = 32, MOE_TILE = GEMV_MAX_N };

static bool fail(sp_mtl *m, splash_status st, const char *msg) {
    sp_mtl_fail(m, st, "%s", msg);
    return false;
}

static uint32_t div_up(uint64_t a, uint64_t b) { return (uint32_t)((a + b - 1) / b); }

/* Kernels by weight type (sp_mtype order): GEMV for one x row and for up to GEMV_MAX_N, MoE expert tiles alike. */
#define BY_TYPE(prefix) {prefix##_F32, prefix##_BF16, prefix##_F16, prefix##_Q8, prefix##_Q4}
static const sp_mtl_kernel_id MATMUL[2][5] = {BY_TYPE(SP_MTL_MATMUL), BY_TYPE(SP_MTL_MATMUL4)};
static const sp_mtl_kernel_id GATE_UP[2][5] = {BY_TYPE(SP_MTL_MOE_GATE_UP), BY_TYPE(SP_MTL_MOE_GATE_UP4)};
static const sp_mtl_kernel_id DOWN[2][5] = {BY_TYPE(SP_MTL_MOE_DOWN), BY_TYPE(SP_MTL_MOE_DOWN4)};
static const sp_mtl_kernel_id EMBED[5] = BY_TYPE(SP_MTL_EMBED);
#undef BY_TYPE
/* Columns one 16-byte chunk of a GEMV covers, by type: x reads need masking when cols is not a multiple. */
static const int64_t CHUNK_COLS[5] = {4, 8, 8, 16, 64};

/* ---- weights ---- */

/* Device address of row 0 of W and its device row stride. */
static bool weights(sp_mtl *m, const sp_matrix *W, uint64_t *addr, uint32_t *stride) {
    if ((int)W->type > (int)SP_MAT_Q4) return fail(m, SPLASH_ERR_UNSUPPORTED, "no kernel for this weight type (f32, bf16, f16, q8, q4 only)");
    const sp_mtl_chunk *c = sp_mtl_chunk_of(m, W->data);
    if (!c) return fail(m, SPLASH_ERR_INTERNAL, "a weight matrix that was not uploaded");
    *addr = sp_mtl_addr(m, W->data);
    *stride = (uint32_t)(c->host_row ? c->dev_row : W->row_bytes);
    return true;
}

/* GEMV launch: workgroup size and rows per workgroup (kernels/generate.ts defaults; no Apple GPU measured yet). */
static void gemv_params(uint32_t *wg, uint32_t *rows) {
    *wg = SP_MTL_DEFAULT_GEMV_WORKGROUP;
    *rows = SP_MTL_DEFAULT_GEMV_ROWS;
}

/* The GEMM tile for n rows of x: the narrow tile up to 16 rows (index 1 of sp_mtl_tiles, kernels/generate.ts'
 * DEFAULT_TILES) and the square one above. */
static int gemm_tile(int64_t n) { return n <= 16 ? 1 : 0; }

/* ---- dense algebra ---- */

typedef struct {
    uint64_t w, x, y, plan;
    uint32_t row_bytes, rows, cols, n, x_stride, y_stride, top_k, order_at;
} mm_push;

static void mtl_matmul(const sp_backend *be, float *y, const sp_matrix *W, const float *x, int64_t n) {
    sp_mtl *m = sp_mtl_of(be);
    uint64_t w;
    uint32_t stride;
    if (!weights(m, W, &w, &stride)) return;
    uint64_t xa = sp_mtl_addr(m, x), ya = sp_mtl_addr(m, y);
    if (W->cols % 4 || xa % 16) {
        fail(m, SPLASH_ERR_UNSUPPORTED, "matmul needs cols % 4 == 0 and 16-byte aligned inputs");
        return;
    }
    sp_mtl_range reads[2] = {{w, w + (uint64_t)W->rows * stride}, {xa, xa + (uint64_t)n * (uint64_t)W->cols * 4}};
    sp_mtl_range write = {ya, ya + (uint64_t)n * (uint64_t)W->rows * 4};
    if (n <= GEMV_MAX_N) {
        uint32_t wg, R, groups[3];
        gemv_params(&wg, &R);
        sp_mtl_grid(div_up((uint64_t)W->rows, R), groups);
        mm_push p = {w, xa, ya, 0, stride, (uint32_t)W->rows, (uint32_t)W->cols, (uint32_t)n, (uint32_t)W->cols,
                     (uint32_t)W->rows, 0, 0};
        uint32_t check = W->cols % CHUNK_COLS[W->type] != 0;
        sp_mtl_dispatch(m, MATMUL[n > 1][W->type], (uint32_t[4]){wg, R, check, 0}, &p, sizeof p, groups, reads, 2,
                       &write, 1, NULL);
        return;
    }
    int tile = gemm_tile(n);
    const sp_mtl_tile *t = &sp_mtl_tiles[tile];
    struct {
        uint64_t w, x, y;
        uint32_t row_bytes, rows, cols, n, x_stride, y_stride;
    } p = {w, xa, ya, stride, (uint32_t)W->rows, (uint32_t)W->cols, (uint32_t)n, (uint32_t)W->cols, (uint32_t)W->rows};
    uint32_t groups[3] = {div_up((uint64_t)W->rows, (uint64_t)t->bm), div_up((uint64_t)n, (uint64_t)t->bn), 1};
    uint32_t wg = (uint32_t)((t->bm / t->tm) * (t->bn / t->tn));
    sp_mtl_dispatch(m, (sp_mtl_kernel_id)(sp_mtl_gemm_first[W->type] + tile), (uint32_t[4]){wg, 0, 0, 0}, &p,
                   sizeof p, groups, reads, 2, &write, 1, NULL);
}

typedef struct {
    uint64_t y, x, g;
    uint32_t n, d, x_stride, y_stride;
} ew_push;

static void elementwise(sp_mtl *m, sp_mtl_kernel_id k, ew_push p, const sp_mtl_range *reads,
                        int32_t n_reads, sp_mtl_range write) {
    uint32_t groups[3];
    sp_mtl_grid(div_up(p.n, 256), groups);
    sp_mtl_dispatch(m, k, (uint32_t[4]){256, 0, 0, 0}, &p, sizeof p, groups, reads, n_reads, &write, 1, NULL);
}

static void mtl_embed(const sp_backend *be, float *x, const sp_matrix *table, const int32_t *tokens, int64_t n) {
    sp_mtl *m = sp_mtl_of(be);
    uint64_t w;
    uint32_t stride;
    if (!weights(m, table, &w, &stride)) return;
    sp_mtl_range reads[2] = {{w, w + (uint64_t)table->rows * stride}, sp_mtl_span(m, tokens, (uint64_t)n * 4)};
    ew_push p = {sp_mtl_addr(m, x), w, sp_mtl_addr(m, tokens), (uint32_t)(n * table->cols), (uint32_t)table->cols, stride, 0};
    elementwise(m, EMBED[table->type], p, reads, 2, sp_mtl_span(m, x, (uint64_t)n * (uint64_t)table->cols * 4));
}

static void mtl_add(const sp_backend *be, float *y, const float *x, int64_t n) {
    sp_mtl *m = sp_mtl_of(be);
    sp_mtl_range r[2] = {sp_mtl_span(m, x, (uint64_t)n * 4), sp_mtl_span(m, y, (uint64_t)n * 4)};
    elementwise(m, SP_MTL_ADD, (ew_push){r[1].lo, r[0].lo, 0, (uint32_t)n, 1, 0, 0}, r, 2, r[1]);
}

static void mtl_silu_mul(const sp_backend *be, float *y, const float *g, const float *u, int64_t n) {
    sp_mtl *m = sp_mtl_of(be);
    sp_mtl_range r[2] = {sp_mtl_span(m, g, (uint64_t)n * 4), sp_mtl_span(m, u, (uint64_t)n * 4)};
    sp_mtl_range w = sp_mtl_span(m, y, (uint64_t)n * 4);
    elementwise(m, SP_MTL_SILU_MUL, (ew_push){w.lo, r[1].lo, r[0].lo, (uint32_t)n, 1, 0, 0}, r, 2, w);
}

static void mtl_sigmoid_mul(const sp_backend *be, float *y, const float *g, int64_t n) {
    sp_mtl *m = sp_mtl_of(be);
    sp_mtl_range r[2] = {sp_mtl_span(m, g, (uint64_t)n * 4), sp_mtl_span(m, y, (uint64_t)n * 4)};
    elementwise(m, SP_MTL_SIGMOID_MUL, (ew_push){r[1].lo, 0, r[0].lo, (uint32_t)n, 1, 0, 0}, r, 2, r[1]);
}

static void mtl_add_sigmoid_scaled(const sp_backend *be, float *y, const float *x, const float *g, int64_t n, int64_t d) {
    sp_mtl *m = sp_mtl_of(be);
    sp_mtl_range r[3] = {sp_mtl_span(m, x, (uint64_t)(n * d) * 4), sp_mtl_span(m, g, (uint64_t)n * 4),
                        sp_mtl_span(m, y, (uint64_t)(n * d) * 4)};
    elementwise(m, SP_MTL_ADD_SIGMOID_SCALED,
                (ew_push){r[2].lo, r[0].lo, r[1].lo, (uint32_t)(n * d), (uint32_t)d, 0, 0}, r, 3, r[2]);
}

static void mtl_copy_rows(const sp_backend *be, float *dst, int64_t dst_stride, const float *src, int64_t src_stride,
                         int64_t rows, int64_t cols) {
    sp_mtl *m = sp_mtl_of(be);
    if (rows <= 0 || cols <= 0) return;
    sp_mtl_range r = sp_mtl_span(m, src, (uint64_t)((rows - 1) * src_stride + cols) * 4);
    sp_mtl_range w = sp_mtl_span(m, dst, (uint64_t)((rows - 1) * dst_stride + cols) * 4);
    elementwise(m, SP_MTL_COPY2D,
                (ew_push){w.lo, r.lo, 0, (uint32_t)(rows * cols), (uint32_t)cols, (uint32_t)src_stride, (uint32_t)dst_stride},
                &r, 1, w);
}

/* ---- norms ---- */

typedef struct {
    uint64_t y, x, z, w;
    uint32_t rows, d;
    float eps;
} norm_push;

static void norm(sp_mtl *m, sp_mtl_kernel_id k, float *y, const float *x, const float *z, const float *w,
                 int64_t n, int64_t d, float eps) {
    uint64_t bytes = (uint64_t)(n * d) * 4;
    sp_mtl_range r[3] = {sp_mtl_span(m, x, bytes), sp_mtl_span(m, w, (uint64_t)d * 4), z ? sp_mtl_span(m, z, bytes) : (sp_mtl_range){0, 0}};
    sp_mtl_range wr = sp_mtl_span(m, y, bytes);
    norm_push p = {wr.lo, r[0].lo, r[2].lo, r[1].lo, (uint32_t)n, (uint32_t)d, eps};
    uint32_t groups[3], wg = d >= 1024 ? 256 : d >= 256 ? 128 : 64;
    sp_mtl_grid((uint64_t)n, groups);
    sp_mtl_dispatch(m, k, (uint32_t[4]){wg, 0, 0, 0}, &p, sizeof p, groups, r, 3, &wr, 1, NULL);
}

static void mtl_rmsnorm(const sp_backend *be, float *y, const float *x, const float *w, int64_t n, int64_t d, float eps) {
    norm(sp_mtl_of(be), SP_MTL_RMSNORM, y, x, NULL, w, n, d, eps);
}

static void mtl_rmsnorm_gated(const sp_backend *be, float *y, const float *x, const float *z, const float *w, int64_t n,
                             int64_t d, float eps) {
    norm(sp_mtl_of(be), SP_MTL_RMSNORM_GATED, y, x, z, w, n, d, eps);
}

/* ---- positions ---- */

static void mtl_rope(const sp_backend *be, float *x, int64_t n, int32_t n_heads, int32_t head_dim, int32_t rot_dim,
                    const int32_t *pos, const int32_t *mrope_section, const float *inv_freq) {
    sp_mtl *m = sp_mtl_of(be);
    struct {
        uint64_t x, pos, inv_freq;
        uint32_t n, heads, head_dim, half_rot;
        int32_t s0, s1, s2;
    } p = {sp_mtl_addr(m, x), sp_mtl_addr(m, pos), sp_mtl_addr(m, inv_freq), (uint32_t)n, (uint32_t)n_heads,
           (uint32_t)head_dim, (uint32_t)rot_dim / 2, 0, 0, 0};
    if (mrope_section) p.s0 = mrope_section[0], p.s1 = mrope_section[1], p.s2 = mrope_section[2];
    sp_mtl_range r[2] = {sp_mtl_span(m, pos, (uint64_t)n * (mrope_section ? 12 : 4)), sp_mtl_span(m, inv_freq, (uint64_t)rot_dim * 2)};
    sp_mtl_range w = sp_mtl_span(m, x, (uint64_t)n * (uint64_t)n_heads * (uint64_t)head_dim * 4);
    uint32_t groups[3];
    sp_mtl_grid(div_up((uint64_t)n * (uint64_t)n_heads * (uint64_t)(rot_dim / 2), 256), groups);
    sp_mtl_dispatch(m, SP_MTL_ROPE, (uint32_t[4]){256, 0, 0, 0}, &p, sizeof p, groups, r, 2, &w, 1, NULL);
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
static sp_mtl_range kv_range(sp_mtl *m, const sp_kv_view *kv) {
    const sp_mtl_chunk *c = sp_mtl_chunk_of(m, kv->k);
    return c ? (sp_mtl_range){c->gpu, c->gpu + c->size} : (sp_mtl_range){0, 0};
}

static bool attn_base(sp_mtl *m, const sp_kv_view *kv, int32_t n_past, int64_t n, int32_t head_dim, attn_push *p,
                      sp_mtl_range *pages) {
    if (head_dim > ATTN_HD_MAX || head_dim % 4) return fail(m, SPLASH_ERR_UNSUPPORTED, "attention needs head_dim ≤ 256, a multiple of 4");
    uint64_t n_pages = ((uint64_t)n_past + (uint64_t)n + (uint64_t)kv->page_tokens - 1) / (uint64_t)kv->page_tokens;
    uint64_t pa = sp_mtl_stage(m, kv->pages, n_pages * 4);
    if (!pa) return false;
    *pages = (sp_mtl_range){pa, pa + n_pages * 4};
    *p = (attn_push){.k = sp_mtl_addr(m, kv->k), .v = sp_mtl_addr(m, kv->v), .pages = pa, .n_past = (uint32_t)n_past,
                     .n = (uint32_t)n, .page_tokens = (uint32_t)kv->page_tokens, .page_stride = (uint32_t)kv->page_stride};
    return true;
}

static void mtl_kv_write(const sp_backend *be, const sp_kv_view *kv, const float *k, const float *v, int32_t n_past,
                        int64_t n, int32_t n_kv_heads, int32_t head_dim) {
    sp_mtl *m = sp_mtl_of(be);
    attn_push p;
    sp_mtl_range pages;
    if (!attn_base(m, kv, n_past, n, head_dim, &p, &pages)) return;
    uint64_t bytes = (uint64_t)n * (uint64_t)n_kv_heads * (uint64_t)head_dim * 4;
    sp_mtl_range r[3] = {sp_mtl_span(m, k, bytes), sp_mtl_span(m, v, bytes), pages}, w = kv_range(m, kv);
    p.src = r[0].lo;
    p.src2 = r[1].lo;
    p.kv_heads = (uint32_t)n_kv_heads;
    uint32_t groups[3];
    sp_mtl_grid(div_up(bytes / 4, 256), groups);
    sp_mtl_dispatch(m, SP_MTL_KV_WRITE, (uint32_t[4]){256, (uint32_t)head_dim, 0, 0}, &p, sizeof p, groups, r, 3,
                   &w, 1, NULL);
}

/* Split-key partials of one attention call: n · heads · splits · (head_dim + 2) floats, grown on demand. */
static float *attn_partials(sp_mtl *m, const sp_backend *be, uint64_t floats) {
    if (floats * 4 <= m->part_bytes) return m->part;
    sp_mtl_sync(m);
    if (m->part) sp_mtl_free(be, m->part);
    m->part_bytes = floats * 4 * 2;
    m->part = sp_mtl_alloc(be, m->part_bytes);
    if (!m->part) m->part_bytes = 0;
    return m->part;
}

static void mtl_attention(const sp_backend *be, float *out, const float *q, const sp_kv_view *kv, int32_t n_past,
                         int64_t n, int32_t n_heads, int32_t n_kv_heads, int32_t head_dim, float scale) {
    sp_mtl *m = sp_mtl_of(be);
    attn_push p;
    sp_mtl_range pages;
    if (!attn_base(m, kv, n_past, n, head_dim, &p, &pages)) return;
    uint32_t G = (uint32_t)(n_heads / n_kv_heads);
    p.hb = G <= ATTN_QV ? G : ATTN_QV;
    p.rt = G <= ATTN_QV ? ATTN_QV / G : 1;
    p.heads = (uint32_t)n_heads;
    p.kv_heads = (uint32_t)n_kv_heads;
    p.scale = scale;
    uint32_t blocks = div_up(G, p.hb), tiles = div_up((uint64_t)n, p.rt);
    uint64_t keys = (uint64_t)n_past + (uint64_t)n, wgs = (uint64_t)n_kv_heads * blocks * tiles;
    /* flash decoding: few query tiles → split the keys so about SP_MTL_ATTENTION_WORKGROUPS workgroups run */
    uint32_t splits = 1;
    p.split_len = (uint32_t)((keys + ATTN_BK - 1) / ATTN_BK * ATTN_BK);
    if (wgs < SP_MTL_ATTENTION_WORKGROUPS && keys > 4 * ATTN_BK) {
        uint64_t want = div_up(SP_MTL_ATTENTION_WORKGROUPS, wgs), len = div_up(keys, want);
        len = (len + ATTN_BK - 1) / ATTN_BK * ATTN_BK;
        if (len < 4 * ATTN_BK) len = 4 * ATTN_BK;
        p.split_len = (uint32_t)len;
        splits = div_up(keys, len);
    }
    p.n_splits = splits;
    uint64_t qbytes = (uint64_t)n * (uint64_t)n_heads * (uint64_t)head_dim * 4;
    sp_mtl_range r[3] = {sp_mtl_span(m, q, qbytes), kv_range(m, kv), pages};
    sp_mtl_range w = sp_mtl_span(m, out, qbytes);
    p.src = r[0].lo;
    p.dst = w.lo;
    uint32_t spec[4] = {128, (uint32_t)head_dim, 0, 0};
    if (splits == 1) {
        sp_mtl_dispatch(m, SP_MTL_ATTEND, spec, &p, sizeof p, (uint32_t[3]){n_kv_heads * blocks, tiles, 1}, r,
                       3, &w, 1, NULL);
        return;
    }
    float *part = attn_partials(m, be, (uint64_t)n * (uint64_t)n_heads * splits * (uint64_t)(head_dim + 2));
    if (!part) {
        fail(m, SPLASH_ERR_OUT_OF_MEMORY, "attention partials");
        return;
    }
    sp_mtl_range pr = sp_mtl_span(m, part, (uint64_t)n * (uint64_t)n_heads * splits * (uint64_t)(head_dim + 2) * 4);
    p.part = pr.lo;
    sp_mtl_dispatch(m, SP_MTL_ATTEND, spec, &p, sizeof p, (uint32_t[3]){n_kv_heads * blocks, tiles, splits}, r,
                   3, &pr, 1, NULL);
    uint32_t groups[3];
    sp_mtl_grid((uint64_t)n * (uint64_t)n_heads, groups);
    spec[0] = head_dim >= 128 ? 128 : 64;
    sp_mtl_dispatch(m, SP_MTL_ATTEND_REDUCE, spec, &p, sizeof p, groups, &pr, 1, &w, 1, NULL);
}

/* ---- Gated DeltaNet ---- */

static void mtl_conv_silu(const sp_backend *be, float *y, const float *x, int64_t n, int64_t channels, const float *w,
                         int32_t kernel, float *tail) {
    sp_mtl *m = sp_mtl_of(be);
    if (kernel > 16) {
        fail(m, SPLASH_ERR_UNSUPPORTED, "conv kernel longer than 16");
        return;
    }
    uint64_t bytes = (uint64_t)n * (uint64_t)channels * 4;
    sp_mtl_range r[3] = {sp_mtl_span(m, x, bytes), sp_mtl_span(m, w, (uint64_t)channels * (uint64_t)kernel * 4),
                        sp_mtl_span(m, tail, (uint64_t)(kernel - 1) * (uint64_t)channels * 4)};
    sp_mtl_range wr[2] = {sp_mtl_span(m, y, bytes), r[2]};
    struct {
        uint64_t y, x, w, tail;
        uint32_t n, channels, kernel;
    } p = {wr[0].lo, r[0].lo, r[1].lo, r[2].lo, (uint32_t)n, (uint32_t)channels, (uint32_t)kernel};
    uint32_t groups[3];
    sp_mtl_grid(div_up((uint64_t)channels, 64), groups);
    sp_mtl_dispatch(m, SP_MTL_CONV_SILU, (uint32_t[4]){64, 0, 0, 0}, &p, sizeof p, groups, r, 3, wr, 2, NULL);
}

static void mtl_gdn(const sp_backend *be, float *out, const float *qkv, const float *a, const float *b,
                   const sp_gdn_shape *s, float *S, int64_t n) {
    sp_mtl *m = sp_mtl_of(be);
    if (s->k_dim > 512) {
        fail(m, SPLASH_ERR_UNSUPPORTED, "GDN key head dim above 512");
        return;
    }
    uint64_t width = 2 * (uint64_t)s->n_k_heads * (uint64_t)s->k_dim + (uint64_t)s->n_v_heads * (uint64_t)s->v_dim;
    uint64_t state = (uint64_t)s->n_v_heads * (uint64_t)s->k_dim * (uint64_t)s->v_dim * 4;
    sp_mtl_range r[6] = {sp_mtl_span(m, qkv, (uint64_t)n * width * 4), sp_mtl_span(m, a, (uint64_t)n * (uint64_t)s->n_v_heads * 4),
                        sp_mtl_span(m, b, (uint64_t)n * (uint64_t)s->n_v_heads * 4), sp_mtl_span(m, s->A, (uint64_t)s->n_v_heads * 4),
                        sp_mtl_span(m, s->dt_bias, (uint64_t)s->n_v_heads * 4), sp_mtl_span(m, S, state)};
    sp_mtl_range w[2] = {sp_mtl_span(m, out, (uint64_t)n * (uint64_t)s->n_v_heads * (uint64_t)s->v_dim * 4), r[5]};
    struct {
        uint64_t o, qkv, a, b, S, A, dt_bias;
        uint32_t n, k_heads, v_heads;
    } p = {w[0].lo, r[0].lo, r[1].lo, r[2].lo, r[5].lo, r[3].lo, r[4].lo, (uint32_t)n, (uint32_t)s->n_k_heads, (uint32_t)s->n_v_heads};
    uint32_t groups[3] = {(uint32_t)s->n_v_heads, div_up((uint64_t)s->v_dim, GDN_COLS), 1};
    sp_mtl_dispatch(m, SP_MTL_GDN, (uint32_t[4]){128, (uint32_t)s->k_dim, (uint32_t)s->v_dim, 0}, &p, sizeof p, groups,
                   r, 6, w, 2, NULL);
}

/* ---- mixture of experts ---- */

typedef struct {
    uint64_t ids, w, src, dst, plan;
    uint32_t n, n_experts, top_k, d, down_blocks, max_tiles, tile;
} moe_push;

static void mtl_moe_route(const sp_backend *be, int32_t *ids, float *w, const float *logits, int64_t n, int32_t n_experts,
                         int32_t top_k) {
    sp_mtl *m = sp_mtl_of(be);
    if (n_experts > 1024 || top_k > 64) {
        fail(m, SPLASH_ERR_UNSUPPORTED, "MoE routing above 1024 experts or 64 per token");
        return;
    }
    sp_mtl_range r = sp_mtl_span(m, logits, (uint64_t)n * (uint64_t)n_experts * 4);
    sp_mtl_range wr[2] = {sp_mtl_span(m, ids, (uint64_t)n * (uint64_t)top_k * 4), sp_mtl_span(m, w, (uint64_t)n * (uint64_t)top_k * 4)};
    moe_push p = {wr[0].lo, wr[1].lo, r.lo, 0, 0, (uint32_t)n, (uint32_t)n_experts, (uint32_t)top_k, 0, 0, 0, 0};
    uint32_t groups[3];
    sp_mtl_grid((uint64_t)n, groups);
    sp_mtl_dispatch(m, SP_MTL_MOE_ROUTE, (uint32_t[4]){n_experts >= 256 ? 256 : 64, 0, 0, 0}, &p, sizeof p, groups,
                   &r, 1, wr, 2, NULL);
}

/* The device table of an expert set's row-0 addresses, [E][gate, up, down], made on first use and kept. */
static const uint64_t *expert_table(sp_mtl *m, const sp_backend *be, const sp_moe_experts *ex, uint32_t *gate_stride,
                                    uint32_t *down_stride) {
    int32_t i = 0;
    /* keyed by the views and what they view: a freed set's views may come back at the same address */
    while (i < m->n_expert_tables && (m->expert_tables[i].key != ex->gate || m->expert_tables[i].first != ex->gate[0].data ||
                                       m->expert_tables[i].n_experts != ex->n_experts))
        i++;
    if (i == m->n_expert_tables) {
        if (i == SP_MTL_MAX_EXPERT_TABLES) return fail(m, SPLASH_ERR_UNSUPPORTED, "too many MoE layers"), NULL;
        uint64_t *host = malloc(sizeof(uint64_t) * 3 * (size_t)ex->n_experts);
        uint64_t *dev = sp_mtl_alloc(be, sizeof(uint64_t) * 3 * (uint64_t)ex->n_experts);
        if (!host || !dev) {
            free(host);
            return fail(m, SPLASH_ERR_OUT_OF_MEMORY, "MoE expert table"), NULL;
        }
        uint32_t strides[3] = {0, 0, 0};
        for (int32_t e = 0; e < ex->n_experts; e++) {
            const sp_matrix *mats[3] = {&ex->gate[e], &ex->up[e], &ex->down[e]};
            for (int j = 0; j < 3; j++) {
                uint64_t a;
                uint32_t s;
                if (!weights(m, mats[j], &a, &s) || mats[j]->type != ex->gate[0].type) {
                    free(host);
                    return fail(m, SPLASH_ERR_UNSUPPORTED, "MoE experts of mixed weight types"), NULL;
                }
                host[3 * e + j] = a;
                strides[j] = s;
            }
        }
        sp_mtl_write(be, dev, host, sizeof(uint64_t) * 3 * (uint64_t)ex->n_experts);
        free(host);
        m->expert_tables[i] = (sp_mtl_expert_table){ex->gate, ex->gate[0].data, ex->n_experts, dev, strides[0], strides[2]};
        m->n_expert_tables++;
    }
    *gate_stride = m->expert_tables[i].gate_stride;
    *down_stride = m->expert_tables[i].down_stride;
    return m->expert_tables[i].table;
}

static void mtl_moe_experts(const sp_backend *be, float *y, const float *x, const int32_t *ids, const float *w, int64_t n,
                           const sp_moe_experts *ex, float *scratch) {
    sp_mtl *m = sp_mtl_of(be);
    uint32_t gate_stride, down_stride;
    const uint64_t *table = expert_table(m, be, ex, &gate_stride, &down_stride);
    if (!table) return;
    if (ex->n_experts > 1024 || ex->hidden % 4 || ex->inter % 4) {
        fail(m, SPLASH_ERR_UNSUPPORTED, "MoE shapes (≤ 1024 experts, dims multiples of 4)");
        return;
    }
    uint64_t H = (uint64_t)ex->hidden, I = (uint64_t)ex->inter, K = (uint64_t)ex->top_k, pairs = (uint64_t)n * K;
    uint64_t max_tiles = div_up(pairs, MOE_TILE) + (pairs < (uint64_t)ex->n_experts ? pairs : (uint64_t)ex->n_experts);
    /* scratch (sp_moe_scratch_floats): h [pairs][I], yo [pairs][H], then the plan (ints) */
    float *h = scratch, *yo = h + pairs * I;
    int32_t *plan = (int32_t *)(yo + pairs * H);
    if (8 + 3 * max_tiles + pairs > pairs * (H + I + 1)) {
        fail(m, SPLASH_ERR_UNSUPPORTED, "MoE scratch too small for the expert plan");
        return;
    }
    uint32_t wg, R, Rd, wgd;
    gemv_params(&wg, &R);
    gemv_params(&wgd, &Rd);
    R = R > 2 ? 2 : R; /* gate and up rows together: at most 2 of each (matmul.comp MODE 1) */
    uint32_t up_blocks = div_up(I, R), down_blocks = div_up(H, Rd), single = n == 1; /* one token: tiles of one pair */
    sp_mtl_kernel_id gate_up = GATE_UP[!single][ex->gate[0].type], down = DOWN[!single][ex->down[0].type];
    uint32_t check_gu = ex->hidden % CHUNK_COLS[ex->gate[0].type] != 0, check_d = ex->inter % CHUNK_COLS[ex->down[0].type] != 0;
    sp_mtl_range rx = sp_mtl_span(m, x, (uint64_t)n * H * 4), rids = sp_mtl_span(m, ids, pairs * 4),
                rw = sp_mtl_span(m, w, pairs * 4), rh = sp_mtl_span(m, h, pairs * I * 4), ryo = sp_mtl_span(m, yo, pairs * H * 4),
                rplan = sp_mtl_span(m, plan, (8 + 3 * max_tiles + pairs) * 4), rtab = sp_mtl_span(m, table, 24 * (uint64_t)ex->n_experts),
                ry = sp_mtl_span(m, y, (uint64_t)n * H * 4);
    /* every expert's weights could be read: the chunks of gate, up and down as a whole */
    const sp_mtl_chunk *cg = sp_mtl_chunk_of(m, ex->gate[0].data), *cd = sp_mtl_chunk_of(m, ex->down[0].data);
    sp_mtl_range rwg = cg ? (sp_mtl_range){cg->gpu, cg->gpu + (cg->host_row ? cg->size / cg->host_row * cg->dev_row : cg->size)} : rtab;
    sp_mtl_range rwd = cd ? (sp_mtl_range){cd->gpu, cd->gpu + (cd->host_row ? cd->size / cd->host_row * cd->dev_row : cd->size)} : rtab;

    moe_push mp = {rids.lo, rw.lo, ryo.lo, ry.lo, rplan.lo, (uint32_t)n, (uint32_t)ex->n_experts, (uint32_t)K, up_blocks,
                   down_blocks, (uint32_t)max_tiles, single ? 1 : MOE_TILE};
    sp_mtl_dispatch(m, SP_MTL_MOE_PLAN, (uint32_t[4]){256, 0, 0, 0}, &mp, sizeof mp, (uint32_t[3]){1, 1, 1}, &rids,
                   1, &rplan, 1, NULL);
    mm_push gp = {rtab.lo, rx.lo, rh.lo, rplan.lo + 32, gate_stride, (uint32_t)I, (uint32_t)H, 0, 0, 0, (uint32_t)K,
                  (uint32_t)(3 * max_tiles)};
    sp_mtl_range gr[4] = {rtab, rx, rplan, rwg};
    sp_mtl_dispatch(m, gate_up, (uint32_t[4]){wg, R, check_gu, 0}, &gp, sizeof gp, NULL, gr, 4, &rh, 1, plan);
    mm_push dp = {rtab.lo, rh.lo, ryo.lo, rplan.lo + 32, down_stride, (uint32_t)H, (uint32_t)I, 0, 0, 0, (uint32_t)K,
                  (uint32_t)(3 * max_tiles)};
    sp_mtl_range dr[4] = {rtab, rh, rplan, rwd};
    sp_mtl_dispatch(m, down, (uint32_t[4]){wgd, Rd, check_d, 0}, &dp, sizeof dp, NULL, dr, 4, &ryo, 1, plan + 3);
    mp.d = (uint32_t)H;
    sp_mtl_range cr[3] = {rids, rw, ryo};
    uint32_t groups[3];
    sp_mtl_grid((uint64_t)n, groups);
    sp_mtl_dispatch(m, SP_MTL_MOE_COMBINE, (uint32_t[4]){H >= 1024 ? 256 : 64, 0, 0, 0}, &mp, sizeof mp, groups,
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

static splash_status mtl_sample(const sp_backend *be, sp_sample_job *jobs, int32_t n_jobs, int32_t vocab, void *scratch,
                               uint64_t scratch_bytes_per_thread) {
    sp_mtl *m = sp_mtl_of(be);
    uint64_t rows[64];
    int32_t fast[64], n_fast = 0;
    for (int32_t j = 0; j < n_jobs; j++)
        if (greedy_plain(&jobs[j]) && n_fast < 64) {
            rows[n_fast] = sp_mtl_addr(m, jobs[j].logits);
            fast[n_fast++] = j;
        }
    if (n_fast) {
        uint64_t ra = sp_mtl_stage(m, rows, sizeof(uint64_t) * (uint64_t)n_fast);
        if (!ra) return *m->status ? *m->status : SPLASH_ERR_INTERNAL;
        sp_mtl_range r[2] = {{ra, ra + 8 * (uint64_t)n_fast}, {0, 0}};
        for (int32_t i = 0; i < n_fast; i++) {
            sp_mtl_range row = sp_mtl_span(m, jobs[fast[i]].logits, (uint64_t)vocab * 4);
            if (!r[1].hi || row.lo < r[1].lo) r[1].lo = row.lo;
            if (row.hi > r[1].hi) r[1].hi = row.hi;
        }
        sp_mtl_range w = {m->stats.gpu, m->stats.gpu + 12 * (uint64_t)n_fast};
        struct {
            uint64_t rows, stats;
            uint32_t n, vocab;
        } p = {ra, m->stats.gpu, (uint32_t)n_fast, (uint32_t)vocab};
        sp_mtl_dispatch(m, SP_MTL_SAMPLE_STATS, (uint32_t[4]){256, 0, 0, 0}, &p, sizeof p,
                       (uint32_t[3]){(uint32_t)n_fast, 1, 1}, r, 2, &w, 1, NULL);
        splash_status st = sp_mtl_sync(m); /* the results are in shared memory: no copy back */
        if (st) return st;
        const float *stats = (const float *)m->stats.contents;
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
        sp_mtl_read(be, host + (size_t)k * (size_t)vocab, jobs[j].logits, (uint64_t)vocab * 4);
        slow[k].logits = host + (size_t)k * (size_t)vocab;
        k++;
    }
    splash_status st = *m->status ? *m->status : sp_cpu_sample(be, slow, n_slow, vocab, scratch, scratch_bytes_per_thread);
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

void sp_mtl_ops_install(sp_backend *be) {
    be->alloc = sp_mtl_alloc;
    be->free = sp_mtl_free;
    be->upload = sp_mtl_upload;
    be->write = sp_mtl_write;
    be->read = sp_mtl_read;
    be->clear = sp_mtl_clear;
    be->copy_rows = mtl_copy_rows;
    be->matmul = mtl_matmul;
    be->embed = mtl_embed;
    be->add = mtl_add;
    be->add_sigmoid_scaled = mtl_add_sigmoid_scaled;
    be->silu_mul = mtl_silu_mul;
    be->sigmoid_mul = mtl_sigmoid_mul;
    be->rmsnorm = mtl_rmsnorm;
    be->rmsnorm_gated = mtl_rmsnorm_gated;
    be->rope = mtl_rope;
    be->kv_write = mtl_kv_write;
    be->attention = mtl_attention;
    be->conv_silu = mtl_conv_silu;
    be->gdn_recurrent = mtl_gdn;
    be->gdn_chunked = mtl_gdn;
    be->moe_route = mtl_moe_route;
    be->moe_experts = mtl_moe_experts;
    be->sample = mtl_sample;
}
