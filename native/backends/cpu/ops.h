/* ops.h — the CPU backend's op implementations (the table in backend.c points at these) and their shared helpers.
 * Each op's contract is the comment on its field in backends/backend.h. */
#ifndef SP_CPU_OPS_H
#define SP_CPU_OPS_H

#include "backends/backend.h"
#include "core/threadpool.h"

#include <math.h>
#include <stdbool.h>
#include <stdint.h>

/* Runs fn over [0, n) split across the backend's workers; fn gets a sub-range and the worker's index. */
typedef void (*sp_range_fn)(void *ctx, int64_t begin, int64_t end, int thread);
void sp_cpu_for(const sp_backend *be, int64_t n, sp_range_fn fn, void *ctx);

/* Whether the backend's CPU runs the *_avx2.c / *_avx512.c kernels (core/cpu.h); a backend without a pool runs the
 * plain C forms. */
static inline bool sp_backend_avx2(const sp_backend *be) {
#if defined(__x86_64__)
    return be->pool && sp_cpu_avx2(sp_threadpool_cpu(be->pool));
#else
    return false;
#endif
}
static inline bool sp_backend_avx512(const sp_backend *be) {
#if defined(__x86_64__)
    return be->pool && sp_cpu_avx512(sp_threadpool_cpu(be->pool));
#else
    return false;
#endif
}

/* torch.nn.functional.softplus with its default threshold: linear above 20. */
static inline float sp_softplus(float x) { return x > 20.0f ? x : log1pf(expf(x)); }

/* One token of the delta rule for one v head (see gdn.c); the AVX2 form needs dv % 8 == 0. */
void sp_gdn_token_scalar(float *S, const float *q, const float *k, const float *v, float decay, float beta, float *o,
                         int32_t dk, int32_t dv);
void sp_gdn_token_avx2(float *S, const float *q, const float *k, const float *v, float decay, float beta, float *o,
                       int32_t dk, int32_t dv);
/* The AVX2 form's bits in sixteen lanes (needs dv % 16 == 0). */
void sp_gdn_token_avx512(float *S, const float *q, const float *k, const float *v, float decay, float beta, float *o,
                         int32_t dk, int32_t dv);

/* Eight- and sixteen-lane forms of elementwise.c's gates (elementwise_avx2.c, elementwise_avx512.c), giving its bits:
 * y = silu(g)·u, y = y·sigmoid(g). */
void sp_silu_mul_avx2(float *y, const float *g, const float *u, int64_t n);
void sp_sigmoid_mul_avx2(float *y, const float *g, int64_t n);
void sp_silu_mul_avx512(float *y, const float *g, const float *u, int64_t n);
void sp_sigmoid_mul_avx512(float *y, const float *g, int64_t n);
/* conv.c's channels [c0, c1) (conv_avx2.c / conv_avx512.c, same bits; c1 − c0 a multiple of 8 / 16, kernel ≤
 * SP_CONV_MAX_KERNEL). */
enum { SP_CONV_MAX_KERNEL = 8 };
typedef void (*sp_conv_fn)(float *y, const float *x, int64_t n, int64_t channels, const float *w, int32_t kernel,
                           float *tail, int64_t c0, int64_t c1);
void sp_conv_silu_avx2(float *y, const float *x, int64_t n, int64_t channels, const float *w, int32_t kernel, float *tail,
                       int64_t c0, int64_t c1);
void sp_conv_silu_avx512(float *y, const float *x, int64_t n, int64_t channels, const float *w, int32_t kernel,
                         float *tail, int64_t c0, int64_t c1);
/* norm.c's rows in vector lanes (norm_avx2.c, norm_avx512.c: the same bits as each other): y = x̂·w, and with z:
 * y = w·x̂·silu(z). The sum of squares is in double as in norm.c, in another order, so the bits may differ from
 * norm.c's by an ulp (not from one row to another). */
typedef void (*sp_norm_rows_fn)(float *y, const float *x, const float *z, const float *w, int64_t n, int64_t d, float eps);
void sp_rmsnorm_rows_avx2(float *y, const float *x, const float *z, const float *w, int64_t n, int64_t d, float eps);
void sp_rmsnorm_rows_avx512(float *y, const float *x, const float *z, const float *w, int64_t n, int64_t d, float eps);
/* Σ x² in double (norm_avx2.c): four lanes in two chains, then the tail in order. */
double sp_sum_squares_avx2(const float *x, int64_t n);

