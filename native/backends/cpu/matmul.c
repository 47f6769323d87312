/* matmul.c — the driver (ISA choice, quantizing x, splitting rows over threads) and the scalar reference kernels:
 * plain loops that define the results the SIMD kernels must match, and the fallback on CPUs without them. */
#include "matmul.h"

#include "core/error.h"
#include "matmul_kernels.h"

#include <math.h>
#include <stdlib.h>

/* ---- scalar reference kernels --------------------------------------------------------------------------------- */

static float widen(sp_mtype t, const uint8_t *row, int64_t k) {
    switch (t) {
    case SP_MAT_F32: return ((const float *)row)[k];
    case SP_MAT_BF16: return sp_bf16_to_f32(((const uint16_t *)row)[k]);
    default: return sp_f16_to_f32(((const uint16_t *)row)[k]);
    }
}

/* F32/BF16/F16: eight interleaved partial sums (so the compiler can keep them in vector lanes), then summed in order. */
static void rows_float(const sp_matrix *W, const sp_act *x, float *y, int64_t r0, int64_t r1) {
    int64_t cols = W->cols;
    for (int64_t r = r0; r < r1; r++) {
        const uint8_t *row = (const uint8_t *)W->data + r * W->row_bytes;
        for (int64_t c = 0; c < x->n; c++) {
            const float *xr = x->f + c * cols;
            float acc[8] = {0};
            int64_t k = 0;
            for (; k + 8 <= cols; k += 8)
                for (int l = 0; l < 8; l++) acc[l] += widen(W->type, row, k + l) * xr[k + l];
            float s = ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
            for (; k < cols; k++) s += widen(W->type, row, k) * xr[k];
            y[c * W->rows + r] = s;
        }
    }
}

static void rows_q8(const sp_matrix *W, const sp_act *x, float *y, int64_t r0, int64_t r1) {
    int64_t nb = x->nb;
    for (int64_t r = r0; r < r1; r++) {
        const int8_t *wq = (const int8_t *)W->data + r * W->row_bytes;
        const uint16_t *wd = (const uint16_t *)(wq + nb * SP_QK);
        for (int64_t c = 0; c < x->n; c++) {
            const int8_t *xq = x->q + c * nb * SP_QK;
            const float *xd = x->d + c * nb;
            float s = 0;
            for (int64_t b = 0; b < nb; b++) {
                int32_t dot = 0;
                for (int j = 0; j < SP_QK; j++) dot += wq[b * SP_QK + j] * xq[b * SP_QK + j];
                s += (float)dot * (sp_f16_to_f32(wd[b]) * xd[b]);
            }
            y[c * W->rows + r] = s;
        }
    }
}

static void rows_q4(const sp_matrix *W, const sp_act *x, float *y, int64_t r0, int64_t r1) {
    int64_t nb = x->nb;
    for (int64_t r = r0; r < r1; r++) {
        const uint8_t *qs = (const uint8_t *)W->data + r * W->row_bytes;
        const uint16_t *wd = (const uint16_t *)(qs + (nb + 1) / 2 * SP_QK), *wm = wd + nb;
        for (int64_t c = 0; c < x->n; c++) {
            const int8_t *xq = x->q + c * nb * SP_QK;
            const float *xd = x->d + c * nb, *xs = x->s + c * nb;
            float s = 0, offset = 0;
            for (int64_t b = 0; b < nb; b++) {
                const uint8_t *chunk = qs + b / 2 * SP_QK;
                int shift = b % 2 ? 4 : 0;
                int32_t dot = 0;
                for (int j = 0; j < SP_QK; j++) dot += ((chunk[j] >> shift) & 15) * xq[b * SP_QK + j];
                s += (float)dot * (sp_f16_to_f32(wd[b]) * xd[b]);
                offset += sp_f16_to_f32(wm[b]) * xs[b];
            }
            y[c * W->rows + r] = s + offset;
        }
    }
}

/* MLX4/MLX8: per group of 64, the exact integer Σ q_w·q_x scaled by scale·d_x, plus bias·(d_x·Σq_x) for the offset.
 * For MLX4 the x group is stored [even elements | odd elements] (sp_quantize_act_mlx), so byte j of the weights
 * (elements 2j and 2j+1) meets x values j and 32 + j. */
