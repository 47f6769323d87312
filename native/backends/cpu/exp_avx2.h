/* exp_avx2.h — ops.h's exps in eight lanes, op for op, so the vector and scalar paths give the same bits: sp_exp_neg
 * (x ≤ 0, the Cephes expf polynomial, for softmax) and sp_exp_accurate (in double, for the gates), and sigmoid and
 * SiLU on the latter. For *_avx2.c files only (needs -mavx2 -mfma). */
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

/* sp_exp_accurate of four lanes, widened to double. */
static inline __m128 sp_exp_accurate4d(__m256d x) {
    __m256d xd = _mm256_min_pd(_mm256_max_pd(x, _mm256_set1_pd(-104.0)), _mm256_set1_pd(89.0));
    __m256d k = _mm256_round_pd(_mm256_mul_pd(xd, _mm256_set1_pd(1.4426950408889634)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256d r = _mm256_fnmadd_pd(k, _mm256_set1_pd(0.6931471805599453), xd);
    __m256d p = _mm256_set1_pd(2.7557319223985893e-6);
    p = _mm256_fmadd_pd(p, r, _mm256_set1_pd(2.48015873015873e-5));
    p = _mm256_fmadd_pd(p, r, _mm256_set1_pd(1.984126984126984e-4));
    p = _mm256_fmadd_pd(p, r, _mm256_set1_pd(1.388888888888889e-3));
    p = _mm256_fmadd_pd(p, r, _mm256_set1_pd(8.333333333333333e-3));
    p = _mm256_fmadd_pd(p, r, _mm256_set1_pd(4.1666666666666664e-2));
    p = _mm256_fmadd_pd(p, r, _mm256_set1_pd(0.16666666666666666));
    p = _mm256_fmadd_pd(p, r, _mm256_set1_pd(0.5));
    p = _mm256_fmadd_pd(p, r, _mm256_set1_pd(1.0));
    p = _mm256_fmadd_pd(p, r, _mm256_set1_pd(1.0));
    __m256i s = _mm256_slli_epi64(_mm256_add_epi64(_mm256_cvtepi32_epi64(_mm256_cvtpd_epi32(k)), _mm256_set1_epi64x(1023)), 52);
    return _mm256_cvtpd_ps(_mm256_mul_pd(p, _mm256_castsi256_pd(s)));
}

static inline __m256 sp_exp_accurate8(__m256 x) {
    __m256 y = _mm256_insertf128_ps(_mm256_castps128_ps256(sp_exp_accurate4d(_mm256_cvtps_pd(_mm256_castps256_ps128(x)))),
                                    sp_exp_accurate4d(_mm256_cvtps_pd(_mm256_extractf128_ps(x, 1))), 1);
    return _mm256_blendv_ps(y, x, _mm256_cmp_ps(x, x, _CMP_UNORD_Q)); /* NaN stays NaN */
}

static inline __m256 sp_sigmoid8(__m256 x) {
    __m256 t = sp_exp_accurate8(_mm256_xor_ps(x, _mm256_set1_ps(-0.0f)));
    return _mm256_div_ps(_mm256_set1_ps(1.0f), _mm256_add_ps(_mm256_set1_ps(1.0f), t));
}

static inline __m256 sp_silu8(__m256 x) {
    __m256 t = sp_exp_accurate8(_mm256_xor_ps(x, _mm256_set1_ps(-0.0f)));
    return _mm256_div_ps(x, _mm256_add_ps(_mm256_set1_ps(1.0f), t));
}

#endif
