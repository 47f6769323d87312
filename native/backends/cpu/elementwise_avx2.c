/* elementwise_avx2.c — the SiLU and sigmoid gates of elementwise.c eight lanes at a time (exp_avx2.h), with its bits:
 * the lanes compute sp_silu / sp_sigmoid op for op, and the tail uses them. */
#include "ops.h"

#include "exp_avx2.h"

void sp_silu_mul_avx2(float *y, const float *g, const float *u, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_mul_ps(sp_silu8(_mm256_loadu_ps(g + i)), _mm256_loadu_ps(u + i)));
    for (; i < n; i++) y[i] = sp_silu(g[i]) * u[i];
}

void sp_sigmoid_mul_avx2(float *y, const float *g, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_mul_ps(_mm256_loadu_ps(y + i), sp_sigmoid8(_mm256_loadu_ps(g + i))));
    for (; i < n; i++) y[i] = y[i] * sp_sigmoid(g[i]);
}
