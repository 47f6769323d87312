/* cpu_ops_test.c — the CPU backend's ops against plain references and against each other.
 *
 *   build/tests/cpu_ops_test        prints one line per check with its max difference; exit status 1 if any fails
 *
 * Inputs use realistic ranges (ggml test-backend-ops): GDN log-decays down to −20, β in (0, 1), q/k/v of unit
 * scale, so a gate bug cannot hide behind uniform [−1, 1] data. */
#include "backends/backend.h"
#include "backends/cpu/ops.h"
#include "core/rank.h"
#include "core/threadpool.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures;

static void check(const char *what, double err, double tol) {
    int ok = err <= tol;
    printf("%-52s max|Δ| %.3g (tolerance %.3g) %s\n", what, err, tol, ok ? "OK" : "NOT OK");
    failures += !ok;
}

static uint64_t rng = 0x853c49e6748fea9bull;
static float uniform(float lo, float hi) {
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    return lo + (hi - lo) * (float)((rng >> 40) * 0x1.0p-24);
}
static float *randoms(int64_t n, float lo, float hi) {
    float *x = malloc(sizeof(float) * (size_t)n);
    for (int64_t i = 0; i < n; i++) x[i] = uniform(lo, hi);
    return x;
}
static double max_diff(const float *a, const float *b, int64_t n) {
    double m = 0;
    for (int64_t i = 0; i < n; i++) {
        double d = a[i] > b[i] ? a[i] - b[i] : b[i] - a[i];
        m = d > m ? d : m;
    }
    return m;
}

/* The delta rule over 600 tokens: the chunked form (10 chunks, the last partial) against the token loop, with the
 * state carried over a split (as a chunked prefill followed by decode would). */
static void test_gdn(const sp_backend *be) {
    int32_t Hk = 2, Hv = 6, dk = 32, dv = 16, n = 600, split = 389;
    int64_t W = 2 * Hk * dk + Hv * dv;
    float *qkv = randoms(n * W, -1, 1), *a = randoms(n * Hv, -6, 3), *b = randoms(n * Hv, -4, 4);
    float *A = randoms(Hv, -8, -0.01f), *dt = randoms(Hv, -1, 1);
    sp_gdn_shape s = {Hk, Hv, dk, dv, A, dt};
    float *S1 = calloc((size_t)(Hv * dk * dv), sizeof(float)), *S2 = calloc((size_t)(Hv * dk * dv), sizeof(float));
    float *o1 = malloc(sizeof(float) * (size_t)(n * Hv * dv)), *o2 = malloc(sizeof(float) * (size_t)(n * Hv * dv));
    be->gdn_recurrent(be, o1, qkv, a, b, &s, S1, n);
    sp_cpu_gdn_chunked(be, o2, qkv, a, b, &s, S2, split);
    sp_cpu_gdn_chunked(be, o2 + split * Hv * dv, qkv + split * W, a + split * Hv, b + split * Hv, &s, S2, n - split);
    double scale = 0;
    for (int64_t i = 0; i < n * Hv * dv; i++) scale = o1[i] > scale ? o1[i] : -o1[i] > scale ? -o1[i] : scale;
    check("gdn: chunked vs recurrent, 600 tokens, outputs", max_diff(o1, o2, n * Hv * dv), 1e-4 * scale);
    check("gdn: chunked vs recurrent, 600 tokens, state", max_diff(S1, S2, Hv * dk * dv), 1e-4);
    /* the recurrence one token per call equals one call over all tokens */
    memset(S2, 0, sizeof(float) * (size_t)(Hv * dk * dv));
    for (int32_t t = 0; t < n; t++) be->gdn_recurrent(be, o2 + t * Hv * dv, qkv + t * W, a + t * Hv, b + t * Hv, &s, S2, 1);
    check("gdn: recurrent token by token vs one call", max_diff(o1, o2, n * Hv * dv), 0);
    free(qkv), free(a), free(b), free(A), free(dt), free(S1), free(S2), free(o1), free(o2);
}

