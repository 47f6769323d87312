/* exp_avx512.h — exp_avx2.h in sixteen lanes: each lane runs the same operations as there (and as ops.h's scalar
 * sp_exp_neg, sp_sigmoid, sp_silu), so every width gives the same bits. For *_avx512.c files only. */
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

static inline __m512 sp_sigmoid16(__m512 x) {
    __m512 t = sp_exp_neg16(_mm512_castsi512_ps(_mm512_or_si512(_mm512_castps_si512(x), _mm512_set1_epi32((int)0x80000000u))));
    __m512 num = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, _mm512_setzero_ps(), _CMP_GE_OQ), t, _mm512_set1_ps(1.0f));
    return _mm512_div_ps(num, _mm512_add_ps(_mm512_set1_ps(1.0f), t));
}

static inline __m512 sp_silu16(__m512 x) { return _mm512_mul_ps(x, sp_sigmoid16(x)); }

#endif
