/* matmul_test — formats and kernels: f16/bf16 conversions, Q8/Q4 quantizers, the x quantizer of every ISA against the
 * scalar one (bit for bit), and sp_matmul of every type on every ISA this machine runs:
 *   - against a double-precision reference on the same (dequantized) operands, at odd and real-ish shapes;
 *   - exactly, where the arithmetic is exact (small integers);
 *   - bit-identical whatever the batch size, thread count or row view (batch invariance);
 *   - quantization error of Q8/Q4/MLX4/MLX8 against the f32 result, printed.
 * MLX4/MLX8 need columns in whole groups of 64: their shapes are rounded up (parity skips the others).
 * Run: build/debug/tests/matmul_test [--only ISA]   (--only: the shared checks plus one ISA's kernels) */
#include "backends/cpu/matmul.h"
#include "backends/cpu/matmul_kernels.h"
#include "check.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#if defined(__x86_64__)
#include <immintrin.h>
#endif

static uint64_t rng_state = 42;
static uint64_t next_u64(void) {
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
static float gauss(void) {
    double u = ((double)(next_u64() >> 11) + 0.5) * 0x1p-53, v = (double)(next_u64() >> 11) * 0x1p-53;
    return (float)(sqrt(-2 * log(u)) * cos(6.283185307179586 * v));
}

/* ---- conversions ------------------------------------------------------------------------------------------------ */

#if defined(__x86_64__)
__attribute__((target("f16c"))) static uint16_t hw_f32_to_f16(float f) { return (uint16_t)_cvtss_sh(f, 0); }
__attribute__((target("f16c"))) static float hw_f16_to_f32(uint16_t h) { return _cvtsh_ss(h); }
#endif

static void conversions(const sp_cpu *cpu) {
    bool ok = true;
    for (uint32_t h = 0; h < 65536; h++) {
        float f = sp_f16_to_f32((uint16_t)h);
        ok &= isnan(f) ? ((h & 0x7c00) == 0x7c00 && (h & 0x3ff)) : sp_f32_to_f16(f) == h;
    }
    CHECK(ok, "f16 -> f32 -> f16 is the identity on all 65536 non-NaN halves; NaN stays NaN");
    CHECK(sp_f32_to_f16(65519.0f) == 0x7bff && sp_f32_to_f16(65520.0f) == 0x7c00 && sp_f32_to_f16(0x1p-25f) == 0 &&
              sp_f32_to_f16(0x1.8p-25f) == 1 && sp_f32_to_f16(0x1p-24f) == 1 && sp_f32_to_f16(-0.0f) == 0x8000 &&
              sp_f32_to_f16(1.0f + 0x1p-11f) == 0x3c00 && sp_f32_to_f16(1.0f + 0x1.8p-10f) == 0x3c02,
          "f32 -> f16 edge cases: overflow, subnormal ties to even, -0, mantissa ties");
#if defined(__x86_64__)
    if (cpu->f16c) {
        bool same = true;
        uint32_t bad = 0;
        for (int i = 0; i < 2000000 && same; i++) {
            uint32_t u = (uint32_t)next_u64();
            if (i % 2) u = (u & 0x807fffff) | ((uint32_t)(100 + (next_u64() % 50)) << 23); /* f16's exponent range */
            float f;
            memcpy(&f, &u, 4);
            uint16_t a = sp_f32_to_f16(f), b = hw_f32_to_f16(f);
            same = a == b || (isnan(f) && (a & 0x7c00) == 0x7c00 && (a & 0x3ff));
            if (!same) bad = u;
        }
        for (uint32_t h = 0; h < 65536 && same; h++) {
            float a = sp_f16_to_f32((uint16_t)h), b = hw_f16_to_f32((uint16_t)h);
            same = memcmp(&a, &b, 4) == 0 || (isnan(a) && isnan(b));
        }
        CHECK(same, "f16 conversions agree with the F16C instructions (2M random floats, all halves)%s",
              same ? "" : " -- first mismatch printed below");
        if (!same) printf("        f32 bits 0x%08x\n", bad);
    }
#endif
    CHECK(sp_f32_to_bf16(1.0f) == 0x3f80 && sp_f32_to_bf16(1.0f + 0x1p-8f) == 0x3f80 &&
              sp_f32_to_bf16(1.0f + 0x1.8p-7f) == 0x3f82 && sp_f32_to_bf16(1.0f + 0x1p-7f) == 0x3f81 &&
              sp_bf16_to_f32(0x3f81) == 1.0f + 0x1p-7f && isnan(sp_bf16_to_f32(sp_f32_to_bf16(NAN))),
          "bf16 rounds to nearest even and widens exactly");
}

/* ---- quantizers ------------------------------------------------------------------------------------------------- */

static void quantizers(void) {
    const int64_t cols = 100; /* 4 groups, the last one partial */
    float x[100], back[100];
    for (int k = 0; k < cols; k++) x[k] = gauss() * 0.02f;
    x[5] = 0.2f; /* an outlier in group 0 */
    uint8_t q8[4 * 34], q4[4 * 20];
    CHECK(sp_mtype_row_bytes(SP_MAT_Q8, cols) == (int64_t)sizeof q8 && sp_mtype_row_bytes(SP_MAT_Q4, cols) == (int64_t)sizeof q4,
          "row bytes: q8 %lld, q4 %lld for 100 columns", (long long)sp_mtype_row_bytes(SP_MAT_Q8, cols),
          (long long)sp_mtype_row_bytes(SP_MAT_Q4, cols));
    sp_quantize_row_q8(x, cols, q8);
    sp_matrix m8 = {SP_MAT_Q8, 1, cols, q8, sizeof q8};
    sp_matrix_row_f32(&m8, 0, back);
    bool ok = true;
    for (int k = 0; k < cols; k++) {
        float amax = 0;
        for (int j = k / 32 * 32; j < (k / 32 + 1) * 32 && j < cols; j++) amax = fmaxf(amax, fabsf(x[j]));
        ok &= fabsf(back[k] - x[k]) <= amax / 127 * 0.5f * 1.01f + 1e-9f;
    }
    CHECK(ok, "q8 round trip: every weight within half a step (max|w|/254) of its group");
    sp_quantize_row_q4(x, cols, q4);
    sp_matrix m4 = {SP_MAT_Q4, 1, cols, q4, sizeof q4};
    sp_matrix_row_f32(&m4, 0, back);
    ok = true;
    for (int k = 0; k < cols; k++) {
        float lo = INFINITY, hi = -INFINITY;
        for (int j = k / 32 * 32; j < (k / 32 + 1) * 32 && j < cols; j++) lo = fminf(lo, x[j]), hi = fmaxf(hi, x[j]);
        ok &= fabsf(back[k] - x[k]) <= (hi - lo) / 15 * 0.5f * 1.01f + fabsf(lo) * 1e-3f + 1e-9f;
    }
    CHECK(ok, "q4 round trip: every weight within half a step ((max-min)/30) of its group");

    /* Integers that the formats hold exactly: q8 groups whose max is 127, q4 groups spanning 0..15. */
    float ints[64], ints4[64];
    for (int k = 0; k < 64; k++) ints[k] = (float)((int)(next_u64() % 255) - 127), ints4[k] = (float)(next_u64() % 16);
    ints[3] = 127, ints[40] = -127, ints4[0] = 0, ints4[1] = 15, ints4[33] = 0, ints4[34] = 15;
    uint8_t e8[2 * 34], e4[2 * 20];
    sp_quantize_row_q8(ints, 64, e8);
    sp_quantize_row_q4(ints4, 64, e4);
    sp_matrix x8 = {SP_MAT_Q8, 1, 64, e8, sizeof e8}, x4 = {SP_MAT_Q4, 1, 64, e4, sizeof e4};
    float b8[64], b4[64];
    sp_matrix_row_f32(&x8, 0, b8);
    sp_matrix_row_f32(&x4, 0, b4);
    CHECK(memcmp(b8, ints, sizeof b8) == 0 && memcmp(b4, ints4, sizeof b4) == 0, "integer weights survive q8 and q4 exactly");
}

/* The load-time quantizers (sp_matrix_from_tensor: AVX2 where the CPU has it) give the scalar reference's bits, from
 * f32, bf16 and f16 tensors: random rows of several scales (down to f16 subnormal scales, up to near f16's range),
 * and groups that are all zeros, hold −0 and +0 as extremes, an infinity, or a NaN (Q4 then takes the scalar path). */
static void quantizers_at_load(sp_threadpool *pool) {
    enum { ROWS = 40, COLS = 9 * 32 };
    static float x[ROWS * COLS];
    for (int r = 0; r < ROWS; r++) {
        float scale = r < 8 ? 1e-6f : r < 16 ? 0.02f : r < 24 ? 3.0f : r < 32 ? 2000.0f : 0.5f;
        for (int k = 0; k < COLS; k++) {
            float g = gauss();
            x[r * COLS + k] = scale * (r % 3 == 0 ? g * g * g : g); /* some rows heavy-tailed */
        }
    }
    float *e = x + 32 * COLS; /* edge cases, one group each */
    for (int k = 0; k < 32; k++) e[k] = 0.0f, e[32 + k] = k % 2 ? 0.0f : 0.5f, e[64 + k] = k % 2 ? -0.0f : 0.5f;
    e[96] = -0.0f, e[97] = 0.0f, e[128 + 5] = INFINITY, e[160 + 7] = -INFINITY, e[COLS + 9] = NAN, e[2 * COLS + 1] = -NAN;
    for (int k = 0; k < 32; k++) e[3 * COLS + k] = -1.0f - (float)k, e[3 * COLS + 40 + k] = k == 3 ? -0.0f : (float)k;
    static uint16_t bf[ROWS * COLS], hf[ROWS * COLS];
    static float xs[3][ROWS * COLS]; /* x as each dtype holds it */
    for (int i = 0; i < ROWS * COLS; i++) {
        bf[i] = sp_f32_to_bf16(x[i]), hf[i] = sp_f32_to_f16(x[i]);
        xs[0][i] = x[i], xs[1][i] = sp_bf16_to_f32(bf[i]), xs[2][i] = sp_f16_to_f32(hf[i]);
    }
    static const sp_dtype dtypes[3] = {SP_DTYPE_F32, SP_DTYPE_BF16, SP_DTYPE_F16};
    const void *data[3] = {x, bf, hf};
    for (int q = 0; q < 2; q++) {
        bool ok = true;
        for (int t = 0; t < 3; t++) {
            sp_tensor ten = {.name = "w", .dtype = dtypes[t], .ndim = 2, .shape = {ROWS, COLS}, .data = data[t],
                             .nbytes = (uint64_t)ROWS * COLS * (t ? 2 : 4), .file = "model.safetensors"};
            sp_matrix m;
            void *owned = NULL;
            ok &= sp_matrix_from_tensor(pool, &ten, q ? SP_QUANT_Q4 : SP_QUANT_Q8, &m, &owned) == SPLASH_OK;
            uint8_t expect[9 * 34];
            for (int r = 0; r < ROWS && ok; r++) {
                if (q) sp_quantize_row_q4(xs[t] + r * COLS, COLS, expect);
                else sp_quantize_row_q8(xs[t] + r * COLS, COLS, expect);
                ok &= memcmp(expect, (const uint8_t *)m.data + r * m.row_bytes, (size_t)m.row_bytes) == 0;
            }
            free(owned);
        }
        CHECK(ok, "%s at load (%s): the reference's bits from f32, bf16 and f16, 40 rows incl. zeros, ±0, ±inf, NaN",
              q ? "q4" : "q8", sp_threadpool_cpu(pool)->avx2 ? "AVX2" : "scalar");
    }
}

/* ---- the x quantizer: every ISA bit-identical to the reference --------------------------------------------------- */

static const sp_matmul_kernels *kernels_of(sp_isa isa) {
    switch (isa) {
#if defined(__x86_64__)
    case SP_ISA_AVX2: return &sp_matmul_kernels_avx2;
    case SP_ISA_AVXVNNI: return &sp_matmul_kernels_avxvnni;
    case SP_ISA_AVX512: return &sp_matmul_kernels_avx512;
#endif
#if defined(__aarch64__)
    case SP_ISA_NEON: return &sp_matmul_kernels_neon;
#endif
    default: return &sp_matmul_kernels_scalar;
    }
}

static void act_quantizer(sp_isa isa) {
    const int64_t sizes[] = {1, 31, 32, 33, 100, 5120};
    bool ok = true;
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        int64_t cols = sizes[i], nb = (cols + 31) / 32;
        float *x = malloc((size_t)cols * 4), *d1 = malloc((size_t)nb * 4), *d2 = malloc((size_t)nb * 4),
              *s1 = malloc((size_t)nb * 4), *s2 = malloc((size_t)nb * 4);
        int32_t *u1 = malloc((size_t)nb * 4), *u2 = malloc((size_t)nb * 4);
        int8_t *q1 = malloc((size_t)nb * 32), *q2 = malloc((size_t)nb * 32);
        for (int64_t k = 0; k < cols; k++) x[k] = gauss() * (k % 7 == 0 ? 10.0f : 1.0f);
        if (cols > 64) {
            for (int k = 32; k < 64; k++) x[k] = 0; /* an all-zero group */
            x[70] = NAN;                           /* garbage must stay defined, and identical */
            x[71] = INFINITY;
        }
        sp_quantize_act_ref(x, cols, q1, d1, s1, u1);
        sp_matmul_quantizer_of(kernels_of(isa))(x, cols, q2, d2, s2, u2);
        ok &= memcmp(q1, q2, (size_t)nb * 32) == 0 && memcmp(d1, d2, (size_t)nb * 4) == 0 &&
              memcmp(s1, s2, (size_t)nb * 4) == 0 && memcmp(u1, u2, (size_t)nb * 4) == 0;
        for (int64_t b = 0; b < nb; b++) {
            int32_t t = 0;
            for (int k = 0; k < 32; k++) t += q1[b * 32 + k];
            ok &= u1[b] == t;
        }
        free(x), free(d1), free(d2), free(s1), free(s2), free(u1), free(u2), free(q1), free(q2);
    }
    CHECK(ok, "%s: x quantizer bit-identical to the reference (tails, zero groups, NaN/Inf), group sums exact", sp_isa_name(isa));
}

