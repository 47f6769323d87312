/* elementwise_avx512.c — elementwise_avx2.c's gates in sixteen lanes (exp_avx512.h), with the same bits. */
#include "ops.h"

#include "exp_avx512.h"

void sp_silu_mul_avx512(float *y, const float *g, const float *u, int64_t n) {
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) _mm512_storeu_ps(y + i, _mm512_mul_ps(sp_silu16(_mm512_loadu_ps(g + i)), _mm512_loadu_ps(u + i)));
    for (; i < n; i++) y[i] = sp_silu(g[i]) * u[i];
}

void sp_sigmoid_mul_avx512(float *y, const float *g, int64_t n) {
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) _mm512_storeu_ps(y + i, _mm512_mul_ps(_mm512_loadu_ps(y + i), sp_sigmoid16(_mm512_loadu_ps(g + i))));
    for (; i < n; i++) y[i] = y[i] * sp_sigmoid(g[i]);
}