/* Sampling's exp passes over a logits row (sample_avx2.c): Σ exp((z − mx)·scale), and w = exp((z − mx)·scale). */
double sp_sum_exp_avx2(const float *z, int32_t n, float mx, float scale);
void sp_exp_weights_avx2(float *w, const float *z, int32_t n, float mx, float scale);

/* ---- attention (attention.c; attention_avx2.c) ----
 * The arithmetic every path follows, so that a query row's output depends only on its own inputs (batch and chunk
 * invariance: decode, prefill chunks of any size and verify blocks give the same bits): K and V rows are read as the
 * f32 values the cache holds (sp_kv_to_f32: exact for f32 and f16, q · d for int8); keys are taken in blocks of
 * SP_ATTN_KEY_BLOCK counted from position 0; a score is Σ_d q·k as eight lane chains (lane l sums d ≡ l mod 8 with
 * fused multiply-adds, in order of d), added as ((l0+l1)+(l2+l3))+((l4+l5)+(l6+l7)), times scale; per block the
 * running max m' = max(m, scores), corr = exp(m − m'), p = exp(score − m') (sp_exp_neg; 0 for keys the row does
 * not see), l = l·corr + sum(p) (the block's 32 weights summed as sp_attn_block_sum does), o = o·corr then
 * o = fma(p_j, v_j, o) for each visible key j in order; the output is o / l. */
enum { SP_ATTN_KEY_BLOCK = 32 };

typedef struct sp_attn_args {
    float *out;                  /* (n, n_heads, head_dim) */
    const float *q;              /* (n, n_heads, head_dim) */
    const sp_kv_view *kv;
    int64_t n;
    int32_t n_past, n_heads, n_kv_heads, head_dim;
    float scale;
} sp_attn_args;

/* Where row p of kv head g of one half of the view (kv->k or kv->v) is stored. */
static inline const void *sp_kv_at(const sp_kv_view *kv, const void *half, int64_t p, int32_t g, int32_t head_dim) {
    int64_t page = kv->pages[p / kv->page_tokens], row = p % kv->page_tokens;
    return (const uint8_t *)half + page * kv->page_stride +
           ((int64_t)g * kv->page_tokens + row) * sp_kv_row_bytes(kv->type, head_dim);
}

/* A stored K or V row of KV type `type` as head_dim floats in out (the scalar form; the tiled attention forms have
 * the same conversion in eight and sixteen lanes, giving the same bits: every value is exact or one product q · d). */
void sp_kv_to_f32(int32_t type, const void *row, int32_t head_dim, float *out);
/* f32 values in, one stored row out (f16: round to nearest even; int8: core/quant.h's Q8 quantizer). */
void sp_kv_from_f32(const sp_backend *be, int32_t type, const float *x, int32_t head_dim, void *row);

/* Row p of kv head g of one half of the view as head_dim floats: the cache itself when it holds f32, else converted
 * into buf (head_dim floats). */
static inline const float *sp_kv_row(const sp_kv_view *kv, const void *half, int64_t p, int32_t g, int32_t head_dim,
                                     float *buf) {
    const void *row = sp_kv_at(kv, half, p, g, head_dim);
    if (kv->type == SPLASH_KV_F32) return row;
    sp_kv_to_f32(kv->type, row, head_dim, buf);
    return buf;
}

/* exp(x) for x ≤ 0 (Cephes expf polynomial, within 2 ulp; 0 below −87 and for −inf), written op for op as the
 * eight-lane form in attention_avx2.c computes each lane, so the two agree bit for bit. */
static inline float sp_exp_neg(float in) {
    float x = in > -87.0f ? in : -87.0f;
    float n = nearbyintf(x * 1.44269504f);
    float r = fmaf(-n, 0.693359375f, x);
    r = fmaf(n, 2.12194440e-4f, r);
    float p = 1.9875691500e-4f;
    p = fmaf(p, r, 1.3981999507e-3f);
    p = fmaf(p, r, 8.3334519073e-3f);
    p = fmaf(p, r, 4.1665795894e-2f);
    p = fmaf(p, r, 1.6666665459e-1f);
    p = fmaf(p, r, 5.0000001201e-1f);
    float y = fmaf(p * r, r, r) + 1.0f;
    union { uint32_t u; float f; } e = {.u = (uint32_t)((int32_t)n + 127) << 23};
    return in >= -87.0f ? y * e.f : 0.0f;
}

