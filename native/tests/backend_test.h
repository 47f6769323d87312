/* backend_test.h — what the backend-op tests share (vulkan_ops_test.c, metal_host_test.c, in the manner of ggml's
 * test-backend-ops): a backend under test, `gpu`, checked op by op against the CPU backend, `cpu` (the reference),
 * on the same random inputs, by normalized MSE (Σ(gpu − cpu)² / Σ cpu²). Each program creates both backends in
 * main and runs its cases; a check passes when the error is within tolerance and the backend reported no error. */
#ifndef SP_TEST_BACKEND_TEST_H
#define SP_TEST_BACKEND_TEST_H

#include "backends/backend.h"
#include "check.h"
#include "core/error.h"
#include "core/quant.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static sp_backend cpu, gpu;
static splash_status cpu_status, gpu_status;

static inline double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* A fixed seed keeps every run's inputs the same. */
static uint64_t rng = 0x9e3779b97f4a7c15ull;
static inline float uniform(float lo, float hi) {
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    return lo + (hi - lo) * (float)((rng >> 40) * 0x1.0p-24);
}
static inline float *randoms(int64_t n, float lo, float hi) {
    float *x = malloc(sizeof(float) * (size_t)(n ? n : 1));
    for (int64_t i = 0; i < n; i++) x[i] = uniform(lo, hi);
    return x;
}

/* Backend memory holding a copy of host data (or uninitialized, without it), and the way back. */
static inline void *to_gpu(const void *host, uint64_t bytes) {
    void *d = gpu.alloc(&gpu, bytes);
    if (d && host) gpu.write(&gpu, d, host, bytes);
    return d;
}
static inline float *from_gpu(const void *dev, int64_t n) {
    float *h = calloc((size_t)(n ? n : 1), sizeof(float));
    gpu.read(&gpu, h, dev, sizeof(float) * (uint64_t)n);
    return h;
}

static inline double nmse(const float *got, const float *want, int64_t n) {
    double e = 0, s = 0;
    for (int64_t i = 0; i < n; i++) {
        double d = (double)got[i] - want[i];
        e += d * d;
        s += (double)want[i] * want[i];
    }
    return s > 0 ? e / s : e;
}

/* One check: err within tol and no error from the backend under test (whose status is then cleared). */
static inline void expect(const char *what, double err, double tol) {
    CHECK(err <= tol && gpu_status == SPLASH_OK, "%-58s nmse %.2e (tolerance %.0e)%s%s", what, err, tol,
          gpu_status ? " status: " : "", gpu_status ? splash_last_error() : "");
    gpu_status = SPLASH_OK;
}

/* A random weight matrix of type t, on the host (the CPU's operand) and uploaded (the backend's). Every seventh
 * column is three times larger, so quantization groups carry an outlier as real checkpoints do. */
typedef struct {
    sp_matrix host, dev;
    void *bytes;
} weights;

static inline weights make_weights(sp_mtype t, int64_t rows, int64_t cols) {
    weights w = {.host = {t, rows, cols, NULL, sp_mtype_row_bytes(t, cols)}};
    w.bytes = calloc((size_t)rows, (size_t)w.host.row_bytes);
    float *row = malloc(sizeof(float) * (size_t)cols);
    for (int64_t r = 0; r < rows; r++) {
        for (int64_t c = 0; c < cols; c++) row[c] = uniform(-1, 1) * (c % 7 == 0 ? 3.0f : 1.0f);
        uint8_t *dst = (uint8_t *)w.bytes + r * w.host.row_bytes;
        switch (t) {
        case SP_MAT_F32: memcpy(dst, row, sizeof(float) * (size_t)cols); break;
        case SP_MAT_BF16: for (int64_t c = 0; c < cols; c++) ((uint16_t *)dst)[c] = sp_f32_to_bf16(row[c]); break;
        case SP_MAT_F16: for (int64_t c = 0; c < cols; c++) ((uint16_t *)dst)[c] = sp_f32_to_f16(row[c]); break;
        case SP_MAT_Q8: sp_quantize_row_q8(row, cols, dst); break;
        case SP_MAT_Q4: sp_quantize_row_q4(row, cols, dst); break;
        default: sp_quantize_row_mlx(row, cols, t == SP_MAT_MLX4 ? 4 : 8, dst); break;
        }
    }
    free(row);
    w.host.data = w.bytes;
    w.dev = w.host;
    w.dev.data = gpu.upload(&gpu, w.bytes, rows, w.host.row_bytes);
    return w;
}

/* Sampling: greedy rows run on the backend — rows 4 and 5 under a grammar's allowed mask that leaves out the row's
 * best ids, row 5 also under the model's token mask — the rest (temperature, penalties, top-5 logprobs) via the
 * host; all must give the CPU's tokens and log-probabilities for the same seeds. */
