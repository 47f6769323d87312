/* ops.c — the backend.h ops on a GPU. Each op chooses its kernel and spec constants, fills the kernel's push
 * constants (the structs mirror the kernels' push_constant blocks field for field; on Metal, backends/metal/backend.c
 * checks their sizes against kernels/msl/manifest.json), sizes its dispatch, declares the memory it reads and writes,
 * and records the dispatch. This file: memory, elementwise ops, norms, positions, the convolutions and the Gated
 * DeltaNet recurrence, and the install of every op; the products, attention, experts and sampling have a file each
 * (ops_matmul.c, ops_attention.c, ops_moe.c, ops_sample.c). Kernels: kernels/ (GLSL). Reference for every op: the
 * CPU backend (backends/cpu/). */
#include "gpu.h"

#include "core/error.h"

#include <stddef.h>

/* gdn.comp: 32 columns a workgroup of 128 (4 invocations per column); the fused core (FUSED) takes a whole v head of up
 * to 256 columns, for up to GDN_FUSED_ROWS tokens: it walks them one after another in Hv workgroups, where the separate
 * kernels spread a long prefill's conv and norm over the whole GPU. */
enum { GDN_COLS = 32, GDN_SPLIT = 4, GDN_FUSED_COLS = 256, GDN_FUSED_ROWS = 16 };

static const sp_gpu_kernel_id EMBED[SP_MAT_TYPE_COUNT] = SP_GPU_BY_TYPE(SP_GPU_EMBED);

typedef struct {
    uint64_t y, x, g;
    uint32_t n, d, x_stride, y_stride;
} ew_push;

static void elementwise(sp_gpu *gpu, const char *name, sp_gpu_kernel_id k, ew_push p, const sp_gpu_range *reads,
                        int32_t n_reads, sp_gpu_range write) {
    uint32_t groups[3];
    sp_gpu_grid(sp_gpu_div_up(p.n, 256), groups);
    sp_gpu_dispatch(gpu, name, k, (uint32_t[4]){256, 0, 0, 0}, &p, sizeof p, groups, reads, n_reads, &write, 1, NULL);
}