/* e^x rounded to float, evaluated in double (e^x = 2^k · e^r, |r| ≤ ln2/2, e^r by its Taylor series to degree 9,
 * within 1e-11 before rounding): correctly rounded but for inputs that close to a rounding boundary, as libm's expf
 * nearly always is; written op for op as the vector forms (exp_avx2.h, exp_avx512.h) compute each lane. The gates use
 * it rather than sp_exp_neg: their outputs compound through every layer, and an exp one ulp off moved quantized
 * models' argmax at a few marginal positions. */
static inline float sp_exp_accurate(float x) {
    if (x != x) return x;
    double xd = x < -104.0f ? -104.0 : x > 89.0f ? 89.0 : (double)x; /* beyond: 0 and ∞ after rounding */
    double k = nearbyint(xd * 1.4426950408889634);
    double r = fma(-k, 0.6931471805599453, xd);
    double p = 2.7557319223985893e-6;
    p = fma(p, r, 2.48015873015873e-5);
    p = fma(p, r, 1.984126984126984e-4);
    p = fma(p, r, 1.388888888888889e-3);
    p = fma(p, r, 8.333333333333333e-3);
    p = fma(p, r, 4.1666666666666664e-2);
    p = fma(p, r, 0.16666666666666666);
    p = fma(p, r, 0.5);
    p = fma(p, r, 1.0);
    p = fma(p, r, 1.0);
    union { uint64_t u; double d; } s = {.u = (uint64_t)((int64_t)k + 1023) << 52};
    return (float)(p * s.d);
}

/* torch's sigmoid and SiLU: 1 / (1 + e^−x) and x / (1 + e^−x), as the vector forms compute each lane. */
static inline float sp_sigmoid(float x) { return 1.0f / (1.0f + sp_exp_accurate(-x)); }
static inline float sp_silu(float x) { return x / (1.0f + sp_exp_accurate(-x)); }

/* The sum of a block's SP_ATTN_KEY_BLOCK weights in the order the AVX2 form adds them: four vectors of eight
 * ((v0+v1)+(v2+v3)), then the eight lanes as ((w0+w4)+(w2+w6))+((w1+w5)+(w3+w7)). */
static inline float sp_attn_block_sum(const float *p) {
    float w[8];
    for (int l = 0; l < 8; l++) w[l] = (p[l] + p[8 + l]) + (p[16 + l] + p[24 + l]);
    return ((w[0] + w[4]) + (w[2] + w[6])) + ((w[1] + w[5]) + (w[3] + w[7]));
}

/* Rows [i0, i1) of kv head g, every query head of its group, as one tile (attention_tile.h; AVX2 needs
 * head_dim % 8 == 0, AVX-512 head_dim % 16 == 0; the same bits). rows: room for 3 · SP_ATTN_KEY_BLOCK rows of
 * head_dim floats: an f16 / int8 cache's block of K and V rows converted, and the block's keys as the form lays
 * them out for its score chains. */
void sp_attention_tile_avx2(const sp_attn_args *a, int64_t i0, int64_t i1, int32_t g, float *rows);
void sp_attention_tile_avx512(const sp_attn_args *a, int64_t i0, int64_t i1, int32_t g, float *rows);
/* The reference form over all of a's rows, whatever the CPU (for the lab and tests). */
void sp_cpu_attention_ref(const sp_backend *be, const sp_attn_args *a);

void sp_cpu_matmul(const sp_backend *be, float *y, const sp_matrix *W, const float *x, int64_t n);
void sp_cpu_embed(const sp_backend *be, float *x, const sp_matrix *table, const int32_t *tokens, int64_t n);
void sp_cpu_add(const sp_backend *be, float *y, const float *x, int64_t n);
void sp_cpu_silu_mul(const sp_backend *be, float *y, const float *g, const float *u, int64_t n);
void sp_cpu_matmul_gate_up(const sp_backend *be, float *h, float *u, const sp_matrix *gate, const sp_matrix *up,
                           const float *x, int64_t n);