/* Causal GQA over pages of 5 positions in a shuffled page table, against a direct softmax per row. */
static void test_attention(const sp_backend *be) {
    int32_t Hq = 6, Hkv = 2, hd = 16, P = 5, n_past = 23, n = 9, len = n_past + n, n_pages = 8;
    int32_t pages[8] = {3, 7, 0, 5, 1, 6, 2, 4};
    int64_t page_stride = 2 * (int64_t)Hkv * P * hd;
    float *cache = calloc((size_t)(n_pages * page_stride), sizeof(float));
    sp_kv_view kv = sp_kv_layer_view(cache, 4 * page_stride, SPLASH_KV_F32, 0, Hkv, hd, P, pages);
    float *k = randoms(len * Hkv * hd, -1, 1), *v = randoms(len * Hkv * hd, -1, 1), *q = randoms(n * Hq * hd, -2, 2);
    be->kv_write(be, &kv, k, v, 0, n_past, Hkv, hd);
    be->kv_write(be, &kv, k + n_past * Hkv * hd, v + n_past * Hkv * hd, n_past, n, Hkv, hd);
    float *out = malloc(sizeof(float) * (size_t)(n * Hq * hd)), *ref = calloc((size_t)(n * Hq * hd), sizeof(float));
    float scale = 0.25f;
    be->attention(be, out, q, NULL, &(sp_attn_seq){kv, 0, n_past, (int32_t)n}, 1, Hq, Hkv, hd, scale);
    for (int32_t i = 0; i < n; i++)
        for (int32_t h = 0; h < Hq; h++) {
            int32_t g = h / (Hq / Hkv), L = n_past + i + 1;
            double s[64], mx = -1e30, sum = 0;
            for (int32_t p = 0; p < L; p++) {
                s[p] = 0;
                for (int32_t d = 0; d < hd; d++) s[p] += (double)q[(i * Hq + h) * hd + d] * k[(p * Hkv + g) * hd + d];
                s[p] *= scale;
                mx = s[p] > mx ? s[p] : mx;
            }
            for (int32_t p = 0; p < L; p++) sum += s[p] = exp(s[p] - mx);
            for (int32_t p = 0; p < L; p++)
                for (int32_t d = 0; d < hd; d++) ref[(i * Hq + h) * hd + d] += (float)(s[p] / sum * v[(p * Hkv + g) * hd + d]);
        }
    check("attention: paged GQA vs direct softmax", max_diff(out, ref, n * Hq * hd), 1e-5);
    free(cache), free(k), free(v), free(q), free(out), free(ref);
}

static const char *const KV_NAMES[] = {"f32", "f16", "int8"};

/* The attention op gives each query row the same bits whatever shares its call: one call over all rows, chunks of
 * 1, 3 and 64, and rows one at a time (decode) all equal the reference form (attention.c) bit for bit, for every KV
 * type; so does each tiled form the CPU runs (eight lanes; sixteen where head_dim % 16 == 0), called directly.
 * Shapes: the embedded model's heads (4/2 × 64), the 27B's (24/4 × 256), an odd group (3/1 × 16) and a head size
 * that is not a multiple of 32 (2/2 × 24); pages of 64, 16, 5 and 7 positions in a shuffled table. An f16 or
 * int8 cache also gives the bits of an f32 cache holding the values it stores (its rows converted back). */
