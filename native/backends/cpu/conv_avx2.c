/* conv_avx2.c — conv.c's causal depthwise convolution + SiLU for eight channels at a time: each output is the same
 * sum in the same order (acc = 0, then acc + w[j]·x for each tap j, no fused multiply-add) and the same SiLU
 * (exp_avx2.h), so the bits are conv.c's. */
#include "ops.h"

#include "exp_avx2.h"

void sp_conv_silu_avx2(float *y, const float *x, int64_t n, int64_t channels, const float *w, int32_t kernel, float *tail,
                       int64_t c0, int64_t c1) {
    const int64_t C = channels;
    const int32_t K = kernel;
    for (int64_t c = c0; c < c1; c += 8) {
        __m256 wv[SP_CONV_MAX_KERNEL];
        const __m256i taps = _mm256_mullo_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7), _mm256_set1_epi32(K));
        for (int32_t j = 0; j < K; j++) wv[j] = _mm256_i32gather_ps(w + c * K + j, taps, 4); /* tap j of 8 channels */
        for (int64_t t = 0; t < n; t++) {
            __m256 acc = _mm256_setzero_ps();
            for (int32_t j = 0; j < K; j++) {
                int64_t r = t + j - (K - 1); /* row in x; negative rows come from the tail */
                const float *src = r >= 0 ? x + r * C : tail + (r + K - 1) * C;
                acc = _mm256_add_ps(acc, _mm256_mul_ps(wv[j], _mm256_loadu_ps(src + c)));
            }
            _mm256_storeu_ps(y + t * C + c, sp_silu8(acc));
        }
        for (int32_t j = 0; j < K - 1; j++) { /* new tail = the last K−1 rows of [tail ; x] (reads rows not yet written) */
            int64_t r = n + j - (K - 1);
            const float *src = r >= 0 ? x + r * C : tail + (r + K - 1) * C;
            _mm256_storeu_ps(tail + j * C + c, _mm256_loadu_ps(src + c));
        }
    }
}