static void rows_mlx(const sp_matrix *W, const sp_act *x, float *y, int64_t r0, int64_t r1) {
    int64_t nb = x->nb, qbytes = W->type == SP_MAT_MLX4 ? W->cols / 2 : W->cols;
    for (int64_t r = r0; r < r1; r++) {
        const uint8_t *wq = (const uint8_t *)W->data + r * W->row_bytes;
        const uint16_t *sc = (const uint16_t *)(wq + qbytes), *bi = sc + nb;
        for (int64_t c = 0; c < x->n; c++) {
            const int8_t *xq = x->q + c * nb * SP_QK_MLX;
            const float *xd = x->d + c * nb, *xs = x->s + c * nb;
            float s = 0, offset = 0;
            for (int64_t b = 0; b < nb; b++) {
                const int8_t *xg = xq + b * SP_QK_MLX;
                int32_t dot = 0;
                if (W->type == SP_MAT_MLX4) {
                    const uint8_t *g = wq + b * SP_QK_MLX / 2;
                    for (int j = 0; j < SP_QK_MLX / 2; j++) dot += (g[j] & 15) * xg[j] + (g[j] >> 4) * xg[SP_QK_MLX / 2 + j];
                } else {
                    const uint8_t *g = wq + b * SP_QK_MLX;
                    for (int j = 0; j < SP_QK_MLX; j++) dot += g[j] * xg[j];
                }
                s += (float)dot * (sp_bf16_to_f32(sc[b]) * xd[b]);
                offset += sp_bf16_to_f32(bi[b]) * xs[b];
            }
            y[c * W->rows + r] = s + offset;
        }
    }
}

void sp_quantize_act_mlx(const float *x, int64_t cols, bool split, int8_t *q, float *d, float *s, int32_t *sum_out) {
    enum { G = SP_QK_MLX };
    for (int64_t b = 0; b < cols / G; b++) {
        const float *g = x + b * G;
        float amax = 0;
        for (int k = 0; k < G; k++) amax = fmaxf(amax, fabsf(g[k]));
        float inv = amax > 0 ? 127.0f / amax : 0.0f;
        int32_t sum = 0;
        for (int k = 0; k < G; k++) {
            int8_t v = (int8_t)lrintf(fminf(fmaxf(g[k] * inv, -127.0f), 127.0f));
            q[b * G + (split ? (k % 2) * (G / 2) + k / 2 : k)] = v;
            sum += v;
        }
        d[b] = amax / 127.0f;
        s[b] = d[b] * (float)sum;
        sum_out[b] = sum;
    }
}

void sp_quantize_act_ref(const float *x, int64_t cols, int8_t *q, float *d, float *s, int32_t *sum_out) {
    int64_t nb = (cols + SP_QK - 1) / SP_QK;
    for (int64_t b = 0; b < nb; b++) {
        int64_t k0 = b * SP_QK, k1 = k0 + SP_QK < cols ? k0 + SP_QK : cols;
        float amax = 0;
        for (int64_t k = k0; k < k1; k++) amax = fmaxf(amax, fabsf(x[k]));
        float inv = amax > 0 ? 127.0f / amax : 0.0f;
        int32_t sum = 0;
        for (int64_t k = k0; k < k0 + SP_QK; k++) {
            /* The clamp also maps NaN to a bound, so garbage in stays defined behaviour. */
            int8_t v = k < k1 ? (int8_t)lrintf(fminf(fmaxf(x[k] * inv, -127.0f), 127.0f)) : 0;
            q[k] = v;
            sum += v;
        }
        d[b] = amax / 127.0f;
        s[b] = d[b] * (float)sum;
        sum_out[b] = sum;
    }
}

const sp_matmul_kernels sp_matmul_kernels_scalar = {
    .rows = {[SP_MAT_F32] = rows_float, [SP_MAT_BF16] = rows_float, [SP_MAT_F16] = rows_float, [SP_MAT_Q8] = rows_q8,
             [SP_MAT_Q4] = rows_q4, [SP_MAT_MLX4] = rows_mlx, [SP_MAT_MLX8] = rows_mlx},
    .quantize_act = sp_quantize_act_ref,
    .row_unit = 4,
};