static void test_attention_invariance(const sp_backend *be) {
    static const int32_t shapes[][6] = {/* Hq, Hkv, hd, P, n_past, n */
                                        {4, 2, 64, 64, 37, 70}, {24, 4, 256, 16, 21, 12}, {3, 1, 16, 5, 0, 70}, {2, 2, 24, 7, 9, 40}};
    for (int c = 0; c < 4; c++)
        for (int32_t type = SPLASH_KV_F32; type <= SPLASH_KV_INT8; type++) {
            int32_t Hq = shapes[c][0], Hkv = shapes[c][1], hd = shapes[c][2], P = shapes[c][3], n_past = shapes[c][4];
            int32_t n = shapes[c][5], len = n_past + n, n_pages = (len + P - 1) / P;
            int32_t *pages = malloc(sizeof(int32_t) * (size_t)n_pages);
            for (int32_t i = 0; i < n_pages; i++) pages[i] = i;
            for (int32_t i = n_pages - 1; i > 0; i--) { /* shuffle */
                int32_t j = (int32_t)(uniform(0, 1) * (float)(i + 1)) % (i + 1), t = pages[i];
                pages[i] = pages[j], pages[j] = t;
            }
            int64_t stride = sp_kv_layers_bytes(type, 1, Hkv, hd, P), rows = (int64_t)n * Hq * hd;
            uint8_t *cache = calloc((size_t)(n_pages * stride), 1);
            sp_kv_view kv = sp_kv_layer_view(cache, stride, type, 0, Hkv, hd, P, pages);
            float *k = randoms((int64_t)len * Hkv * hd, -1, 1), *v = randoms((int64_t)len * Hkv * hd, -1, 1);
            float *q = randoms(rows, -2, 2), *ref = malloc(sizeof(float) * (size_t)rows), *out = malloc(sizeof(float) * (size_t)rows);
            be->kv_write(be, &kv, k, v, 0, len, Hkv, hd);
            float scale = 1.0f / sqrtf((float)hd);
            sp_cpu_attention_ref(be, &(sp_attn_args){ref, q, &kv, n, n_past, Hq, Hkv, hd, scale});
            double worst = 0;
            int32_t chunks[] = {0, 1, 3, 64};
            for (int t = 0; t < 4; t++) {
                int32_t step = chunks[t] ? chunks[t] : n;
                for (int32_t i0 = 0; i0 < n; i0 += step) {
                    int32_t m = n - i0 < step ? n - i0 : step;
                    be->attention(be, out + (int64_t)i0 * Hq * hd, q + (int64_t)i0 * Hq * hd, NULL,
                                  &(sp_attn_seq){kv, 0, n_past + i0, (int32_t)m}, 1, Hq, Hkv, hd, scale);
                }
                worst += memcmp(out, ref, sizeof(float) * (size_t)rows) != 0;
            }
#if defined(__x86_64__)
            /* each tiled form on its own (the op runs only the widest the CPU has), tiles of 64 (row, head) pairs */
            float *scratch = malloc(sizeof(float) * 3 * SP_ATTN_KEY_BLOCK * (size_t)hd);
            sp_attn_args all = {out, q, &kv, n, n_past, Hq, Hkv, hd, scale};
            int32_t tile_rows = 64 / (Hq / Hkv);
            for (int f = 0; f < 2; f++) {
                if (f == 0 ? !sp_backend_avx2(be) || hd % 8 : !sp_backend_avx512(be) || hd % 16) continue;
                memset(out, 0, sizeof(float) * (size_t)rows);
                for (int32_t i0 = 0; i0 < n; i0 += tile_rows)
                    for (int32_t g = 0; g < Hkv; g++)
                        (f == 0 ? sp_attention_tile_avx2 : sp_attention_tile_avx512)(&all, i0, i0 + tile_rows < n ? i0 + tile_rows : n, g, scratch);
                worst += memcmp(out, ref, sizeof(float) * (size_t)rows) != 0;
            }
            free(scratch);
#endif
            char what[112];
            snprintf(what, sizeof what, "attention %d/%d×%d %s, pages of %d: all chunkings and forms = reference, bits", Hq,
                     Hkv, hd, KV_NAMES[type], P);
            check(what, worst, 0);
            if (type != SPLASH_KV_F32) {
                /* the values the cache stores, written to an f32 cache: the same attention, bit for bit */
                float *kd = malloc(sizeof(float) * (size_t)len * Hkv * hd), *vd = malloc(sizeof(float) * (size_t)len * Hkv * hd);
                for (int32_t p = 0; p < len; p++)
                    for (int32_t g = 0; g < Hkv; g++) {
                        sp_kv_to_f32(type, sp_kv_at(&kv, kv.k, p, g, hd), hd, kd + ((int64_t)p * Hkv + g) * hd);
                        sp_kv_to_f32(type, sp_kv_at(&kv, kv.v, p, g, hd), hd, vd + ((int64_t)p * Hkv + g) * hd);
                    }
                int64_t fstride = sp_kv_layers_bytes(SPLASH_KV_F32, 1, Hkv, hd, P);
                uint8_t *fcache = calloc((size_t)(n_pages * fstride), 1);
                sp_kv_view fkv = sp_kv_layer_view(fcache, fstride, SPLASH_KV_F32, 0, Hkv, hd, P, pages);
                be->kv_write(be, &fkv, kd, vd, 0, len, Hkv, hd);
                be->attention(be, out, q, NULL, &(sp_attn_seq){fkv, 0, n_past, (int32_t)n}, 1, Hq, Hkv, hd, scale);
                snprintf(what, sizeof what, "attention %d/%d×%d %s = f32 cache of its values, bits", Hq, Hkv, hd, KV_NAMES[type]);
                check(what, memcmp(out, ref, sizeof(float) * (size_t)rows) != 0, 0);
                /* and close to the exact keys: int8 rows are within half a step (max|x| / 254 per group of 32) */
                double err = max_diff(kd, k, (int64_t)len * Hkv * hd);
                snprintf(what, sizeof what, "kv_write %s: stored values vs written", KV_NAMES[type]);
                check(what, err, type == SPLASH_KV_F16 ? 1.0 / 2048 : 1.002 / 254); /* f16 scale: d within 2^-11 of max / 127 */
                free(kd), free(vd), free(fcache);
            }
            free(pages), free(cache), free(k), free(v), free(q), free(ref), free(out);
        }
}

