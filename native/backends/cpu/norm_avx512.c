/* norm_avx512.c — norm_avx2.c's RMSNorm rows with the products and the gate's SiLU in sixteen lanes: the sum of
 * squares is norm_avx2.c's (sp_sum_squares_avx2), and each output the same products, so the bits are the same. */
#include "ops.h"

#include "exp_avx512.h"

void sp_rmsnorm_rows_avx512(float *y, const float *x, const float *z, const float *w, int64_t n, int64_t d, float eps) {
    for (int64_t i = 0; i < n; i++) {
        const float *xi = x + i * d, *zi = z ? z + i * d : NULL;
        float *yi = y + i * d;
        float var = (float)(sp_sum_squares_avx2(xi, d) / (double)d); /* torch: rsqrt(mean(x²) + eps) in fp32 */
        float r = 1.0f / sqrtf(var + eps);
        __m512 vr = _mm512_set1_ps(r);
        int64_t j = 0;
        if (zi) {
            for (; j + 16 <= d; j += 16) {
                __m512 xr = _mm512_mul_ps(_mm512_loadu_ps(xi + j), vr);
                _mm512_storeu_ps(yi + j, _mm512_mul_ps(_mm512_mul_ps(_mm512_loadu_ps(w + j), xr), sp_silu16(_mm512_loadu_ps(zi + j))));
            }
            for (; j < d; j++) yi[j] = w[j] * (xi[j] * r) * sp_silu(zi[j]);
        } else {
            for (; j + 16 <= d; j += 16)
                _mm512_storeu_ps(yi + j, _mm512_mul_ps(_mm512_mul_ps(_mm512_loadu_ps(xi + j), vr), _mm512_loadu_ps(w + j)));
            for (; j < d; j++) yi[j] = (xi[j] * r) * w[j];
        }
    }
}
