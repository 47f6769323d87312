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
#include "core/sampling.h"

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

/* Sampling: rows without penalties, a bias or top logprobs run on the backend — greedy rows 0, 1, 4, 5 (4 and 5 under
 * a grammar's allowed mask that leaves out the row's best ids, 5 also under the model's token mask) and rows 6 … 15 at
 * temperature > 0 under top-k, top-p, min-p, their mix, the masks, ties at the top-k and top-p cuts and top_p = 0 — the
 * rest (penalties, top-5 logprobs) via the host. Every row must give the CPU's token for the same seed and position,
 * exactly (core/sampling.h's arithmetic), over `rounds` rounds of fresh logits — uniform rows, and rows shaped like a
 * language model's (a few dozen likely tokens over a long tail) — and positions, and the same probed token's mass and
 * the kept mass (speculative acceptance's p(d)) for draws of three streams. */
static inline void test_sample(int32_t V, int rounds) {
    enum { ROWS = 16 };
    int32_t words = (V + 31) / 32;
    uint32_t *allowed = malloc(4 * (size_t)words), *tokens = malloc(4 * (size_t)words);
    for (int32_t w = 0; w < words; w++) allowed[w] = 0x5555555u * (uint32_t)(w + 1) | 0x800u, tokens[w] = ~0x800u;
    allowed[0] &= ~8u;
    splash_sampling greedy = {0, 1, 0, 0, 0, 0, 1, 0, 0, NULL, NULL}, hot = {0.8f, 0.9f, 40, 0.01f, 0.5f, 0.1f, 1.2f, 0, 42, NULL, NULL};
    splash_sampling dev[10] = {
        {0.8f, 1, 0, 0, 0, 0, 1, 0, 7, NULL, NULL},          /* temperature alone */
        {1.3f, 1, 40, 0, 0, 0, 1, 0, 8, NULL, NULL},         /* top-k */
        {0.7f, 0.9f, 0, 0, 0, 0, 1, 0, 9, NULL, NULL},       /* top-p */
        {1.0f, 0.8f, 50, 0.05f, 0, 0, 1, 0, 10, NULL, NULL}, /* all three */
        {0.9f, 0.95f, 0, 0, 0, 0, 1, 0, 11, NULL, NULL},     /* under both masks */
        {1.0f, 1, 0, 0.2f, 0, 0, 1, 0, 12, NULL, NULL},      /* min-p */
        {1.0f, 1, 3, 0, 0, 0, 1, 0, 13, NULL, NULL},         /* top-k through ties */
        {1.0f, 0, 0, 0, 0, 0, 1, 0, 14, NULL, NULL},         /* top_p 0: the most likely alone */
        {0.6f, 0.3f, 200, 0, 0, 0, 1, 0, 15, NULL, NULL},    /* top-p cutting through ties after a wide top-k */
        {1.0f, 0.999f, 0, 0.001f, 0, 0, 1, 0, 16, NULL, NULL}, /* top-p deep in the tail */
    };
    int32_t penalty[3] = {5, 9, 5}, top_ids[2][5], probe[ROWS];
    float top_lp[2][5];
    sp_sample_job g[ROWS], c[ROWS];
    size_t sb = (size_t)sp_sample_scratch_bytes(V), regions = (size_t)(cpu.n_threads > gpu.n_threads ? cpu.n_threads : gpu.n_threads);
    void *scratch = malloc(sb * regions); /* one scratch region per thread of whichever backend has more */
    int same = 1, differ = 0, n_rows = 0, probed = 0;
    int32_t first6 = -1;
    double lp = 0;
    for (int r = 0; r < rounds; r++) {
        /* odd rounds: a language model's shape (logits ~ N(0, 2) with 40 tokens 8 to 16 above) */
        float *logits = randoms((int64_t)ROWS * V, -8, 8);
        if (r & 1)
            for (int64_t i = 0; i < (int64_t)ROWS * V; i++) {
                float a = uniform(1e-7f, 1), b = uniform(0, 6.2831853f);
                logits[i] = 2 * sqrtf(-2 * logf(a)) * cosf(b) + (i % V < 40 ? uniform(8, 16) : 0);
            }
        logits[V + 7] = 30;                   /* a clear winner in row 1 */
        logits[5] = logits[9] = 40;           /* a tie in row 0: the lowest id wins */
        logits[4 * V + 3] = logits[5 * V + 3] = logits[10 * V + 3] = 50; /* winners the masks leave out */
        logits[5 * V + 11] = logits[10 * V + 11] = 45;
        for (int32_t t = 20; t < 25; t++) logits[12 * V + t] = 12; /* five ties at the top, top-k 3 keeps the first three */
        for (int32_t t = 30; t < 60; t++) logits[14 * V + t] = 9;  /* thirty ties that top-p 0.3 cuts through */
        float *dl = to_gpu(logits, 4 * (uint64_t)ROWS * (uint64_t)V);
        for (int j = 0; j < ROWS; j++) {
            const splash_sampling *s = j >= 6 ? &dev[j - 6] : j < 2 || j >= 4 ? &greedy : &hot;
            int masked = j == 4 || j == 5 || j == 10;
            probe[j] = (r + 3 * j) % 40; /* among the likely tokens of the language-model rows */
            g[j] = (sp_sample_job){dl + (int64_t)j * V, s, j == 3 ? penalty : NULL, j == 3 ? 3 : 0, masked ? allowed : NULL,
                                   100 + (uint64_t)j + 1000 * (uint64_t)r, j == 2 ? 5 : 0, top_ids[0], top_lp[0], -1, 0,
                                   j == 5 || j == 10 ? tokens : NULL, (uint32_t)(j % 3), &probe[j], 0, 0, 0};
            c[j] = g[j];
            c[j].logits = logits + (int64_t)j * V;
            c[j].top_ids = top_ids[1], c[j].top_logprobs = top_lp[1];
        }
        int32_t best13 = 0;
        for (int32_t t = 1; t < V; t++)
            if (logits[13 * (int64_t)V + t] > logits[13 * (int64_t)V + best13]) best13 = t;
        splash_status sg = gpu.sample(&gpu, g, ROWS, V, scratch, sb), sc = cpu.sample(&cpu, c, ROWS, V, scratch, sb);
        same = same && sg == SPLASH_OK && sc == SPLASH_OK && !memcmp(top_ids[0], top_ids[1], sizeof top_ids[0]);
        for (int j = 0; j < ROWS; j++) {
            if (g[j].token != c[j].token && same)
                fprintf(stderr, "  round %d row %d: device %d, CPU %d\n", r, j, g[j].token, c[j].token);
            same = same && g[j].token == c[j].token && g[j].probe_mass == c[j].probe_mass && g[j].kept_mass == c[j].kept_mass;
            lp = fmax(lp, fabs((double)g[j].logprob - c[j].logprob));
            if (c[j].probe_logprob > -INFINITY) lp = fmax(lp, fabs((double)g[j].probe_logprob - c[j].probe_logprob));
            else same = same && g[j].probe_logprob == -INFINITY;
            probed += c[j].probe_mass > 0 && c[j].probe_mass < c[j].kept_mass;
        }
        same = same && g[4].token != 3 && g[5].token != 3 && g[5].token != 11 && g[10].token != 3 && g[10].token != 11 &&
               g[13].token == best13;
        if (!(r & 1)) /* the planted ties rank first in the uniform rows */
            same = same && g[12].token >= 20 && g[12].token < 23 && g[14].token >= 30 && g[14].token < 60;
        if (r == 0) first6 = g[6].token;
        differ += g[6].token != first6; /* the draw moves with the position */
        n_rows += ROWS;
        gpu.free(&gpu, dl);
        free(logits);
    }
    CHECK(same && lp < 1e-3 && (rounds < 4 || (differ > 0 && probed > 0)), /* log-probabilities: float sums in two orders */
          "sample vocab %d, %d rows: greedy and temperature/top-k/top-p/min-p rows (some under masks, some through ties) "
          "on the device, penalties and top-5 via the host, draws of three streams: the CPU's tokens and probed masses (%d "
          "strictly between 0 and the total) (last %d %d %d %d %d %d %d %d %d %d %d %d %d %d %d %d), max |Δ logprob| %.1e",
          V, n_rows, probed, g[0].token, g[1].token, g[2].token, g[3].token, g[4].token,
          g[5].token, g[6].token, g[7].token, g[8].token, g[9].token, g[10].token, g[11].token, g[12].token, g[13].token,
          g[14].token, g[15].token, lp);
    free(scratch), free(allowed), free(tokens);
}