/* attention_ext (the drafters' op) over an f16 / int8 cache gives the bits it gives over an f32 cache holding the
 * values stored; checked with a block of the rows' own keys, causal among themselves, and a sliding window. */
static void test_attention_ext_types(const sp_backend *be) {
    int32_t Hq = 4, Hkv = 2, hd = 32, P = 8, past = 45, n = 5, n_pages = (past + P - 1) / P;
    int32_t *pages = malloc(sizeof(int32_t) * (size_t)n_pages);
    for (int32_t i = 0; i < n_pages; i++) pages[i] = n_pages - 1 - i;
    float *k = randoms((int64_t)past * Hkv * hd, -1, 1), *v = randoms((int64_t)past * Hkv * hd, -1, 1);
    float *kb = randoms((int64_t)n * Hkv * hd, -1, 1), *vb = randoms((int64_t)n * Hkv * hd, -1, 1);
    float *q = randoms((int64_t)n * Hq * hd, -2, 2);
    float *want = malloc(sizeof(float) * (size_t)n * Hq * hd), *got = malloc(sizeof(float) * (size_t)n * Hq * hd);
    for (int32_t type = SPLASH_KV_F16; type <= SPLASH_KV_INT8; type++) {
        int64_t stride = sp_kv_layers_bytes(type, 1, Hkv, hd, P), fstride = sp_kv_layers_bytes(SPLASH_KV_F32, 1, Hkv, hd, P);
        uint8_t *cache = calloc((size_t)(n_pages * stride), 1), *fcache = calloc((size_t)(n_pages * fstride), 1);
        sp_kv_view kv = sp_kv_layer_view(cache, stride, type, 0, Hkv, hd, P, pages);
        sp_kv_view fkv = sp_kv_layer_view(fcache, fstride, SPLASH_KV_F32, 0, Hkv, hd, P, pages);
        be->kv_write(be, &kv, k, v, 0, past, Hkv, hd);
        float *kd = malloc(sizeof(float) * (size_t)past * Hkv * hd), *vd = malloc(sizeof(float) * (size_t)past * Hkv * hd);
        for (int32_t p = 0; p < past; p++)
            for (int32_t g = 0; g < Hkv; g++) {
                sp_kv_to_f32(type, sp_kv_at(&kv, kv.k, p, g, hd), hd, kd + ((int64_t)p * Hkv + g) * hd);
                sp_kv_to_f32(type, sp_kv_at(&kv, kv.v, p, g, hd), hd, vd + ((int64_t)p * Hkv + g) * hd);
            }
        be->kv_write(be, &fkv, kd, vd, 0, past, Hkv, hd);
        double worst = 0;
        for (int32_t window = 0; window <= 20; window += 20) {
            sp_attn_ext x = {.n_rows = n, .q_pos0 = past, .kv = &kv, .page_lo = 0, .page_hi = past, .window = window,
                             .k_blk = kb, .v_blk = vb, .blk_causal = 1};
            be->attention_ext(be, got, q, Hq, Hkv, hd, 0.2f, &x);
            x.kv = &fkv;
            be->attention_ext(be, want, q, Hq, Hkv, hd, 0.2f, &x);
            worst += memcmp(got, want, sizeof(float) * (size_t)n * Hq * hd) != 0;
        }
        char what[96];
        snprintf(what, sizeof what, "attention_ext %s = f32 cache of its values, bits", KV_NAMES[type]);
        check(what, worst, 0);
        free(cache), free(fcache), free(kd), free(vd);
    }
    free(pages), free(k), free(v), free(kb), free(vb), free(q), free(want), free(got);
}

/* The conv over a sequence in one call equals the same sequence fed in pieces with the tail carried. */
static void test_conv(const sp_backend *be) {
    int64_t C = 40, n = 13;
    int32_t K = 4;
    float *x = randoms(n * C, -2, 2), *w = randoms(C * K, -1, 1);
    float *t1 = calloc((size_t)((K - 1) * C), sizeof(float)), *t2 = calloc((size_t)((K - 1) * C), sizeof(float));
    float *y1 = malloc(sizeof(float) * (size_t)(n * C)), *y2 = malloc(sizeof(float) * (size_t)(n * C));
    be->conv_silu(be, y1, x, n, C, w, K, t1);
    int64_t cuts[] = {0, 1, 3, 4, 9, 13};
    for (int i = 0; i + 1 < 6; i++) be->conv_silu(be, y2 + cuts[i] * C, x + cuts[i] * C, cuts[i + 1] - cuts[i], C, w, K, t2);
    check("conv: pieces of 1, 2, 1, 5, 4 vs whole (outputs)", max_diff(y1, y2, n * C), 0);
    check("conv: pieces vs whole (tail)", max_diff(t1, t2, (K - 1) * C), 0);
    /* first output against the definition: only w[K−1] meets x[0] (zero tail) */
    double err = 0;
    for (int64_t c = 0; c < C; c++) err = fmax(err, fabs(y1[c] - sp_silu(w[c * K + K - 1] * x[c])));
    check("conv: first row against the definition", err, 1e-7);
    free(x), free(w), free(t1), free(t2), free(y1), free(y2);
}