/* ---- matmul ----------------------------------------------------------------------------------------------------- */

typedef struct mat {
    sp_matrix m;
    void *buf;
} mat;

/* A matrix of type t from f32 values w[rows][cols]. */
static mat make(sp_mtype t, const float *w, int64_t rows, int64_t cols) {
    mat r = {{t, rows, cols, NULL, sp_mtype_row_bytes(t, cols)}, NULL};
    r.buf = malloc((size_t)(rows * r.m.row_bytes) + 64);
    for (int64_t i = 0; i < rows; i++) {
        uint8_t *row = (uint8_t *)r.buf + i * r.m.row_bytes;
        const float *src = w + i * cols;
        for (int64_t k = 0; k < cols; k++) {
            if (t == SP_MAT_F32) ((float *)row)[k] = src[k];
            if (t == SP_MAT_BF16) ((uint16_t *)row)[k] = sp_f32_to_bf16(src[k]);
            if (t == SP_MAT_F16) ((uint16_t *)row)[k] = sp_f32_to_f16(src[k]);
        }
        if (t == SP_MAT_Q8) sp_quantize_row_q8(src, cols, row);
        if (t == SP_MAT_Q4) sp_quantize_row_q4(src, cols, row);
        if (sp_mtype_is_mlx(t)) sp_quantize_row_mlx(src, cols, t == SP_MAT_MLX4 ? 4 : 8, row);
    }
    r.m.data = r.buf;
    return r;
}

