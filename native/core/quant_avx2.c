/* quant_avx2.c — the Q8/Q4 row quantizers (quant.c) eight lanes at a time, reading the checkpoint's f32/bf16/f16
 * row directly; same bits as the scalar reference, which defines the formats (matmul_test checks it on random and
 * edge-case rows). Loading a 27B checkpoint with --quant spent almost all its time in the scalar form.
 *
 * Why the bits agree: max and min are exact whatever the order; |x|·(1/d) is the same single product; clamping
 * with max_ps(t, −127) sends NaN to −127 as fmaxf does; cvtps rounds to nearest even as lrintf does in the default
 * mode; F16C converts as sp_f32_to_f16 / sp_f16_to_f32 do for every non-NaN value (matmul_test). Where the scalar
 * form's answer depends on operand order — a Q4 group whose min or max is a zero (fminf may keep either sign) — the
 * group's range is taken by the scalar loop; rows with a NaN, or a partial last group, go to the scalar form whole. */
#include "quant.h"

#include <immintrin.h>
#include <math.h>

static inline __m256 load8(sp_mtype from, const void *src, int64_t k) {
    if (from == SP_MAT_F32) return _mm256_loadu_ps((const float *)src + k);
    __m128i h = _mm_loadu_si128((const __m128i *)((const uint16_t *)src + k));
    if (from == SP_MAT_BF16) return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
    return _mm256_cvtph_ps(h);
}

static inline float hmax(__m256 v) {
    __m128 x = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    x = _mm_max_ps(x, _mm_movehl_ps(x, x));
    return _mm_cvtss_f32(_mm_max_ss(x, _mm_movehdup_ps(x)));
}

static inline float hmin(__m256 v) {
    __m128 x = _mm_min_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    x = _mm_min_ps(x, _mm_movehl_ps(x, x));
    return _mm_cvtss_f32(_mm_min_ss(x, _mm_movehdup_ps(x)));
}

/* round(clamp(t, lo, hi)) of 32 lanes as 32 bytes in element order (a NaN lane gives lo). */
static inline __m256i round_pack(const __m256 t[4], __m256 lo, __m256 hi) {
    __m256i i[4];
    for (int k = 0; k < 4; k++) i[k] = _mm256_cvtps_epi32(_mm256_min_ps(_mm256_max_ps(t[k], lo), hi));
    __m256i p = _mm256_packs_epi16(_mm256_packs_epi32(i[0], i[1]), _mm256_packs_epi32(i[2], i[3]));
    return _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

static bool row_q8(sp_mtype from, const void *src, int64_t nb, uint8_t *row) {
    int8_t *q = (int8_t *)row;
    uint16_t *dh = (uint16_t *)(q + nb * SP_QK);
    const __m256 sign = _mm256_set1_ps(-0.0f);
    for (int64_t b = 0; b < nb; b++) {
        __m256 v[4], m = _mm256_setzero_ps();
        for (int k = 0; k < 4; k++) {
            v[k] = load8(from, src, b * SP_QK + 8 * k);
            m = _mm256_max_ps(_mm256_andnot_ps(sign, v[k]), m); /* a NaN lane keeps m, as fmaxf does */
        }
        dh[b] = (uint16_t)_cvtss_sh(hmax(m) / 127.0f, _MM_FROUND_TO_NEAREST_INT);
        float d = _cvtsh_ss(dh[b]);
        __m256 inv = _mm256_set1_ps(d > 0 ? 1.0f / d : 0.0f);
        for (int k = 0; k < 4; k++) v[k] = _mm256_mul_ps(v[k], inv);
        _mm256_storeu_si256((__m256i *)(q + b * SP_QK), round_pack(v, _mm256_set1_ps(-127.0f), _mm256_set1_ps(127.0f)));
    }
    return true;
}

/* The scalar form's range of one group, for groups where a zero is the min or the max. */
static void range_scalar(sp_mtype from, const void *src, int64_t k0, float *lo, float *hi) {
    float x[SP_QK];
    sp_matrix m = {from, 1, SP_QK, (const uint8_t *)src + k0 * (from == SP_MAT_F32 ? 4 : 2), SP_QK * 4};
    sp_matrix_row_f32(&m, 0, x);
    *lo = x[0], *hi = x[0];
    for (int k = 0; k < SP_QK; k++) *lo = fminf(*lo, x[k]), *hi = fmaxf(*hi, x[k]);
}

static bool row_q4(sp_mtype from, const void *src, int64_t nb, uint8_t *row) {
    uint8_t *qs = row;
    uint16_t *dh = (uint16_t *)(qs + (nb + 1) / 2 * SP_QK), *mh = dh + nb;
    __m256i low = _mm256_setzero_si256();
    for (int64_t b = 0; b < nb; b++) {
        __m256 v[4], mn = _mm256_set1_ps(INFINITY), mx = _mm256_set1_ps(-INFINITY), nan = _mm256_setzero_ps();
        for (int k = 0; k < 4; k++) {
            v[k] = load8(from, src, b * SP_QK + 8 * k);
            mn = _mm256_min_ps(mn, v[k]), mx = _mm256_max_ps(mx, v[k]);
            nan = _mm256_or_ps(nan, _mm256_cmp_ps(v[k], v[k], _CMP_UNORD_Q));
        }
        if (_mm256_movemask_ps(nan)) return false;
        float lo = hmin(mn), hi = hmax(mx);
        if (lo == 0.0f || hi == 0.0f) range_scalar(from, src, b * SP_QK, &lo, &hi);
        dh[b] = (uint16_t)_cvtss_sh((hi - lo) / 15.0f, _MM_FROUND_TO_NEAREST_INT);
        mh[b] = (uint16_t)_cvtss_sh(lo, _MM_FROUND_TO_NEAREST_INT);
        float d = _cvtsh_ss(dh[b]);
        __m256 m = _mm256_set1_ps(_cvtsh_ss(mh[b])), inv = _mm256_set1_ps(d > 0 ? 1.0f / d : 0.0f);
        for (int k = 0; k < 4; k++) v[k] = _mm256_mul_ps(_mm256_sub_ps(v[k], m), inv);
        __m256i q = round_pack(v, _mm256_setzero_ps(), _mm256_set1_ps(15.0f));
        if (b % 2 == 0) low = q;
        if (b % 2 == 1 || b == nb - 1) /* odd groups go to the high nibbles of their pair's chunk */
            _mm256_storeu_si256((__m256i *)(qs + b / 2 * SP_QK), b % 2 ? _mm256_or_si256(low, _mm256_slli_epi16(q, 4)) : low);
    }
    return true;
}

bool sp_quantize_row_avx2(sp_mtype to, sp_mtype from, const void *src, int64_t cols, void *row) {
    if (cols % SP_QK || (from != SP_MAT_F32 && from != SP_MAT_BF16 && from != SP_MAT_F16)) return false;
    if (to == SP_MAT_Q8) return row_q8(from, src, cols / SP_QK, row);
    if (to == SP_MAT_Q4) return row_q4(from, src, cols / SP_QK, row);
    return false;
}
