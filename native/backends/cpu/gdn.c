/* gdn.c — the gated delta rule (Gated DeltaNet) in two exact forms: token by token, and in chunks of 64.
 *
 * Both split the v heads over workers; each head owns its state S_h [dk][dv] (fp32), read and written in place.
 * The token loop touches S twice per token (decay + read, then update + output) while it sits in L1/L2; the chunked
 * form (HF torch_chunk_gated_delta_rule, FLA) turns a chunk into small matrix products, which is what a GPU wants.
 * The forward pass (qwen3_5.c) calls the token form; the chunked one is checked against it (native/tests/cpu_ops_test.c)
 * and timed beside it (native/tests/cpu_ops_lab.c). */
#include "ops.h"

#include <stdlib.h>
#include <string.h>

enum { CHUNK = 64, MAX_DIM = 512 };

typedef void (*token_fn)(float *S, const float *q, const float *k, const float *v, float decay, float beta, float *o,
                         int32_t dk, int32_t dv);

typedef struct {
    float *out;
    const float *qkv, *a, *b;
    const sp_gdn_shape *s;
    float *S;
    int64_t n;
    token_fn token;
    bool avx2; /* the sums of squares in eight lanes (norm_avx2.c) */
} gdn_args;

/* x · rsqrt(Σx² + 1e-6) (HF l2norm, FLA's eps), times `scale`; Σx² in double. */
static void l2norm(float *y, const float *x, int32_t d, float scale, bool avx2) {
    double ss = 0;
#if defined(__x86_64__)
    if (avx2) ss = sp_sum_squares_avx2(x, d);
    else
#endif
        for (int32_t i = 0; i < d; i++) ss += (double)x[i] * x[i];
    float r = 1.0f / sqrtf((float)ss + 1e-6f);
    for (int32_t i = 0; i < d; i++) y[i] = x[i] * r * scale;
}

/* Token t's normalized q (scaled by dk^−½), normalized k, raw v, β and g for v head h. */
static void token_inputs(const gdn_args *a, int64_t t, int32_t h, float *q, float *k, const float **v, float *beta,
                         float *g) {
    const sp_gdn_shape *s = a->s;
    int32_t kh = h / (s->n_v_heads / s->n_k_heads), dk = s->k_dim;
    int64_t key_dim = (int64_t)s->n_k_heads * dk, width = 2 * key_dim + (int64_t)s->n_v_heads * s->v_dim;
    const float *row = a->qkv + t * width;
    l2norm(q, row + (int64_t)kh * dk, dk, 1.0f / sqrtf((float)dk), a->avx2);
    l2norm(k, row + key_dim + (int64_t)kh * dk, dk, 1.0f, a->avx2);
    *v = row + 2 * key_dim + (int64_t)h * s->v_dim;
    float bt = a->b[t * s->n_v_heads + h], at = a->a[t * s->n_v_heads + h];
    *beta = sp_sigmoid(bt);
    /* g = −exp(A_log) · softplus(a + dt_bias), a log-decay ≤ 0 */
    *g = s->A[h] * sp_softplus(at + s->dt_bias[h]);
}

/* One token for one head, the reference:
 *   S ← S · exp(g);  kv_mem = Sᵀ k;  δ = (v − kv_mem) · β;  S ← S + k ⊗ δ;  o = Sᵀ q */
void sp_gdn_token_scalar(float *S, const float *q, const float *k, const float *v, float decay, float beta, float *o,
                         int32_t dk, int32_t dv) {
    float mem[MAX_DIM], delta[MAX_DIM];
    memset(mem, 0, sizeof(float) * (size_t)dv);
    for (int32_t i = 0; i < dk; i++) {
        float *row = S + (int64_t)i * dv, ki = k[i];
        for (int32_t j = 0; j < dv; j++) {
            row[j] *= decay;
            mem[j] += row[j] * ki;
        }
    }
    for (int32_t j = 0; j < dv; j++) delta[j] = (v[j] - mem[j]) * beta;
    memset(o, 0, sizeof(float) * (size_t)dv);
    for (int32_t i = 0; i < dk; i++) {
        float *row = S + (int64_t)i * dv, ki = k[i], qi = q[i];
        for (int32_t j = 0; j < dv; j++) {
            row[j] += ki * delta[j];
            o[j] += row[j] * qi;
        }
    }
}