/* The GDN token step's AVX-512 form gives the AVX2 form's bits (a lane per column, the same operations), over a
 * width that leaves a partial block of columns, token after token on the same state. */
static void test_gdn_forms(const sp_backend *be) {
#if defined(__x86_64__)
    if (!sp_backend_avx512(be)) return;
    enum { DK = 40, DV = 144, T = 5 };
    float *S1 = randoms(DK * DV, -1, 1), *S2 = malloc(sizeof(float) * DK * DV), o1[DV], o2[DV];
    memcpy(S2, S1, sizeof(float) * DK * DV);
    double err = 0;
    for (int t = 0; t < T; t++) {
        float *q = randoms(DK, -1, 1), *k = randoms(DK, -1, 1), *v = randoms(DV, -1, 1);
        sp_gdn_token_avx2(S1, q, k, v, 0.9f, 0.3f, o1, DK, DV);
        sp_gdn_token_avx512(S2, q, k, v, 0.9f, 0.3f, o2, DK, DV);
        err = fmax(err, fmax(max_diff(o1, o2, DV), max_diff(S1, S2, DK * DV)));
        free(q), free(k), free(v);
    }
    check("gdn token: AVX-512 form = AVX2 form, bits", err, 0);
    free(S1), free(S2);
#endif
}

/* The gates, the conv and the norms on this CPU's fast forms (a backend with a pool: AVX2 where the CPU has it)
 * against the plain loops (a backend without one): the same bits, except the norms' sum of squares, added in
 * another order (within an ulp). And sigmoid / SiLU against the double-precision definition, over [−100, 100]. */
