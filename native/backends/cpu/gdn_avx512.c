/* gdn_avx512.c — gdn_avx2.c's token step in sixteen lanes. A lane is one column of S and goes through the same
 * operations in the same order as there, so the bits are gdn_avx2.c's; blocks of 128 columns. */
#include "ops.h"

#include <immintrin.h>

/* S [dk][dv] in place; dv a multiple of 16 (checked by the caller). */
void sp_gdn_token_avx512(float *S, const float *q, const float *k, const float *v, float decay, float beta, float *o,
                         int32_t dk, int32_t dv) {
    __m512 vdecay = _mm512_set1_ps(decay), vbeta = _mm512_set1_ps(beta);
    for (int32_t j0 = 0; j0 < dv; j0 += 128) {
        int32_t nb = dv - j0 < 128 ? (dv - j0) / 16 : 8;
        __m512 acc[8], delta[8];
        for (int32_t b = 0; b < nb; b++) acc[b] = _mm512_setzero_ps();
        for (int32_t i = 0; i < dk; i++) {
            const float *row = S + (int64_t)i * dv + j0;
            __m512 ki = _mm512_set1_ps(k[i]);
            for (int32_t b = 0; b < nb; b++) acc[b] = _mm512_fmadd_ps(_mm512_mul_ps(_mm512_loadu_ps(row + 16 * b), vdecay), ki, acc[b]);
        }
        for (int32_t b = 0; b < nb; b++) {
            delta[b] = _mm512_mul_ps(_mm512_sub_ps(_mm512_loadu_ps(v + j0 + 16 * b), acc[b]), vbeta);
            acc[b] = _mm512_setzero_ps();
        }
        for (int32_t i = 0; i < dk; i++) {
            float *row = S + (int64_t)i * dv + j0;
            __m512 ki = _mm512_set1_ps(k[i]), qi = _mm512_set1_ps(q[i]);
            for (int32_t b = 0; b < nb; b++) {
                __m512 r = _mm512_fmadd_ps(ki, delta[b], _mm512_mul_ps(_mm512_loadu_ps(row + 16 * b), vdecay));
                _mm512_storeu_ps(row + 16 * b, r);
                acc[b] = _mm512_fmadd_ps(r, qi, acc[b]);
            }
        }
        for (int32_t b = 0; b < nb; b++) _mm512_storeu_ps(o + j0 + 16 * b, acc[b]);
    }
}