/* Knife edges: rows where one ulp of one weight decides the token, so only arithmetic that is exact on both sides
 * passes. A row holds z = (0, x, −inf …); for a seed and a position whose draw u lies high, x is bisected over its
 * float bits to where the CPU's token changes — either the draw's point crossing from token 0 to token 1 (top_p 1),
 * or top-p 0.75 starting to keep token 1 — and the backend must give the CPU's token at that x and at the floats on
 * either side. */
static inline int32_t sample_edge_token(float *row, uint32_t x, const splash_sampling *s, uint64_t pos, int32_t V,
                                        void *scratch) {
    memcpy(&row[1], &x, 4);
    sp_sample_job j = {row, s, NULL, 0, NULL, pos, 0, NULL, NULL, -1, 0, NULL, 0, NULL, 0, 0, 0};
    cpu.sample(&cpu, &j, 1, V, scratch, sp_sample_scratch_bytes(V));
    return j.token;
}

static inline void test_sample_edges(void) {
    enum { V = 64, CASES = 32, PER = 3 };
    float *logits = malloc(sizeof(float) * V * CASES * PER);
    splash_sampling params[CASES];
    uint64_t position[CASES];
    void *scratch = malloc((size_t)sp_sample_scratch_bytes(V) * (size_t)(cpu.n_threads > gpu.n_threads ? cpu.n_threads : gpu.n_threads));
    int flips = 0;
    for (int c = 0; c < CASES; c++) {
        int nucleus = c & 1;
        params[c] = (splash_sampling){c & 2 ? 0.7f : 1.3f, nucleus ? 0.75f : 1, 0, 0, 0, 0, 1, 0, 1000 + (uint64_t)c, NULL, NULL};
        uint64_t pos = 0; /* u in (0.55, 0.95), or (0.8, 0.95) where top-p decides */
        while (sp_sample_u53(params[c].seed, 0, pos) * 0x1p-53 < (nucleus ? 0.8 : 0.55) || sp_sample_u53(params[c].seed, 0, pos) * 0x1p-53 > 0.95) pos++;
        position[c] = pos;
        float row[V];
        for (int32_t t = 0; t < V; t++) row[t] = -INFINITY;
        row[0] = 0;
        uint32_t lo = 0x80000000u, hi = 0xc1a00000u; /* x from −0 (token 1 drawn or kept) down to −20 (never) */
        int32_t at_lo = sample_edge_token(row, lo, &params[c], pos, V, scratch);
        while (hi - lo > 1) {
            uint32_t mid = lo + (hi - lo) / 2;
            *(sample_edge_token(row, mid, &params[c], pos, V, scratch) == at_lo ? &lo : &hi) = mid;
        }
        for (int k = 0; k < PER; k++) {
            float *r = logits + (int64_t)(c * PER + k) * V;
            memcpy(r, row, sizeof row);
            uint32_t b = lo - 1 + (uint32_t)k; /* the last float giving token 1, and its neighbours */
            memcpy(&r[1], &b, 4);
        }
    }
    float *dl = to_gpu(logits, sizeof(float) * V * CASES * PER);
    int same = 1;
    for (int c = 0; c < CASES; c++) {
        sp_sample_job g[PER], h[PER];
        for (int k = 0; k < PER; k++) {
            int64_t at = (int64_t)(c * PER + k) * V;
            g[k] = (sp_sample_job){dl + at, &params[c], NULL, 0, NULL, position[c], 0, NULL, NULL, -1, 0, NULL, 0, NULL, 0, 0, 0};
            h[k] = g[k], h[k].logits = logits + at;
        }
        splash_status sg = gpu.sample(&gpu, g, PER, V, scratch, sp_sample_scratch_bytes(V));
        splash_status sc = cpu.sample(&cpu, h, PER, V, scratch, sp_sample_scratch_bytes(V));
        same = same && sg == SPLASH_OK && sc == SPLASH_OK;
        for (int k = 0; k < PER; k++) same = same && g[k].token == h[k].token;
        flips += h[1].token != h[2].token;
    }
    CHECK(same && flips == CASES, "sample on knife edges: %d rows where one ulp of a weight moves the draw or the top-p "
          "cut (the token changes at each edge: %d of %d), the CPU's token on every one", CASES * PER, flips, CASES);
    gpu.free(&gpu, dl);
    free(logits), free(scratch);
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
    EW("add_sigmoid_scaled", gpu.add_sigmoid_scaled(&gpu, dy, dx, dg, n, d), cpu.add_sigmoid_scaled(&cpu, want, x, g, n, d));
    EW("copy_rows (strided)", gpu.copy_rows(&gpu, dy, d, dx + 1, d, n - 1, d - 3), cpu.copy_rows(&cpu, want, d, x + 1, d, n - 1, d - 3));
#undef EW
    gpu.free(&gpu, dy), gpu.free(&gpu, dx), gpu.free(&gpu, dg);
    free(y), free(x), free(g), free(want);
}

