/* attention_avx512.c — the tiled form of attention (attention_tile.h) in sixteen lanes with the AVX2 form's bits: a
 * score's eight lane chains (ops.h) run in one half of a vector, two keys per vector, up to four rows sharing each key
 * load, and are added by the AVX2 form's tree; the softmax runs sixteen keys per vector; p · v keeps one chain per
 * dim, sixteen dims per vector. Needs head_dim % 16 == 0. */
#include "ops.h"

#include "exp_avx512.h"

#include <immintrin.h>
#include <stdbool.h>

/* [a | b]: two eight-float rows in one vector; [a | a] (AVX-512F forms: no DQ needed). */
static inline __m512 pair(const float *a, const float *b) {
    return _mm512_castpd_ps(_mm512_insertf64x4(_mm512_castps_pd(_mm512_castps256_ps512(_mm256_loadu_ps(a))),
                                               _mm256_castps_pd(_mm256_loadu_ps(b)), 1));
}
static inline __m512 twice(const float *a) { return _mm512_castpd_ps(_mm512_broadcast_f64x4(_mm256_castps_pd(_mm256_loadu_ps(a)))); }

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

/* Eight scores from two rows' chains: a01 / a23 hold row a's lanes [·key0 | ·key1] and [·key2 | ·key3], b01 / b23
 * row b's; lanes [a·k0 … a·k3 | b·k0 … b·k3] · scale. The AVX2 form's tree, ((l0+l1)+(l2+l3)) + ((l4+l5)+(l6+l7)), on whole
 * vectors: each 128-bit quarter holds four lanes of one (row, key) chain set, and adding its even and odd lanes
 * pairwise twice leaves (l0+l1)+(l2+l3) (or the l4..l7 sum) in one lane; the quarters' halves are then added. */
static inline __m256 reduce_2x4(__m512 a01, __m512 a23, __m512 b01, __m512 b23, __m256 scale) {
    __m512 a = _mm512_add_ps(_mm512_shuffle_ps(a01, a23, 0x88), _mm512_shuffle_ps(a01, a23, 0xdd));
    __m512 b = _mm512_add_ps(_mm512_shuffle_ps(b01, b23, 0x88), _mm512_shuffle_ps(b01, b23, 0xdd));
    /* quarter q: [a·k0 | a·k2 | b·k0 | b·k2] (q = 0: lanes 0..3, 1: lanes 4..7), [… k1 | … k3 …] (q = 2, 3) */
    __m512 h = _mm512_add_ps(_mm512_shuffle_ps(a, b, 0x88), _mm512_shuffle_ps(a, b, 0xdd));
    const __m512i lo = _mm512_setr_epi32(0, 8, 1, 9, 2, 10, 3, 11, 0, 0, 0, 0, 0, 0, 0, 0);
    const __m512i hi = _mm512_setr_epi32(4, 12, 5, 13, 6, 14, 7, 15, 0, 0, 0, 0, 0, 0, 0, 0);
    __m512 s = _mm512_add_ps(_mm512_permutexvar_ps(lo, h), _mm512_permutexvar_ps(hi, h));
    return _mm256_mul_ps(_mm512_castps512_ps256(s), scale);
}

static inline void store_2x4(float *pa, float *pb, __m256 s) {
    _mm_storeu_ps(pa, _mm256_castps256_ps128(s));
    _mm_storeu_ps(pb, _mm256_extractf128_ps(s, 1));
}

/* Rows r0..R−1 against keys 0..n_keys−1 (rounded up to 4). With eight rows or more, four rows × four keys at a time
 * (the last one or two rows two at a time) on the block's keys laid out in pairs first, [k_2t[d..d+8) | k_2t+1[d..d+8)]
 * for each d step of 8, so each step of the chains loads a key pair as one vector and shares it between the rows;
 * with fewer rows (decode: one query's heads) the layout does not pay for itself, and each step builds its pairs from
 * the rows where they are. Rows past the end repeat the last one: they compute and store the same values. */
