/* vulkan_ops_test.c — every Vulkan op against the CPU backend's op (the reference), on random inputs of the real
 * model shapes and of odd ones, by normalized MSE (Σ(gpu − cpu)² / Σ cpu², ggml's test-backend-ops measure).
 *
 *   build/tests/vulkan_ops_test           odd shapes and the real shapes (Qwen3.8-27B, Qwen3.6-35B-A3B)
 *   build/tests/vulkan_ops_test --quick   odd shapes only (run once per subgroup size: LP_NATIVE_VECTOR_WIDTH)
 *   build/tests/vulkan_ops_test --moe     the routed experts of prefill chunks only (vulkan_moe_cases.h)
 *   build/tests/vulkan_ops_test --attention   the attention cases only, every decode shape (vulkan_attention_cases.h)
 *
 * Runs on the device SPLASH_VULKAN_DEVICE names, else the first GPU, else a CPU implementation (lavapipe).
 * Tolerances (NMSE): 1e-10 for f32-exact ops (same math, another summation order); the GDN state after a long
 * horizon 1e-9; quantized matmuls (Q8, Q4 and MLX's affine MLX8, MLX4) 1e-10 against the exact product with the
 * dequantized weights (what the kernels compute) and 2e-4 against the CPU op, which also rounds x to int8 per group
 * (of 32; of 64 for MLX: Q8_0-style activations); embedding rows exact, 1e-12 where a dequantized weight q·scale + min
 * may be one fused multiply-add on one side and two roundings on the other.
 * Inputs use realistic ranges (ggml test-backend-ops): GDN log-decays in about [−24, 0), β in (0.02, 0.98).
 * GEMMs on the matrix units (kernels/matmul_coopmat.comp, where the device has cooperative matrices) take f16
 * operands: x and the dequantized weights each rounded to 11 significant bits (relative error ≤ 2⁻¹¹, NMSE about
 * 1e-7 on these inputs), so their tolerance is 1e-5 against the exact product; each of their tiles runs forced too.
 * Attention of prefill chunks there (flash_attention_coopmat.comp) rounds q·scale, K, V (f32 and int8 rows too) and the
 * probabilities to f16: tolerance 1e-4 against the CPU op.
 * Q4/Q8 GEMVs on integer dot products (matmul.comp DOT, where the device has them) quantize x with the CPU's bits and
 * sum each group exactly, as the CPU op does: 1e-10 against the CPU op and against the exact product of the
 * dequantized weights and the dequantized int8 x. */
#include "backends/backend.h"
#include "backends/cpu/matmul_kernels.h"
#include "backends/cpu/ops.h"
#include "backends/gpu/gpu.h"
#include "backends/vulkan/vulkan.h"
#include "backend_test.h"
#include "vulkan_attention_cases.h"
#include "vulkan_gdn_cases.h"
#include "vulkan_moe_cases.h"
#include "check.h"
#include "core/error.h"
#include "core/quant.h"
#include "core/threadpool.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- matmul ---- */

/* y = x · Wᵀ in double over the dequantized weights: what the kernels compute, up to f32 rounding. */
static void exact_matmul(float *y, const sp_matrix *W, const float *x, int64_t n) {
    float *row = malloc(sizeof(float) * (size_t)W->cols);
    for (int64_t r = 0; r < W->rows; r++) {
        sp_matrix_row_f32(W, r, row);
        for (int64_t i = 0; i < n; i++) {
            double s = 0;
            for (int64_t c = 0; c < W->cols; c++) s += (double)row[c] * x[i * W->cols + c];
            y[i * W->rows + r] = (float)s;
        }
    }
    free(row);
}

/* The f16-operand tolerance when this product runs on the matrix units (as the op chooses), else 0. */
static double coop_tolerance(sp_mtype t, int64_t n) {
    return n > SP_GPU_GEMV_MAX_N && !sp_gpu_of(&gpu)->no_coopmat && sp_gpu_gemm_coop_first[t] >= 0 ? 1e-5 : 0;
}

/* Whether the GPU's GEMV of n rows runs on integer dot products against int8 x (as the op chooses, with
 * int_dot_min_bytes 0). */
static bool int_dot(sp_mtype t, int64_t n) {
    return !sp_gpu_of(&gpu)->no_int_dot && (t == SP_MAT_Q4 || t == SP_MAT_Q8) && n <= SP_GPU_GEMV_MAX_N;
}

/* x [n][cols] as the int8 path sees it: quantized per group of 32 (sp_quantize_act_ref) and dequantized, q·d. */
static float *int8_x(const float *x, int64_t cols, int64_t n) {
    int64_t nb = (cols + SP_QK - 1) / SP_QK;
    float *out = malloc(sizeof(float) * (size_t)(n * cols)), *d = malloc(sizeof(float) * (size_t)nb), *s = malloc(sizeof(float) * (size_t)nb);
    int8_t *q = malloc((size_t)(nb * SP_QK));
    int32_t *sum = malloc(sizeof(int32_t) * (size_t)nb);
    for (int64_t i = 0; i < n; i++) {
        sp_quantize_act_ref(x + i * cols, cols, q, d, s, sum);
        for (int64_t c = 0; c < cols; c++) out[i * cols + c] = (float)q[c] * d[c / SP_QK];
    }
    free(d), free(s), free(q), free(sum);
    return out;
}

static void test_matmul(sp_mtype t, int64_t rows, int64_t cols, int64_t n, bool exact) {
    weights w = make_weights(t, rows, cols);
    double coop = coop_tolerance(t, n);
    bool dot = int_dot(t, n);
    float *x = randoms(n * cols, -1, 1), *want = malloc(sizeof(float) * (size_t)(n * rows));
    float *dx = to_gpu(x, sizeof(float) * (uint64_t)(n * cols)), *dy = to_gpu(NULL, sizeof(float) * (uint64_t)(n * rows));
    double t0 = now();
    gpu.matmul(&gpu, dy, &w.dev, dx, n);
    float *got = from_gpu(dy, n * rows);
    double ms = (now() - t0) * 1e3;
    char what[160];
    cpu.matmul(&cpu, want, &w.host, x, n);
    bool quant = t >= SP_MAT_Q8;
    snprintf(what, sizeof what, "matmul %s %lldx%lld n=%lld%s vs cpu (%.0f ms)", sp_mtype_name(t), (long long)rows,
             (long long)cols, (long long)n, coop ? " (f16 matrix units)" : dot ? " (int8 dot)" : "", ms);
    expect(what, nmse(got, want, n * rows), quant && !dot ? 2e-4 : coop ? coop : 1e-10);
    if (exact && quant) {
        float *xe = dot ? int8_x(x, cols, n) : x;
        exact_matmul(want, &w.host, xe, n);
        if (xe != x) free(xe);
        snprintf(what, sizeof what, "matmul %s %lldx%lld n=%lld vs exact dequantized%s", sp_mtype_name(t), (long long)rows,
                 (long long)cols, (long long)n, dot ? " (int8 x)" : "");
        expect(what, nmse(got, want, n * rows), coop ? coop : 1e-10);
    }
    gpu.free(&gpu, dx), gpu.free(&gpu, dy);
    free(x), free(want), free(got), free(w.bytes);
}

/* GEMV launches forced (workgroup, row groups, rows per group), down to row groups of SP_GPU_GEMV_MIN_LANES invocations,
 * on float and integer-dot weights and each batch bucket, against the exact product; rows not a multiple of a
 * workgroup's rows, so the last workgroup's groups run past the matrix. */
