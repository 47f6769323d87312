/* gdn_avx2.c — one token of the gated delta rule for one v head with AVX2+FMA (the scalar form is in gdn.c).
 * Measured by build/tests/cpu_ops_lab (native-arch section of BENCHMARKS.md). */
#include "ops.h"

#include <immintrin.h>

/* S [dk][dv] in place; dv a multiple of 8 (checked by the caller). Columns go in blocks of 64 so the 8 accumulators
 * stay in registers while the dk rows stream through:
 *   pass 1: mem = (S · exp(g))ᵀ k, S only read     pass 2: δ = (v − mem) · β;  S ← S · exp(g) + k ⊗ δ;  o = Sᵀ q
 * The decayed row is the same product in both passes, so S is written once per token. */
void sp_gdn_token_avx2(float *S, const float *q, const float *k, const float *v, float decay, float beta, float *o,
                       int32_t dk, int32_t dv) {
    __m256 vdecay = _mm256_set1_ps(decay), vbeta = _mm256_set1_ps(beta);
    for (int32_t j0 = 0; j0 < dv; j0 += 64) {
        int32_t nb = dv - j0 < 64 ? (dv - j0) / 8 : 8;
        __m256 acc[8], delta[8];
        for (int32_t b = 0; b < nb; b++) acc[b] = _mm256_setzero_ps();
        for (int32_t i = 0; i < dk; i++) {
            const float *row = S + (int64_t)i * dv + j0;
            __m256 ki = _mm256_set1_ps(k[i]);
            for (int32_t b = 0; b < nb; b++) acc[b] = _mm256_fmadd_ps(_mm256_mul_ps(_mm256_loadu_ps(row + 8 * b), vdecay), ki, acc[b]);
        }
        for (int32_t b = 0; b < nb; b++) {
            delta[b] = _mm256_mul_ps(_mm256_sub_ps(_mm256_loadu_ps(v + j0 + 8 * b), acc[b]), vbeta);
            acc[b] = _mm256_setzero_ps();
        }
        for (int32_t i = 0; i < dk; i++) {
            float *row = S + (int64_t)i * dv + j0;
            __m256 ki = _mm256_set1_ps(k[i]), qi = _mm256_set1_ps(q[i]);
            for (int32_t b = 0; b < nb; b++) {
                __m256 r = _mm256_fmadd_ps(ki, delta[b], _mm256_mul_ps(_mm256_loadu_ps(row + 8 * b), vdecay));
                _mm256_storeu_ps(row + 8 * b, r);
                acc[b] = _mm256_fmadd_ps(r, qi, acc[b]);
            }
        }
        for (int32_t b = 0; b < nb; b++) _mm256_storeu_ps(o + j0 + 8 * b, acc[b]);
    }
}
