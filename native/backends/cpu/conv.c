/* conv.c — the GDN's causal depthwise convolution with its carried tail, followed by SiLU (eight or sixteen channels
 * at a time where the CPU has AVX2 or AVX-512, conv_avx2.c / conv_avx512.c, with the same bits). */
#include "ops.h"

#include <string.h>

typedef struct {
    float *y;
    const float *x, *w;
    int64_t n, channels;
    int32_t kernel;
    float *tail;
    sp_conv_fn fast; /* whole blocks of `width` channels; NULL: the loop below for all */
    int64_t width;
} conv_args;

/* Channels are independent: each worker takes a channel range through all n rows. */
static void conv_channels(void *ctx, int64_t c0, int64_t c1, int thread) {
    const conv_args *a = ctx;
    if (a->fast) {
        int64_t whole = c0 + (c1 - c0) / a->width * a->width;
        a->fast(a->y, a->x, a->n, a->channels, a->w, a->kernel, a->tail, c0, whole);
        c0 = whole;
    }
    int32_t K = a->kernel;
    int64_t C = a->channels;
    for (int64_t c = c0; c < c1; c++) {
        const float *w = a->w + c * K;
        /* F.conv1d over xin = [tail (K−1 rows) ; x (n rows)]: out[t] = Σ_j w[j] · xin[t + j] */
        for (int64_t t = 0; t < a->n; t++) {
            float acc = 0;
            for (int32_t j = 0; j < K; j++) {
                int64_t r = t + j - (K - 1); /* row in x; negative rows come from the tail */
                float xv = r >= 0 ? a->x[r * C + c] : a->tail[(r + K - 1) * C + c];
                acc += w[j] * xv;
            }
            a->y[t * C + c] = sp_silu(acc);
        }
        /* new tail = the last K−1 rows of xin (raw, pre-conv values) */
        for (int32_t j = 0; j < K - 1; j++) {
            int64_t r = a->n + j - (K - 1);
            a->tail[j * C + c] = r >= 0 ? a->x[r * C + c] : a->tail[(r + K - 1) * C + c];
        }
    }
}

void sp_cpu_conv_silu(const sp_backend *be, float *y, const float *x, int64_t n, int64_t channels, const float *w,
                      int32_t kernel, float *tail) {
    conv_args a = {y, x, w, n, channels, kernel, tail, NULL, 0};
#if defined(__x86_64__)
    if (kernel <= SP_CONV_MAX_KERNEL && sp_backend_avx512(be)) a.fast = sp_conv_silu_avx512, a.width = 16;
    else if (kernel <= SP_CONV_MAX_KERNEL && sp_backend_avx2(be)) a.fast = sp_conv_silu_avx2, a.width = 8;
#endif
    if (n * channels < (1 << 14)) conv_channels(&a, 0, channels, 0);
    else sp_cpu_for(be, channels, conv_channels, &a);
}

/* DFlash2's convolution: a handful of rows per block, so one loop. Rows run last to first, so x_{t−o} is still the
 * input when row t reads it. */
void sp_cpu_block_conv(const sp_backend *be, float *x, const float *dyn, int64_t dyn_stride, const float *base, int64_t H,
                       int32_t K, int32_t G, const int64_t *row0, const int32_t *len, int32_t n_blocks) {
    (void)be;
    int64_t groups = H / G;
    for (int32_t b = 0; b < n_blocks; b++)
        for (int64_t t = len[b] - 1; t >= 0; t--) {
            float *y = x + (row0[b] + t) * H;
            const float *dt = dyn + (row0[b] + t) * dyn_stride;
            for (int64_t ch = 0; ch < H; ch++) {
                float acc = 0;
                for (int64_t o = 0; o < K && o <= t; o++) acc += (base[o * H + ch] + dt[o * groups + ch / G]) * y[ch - o * H];
                y[ch] = acc;
            }
        }
}