static void test_gemv_launches(sp_mtype t, int64_t rows, int64_t cols, int64_t n) {
    weights w = make_weights(t, rows, cols);
    bool dot = int_dot(t, n);
    float *x = randoms(n * cols, -1, 1), *want = malloc(sizeof(float) * (size_t)(n * rows));
    float *xe = dot ? int8_x(x, cols, n) : x;
    exact_matmul(want, &w.host, xe, n);
    float *dx = to_gpu(x, sizeof(float) * (uint64_t)(n * cols)), *dy = to_gpu(NULL, sizeof(float) * (uint64_t)(n * rows));
    int bucket = sp_gpu_gemv_bucket(n), max_rows = sp_gpu_gemv_max_rows(bucket, 1);
    const sp_gpu_mm_launch launches[] = {{.workgroup = 128, .groups = 16, .rows = 1}, {.workgroup = 128, .groups = 16, .rows = (uint32_t)max_rows},
                                         {.workgroup = 64, .groups = 8, .rows = 2}, {.workgroup = 32, .groups = 4, .rows = 1},
                                         {.workgroup = 128, .groups = 4, .rows = 2}};
    double worst = 0;
    for (size_t l = 0; l < sizeof launches / sizeof launches[0]; l++) {
        gpu.clear(&gpu, dy, sizeof(float) * (uint64_t)(n * rows));
        sp_gpu_matmul_launch(&gpu, dy, &w.dev, dx, n, &launches[l]);
        float *got = from_gpu(dy, n * rows);
        double e = nmse(got, want, n * rows);
        worst = e > worst ? e : worst;
        free(got);
    }
    char what[160];
    snprintf(what, sizeof what, "matmul %s %lldx%lld n=%lld, launches of 8 to 64 invocations a row group%s vs exact", sp_mtype_name(t),
             (long long)rows, (long long)cols, (long long)n, dot ? " (int8 x)" : "");
    expect(what, worst, 1e-10);
    gpu.free(&gpu, dx), gpu.free(&gpu, dy);
    if (xe != x) free(xe);
    free(x), free(want), free(w.bytes);
}

/* GEMVs of one x share its int8 copy (gpu->x8) until something writes that x: two matrices on x, then x changed by a
 * kernel (add) and by the host, each followed by a product recorded in the same command stream; each against the CPU. */
static void test_x8_reuse(sp_mtype t, int64_t cols, int64_t n) {
    weights a = make_weights(t, 64, cols), b = make_weights(t, 96, cols);
    int64_t xs = n * cols;
    float *x = randoms(xs, -1, 1), *dx2 = randoms(xs, -1, 1), *x3 = randoms(xs, -2, 2), *x2 = malloc(sizeof(float) * (size_t)xs);
    for (int64_t i = 0; i < xs; i++) x2[i] = x[i] + dx2[i];
    float *dx = to_gpu(x, sizeof(float) * (uint64_t)xs), *dd = to_gpu(dx2, sizeof(float) * (uint64_t)xs), *dy[4];
    const weights *w[4] = {&a, &b, &a, &b};
    const float *xin[4] = {x, x, x2, x3};
    for (int i = 0; i < 4; i++) dy[i] = to_gpu(NULL, sizeof(float) * (uint64_t)(n * w[i]->dev.rows));
    gpu.matmul(&gpu, dy[0], &a.dev, dx, n);
    gpu.matmul(&gpu, dy[1], &b.dev, dx, n);
    gpu.add(&gpu, dx, dd, xs);
    gpu.matmul(&gpu, dy[2], &a.dev, dx, n);
    gpu.write(&gpu, dx, x3, sizeof(float) * (uint64_t)xs);
    gpu.matmul(&gpu, dy[3], &b.dev, dx, n);
    static const char *step[4] = {"first", "second matrix, same x", "x changed by a kernel", "x written by the host"};
    for (int i = 0; i < 4; i++) {
        int64_t rows = w[i]->dev.rows;
        float *got = from_gpu(dy[i], n * rows), *want = malloc(sizeof(float) * (size_t)(n * rows));
        cpu.matmul(&cpu, want, &w[i]->host, xin[i], n);
        char what[160];
        snprintf(what, sizeof what, "matmul %s %lldx%lld n=%lld, %s, vs cpu", sp_mtype_name(t), (long long)rows, (long long)cols,
                 (long long)n, step[i]);
        expect(what, nmse(got, want, n * rows), int_dot(t, n) ? 1e-10 : 2e-4);
        free(got), free(want);
        gpu.free(&gpu, dy[i]);
    }
    gpu.free(&gpu, dx), gpu.free(&gpu, dd);
    free(x), free(dx2), free(x2), free(x3), free(a.bytes), free(b.bytes);
}

/* The MLP's gate and up products with the gate (matmul_gate_up): against the GPU's own two matmuls and silu_mul bit for
 * bit (few rows run one GEMV that sums each row as the separate ones do), and against the CPU op. */
static void test_gate_up(sp_mtype t, int64_t rows, int64_t cols, int64_t n) {
    weights g = make_weights(t, rows, cols), u = make_weights(t, rows, cols);
    float *x = randoms(n * cols, -1, 1), *want = malloc(sizeof(float) * (size_t)(n * rows)), *tmp = malloc(sizeof(float) * (size_t)(n * rows));
    uint64_t bytes = sizeof(float) * (uint64_t)(n * rows);
    float *dx = to_gpu(x, sizeof(float) * (uint64_t)(n * cols)), *dh = to_gpu(NULL, bytes), *du = to_gpu(NULL, bytes);
    float *dg2 = to_gpu(NULL, bytes), *du2 = to_gpu(NULL, bytes);
    gpu.matmul_gate_up(&gpu, dh, du, &g.dev, &u.dev, dx, n);
    gpu.matmul(&gpu, dg2, &g.dev, dx, n);
    gpu.matmul(&gpu, du2, &u.dev, dx, n);
    gpu.silu_mul(&gpu, dg2, dg2, du2, n * rows);
    float *got = from_gpu(dh, n * rows), *sep = from_gpu(dg2, n * rows);
    cpu.matmul_gate_up(&cpu, want, tmp, &g.host, &u.host, x, n);
    char what[160];
    snprintf(what, sizeof what, "matmul_gate_up %s %lldx%lld n=%lld vs matmul, matmul, silu_mul", sp_mtype_name(t), (long long)rows,
             (long long)cols, (long long)n);
    expect(what, memcmp(got, sep, bytes) ? nmse(got, sep, n * rows) + 1e-30 : 0, 0);
    snprintf(what, sizeof what, "matmul_gate_up %s %lldx%lld n=%lld vs cpu", sp_mtype_name(t), (long long)rows, (long long)cols,
             (long long)n);
    double coop = coop_tolerance(t, n);
    expect(what, nmse(got, want, n * rows), t >= SP_MAT_Q8 && !int_dot(t, n) ? 2e-4 : coop ? coop : 1e-10);
    gpu.free(&gpu, dx), gpu.free(&gpu, dh), gpu.free(&gpu, du), gpu.free(&gpu, dg2), gpu.free(&gpu, du2);
    free(x), free(want), free(tmp), free(got), free(sep), free(g.bytes), free(u.bytes);
}

/* Every cooperative-matrix tile, forced, against the exact product (the rows the reference covers: all of them up to
 * 256 rows, else the first 64 and the last 64, so edge tiles in both dimensions are checked); skipped, with the
 * reason, where the device has no matrix units. */
