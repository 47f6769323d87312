/* sample_avx2.c — the two passes of exp over a logits row that sampling makes, eight lanes at a time (the scalar
 * forms are in sample.c). On the 248,320-token Qwen3.5 vocabulary they were most of a sample's time; see the
 * native-arch section of BENCHMARKS.md. The sum (for log-probabilities) uses the scalar exp_neg's polynomial; the
 * weights are core/sampling.h's sp_sample_exp op for op (no fused multiply-adds), the same bits as every backend. */
#include "ops.h"

#include "core/sampling.h"

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

/* sp_sample_exp of eight lanes: the same operations in the same order (GCC contracts vector intrinsics only under
 * -ffp-contract=fast, which -std=c11 turns off). */
static inline __m256 sample_exp8(__m256 in) {
    __m256 x = _mm256_max_ps(in, _mm256_set1_ps(-87.0f));
    __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504f)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_sub_ps(x, _mm256_mul_ps(n, _mm256_set1_ps(0.693359375f)));
    r = _mm256_add_ps(r, _mm256_mul_ps(n, _mm256_set1_ps(2.12194440e-4f)));
    __m256 p = _mm256_set1_ps(1.9875691500e-4f);
    p = _mm256_add_ps(_mm256_mul_ps(p, r), _mm256_set1_ps(1.3981999507e-3f));
    p = _mm256_add_ps(_mm256_mul_ps(p, r), _mm256_set1_ps(8.3334519073e-3f));
    p = _mm256_add_ps(_mm256_mul_ps(p, r), _mm256_set1_ps(4.1665795894e-2f));
    p = _mm256_add_ps(_mm256_mul_ps(p, r), _mm256_set1_ps(1.6666665459e-1f));
    p = _mm256_add_ps(_mm256_mul_ps(p, r), _mm256_set1_ps(5.0000001201e-1f));
    __m256 y = _mm256_add_ps(_mm256_add_ps(_mm256_mul_ps(_mm256_mul_ps(p, r), r), r), _mm256_set1_ps(1.0f));
    __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    y = _mm256_mul_ps(y, _mm256_castsi256_ps(e));
    return _mm256_and_ps(y, _mm256_cmp_ps(in, _mm256_set1_ps(-87.0f), _CMP_GE_OQ));
}

void sp_sample_weights_avx2(float *w, const float *z, int32_t n, float mx, float inv_t) {
    __m256 vm = _mm256_set1_ps(mx), vs = _mm256_set1_ps(inv_t);
    int32_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(w + i, sample_exp8(_mm256_mul_ps(_mm256_sub_ps(_mm256_loadu_ps(z + i), vm), vs)));
    for (; i < n; i++) w[i] = sp_sample_exp((z[i] - mx) * inv_t);
}
