/* elementwise.c — residual adds and the SiLU / sigmoid gates (reference C; the gates in eight or sixteen lanes where
 * the CPU has AVX2 or AVX-512, elementwise_avx2.c / elementwise_avx512.c, with the same bits). */
#include "ops.h"

typedef struct {
    float *y;
    const float *x, *g;
    void (*silu_mul)(float *y, const float *g, const float *u, int64_t n);
    void (*sigmoid_mul)(float *y, const float *g, int64_t n);
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

/* down(act(gate(x)) * up(x)): y = silu(g) · u */
static void silu_mul_plain(float *y, const float *g, const float *u, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] = sp_silu(g[i]) * u[i];
}

static void sigmoid_mul_plain(float *y, const float *g, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] = y[i] * sp_sigmoid(g[i]);
}

static void silu_mul_range(void *ctx, int64_t b, int64_t e, int t) {
    const ew_args *a = ctx;
    a->silu_mul(a->y + b, a->g + b, a->x + b, e - b);
}

static void sigmoid_mul_range(void *ctx, int64_t b, int64_t e, int t) {
    const ew_args *a = ctx;
    a->sigmoid_mul(a->y + b, a->g + b, e - b);
}

/* The gates' form for this CPU. */
static ew_args gates(const sp_backend *be) {
    ew_args a = {.silu_mul = silu_mul_plain, .sigmoid_mul = sigmoid_mul_plain};
#if defined(__x86_64__)
    if (sp_backend_avx512(be)) a.silu_mul = sp_silu_mul_avx512, a.sigmoid_mul = sp_sigmoid_mul_avx512;
    else if (sp_backend_avx2(be)) a.silu_mul = sp_silu_mul_avx2, a.sigmoid_mul = sp_sigmoid_mul_avx2;
#endif
    return a;
}

void sp_cpu_add(const sp_backend *be, float *y, const float *x, int64_t n) {
    ew_args a = {.y = y, .x = x};
    run_blocks(be, n, add_range, &a);
}

void sp_cpu_silu_mul(const sp_backend *be, float *y, const float *g, const float *u, int64_t n) {
    ew_args a = gates(be);
    a.y = y, a.x = u, a.g = g;
    run_blocks(be, n, silu_mul_range, &a);
}

/* The CPU gains nothing from one pass: the two products and the gate as they are, so the results are theirs. */
void sp_cpu_matmul_gate_up(const sp_backend *be, float *h, float *u, const sp_matrix *gate, const sp_matrix *up,
                           const float *x, int64_t n) {
    sp_cpu_matmul(be, h, gate, x, n);
    sp_cpu_matmul(be, u, up, x, n);
    sp_cpu_silu_mul(be, h, h, u, n * gate->rows);
}

void sp_cpu_sigmoid_mul(const sp_backend *be, float *y, const float *g, int64_t n) {
    ew_args a = gates(be);
    a.y = y, a.g = g;
    run_blocks(be, n, sigmoid_mul_range, &a);
}