static void test_gemm_coop(sp_mtype t, int64_t rows, int64_t cols, int64_t n) {
    const char *why = sp_gpu_of(&gpu)->no_coopmat;
    if (why) {
        printf("skip    cooperative-matrix GEMM %s %lldx%lld n=%lld: %s\n", sp_mtype_name(t), (long long)rows, (long long)cols,
               (long long)n, why);
        return;
    }
    weights w = make_weights(t, rows, cols);
    float *x = randoms(n * cols, -1, 1), *want = malloc(sizeof(float) * (size_t)(n * rows)), *row = malloc(sizeof(float) * (size_t)cols);
    float *dx = to_gpu(x, sizeof(float) * (uint64_t)(n * cols)), *dy = to_gpu(NULL, sizeof(float) * (uint64_t)(n * rows));
    bool all = rows <= 256;
    double e = 0, s = 0;
    for (int tile = 0; tile < SP_GPU_COOP_TILE_COUNT; tile++) {
        gpu.clear(&gpu, dy, sizeof(float) * (uint64_t)(n * rows));
        double t0 = now();
        sp_gpu_matmul_launch(&gpu, dy, &w.dev, dx, n, &(sp_gpu_mm_launch){.tile = tile, .coopmat = true});
        float *got = from_gpu(dy, n * rows);
        double ms = (now() - t0) * 1e3;
        if (tile == 0) /* the reference, once: exact over the dequantized weights, in double */
            for (int64_t r = 0; r < rows; r++) {
                if (!all && r == 64) r = rows - 64;
                sp_matrix_row_f32(&w.host, r, row);
                for (int64_t i = 0; i < n; i++) {
                    double acc = 0;
                    for (int64_t c = 0; c < cols; c++) acc += (double)row[c] * x[i * cols + c];
                    want[i * rows + r] = (float)acc;
                }
            }
        e = 0, s = 0;
        for (int64_t r = 0; r < rows; r++) {
            if (!all && r == 64) r = rows - 64;
            for (int64_t i = 0; i < n; i++) {
                double d = (double)got[i * rows + r] - want[i * rows + r];
                e += d * d, s += (double)want[i * rows + r] * want[i * rows + r];
            }
        }
        const sp_gpu_coop_tile *ct = &sp_gpu_coop_tiles[tile];
        char what[160];
        snprintf(what, sizeof what, "gemm coopmat %s %lldx%lld n=%lld tile %dx%dx%d/%dx%d vs exact (%.0f ms)", sp_mtype_name(t),
                 (long long)rows, (long long)cols, (long long)n, ct->bm, ct->bn, ct->bk, ct->wm, ct->wn, ms);
        expect(what, s > 0 ? e / s : e, 1e-5);
        free(got);
    }
    gpu.free(&gpu, dx), gpu.free(&gpu, dy);
    free(x), free(want), free(row), free(w.bytes);
}

/* ---- elementwise, norms, rope, embed ---- */

static void test_norms(int64_t n, int64_t d) {
    int64_t N = n * d;
    float *x = randoms(N, -3, 3), *z = randoms(N, -4, 4), *w = randoms(d, 0.5f, 1.5f), *want = malloc(4 * (size_t)N);
    float *dx = to_gpu(x, 4 * (uint64_t)N), *dz = to_gpu(z, 4 * (uint64_t)N), *dw = to_gpu(w, 4 * (uint64_t)d);
    float *dy = to_gpu(NULL, 4 * (uint64_t)N);
    char what[128];
    gpu.rmsnorm(&gpu, dy, dx, dw, n, d, 1e-6f);
    cpu.rmsnorm(&cpu, want, x, w, n, d, 1e-6f);
    float *got = from_gpu(dy, N);
    snprintf(what, sizeof what, "rmsnorm %lldx%lld", (long long)n, (long long)d);
    expect(what, nmse(got, want, N), 1e-12);
    free(got);
    gpu.rmsnorm_gated(&gpu, dx, dx, dz, dw, n, d, 1e-6f); /* in place */
    cpu.rmsnorm_gated(&cpu, want, x, z, w, n, d, 1e-6f);
    got = from_gpu(dx, N);
    snprintf(what, sizeof what, "rmsnorm_gated %lldx%lld (in place)", (long long)n, (long long)d);
    expect(what, nmse(got, want, N), 1e-12);
    /* the residual add and the next norm: x (now the gated norm's output, the GPU's on both sides) += z,
     * y = rmsnorm(x) · w; both written, the sum exact */
    float *xs = got;
    gpu.add_rmsnorm(&gpu, dy, dx, dz, dw, n, d, 1e-6f);
    cpu.add_rmsnorm(&cpu, want, xs, z, w, n, d, 1e-6f);
    got = from_gpu(dy, N);
    float *got_x = from_gpu(dx, N);
    snprintf(what, sizeof what, "add_rmsnorm %lldx%lld", (long long)n, (long long)d);
    expect(what, nmse(got, want, N), 1e-12);
    snprintf(what, sizeof what, "add_rmsnorm %lldx%lld, the sum it leaves in x", (long long)n, (long long)d);
    expect(what, nmse(got_x, xs, N), 0);
    free(got), free(got_x), free(xs);
    gpu.free(&gpu, dx), gpu.free(&gpu, dz), gpu.free(&gpu, dw), gpu.free(&gpu, dy);
    free(x), free(z), free(w), free(want);
}

/* A norm whose output feeds GEMVs leaves it quantized for them (norm.comp QUANT) where the integer-dot GEMV runs: the
 * norm, then two matmuls of its output record no dispatch quantizing it; results against the CPU's norm and matmuls
 * (x passed through the CPU norm, the GPU's norm output being the GPU's side). */
static void test_norm_gemv(bool residual, sp_mtype t, int64_t n, int64_t d) {
    int64_t N = n * d;
    float *x = randoms(N, -3, 3), *z = randoms(N, -1, 1), *w = randoms(d, 0.5f, 1.5f), *xn = malloc(4 * (size_t)N);
    float *dx = to_gpu(x, 4 * (uint64_t)N), *dz = to_gpu(z, 4 * (uint64_t)N), *dw = to_gpu(w, 4 * (uint64_t)d);
    float *dxn = to_gpu(NULL, 4 * (uint64_t)N);
    weights a = make_weights(t, 96, d), b = make_weights(t, 40, d);
    float *dya = to_gpu(NULL, 4 * (uint64_t)(n * 96)), *dyb = to_gpu(NULL, 4 * (uint64_t)(n * 40));
    const sp_gpu *g = sp_gpu_of(&gpu);
    uint64_t c0 = g->n_commands;
    if (residual) gpu.add_rmsnorm(&gpu, dxn, dx, dz, dw, n, d, 1e-6f);
    else gpu.rmsnorm(&gpu, dxn, dx, dw, n, d, 1e-6f);
    gpu.matmul(&gpu, dya, &a.dev, dxn, n);
    gpu.matmul(&gpu, dyb, &b.dev, dxn, n);
    uint64_t commands = g->n_commands - c0;
    char what[160];
    bool fused = sp_gpu_quantize_rows(g, n, d);
    snprintf(what, sizeof what, "%s %lldx%lld then two %s matmuls: %llu dispatches (%s)", residual ? "add_rmsnorm" : "rmsnorm",
             (long long)n, (long long)d, sp_mtype_name(t), (unsigned long long)commands, fused ? "x quantized by the norm" : "no int8 path");
    expect(what, commands == 3 ? 0 : 1, 0);
    float *xs = malloc(4 * (size_t)N);
    memcpy(xs, x, 4 * (size_t)N);
    if (residual) cpu.add_rmsnorm(&cpu, xn, xs, z, w, n, d, 1e-6f);
    else cpu.rmsnorm(&cpu, xn, xs, w, n, d, 1e-6f);
    float *got_xn = from_gpu(dxn, N);
    snprintf(what, sizeof what, "%s %lldx%lld (the norm's output)", residual ? "add_rmsnorm" : "rmsnorm", (long long)n, (long long)d);
    expect(what, nmse(got_xn, xn, N), 1e-12);
    if (residual) {
        float *got_x = from_gpu(dx, N);
        snprintf(what, sizeof what, "add_rmsnorm %lldx%lld, the sum it leaves in x", (long long)n, (long long)d);
        expect(what, nmse(got_x, xs, N), 0);
        free(got_x);
    }
    const weights *ws[2] = {&a, &b};
    float *dys[2] = {dya, dyb};
    for (int i = 0; i < 2; i++) {
        int64_t rows = ws[i]->dev.rows;
        float *got = from_gpu(dys[i], n * rows), *want = malloc(4 * (size_t)(n * rows));
        cpu.matmul(&cpu, want, &ws[i]->host, got_xn, n); /* the GPU's norm output on both sides */
        snprintf(what, sizeof what, "matmul %s %lldx%lld n=%lld of that output vs cpu", sp_mtype_name(t), (long long)rows, (long long)d,
                 (long long)n);
        expect(what, nmse(got, want, n * rows), fused ? 1e-10 : 2e-4);
        free(got), free(want);
    }
    gpu.free(&gpu, dx), gpu.free(&gpu, dz), gpu.free(&gpu, dw), gpu.free(&gpu, dxn), gpu.free(&gpu, dya), gpu.free(&gpu, dyb);
    free(x), free(z), free(w), free(xn), free(xs), free(got_xn), free(a.bytes), free(b.bytes);
}

