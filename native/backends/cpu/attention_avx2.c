/* attention_avx2.c — the tiled form of attention (attention_tile.h) in eight lanes: a score's eight lane chains (ops.h)
 * are one vector per (row, key), p · v keeps one chain per dim, eight dims per vector. Needs head_dim % 8 == 0. */
#include "ops.h"

#include "exp_avx2.h"

#include <immintrin.h>
#include <stdbool.h>

/* Lane k of a (k < 4): ((l0+l1)+(l2+l3)) + ((l4+l5)+(l6+l7)) of a_k's lanes; lanes 4..7 likewise of b_k. */
static inline __m256 reduce_2x4(__m256 a0, __m256 a1, __m256 a2, __m256 a3, __m256 b0, __m256 b1, __m256 b2, __m256 b3) {
    __m256 ta = _mm256_hadd_ps(_mm256_hadd_ps(a0, a1), _mm256_hadd_ps(a2, a3));
    __m256 tb = _mm256_hadd_ps(_mm256_hadd_ps(b0, b1), _mm256_hadd_ps(b2, b3));
    return _mm256_add_ps(_mm256_permute2f128_ps(ta, tb, 0x20), _mm256_permute2f128_ps(ta, tb, 0x31));
}

/* Scores of rows qa, qb against keys k[0..3]: lanes [qa·k0 … qa·k3 | qb·k0 … qb·k3] · scale. */
static inline __m256 scores_2x4(const float *qa, const float *qb, const float *const *k, int32_t hd, __m256 scale) {
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0, b0 = a0, b1 = a0, b2 = a0, b3 = a0;
    for (int32_t d = 0; d < hd; d += 8) {
        __m256 x = _mm256_loadu_ps(qa + d), y = _mm256_loadu_ps(qb + d);
        __m256 k0 = _mm256_loadu_ps(k[0] + d), k1 = _mm256_loadu_ps(k[1] + d);
        __m256 k2 = _mm256_loadu_ps(k[2] + d), k3 = _mm256_loadu_ps(k[3] + d);
        a0 = _mm256_fmadd_ps(x, k0, a0), a1 = _mm256_fmadd_ps(x, k1, a1);
        a2 = _mm256_fmadd_ps(x, k2, a2), a3 = _mm256_fmadd_ps(x, k3, a3);
        b0 = _mm256_fmadd_ps(y, k0, b0), b1 = _mm256_fmadd_ps(y, k1, b1);
        b2 = _mm256_fmadd_ps(y, k2, b2), b3 = _mm256_fmadd_ps(y, k3, b3);
    }
    return _mm256_mul_ps(reduce_2x4(a0, a1, a2, a3, b0, b1, b2, b3), scale);
}

/* Rows r0..R−1 against keys 0..n_keys−1 (rounded up to 4), two rows × four keys at a time. */
static void scores_rows(const float *const *q, int32_t r0, int32_t R, const float *const *k, int32_t n_keys, int32_t hd,
                        float scale, float (*p)[SP_ATTN_KEY_BLOCK], float *scratch) {
    (void)scratch;
    __m256 vs = _mm256_set1_ps(scale);
    for (int32_t r = r0; r < R; r += 2) {
        int32_t rb = r + 1 < R ? r + 1 : r; /* an odd row out pairs with itself */
        for (int32_t j = 0; j < n_keys; j += 4) {
            __m256 s = scores_2x4(q[r], q[rb], k + j, hd, vs);
            _mm_storeu_ps(p[r] + j, _mm256_castps256_ps128(s));
            _mm_storeu_ps(p[rb] + j, _mm256_extractf128_ps(s, 1));
        }
    }
}

static inline float hmax8(__m256 v) {
    __m128 x = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    x = _mm_max_ps(x, _mm_movehl_ps(x, x));
    return _mm_cvtss_f32(_mm_max_ss(x, _mm_shuffle_ps(x, x, 1)));
}

/* ((w0+w4)+(w2+w6)) + ((w1+w5)+(w3+w7)), as sp_attn_block_sum. */
static inline float hsum8(__m256 w) {
    __m128 x = _mm_add_ps(_mm256_castps256_ps128(w), _mm256_extractf128_ps(w, 1));
    x = _mm_add_ps(x, _mm_movehl_ps(x, x));
    return _mm_cvtss_f32(_mm_add_ss(x, _mm_shuffle_ps(x, x, 1)));
}