/* The double-precision result on the operands the kernel really multiplies: W as stored (dequantized), and for
 * Q8/Q4 the int8-quantized x. Also returns Σ|w·x| per output, the scale of rounding error. */
static void reference(const sp_matrix *W, const float *x, int64_t n, double *y, double *mag) {
    int64_t cols = W->cols, nb = (cols + 31) / 32;
    float *w = malloc((size_t)cols * 4), *xe = malloc((size_t)cols * 4);
    int8_t *q = malloc((size_t)nb * 32);
    float *d = malloc((size_t)nb * 4), *s = malloc((size_t)nb * 4);
    int32_t *sum = malloc((size_t)nb * 4);
    for (int64_t c = 0; c < n; c++) {
        if (W->type == SP_MAT_Q8 || W->type == SP_MAT_Q4) {
            sp_quantize_act_ref(x + c * cols, cols, q, d, s, sum);
            for (int64_t k = 0; k < cols; k++) xe[k] = (float)q[k] * d[k / 32];
        } else if (sp_mtype_is_mlx(W->type)) { /* groups of 64, element order (no split) */
            sp_quantize_act_mlx(x + c * cols, cols, false, q, d, s, sum);
            for (int64_t k = 0; k < cols; k++) xe[k] = (float)q[k] * d[k / 64];
        } else {
            memcpy(xe, x + c * cols, (size_t)cols * 4);
        }
        for (int64_t r = 0; r < W->rows; r++) {
            sp_matrix_row_f32(W, r, w);
            double acc = 0, a = 0;
            for (int64_t k = 0; k < cols; k++) acc += (double)w[k] * xe[k], a += fabs((double)w[k] * xe[k]);
            y[c * W->rows + r] = acc;
            mag[c * W->rows + r] = a;
        }
    }
    free(w), free(xe), free(q), free(d), free(s), free(sum);
}