static void test_rope(int64_t n, int32_t heads, int32_t hd, int32_t rot, bool mrope) {
    int64_t N = n * heads * hd;
    float *x = randoms(N, -2, 2), *inv = malloc(sizeof(float) * (size_t)(rot / 2));
    for (int32_t i = 0; i < rot / 2; i++) inv[i] = 1.0f / powf(1e7f, (float)(2 * i) / (float)rot);
    int32_t *pos = malloc(sizeof(int32_t) * (size_t)(3 * n)), section[3] = {11, 11, 10};
    for (int64_t i = 0; i < 3 * n; i++) pos[i] = (int32_t)(uniform(0, 40000));
    float *dx = to_gpu(x, 4 * (uint64_t)N), *dinv = to_gpu(inv, 2 * (uint64_t)rot);
    int32_t *dpos = to_gpu(pos, 12 * (uint64_t)n);
    gpu.rope(&gpu, dx, n, heads, hd, rot, dpos, mrope ? section : NULL, dinv);
    cpu.rope(&cpu, x, n, heads, hd, rot, pos, mrope ? section : NULL, inv);
    float *got = from_gpu(dx, N);
    char what[128];
    snprintf(what, sizeof what, "rope%s n=%lld heads=%d dim=%d rot=%d", mrope ? " (mrope)" : "", (long long)n, heads, hd, rot);
    expect(what, nmse(got, x, N), 1e-11);
    gpu.free(&gpu, dx), gpu.free(&gpu, dinv), gpu.free(&gpu, dpos);
    free(got), free(x), free(inv), free(pos);
}

/* The gated attention's inputs from a q projection of [query | gate] heads and a k projection, against the CPU's and
 * against copy_rows, rmsnorm and rope on the GPU; one dispatch. */
static void test_attention_prep(int64_t n, int32_t Hq, int32_t Hkv, int32_t hd, int32_t rot, bool mrope) {
    int64_t Q = n * Hq * hd, Kn = n * Hkv * hd;
    float *qg = randoms(2 * Q, -3, 3), *k = randoms(Kn, -3, 3), *qw = randoms(hd, 0.5f, 1.5f), *kw = randoms(hd, 0.5f, 1.5f);
    float *inv = malloc(sizeof(float) * (size_t)(rot / 2));
    for (int32_t i = 0; i < rot / 2; i++) inv[i] = 1.0f / powf(1e7f, (float)(2 * i) / (float)rot);
    int32_t *pos = malloc(sizeof(int32_t) * (size_t)(3 * n)), section[3] = {11, 11, 10};
    for (int64_t i = 0; i < 3 * n; i++) pos[i] = (int32_t)(uniform(0, 40000));
    float *dqg = to_gpu(qg, 8 * (uint64_t)Q), *dk = to_gpu(k, 4 * (uint64_t)Kn), *dk2 = to_gpu(k, 4 * (uint64_t)Kn);
    float *dqw = to_gpu(qw, 4 * (uint64_t)hd), *dkw = to_gpu(kw, 4 * (uint64_t)hd), *dinv = to_gpu(inv, 2 * (uint64_t)rot);
    int32_t *dpos = to_gpu(pos, 12 * (uint64_t)n);
    float *dq = to_gpu(NULL, 4 * (uint64_t)Q), *dgate = to_gpu(NULL, 4 * (uint64_t)Q), *dq2 = to_gpu(NULL, 4 * (uint64_t)Q);
    float *dgate2 = to_gpu(NULL, 4 * (uint64_t)Q), *q = malloc(4 * (size_t)Q), *gate = malloc(4 * (size_t)Q);
    const int32_t *sec = mrope ? section : NULL;
    const sp_gpu *g = sp_gpu_of(&gpu);
    uint64_t c0 = g->n_commands;
    gpu.attention_prep(&gpu, dq, dgate, dqg, dk, dqw, dkw, n, Hq, Hkv, hd, 1e-6f, rot, dpos, sec, dinv);
    uint64_t commands = g->n_commands - c0;
    gpu.copy_rows(&gpu, dq2, hd, dqg, 2 * hd, n * Hq, hd);
    gpu.copy_rows(&gpu, dgate2, hd, dqg + hd, 2 * hd, n * Hq, hd);
    gpu.rmsnorm(&gpu, dq2, dq2, dqw, n * Hq, hd, 1e-6f);
    gpu.rmsnorm(&gpu, dk2, dk2, dkw, n * Hkv, hd, 1e-6f);
    gpu.rope(&gpu, dq2, n, Hq, hd, rot, dpos, sec, dinv);
    gpu.rope(&gpu, dk2, n, Hkv, hd, rot, dpos, sec, dinv);
    cpu.attention_prep(&cpu, q, gate, qg, k, qw, kw, n, Hq, Hkv, hd, 1e-6f, rot, pos, sec, inv);
    float *got_q = from_gpu(dq, Q), *got_gate = from_gpu(dgate, Q), *got_k = from_gpu(dk, Kn);
    float *sep_q = from_gpu(dq2, Q), *sep_k = from_gpu(dk2, Kn);
    char what[160];
    snprintf(what, sizeof what, "attention_prep%s n=%lld heads %d/%d dim %d rot %d: q", mrope ? " (mrope)" : "", (long long)n, Hq,
             Hkv, hd, rot);
    expect(what, nmse(got_q, q, Q), 1e-11);
    expect("attention_prep: k", nmse(got_k, k, Kn), 1e-11);
    expect("attention_prep: gate (a copy, exact)", nmse(got_gate, gate, Q), 0);
    expect("attention_prep: q against copy_rows, rmsnorm and rope on the GPU", nmse(got_q, sep_q, Q), 1e-12);
    expect("attention_prep: k against rmsnorm and rope on the GPU", nmse(got_k, sep_k, Kn), 1e-12);
    snprintf(what, sizeof what, "attention_prep: %llu dispatch(es)", (unsigned long long)commands);
    expect(what, commands == 1 ? 0 : 1, 0);
    gpu.free(&gpu, dqg), gpu.free(&gpu, dk), gpu.free(&gpu, dk2), gpu.free(&gpu, dqw), gpu.free(&gpu, dkw), gpu.free(&gpu, dinv);
    gpu.free(&gpu, dpos), gpu.free(&gpu, dq), gpu.free(&gpu, dgate), gpu.free(&gpu, dq2), gpu.free(&gpu, dgate2);
    free(qg), free(k), free(qw), free(kw), free(inv), free(pos), free(q), free(gate);
    free(got_q), free(got_gate), free(got_k), free(sep_q), free(sep_k);
}

static void test_embed(sp_mtype t, int64_t vocab, int64_t d, int64_t n) {
    weights w = make_weights(t, vocab, d);
    int32_t *tok = malloc(sizeof(int32_t) * (size_t)n);
    for (int64_t i = 0; i < n; i++) tok[i] = (int32_t)uniform(0, (float)vocab - 1);
    int32_t *dtok = to_gpu(tok, 4 * (uint64_t)n);
    float *dy = to_gpu(NULL, 4 * (uint64_t)(n * d)), *want = malloc(4 * (size_t)(n * d));
    gpu.embed(&gpu, dy, &w.dev, dtok, n);
    cpu.embed(&cpu, want, &w.host, tok, n);
    float *got = from_gpu(dy, n * d);
    char what[128];
    snprintf(what, sizeof what, "embed %s %lldx%lld n=%lld", sp_mtype_name(t), (long long)vocab, (long long)d, (long long)n);
    expect(what, nmse(got, want, n * d), t >= SP_MAT_Q8 ? 1e-12 : 0);
    gpu.free(&gpu, dtok), gpu.free(&gpu, dy);
    free(tok), free(want), free(got), free(w.bytes);
}

/* ---- attention ---- */

/* Which attention kernel a call takes: the matrix units for chunks of 16 rows or more at the head dims they are compiled
 * for, on every KV type, where the device has cooperative matrices (here asked of this device with them turned on, so
 * that a device without them checks the choice too); the scalar kernel for decode and verify blocks, other head dims,
 * and devices without them. */
