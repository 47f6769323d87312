/* norm_avx2.c — norm.c's RMSNorm rows eight lanes at a time: the sum of squares in double (four lanes, two chains,
 * then the tail in order), the products as norm.c writes them, and the gate's SiLU from exp_avx2.h. */
#include "ops.h"

#include "exp_avx2.h"

double sp_sum_squares_avx2(const float *x, int64_t n) {
    __m256d s0 = _mm256_setzero_pd(), s1 = _mm256_setzero_pd();
    int64_t j = 0;
    for (; j + 8 <= n; j += 8) {
        __m256 v = _mm256_loadu_ps(x + j);
        __m256d lo = _mm256_cvtps_pd(_mm256_castps256_ps128(v)), hi = _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1));
        s0 = _mm256_fmadd_pd(lo, lo, s0); /* a float's square is exact in double: fused or not, one rounding */
        s1 = _mm256_fmadd_pd(hi, hi, s1);
    }
    __m256d s = _mm256_add_pd(s0, s1);
    __m128d h = _mm_add_pd(_mm256_castpd256_pd128(s), _mm256_extractf128_pd(s, 1));
    double ss = _mm_cvtsd_f64(_mm_add_sd(h, _mm_unpackhi_pd(h, h)));
    for (; j < n; j++) ss += (double)x[j] * x[j];
    return ss;
}

static float inv_rms(const float *x, int64_t d, float eps) {
    float var = (float)(sp_sum_squares_avx2(x, d) / (double)d); /* torch: rsqrt(mean(x²) + eps) in fp32 */
    return 1.0f / sqrtf(var + eps);
}

void sp_rmsnorm_rows_avx2(float *y, const float *x, const float *z, const float *w, int64_t n, int64_t d, float eps) {
    for (int64_t i = 0; i < n; i++) {
        const float *xi = x + i * d, *zi = z ? z + i * d : NULL;
        float *yi = y + i * d;
        float r = inv_rms(xi, d, eps);
        __m256 vr = _mm256_set1_ps(r);
        int64_t j = 0;
        if (zi) {
            for (; j + 8 <= d; j += 8) {
                __m256 xr = _mm256_mul_ps(_mm256_loadu_ps(xi + j), vr);
                _mm256_storeu_ps(yi + j, _mm256_mul_ps(_mm256_mul_ps(_mm256_loadu_ps(w + j), xr), sp_silu8(_mm256_loadu_ps(zi + j))));
            }
            for (; j < d; j++) yi[j] = w[j] * (xi[j] * r) * sp_silu(zi[j]);
        } else {
            for (; j + 8 <= d; j += 8)
                _mm256_storeu_ps(yi + j, _mm256_mul_ps(_mm256_mul_ps(_mm256_loadu_ps(xi + j), vr), _mm256_loadu_ps(w + j)));
            for (; j < d; j++) yi[j] = (xi[j] * r) * w[j];
        }
    }
}