static void test_fast_forms(const sp_backend *be) {
    sp_backend plain;
    splash_status st = SPLASH_OK;
    sp_cpu_backend_init(&plain, NULL, 1, &st);
    enum { N = 4099 }; /* not a multiple of 8: the tail goes through the scalar form */
    float *g = randoms(N, -100, 100), *u = randoms(N, -2, 2), *y1 = malloc(sizeof(float) * N), *y2 = malloc(sizeof(float) * N);
    const float special[] = {0.0f, -0.0f, 20.0f, -20.0f, 87.5f, -87.5f, 88.0f, -88.0f, 1e-30f, -1e-30f};
    for (int i = 0; i < 10; i++) g[100 + i] = special[i];
    for (int i = 0; i < 200; i++) g[200 + i] = uniform(-4, 4); /* where the gates bend */
    be->silu_mul(be, y1, g, u, N);
    plain.silu_mul(&plain, y2, g, u, N);
    check("silu_mul: fast form = plain loop, bits", max_diff(y1, y2, N), 0);
    double err = 0;
    for (int i = 0; i < N; i++) {
        double ref = (double)g[i] / (1 + exp(-(double)g[i])) * u[i];
        err = fmax(err, fabs(y1[i] - ref) / (fabs(ref) + 1e-20)); /* below e^−87 the gate is 0 */
    }
    check("silu_mul vs double definition (relative)", err, 5e-7);
    memcpy(y1, u, sizeof(float) * N), memcpy(y2, u, sizeof(float) * N);
    be->sigmoid_mul(be, y1, g, N);
    plain.sigmoid_mul(&plain, y2, g, N);
    check("sigmoid_mul: fast form = plain loop, bits", max_diff(y1, y2, N), 0);
    err = 0;
    for (int i = 0; i < N; i++) err = fmax(err, fabs(y1[i] - u[i] / (1 + exp(-(double)g[i]))));
    check("sigmoid_mul vs double definition (absolute, |u| < 2)", err, 5e-7);

    int64_t C = 43, n = 13; /* 5 blocks of 8 channels and 3 left */
    int32_t K = 4;
    float *x = randoms(n * C, -3, 3), *w = randoms(C * K, -1, 1), *t1 = randoms((K - 1) * C, -1, 1);
    float *t2 = malloc(sizeof(float) * (size_t)((K - 1) * C));
    memcpy(t2, t1, sizeof(float) * (size_t)((K - 1) * C));
    be->conv_silu(be, y1, x, n, C, w, K, t1);
    plain.conv_silu(&plain, y2, x, n, C, w, K, t2);
    check("conv: fast form = plain loop, outputs, bits", max_diff(y1, y2, n * C), 0);
    check("conv: fast form = plain loop, tail, bits", max_diff(t1, t2, (K - 1) * C), 0);
    be->conv_silu(be, y1, x, 2, C, w, K, t1); /* fewer rows than the tail holds */
    plain.conv_silu(&plain, y2, x, 2, C, w, K, t2);
    check("conv: 2 rows after 13, fast = plain, outputs and tail", fmax(max_diff(y1, y2, 2 * C), max_diff(t1, t2, (K - 1) * C)), 0);

    int64_t rows = 7, d = 260;
    float *xr = randoms(rows * d, -3, 3), *z = randoms(rows * d, -8, 8), *nw = randoms(d, 0.5f, 1.5f);
    float *r1 = malloc(sizeof(float) * (size_t)(rows * d)), *r2 = malloc(sizeof(float) * (size_t)(rows * d));
    double rel = 0;
    be->rmsnorm(be, r1, xr, nw, rows, d, 1e-6f);
    plain.rmsnorm(&plain, r2, xr, nw, rows, d, 1e-6f);
    for (int64_t i = 0; i < rows * d; i++) rel = fmax(rel, fabs(r1[i] - r2[i]) / (fabs(r2[i]) + 1e-30));
    be->rmsnorm_gated(be, r1, xr, z, nw, rows, d, 1e-6f);
    plain.rmsnorm_gated(&plain, r2, xr, z, nw, rows, d, 1e-6f);
    for (int64_t i = 0; i < rows * d; i++) rel = fmax(rel, fabs(r1[i] - r2[i]) / (fabs(r2[i]) + 1e-30));
    check("rmsnorm, gated: fast form vs plain loop (relative)", rel, 3e-7);
#if defined(__x86_64__)
    if (sp_backend_avx512(be)) { /* the op ran the AVX-512 forms: the AVX2 ones must give their bits too */
        float *y3 = malloc(sizeof(float) * N), *r3 = malloc(sizeof(float) * (size_t)(rows * d));
        be->silu_mul(be, y1, g, u, N);
        sp_silu_mul_avx2(y3, g, u, N);
        double diff = max_diff(y1, y3, N);
        memcpy(y1, u, sizeof(float) * N), memcpy(y3, u, sizeof(float) * N);
        be->sigmoid_mul(be, y1, g, N);
        sp_sigmoid_mul_avx2(y3, g, N);
        diff = fmax(diff, max_diff(y1, y3, N));
        float *ta = randoms((K - 1) * C, -1, 1), *tb = malloc(sizeof(float) * (size_t)((K - 1) * C));
        memcpy(tb, ta, sizeof(float) * (size_t)((K - 1) * C));
        sp_conv_silu_avx512(y1, x, n, C, w, K, ta, 0, 32);
        sp_conv_silu_avx2(y3, x, n, C, w, K, tb, 0, 32);
        for (int64_t t = 0; t < n; t++) diff = fmax(diff, max_diff(y1 + t * C, y3 + t * C, 32));
        for (int32_t j = 0; j < K - 1; j++) diff = fmax(diff, max_diff(ta + j * C, tb + j * C, 32));
        sp_rmsnorm_rows_avx512(r1, xr, z, nw, rows, d, 1e-6f);
        sp_rmsnorm_rows_avx2(r3, xr, z, nw, rows, d, 1e-6f);
        diff = fmax(diff, max_diff(r1, r3, rows * d));
        sp_rmsnorm_rows_avx512(r1, xr, NULL, nw, rows, d, 1e-6f);
        sp_rmsnorm_rows_avx2(r3, xr, NULL, nw, rows, d, 1e-6f);
        diff = fmax(diff, max_diff(r1, r3, rows * d));
        check("gates, conv, norms: AVX2 forms = AVX-512 forms, bits", diff, 0);
        free(y3), free(r3), free(ta), free(tb);
    }
#endif
    free(g), free(u), free(y1), free(y2), free(x), free(w), free(t1), free(t2), free(xr), free(z), free(nw), free(r1), free(r2);
}

