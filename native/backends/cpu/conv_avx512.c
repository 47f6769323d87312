/* conv_avx512.c — conv_avx2.c for sixteen channels at a time, with the same bits (the same sum per output, in the
 * same order, and the same SiLU per lane). */
#include "ops.h"

#include "exp_avx512.h"

void sp_conv_silu_avx512(float *y, const float *x, int64_t n, int64_t channels, const float *w, int32_t kernel,
                         float *tail, int64_t c0, int64_t c1) {
    const int64_t C = channels;
    const int32_t K = kernel;
    const __m512i taps = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15), _mm512_set1_epi32(K));
    for (int64_t c = c0; c < c1; c += 16) {
        __m512 wv[SP_CONV_MAX_KERNEL];
        for (int32_t j = 0; j < K; j++) wv[j] = _mm512_i32gather_ps(taps, w + c * K + j, 4); /* tap j of 16 channels */
        for (int64_t t = 0; t < n; t++) {
            __m512 acc = _mm512_setzero_ps();
            for (int32_t j = 0; j < K; j++) {
                int64_t r = t + j - (K - 1); /* row in x; negative rows come from the tail */
                const float *src = r >= 0 ? x + r * C : tail + (r + K - 1) * C;
                acc = _mm512_add_ps(acc, _mm512_mul_ps(wv[j], _mm512_loadu_ps(src + c)));
            }
            _mm512_storeu_ps(y + t * C + c, sp_silu16(acc));
        }
        for (int32_t j = 0; j < K - 1; j++) { /* new tail = the last K−1 rows of [tail ; x] (reads rows not yet written) */
            int64_t r = n + j - (K - 1);
            const float *src = r >= 0 ? x + r * C : tail + (r + K - 1) * C;
            _mm512_storeu_ps(tail + j * C + c, _mm512_loadu_ps(src + c));
        }
    }
}
