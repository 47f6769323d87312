/* exp_avx2.h — exp(x) for x ≤ 0, eight lanes: the scalar sp_exp_neg's polynomial (Cephes expf, within 2 ulp), so the
 * vector and scalar paths give the same bits. 0 below −87. Sigmoid and SiLU on it, as ops.h's sp_sigmoid and sp_silu.
 * For *_avx2.c files only (needs -mavx2 -mfma). */
#ifndef SP_CPU_EXP_AVX2_H
#define SP_CPU_EXP_AVX2_H

#include <immintrin.h>

static inline __m256 sp_exp_neg8(__m256 in) {
    __m256 x = _mm256_max_ps(in, _mm256_set1_ps(-87.0f));
    __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504f)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
    r = _mm256_fmadd_ps(n, _mm256_set1_ps(2.12194440e-4f), r);
    __m256 p = _mm256_set1_ps(1.9875691500e-4f);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
    __m256 y = _mm256_add_ps(_mm256_fmadd_ps(_mm256_mul_ps(p, r), r, r), _mm256_set1_ps(1.0f));
    __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    y = _mm256_mul_ps(y, _mm256_castsi256_ps(e));
    return _mm256_and_ps(y, _mm256_cmp_ps(in, _mm256_set1_ps(-87.0f), _CMP_GE_OQ));
}

static inline __m256 sp_sigmoid8(__m256 x) {
    __m256 t = sp_exp_neg8(_mm256_or_ps(x, _mm256_set1_ps(-0.0f))); /* e^−|x| */
    __m256 num = _mm256_blendv_ps(t, _mm256_set1_ps(1.0f), _mm256_cmp_ps(x, _mm256_setzero_ps(), _CMP_GE_OQ));
    return _mm256_div_ps(num, _mm256_add_ps(_mm256_set1_ps(1.0f), t));
}

static inline __m256 sp_silu8(__m256 x) { return _mm256_mul_ps(x, sp_sigmoid8(x)); }

#endif