static void test_flash_choice(void) {
    sp_gpu on = *sp_gpu_of(&gpu), off = on;
    on.no_coopmat = NULL, off.no_coopmat = "off";
    bool ok = true;
    for (int32_t t = SPLASH_KV_F32; t <= SPLASH_KV_INT8; t++)
        ok = ok && sp_gpu_flash_attention(&on, t, 256, 1024) && sp_gpu_flash_attention(&on, t, 32, 16) &&
             !sp_gpu_flash_attention(&on, t, 256, 15) && !sp_gpu_flash_attention(&on, t, 40, 1024) &&
             !sp_gpu_flash_attention(&off, t, 256, 1024);
    expect("attention kernel choice: matrix units for chunks on every KV type", ok ? 0 : 1, 0);
}

/* kv_write into an int8 cache on the rows where the quantizer's roundings decide: a zero group, scales that are f16
 * subnormals, max|x| / 127 exactly on an f16 midpoint (ties to the even scale, both ways), x / d exactly halfway
 * between integers (ties to even), ±max|x| itself and large values. The bytes must be the CPU's. */
static void test_kv_write_int8_edges(void) {
    enum { HD = 32, ROWS = 9, P = 16 };
    float rows[ROWS][HD];
    float m0 = (sp_f16_to_f32(0x2000) + sp_f16_to_f32(0x2001)) / 2, m1 = (sp_f16_to_f32(0x2001) + sp_f16_to_f32(0x2002)) / 2;
    for (int j = 0; j < HD; j++) {
        float u = uniform(-1, 1);
        rows[0][j] = 0;
        rows[1][j] = 3e-3f * u;                       /* d below 2^-14: an f16 subnormal */
        rows[2][j] = 1e-7f * u;                       /* d rounds to the smallest subnormals or to 0 */
        rows[3][j] = j ? m0 * 127 * u : m0 * 127;     /* amax / 127 on the midpoint below an odd f16: down */
        rows[4][j] = j ? m1 * 127 * u : -m1 * 127;    /* on the midpoint below an even f16: up */
        rows[5][j] = j ? (float)((j % 20) - 10 + 0.5) / 128 : 127.0f / 128; /* d = 2^-7: x / d = k + 1/2 */
        rows[6][j] = 1e4f * u;
        rows[7][j] = j % 2 ? -0.75f : 0.75f;          /* every value ±amax: q = ±127 */
        rows[8][j] = u;
    }
    int64_t row_bytes = sp_kv_row_bytes(SPLASH_KV_INT8, HD), bytes = 2 * P * row_bytes;
    int32_t pages[1] = {0};
    uint8_t *kv = calloc(1, (size_t)bytes), *dkv = to_gpu(kv, (uint64_t)bytes);
    float *dk = to_gpu(rows, sizeof rows);
    sp_kv_view hv = {kv, kv + P * row_bytes, bytes, pages, P, SPLASH_KV_INT8}, dvw = {dkv, dkv + P * row_bytes, bytes, pages, P, SPLASH_KV_INT8};
    gpu.kv_write(&gpu, &dvw, dk, dk, 3, ROWS, 1, HD);
    cpu.kv_write(&cpu, &hv, &rows[0][0], &rows[0][0], 3, ROWS, 1, HD);
    uint8_t *got = (uint8_t *)from_gpu(dkv, bytes / 4);
    uint8_t ref[ROWS * 34];
    for (int r = 0; r < ROWS; r++) sp_quantize_row_q8(rows[r], HD, ref + r * row_bytes); /* the scalar reference too */
    expect("kv_write int8 rows on rounding edges", memcmp(got, kv, (size_t)bytes) || memcmp(kv + 3 * row_bytes, ref, (size_t)(ROWS * row_bytes)) ? 1 : 0, 0);
    gpu.free(&gpu, dkv), gpu.free(&gpu, dk);
    free(kv), free(got);
}

/* attention_ext: n rows at q_pos0 over page positions [page_lo, page_hi (+ i when causal)) of scattered pages and,
 * with blk, the rows' own keys (causal or not), with an optional window: what the MTP and DFlash drafters ask. */
static void test_attention_ext(int32_t kv_type, int32_t Hq, int32_t Hkv, int32_t hd, int32_t n, int32_t q_pos0, int32_t page_lo,
                               int32_t page_hi, int32_t page_causal, bool blk, int32_t blk_causal, int32_t window, int32_t P) {
    int32_t total = page_hi + n, n_pages = (total + P - 1) / P, cache_pages = 2 * n_pages + 1;
    int64_t page_rows = 2 * (int64_t)Hkv * P, row_bytes = sp_kv_row_bytes(kv_type, hd); /* one layer: K then V */
    int32_t *pages = malloc(sizeof(int32_t) * (size_t)n_pages);
    for (int32_t i = 0; i < n_pages; i++) pages[i] = cache_pages - 1 - 2 * i;
    float *vals = randoms(page_rows * cache_pages * hd, -1, 1), *q = randoms((int64_t)n * Hq * hd, -1, 1);
    float *kb = randoms((int64_t)n * Hkv * hd, -1, 1), *vb = randoms((int64_t)n * Hkv * hd, -1, 1);
    char *hkv = malloc((size_t)(page_rows * cache_pages * row_bytes)); /* the values in the cache's row type */
    for (int64_t r = 0; r < page_rows * cache_pages; r++) sp_kv_from_f32(&cpu, kv_type, vals + r * hd, hd, hkv + r * row_bytes);
    char *dkv = (char *)to_gpu(hkv, (uint64_t)(page_rows * cache_pages * row_bytes));
    float *dq = to_gpu(q, 4 * (uint64_t)n * Hq * hd);
    float *dkb = to_gpu(kb, 4 * (uint64_t)n * Hkv * hd), *dvb = to_gpu(vb, 4 * (uint64_t)n * Hkv * hd);
    float *dout = to_gpu(NULL, 4 * (uint64_t)n * Hq * hd), *want = malloc(4 * (size_t)n * Hq * hd);
    int64_t half_page = page_rows / 2 * row_bytes;
    sp_kv_view hv = {hkv, hkv + half_page, page_rows * row_bytes, pages, P, kv_type},
               dvw = {dkv, dkv + half_page, page_rows * row_bytes, pages, P, kv_type};
    sp_attn_ext hx = {n, q_pos0, &hv, page_lo, page_hi, page_causal, window, blk ? kb : NULL, blk ? vb : NULL, blk_causal};
    sp_attn_ext dx = {n, q_pos0, &dvw, page_lo, page_hi, page_causal, window, blk ? dkb : NULL, blk ? dvb : NULL, blk_causal};
    float scale = 1.0f / sqrtf((float)hd);
    gpu.attention_ext(&gpu, dout, dq, Hq, Hkv, hd, scale, &dx);
    float *got = from_gpu(dout, (int64_t)n * Hq * hd);
    cpu.attention_ext(&cpu, want, q, Hq, Hkv, hd, scale, &hx);
    char what[200];
    snprintf(what, sizeof what, "attention_ext %d/%d heads x %d, %d rows at %d, pages [%d, %d%s)%s%s, window %d%s", Hq, Hkv, hd,
             n, q_pos0, page_lo, page_hi, page_causal ? " + i" : "", blk ? " + block" : "", blk && blk_causal ? " (causal)" : "",
             window, kv_type == SPLASH_KV_F16 ? ", f16 KV" : kv_type == SPLASH_KV_INT8 ? ", int8 KV" : "");
    expect(what, nmse(got, want, (int64_t)n * Hq * hd), 1e-10);
    gpu.free(&gpu, dkv), gpu.free(&gpu, dq), gpu.free(&gpu, dkb), gpu.free(&gpu, dvb), gpu.free(&gpu, dout);
    free(pages), free(vals), free(hkv), free(q), free(kb), free(vb), free(want), free(got);
}