/* The MoE op against the CPU's: the routing (the same expert ids, the same weights) and the output, E routed experts of
 * top k, hidden H, expert width I, and a shared expert of width Is (0: none) of the same weight type, over n tokens;
 * tol: the output's NMSE bound. */
static inline void test_moe(sp_mtype t, int32_t E, int32_t k, int64_t H, int64_t I, int64_t Is, int64_t n, double tol) {
    float *logits = randoms(n * E, -3, 3), *x = randoms(n * H, -1, 1);
    for (int64_t i = 0; i < n * E; i++) logits[i] = roundf(logits[i] * 8) / 8; /* ties, which go to the lower id */
    int32_t *ids = malloc(sizeof(int32_t) * (size_t)(n * k));
    float *w = malloc(sizeof(float) * (size_t)(n * k));
    float *dlog = to_gpu(logits, 4 * (uint64_t)(n * E)), *dw = to_gpu(NULL, 4 * (uint64_t)(n * k));
    int32_t *dids = to_gpu(NULL, 4 * (uint64_t)(n * k));
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
    sp_moe_experts hx = {.gate = hv, .up = hv + E, .down = hv + 2 * E, .n_experts = E, .top_k = k, .hidden = H, .inter = I}, dx_ = hx;
    dx_.gate = dvw, dx_.up = dvw + E, dx_.down = dvw + 2 * E;
    weights sg = {0}, su = {0}, sd = {0}, score = {0};
    if (Is) {
        sg = make_weights(t, Is, H), su = make_weights(t, Is, H), sd = make_weights(t, H, Is), score = make_weights(SP_MAT_BF16, 1, H);
        hx.shared_gate = &sg.host, hx.shared_up = &su.host, hx.shared_down = &sd.host, hx.shared_score = &score.host;
        dx_.shared_gate = &sg.dev, dx_.shared_up = &su.dev, dx_.shared_down = &sd.dev, dx_.shared_score = &score.dev;
    }
    int64_t sf = sp_moe_scratch_floats(n, k, H, I, Is);
    float *scratch = malloc(sizeof(float) * (size_t)sf), *dscratch = to_gpu(NULL, 4 * (uint64_t)sf);
    float *dx = to_gpu(x, 4 * (uint64_t)(n * H)), *dy = to_gpu(NULL, 4 * (uint64_t)(n * H)), *want = malloc(4 * (size_t)(n * H));
    double t0 = now();
    gpu.moe(&gpu, dy, dids, dw, dlog, dx, n, &dx_, dscratch);
    float *got = from_gpu(dy, n * H);
    double ms = (now() - t0) * 1e3;
    cpu.moe(&cpu, want, ids, w, logits, x, n, &hx, scratch);
    int32_t *got_ids = (int32_t *)from_gpu(dids, n * k);
    float *got_w = from_gpu(dw, n * k);
    char what[160];
    snprintf(what, sizeof what, "moe %s %d experts top %d, H %lld I %lld shared %lld, %lld tokens", sp_mtype_name(t), E, k,
             (long long)H, (long long)I, (long long)Is, (long long)n);
    CHECK(!memcmp(got_ids, ids, sizeof(int32_t) * (size_t)(n * k)), "%s: same expert ids", what);
    char part[200];
    snprintf(part, sizeof part, "%s: routing weights", what);
    expect(part, nmse(got_w, w, n * k), 1e-12);
    snprintf(part, sizeof part, "%s (%.0f ms)", what, ms);
    expect(part, nmse(got, want, n * H), tol);
    gpu.free(&gpu, dlog), gpu.free(&gpu, dw), gpu.free(&gpu, dids), gpu.free(&gpu, dscratch), gpu.free(&gpu, dx), gpu.free(&gpu, dy);
    free(logits), free(x), free(ids), free(w), free(got_ids), free(got_w), free(scratch), free(want), free(got);
    free(gu.bytes), free(dn.bytes), free(sg.bytes), free(su.bytes), free(sd.bytes), free(score.bytes);
}

#endif