/* With three equal position streams, interleaved MRoPE is plain 1-D RoPE. */
static void test_rope(const sp_backend *be) {
    int32_t n = 5, H = 3, hd = 32, rot = 16;
    float *x1 = randoms(n * H * hd, -1, 1), *x2 = malloc(sizeof(float) * (size_t)(n * H * hd)), inv[8];
    memcpy(x2, x1, sizeof(float) * (size_t)(n * H * hd));
    for (int i = 0; i < rot / 2; i++) inv[i] = 1.0f / powf(10000.0f, (float)(2 * i) / (float)rot);
    int32_t pos[5] = {0, 1, 7, 100, 4095}, pos3[15], section[3] = {2, 1, 1};
    for (int i = 0; i < 5; i++) pos3[3 * i] = pos3[3 * i + 1] = pos3[3 * i + 2] = pos[i];
    be->rope(be, x1, n, H, hd, rot, pos, NULL, inv);
    be->rope(be, x2, n, H, hd, rot, pos3, section, inv);
    check("rope: MRoPE with equal streams vs 1-D", max_diff(x1, x2, n * H * hd), 0);
    free(x1), free(x2);
}

static void test_route(const sp_backend *be) {
    float logits[2 * 6] = {0.1f, 2.0f, -1.0f, 2.5f, 0.0f, 1.0f, 3, 3, 1, 0, 0, 0};
    int32_t ids[4];
    float w[4];
    be->moe_route(be, ids, w, logits, 2, 6, 2);
    double e3 = exp(2.5), e1 = exp(2.0);
    check("moe_route: top-2 ids and renormalized weights",
          fabs(w[0] - e3 / (e3 + e1)) + fabs(w[1] - e1 / (e3 + e1)) + (ids[0] != 3) + (ids[1] != 1) + (ids[2] != 0) +
              (ids[3] != 1) + fabs(w[2] - 0.5),
          1e-6);
}

/* The ranking the samplers' top-k and top-p cuts rely on: best first, ties to the lower id. */
static void test_rank(void) {
    float w[6] = {0.1f, 0.9f, 0.5f, 0.3f, 0.7f, 0.5f};
    int32_t idx[6] = {5, 0, 3, 1, 4, 2}, want[6] = {1, 4, 2, 5, 3, 0};
    sp_rank_sort(idx, 6, w);
    check("rank_sort: best first, ties to the lower id", memcmp(idx, want, sizeof idx) != 0, 0.5);
}

