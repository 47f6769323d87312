/* attention_avx2.c — the tiled form of attention (the reference form and the dispatch are in attention.c; the
 * arithmetic both follow, op for op, is stated in ops.h).
 *
 * A tile is a block of query rows × one kv head: its rows are (query i, query head h of the group), at most 64.
 * For each block of 32 keys counted from position 0:
 *   scores   two rows × four keys at a time, head_dim in eight lanes per (row, key): each K row is read from the
 *            cache once per tile and used by every row of it (GQA heads and neighbouring queries alike);
 *   softmax  per row on the block's 32 scores, exp eight lanes at a time, keys past the row's position masked;
 *   p · v    two rows × 32 head dims in registers per pass over the block's V rows.
 * A row takes exactly the steps it would take alone, so the result is the reference's whatever the tile holds.
 * An f16 or int8 cache is converted a block of 32 K and V rows at a time into the tile's own f32 rows, once for
 * every row of the tile. */
#include "ops.h"

#include "exp_avx2.h"

#include <immintrin.h>
#include <stdbool.h>
#include <string.h>

enum { KB = SP_ATTN_KEY_BLOCK, MAX_ROWS = 64 };

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

void sp_kv_to_f32_avx2(int32_t type, const void *row, int32_t head_dim, float *out) {
    if (type == SPLASH_KV_F16) {
        for (int32_t d = 0; d < head_dim; d += 8)
            _mm256_storeu_ps(out + d, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)((const uint16_t *)row + d))));
    } else if (type == SPLASH_KV_INT8) {
        const int8_t *q = row;
        const uint16_t *dh = (const uint16_t *)(q + (head_dim + SP_QK - 1) / SP_QK * SP_QK);
        for (int32_t d = 0; d < head_dim; d += 8) {
            __m256 x = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(q + d))));
            _mm256_storeu_ps(out + d, _mm256_mul_ps(x, _mm256_set1_ps(sp_f16_to_f32(dh[d / SP_QK]))));
        }
    } else {
        memcpy(out, row, sizeof(float) * (size_t)head_dim);
    }
}

void sp_attention_tile_avx2(const sp_attn_args *a, int64_t i0, int64_t i1, int32_t g, float *rows) {
    int32_t G = a->n_heads / a->n_kv_heads, hd = a->head_dim, R = (int32_t)(i1 - i0) * G;
    const float *q[MAX_ROWS];
    float *o[MAX_ROWS], m[MAX_ROWS], l[MAX_ROWS], corr[MAX_ROWS];
    int32_t nb[MAX_ROWS];
    _Alignas(32) float p[MAX_ROWS][KB];
    const float *k[KB + 3], *v[KB];
    const sp_kv_view *kv = a->kv;
    for (int32_t r = 0; r < R; r++) {
        int64_t row = ((i0 + r / G) * a->n_heads + (int64_t)g * G + r % G) * hd;
        q[r] = a->q + row, o[r] = a->out + row, m[r] = -INFINITY, l[r] = 0;
    }
    __m256 scale = _mm256_set1_ps(a->scale);
    int64_t end = a->n_past + i1; /* keys the tile's last row sees */
    for (int64_t p0 = 0; p0 < end; p0 += KB) {
        int32_t n_keys = (int32_t)(end - p0 < KB ? end - p0 : KB);
        for (int32_t j = 0; j < n_keys; j++) {
            const void *ks = sp_kv_at(kv, kv->k, p0 + j, g, hd), *vs = sp_kv_at(kv, kv->v, p0 + j, g, hd);
            if (kv->type == SPLASH_KV_F32) {
                k[j] = ks, v[j] = vs;
                continue;
            }
            sp_kv_to_f32_avx2(kv->type, ks, hd, rows + (int64_t)j * hd);
            sp_kv_to_f32_avx2(kv->type, vs, hd, rows + (int64_t)(KB + j) * hd);
            k[j] = rows + (int64_t)j * hd, v[j] = rows + (int64_t)(KB + j) * hd;
        }
        for (int32_t j = n_keys; j < KB + 3; j++) k[j] = k[n_keys - 1]; /* a group of four past the end: masked below */
        /* rows whose position n_past + i reaches this block: queries i ≥ p0 − n_past */
        int64_t first = p0 - a->n_past > i0 ? p0 - a->n_past : i0;
        int32_t r0 = (int32_t)(first - i0) * G;
        for (int32_t r = r0; r < R; r += 2) {
            int32_t rb = r + 1 < R ? r + 1 : r;
            for (int32_t j = 0; j < n_keys; j += 4) {
                __m256 s = scores_2x4(q[r], q[rb], k + j, hd, scale);
                _mm_storeu_ps(p[r] + j, _mm256_castps256_ps128(s));
                _mm_storeu_ps(p[rb] + j, _mm256_extractf128_ps(s, 1));
            }
        }
        for (int32_t r = r0; r < R; r++) {
            int64_t seen = a->n_past + i0 + r / G + 1 - p0;
            nb[r] = (int32_t)(seen < KB ? seen : KB);
            softmax_block(p[r], nb[r], &m[r], &l[r], &corr[r]);
        }
        /* an odd row out pairs with itself: both halves compute and store the same values */
        for (int32_t r = r0; r < R; r += 2) {
            int32_t rb = r + 1 < R ? r + 1 : r;
            pv_2(o[r], o[rb], p[r], p[rb], nb[r], nb[rb], corr[r], corr[rb], p0 == 0, v, hd);
        }
    }
    for (int32_t r = 0; r < R; r++) {
        __m256 lr = _mm256_set1_ps(l[r]);
        for (int32_t d = 0; d < hd; d += 8) _mm256_storeu_ps(o[r] + d, _mm256_div_ps(_mm256_loadu_ps(o[r] + d), lr));
    }
}