/* ---- driver --------------------------------------------------------------------------------------------------- */

const char *sp_isa_name(sp_isa isa) {
    static const char *const names[SP_ISA_COUNT] = {"scalar", "avx2", "avxvnni", "avx512", "neon"};
    return (unsigned)isa < SP_ISA_COUNT ? names[isa] : "?";
}

static const sp_matmul_kernels *kernels(sp_isa isa) {
    switch (isa) {
    case SP_ISA_SCALAR: return &sp_matmul_kernels_scalar;
#if defined(__x86_64__)
    case SP_ISA_AVX2: return &sp_matmul_kernels_avx2;
    case SP_ISA_AVXVNNI: return &sp_matmul_kernels_avxvnni;
    case SP_ISA_AVX512: return &sp_matmul_kernels_avx512;
#endif
#if defined(__aarch64__)
    case SP_ISA_NEON: return &sp_matmul_kernels_neon;
#endif
    default: return NULL;
    }
}

bool sp_isa_supported(sp_isa isa, const sp_cpu *cpu) {
    if (!kernels(isa)) return false;
    switch (isa) {
    case SP_ISA_SCALAR: return true;
    case SP_ISA_AVX2: return sp_cpu_avx2(cpu);
    case SP_ISA_AVXVNNI: return sp_cpu_avxvnni(cpu);
    case SP_ISA_AVX512: return sp_cpu_avx512(cpu);
    case SP_ISA_NEON: return cpu->neon && cpu->dotprod;
    default: return false;
    }
}

sp_isa sp_isa_best(const sp_cpu *cpu) {
    if (sp_isa_supported(SP_ISA_AVX512, cpu)) return SP_ISA_AVX512;
    if (sp_isa_supported(SP_ISA_AVXVNNI, cpu)) return SP_ISA_AVXVNNI;
    if (sp_isa_supported(SP_ISA_AVX2, cpu)) return SP_ISA_AVX2;
    if (sp_isa_supported(SP_ISA_NEON, cpu)) return SP_ISA_NEON;
    return SP_ISA_SCALAR;
}

/* Rows go to threads in units of the kernels' tile height, so they see whole tiles except at the matrix's end; x rows
 * are taken in blocks of about X_BLOCK_BYTES (at least 64 rows) while a thread's weight rows stream past them. Kernels
 * that repack their weights (AVX-VNNI, AVX-512) do it once per block, so blocks beyond L2 pay (measured: the CPU
 * section of BENCHMARKS.md); a small model's whole prefill chunk is one block. */
enum { X_BLOCK_BYTES = 1280 << 10, X_BLOCK_MIN = 64 };

typedef struct matmul_job {
    sp_matmul_rows_fn fn;
    const sp_matrix *W;
    const sp_act *x;
    float *y;
    int64_t unit;
} matmul_job;

static void run_rows(void *ctx, int64_t u0, int64_t u1, int thread) {
    const matmul_job *j = ctx;
    int64_t r0 = u0 * j->unit, r1 = u1 * j->unit < j->W->rows ? u1 * j->unit : j->W->rows;
    const sp_act *x = j->x;
    const int64_t row_bytes = x->q ? x->nb * x->group : x->cols * (int64_t)sizeof(float);
    const int64_t block = X_BLOCK_BYTES / row_bytes > X_BLOCK_MIN ? X_BLOCK_BYTES / row_bytes : X_BLOCK_MIN;
    for (int64_t c0 = 0; c0 < x->n; c0 += block) {
        int64_t nc = x->n - c0 < block ? x->n - c0 : block;
        sp_act blk = {.n = nc, .cols = x->cols, .nb = x->nb, .group = x->group, .f = x->f ? x->f + c0 * x->cols : NULL};
        if (x->q) {
            blk.q = x->q + c0 * x->nb * x->group;
            blk.d = x->d + c0 * x->nb;
            blk.s = x->s + c0 * x->nb;
            blk.sum = x->sum + c0 * x->nb;
        }
        j->fn(j->W, &blk, j->y + c0 * j->W->rows, r0, r1);
    }
}

