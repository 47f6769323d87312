/* norm.c — RMSNorm and the gated RMSNorm of the GDN output (reference C; the reductions are in double so the result
 * sits within an ulp of torch's fp32 pairwise sum for any row length). norm_avx2.c / norm_avx512.c have them in vector lanes. */
#include "ops.h"

typedef struct {
    float *y;
    const float *x, *z, *w;
    int64_t d;
    float eps;
    sp_norm_rows_fn fast; /* NULL: the loops below */
} norm_args;

static float inv_rms(const float *x, int64_t d, float eps) {
    double ss = 0;
    for (int64_t j = 0; j < d; j++) ss += (double)x[j] * x[j];
    /* torch: rsqrt(mean(x²) + eps) in fp32 */
    float var = (float)(ss / (double)d);
    return 1.0f / sqrtf(var + eps);
}

/* y = x̂ · w */
static void rmsnorm_rows(void *ctx, int64_t begin, int64_t end, int thread) {
    const norm_args *a = ctx;
    if (a->fast) {
        a->fast(a->y + begin * a->d, a->x + begin * a->d, NULL, a->w, end - begin, a->d, a->eps);
        return;
    }
    for (int64_t i = begin; i < end; i++) {
        const float *x = a->x + i * a->d;
        float *y = a->y + i * a->d;
        float r = inv_rms(x, a->d, a->eps);
        for (int64_t j = 0; j < a->d; j++) y[j] = (x[j] * r) * a->w[j];
    }
}

/* y = w · x̂ · silu(z) */
static void rmsnorm_gated_rows(void *ctx, int64_t begin, int64_t end, int thread) {
    const norm_args *a = ctx;
    if (a->fast) {
        a->fast(a->y + begin * a->d, a->x + begin * a->d, a->z + begin * a->d, a->w, end - begin, a->d, a->eps);
        return;
    }
    for (int64_t i = begin; i < end; i++) {
        const float *x = a->x + i * a->d, *z = a->z + i * a->d;
        float *y = a->y + i * a->d;
        float r = inv_rms(x, a->d, a->eps);
        for (int64_t j = 0; j < a->d; j++) y[j] = a->w[j] * (x[j] * r) * sp_silu(z[j]);
    }
}

static sp_norm_rows_fn fast_rows(const sp_backend *be) {
#if defined(__x86_64__)
    if (sp_backend_avx512(be)) return sp_rmsnorm_rows_avx512;
    if (sp_backend_avx2(be)) return sp_rmsnorm_rows_avx2;
#endif
    return NULL;
}

/* Rows are split over workers only when there is enough work to repay the dispatch. */
static void run_rows(const sp_backend *be, int64_t n, int64_t d, sp_range_fn fn, void *ctx) {
    if (n * d < (1 << 15) || n < 2) fn(ctx, 0, n, 0);
    else sp_cpu_for(be, n, fn, ctx);
}

void sp_cpu_rmsnorm(const sp_backend *be, float *y, const float *x, const float *w, int64_t n, int64_t d, float eps) {
    norm_args a = {.y = y, .x = x, .w = w, .d = d, .eps = eps, .fast = fast_rows(be)};
    run_rows(be, n, d, rmsnorm_rows, &a);
}

/* The CPU gains nothing from fusing the two passes: the ops as they are, so the results are theirs. */
void sp_cpu_add_rmsnorm(const sp_backend *be, float *y, float *x, const float *r, const float *w, int64_t n, int64_t d,
                        float eps) {
    sp_cpu_add(be, x, r, n * d);
    sp_cpu_rmsnorm(be, y, x, w, n, d, eps);
}

void sp_cpu_rmsnorm_gated(const sp_backend *be, float *y, const float *x, const float *z, const float *w, int64_t n,
                          int64_t d, float eps) {
    norm_args a = {.y = y, .x = x, .z = z, .w = w, .d = d, .eps = eps, .fast = fast_rows(be)};
    run_rows(be, n, d, rmsnorm_gated_rows, &a);
}
