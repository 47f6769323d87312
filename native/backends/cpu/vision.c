/* vision.c — the ops only the vision tower uses (reference C): LayerNorm with bias, GELU (tanh and erf forms), and a
 * bias row added to every row. Reductions run in double, as in norm.c, so a row sits within an ulp of torch's fp32. */
#include "ops.h"

typedef struct {
    float *y;
    const float *x, *w, *b;
    int64_t d;
    float eps;
    int32_t approx;
} vis_args;

/* torch.nn.LayerNorm: y = (x − mean) / sqrt(var + eps) · w + b, var biased, in fp32 */
static void layernorm_rows(void *ctx, int64_t begin, int64_t end, int thread) {
    const vis_args *a = ctx;
    for (int64_t i = begin; i < end; i++) {
        const float *x = a->x + i * a->d;
        float *y = a->y + i * a->d;
        double s = 0, ss = 0;
        for (int64_t j = 0; j < a->d; j++) s += x[j];
        float mean = (float)(s / (double)a->d);
        for (int64_t j = 0; j < a->d; j++) ss += (double)(x[j] - mean) * (x[j] - mean);
        float r = 1.0f / sqrtf((float)(ss / (double)a->d) + a->eps);
        for (int64_t j = 0; j < a->d; j++) y[j] = (x[j] - mean) * r * a->w[j] + a->b[j];
    }
}

/* tanh form (gelu_pytorch_tanh): 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³)));  erf form (nn.GELU): 0.5·x·(1 + erf(x/√2)) */
static void gelu_range(void *ctx, int64_t begin, int64_t end, int thread) {
    const vis_args *a = ctx;
    const float k = 0.7978845608028654f, r2 = 0.7071067811865476f;
    for (int64_t i = begin; i < end; i++) {
        float x = a->x[i];
        a->y[i] = a->approx ? 0.5f * x * (1.0f + tanhf(k * (x + 0.044715f * x * x * x))) : 0.5f * x * (1.0f + erff(x * r2));
    }
}

static void add_rows_range(void *ctx, int64_t begin, int64_t end, int thread) {
    const vis_args *a = ctx;
    for (int64_t i = begin; i < end; i++)
        for (int64_t j = 0; j < a->d; j++) a->y[i * a->d + j] += a->b[j];
}

/* Work below this many floats runs on the calling thread: the dispatch would cost more. */
enum { SPLIT_FLOATS = 1 << 15 };

static void run(const sp_backend *be, int64_t n, int64_t per_item, sp_range_fn fn, void *ctx) {
    if (n * per_item < SPLIT_FLOATS || n < 2) fn(ctx, 0, n, 0);
    else sp_cpu_for(be, n, fn, ctx);
}

void sp_cpu_layernorm(const sp_backend *be, float *y, const float *x, const float *w, const float *b, int64_t n,
                      int64_t d, float eps) {
    vis_args a = {.y = y, .x = x, .w = w, .b = b, .d = d, .eps = eps};
    run(be, n, d, layernorm_rows, &a);
}

void sp_cpu_gelu(const sp_backend *be, float *y, const float *x, int64_t n, int32_t approx_tanh) {
    vis_args a = {.y = y, .x = x, .approx = approx_tanh};
    run(be, n, 1, gelu_range, &a);
}

void sp_cpu_add_rows(const sp_backend *be, float *y, const float *b, int64_t n, int64_t d) {
    vis_args a = {.y = y, .b = b, .d = d};
    run(be, n, d, add_rows_range, &a);
}