/* block_conv: DFlash2's dynamic convolution over blocks of different lengths (rows of dyn_stride > its K·H/G). */
static void test_block_conv(int64_t H, int32_t K, int32_t G) {
    int64_t row0[3] = {0, 5, 6};
    int32_t len[3] = {5, 1, 9};
    int64_t rows = 15, stride = 2 * K * (H / G);
    float *x = randoms(rows * H, -2, 2), *dyn = randoms(rows * stride, -1, 1), *base = randoms(K * H, -1, 1);
    float *dx = to_gpu(x, 4 * (uint64_t)(rows * H)), *ddyn = to_gpu(dyn, 4 * (uint64_t)(rows * stride));
    float *dbase = to_gpu(base, 4 * (uint64_t)(K * H));
    gpu.block_conv(&gpu, dx, ddyn + K * (H / G), stride, dbase, H, K, G, row0, len, 3);
    cpu.block_conv(&cpu, x, dyn + K * (H / G), stride, base, H, K, G, row0, len, 3);
    float *got = from_gpu(dx, rows * H);
    char what[128];
    snprintf(what, sizeof what, "block_conv H %lld, K %d, G %d, blocks of 5, 1 and 9 rows", (long long)H, K, G);
    expect(what, nmse(got, x, rows * H), 1e-12);
    gpu.free(&gpu, dx), gpu.free(&gpu, ddyn), gpu.free(&gpu, dbase);
    free(x), free(dyn), free(base), free(got);
}

/* ---- mixture of experts ---- */