static const sp_mtype types[] = {SP_MAT_F32, SP_MAT_BF16, SP_MAT_F16, SP_MAT_Q8, SP_MAT_Q4, SP_MAT_MLX4, SP_MAT_MLX8};

/* Columns for type t: MLX types take whole groups of 64. */
static int64_t cols_for(sp_mtype t, int64_t cols) { return sp_mtype_is_mlx(t) ? (cols + 63) / 64 * 64 : cols; }

static void parity(sp_threadpool *pool, sp_isa isa) {
    const int64_t shapes[][3] = {{1, 1, 1}, {5, 7, 3}, {13, 33, 2}, {17, 64, 5}, {64, 100, 4}, {37, 256, 9}, {130, 1000, 66}, {9, 5120, 2}};
    for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++) {
        sp_mtype t = types[ti];
        double worst = 0;
        bool ok = true;
        for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
            int64_t rows = shapes[si][0], cols = shapes[si][1], n = shapes[si][2];
            if (cols_for(t, cols) != cols) continue;
            float *w = malloc((size_t)(rows * cols) * 4), *x = malloc((size_t)(n * cols) * 4), *y = malloc((size_t)(n * rows) * 4);
            double *yr = malloc((size_t)(n * rows) * 8), *mag = malloc((size_t)(n * rows) * 8);
            for (int64_t i = 0; i < rows * cols; i++) w[i] = gauss() * 0.05f;
            for (int64_t i = 0; i < n * cols; i++) x[i] = gauss();
            mat W = make(t, w, rows, cols);
            splash_status st = sp_matmul_isa(pool, isa, y, &W.m, x, n);
            reference(&W.m, x, n, yr, mag);
            for (int64_t i = 0; i < n * rows; i++) {
                double err = fabs(y[i] - yr[i]) / (mag[i] + 1e-30);
                if (err > worst) worst = err;
            }
            ok &= st == SPLASH_OK;
            free(w), free(x), free(y), free(yr), free(mag), free(W.buf);
        }
        /* f32 accumulation over up to 5120 terms: error well under 1e-5 of Σ|w·x|. */
        CHECK(ok && worst < 1e-5, "%s %-4s vs float64 reference on the same operands, %s: max error %.2e of sum|w*x|",
              sp_isa_name(isa), sp_mtype_name(t), sp_mtype_is_mlx(t) ? "3 shapes" : "8 shapes", worst);
    }
}

