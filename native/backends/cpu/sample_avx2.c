/* sample_avx2.c — the two passes of exp over a logits row that sampling makes, eight lanes at a time (the scalar
 * forms are in sample.c). On the 248,320-token Qwen3.5 vocabulary they were most of a sample's time; see the
 * native-arch section of BENCHMARKS.md. Same polynomial as the scalar exp_neg: Cephes expf, within 2 ulp. */
#include "ops.h"

#include "exp_avx2.h"

#include <immintrin.h>

double sp_sum_exp_avx2(const float *z, int32_t n, float mx, float scale) {
    __m256 acc = _mm256_setzero_ps(), vm = _mm256_set1_ps(mx), vs = _mm256_set1_ps(scale);
    int32_t i = 0;
    for (; i + 8 <= n; i += 8) acc = _mm256_add_ps(acc, sp_exp_neg8(_mm256_mul_ps(_mm256_sub_ps(_mm256_loadu_ps(z + i), vm), vs)));
    float lanes[8];
    _mm256_storeu_ps(lanes, acc);
    double s = 0;
    for (int j = 0; j < 8; j++) s += lanes[j];
    for (; i < n; i++) s += expf((z[i] - mx) * scale);
    return s;
}

void sp_exp_weights_avx2(float *w, const float *z, int32_t n, float mx, float scale) {
    __m256 vm = _mm256_set1_ps(mx), vs = _mm256_set1_ps(scale);
    int32_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(w + i, sp_exp_neg8(_mm256_mul_ps(_mm256_sub_ps(_mm256_loadu_ps(z + i), vm), vs)));
    for (; i < n; i++) w[i] = expf((z[i] - mx) * scale);
}