static inline void test_sample(int32_t V) {
    enum { ROWS = 6 };
    float *logits = randoms((int64_t)ROWS * V, -8, 8);
    logits[V + 7] = 30;                   /* a clear winner in row 1 */
    logits[5] = logits[9] = 40;           /* a tie in row 0: the lowest id wins */
    logits[4 * V + 3] = logits[5 * V + 3] = 50; /* winners the masks leave out */
    logits[5 * V + 11] = 45;
    int32_t words = (V + 31) / 32;
    uint32_t *allowed = malloc(4 * (size_t)words), *tokens = malloc(4 * (size_t)words);
    for (int32_t w = 0; w < words; w++) allowed[w] = 0x5555555u * (uint32_t)(w + 1) | 0x800u, tokens[w] = ~0x800u;
    allowed[0] &= ~8u;
    float *dl = to_gpu(logits, 4 * (uint64_t)ROWS * (uint64_t)V);
    splash_sampling greedy = {0, 1, 0, 0, 0, 0, 1, 0, 0, NULL, NULL}, hot = {0.8f, 0.9f, 40, 0.01f, 0.5f, 0.1f, 1.2f, 0, 42, NULL, NULL};
    int32_t penalty[3] = {5, 9, 5}, top_ids[2][5];
    float top_lp[2][5];
    sp_sample_job g[ROWS], c[ROWS];
    for (int j = 0; j < ROWS; j++) {
        const splash_sampling *s = j < 2 || j >= 4 ? &greedy : &hot;
        g[j] = (sp_sample_job){dl + (int64_t)j * V, s, j == 3 ? penalty : NULL, j == 3 ? 3 : 0, j >= 4 ? allowed : NULL, 100 + (uint64_t)j,
                               j == 2 ? 5 : 0, top_ids[0], top_lp[0], -1, 0, j == 5 ? tokens : NULL};
        c[j] = g[j];
        c[j].logits = logits + (int64_t)j * V;
        c[j].top_ids = top_ids[1], c[j].top_logprobs = top_lp[1];
    }
    /* one scratch region per thread of whichever backend has more */
    size_t sb = (size_t)sp_sample_scratch_bytes(V), regions = (size_t)(cpu.n_threads > gpu.n_threads ? cpu.n_threads : gpu.n_threads);
    void *scratch = malloc(sb * regions);
    splash_status sg = gpu.sample(&gpu, g, ROWS, V, scratch, sb), sc = cpu.sample(&cpu, c, ROWS, V, scratch, sb);
    int same = sg == SPLASH_OK && sc == SPLASH_OK && !memcmp(top_ids[0], top_ids[1], sizeof top_ids[0]);
    double lp = 0;
    for (int j = 0; j < ROWS; j++) {
        same = same && g[j].token == c[j].token;
        lp = fmax(lp, fabs((double)g[j].logprob - c[j].logprob));
    }
    same = same && g[4].token != 3 && g[5].token != 3 && g[5].token != 11; /* the masks were applied */
    CHECK(same && lp < 1e-4, "sample vocab %d: greedy rows on the device (two under masks), sampling with penalties and "
          "top-5 via the host: same tokens (%d %d %d %d %d %d), max |Δ logprob| %.1e", V, g[0].token, g[1].token, g[2].token,
          g[3].token, g[4].token, g[5].token, lp);
    gpu.free(&gpu, dl);
    free(logits), free(scratch), free(allowed), free(tokens);
}

/* The elementwise ops against the CPU's on n rows of d. */
static inline void test_elementwise(int64_t n, int64_t d) {
    int64_t N = n * d;
    float *y = randoms(N, -2, 2), *x = randoms(N, -2, 2), *g = randoms(N, -6, 6);
    float *dy = to_gpu(y, 4 * (uint64_t)N), *dx = to_gpu(x, 4 * (uint64_t)N), *dg = to_gpu(g, 4 * (uint64_t)N);
    float *want = malloc(4 * (size_t)N);
    char what[128];
#define EW(name, gpu_call, cpu_call)                                                                                \
    do {                                                                                                            \
        gpu.write(&gpu, dy, y, 4 * (uint64_t)N);                                                                    \
        memcpy(want, y, 4 * (size_t)N);                                                                             \
        gpu_call;                                                                                                   \
        cpu_call;                                                                                                   \
        float *got = from_gpu(dy, N);                                                                               \
        snprintf(what, sizeof what, "%s %lldx%lld", name, (long long)n, (long long)d);                              \
        expect(what, nmse(got, want, N), 1e-12);                                                                    \
        free(got);                                                                                                  \
    } while (0)
    EW("add", gpu.add(&gpu, dy, dx, N), cpu.add(&cpu, want, x, N));
    EW("silu_mul", gpu.silu_mul(&gpu, dy, dg, dx, N), cpu.silu_mul(&cpu, want, g, x, N));
    EW("sigmoid_mul", gpu.sigmoid_mul(&gpu, dy, dg, N), cpu.sigmoid_mul(&cpu, want, g, N));
    EW("copy_rows (strided)", gpu.copy_rows(&gpu, dy, d, dx + 1, d, n - 1, d - 3), cpu.copy_rows(&cpu, want, d, x + 1, d, n - 1, d - 3));
#undef EW
    gpu.free(&gpu, dy), gpu.free(&gpu, dx), gpu.free(&gpu, dg);
    free(y), free(x), free(g), free(want);
}