static void recurrent_heads(void *ctx, int64_t h0, int64_t h1, int thread) {
    const gdn_args *a = ctx;
    const sp_gdn_shape *s = a->s;
    int32_t dk = s->k_dim, dv = s->v_dim;
    float q[MAX_DIM], k[MAX_DIM];
    for (int64_t h = h0; h < h1; h++) {
        float *S = a->S + h * dk * dv;
        for (int64_t t = 0; t < a->n; t++) {
            const float *v;
            float beta, g;
            token_inputs(a, t, (int32_t)h, q, k, &v, &beta, &g);
            a->token(S, q, k, v, expf(g), beta, a->out + (t * s->n_v_heads + h) * dv, dk, dv);
        }
    }
}

void sp_cpu_gdn_recurrent(const sp_backend *be, float *out, const float *qkv, const float *a, const float *b,
                          const sp_gdn_shape *shape, float *S, int64_t n) {
    token_fn token = sp_gdn_token_scalar;
#if defined(__x86_64__)
    if (sp_backend_avx512(be) && shape->v_dim % 16 == 0) token = sp_gdn_token_avx512;
    else if (sp_backend_avx2(be) && shape->v_dim % 8 == 0) token = sp_gdn_token_avx2;
#endif
    gdn_args args = {out, qkv, a, b, shape, S, n, token, sp_backend_avx2(be)};
    sp_cpu_for(be, shape->n_v_heads, recurrent_heads, &args);
}

void sp_cpu_gdn_core(const sp_backend *be, float *out, float *qkv_conv, const float *qkv, const float *z, const float *a,
                     const float *b, const sp_gdn_core *core, const sp_gdn_seq *seqs, int32_t n_seqs) {
    const sp_gdn_shape *s = &core->shape;
    int64_t Hv = s->n_v_heads, O = Hv * s->v_dim, C = 2 * (int64_t)s->n_k_heads * s->k_dim + O;
    for (int32_t i = 0; i < n_seqs; i++) {
        int64_t r0 = seqs[i].row0, n = seqs[i].n;
        sp_cpu_conv_silu(be, qkv_conv + r0 * C, qkv + r0 * C, n, C, core->conv_w, core->kernel, seqs[i].tail);
        sp_cpu_gdn_recurrent(be, out + r0 * O, qkv_conv + r0 * C, a + r0 * Hv, b + r0 * Hv, s, seqs[i].S, n);
        if (z) sp_cpu_rmsnorm_gated(be, out + r0 * O, out + r0 * O, z + r0 * O, core->norm_w, n * Hv, s->v_dim, core->eps);
    }
}

/* One chunk of c ≤ 64 tokens for one head, with γ_i = Σ_{j≤i} g_j (cumulative log-decay inside the chunk):
 *   L[i][j] = (β_i k_i · k_j) · exp(γ_i − γ_j), j < i            (the UT system, unit diagonal)
 *   U = (I + L)⁻¹ (β ⊙ v)             W = (I + L)⁻¹ (β ⊙ k ⊙ exp(γ))      [c, dv], [c, dk]
 *   v' = U − W S                                                          [c, dv]
 *   o_i = exp(γ_i) q_i S + Σ_{j≤i} (q_i · k_j) exp(γ_i − γ_j) v'_j       [c, dv]
 *   S ← exp(γ_last) S + Σ_j exp(γ_last − γ_j) k_j ⊗ v'_j                   [dk, dv] */
typedef struct {
    float *q, *k, *w, *u, *L, *gam, *beta;
} chunk_work;

static int64_t chunk_work_floats(int32_t dk, int32_t dv) {
    return (int64_t)CHUNK * (3 * dk + dv + CHUNK + 2);
}