typedef struct quantize_job {
    sp_quantize_act_fn fn;
    const float *x;
    sp_act *a;
    sp_mtype type;
} quantize_job;

static void quantize_x(void *ctx, int64_t c0, int64_t c1, int thread) {
    const quantize_job *j = ctx;
    const sp_act *a = j->a;
    for (int64_t c = c0; c < c1; c++) {
        int8_t *q = (int8_t *)a->q + c * a->nb * a->group;
        float *d = (float *)a->d + c * a->nb, *s = (float *)a->s + c * a->nb;
        int32_t *sum = (int32_t *)a->sum + c * a->nb;
        if (sp_mtype_is_mlx(j->type)) sp_quantize_act_mlx(j->x + c * a->cols, a->cols, j->type == SP_MAT_MLX4, q, d, s, sum);
        else j->fn(j->x + c * a->cols, a->cols, q, d, s, sum);
    }
}

splash_status sp_matmul_isa(sp_threadpool *pool, sp_isa isa, float *y, const sp_matrix *W, const float *x, int64_t n) {
    if (!W || (unsigned)W->type >= SP_MAT_TYPE_COUNT || n < 0 || W->rows < 0 || W->cols <= 0 ||
        sp_mtype_row_bytes(W->type, W->cols) == 0 || W->row_bytes < sp_mtype_row_bytes(W->type, W->cols))
        return SP_FAIL(SPLASH_ERR_INVALID_ARGUMENT, "matmul: bad matrix (type %d, %lld x %lld, row_bytes %lld) or n %lld",
                       W ? (int)W->type : -1, W ? (long long)W->rows : 0, W ? (long long)W->cols : 0,
                       W ? (long long)W->row_bytes : 0, (long long)n);
    sp_cpu detected;
    const sp_cpu *cpu = pool ? sp_threadpool_cpu(pool) : (sp_cpu_detect(&detected), &detected);
    if (!sp_isa_supported(isa, cpu))
        return SP_FAIL(SPLASH_ERR_UNSUPPORTED, "matmul: ISA %s is not available in this build or on this CPU", sp_isa_name(isa));
    if (n == 0 || W->rows == 0) return SPLASH_OK;
    const sp_matmul_kernels *k = kernels(isa);
    int64_t group = sp_mtype_is_mlx(W->type) ? SP_QK_MLX : SP_QK;
    sp_act a = {.n = n, .cols = W->cols, .nb = (W->cols + group - 1) / group, .group = group, .f = x};
    void *buf = NULL;
    if (W->type == SP_MAT_Q8 || W->type == SP_MAT_Q4 || sp_mtype_is_mlx(W->type)) {
        size_t groups = (size_t)(n * a.nb), bytes = groups * (size_t)group + 3 * groups * sizeof(float);
        if (!(buf = aligned_alloc(64, (bytes + 63) & ~(size_t)63)))
            return SP_FAIL(SPLASH_ERR_OUT_OF_MEMORY, "matmul: cannot allocate %zu bytes for quantized input", bytes);
        a.q = buf;
        a.d = (const float *)((int8_t *)buf + groups * (size_t)group);
        a.s = a.d + groups;
        a.sum = (const int32_t *)(a.s + groups);
        a.f = NULL;
        quantize_job qj = {.fn = sp_matmul_quantizer_of(k), .x = x, .a = &a, .type = W->type};
        sp_parallel_for(n >= 2 * sp_threadpool_size(pool) ? pool : NULL, n, quantize_x, &qj);
    }
    matmul_job job = {.fn = sp_matmul_rows_of(k, W->type), .W = W, .x = &a, .y = y, .unit = k->row_unit};
    sp_parallel_for(pool, (W->rows + job.unit - 1) / job.unit, run_rows, &job);
    free(buf);
    return SPLASH_OK;
}

splash_status sp_matmul(sp_threadpool *pool, float *y, const sp_matrix *W, const float *x, int64_t n) {
    sp_cpu detected;
    const sp_cpu *cpu = pool ? sp_threadpool_cpu(pool) : (sp_cpu_detect(&detected), &detected);
    return sp_matmul_isa(pool, sp_isa_best(cpu), y, W, x, n);
}