/* Small integers: every product and partial sum is an exact f32, so every ISA must return exactly the integer. */
static void exact(sp_threadpool *pool, sp_isa isa) {
    const int64_t rows = 9, n = 5;
    for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++) {
        sp_mtype t = types[ti];
        const int64_t cols = cols_for(t, 96);
        float w[9 * 128], x[5 * 128], y[5 * 9];
        for (int64_t i = 0; i < rows * cols; i++) {
            if (t == SP_MAT_Q8) w[i] = (float)((int)(next_u64() % 255) - 127);
            else if (t == SP_MAT_Q4 || t == SP_MAT_MLX4) w[i] = (float)(next_u64() % 16);
            else if (t == SP_MAT_MLX8) w[i] = (float)(next_u64() % 256);
            else w[i] = (float)((int)(next_u64() % 9) - 4);
        }
        for (int64_t i = 0; i < n * cols; i++) x[i] = (float)((int)(next_u64() % 255) - 127);
        for (int64_t g = 0; g < rows * cols / 32; g++) { /* make each group's range exactly representable */
            if (t == SP_MAT_Q8) w[g * 32] = 127;
            if (t == SP_MAT_Q4 || t == SP_MAT_MLX4) w[g * 32] = 0, w[g * 32 + 1] = 15;
            if (t == SP_MAT_MLX8) w[g * 32] = 0, w[g * 32 + 1] = 255;
        }
        for (int64_t g = 0; g < n * cols / 32; g++) x[g * 32] = 127; /* x groups quantize with scale 1 */
        mat W = make(t, w, rows, cols);
        bool ok = sp_matmul_isa(pool, isa, y, &W.m, x, n) == SPLASH_OK;
        for (int64_t c = 0; c < n; c++)
            for (int64_t r = 0; r < rows; r++) {
                double e = 0;
                for (int64_t k = 0; k < cols; k++) e += (double)w[r * cols + k] * x[c * cols + k];
                ok &= y[c * rows + r] == (float)e;
            }
        CHECK(ok, "%s %-4s exact on small integers", sp_isa_name(isa), sp_mtype_name(t));
        free(W.buf);
    }
}