static void chunk_step(const gdn_args *a, int32_t h, int64_t t0, int32_t c, float *S, const chunk_work *w) {
    const sp_gdn_shape *s = a->s;
    int32_t dk = s->k_dim, dv = s->v_dim;
    float *L = w->L, *gam = w->gam;
    float acc = 0;
    for (int32_t i = 0; i < c; i++) {
        const float *v;
        float g;
        token_inputs(a, t0 + i, h, w->q + (int64_t)i * dk, w->k + (int64_t)i * dk, &v, &w->beta[i], &g);
        acc += g;
        gam[i] = acc;
        for (int32_t j = 0; j < dv; j++) w->u[(int64_t)i * dv + j] = v[j] * w->beta[i];
        for (int32_t j = 0; j < dk; j++) w->w[(int64_t)i * dk + j] = w->k[(int64_t)i * dk + j] * w->beta[i] * expf(gam[i]);
    }
    /* L, then forward substitution in place: U_i −= Σ_{j<i} L_ij U_j (same for W) */
    for (int32_t i = 0; i < c; i++) {
        const float *ki = w->k + (int64_t)i * dk;
        for (int32_t j = 0; j < i; j++) {
            const float *kj = w->k + (int64_t)j * dk;
            float d = 0;
            for (int32_t x = 0; x < dk; x++) d += ki[x] * kj[x];
            L[i * CHUNK + j] = d * w->beta[i] * expf(gam[i] - gam[j]);
        }
        float *ui = w->u + (int64_t)i * dv, *wi = w->w + (int64_t)i * dk;
        for (int32_t j = 0; j < i; j++) {
            float lij = L[i * CHUNK + j];
            const float *uj = w->u + (int64_t)j * dv, *wj = w->w + (int64_t)j * dk;
            for (int32_t x = 0; x < dv; x++) ui[x] -= lij * uj[x];
            for (int32_t x = 0; x < dk; x++) wi[x] -= lij * wj[x];
        }
    }
    /* v' = U − W S (into u) and the inter-chunk part of o = exp(γ) q S, both against the old state */
    for (int32_t i = 0; i < c; i++) {
        float *ui = w->u + (int64_t)i * dv, *o = a->out + ((t0 + i) * s->n_v_heads + h) * dv;
        const float *wi = w->w + (int64_t)i * dk, *qi = w->q + (int64_t)i * dk;
        float eg = expf(gam[i]);
        memset(o, 0, sizeof(float) * (size_t)dv);
        for (int32_t x = 0; x < dk; x++) {
            const float *row = S + (int64_t)x * dv;
            float wx = wi[x], qx = qi[x] * eg;
            for (int32_t j = 0; j < dv; j++) {
                ui[j] -= wx * row[j];
                o[j] += qx * row[j];
            }
        }
    }
    /* intra-chunk part: o_i += Σ_{j≤i} (q_i·k_j) exp(γ_i − γ_j) v'_j */
    for (int32_t i = 0; i < c; i++) {
        float *o = a->out + ((t0 + i) * s->n_v_heads + h) * dv;
        const float *qi = w->q + (int64_t)i * dk;
        for (int32_t j = 0; j <= i; j++) {
            const float *kj = w->k + (int64_t)j * dk, *uj = w->u + (int64_t)j * dv;
            float d = 0;
            for (int32_t x = 0; x < dk; x++) d += qi[x] * kj[x];
            d *= expf(gam[i] - gam[j]);
            for (int32_t x = 0; x < dv; x++) o[x] += d * uj[x];
        }
    }
    /* S ← exp(γ_last) S + Σ_j exp(γ_last − γ_j) k_j ⊗ v'_j */
    float last = gam[c - 1], el = expf(last);
    for (int64_t x = 0; x < (int64_t)dk * dv; x++) S[x] *= el;
    for (int32_t j = 0; j < c; j++) {
        const float *kj = w->k + (int64_t)j * dk, *uj = w->u + (int64_t)j * dv;
        float e = expf(last - gam[j]);
        for (int32_t x = 0; x < dk; x++) {
            float kx = kj[x] * e, *row = S + (int64_t)x * dv;
            for (int32_t y = 0; y < dv; y++) row[y] += kx * uj[y];
        }
    }
}

static void chunked_heads(void *ctx, int64_t h0, int64_t h1, int thread) {
    const gdn_args *a = ctx;
    int32_t dk = a->s->k_dim, dv = a->s->v_dim;
    float *buf = malloc(sizeof(float) * (size_t)chunk_work_floats(dk, dv));
    if (!buf) { /* same result without the chunk buffers */
        gdn_args rec = *a;
        rec.token = sp_gdn_token_scalar;
        recurrent_heads(&rec, h0, h1, thread);
        return;
    }
    chunk_work w = {.q = buf};
    w.k = w.q + CHUNK * dk;
    w.w = w.k + CHUNK * dk;
    w.u = w.w + CHUNK * dk;
    w.L = w.u + CHUNK * dv;
    w.gam = w.L + CHUNK * CHUNK;
    w.beta = w.gam + CHUNK;
    for (int64_t h = h0; h < h1; h++)
        for (int64_t t0 = 0; t0 < a->n; t0 += CHUNK) {
            int32_t c = (int32_t)(a->n - t0 < CHUNK ? a->n - t0 : CHUNK);
            chunk_step(a, (int32_t)h, t0, c, a->S + h * dk * dv, &w);
        }
    free(buf);
}

void sp_cpu_gdn_chunked(const sp_backend *be, float *out, const float *qkv, const float *a, const float *b,
                        const sp_gdn_shape *shape, float *S, int64_t n) {
    gdn_args args = {out, qkv, a, b, shape, S, n, sp_gdn_token_scalar, sp_backend_avx2(be)};
    sp_cpu_for(be, shape->n_v_heads, chunked_heads, &args);
}