static void gpu_embed(const sp_backend *be, float *x, const sp_matrix *table, const int32_t *tokens, int64_t n) {
    sp_gpu *gpu = sp_gpu_of(be);
    uint64_t w;
    uint32_t stride;
    if (!sp_gpu_weights(gpu, table, &w, &stride)) return;
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

static void gpu_sigmoid_mul(const sp_backend *be, float *y, const float *g, int64_t n) {
    sp_gpu *gpu = sp_gpu_of(be);
    sp_gpu_range r[2] = {sp_gpu_span(gpu, g, (uint64_t)n * 4), sp_gpu_span(gpu, y, (uint64_t)n * 4)};
    elementwise(gpu, "sigmoid_mul", SP_GPU_SIGMOID_MUL, (ew_push){r[1].lo, 0, r[0].lo, (uint32_t)n, 1, 0, 0}, r, 2, r[1]);
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
    uint32_t q_stride; /* QUANT variants only: y quantized for the integer-dot GEMV, rows q_stride bytes apart at q */
    uint64_t q;
} norm_push;
/* The block of the variants without QUANT ends at eps; its size rounds up to the block's 8-byte alignment, as the
 * shader compilers lay it out (Metal checks the size against the translated kernel's). */
#define NORM_PLAIN_PUSH ((uint32_t)((offsetof(norm_push, q_stride) + 7) / 8 * 8))

/* norm.comp's workgroup for rows of d (gdn.comp's fused norm sums in the same order). */
static uint32_t norm_workgroup(int64_t d) { return d >= 1024 ? 256 : d >= 256 ? 128 : 64; }

/* norm.comp; z: the gate (rmsnorm_gated) or the residual added to x, which the kernel then also writes (add_rmsnorm).
 * quant: the QUANT variant of k, or -1; when the rows qualify (sp_gpu_quantize_rows) it also leaves y quantized in
 * gpu->x8 for the GEMVs that read y next. */
static void norm(const sp_backend *be, sp_gpu_kernel_id k, int quant, const char *name, float *y, const float *x,
                 const float *z, const float *w, int64_t n, int64_t d, float eps) {
    sp_gpu *gpu = sp_gpu_of(be);
    uint64_t bytes = (uint64_t)(n * d) * 4;
    sp_gpu_range r[3] = {sp_gpu_span(gpu, x, bytes), sp_gpu_span(gpu, w, (uint64_t)d * 4), z ? sp_gpu_span(gpu, z, bytes) : (sp_gpu_range){0, 0}};
    sp_gpu_range wr[3] = {sp_gpu_span(gpu, y, bytes), k == SP_GPU_ADD_RMSNORM ? r[0] : (sp_gpu_range){0, 0}, {0, 0}};
    norm_push p = {wr[0].lo, r[0].lo, r[2].lo, r[1].lo, (uint32_t)n, (uint32_t)d, eps, 0, 0};
    uint32_t groups[3], wg = norm_workgroup(d), push = NORM_PLAIN_PUSH;
    bool q8 = quant >= 0 && sp_gpu_quantize_rows(gpu, n, d) && (p.y | p.x | p.z | p.w) % 16 == 0;
    if (q8) {
        if (!sp_gpu_x8_space(be, d, n, &wr[2], &p.q_stride)) return;
        p.q = wr[2].lo, k = (sp_gpu_kernel_id)quant, push = sizeof p;
    }
    sp_gpu_grid((uint64_t)n, groups);
    sp_gpu_dispatch(gpu, name, k, (uint32_t[4]){wg, 0, 0, 0}, &p, push, groups, r, 3, wr, 3, NULL);
    if (q8) gpu->x8_of = wr[0], gpu->x8_cols = (uint32_t)d;
}

static void gpu_rmsnorm(const sp_backend *be, float *y, const float *x, const float *w, int64_t n, int64_t d, float eps) {
    norm(be, SP_GPU_RMSNORM, SP_GPU_RMSNORM_Q8, "rmsnorm", y, x, NULL, w, n, d, eps);
}

static void gpu_add_rmsnorm(const sp_backend *be, float *y, float *x, const float *r, const float *w, int64_t n, int64_t d,
                            float eps) {
    norm(be, SP_GPU_ADD_RMSNORM, SP_GPU_ADD_RMSNORM_Q8, "add_rmsnorm", y, x, r, w, n, d, eps);
}

static void gpu_rmsnorm_gated(const sp_backend *be, float *y, const float *x, const float *z, const float *w, int64_t n,
                              int64_t d, float eps) {
    norm(be, SP_GPU_RMSNORM_GATED, -1, "rmsnorm_gated", y, x, z, w, n, d, eps);
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
    sp_gpu_grid(sp_gpu_div_up((uint64_t)n * (uint64_t)n_heads * (uint64_t)(rot_dim / 2), 256), groups);
    sp_gpu_dispatch(gpu, "rope", SP_GPU_ROPE, (uint32_t[4]){256, 0, 0, 0}, &p, sizeof p, groups, r, 2, &w, 1, NULL);
}

/* attention_prep.comp, a workgroup per (row, head). */
static void gpu_attention_prep(const sp_backend *be, float *q, float *gate, const float *qg, float *k, const float *q_norm,
                               const float *k_norm, int64_t n, int32_t n_heads, int32_t n_kv_heads, int32_t head_dim, float eps,
                               int32_t rot_dim, const int32_t *pos, const int32_t *mrope_section, const float *inv_freq) {
    sp_gpu *gpu = sp_gpu_of(be);
    int64_t hd = head_dim;
    if (head_dim > 256) { /* as the attention kernels */
        sp_gpu_fail_msg(gpu, SPLASH_ERR_UNSUPPORTED, "attention needs head_dim ≤ 256");
        return;
    }
    uint64_t qbytes = (uint64_t)(n * n_heads * hd) * 4, kbytes = (uint64_t)(n * n_kv_heads * hd) * 4;
    sp_gpu_range r[6] = {sp_gpu_span(gpu, qg, 2 * qbytes), sp_gpu_span(gpu, k, kbytes), sp_gpu_span(gpu, q_norm, (uint64_t)hd * 4),
                         sp_gpu_span(gpu, k_norm, (uint64_t)hd * 4), sp_gpu_span(gpu, pos, (uint64_t)n * (mrope_section ? 12 : 4)),
                         sp_gpu_span(gpu, inv_freq, (uint64_t)rot_dim * 2)};
    sp_gpu_range w[3] = {sp_gpu_span(gpu, q, qbytes), sp_gpu_span(gpu, gate, qbytes), r[1]};
    struct {
        uint64_t q, gate, qg, k, q_norm, k_norm, pos, inv_freq;
        uint32_t n, heads, kv_heads, half_rot;
        int32_t s0, s1, s2;
        float eps;
    } p = {w[0].lo, w[1].lo, r[0].lo, r[1].lo, r[2].lo, r[3].lo, r[4].lo, r[5].lo, (uint32_t)n, (uint32_t)n_heads,
           (uint32_t)n_kv_heads, (uint32_t)rot_dim / 2, 0, 0, 0, eps};
    if (mrope_section) p.s0 = mrope_section[0], p.s1 = mrope_section[1], p.s2 = mrope_section[2];
    uint32_t groups[3];
    sp_gpu_grid((uint64_t)n * (uint64_t)(n_heads + n_kv_heads), groups);
    sp_gpu_dispatch(gpu, "attention_prep", SP_GPU_ATTENTION_PREP, (uint32_t[4]){norm_workgroup(hd), (uint32_t)hd, 0, 0}, &p,
                    sizeof p, groups, r, 6, w, 3, NULL);
}

/* ---- convolutions ---- */

/* DFlash2's dynamic convolution (kernels/block_conv.comp): one invocation per (block, channel). */
static void gpu_block_conv(const sp_backend *be, float *x, const float *dyn, int64_t dyn_stride, const float *base, int64_t H,
                           int32_t K, int32_t G, const int64_t *row0, const int32_t *len, int32_t n_blocks) {
    sp_gpu *gpu = sp_gpu_of(be);
    int32_t blocks[2 * 64];
    int64_t rows = 0;
    if (n_blocks > 64) {
        sp_gpu_fail_msg(gpu, SPLASH_ERR_UNSUPPORTED, "block_conv over more than 64 blocks");
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
    sp_gpu_grid(sp_gpu_div_up((uint64_t)n_blocks * (uint64_t)H, 64), groups);
    sp_gpu_dispatch(gpu, "block_conv", SP_GPU_BLOCK_CONV, (uint32_t[4]){64, 0, 0, 0}, &p, sizeof p, groups, r, 4, r, 1, NULL);
}

typedef struct {
    uint64_t y, x, w, tail;
    uint32_t n, channels, kernel, updated;
} conv_push;

/* conv.comp over n rows of `channels`: the conv, or (TAIL) only the tails of channels [0, updated). */
static void conv(sp_gpu *gpu, sp_gpu_kernel_id k, float *y, const float *x, int64_t n, int64_t channels, const float *w,
                 int32_t kernel, float *tail, int64_t updated) {
    if (kernel > 16) {
        sp_gpu_fail_msg(gpu, SPLASH_ERR_UNSUPPORTED, "conv kernel longer than 16");
        return;
    }
    bool all = k == SP_GPU_CONV_SILU;
    uint64_t bytes = (uint64_t)n * (uint64_t)channels * 4;
    sp_gpu_range r[3] = {sp_gpu_span(gpu, x, bytes), all ? sp_gpu_span(gpu, w, (uint64_t)channels * (uint64_t)kernel * 4) : (sp_gpu_range){0, 0},
                         sp_gpu_span(gpu, tail, (uint64_t)(kernel - 1) * (uint64_t)channels * 4)};
    sp_gpu_range wr[2] = {r[2], all ? sp_gpu_span(gpu, y, bytes) : (sp_gpu_range){0, 0}};
    conv_push p = {wr[1].lo, r[0].lo, r[1].lo, r[2].lo, (uint32_t)n, (uint32_t)channels, (uint32_t)kernel, (uint32_t)updated};
    uint32_t groups[3];
    sp_gpu_grid(sp_gpu_div_up((uint64_t)updated, 64), groups);
    sp_gpu_dispatch(gpu, all ? "conv_silu" : "conv_tail", k, (uint32_t[4]){64, 0, 0, 0}, &p, sizeof p, groups, r, 3, wr, 2, NULL);
}

static void gpu_conv_silu(const sp_backend *be, float *y, const float *x, int64_t n, int64_t channels, const float *w,
                          int32_t kernel, float *tail) {
    conv(sp_gpu_of(be), SP_GPU_CONV_SILU, y, x, n, channels, w, kernel, tail, channels);
}

/* The gated delta rule of n tokens: token by token (kernels/gdn.comp: one dependent step per token, on a workgroup per
 * 32 columns of a head's state), or in chunks of GDN_CHUNK (kernels/gdn_chunked.comp: the chunks' own products in
 * parallel, then one dependent step per chunk). The op takes the chunked form from four chunks on: on an H200 it lost
 * to the token loop at 64 tokens and won from 256 (its two dispatches and the chunks' own products cost more than a
 * few dependent steps), and decode steps and speculative verify blocks keep the token loop's arithmetic.
 * Inputs of GDN_SEGMENT tokens at most per pair of chunked dispatches bound the scratch they share (gpu->gdn_work).
 * GDN_CHUNK, GDN_CHUNKED_COLS and GDN_CHUNKED_MAX_DK are the kernel's C, COLS and DK_MAX. */
enum { GDN_CHUNK = 64, GDN_SEGMENT = 1024, GDN_CHUNKED_MAX_DK = 128, GDN_CHUNKED_COLS = 16, GDN_CHUNKED_MIN_TOKENS = 4 * GDN_CHUNK };

/* Both kernels' push constants; gdn.comp's block ends before `work`. */
typedef struct {
    uint64_t o, qkv, a, b, S, A, dt_bias;
    uint32_t n, k_heads, v_heads;
    uint64_t work;
} gdn_push;

bool sp_gpu_gdn_chunked_ok(const sp_gdn_shape *s) {
    return s->k_dim <= GDN_CHUNKED_MAX_DK && s->k_dim % 4 == 0;
}

void sp_gpu_gdn(const sp_backend *be, float *out, const float *qkv, const float *a, const float *b, const sp_gdn_shape *s,
                float *S, int64_t n, bool chunked) {
    sp_gpu *gpu = sp_gpu_of(be);
    if (s->k_dim > 512) {
        sp_gpu_fail_msg(gpu, SPLASH_ERR_UNSUPPORTED, "GDN key head dim above 512");
        return;
    }
    if (chunked && !sp_gpu_gdn_chunked_ok(s)) {
        sp_gpu_fail(gpu, SPLASH_ERR_UNSUPPORTED, "chunked GDN with key head dim %d (at most %d, a multiple of 4)", s->k_dim,
                    GDN_CHUNKED_MAX_DK);
        return;
    }
    uint64_t Hv = (uint64_t)s->n_v_heads, dk = (uint64_t)s->k_dim, dv = (uint64_t)s->v_dim;
    uint64_t width = 2 * (uint64_t)s->n_k_heads * dk + Hv * dv, state = Hv * dk * dv * 4;
    uint32_t spec[4] = {chunked ? 256 : GDN_SPLIT * GDN_COLS, (uint32_t)dk, (uint32_t)dv, 0};
    sp_gpu_range r[6] = {sp_gpu_span(gpu, qkv, (uint64_t)n * width * 4), sp_gpu_span(gpu, a, (uint64_t)n * Hv * 4),
                        sp_gpu_span(gpu, b, (uint64_t)n * Hv * 4), sp_gpu_span(gpu, s->A, Hv * 4),
                        sp_gpu_span(gpu, s->dt_bias, Hv * 4), sp_gpu_span(gpu, S, state)};
    sp_gpu_range w[2] = {sp_gpu_span(gpu, out, (uint64_t)n * Hv * dv * 4), r[5]};
    gdn_push p = {w[0].lo, r[0].lo, r[1].lo, r[2].lo, r[5].lo, r[3].lo, r[4].lo, (uint32_t)n, (uint32_t)s->n_k_heads,
                  (uint32_t)s->n_v_heads, 0};
    if (!chunked) {
        uint32_t groups[3] = {(uint32_t)Hv, sp_gpu_div_up(dv, GDN_COLS), 1};
        sp_gpu_dispatch(gpu, "gdn", SP_GPU_GDN, spec, &p, offsetof(gdn_push, work), groups, r, 6, w, 2, NULL);
        return;
    }
    /* a block per (chunk, head): W, e^γ q, e^(γ_last − γ) k [64][dk], U [64][dv], (q·k) e^(γ_i − γ_j) [64][64], e^γ_last */
    uint64_t block = GDN_CHUNK * (3 * dk + dv + GDN_CHUNK) + 4, seg = n < GDN_SEGMENT ? (uint64_t)n : GDN_SEGMENT;
    uint64_t bytes = sp_gpu_div_up(seg, GDN_CHUNK) * Hv * block * 4;
    if (!sp_gpu_scratch(be, &gpu->gdn_work, &gpu->gdn_work_bytes, bytes, bytes, "chunked GDN scratch")) return;
    for (int64_t t0 = 0; t0 < n; t0 += GDN_SEGMENT) {
        uint64_t m = (uint64_t)(n - t0 < GDN_SEGMENT ? n - t0 : GDN_SEGMENT), chunks = sp_gpu_div_up(m, GDN_CHUNK);
        sp_gpu_range seg_r[6] = {sp_gpu_span(gpu, qkv + t0 * (int64_t)width, m * width * 4),
                                 sp_gpu_span(gpu, a + t0 * (int64_t)Hv, m * Hv * 4), sp_gpu_span(gpu, b + t0 * (int64_t)Hv, m * Hv * 4),
                                 r[3], r[4], sp_gpu_span(gpu, gpu->gdn_work, chunks * Hv * block * 4)};
        sp_gpu_range seg_w[2] = {sp_gpu_span(gpu, out + t0 * (int64_t)(Hv * dv), m * Hv * dv * 4), r[5]};
        gdn_push q = p;
        q.o = seg_w[0].lo, q.qkv = seg_r[0].lo, q.a = seg_r[1].lo, q.b = seg_r[2].lo, q.n = (uint32_t)m, q.work = seg_r[5].lo;
        sp_gpu_dispatch(gpu, "gdn_intra", SP_GPU_GDN_INTRA, spec, &q, sizeof q, (uint32_t[3]){(uint32_t)Hv, (uint32_t)chunks, 1},
                        seg_r, 5, &seg_r[5], 1, NULL);
        sp_gpu_range rec_r[2] = {seg_r[5], r[5]};
        sp_gpu_dispatch(gpu, "gdn_inter", SP_GPU_GDN_INTER, spec, &q, sizeof q,
                        (uint32_t[3]){(uint32_t)Hv, sp_gpu_div_up(dv, GDN_CHUNKED_COLS), 1}, rec_r, 2, seg_w, 2, NULL);
    }
}

static void gpu_gdn(const sp_backend *be, float *out, const float *qkv, const float *a, const float *b,
                    const sp_gdn_shape *s, float *S, int64_t n) {
    sp_gpu_gdn(be, out, qkv, a, b, s, S, n, n >= GDN_CHUNKED_MIN_TOKENS && sp_gpu_gdn_chunked_ok(s));
}

/* Whether a sequence of n rows takes gdn.comp FUSED (decode, verify blocks) on this shape. */
static bool fused_fits(const sp_gdn_core *c, int64_t n) {
    const sp_gdn_shape *s = &c->shape;
    return n <= GDN_FUSED_ROWS && s->v_dim <= GDN_FUSED_COLS && 2 * s->k_dim + s->v_dim <= GDN_SPLIT * s->v_dim &&
           s->k_dim <= 512 && c->kernel <= 16;
}

/* The GDN core of one sequence as one gdn.comp FUSED dispatch. It writes the v channels' conv tail; the q and k
 * channels' tails, which several v heads read, are left to conv.comp's TAIL pass (gpu_gdn_core). q: where its rows'
 * int8 copy goes (gdn_core_q8, rows q_stride bytes apart), or an empty range. */
static void fused_core(sp_gpu *gpu, float *out, const float *qkv, const float *z, const float *a, const float *b,
                       const sp_gdn_core *c, float *S, float *tail, int64_t n, sp_gpu_range q, uint32_t q_stride) {
    const sp_gdn_shape *s = &c->shape;
    int64_t Hv = s->n_v_heads, dk = s->k_dim, dv = s->v_dim, width = 2 * (int64_t)s->n_k_heads * dk + Hv * dv;
    uint64_t rows = (uint64_t)n * (uint64_t)Hv * (uint64_t)dv * 4;
    sp_gpu_range r[10] = {sp_gpu_span(gpu, qkv, (uint64_t)(n * width) * 4), sp_gpu_span(gpu, a, (uint64_t)(n * Hv) * 4),
                          sp_gpu_span(gpu, b, (uint64_t)(n * Hv) * 4), sp_gpu_span(gpu, s->A, (uint64_t)Hv * 4),
                          sp_gpu_span(gpu, s->dt_bias, (uint64_t)Hv * 4), sp_gpu_span(gpu, S, (uint64_t)(Hv * dk * dv) * 4),
                          sp_gpu_span(gpu, tail, (uint64_t)((c->kernel - 1) * width) * 4),
                          sp_gpu_span(gpu, c->conv_w, (uint64_t)(width * c->kernel) * 4),
                          z ? sp_gpu_span(gpu, z, rows) : (sp_gpu_range){0, 0},
                          z ? sp_gpu_span(gpu, c->norm_w, (uint64_t)dv * 4) : (sp_gpu_range){0, 0}};
    sp_gpu_range w[4] = {sp_gpu_span(gpu, out, rows), r[5], r[6], q};
    struct {
        uint64_t o, qkv, a, b, S, A, dt_bias, z, conv_w, tail, norm_w;
        uint32_t n, k_heads, v_heads, kernel;
        float eps;
        uint32_t q_stride; /* gdn_core_q8 only, like q */
        uint64_t q;
    } p = {w[0].lo, r[0].lo, r[1].lo, r[2].lo, r[5].lo, r[3].lo, r[4].lo, r[8].lo, r[7].lo, r[6].lo, r[9].lo,
           (uint32_t)n, (uint32_t)s->n_k_heads, (uint32_t)Hv, (uint32_t)c->kernel, c->eps, q_stride, q.lo};
    bool q8 = q.hi > q.lo;
    sp_gpu_dispatch(gpu, "gdn_core", q8 ? SP_GPU_GDN_CORE_Q8 : SP_GPU_GDN_CORE,
                    (uint32_t[4]){(uint32_t)(GDN_SPLIT * dv), (uint32_t)dk, (uint32_t)dv, norm_workgroup(dv)}, &p,
                    q8 ? sizeof p : offsetof(__typeof__(p), q_stride), (uint32_t[3]){(uint32_t)Hv, 1, 1}, r, 10, w, q8 ? 4 : 3, NULL);
}

/* Whether a step's GDN cores leave their output quantized for the out_proj GEMV after them (gdn_core_q8), which then
 * needs no quantize dispatch and barrier of its own: several rows (one row's out_proj is under int_dot_min_bytes and
 * keeps the float GEMV, as measured), every sequence on the fused core with the norm, rows the integer-dot GEMV takes,
 * an even count of whole groups in a row. */
static bool core_quantizes(const sp_gpu *gpu, const sp_gdn_core *c, const float *z, const sp_gdn_seq *seqs, int32_t n_seqs,
                           int64_t *rows) {
    int64_t n = 0, O = c->shape.n_v_heads * c->shape.v_dim;
    for (int32_t i = 0; i < n_seqs; i++) {
        if (!fused_fits(c, seqs[i].n) || seqs[i].row0 != n) return false;
        n += seqs[i].n;
    }
    *rows = n;
    return z && n > 1 && sp_gpu_quantize_rows(gpu, n, O) && c->shape.v_dim % 32 == 0 && O % 64 == 0;
}

/* The GDN core of a step's sequences: every fused core first, then every q/k tail pass — a tail pass waits for its own
 * core (which reads the tail it rewrites), so recording them in turn per sequence would run the cores one at a time —
 * and conv_silu, gdn and rmsnorm_gated in turn for a sequence of more rows. */
static void gpu_gdn_core(const sp_backend *be, float *out, float *qkv_conv, const float *qkv, const float *z, const float *a,
                         const float *b, const sp_gdn_core *c, const sp_gdn_seq *seqs, int32_t n_seqs) {
    sp_gpu *gpu = sp_gpu_of(be);
    const sp_gdn_shape *s = &c->shape;
    int64_t Hv = s->n_v_heads, O = Hv * s->v_dim, C = 2 * (int64_t)s->n_k_heads * s->k_dim + O, rows = 0;
    sp_gpu_range q8 = {0, 0};
    uint32_t q_stride = 0;
    if (core_quantizes(gpu, c, z, seqs, n_seqs, &rows) && !sp_gpu_x8_space(be, O, rows, &q8, &q_stride)) return;
    for (int32_t i = 0; i < n_seqs; i++) {
        int64_t r0 = seqs[i].row0, n = seqs[i].n;
        if (fused_fits(c, n)) {
            sp_gpu_range q = q8.hi > q8.lo ? (sp_gpu_range){q8.lo + (uint64_t)r0 * q_stride, q8.lo + (uint64_t)(r0 + n) * q_stride}
                                           : (sp_gpu_range){0, 0};
            fused_core(gpu, out + r0 * O, qkv + r0 * C, z ? z + r0 * O : NULL, a + r0 * Hv, b + r0 * Hv, c, seqs[i].S,
                       seqs[i].tail, n, q, q_stride);
            continue;
        }
        gpu_conv_silu(be, qkv_conv + r0 * C, qkv + r0 * C, n, C, c->conv_w, c->kernel, seqs[i].tail);
        gpu_gdn(be, out + r0 * O, qkv_conv + r0 * C, a + r0 * Hv, b + r0 * Hv, s, seqs[i].S, n);
        if (z) gpu_rmsnorm_gated(be, out + r0 * O, out + r0 * O, z + r0 * O, c->norm_w, n * Hv, s->v_dim, c->eps);
    }
    if (Hv > s->n_k_heads) /* else each v head read its own q and k channels: FUSED wrote their tails */
        for (int32_t i = 0; i < n_seqs; i++)
            if (fused_fits(c, seqs[i].n))
                conv(gpu, SP_GPU_CONV_TAIL, NULL, qkv + seqs[i].row0 * C, seqs[i].n, C, NULL, c->kernel, seqs[i].tail,
                     2 * (int64_t)s->n_k_heads * s->k_dim);
    if (q8.hi > q8.lo) gpu->x8_of = sp_gpu_span(gpu, out, (uint64_t)(rows * O) * 4), gpu->x8_cols = (uint32_t)O;
}

void sp_gpu_ops_install(sp_backend *be) {
    be->alloc = sp_gpu_alloc;
    be->free = sp_gpu_free;
    be->upload = sp_gpu_upload;
    be->write = sp_gpu_write;
    be->read = sp_gpu_read;
    be->clear = sp_gpu_clear;
    be->copy_rows = gpu_copy_rows;
    be->embed = gpu_embed;
    be->add = gpu_add;
    be->silu_mul = gpu_silu_mul;
    be->sigmoid_mul = gpu_sigmoid_mul;
    be->rmsnorm = gpu_rmsnorm;
    be->add_rmsnorm = gpu_add_rmsnorm;
    be->rmsnorm_gated = gpu_rmsnorm_gated;
    be->rope = gpu_rope;
    be->attention_prep = gpu_attention_prep;
    be->block_conv = gpu_block_conv;
    be->conv_silu = gpu_conv_silu;
    be->gdn_recurrent = gpu_gdn;
    be->gdn_core = gpu_gdn_core;
    sp_gpu_install_matmul(be);
    sp_gpu_install_attention(be);
    sp_gpu_install_moe(be);
    sp_gpu_install_sample(be);
}