static void test_sample(const sp_backend *be, int n_threads) {
    int32_t V = 1000;
    float *logits = randoms(V, -3, 3);
    logits[617] = 9;
    uint64_t per = sp_sample_scratch_bytes(V);
    void *scratch = malloc(per * (uint64_t)n_threads);
    splash_sampling greedy = {.temperature = 0, .top_p = 1, .repetition_penalty = 1}, hot = greedy;
    hot.temperature = 0.8f, hot.top_k = 50, hot.top_p = 0.9f, hot.seed = 42;
    int32_t top_ids[3];
    float top_lp[3];
    sp_sample_job job = {logits, &greedy, NULL, 0, NULL, 5, 3, top_ids, top_lp, -1, 0, NULL};
    be->sample(be, &job, 1, V, scratch, per);
    double lse = 0;
    for (int32_t t = 0; t < V; t++) lse += exp(logits[t]);
    lse = log(lse);
    check("sample: greedy picks the argmax, logprob = log_softmax",
          (job.token != 617) + fabs(job.logprob - (logits[617] - lse)) + (top_ids[0] != 617) + (top_lp[0] != job.logprob), 1e-5);
    /* the mask wins over the argmax; the penalty moves the argmax */
    uint32_t mask[32] = {0};
    mask[3] = 1u << 2; /* token 98 only */
    job.allowed = mask;
    be->sample(be, &job, 1, V, scratch, per);
    check("sample: allowed mask restricts the choice", job.token != 98, 0);
    /* the same (seed, position) draws the same token alone or in a batch of four with other rows */
    sp_sample_job jobs[4];
    for (int i = 0; i < 4; i++) jobs[i] = (sp_sample_job){logits, &hot, NULL, 0, NULL, (uint64_t)(100 + i), 0, NULL, NULL, -1, 0, NULL};
    be->sample(be, jobs, 4, V, scratch, per);
    int same = 1;
    for (int i = 0; i < 4; i++) {
        sp_sample_job one = jobs[i];
        one.token = -1;
        be->sample(be, &one, 1, V, scratch, per);
        same &= one.token == jobs[i].token;
    }
    check("sample: a draw depends only on (seed, position)", !same, 0);
    /* empirical frequencies at temperature 1 without truncation follow softmax(logits) */
    float small[4] = {0, 1, 2, -1};
    splash_sampling t1 = {.temperature = 1, .top_p = 1, .repetition_penalty = 1, .seed = 7};
    int counts[4] = {0};
    for (int i = 0; i < 20000; i++) {
        sp_sample_job j = {small, &t1, NULL, 0, NULL, (uint64_t)i, 0, NULL, NULL, -1, 0, NULL};
        be->sample(be, &j, 1, 4, scratch, per);
        counts[j.token]++;
    }
    double z = exp(0) + exp(1) + exp(2) + exp(-1), err = 0;
    for (int t = 0; t < 4; t++) err = fmax(err, fabs(counts[t] / 20000.0 - exp(small[t]) / z));
    check("sample: frequencies follow the softmax (20000 draws)", err, 0.015);
    /* top_p: probabilities 0.5, 0.3, 0.15, 0.05 (spread over a 2000-token row of near-zero others) with top_p 0.75
     * keep the first two (0.5 + 0.3 reaches 0.75), drawn 5:3; top_k 3 then min_p 0.5 keeps the same two */
    int32_t Vb = 2000;
    float *big = malloc(sizeof(float) * (size_t)Vb);
    for (int32_t t = 0; t < Vb; t++) big[t] = -60;
    float probs[4] = {0.5f, 0.3f, 0.15f, 0.05f};
    int32_t where[4] = {1500, 7, 1999, 300};
    for (int i = 0; i < 4; i++) big[where[i]] = logf(probs[i]);
    splash_sampling nuc = {.temperature = 1, .top_p = 0.75f, .repetition_penalty = 1, .seed = 3};
    splash_sampling kmin = {.temperature = 1, .top_p = 1, .top_k = 3, .min_p = 0.5f, .repetition_penalty = 1, .seed = 3};
    void *scratch2 = malloc(sp_sample_scratch_bytes(Vb));
    double err_p = 0, err_k = 0;
    for (int pass = 0; pass < 2; pass++) {
        int got[4] = {0}, other = 0;
        for (int i = 0; i < 8000; i++) {
            sp_sample_job j = {big, pass ? &kmin : &nuc, NULL, 0, NULL, (uint64_t)i, 0, NULL, NULL, -1, 0, NULL};
            be->sample(be, &j, 1, Vb, scratch2, sp_sample_scratch_bytes(Vb));
            int k = 0;
            while (k < 4 && where[k] != j.token) k++;
            if (k == 4) other++;
            else got[k]++;
        }
        double e = fabs(got[0] / 8000.0 - 0.625) + fabs(got[1] / 8000.0 - 0.375) + got[2] + got[3] + other;
        *(pass ? &err_k : &err_p) = e;
    }
    check("sample: top_p 0.75 keeps the two tokens reaching it", err_p, 0.03);
    check("sample: top_k 3 then min_p 0.5 keeps the same two", err_k, 0.03);
    free(big), free(scratch2);
    /* top_k = 1 is greedy whatever the temperature; presence penalty moves the argmax away */
    t1.top_k = 1;
    int32_t pen[2] = {2, 2};
    sp_sample_job j = {small, &t1, NULL, 0, NULL, 1, 0, NULL, NULL, -1, 0, NULL};
    be->sample(be, &j, 1, 4, scratch, per);
    int topk_ok = j.token == 2;
    t1.presence_penalty = 1.5f;
    j = (sp_sample_job){small, &t1, pen, 2, NULL, 1, 0, NULL, NULL, -1, 0, NULL};
    be->sample(be, &j, 1, 4, scratch, per);
    check("sample: top_k 1 = greedy; presence penalty shifts it", !(topk_ok && j.token == 1), 0);
    free(logits), free(scratch);
}

int main(void) {
    sp_threadpool *pool;
    if (sp_threadpool_create(0, &pool)) return 2;
    sp_backend be;
    splash_status op_status = SPLASH_OK;
    sp_cpu_backend_init(&be, pool, sp_threadpool_size(pool), &op_status);
    test_gdn(&be);
    test_gdn_forms(&be);
    test_attention(&be);
    test_attention_invariance(&be);
    test_attention_ext_types(&be);
    test_conv(&be);
    test_fast_forms(&be);
    test_rope(&be);
    test_route(&be);
    test_rank();
    test_sample(&be, sp_threadpool_size(pool));
    sp_threadpool_free(pool);
    printf("%s\n", failures ? "FAILED" : "all OK");
    return failures ? 1 : 0;
}