/* Row c of y must not depend on n, on the other rows of x, on the thread count, or on taking a row view of W. */
static void invariance(sp_isa isa, sp_threadpool *pools[], int n_pools) {
    const int64_t rows = 70, n = 67;
    for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++) {
        sp_mtype t = types[ti];
        const int64_t cols = cols_for(t, 300);
        float *w = malloc(rows * cols * 4), *x = malloc(n * cols * 4), *y = malloc(n * rows * 4), *y1 = malloc(rows * 4);
        for (int64_t i = 0; i < rows * cols; i++) w[i] = gauss() * 0.05f;
        for (int64_t i = 0; i < n * cols; i++) x[i] = gauss();
        mat W = make(t, w, rows, cols);
        bool ok = sp_matmul_isa(pools[0], isa, y, &W.m, x, n) == SPLASH_OK;
        for (int64_t c = 0; c < n && ok; c += 11) { /* alone */
            ok &= sp_matmul_isa(pools[0], isa, y1, &W.m, x + c * cols, 1) == SPLASH_OK;
            ok &= memcmp(y1, y + c * rows, rows * 4) == 0;
        }
        float *ys = malloc(17 * rows * 4);
        for (int64_t k = 2; k <= 17 && ok; k++) /* every small batch, as verify blocks and a few streams make */
            ok &= sp_matmul_isa(pools[0], isa, ys, &W.m, x + (n - k) * cols, k) == SPLASH_OK &&
                  memcmp(ys, y + (n - k) * rows, (size_t)(k * rows) * 4) == 0;
        free(ys);
        bool threads = true;
        for (int p = 1; p < n_pools; p++) {
            float *yp = malloc(n * rows * 4);
            threads &= sp_matmul_isa(pools[p], isa, yp, &W.m, x, n) == SPLASH_OK && memcmp(yp, y, n * rows * 4) == 0;
            free(yp);
        }
        sp_matrix view = sp_matrix_rows(&W.m, 13, 29);
        float *yv = malloc(3 * 29 * 4);
        bool views = sp_matmul_isa(pools[0], isa, yv, &view, x, 3) == SPLASH_OK;
        for (int64_t c = 0; c < 3; c++) views &= memcmp(yv + c * 29, y + c * rows + 13, 29 * 4) == 0;
        CHECK(ok && threads && views, "%s %-4s bit-identical alone vs batched (n=%lld, and n=2..17), on 1/2/3 threads, and through a row view",
              sp_isa_name(isa), sp_mtype_name(t), (long long)n);
        free(w), free(x), free(y), free(y1), free(yv), free(W.buf);
    }
}