/* Online softmax step of one row over its block of scores p (in place → weights): keys j ≥ nb are not seen. */
static inline void softmax_block(float *p, int32_t nb, float *m, float *l, float *corr) {
    __m256 s[4], mx8 = _mm256_set1_ps(-INFINITY), lim = _mm256_set1_ps((float)nb);
    for (int k = 0; k < 4; k++) {
        __m256 idx = _mm256_add_ps(_mm256_setr_ps(0, 1, 2, 3, 4, 5, 6, 7), _mm256_set1_ps(8.0f * (float)k));
        s[k] = _mm256_blendv_ps(_mm256_set1_ps(-INFINITY), _mm256_load_ps(p + 8 * k), _mm256_cmp_ps(idx, lim, _CMP_LT_OQ));
        mx8 = _mm256_max_ps(mx8, s[k]);
    }
    float bm = hmax8(mx8), mx = bm > *m ? bm : *m;
    __m256 vmx = _mm256_set1_ps(mx);
    for (int k = 0; k < 4; k++) {
        s[k] = sp_exp_neg8(_mm256_sub_ps(s[k], vmx));
        _mm256_store_ps(p + 8 * k, s[k]);
    }
    float c = _mm256_cvtss_f32(sp_exp_neg8(_mm256_set1_ps(*m - mx)));
    *l = *l * c + hsum8(_mm256_add_ps(_mm256_add_ps(s[0], s[1]), _mm256_add_ps(s[2], s[3])));
    *m = mx, *corr = c;
}

/* o_a += Σ_{j<na} pa_j · v_j and o_b likewise (after o ·= corr, or from zero when fresh), 32 dims per pass. */
static void pv_2(float *oa, float *ob, const float *pa, const float *pb, int32_t na, int32_t nb, float ca, float cb,
                 bool fresh, const float *const *v, int32_t hd) {
    int32_t nc = na < nb ? na : nb;
    __m256 va = _mm256_set1_ps(ca), vb = _mm256_set1_ps(cb);
    int32_t d = 0;
    for (; d + 32 <= hd; d += 32) {
        __m256 A[4], B[4];
        for (int k = 0; k < 4; k++) {
            A[k] = fresh ? _mm256_setzero_ps() : _mm256_mul_ps(_mm256_loadu_ps(oa + d + 8 * k), va);
            B[k] = fresh ? _mm256_setzero_ps() : _mm256_mul_ps(_mm256_loadu_ps(ob + d + 8 * k), vb);
        }
        int32_t j = 0;
        for (; j < nc; j++) {
            __m256 P = _mm256_broadcast_ss(pa + j), Q = _mm256_broadcast_ss(pb + j);
            for (int k = 0; k < 4; k++) {
                __m256 x = _mm256_loadu_ps(v[j] + d + 8 * k);
                A[k] = _mm256_fmadd_ps(P, x, A[k]);
                B[k] = _mm256_fmadd_ps(Q, x, B[k]);
            }
        }
        for (int32_t t = j; t < na; t++)
            for (int k = 0; k < 4; k++) A[k] = _mm256_fmadd_ps(_mm256_broadcast_ss(pa + t), _mm256_loadu_ps(v[t] + d + 8 * k), A[k]);
        for (int32_t t = j; t < nb; t++)
            for (int k = 0; k < 4; k++) B[k] = _mm256_fmadd_ps(_mm256_broadcast_ss(pb + t), _mm256_loadu_ps(v[t] + d + 8 * k), B[k]);
        for (int k = 0; k < 4; k++) {
            _mm256_storeu_ps(oa + d + 8 * k, A[k]);
            _mm256_storeu_ps(ob + d + 8 * k, B[k]);
        }
    }
    for (; d < hd; d += 8) {
        __m256 A = fresh ? _mm256_setzero_ps() : _mm256_mul_ps(_mm256_loadu_ps(oa + d), va);
        __m256 B = fresh ? _mm256_setzero_ps() : _mm256_mul_ps(_mm256_loadu_ps(ob + d), vb);
        for (int32_t t = 0; t < na; t++) A = _mm256_fmadd_ps(_mm256_broadcast_ss(pa + t), _mm256_loadu_ps(v[t] + d), A);
        for (int32_t t = 0; t < nb; t++) B = _mm256_fmadd_ps(_mm256_broadcast_ss(pb + t), _mm256_loadu_ps(v[t] + d), B);
        _mm256_storeu_ps(oa + d, A);
        _mm256_storeu_ps(ob + d, B);
    }
}

static void kv_to_f32(int32_t type, const void *row, int32_t head_dim, float *out) {
    if (type == SPLASH_KV_F16) {
        for (int32_t d = 0; d < head_dim; d += 8)
            _mm256_storeu_ps(out + d, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)((const uint16_t *)row + d))));
        return;
    }
    const int8_t *q = row; /* SPLASH_KV_INT8 */
    const uint16_t *dh = (const uint16_t *)(q + (head_dim + SP_QK - 1) / SP_QK * SP_QK);
    for (int32_t d = 0; d < head_dim; d += 8) {
        __m256 x = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(q + d))));
        _mm256_storeu_ps(out + d, _mm256_mul_ps(x, _mm256_set1_ps(sp_f16_to_f32(dh[d / SP_QK]))));
    }
}

#include "attention_tile.h"

void sp_attention_tile_avx2(const sp_attn_args *a, int64_t i0, int64_t i1, int32_t g, float *rows) {
    attention_tile(a, i0, i1, g, rows);
}
