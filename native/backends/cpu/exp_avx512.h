/* exp_avx512.h — exp_avx2.h's sp_exp_neg8, sp_exp_accurate8, sigmoid and SiLU in sixteen lanes: each lane runs the same operations
 * as there (and as ops.h's scalar forms), so every width gives the same bits. For *_avx512.c files only. */
#ifndef SP_CPU_EXP_AVX512_H
#define SP_CPU_EXP_AVX512_H

#include <immintrin.h>

static inline __m512 sp_exp_neg16(__m512 in) {
    __m512 x = _mm512_max_ps(in, _mm512_set1_ps(-87.0f));
    __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504f)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
    r = _mm512_fmadd_ps(n, _mm512_set1_ps(2.12194440e-4f), r);
    __m512 p = _mm512_set1_ps(1.9875691500e-4f);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
    __m512 y = _mm512_add_ps(_mm512_fmadd_ps(_mm512_mul_ps(p, r), r, r), _mm512_set1_ps(1.0f));
    __m512i e = _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(127)), 23);
    y = _mm512_mul_ps(y, _mm512_castsi512_ps(e));
    return _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(in, _mm512_set1_ps(-87.0f), _CMP_GE_OQ), y);
}

/* sp_exp_accurate of eight lanes, widened to double. */
static inline __m256 sp_exp_accurate8d(__m512d x) {
    __m512d xd = _mm512_min_pd(_mm512_max_pd(x, _mm512_set1_pd(-104.0)), _mm512_set1_pd(89.0));
    __m512d k = _mm512_roundscale_pd(_mm512_mul_pd(xd, _mm512_set1_pd(1.4426950408889634)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512d r = _mm512_fnmadd_pd(k, _mm512_set1_pd(0.6931471805599453), xd);
    __m512d p = _mm512_set1_pd(2.7557319223985893e-6);
    p = _mm512_fmadd_pd(p, r, _mm512_set1_pd(2.48015873015873e-5));
    p = _mm512_fmadd_pd(p, r, _mm512_set1_pd(1.984126984126984e-4));
    p = _mm512_fmadd_pd(p, r, _mm512_set1_pd(1.388888888888889e-3));
    p = _mm512_fmadd_pd(p, r, _mm512_set1_pd(8.333333333333333e-3));
    p = _mm512_fmadd_pd(p, r, _mm512_set1_pd(4.1666666666666664e-2));
    p = _mm512_fmadd_pd(p, r, _mm512_set1_pd(0.16666666666666666));
    p = _mm512_fmadd_pd(p, r, _mm512_set1_pd(0.5));
    p = _mm512_fmadd_pd(p, r, _mm512_set1_pd(1.0));
    p = _mm512_fmadd_pd(p, r, _mm512_set1_pd(1.0));
    __m512i s = _mm512_slli_epi64(_mm512_add_epi64(_mm512_cvtepi32_epi64(_mm512_cvtpd_epi32(k)), _mm512_set1_epi64(1023)), 52);
    return _mm512_cvtpd_ps(_mm512_mul_pd(p, _mm512_castsi512_pd(s)));
}

static inline __m512 sp_exp_accurate16(__m512 x) {
    __m256 lo = sp_exp_accurate8d(_mm512_cvtps_pd(_mm512_castps512_ps256(x)));
    __m256 hi = sp_exp_accurate8d(_mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(x), 1))));
    __m512 y = _mm512_castpd_ps(_mm512_insertf64x4(_mm512_castps_pd(_mm512_castps256_ps512(lo)), _mm256_castps_pd(hi), 1));
    return _mm512_mask_mov_ps(y, _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q), x); /* NaN stays NaN */
}

/* −x: the sign bit flipped */
static inline __m512 sp_neg16(__m512 x) {
    return _mm512_castsi512_ps(_mm512_xor_si512(_mm512_castps_si512(x), _mm512_set1_epi32((int)0x80000000u)));
}

static inline __m512 sp_sigmoid16(__m512 x) {
    return _mm512_div_ps(_mm512_set1_ps(1.0f), _mm512_add_ps(_mm512_set1_ps(1.0f), sp_exp_accurate16(sp_neg16(x))));
}

static inline __m512 sp_silu16(__m512 x) {
    return _mm512_div_ps(x, _mm512_add_ps(_mm512_set1_ps(1.0f), sp_exp_accurate16(sp_neg16(x))));
}

#endif
