/* attention_avx512.c — the tiled form of attention (attention_tile.h) with sixteen-lane scores and p · v and the AVX2
 * form's bits: a score's eight lane chains (ops.h) run in one half of a vector, two keys per vector, and are added
 * by the AVX2 form's tree; p · v keeps one chain per dim, sixteen dims per vector. Needs head_dim % 16 == 0. */
#include "ops.h"

#include <immintrin.h>
#include <stdbool.h>

/* [a | b]: two eight-float rows in one vector; [a | a]; the upper eight lanes (AVX-512F forms: no DQ needed). */
static inline __m512 pair(const float *a, const float *b) {
    return _mm512_castpd_ps(_mm512_insertf64x4(_mm512_castps_pd(_mm512_castps256_ps512(_mm256_loadu_ps(a))),
                                               _mm256_castps_pd(_mm256_loadu_ps(b)), 1));
}
static inline __m512 twice(const float *a) { return _mm512_castpd_ps(_mm512_broadcast_f64x4(_mm256_castps_pd(_mm256_loadu_ps(a)))); }
static inline __m256 upper(__m512 v) { return _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)); }

/* A stored f16 / int8 row as f32, sixteen values at a time (an int8 group of 32 holds two such runs). */
static void kv_to_f32(int32_t type, const void *row, int32_t head_dim, float *out) {
    if (type == SPLASH_KV_F16) {
        for (int32_t d = 0; d < head_dim; d += 16)
            _mm512_storeu_ps(out + d, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)((const uint16_t *)row + d))));
        return;
    }
    const int8_t *q = row; /* SPLASH_KV_INT8 */
    const uint16_t *dh = (const uint16_t *)(q + (head_dim + SP_QK - 1) / SP_QK * SP_QK);
    for (int32_t d = 0; d < head_dim; d += 16) {
        __m512 x = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(q + d))));
        _mm512_storeu_ps(out + d, _mm512_mul_ps(x, _mm512_set1_ps(sp_f16_to_f32(dh[d / SP_QK]))));
    }
}

/* Scores of rows qa, qb against keys k[0..3]: lanes [qa·k0 … qa·k3 | qb·k0 … qb·k3] · scale. */
static inline __m256 scores_2x4(const float *qa, const float *qb, const float *const *k, int32_t hd, __m256 scale) {
    __m512 a01 = _mm512_setzero_ps(), a23 = a01, b01 = a01, b23 = a01; /* [row·key0 lanes | row·key1 lanes], … */
    for (int32_t d = 0; d < hd; d += 8) {
        __m512 x = twice(qa + d), y = twice(qb + d);
        __m512 k01 = pair(k[0] + d, k[1] + d), k23 = pair(k[2] + d, k[3] + d);
        a01 = _mm512_fmadd_ps(x, k01, a01), a23 = _mm512_fmadd_ps(x, k23, a23);
        b01 = _mm512_fmadd_ps(y, k01, b01), b23 = _mm512_fmadd_ps(y, k23, b23);
    }
    /* the AVX2 form's tree: hadd pairs of lanes twice, then the two 128-bit halves */
    __m256 ta = _mm256_hadd_ps(_mm256_hadd_ps(_mm512_castps512_ps256(a01), upper(a01)),
                               _mm256_hadd_ps(_mm512_castps512_ps256(a23), upper(a23)));
    __m256 tb = _mm256_hadd_ps(_mm256_hadd_ps(_mm512_castps512_ps256(b01), upper(b01)),
                               _mm256_hadd_ps(_mm512_castps512_ps256(b23), upper(b23)));
    return _mm256_mul_ps(_mm256_add_ps(_mm256_permute2f128_ps(ta, tb, 0x20), _mm256_permute2f128_ps(ta, tb, 0x31)), scale);
}

/* o_a += Σ_{j<na} pa_j · v_j and o_b likewise (after o ·= corr, or from zero when fresh), 64 dims per pass, then 16. */
static void pv_2(float *oa, float *ob, const float *pa, const float *pb, int32_t na, int32_t nb, float ca, float cb,
                 bool fresh, const float *const *v, int32_t hd) {
    const int32_t nc = na < nb ? na : nb;
    const __m512 va = _mm512_set1_ps(ca), vb = _mm512_set1_ps(cb);
    for (int32_t d = 0; d < hd;) {
        const int w = hd - d >= 64 ? 4 : 1; /* vectors per row in this pass */
        __m512 A[4], B[4];
        for (int k = 0; k < w; k++) {
            A[k] = fresh ? _mm512_setzero_ps() : _mm512_mul_ps(_mm512_loadu_ps(oa + d + 16 * k), va);
            B[k] = fresh ? _mm512_setzero_ps() : _mm512_mul_ps(_mm512_loadu_ps(ob + d + 16 * k), vb);
        }
        int32_t j = 0;
        for (; j < nc; j++) {
            __m512 P = _mm512_set1_ps(pa[j]), Q = _mm512_set1_ps(pb[j]);
            for (int k = 0; k < w; k++) {
                __m512 x = _mm512_loadu_ps(v[j] + d + 16 * k);
                A[k] = _mm512_fmadd_ps(P, x, A[k]);
                B[k] = _mm512_fmadd_ps(Q, x, B[k]);
            }
        }
        for (int32_t t = j; t < na; t++)
            for (int k = 0; k < w; k++) A[k] = _mm512_fmadd_ps(_mm512_set1_ps(pa[t]), _mm512_loadu_ps(v[t] + d + 16 * k), A[k]);
        for (int32_t t = j; t < nb; t++)
            for (int k = 0; k < w; k++) B[k] = _mm512_fmadd_ps(_mm512_set1_ps(pb[t]), _mm512_loadu_ps(v[t] + d + 16 * k), B[k]);
        for (int k = 0; k < w; k++) {
            _mm512_storeu_ps(oa + d + 16 * k, A[k]);
            _mm512_storeu_ps(ob + d + 16 * k, B[k]);
        }
        d += 16 * w;
    }
}

#include "attention_tile.h"

void sp_attention_tile_avx512(const sp_attn_args *a, int64_t i0, int64_t i1, int32_t g, float *rows) {
    attention_tile(a, i0, i1, g, rows);
}