/* Quantization error against the f32 product, for the record (asserted loosely). */
static void quant_error(sp_threadpool *pool, sp_isa isa) {
    const int64_t rows = 256, cols = 2048, n = 4;
    float *w = malloc(rows * cols * 4), *x = malloc(n * cols * 4), *yf = malloc(n * rows * 4), *yq = malloc(n * rows * 4);
    for (int64_t i = 0; i < rows * cols; i++) w[i] = gauss() * 0.02f;
    for (int64_t i = 0; i < n * cols; i++) x[i] = gauss();
    mat F = make(SP_MAT_F32, w, rows, cols);
    sp_matmul_isa(pool, isa, yf, &F.m, x, n);
    const sp_mtype qtypes[] = {SP_MAT_Q8, SP_MAT_Q4, SP_MAT_MLX8, SP_MAT_MLX4};
    for (int q = 0; q < 4; q++) {
        mat Q = make(qtypes[q], w, rows, cols);
        sp_matmul_isa(pool, isa, yq, &Q.m, x, n);
        double se = 0, sy = 0;
        for (int64_t i = 0; i < n * rows; i++) se += (double)(yq[i] - yf[i]) * (yq[i] - yf[i]), sy += (double)yf[i] * yf[i];
        double rel = sqrt(se / sy);
        bool four = qtypes[q] == SP_MAT_Q4 || qtypes[q] == SP_MAT_MLX4;
        CHECK(rel < (four ? 0.12 : 0.012), "%s %s output error vs f32 weights (Gaussian, 2048 cols): relative RMS %.4f",
              sp_isa_name(isa), sp_mtype_name(qtypes[q]), rel);
        free(Q.buf);
    }
    free(w), free(x), free(yf), free(yq), free(F.buf);
}

/* AVX-VNNI and AVX-512 run one per-lane arithmetic for Q8/Q4 (matmul_avxvnni.c), so they agree bit for bit. */
static void avxvnni_vs_avx512(sp_threadpool *pool, const sp_cpu *cpu) {
    if (!sp_isa_supported(SP_ISA_AVXVNNI, cpu) || !sp_isa_supported(SP_ISA_AVX512, cpu)) return;
    const int64_t rows = 37, cols = 300, ns[] = {1, 5, 20};
    bool ok = true;
    for (int t = 0; t < 2; t++) {
        float *w = malloc(rows * cols * 4), *x = malloc(20 * cols * 4), *y1 = malloc(20 * rows * 4), *y2 = malloc(20 * rows * 4);
        for (int64_t i = 0; i < rows * cols; i++) w[i] = gauss() * 0.05f;
        for (int64_t i = 0; i < 20 * cols; i++) x[i] = gauss();
        mat W = make(t ? SP_MAT_Q4 : SP_MAT_Q8, w, rows, cols);
        for (int k = 0; k < 3; k++)
            ok &= sp_matmul_isa(pool, SP_ISA_AVXVNNI, y1, &W.m, x, ns[k]) == SPLASH_OK &&
                  sp_matmul_isa(pool, SP_ISA_AVX512, y2, &W.m, x, ns[k]) == SPLASH_OK && memcmp(y1, y2, (size_t)(ns[k] * rows) * 4) == 0;
        free(w), free(x), free(y1), free(y2), free(W.buf);
    }
    CHECK(ok, "avxvnni and avx512: q8 and q4 bit-identical (n = 1, 5, 20)");
}