static void scores_rows(const float *const *q, int32_t r0, int32_t R, const float *const *k, int32_t n_keys, int32_t hd,
                        float scale, float (*p)[SP_ATTN_KEY_BLOCK], float *scratch) {
    int32_t n4 = (n_keys + 3) & ~3, r = r0;
    __m256 vs = _mm256_set1_ps(scale);
    if (R - r0 < 8) {
        for (; r < R; r += 2) {
            int32_t rb = r + 1 < R ? r + 1 : r;
            for (int32_t j = 0; j < n4; j += 4) {
                __m512 a01 = _mm512_setzero_ps(), a23 = a01, b01 = a01, b23 = a01;
                for (int32_t d = 0; d < hd; d += 8) {
                    __m512 x01 = pair(k[j] + d, k[j + 1] + d), x23 = pair(k[j + 2] + d, k[j + 3] + d);
                    __m512 qa = twice(q[r] + d), qb = twice(q[rb] + d);
                    a01 = _mm512_fmadd_ps(qa, x01, a01), a23 = _mm512_fmadd_ps(qa, x23, a23);
                    b01 = _mm512_fmadd_ps(qb, x01, b01), b23 = _mm512_fmadd_ps(qb, x23, b23);
                }
                store_2x4(p[r] + j, p[rb] + j, reduce_2x4(a01, a23, b01, b23, vs));
            }
        }
        return;
    }
    for (int32_t t = 0; t < n4 / 2; t++)
        for (int32_t d = 0; d < hd; d += 8)
            _mm512_storeu_ps(scratch + ((int64_t)t * hd + d) * 2, pair(k[2 * t] + d, k[2 * t + 1] + d));
    for (; R - r > 2; r += 4) {
        int32_t rb = r + 1, rc = r + 2, rd = r + 3 < R ? r + 3 : R - 1;
        for (int32_t j = 0; j < n4; j += 4) {
            const float *k01 = scratch + (int64_t)j * hd, *k23 = k01 + 2 * hd;
            __m512 a01 = _mm512_setzero_ps(), a23 = a01, b01 = a01, b23 = a01, c01 = a01, c23 = a01, d01 = a01, d23 = a01;
            for (int32_t d = 0; d < hd; d += 8) {
                __m512 x01 = _mm512_loadu_ps(k01 + 2 * d), x23 = _mm512_loadu_ps(k23 + 2 * d);
                __m512 qa = twice(q[r] + d), qb = twice(q[rb] + d), qc = twice(q[rc] + d), qd = twice(q[rd] + d);
                a01 = _mm512_fmadd_ps(qa, x01, a01), a23 = _mm512_fmadd_ps(qa, x23, a23);
                b01 = _mm512_fmadd_ps(qb, x01, b01), b23 = _mm512_fmadd_ps(qb, x23, b23);
                c01 = _mm512_fmadd_ps(qc, x01, c01), c23 = _mm512_fmadd_ps(qc, x23, c23);
                d01 = _mm512_fmadd_ps(qd, x01, d01), d23 = _mm512_fmadd_ps(qd, x23, d23);
            }
            store_2x4(p[r] + j, p[rb] + j, reduce_2x4(a01, a23, b01, b23, vs));
            store_2x4(p[rc] + j, p[rd] + j, reduce_2x4(c01, c23, d01, d23, vs));
        }
    }
    if (r < R) {
        int32_t rb = r + 1 < R ? r + 1 : r;
        for (int32_t j = 0; j < n4; j += 4) {
            const float *k01 = scratch + (int64_t)j * hd, *k23 = k01 + 2 * hd;
            __m512 a01 = _mm512_setzero_ps(), a23 = a01, b01 = a01, b23 = a01;
            for (int32_t d = 0; d < hd; d += 8) {
                __m512 x01 = _mm512_loadu_ps(k01 + 2 * d), x23 = _mm512_loadu_ps(k23 + 2 * d);
                __m512 qa = twice(q[r] + d), qb = twice(q[rb] + d);
                a01 = _mm512_fmadd_ps(qa, x01, a01), a23 = _mm512_fmadd_ps(qa, x23, a23);
                b01 = _mm512_fmadd_ps(qb, x01, b01), b23 = _mm512_fmadd_ps(qb, x23, b23);
            }
            store_2x4(p[r] + j, p[rb] + j, reduce_2x4(a01, a23, b01, b23, vs));
        }
    }
}

/* Online softmax step of one row over its block of scores p (in place → weights): keys j ≥ nb are not seen. The
 * block's sum is sp_attn_block_sum's: lanes l of the four eight-key quarters added (q0+q1)+(q2+q3), then the tree. */
