/* elementwise.c — residual adds and the SiLU / sigmoid gates (reference C; the gates in eight lanes where the CPU has
 * AVX2, elementwise_avx2.c, with the same bits). */
#include "ops.h"

typedef struct {
    float *y;
    const float *x, *g;
    int64_t d;
    bool avx2;
} ew_args;

/* Elementwise work is split in blocks of this many floats, and not split at all below it. */
enum { EW_BLOCK = 1 << 14 };

static void run_blocks(const sp_backend *be, int64_t n, sp_range_fn fn, void *ctx) {
    if (n <= EW_BLOCK) fn(ctx, 0, n, 0);
    else sp_cpu_for(be, n, fn, ctx);
}

static void add_range(void *ctx, int64_t b, int64_t e, int t) {
    const ew_args *a = ctx;
    for (int64_t i = b; i < e; i++) a->y[i] += a->x[i];
}

static void silu_mul_range(void *ctx, int64_t b, int64_t e, int t) {
    const ew_args *a = ctx;
    /* down(act(gate(x)) * up(x)): here y = silu(g) · u with u in a->x */
#if defined(__x86_64__)
    if (a->avx2) {
        sp_silu_mul_avx2(a->y + b, a->g + b, a->x + b, e - b);
        return;
    }
#endif
    for (int64_t i = b; i < e; i++) a->y[i] = sp_silu(a->g[i]) * a->x[i];
}

static void sigmoid_mul_range(void *ctx, int64_t b, int64_t e, int t) {
    const ew_args *a = ctx;
#if defined(__x86_64__)
    if (a->avx2) {
        sp_sigmoid_mul_avx2(a->y + b, a->g + b, e - b);
        return;
    }
#endif
    for (int64_t i = b; i < e; i++) a->y[i] = a->y[i] * sp_sigmoid(a->g[i]);
}

static void add_sigmoid_scaled_rows(void *ctx, int64_t b, int64_t e, int t) {
    const ew_args *a = ctx;
    for (int64_t i = b; i < e; i++) {
        float s = sp_sigmoid(a->g[i]);
        for (int64_t j = 0; j < a->d; j++) a->y[i * a->d + j] += s * a->x[i * a->d + j];
    }
}

void sp_cpu_add(const sp_backend *be, float *y, const float *x, int64_t n) {
    ew_args a = {.y = y, .x = x};
    run_blocks(be, n, add_range, &a);
}

void sp_cpu_silu_mul(const sp_backend *be, float *y, const float *g, const float *u, int64_t n) {
    ew_args a = {.y = y, .x = u, .g = g, .avx2 = sp_backend_avx2(be)};
    run_blocks(be, n, silu_mul_range, &a);
}

void sp_cpu_sigmoid_mul(const sp_backend *be, float *y, const float *g, int64_t n) {
    ew_args a = {.y = y, .g = g, .avx2 = sp_backend_avx2(be)};
    run_blocks(be, n, sigmoid_mul_range, &a);
}

void sp_cpu_add_sigmoid_scaled(const sp_backend *be, float *y, const float *x, const float *g, int64_t n, int64_t d) {
    ew_args a = {.y = y, .x = x, .g = g, .d = d};
    add_sigmoid_scaled_rows(&a, 0, n, 0);
}