static void from_tensor(sp_threadpool *pool) {
    /* A [2, 3, 40] bf16 tensor, as a fused MoE weight would be: 6 rows of 40. */
    uint16_t data[240];
    float ref[240];
    for (int i = 0; i < 240; i++) data[i] = sp_f32_to_bf16(gauss() * 0.1f), ref[i] = sp_bf16_to_f32(data[i]);
    sp_tensor t = {.name = "experts.gate_up_proj", .dtype = SP_DTYPE_BF16, .ndim = 3, .shape = {2, 3, 40}, .data = data,
                   .nbytes = sizeof data, .file = "model.safetensors"};
    sp_matrix m;
    void *owned = (void *)1;
    CHECK(sp_matrix_from_tensor(pool, &t, SP_QUANT_NONE, &m, &owned) == SPLASH_OK && m.data == data && owned == NULL &&
              m.type == SP_MAT_BF16 && m.rows == 6 && m.cols == 40 && m.row_bytes == 80,
          "bf16 [2, 3, 40] as stored: zero-copy 6 x 40 matrix");
    bool ok = true;
    for (int q = 0; q < 2; q++) {
        sp_mtype mt = q ? SP_MAT_Q4 : SP_MAT_Q8;
        ok &= sp_matrix_from_tensor(pool, &t, q ? SP_QUANT_Q4 : SP_QUANT_Q8, &m, &owned) == SPLASH_OK && owned && m.type == mt;
        uint8_t expect[2 * 34];
        for (int r = 0; r < 6 && ok; r++) {
            if (mt == SP_MAT_Q8) sp_quantize_row_q8(ref + r * 40, 40, expect);
            else sp_quantize_row_q4(ref + r * 40, 40, expect);
            ok &= memcmp(expect, (const uint8_t *)m.data + r * m.row_bytes, (size_t)m.row_bytes) == 0;
        }
        ok &= (uintptr_t)m.data % 64 == 0;
        free(owned);
    }
    CHECK(ok, "quantized at load to q8 and q4: each row equals the row quantizer's output, buffer 64-byte aligned");
    t.dtype = SP_DTYPE_I32;
    t.nbytes = 480;
    CHECK(sp_matrix_from_tensor(pool, &t, SP_QUANT_NONE, &m, &owned) == SPLASH_ERR_UNSUPPORTED &&
              strstr(splash_last_error(), "tensor experts.gate_up_proj in model.safetensors: dtype I32"),
          "an I32 tensor is refused: %s", splash_last_error());
    sp_matrix bad = {(sp_mtype)9, 1, 1, data, 4};
    float y;
    CHECK(sp_matmul(pool, &y, &bad, ref, 1) == SPLASH_ERR_INVALID_ARGUMENT, "a bad matrix type is refused: %s", splash_last_error());
}

int main(int argc, char **argv) {
    const char *only = argc == 3 && strcmp(argv[1], "--only") == 0 ? argv[2] : NULL;
    sp_cpu cpu;
    sp_cpu_detect(&cpu);
    sp_threadpool *pools[3];
    for (int i = 0; i < 3; i++)
        if (sp_threadpool_create(i + 1, &pools[i]) != SPLASH_OK) return 2;
    printf("cpu: %s; best ISA %s\n", splash_cpu_features(), sp_isa_name(sp_isa_best(&cpu)));
    conversions(&cpu);
    quantizers();
    from_tensor(pools[1]);
    quantizers_at_load(pools[1]);
    for (int i = 0; i < SP_ISA_COUNT; i++) {
        sp_isa isa = (sp_isa)i;
        if (only && strcmp(only, sp_isa_name(isa)) != 0) continue;
        if (!sp_isa_supported(isa, &cpu)) {
            float y;
            sp_matrix m = {SP_MAT_F32, 1, 1, &y, 4};
            bool refused = sp_matmul_isa(pools[1], isa, &y, &m, &y, 1) == SPLASH_ERR_UNSUPPORTED;
            CHECK(refused, "%s: not available here, and refused with SPLASH_ERR_UNSUPPORTED", sp_isa_name(isa));
            continue;
        }
        act_quantizer(isa);
        parity(pools[1], isa);
        exact(pools[2], isa);
        invariance(isa, pools, 3);
        quant_error(pools[1], isa);
    }
    if (!only) avxvnni_vs_avx512(pools[1], &cpu);
    for (int i = 0; i < 3; i++) sp_threadpool_free(pools[i]);
    return check_done("matmul_test");
}