static inline void softmax_block(float *p, int32_t nb, float *m, float *l, float *corr) {
    __mmask16 m0 = nb >= 16 ? 0xffff : (__mmask16)((1u << nb) - 1), m1 = nb >= 32 ? 0xffff : nb <= 16 ? 0 : (__mmask16)((1u << (nb - 16)) - 1);
    const __m512 ninf = _mm512_set1_ps(-INFINITY);
    __m512 s0 = _mm512_mask_loadu_ps(ninf, m0, p), s1 = _mm512_mask_loadu_ps(ninf, m1, p + 16);
    float bm = _mm512_reduce_max_ps(_mm512_max_ps(s0, s1)), mx = bm > *m ? bm : *m;
    __m512 vmx = _mm512_set1_ps(mx);
    s0 = sp_exp_neg16(_mm512_sub_ps(s0, vmx)), s1 = sp_exp_neg16(_mm512_sub_ps(s1, vmx));
    _mm512_storeu_ps(p, s0), _mm512_storeu_ps(p + 16, s1);
    float c = _mm512_cvtss_f32(sp_exp_neg16(_mm512_set1_ps(*m - mx)));
    /* [q0 | q2] + [q1 | q3], then its halves */
    __m512 z = _mm512_add_ps(_mm512_shuffle_f32x4(s0, s1, 0x44), _mm512_shuffle_f32x4(s0, s1, 0xee));
    __m256 w = _mm256_add_ps(_mm512_castps512_ps256(z), _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(z), 1)));
    __m128 x = _mm_add_ps(_mm256_castps256_ps128(w), _mm256_extractf128_ps(w, 1));
    x = _mm_add_ps(x, _mm_movehl_ps(x, x));
    *l = *l * c + _mm_cvtss_f32(_mm_add_ss(x, _mm_shuffle_ps(x, x, 1)));
    *m = mx, *corr = c;
}

/* o_a = o_a·ca + Σ_{j<na} pa_j · v_j and o_b likewise, W vectors of sixteen dims per row from dim d. */
#define PV_PASS(W)                                                                                                    \
    do {                                                                                                              \
        __m512 A[W], B[W];                                                                                            \
        for (int k = 0; k < W; k++) {                                                                                 \
            A[k] = fresh ? _mm512_setzero_ps() : _mm512_mul_ps(_mm512_loadu_ps(oa + d + 16 * k), va);                 \
            B[k] = fresh ? _mm512_setzero_ps() : _mm512_mul_ps(_mm512_loadu_ps(ob + d + 16 * k), vb);                 \
        }                                                                                                             \
        int32_t j = 0;                                                                                                \
        for (; j < nc; j++) {                                                                                         \
            __m512 P = _mm512_set1_ps(pa[j]), Q = _mm512_set1_ps(pb[j]);                                              \
            for (int k = 0; k < W; k++) {                                                                             \
                __m512 x = _mm512_loadu_ps(v[j] + d + 16 * k);                                                        \
                A[k] = _mm512_fmadd_ps(P, x, A[k]);                                                                   \
                B[k] = _mm512_fmadd_ps(Q, x, B[k]);                                                                   \
            }                                                                                                         \
        }                                                                                                             \
        for (int32_t t = j; t < na; t++)                                                                              \
            for (int k = 0; k < W; k++) A[k] = _mm512_fmadd_ps(_mm512_set1_ps(pa[t]), _mm512_loadu_ps(v[t] + d + 16 * k), A[k]); \
        for (int32_t t = j; t < nb; t++)                                                                              \
            for (int k = 0; k < W; k++) B[k] = _mm512_fmadd_ps(_mm512_set1_ps(pb[t]), _mm512_loadu_ps(v[t] + d + 16 * k), B[k]); \
        for (int k = 0; k < W; k++) {                                                                                 \
            _mm512_storeu_ps(oa + d + 16 * k, A[k]);                                                                  \
            _mm512_storeu_ps(ob + d + 16 * k, B[k]);                                                                  \
        }                                                                                                             \
        d += 16 * W;                                                                                                  \
    } while (0)

/* o_a += Σ_{j<na} pa_j · v_j and o_b likewise (after o ·= corr, or from zero when fresh), 64 dims per pass, then 16. */
static void pv_2(float *oa, float *ob, const float *pa, const float *pb, int32_t na, int32_t nb, float ca, float cb,
                 bool fresh, const float *const *v, int32_t hd) {
    const int32_t nc = na < nb ? na : nb;
    const __m512 va = _mm512_set1_ps(ca), vb = _mm512_set1_ps(cb);
    int32_t d = 0;
    while (hd - d >= 64) PV_PASS(4);
    while (d < hd) PV_PASS(1);
}

#include "attention_tile.h"

void sp_attention_tile_avx512(const sp_attn_args *a, int64_t i0, int64_t i1, int32_t g, float *rows) {
    attention_tile(a, i0, i1, g, rows);
}