void sp_cpu_sigmoid_mul(const sp_backend *be, float *y, const float *g, int64_t n);
void sp_cpu_rmsnorm(const sp_backend *be, float *y, const float *x, const float *w, int64_t n, int64_t d, float eps);
void sp_cpu_add_rmsnorm(const sp_backend *be, float *y, float *x, const float *r, const float *w, int64_t n, int64_t d,
                        float eps);
void sp_cpu_rmsnorm_gated(const sp_backend *be, float *y, const float *x, const float *z, const float *w, int64_t n,
                          int64_t d, float eps);
void sp_cpu_rope(const sp_backend *be, float *x, int64_t n, int32_t n_heads, int32_t head_dim, int32_t rot_dim,
                 const int32_t *pos, const int32_t *mrope_section, const float *inv_freq);
void sp_cpu_attention_prep(const sp_backend *be, float *q, float *gate, const float *qg, float *k, const float *q_norm,
                           const float *k_norm, int64_t n, int32_t n_heads, int32_t n_kv_heads, int32_t head_dim, float eps,
                           int32_t rot_dim, const int32_t *pos, const int32_t *mrope_section, const float *inv_freq);
void sp_cpu_kv_write(const sp_backend *be, const sp_kv_view *kv, const float *k, const float *v, int32_t n_past,
                     int64_t n, int32_t n_kv_heads, int32_t head_dim);
void sp_cpu_attention(const sp_backend *be, float *out, const float *q, const float *gate, const sp_attn_seq *seqs,
                      int32_t n_seqs, int32_t n_heads, int32_t n_kv_heads, int32_t head_dim, float scale);
void sp_cpu_attention_ext(const sp_backend *be, float *out, const float *q, int32_t n_heads, int32_t n_kv_heads,
                          int32_t head_dim, float scale, const sp_attn_ext *x);
void sp_cpu_conv_silu(const sp_backend *be, float *y, const float *x, int64_t n, int64_t channels, const float *w,
                      int32_t kernel, float *tail);
void sp_cpu_block_conv(const sp_backend *be, float *x, const float *dyn, int64_t dyn_stride, const float *base, int64_t H,
                       int32_t K, int32_t G, const int64_t *row0, const int32_t *len, int32_t n_blocks);
void sp_cpu_gdn_recurrent(const sp_backend *be, float *out, const float *qkv, const float *a, const float *b,
                          const sp_gdn_shape *shape, float *S, int64_t n);
void sp_cpu_gdn_core(const sp_backend *be, float *out, float *qkv_conv, const float *qkv, const float *z, const float *a,
                     const float *b, const sp_gdn_core *core, const sp_gdn_seq *seqs, int32_t n_seqs);
/* gdn_recurrent's result in the chunked (UT transform) form, chunks of 64 tokens from the first row: the reference a
 * chunked GPU kernel would be checked against. No forward pass calls it (on the CPU the token loop is faster, and the
 * GPUs run the token loop too: BENCHMARKS.md), so it is no backend op. */
void sp_cpu_gdn_chunked(const sp_backend *be, float *out, const float *qkv, const float *a, const float *b,
                        const sp_gdn_shape *shape, float *S, int64_t n);
void sp_cpu_moe_route(const sp_backend *be, int32_t *ids, float *w, const float *logits, int64_t n, int32_t n_experts,
                      int32_t top_k);
void sp_cpu_moe_experts(const sp_backend *be, float *y, const float *x, const int32_t *ids, const float *w, int64_t n,
                        const sp_moe_experts *experts, float *scratch, const float *shared, const float *shared_gate);
void sp_cpu_layernorm(const sp_backend *be, float *y, const float *x, const float *w, const float *b, int64_t n,
                      int64_t d, float eps);
void sp_cpu_gelu(const sp_backend *be, float *y, const float *x, int64_t n, int32_t approx_tanh);
void sp_cpu_add_rows(const sp_backend *be, float *y, const float *b, int64_t n, int64_t d);
splash_status sp_cpu_sample(const sp_backend *be, sp_sample_job *jobs, int32_t n_jobs, int32_t vocab, void *scratch,
                            uint64_t scratch_bytes_per_thread);

#endif