/* The MoE ops against the CPU's: routing (the same expert ids, the same weights) and the routed experts, E experts
 * of top k, hidden H, expert width I, over n tokens, with a gated shared expert's term added unless n is 9;
 * unquantized weights to float_tol (`path`: how the backend runs them, for the report line). */
static inline void test_moe_path(sp_mtype t, int32_t E, int32_t k, int64_t H, int64_t I, int64_t n, double float_tol,
                                 const char *path) {
    float *logits = randoms(n * E, -3, 3), *x = randoms(n * H, -1, 1);
    int32_t *ids = malloc(sizeof(int32_t) * (size_t)(n * k));
    float *w = malloc(sizeof(float) * (size_t)(n * k));
    float *dlog = to_gpu(logits, 4 * (uint64_t)(n * E)), *dw = to_gpu(NULL, 4 * (uint64_t)(n * k));
    int32_t *dids = to_gpu(NULL, 4 * (uint64_t)(n * k));
    gpu.moe_route(&gpu, dids, dw, dlog, n, E, k);
    cpu.moe_route(&cpu, ids, w, logits, n, E, k);
    int32_t *got_ids = (int32_t *)from_gpu(dids, n * k);
    float *got_w = from_gpu(dw, n * k);
    int same = !memcmp(got_ids, ids, sizeof(int32_t) * (size_t)(n * k));
    char what[200];
    snprintf(what, sizeof what, "moe_route %d experts top %d, %lld tokens: same ids", E, k, (long long)n);
    CHECK(same, "%s", what);
    snprintf(what, sizeof what, "moe_route %d experts top %d, %lld tokens: weights", E, k, (long long)n);
    expect(what, nmse(got_w, w, n * k), 1e-12);
    /* experts: one fused gate_up [E·2I, H] and down [E·H, I], as the fused checkpoints store them; the views sit at
     * the same stack address each call: the backend must not mistake one call's set for another's */
    weights gu = make_weights(t, (int64_t)E * 2 * I, H), dn = make_weights(t, (int64_t)E * H, I);
    sp_matrix hv[3 * E], dvw[3 * E];
    for (int32_t e = 0; e < E; e++) {
        hv[e] = sp_matrix_rows(&gu.host, e * 2 * I, I), hv[E + e] = sp_matrix_rows(&gu.host, e * 2 * I + I, I);
        hv[2 * E + e] = sp_matrix_rows(&dn.host, e * H, H);
        dvw[e] = sp_matrix_rows(&gu.dev, e * 2 * I, I), dvw[E + e] = sp_matrix_rows(&gu.dev, e * 2 * I + I, I);
        dvw[2 * E + e] = sp_matrix_rows(&dn.dev, e * H, H);
    }
    sp_moe_experts hx = {hv, hv + E, hv + 2 * E, E, k, H, I}, dx_ = {dvw, dvw + E, dvw + 2 * E, E, k, H, I};
    int64_t sf = sp_moe_scratch_floats(n, k, H, I);
    float *scratch = malloc(sizeof(float) * (size_t)sf), *dscratch = to_gpu(NULL, 4 * (uint64_t)sf);
    float *dx = to_gpu(x, 4 * (uint64_t)(n * H)), *dy = to_gpu(NULL, 4 * (uint64_t)(n * H)), *want = malloc(4 * (size_t)(n * H));
    bool with_shared = n != 9;
    float *shared = randoms(n * H, -1, 1), *sg = randoms(n, -3, 3);
    float *dshared = to_gpu(shared, 4 * (uint64_t)(n * H)), *dsg = to_gpu(sg, 4 * (uint64_t)n);
    double t0 = now();
    gpu.moe_experts(&gpu, dy, dx, dids, dw, n, &dx_, dscratch, with_shared ? dshared : NULL, dsg);
    float *got = from_gpu(dy, n * H);
    double ms = (now() - t0) * 1e3;
    cpu.moe_experts(&cpu, want, x, ids, w, n, &hx, scratch, with_shared ? shared : NULL, sg);
    bool quant = t >= SP_MAT_Q8;
    snprintf(what, sizeof what, "moe_experts %s %d experts top %d, H %lld I %lld, %lld tokens%s%s (%.0f ms)", sp_mtype_name(t), E, k,
             (long long)H, (long long)I, (long long)n, with_shared ? ", + gated shared expert" : "", path, ms);
    expect(what, nmse(got, want, n * H), quant ? 4e-4 : float_tol);
    gpu.free(&gpu, dlog), gpu.free(&gpu, dw), gpu.free(&gpu, dids), gpu.free(&gpu, dscratch), gpu.free(&gpu, dx), gpu.free(&gpu, dy);
    gpu.free(&gpu, dshared), gpu.free(&gpu, dsg);
    free(logits), free(x), free(ids), free(w), free(got_ids), free(got_w), free(scratch), free(want), free(got), free(shared), free(sg);
    free(gu.bytes), free(dn.bytes);
}

static inline void test_moe(sp_mtype t, int32_t E, int32_t k, int64_t H, int64_t I, int64_t n) {
    test_moe_path(t, E, k, H, I, n, 1e-10, "");
}

#endif