/* sp_gpu_tuning_load of a file holding json (a temporary file under $TMPDIR, as the test command sets it, removed after). */
static splash_status tuning_from(sp_gpu *g, const char *json) {
    char path[4096];
    snprintf(path, sizeof path, "%s/splash-tuning-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    int fd = mkstemp(path);
    FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
    if (!f) return SPLASH_ERR_IO;
    fputs(json, f);
    fclose(f);
    setenv("SPLASH_OPS_TEST_TUNING", path, 1);
    splash_status st = sp_gpu_tuning_load(g, "SPLASH_OPS_TEST_TUNING");
    unsetenv("SPLASH_OPS_TEST_TUNING");
    remove(path);
    return st;
}

/* A tuning file's "gemmCoopmat" entry picks that tile for its shape (vulkan_prefill_lab writes these); a tile this
 * build did not compile is ignored, so the shape keeps the default: for a large matrix the 128 × 128 tile, 64 columns a
 * step for a long chunk, 32 for a shorter one (tuning.c picks DEFAULT_COOP_TILES by index). Host-side: needs no matrix
 * units. */
static void test_coop_tuning_file(void) {
    int want = -1;
    for (int i = 0; i < SP_GPU_COOP_TILE_COUNT; i++)
        if (sp_gpu_coop_tiles[i].bn == 256) want = i; /* a candidate: no default picks it */
    CHECK(want >= 0, "coop tuning file: a compiled tile 256 x rows wide (%d)", want);
    if (want < 0) return;
    const sp_gpu_coop_tile *c = &sp_gpu_coop_tiles[want];
    char json[512];
    snprintf(json, sizeof json, "{\"measured\": null, \"gemmCoopmat\": [{\"type\": \"q4\", \"rows\": 12288, \"cols\": 5120, \"tile\": "
             "{\"bm\": %d, \"bn\": %d, \"bk\": %d, \"wm\": %d, \"wn\": %d}}, {\"type\": \"bf16\", \"rows\": 12288, \"cols\": 5120, "
             "\"tile\": {\"bm\": 96, \"bn\": 128, \"bk\": 32, \"wm\": 32, \"wn\": 32}}]}\n", c->bm, c->bn, c->bk, c->wm, c->wn);
    sp_gpu *g = calloc(1, sizeof *g);
    splash_status st = tuning_from(g, json);
    sp_matrix q4 = {SP_MAT_Q4, 12288, 5120, NULL, 0}, bf16 = {SP_MAT_BF16, 12288, 5120, NULL, 0}, other = {SP_MAT_Q4, 12288, 6144, NULL, 0};
    int got = sp_gpu_gemm_coop_tile(g, &q4, 1024), kept = sp_gpu_gemm_coop_tile(g, &bf16, 1024), dflt = sp_gpu_gemm_coop_tile(g, &other, 1024);
    CHECK(!st && got == want && kept == dflt && dflt != want,
          "coop tuning file: q4 12288x5120 takes tile %d (want %d), an uncompiled tile leaves bf16 on %d, another shape %d", got, want,
          kept, dflt);
    const sp_gpu_coop_tile *lng = &sp_gpu_coop_tiles[dflt], *shrt = &sp_gpu_coop_tiles[sp_gpu_gemm_coop_tile(g, &other, 256)];
    CHECK(lng->bm == 128 && lng->bn == 128 && lng->bk == 64 && shrt->bm == 128 && shrt->bn == 128 && shrt->bk == 32,
          "coop default tile for 12288x6144: %dx%dx%d at 1024 rows, %dx%dx%d at 256", lng->bm, lng->bn, lng->bk, shrt->bm, shrt->bn,
          shrt->bk);
    free(g);
}

/* A tuning file's "gemv" entries: row groups down to SP_GPU_GEMV_MIN_LANES invocations are taken, narrower ones and
 * group counts that are not a power of two are ignored (the shape keeps the default launch). Host-side. */
static void test_gemv_tuning_file(void) {
    sp_gpu *g = calloc(1, sizeof *g);
    splash_status st = tuning_from(g, "{\"gemv\": [{\"type\": \"q4\", \"rows\": 17408, \"cols\": 5120, \"batch\": 16, \"workgroup\": 128, "
                                      "\"groups\": 16, \"rowsPerGroup\": 2}, {\"type\": \"q4\", \"rows\": 6144, \"cols\": 5120, \"batch\": 16, "
                                      "\"workgroup\": 64, \"groups\": 16, \"rowsPerGroup\": 1}, {\"type\": \"q4\", \"rows\": 10240, \"cols\": 5120, "
                                      "\"batch\": 1, \"workgroup\": 96, \"groups\": 3, \"rowsPerGroup\": 1}]}\n");
    CHECK(!st, "gemv tuning file: written to a temporary file and loaded (%d)", (int)st);
    sp_matrix gate = {SP_MAT_Q4, 17408, 5120, NULL, 0}, z = {SP_MAT_Q4, 6144, 5120, NULL, 0}, qkv = {SP_MAT_Q4, 10240, 5120, NULL, 0};
    sp_gpu_mm_launch a = sp_gpu_gemv_params(g, &gate, 2), b = sp_gpu_gemv_params(g, &z, 2), c = sp_gpu_gemv_params(g, &qkv, 0);
    CHECK(!st && g->n_gemv == 1 && a.workgroup == 128 && a.groups == 16 && a.rows == 2 && b.groups != 16 && c.groups != 3,
          "gemv tuning file: 8-invocation row groups taken (wg %u g %u r %u), 4 ignored (g %u), 3 groups ignored (g %u); %d kept",
          a.workgroup, a.groups, a.rows, b.groups, c.groups, g->n_gemv);
    free(g);
}

int main(int argc, char **argv) {
    bool quick = argc > 1 && !strcmp(argv[1], "--quick"), moe = argc > 1 && !strcmp(argv[1], "--moe");
    bool attention = argc > 1 && !strcmp(argv[1], "--attention");
    sp_threadpool *pool;
    if (sp_threadpool_create(0, &pool)) return 1;
    sp_cpu_backend_init(&cpu, pool, sp_threadpool_size(pool), &cpu_status);
    splash_status st = sp_vulkan_backend_create(&gpu, pool, sp_threadpool_size(pool), &gpu_status, true);
    if (st) {
        printf("NOT OK  no Vulkan device: %s\n", splash_last_error());
        return 1;
    }
    printf("device: %s, subgroup size %u\n", sp_vulkan_device_name(&gpu), sp_vulkan_subgroup_size(&gpu));
    sp_gpu_of(&gpu)->int_dot_min_bytes = 0; /* every Q4/Q8 GEMV on integer dot products where the device has them */
    double t0 = now();
    if (moe) { /* the routed experts of prefill chunks only, every case (the device run that changes them) */
        test_moe_chunks(false);
        goto done;
    }
    if (attention) { /* every decode shape, and prefill chunks after a context */
        test_attention_decode(true);
        for (int32_t t = SPLASH_KV_F32; t <= SPLASH_KV_INT8; t++) test_attention_step(t);
        test_attention(SPLASH_KV_F32, 24, 4, 256, 1200, 100, 16);
        test_attention(SPLASH_KV_F16, 16, 2, 256, 333, 517, 64);
        test_attention(SPLASH_KV_INT8, 4, 1, 96, 3, 7, 2);
        goto done;
    }

    /* odd shapes: partial groups, rows not a multiple of the tile, every weight type; GEMV for 1 and for 2..4 rows,
     * the narrow GEMM tile (≤ 16 rows) and the square one. --quick keeps what exercises every reduction at another
     * subgroup size without compiling every variant again (lavapipe compiles each pipeline on first use) */
    for (int t = 0; t <= SP_MAT_Q4; t++) test_matmul((sp_mtype)t, 37, 72, 1, true); /* the types the kernels decode */
    test_matmul(SP_MAT_F32, 70, 200, 3, true);
    test_matmul(SP_MAT_F32, 67, 168, 21, true);
    test_matmul(SP_MAT_Q4, 67, 164, 21, true);
    test_matmul(SP_MAT_Q8, 70, 200, 3, true);  /* the batched GEMV buckets (4, 16 rows) with partial groups */
    test_matmul(SP_MAT_Q4, 67, 168, 12, true);
    test_gemv_launches(SP_MAT_Q4, 67, 1088, 1);
    test_gemv_launches(SP_MAT_Q4, 67, 1088, 3);
    test_gemv_launches(SP_MAT_Q4, 67, 1088, 11);
    test_gemv_launches(SP_MAT_BF16, 45, 328, 11);
    test_x8_reuse(SP_MAT_Q4, 320, 2);
    test_x8_reuse(SP_MAT_Q8, 96, 1);
    test_norm_gemv(false, SP_MAT_Q4, 1, 1088);
    test_norm_gemv(true, SP_MAT_Q8, 3, 1024);
    if (!quick)
        for (int t = 1; t <= SP_MAT_Q4; t++) {
            test_matmul((sp_mtype)t, 70, 200, 3, true);
            test_matmul((sp_mtype)t, 67, 168, 12, true);
            test_matmul((sp_mtype)t, 67, 168, 21, true);
        }
    /* MLX's affine formats (mlx-lm checkpoints): whole groups of 64 per row, rows padded on the device (72, 136 bytes) */
    for (int t = SP_MAT_MLX4; t <= SP_MAT_MLX8; t++) {
        test_matmul((sp_mtype)t, 37, 128, 1, true);
        if (quick) continue;
        test_matmul((sp_mtype)t, 70, 192, 3, true);
        test_matmul((sp_mtype)t, 67, 256, 12, true);
        test_matmul((sp_mtype)t, 67, 256, 21, true);
    }
    /* the matrix units: partial tiles in rows, x rows and columns (a column step past cols, a partial group), a
     * whole-tile case (the direct store), every weight type they take */
    test_coop_tuning_file();
    test_gemv_tuning_file();
    test_gemm_coop(SP_MAT_Q4, 67, 168, 21);
    test_gemm_coop(SP_MAT_BF16, 256, 256, 128);
    /* cols % 8 == 4: the group of 8 columns the matrix ends inside */
    test_gemm_coop(SP_MAT_F16, 67, 164, 21);
    test_gemm_coop(SP_MAT_Q4, 130, 164, 150);
    test_gemm_coop(SP_MAT_Q4, 67, 84, 21); /* an odd number of q4 groups: the minimums' words 2 bytes off */
    test_gemm_coop(SP_MAT_Q4, 256, 256, 256); /* whole tiles of 256 rows of either operand */
    /* few tiles: the columns split, a shorter last split (whole steps; a partial step and group; an odd number of
     * q4 groups), and a decode batch of the 27B's o_proj */
    test_gemm_coop(SP_MAT_Q4, 300, 1088, 7);
    test_gemm_coop(SP_MAT_BF16, 1024, 2052, 16);
    test_gemm_coop(SP_MAT_Q4, 520, 1120, 5);
    test_gemm_coop(SP_MAT_Q4, 5120, 6144, 8);
    if (!quick)
        for (int t = SP_MAT_BF16; t <= SP_MAT_MLX8; t++) {
            test_gemm_coop((sp_mtype)t, 200, t >= SP_MAT_MLX4 ? 192 : 328, 77);
            test_gemm_coop((sp_mtype)t, 128, 256, 256);
        }
    test_gate_up(SP_MAT_Q4, 200, 320, 1);
    test_gate_up(SP_MAT_BF16, 130, 96, 3);
    test_gate_up(SP_MAT_F32, 64, 36, 16);
    test_gate_up(SP_MAT_MLX4, 70, 128, 4);
    test_gate_up(SP_MAT_Q8, 70, 96, 5);
    test_gate_up(SP_MAT_Q8, 50, 64, 20); /* more rows than a GEMV takes: the GEMMs */
    test_embed(SP_MAT_BF16, 300, 64, 7);
    test_embed(SP_MAT_F32, 50, 36, 3);
    test_embed(SP_MAT_MLX4, 300, 128, 7);
    test_embed(SP_MAT_MLX8, 50, 64, 3);
    test_elementwise(7, 100);
    test_norms(5, 24);
    test_norms(9, 300);
    test_rope(3, 4, 32, 8, false);
    test_rope(5, 3, 64, 16, true);
    test_attention_prep(3, 4, 2, 32, 8, false);
    test_attention_prep(5, 3, 1, 64, 16, true);
    test_attention_prep(2, 2, 1, 40, 40, false); /* rotating every dim */
    test_attention(SPLASH_KV_F32, 4, 1, 32, 0, 13, 16);     /* prefill */
    test_attention(SPLASH_KV_F32, 4, 2, 32, 37, 1, 16);     /* decode */
    test_attention(SPLASH_KV_F32, 4, 2, 32, 300, 1, 4);     /* decode, split over keys */
    test_attention(SPLASH_KV_F32, 4, 1, 32, 20, 4, 16);     /* verify block */
    if (!quick) test_attention(SPLASH_KV_F32, 40, 2, 16, 5, 3, 8); /* a group larger than a tile (20 heads per kv head) */
    test_attention(SPLASH_KV_F32, 4, 1, 32, 0, 40, 16);     /* a prefill chunk (the matrix units, where the device has them) */
    test_attention_step(SPLASH_KV_INT8);                    /* a step's sequences in one call */
    test_attention(SPLASH_KV_F32, 6, 2, 64, 37, 29, 16);    /* after a context, partial tiles of keys and query vectors */
    test_attention(SPLASH_KV_F16, 4, 2, 32, 37, 1, 16);     /* f16 KV: decode, split decode, verify, prefill chunks */
    test_attention(SPLASH_KV_F16, 4, 2, 32, 300, 1, 4);
    test_attention(SPLASH_KV_F16, 4, 1, 32, 20, 4, 16);
    test_attention(SPLASH_KV_F16, 6, 2, 64, 37, 29, 16);
    test_attention(SPLASH_KV_F16, 4, 1, 32, 0, 40, 16);
    test_attention(SPLASH_KV_INT8, 4, 2, 32, 37, 1, 16);    /* int8 KV: 34-byte rows (2-byte aligned), the same cases */
    test_attention(SPLASH_KV_INT8, 4, 2, 32, 300, 1, 4);
    test_attention(SPLASH_KV_INT8, 4, 1, 32, 20, 4, 16);
    test_attention(SPLASH_KV_INT8, 6, 2, 64, 37, 29, 16);
    test_attention(SPLASH_KV_INT8, 4, 1, 32, 0, 40, 16);
    test_attention(SPLASH_KV_INT8, 4, 1, 40, 5, 11, 4);     /* a partial last group (head_dim 40: 2 groups, 68 bytes) */
    test_attention(SPLASH_KV_INT8, 4, 1, 96, 3, 7, 2);      /* 3 groups, 102-byte rows, pages of 2 */
    test_kv_write_int8_edges();
    test_flash_choice();
    test_attention_ext(SPLASH_KV_F32, 4, 2, 32, 1, 36, 1, 37, 0, false, 0, 0, 16);  /* MTP: one row over its own pages from 1 */
    test_attention_ext(SPLASH_KV_F32, 4, 1, 64, 8, 50, 0, 50, 0, true, 0, 0, 16);   /* DFlash: context + bidirectional block */
    test_attention_ext(SPLASH_KV_F32, 6, 2, 32, 5, 70, 0, 70, 0, true, 1, 9, 8);    /* a sliding layer: causal block, window 9 */
    test_attention_ext(SPLASH_KV_F32, 4, 2, 32, 3, 4, 0, 4, 1, false, 0, 0, 4);     /* causal pages */
    test_attention_ext(SPLASH_KV_F16, 4, 1, 64, 8, 50, 0, 50, 0, true, 0, 0, 16);   /* f16 pages beside f32 block rows */
    test_attention_ext(SPLASH_KV_F16, 4, 2, 32, 3, 4, 0, 4, 1, false, 0, 0, 4);
    test_attention_ext(SPLASH_KV_INT8, 4, 1, 64, 8, 50, 0, 50, 0, true, 0, 0, 16);  /* int8 pages beside f32 block rows */
    test_attention_ext(SPLASH_KV_INT8, 4, 2, 32, 3, 4, 0, 4, 1, false, 0, 0, 4);    /* 2-byte aligned rows */
    test_attention_ext(SPLASH_KV_INT8, 6, 2, 32, 5, 70, 0, 70, 0, true, 1, 9, 8);
    test_block_conv(64, 2, 16);
    test_block_conv(48, 3, 8);
    test_conv(100, 4, 1, 5);
    test_conv(37, 3, 6, 1);
    test_gdn(2, 6, 32, 16, 70, false);
    test_gdn(1, 3, 24, 40, 9, false);
    for (int i = 0; i < 6; i++) test_gdn(2, 6, 32, 16, (int64_t[]){1, 63, 64, 65, 300, 1100}[i], true);
    test_gdn(1, 3, 24, 40, 9, true);
    test_gdn(2, 2, 128, 24, 130, true); /* the widest key head the chunked form takes */
    test_gdn_choice();
    test_gdn_core(1, 3, 24, 40, 4, 1, 3, true, 2);   /* fused (and the q/k tails): decode, then a verify block */
    test_gdn_core(2, 2, 16, 24, 3, 2, 1, false, 1);  /* fused, q/k tails its own, no norm (the speculative commit) */
    test_gdn_core(2, 6, 32, 16, 4, 1, 20, true, 3);  /* 2·dk + dv > 4·dv, and a prefill run: the separate kernels */
    test_gdn_core_int8(2, 8, 32, 128, 4, 3, (int64_t[]){1, 1, 1}); /* three streams' decode */
    test_gdn_core_int8(2, 8, 32, 128, 4, 2, (int64_t[]){1, 5});    /* a decode row and a verify block */
    test_moe(SP_MAT_F32, 8, 3, 64, 32, 1);
    test_moe(SP_MAT_F32, 8, 3, 64, 32, 9);
    if (!quick) test_moe(SP_MAT_Q4, 8, 3, 64, 32, 5);
    test_moe(SP_MAT_MLX4, 8, 3, 128, 64, 1);
    if (!quick) test_moe(SP_MAT_MLX8, 8, 3, 128, 64, 5);
    test_moe_chunks(quick);
    test_sample(1000);

    if (!quick) {
        /* the real shapes: Qwen3.8-27B (hidden 5120, 24/4 heads × 256, GDN 16/48 × 128, intermediate 17408) and
         * Qwen3.6-35B-A3B (hidden 2048, 16/2 heads, GDN 16/32 × 128, 256 experts top 8, moe 512); lavapipe is slow, so
         * the largest matrices run once, at batch 1 */
        test_matmul(SP_MAT_Q4, 17408, 5120, 1, false);
        test_matmul(SP_MAT_Q8, 5120, 6144, 1, false);
        test_matmul(SP_MAT_MLX4, 5120, 6144, 1, false);
        test_matmul(SP_MAT_MLX4, 2048, 2048, 24, false);
        test_matmul(SP_MAT_BF16, 10240, 5120, 1, false);
        test_matmul(SP_MAT_Q4, 5120, 17408, 2, false);
        test_gate_up(SP_MAT_Q4, 17408, 5120, 1);
        test_gate_up(SP_MAT_Q4, 17408, 5120, 4);
        test_matmul(SP_MAT_Q4, 5120, 6144, 16, false);
        test_matmul(SP_MAT_Q8, 5120, 6144, 4, false);
        test_matmul(SP_MAT_Q4, 2048, 2048, 24, false);
        /* prefill chunks on the matrix units (where the device has them): the 27B's gate at q4, its down at bf16 with
         * a partial x tile, the 35B's q at q8 */
        test_gemm_coop(SP_MAT_Q4, 17408, 5120, 512);
        test_gemm_coop(SP_MAT_BF16, 5120, 17408, 300);
        test_gemm_coop(SP_MAT_Q8, 8192, 2048, 1024);
        if (!sp_gpu_of(&gpu)->no_coopmat) test_matmul(SP_MAT_Q4, 12288, 5120, 1024, false);
        test_norms(2, 5120);
        test_norms(48, 128);
        test_rope(2, 24, 256, 64, false);
        test_attention_prep(1, 24, 4, 256, 64, false); /* the 27B's, a verify block of the 35B-A3B's */
        test_attention_prep(4, 16, 2, 256, 64, false);
        test_attention(SPLASH_KV_F32, 24, 4, 256, 0, 40, 16);
        test_attention(SPLASH_KV_F32, 24, 4, 256, 1200, 1, 16);
        test_attention(SPLASH_KV_F32, 16, 2, 256, 700, 4, 16);
        test_attention(SPLASH_KV_F32, 24, 4, 256, 1200, 100, 16); /* prefill chunks after a context */
        test_attention(SPLASH_KV_F32, 16, 2, 256, 333, 517, 64);
        test_attention(SPLASH_KV_F16, 24, 4, 256, 1200, 1, 16);
        test_attention(SPLASH_KV_F16, 24, 4, 256, 5000, 1, 64);  /* a split decode of many splits */
        test_attention(SPLASH_KV_F32, 24, 4, 256, 5000, 1, 64);
        test_attention(SPLASH_KV_F16, 24, 4, 256, 1200, 100, 16);
        test_attention(SPLASH_KV_INT8, 24, 4, 256, 1200, 1, 16);
        test_attention(SPLASH_KV_INT8, 24, 4, 256, 5000, 1, 64);
        test_attention(SPLASH_KV_INT8, 24, 4, 256, 1200, 100, 16); /* prefill chunks after a context */
        test_attention(SPLASH_KV_INT8, 16, 2, 256, 333, 517, 64);
        test_attention(SPLASH_KV_F16, 16, 2, 256, 333, 517, 64);
        test_attention_decode(false);
        test_conv(10240, 4, 1, 3);
        test_gdn(16, 48, 128, 128, 4, false);
        test_gdn(16, 32, 128, 128, 33, false);
        for (int i = 0; i < 6; i++) { /* the 27B's and the 35B-A3B's prefill chunks, whole and odd */
            int64_t n = (int64_t[]){1, 63, 64, 65, 300, 1024}[i];
            test_gdn(16, 48, 128, 128, n, true);
            test_gdn(16, 32, 128, 128, n, true);
        }
        test_gdn_core(16, 48, 128, 128, 4, 1, 1, true, 2); /* the 27B's and the 35B-A3B's decode */
        test_gdn_core(16, 32, 128, 128, 4, 1, 4, true, 2);
        test_gdn_core(16, 48, 128, 128, 4, 3, 30, true, 3);
        test_gdn_core_int8(16, 48, 128, 128, 4, 4, (int64_t[]){1, 1, 9, 1}); /* the 27B's: streams and a verify block */
        test_moe(SP_MAT_Q4, 32, 8, 2048, 512, 2); /* 256 experts would take 0.5 GB of test weights */
        test_sample(248320);
    }
done:
    printf("time: %.1f s\n", now() - t0);
    sp_vulkan_backend_destroy(&gpu);
    sp_threadpool_free(pool);
    return check_done("vulkan_ops_test");
}
