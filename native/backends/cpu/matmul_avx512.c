/* matmul_avx512.c — AVX-512 (F, BW, VL) + VNNI kernels for Q8 and Q4 weights (compiled with those flags; chosen at
 * run time, matmul.c), the x quantizer in 16 lanes, and the float types' GEMM (AVX2's arithmetic in wider vectors,
 * at the section's head). MLX4/MLX8 and small float batches run AVX2's kernels (`base`).
 *
 * Vector lanes are weight rows: a panel of 16 rows fills a vector, and one (row, x row) pair's arithmetic is
 *
 *     acc = 0;  for each group b in order:  acc = fma(float(dot_b), d_w[b]·d_x[b], acc)
 *                                           Q4 then:  acc = fma(m_w[b], s_x[b], acc)
 *
 * with dot_b the group's exact integer dot product — one lane's chain, whatever the path, so results do not depend
 * on n, on the panel a row falls in, or on the thread (batch invariance, matmul.h):
 *  - GEMM (n > 8): each panel is first repacked into lane order — per group eight 64-byte vectors, vector k holding
 *    bytes 4k..4k+3 of the 16 rows, and the 16 rows' scales as f32 — and then meets the x rows eight at a time:
 *    a group is eight vpdpbusd per x row (x's 4 bytes broadcast), the panel's vectors held in registers for all eight.
 *  - A few x rows (2 ≤ n ≤ 8): the same lane order, but each chunk of the panel is transposed in registers and meets
 *    all n x rows there, without the trip through memory that only a larger n repays.
 *  - GEMV (n = 1): repacking would cost as much as the product, so each row's pair of groups meets x in one vpdpbusd
 *    (lanes 0-7 group b, 8-15 group b+1) and a transpose-and-add of the 16 rows' vectors gives the exact group sums.
 * vpdpbusd multiplies unsigned by signed bytes: x stays signed; Q8 weights enter as w + 128 (w ^ 0x80) and the
 * integer dot product is corrected by −128·Σq_x (sp_act.sum), so it stays exact; Q4 nibbles are unsigned already.
 * |dot_b| ≤ 32·255·127 fits int32 and, after the correction (≤ 32·127·127), converts to float exactly.
 */
#include "matmul_kernels.h"

#include <immintrin.h>
#include <stdbool.h>
#include <stdlib.h>

#define INLINE static inline __attribute__((always_inline))

enum {
    LANES = 16,               /* weight rows per panel */
    GROUP_BYTES = 8 * 64,     /* one group of a repacked panel: eight vectors of 16 rows × 4 bytes */
    X_TILE = 8,               /* x rows per GEMM tile, and the most the few-row path takes */
};
#include "matmul_panel.h"

/* Byte offsets of a panel's 16 rows from its first; lanes past the v valid rows repeat the last one (their results
 * are computed and dropped, and nothing past the matrix is read). */
INLINE __m512i lane_offsets(const sp_matrix *W, int v) {
    __m512i l = _mm512_min_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15), _mm512_set1_epi32(v - 1));
    return _mm512_mullo_epi32(l, _mm512_set1_epi32((int32_t)W->row_bytes));
}

/* The f16 values of groups b and b+1 at `base` (+ each lane's row offset) as f32, one gather for both; when b is the
 * row's last group (b + 1 == nb) the dword read is the one ending with it, which stays inside the row. */
INLINE void gather_halves(const uint8_t *base, __m512i offsets, int64_t b, int64_t nb, __m512 *h0, __m512 *h1) {
    if (b + 1 < nb) {
        __m512i g = _mm512_i32gather_epi32(offsets, base + 2 * b, 1);
        *h0 = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(g));
        *h1 = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(g, 16)));
    } else {
        __m512i g = _mm512_i32gather_epi32(offsets, base + 2 * b - 2, 1);
        *h0 = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(g, 16)));
        *h1 = _mm512_setzero_ps();
    }
}

/* The f16 values of groups [b, b + 8) of the panel's 16 rows, `at` bytes into each row (its scales, or Q4's mins),
 * as f32: out[k] holds group b + k, lane l row l. Eight groups of a row are one 16-byte load, so 16 loads and a
 * transpose replace four gathers (a 16-lane gather costs about as much as the rest of a GEMV step); at the row's
 * last groups (b + 8 > nb) the gathers serve. The values are the same either way. */
INLINE void scales_8(const uint8_t *const row[LANES], __m512i offsets, int64_t at, int64_t b, int64_t nb, __m512 out[8]) {
    if (b + 8 > nb) {
        for (int k = 0; k < 8; k += 2)
            if (b + k < nb) gather_halves(row[0] + at, offsets, b + k, nb, &out[k], &out[k + 1]);
        return;
    }
    __m512i z[4]; /* z[i], 128-bit lane j: row i + 4j's eight halves (the lane an immediate, also in debug builds) */
    for (int i = 0; i < 4; i++) {
#define HALVES(l) _mm_loadu_si128((const __m128i *)(row[l] + at + 2 * b))
        z[i] = _mm512_inserti32x4(_mm512_inserti32x4(_mm512_inserti32x4(_mm512_castsi128_si512(HALVES(i)), HALVES(i + 4), 1), HALVES(i + 8), 2), HALVES(i + 12), 3);
#undef HALVES
    }
    /* per 128-bit lane j, rows 4j..4j+3: u[k] holds groups 2k and 2k + 1, four rows each */
    const __m512i t0 = _mm512_unpacklo_epi16(z[0], z[1]), t1 = _mm512_unpackhi_epi16(z[0], z[1]);
    const __m512i t2 = _mm512_unpacklo_epi16(z[2], z[3]), t3 = _mm512_unpackhi_epi16(z[2], z[3]);
    const __m512i u[4] = {_mm512_unpacklo_epi32(t0, t2), _mm512_unpackhi_epi32(t0, t2), _mm512_unpacklo_epi32(t1, t3), _mm512_unpackhi_epi32(t1, t3)};
    const __m512i order = _mm512_setr_epi64(0, 2, 4, 6, 1, 3, 5, 7); /* the 16 rows of group 2k, then of 2k + 1 */
    for (int k = 0; k < 4; k++) {
        const __m512i g = _mm512_permutexvar_epi64(order, u[k]);
        out[2 * k] = _mm512_cvtph_ps(_mm512_castsi512_si256(g));
        out[2 * k + 1] = _mm512_cvtph_ps(_mm512_extracti64x4_epi64(g, 1));
    }
}

/* ---- GEMM: repacked panels --------------------------------------------------------------------------------------- */

typedef struct panel {
    uint8_t *q; /* [nb][8][16 rows × 4 bytes]: Q8 w + 128, Q4 nibbles */
    float *d;   /* [nb][16] scales */
    float *m;   /* [nb][16] Q4 mins */
} panel;

/* out[k] = dword k of the 32 bytes at `off` of each of the 16 rows: a 16 × 8 dword transpose. Rows a and a + 4 share
 * a vector, 4×4 transposes within 128-bit lanes gather four rows' dword k, and lane shuffles put the 16 in order. */
INLINE void transpose_16x8(const uint8_t *const row[LANES], int64_t off, __m512i out[8]) {
    __m512i z[8], o[2][4];
    for (int l = 0; l < 8; l++) {
        int a = l < 4 ? l : l + 4; /* rows 0-3 with 4-7, 8-11 with 12-15 */
        z[l] = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)(row[a] + off))),
                                  _mm256_loadu_si256((const __m256i *)(row[a + 4] + off)), 1);
    }
    for (int h = 0; h < 2; h++) {
        const __m512i *s = z + 4 * h;
        __m512i t0 = _mm512_unpacklo_epi32(s[0], s[1]), t1 = _mm512_unpackhi_epi32(s[0], s[1]);
        __m512i t2 = _mm512_unpacklo_epi32(s[2], s[3]), t3 = _mm512_unpackhi_epi32(s[2], s[3]);
        o[h][0] = _mm512_unpacklo_epi64(t0, t2), o[h][1] = _mm512_unpackhi_epi64(t0, t2);
        o[h][2] = _mm512_unpacklo_epi64(t1, t3), o[h][3] = _mm512_unpackhi_epi64(t1, t3);
    }
    /* o[h][k] holds, per 128-bit lane: rows 8h..8h+3 dword k, the same rows dword k+4, rows 8h+4..8h+7 dword k, k+4 */
    for (int k = 0; k < 4; k++) {
        out[k] = _mm512_shuffle_i32x4(o[0][k], o[1][k], _MM_SHUFFLE(2, 0, 2, 0));
        out[k + 4] = _mm512_shuffle_i32x4(o[0][k], o[1][k], _MM_SHUFFLE(3, 1, 3, 1));
    }
}

/* Rows [r, r + v) of W (v ≤ 16) into P's lane order. */
INLINE void pack_panel(bool q4, const sp_matrix *W, int64_t r, int v, int64_t nb, const panel *P) {
    const uint8_t *row[LANES];
    for (int l = 0; l < LANES; l++) row[l] = row_ptr(W, r + (l < v ? l : v - 1));
    const __m512i flip = _mm512_set1_epi8((char)0x80), low = _mm512_set1_epi8(15);
    __m512i out[8];
    if (q4) {
        for (int64_t p = 0; p < (nb + 1) / 2; p++) { /* chunk p: group 2p in the low nibbles, 2p + 1 in the high */
            prefetch_ahead(W, r, p, (nb + 1) / 2);
            transpose_16x8(row, p * SP_QK, out);
            __m512i *lo = (__m512i *)(P->q + 2 * p * GROUP_BYTES), *hi = lo + 8;
            for (int k = 0; k < 8; k++) _mm512_store_si512(lo + k, _mm512_and_si512(out[k], low));
            if (2 * p + 1 < nb)
                for (int k = 0; k < 8; k++) _mm512_store_si512(hi + k, _mm512_and_si512(_mm512_srli_epi16(out[k], 4), low));
        }
    } else {
        for (int64_t b = 0; b < nb; b++) {
            prefetch_ahead(W, r, b, nb);
            transpose_16x8(row, b * SP_QK, out);
            __m512i *q = (__m512i *)(P->q + b * GROUP_BYTES);
            for (int k = 0; k < 8; k++) _mm512_store_si512(q + k, _mm512_xor_si512(out[k], flip));
        }
    }
    const __m512i offsets = lane_offsets(W, v);
    const uint8_t *sc = row[0] + scales_at(q4, nb);
    for (int64_t b = 0; b < nb; b += 2) {
        __m512 h0, h1;
        gather_halves(sc, offsets, b, nb, &h0, &h1);
        _mm512_store_ps(P->d + b * LANES, h0);
        if (b + 1 < nb) _mm512_store_ps(P->d + (b + 1) * LANES, h1);
        if (q4) {
            gather_halves(sc + 2 * nb, offsets, b, nb, &h0, &h1);
            _mm512_store_ps(P->m + b * LANES, h0);
            if (b + 1 < nb) _mm512_store_ps(P->m + (b + 1) * LANES, h1);
        }
    }
}

/* A packed x tile of C rows against a packed panel; lane l of x row j goes to y[j·stride + l] where `keep` has l. */
INLINE void gemm_tile(bool q4, const panel *P, const xgroup *xt, int64_t nb, const int C, float *y, int64_t stride,
                      __mmask16 keep) {
    __m512 acc[X_TILE];
    for (int j = 0; j < C; j++) acc[j] = _mm512_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        const xgroup *g = xt + b;
        const __m512i *wq = (const __m512i *)(P->q + b * GROUP_BYTES);
        __m512i w[8], s[X_TILE];
        for (int k = 0; k < 8; k++) w[k] = _mm512_load_si512(wq + k);
        for (int j = 0; j < C; j++) s[j] = q4 ? _mm512_setzero_si512() : _mm512_set1_epi32(g->corr[j]);
        for (int k = 0; k < 8; k++) /* the x rows' chains interleaved, in program order too */
            for (int j = 0; j < C; j++)
                s[j] = _mm512_dpbusd_epi32(s[j], w[k], _mm512_set1_epi32(*(const i32_unaligned *)(g->q[j] + 4 * k)));
        __m512 dw = _mm512_load_ps(P->d + b * LANES), m = q4 ? _mm512_load_ps(P->m + b * LANES) : _mm512_setzero_ps();
        for (int j = 0; j < C; j++) {
            acc[j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s[j]), _mm512_mul_ps(dw, _mm512_set1_ps(g->d[j])), acc[j]);
            if (q4) acc[j] = _mm512_fmadd_ps(m, _mm512_set1_ps(g->s[j]), acc[j]);
        }
    }
    for (int j = 0; j < C; j++) _mm512_mask_storeu_ps(y + j * stride, keep, acc[j]);
}

/* ---- GEMV: rows as they are stored ------------------------------------------------------------------------------- */

/* p[l] holds row l's partial sums of two groups, lanes 0-7 the first, 8-15 the second. Returns the first group's
 * sums of the 16 rows in row order, *second the second's: pairs of rows are interleaved and added (32-bit, then
 * 64-bit units within 128-bit lanes), then 128-bit lanes of the same group are added. Integer sums: exact. */
INLINE __m512i reduce_16x2(const __m512i p[LANES], __m512i *second) {
    __m512i t[8], u[4], v[2];
    for (int i = 0; i < 8; i++)
        t[i] = _mm512_add_epi32(_mm512_unpacklo_epi32(p[2 * i], p[2 * i + 1]), _mm512_unpackhi_epi32(p[2 * i], p[2 * i + 1]));
    for (int i = 0; i < 4; i++) /* per 128-bit lane: rows 4i..4i+3 */
        u[i] = _mm512_add_epi32(_mm512_unpacklo_epi64(t[2 * i], t[2 * i + 1]), _mm512_unpackhi_epi64(t[2 * i], t[2 * i + 1]));
    for (int i = 0; i < 2; i++) /* lanes: first group rows 8i..8i+3, second group the same, then rows 8i+4..8i+7 */
        v[i] = _mm512_add_epi32(_mm512_shuffle_i32x4(u[2 * i], u[2 * i + 1], _MM_SHUFFLE(2, 0, 2, 0)),
                                _mm512_shuffle_i32x4(u[2 * i], u[2 * i + 1], _MM_SHUFFLE(3, 1, 3, 1)));
    *second = _mm512_shuffle_i32x4(v[0], v[1], _MM_SHUFFLE(3, 1, 3, 1));
    return _mm512_shuffle_i32x4(v[0], v[1], _MM_SHUFFLE(2, 0, 2, 0));
}

/* The pair (rows [r, r + v), one x row) for every row of the panel: y[l] for l < v. */
static void gemv_panel_q8(const sp_matrix *W, const int8_t *xq, const float *xd, const int32_t *xsum, float *y,
                          int64_t r, int v, int64_t nb) {
    const uint8_t *row[LANES];
    for (int l = 0; l < LANES; l++) row[l] = row_ptr(W, r + (l < v ? l : v - 1));
    const __m512i flip = _mm512_set1_epi8((char)0x80), offsets = lane_offsets(W, v);
    const int64_t at = scales_at(false, nb);
    __m512 acc = _mm512_setzero_ps(), d[8]; /* groups [b & ~7, +8) */
    for (int64_t b = 0; b < nb; b += 2) {
        const bool two = b + 1 < nb;
        const __mmask64 bytes = two ? ~0ull : 0xffffffffull;
        prefetch_ahead(W, r, b / 2, (nb + 1) / 2);
        __m512i xv = _mm512_maskz_loadu_epi8(bytes, xq + b * SP_QK), p[LANES];
        for (int l = 0; l < LANES; l++)
            p[l] = _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_xor_si512(_mm512_maskz_loadu_epi8(bytes, row[l] + b * SP_QK), flip), xv);
        __m512i g1, g0 = reduce_16x2(p, &g1);
        if (b % 8 == 0) scales_8(row, offsets, at, b, nb, d);
        g0 = _mm512_sub_epi32(g0, _mm512_set1_epi32(128 * xsum[b]));
        acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(g0), _mm512_mul_ps(d[b % 8], _mm512_set1_ps(xd[b])), acc);
        if (two) {
            g1 = _mm512_sub_epi32(g1, _mm512_set1_epi32(128 * xsum[b + 1]));
            acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(g1), _mm512_mul_ps(d[(b + 1) % 8], _mm512_set1_ps(xd[b + 1])), acc);
        }
    }
    _mm512_mask_storeu_ps(y + r, (__mmask16)((1u << v) - 1), acc);
}

/* Q4: one 64-byte load per row covers chunks p and p + 1, i.e. groups b..b+3 (b = 2p): low nibbles are groups b and
 * b + 2 (lanes 0-7, 8-15), high nibbles b + 1 and b + 3; x's groups are paired the same way. */
static void gemv_panel_q4(const sp_matrix *W, const int8_t *xq, const float *xd, const float *xs, float *y, int64_t r,
                          int v, int64_t nb) {
    const uint8_t *row[LANES];
    for (int l = 0; l < LANES; l++) row[l] = row_ptr(W, r + (l < v ? l : v - 1));
    const __m512i low = _mm512_set1_epi8(15), offsets = lane_offsets(W, v);
    const int64_t at = scales_at(true, nb);
    __m512 acc = _mm512_setzero_ps(), d[8], m[8]; /* groups [b & ~7, +8) */
    for (int64_t b = 0; b < nb; b += 4) {
        const int g = nb - b < 4 ? (int)(nb - b) : 4; /* groups in this step */
        const __mmask64 wbytes = g > 2 ? ~0ull : 0xffffffffull;
        const __mmask64 x0 = g > 1 ? ~0ull : 0xffffffffull, x1 = g > 3 ? ~0ull : g > 2 ? 0xffffffffull : 0;
        prefetch_ahead(W, r, b / 4, (nb + 3) / 4);
        __m512i X0 = _mm512_maskz_loadu_epi8(x0, xq + b * SP_QK), X1 = _mm512_maskz_loadu_epi8(x1, xq + (b + 2) * SP_QK);
        __m512i xa = _mm512_shuffle_i64x2(X0, X1, _MM_SHUFFLE(1, 0, 1, 0)); /* groups b, b + 2 */
        __m512i xb = _mm512_shuffle_i64x2(X0, X1, _MM_SHUFFLE(3, 2, 3, 2)); /* groups b + 1, b + 3 */
        __m512i pa[LANES], pb[LANES];
        for (int l = 0; l < LANES; l++) {
            __m512i w = _mm512_maskz_loadu_epi8(wbytes, row[l] + b / 2 * SP_QK);
            pa[l] = _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_and_si512(w, low), xa);
            pb[l] = _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_and_si512(_mm512_srli_epi16(w, 4), low), xb);
        }
        __m512i dot[4];
        dot[0] = reduce_16x2(pa, &dot[2]);
        dot[1] = reduce_16x2(pb, &dot[3]);
        if (b % 8 == 0) {
            scales_8(row, offsets, at, b, nb, d);
            scales_8(row, offsets, at + 2 * nb, b, nb, m);
        }
        for (int k = 0; k < g; k++) {
            acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot[k]), _mm512_mul_ps(d[(b + k) % 8], _mm512_set1_ps(xd[b + k])), acc);
            acc = _mm512_fmadd_ps(m[(b + k) % 8], _mm512_set1_ps(xs[b + k]), acc);
        }
    }
    _mm512_mask_storeu_ps(y + r, (__mmask16)((1u << v) - 1), acc);
}

/* ---- few x rows: panels transposed in registers ------------------------------------------------------------------ */

/* For a few x rows, repacking a panel through memory costs more than the product, and the GEMV's reductions are paid
 * per x row. Here each chunk of the 16 rows is transposed into GEMM's lane order in registers and meets all C x rows
 * at once: the same per-(row, x row) chain as gemm_tile (eight vpdpbusd from the Q8 correction or zero, then the
 * scale and min multiply-adds), so the same bits. */
INLINE void few_panel(bool q4, const sp_matrix *W, const sp_act *x, float *y, int64_t r, int v, const int C) {
    const int64_t nb = x->nb, steps = q4 ? (nb + 1) / 2 : nb;
    const uint8_t *row[LANES];
    for (int l = 0; l < LANES; l++) row[l] = row_ptr(W, r + (l < v ? l : v - 1));
    const __m512i flip = _mm512_set1_epi8((char)0x80), low = _mm512_set1_epi8(15), offsets = lane_offsets(W, v);
    const int64_t at = scales_at(q4, nb);
    __m512 acc[X_TILE];
    for (int j = 0; j < C; j++) acc[j] = _mm512_setzero_ps();
    __m512 d[8], m[8]; /* groups [b0 & ~7, +8) */
    for (int64_t p = 0; p < steps; p++) {
        prefetch_ahead(W, r, p, steps);
        __m512i out[8];
        transpose_16x8(row, p * SP_QK, out);
        const int64_t b0 = q4 ? 2 * p : p;
        if (b0 % 8 == 0) {
            scales_8(row, offsets, at, b0, nb, d);
            if (q4) scales_8(row, offsets, at + 2 * nb, b0, nb, m);
        }
        for (int h = 0; h < (q4 ? 2 : 1) && b0 + h < nb; h++) {
            const int64_t b = b0 + h;
            __m512i w[8], s[X_TILE];
            for (int k = 0; k < 8; k++)
                w[k] = q4 ? _mm512_and_si512(h ? _mm512_srli_epi16(out[k], 4) : out[k], low) : _mm512_xor_si512(out[k], flip);
            for (int j = 0; j < C; j++) s[j] = q4 ? _mm512_setzero_si512() : _mm512_set1_epi32(-128 * x->sum[j * nb + b]);
            for (int k = 0; k < 8; k++)
                for (int j = 0; j < C; j++)
                    s[j] = _mm512_dpbusd_epi32(s[j], w[k], _mm512_set1_epi32(*(const i32_unaligned *)(x->q + (j * nb + b) * SP_QK + 4 * k)));
            const __m512 dw = d[b % 8];
            for (int j = 0; j < C; j++) {
                acc[j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s[j]), _mm512_mul_ps(dw, _mm512_set1_ps(x->d[j * nb + b])), acc[j]);
                if (q4) acc[j] = _mm512_fmadd_ps(m[b % 8], _mm512_set1_ps(x->s[j * nb + b]), acc[j]);
            }
        }
    }
    for (int j = 0; j < C; j++) _mm512_mask_storeu_ps(y + j * W->rows + r, (__mmask16)((1u << v) - 1), acc[j]);
}

INLINE void few_rows(bool q4, const sp_matrix *W, const sp_act *x, float *y, int64_t r0, int64_t r1, const int C) {
    for (int64_t r = r0; r < r1; r += LANES) few_panel(q4, W, x, y, r, r1 - r < LANES ? (int)(r1 - r) : LANES, C);
}

/* ---- rows ---------------------------------------------------------------------------------------------------------- */

static void gemv_rows(bool q4, const sp_matrix *W, const sp_act *x, float *y, int64_t r0, int64_t r1) {
    const int64_t nb = x->nb;
    for (int64_t c = 0; c < x->n; c++) {
        const int8_t *xq = x->q + c * nb * SP_QK;
        const float *xd = x->d + c * nb, *xs = x->s + c * nb;
        for (int64_t r = r0; r < r1; r += LANES) {
            int v = r1 - r < LANES ? (int)(r1 - r) : LANES;
            if (q4) gemv_panel_q4(W, xq, xd, xs, y + c * W->rows, r, v, nb);
            else gemv_panel_q8(W, xq, xd, x->sum + c * nb, y + c * W->rows, r, v, nb);
        }
    }
}

INLINE void rows_quant(bool q4, const sp_matrix *W, const sp_act *x, float *y, int64_t r0, int64_t r1) {
    const int64_t nb = x->nb, tiles = (x->n + X_TILE - 1) / X_TILE;
    const size_t panel_bytes = (size_t)nb * (GROUP_BYTES + 2 * LANES * sizeof(float));
    const size_t bytes = (panel_bytes + (size_t)(tiles * nb) * sizeof(xgroup) + 63) & ~(size_t)63;
    switch (x->n) { /* constant widths: acc in registers; one x row takes the GEMV below */
    case 2: few_rows(q4, W, x, y, r0, r1, 2); return;
    case 3: few_rows(q4, W, x, y, r0, r1, 3); return;
    case 4: few_rows(q4, W, x, y, r0, r1, 4); return;
    case 5: few_rows(q4, W, x, y, r0, r1, 5); return;
    case 6: few_rows(q4, W, x, y, r0, r1, 6); return;
    case 7: few_rows(q4, W, x, y, r0, r1, 7); return;
    case 8: few_rows(q4, W, x, y, r0, r1, 8); return;
    }
    uint8_t *buf = x->n > X_TILE ? aligned_alloc(64, bytes) : NULL;
    if (!buf) { /* one x row, or no memory for the packed copies: the same bits the slower way */
        gemv_rows(q4, W, x, y, r0, r1);
        return;
    }
    const panel P = {.q = buf, .d = (float *)(buf + nb * GROUP_BYTES), .m = (float *)(buf + nb * GROUP_BYTES) + nb * LANES};
    xgroup *xp = (xgroup *)(buf + panel_bytes);
    for (int64_t t = 0; t < tiles; t++) {
        int C = x->n - t * X_TILE < X_TILE ? (int)(x->n - t * X_TILE) : X_TILE;
        pack_x(x, t * X_TILE, C, xp + t * nb);
    }
    for (int64_t r = r0; r < r1; r += LANES) {
        int v = r1 - r < LANES ? (int)(r1 - r) : LANES;
        const __mmask16 keep = (__mmask16)((1u << v) - 1);
        pack_panel(q4, W, r, v, nb, &P);
        for (int64_t t = 0; t < tiles; t++) {
            float *yt = y + t * X_TILE * W->rows + r;
            switch (x->n - t * X_TILE < X_TILE ? x->n - t * X_TILE : X_TILE) { /* constant widths: acc in registers */
            case 8: gemm_tile(q4, &P, xp + t * nb, nb, 8, yt, W->rows, keep); break;
            case 7: gemm_tile(q4, &P, xp + t * nb, nb, 7, yt, W->rows, keep); break;
            case 6: gemm_tile(q4, &P, xp + t * nb, nb, 6, yt, W->rows, keep); break;
            case 5: gemm_tile(q4, &P, xp + t * nb, nb, 5, yt, W->rows, keep); break;
            case 4: gemm_tile(q4, &P, xp + t * nb, nb, 4, yt, W->rows, keep); break;
            case 3: gemm_tile(q4, &P, xp + t * nb, nb, 3, yt, W->rows, keep); break;
            case 2: gemm_tile(q4, &P, xp + t * nb, nb, 2, yt, W->rows, keep); break;
            default: gemm_tile(q4, &P, xp + t * nb, nb, 1, yt, W->rows, keep); break;
            }
        }
    }
    free(buf);
}

static void rows_q8(const sp_matrix *W, const sp_act *x, float *y, int64_t r0, int64_t r1) { rows_quant(false, W, x, y, r0, r1); }
static void rows_q4(const sp_matrix *W, const sp_act *x, float *y, int64_t r0, int64_t r1) { rows_quant(true, W, x, y, r0, r1); }

/* ---- F32 / BF16 / F16 ------------------------------------------------------------------------------------------- */

/* AVX2's arithmetic (matmul_avx2.c: per (row, x row) eight lane sums, lane l over k ≡ l mod 8 with fused
 * multiply-adds, then its horizontal sum and the tail in order), so the bits are AVX2's and its GEMV and small-n
 * kernels serve here too. What changes is the width: one vector holds two x rows' eight lanes, [x_j | x_j+1], against
 * the weight row's eight repeated in both halves, so a 4-row block of widened weights meets six x rows with twelve
 * accumulators. */

/* x's rows in pairs, eight columns at a time: pair p, chunk c = [x_2p[8c..8c+8) | x_2p+1[8c..8c+8)] (an odd last row
 * pairs with itself; its copy is computed and dropped). */
static void pack_x_pairs(const sp_act *x, float *xp) {
    const int64_t chunks = x->cols / 8, pairs = (x->n + 1) / 2;
    for (int64_t p = 0; p < pairs; p++) {
        const float *a = x->f + 2 * p * x->cols, *b = 2 * p + 1 < x->n ? a + x->cols : a;
        for (int64_t c = 0; c < chunks; c++)
            _mm512_storeu_ps(xp + (p * chunks + c) * 16,
                             _mm512_castpd_ps(_mm512_insertf64x4(_mm512_castps_pd(_mm512_castps256_ps512(_mm256_loadu_ps(a + 8 * c))),
                                                                 _mm256_castps_pd(_mm256_loadu_ps(b + 8 * c)), 1)));
    }
}

/* matmul_avx2.c's hsum: the same adds in the same order. */
INLINE float hsum8(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* Rows r..r+3 (widened, wf + i·stride) against x pairs [p, p + P). */
INLINE void float_tile(const float *wf, int64_t stride, const float *xp, const sp_act *x, float *y, int64_t rows,
                       int64_t r, int64_t p, const int P) {
    const int64_t cols = x->cols, chunks = cols / 8;
    __m512 acc[4][3];
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < P; j++) acc[i][j] = _mm512_setzero_ps();
    for (int64_t c = 0; c < chunks; c++) {
        __m512 xv[3];
        for (int j = 0; j < P; j++) xv[j] = _mm512_loadu_ps(xp + ((p + j) * chunks + c) * 16);
        for (int i = 0; i < 4; i++) {
            __m512 wv = _mm512_castpd_ps(_mm512_broadcast_f64x4(_mm256_castps_pd(_mm256_loadu_ps(wf + i * stride + 8 * c))));
            for (int j = 0; j < P; j++) acc[i][j] = _mm512_fmadd_ps(wv, xv[j], acc[i][j]);
        }
    }
    for (int j = 0; j < P; j++)
        for (int h = 0; h < 2 && 2 * (p + j) + h < x->n; h++) {
            const int64_t xr = 2 * (p + j) + h;
            const float *xf = x->f + xr * cols;
            for (int i = 0; i < 4; i++) {
                __m256 half = h ? _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(acc[i][j]), 1))
                                : _mm512_castps512_ps256(acc[i][j]);
                float s = hsum8(half);
                for (int64_t k = chunks * 8; k < cols; k++) s += wf[i * stride + k] * xf[k];
                y[xr * rows + r + i] = s;
            }
        }
}

/* AVX2 takes small batches (its kernels read the weights as stored, which is cheaper there) and the last rows. */
INLINE void rows_float(sp_mtype t, const sp_matrix *W, const sp_act *x, float *y, int64_t r0, int64_t r1) {
    const sp_matmul_rows_fn base = sp_matmul_rows_of(&sp_matmul_kernels_avx2, t);
    const int64_t cols = W->cols, pairs = (x->n + 1) / 2;
    const bool wide = x->n >= 32 || (x->n >= 4 && cols <= 2048); /* AVX2's choice, measured there */
    const size_t wbytes = t == SP_MAT_F32 ? 0 : (size_t)(4 * cols) * sizeof(float);
    const size_t bytes = (wbytes + (size_t)(pairs * (cols / 8) * 16) * sizeof(float) + 63) & ~(size_t)63;
    float *buf = wide && r1 - r0 >= 4 ? aligned_alloc(64, bytes) : NULL;
    if (!buf) { /* (without the buffer, the same bits the AVX2 way) */
        base(W, x, y, r0, r1);
        return;
    }
    float *xp = buf + wbytes / sizeof(float);
    pack_x_pairs(x, xp);
    int64_t r = r0;
    for (; r + 4 <= r1; r += 4) {
        const float *wf = (const float *)row_ptr(W, r);
        int64_t stride = W->row_bytes / 4;
        if (t != SP_MAT_F32) {
            for (int i = 0; i < 4; i++) {
                const uint8_t *row = row_ptr(W, r + i), *next = row + 4 * W->row_bytes;
                if (r + 8 <= r1) /* the next block's row, in flight while this block's arithmetic runs */
                    for (int64_t o = 0; o < cols * 2; o += 64) _mm_prefetch((const char *)next + o, _MM_HINT_T0);
                int64_t k = 0;
                for (; k + 16 <= cols; k += 16) {
                    __m256i h = _mm256_loadu_si256((const __m256i *)((const uint16_t *)row + k));
                    __m512 v = t == SP_MAT_BF16 ? _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16))
                                                : _mm512_cvtph_ps(h);
                    _mm512_storeu_ps(buf + i * cols + k, v);
                }
                for (; k < cols; k++) {
                    uint16_t h = ((const uint16_t *)row)[k];
                    buf[i * cols + k] = t == SP_MAT_BF16 ? sp_bf16_to_f32(h) : _cvtsh_ss(h);
                }
            }
            wf = buf, stride = cols;
        }
        int64_t p = 0;
        for (; p + 3 <= pairs; p += 3) float_tile(wf, stride, xp, x, y, W->rows, r, p, 3);
        if (pairs - p == 2) float_tile(wf, stride, xp, x, y, W->rows, r, p, 2);
        else if (pairs - p == 1) float_tile(wf, stride, xp, x, y, W->rows, r, p, 1);
    }
    if (r < r1) base(W, x, y, r, r1);
    free(buf);
}

static void rows_f32(const sp_matrix *W, const sp_act *x, float *y, int64_t r0, int64_t r1) { rows_float(SP_MAT_F32, W, x, y, r0, r1); }
static void rows_bf16(const sp_matrix *W, const sp_act *x, float *y, int64_t r0, int64_t r1) { rows_float(SP_MAT_BF16, W, x, y, r0, r1); }
static void rows_f16(const sp_matrix *W, const sp_act *x, float *y, int64_t r0, int64_t r1) { rows_float(SP_MAT_F16, W, x, y, r0, r1); }

/* ---- quantizing x ----------------------------------------------------------------------------------------------- */

/* Bit-identical to sp_quantize_act_ref, a group in two vectors and sixteen groups' divisions in one: max and min keep
 * fmaxf's answer for NaN (the second operand comes back), the quotients, products and clamp are the reference's,
 * cvtps rounds to nearest even as lrintf does. */
static void quantize_act(const float *x, int64_t cols, int8_t *q, float *d, float *s, int32_t *sum) {
    const int64_t nb = (cols + SP_QK - 1) / SP_QK, whole = cols / SP_QK;
    const __m512 lo = _mm512_set1_ps(-127.0f), hi = _mm512_set1_ps(127.0f), k127 = _mm512_set1_ps(127.0f);
    for (int64_t b0 = 0; b0 < whole; b0 += 16) {
        const int g = whole - b0 < 16 ? (int)(whole - b0) : 16;
        float amax[16] __attribute__((aligned(64))) = {0}, inv[16] __attribute__((aligned(64)));
        for (int i = 0; i < g; i++) {
            const float *xg = x + (b0 + i) * SP_QK;
            __m512 m = _mm512_max_ps(_mm512_abs_ps(_mm512_loadu_ps(xg)), _mm512_setzero_ps());
            amax[i] = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(_mm512_loadu_ps(xg + 16)), m));
        }
        __m512 a = _mm512_load_ps(amax);
        _mm512_store_ps(inv, _mm512_maskz_div_ps(_mm512_cmp_ps_mask(a, _mm512_setzero_ps(), _CMP_GT_OQ), k127, a));
        __m512 dv = _mm512_div_ps(a, k127);
        int32_t sums[16] __attribute__((aligned(64))) = {0};
        for (int i = 0; i < g; i++) {
            const float *xg = x + (b0 + i) * SP_QK;
            __m512 vi = _mm512_set1_ps(inv[i]);
            __m512i i0 = _mm512_cvtps_epi32(_mm512_min_ps(_mm512_max_ps(_mm512_mul_ps(_mm512_loadu_ps(xg), vi), lo), hi));
            __m512i i1 = _mm512_cvtps_epi32(_mm512_min_ps(_mm512_max_ps(_mm512_mul_ps(_mm512_loadu_ps(xg + 16), vi), lo), hi));
            _mm_storeu_si128((__m128i *)(q + (b0 + i) * SP_QK), _mm512_cvtsepi32_epi8(i0));
            _mm_storeu_si128((__m128i *)(q + (b0 + i) * SP_QK + 16), _mm512_cvtsepi32_epi8(i1));
            sums[i] = _mm512_reduce_add_epi32(_mm512_add_epi32(i0, i1));
        }
        const __mmask16 k = (__mmask16)((1u << g) - 1);
        __m512i si = _mm512_load_si512(sums);
        _mm512_mask_storeu_ps(d + b0, k, dv);
        _mm512_mask_storeu_epi32(sum + b0, k, si);
        _mm512_mask_storeu_ps(s + b0, k, _mm512_mul_ps(dv, _mm512_cvtepi32_ps(si)));
    }
    if (whole < nb) /* the zero-padded last group */
        sp_quantize_act_ref(x + whole * SP_QK, cols - whole * SP_QK, q + whole * SP_QK, d + whole, s + whole, sum + whole);
}

const sp_matmul_kernels sp_matmul_kernels_avx512 = {
    .rows = {[SP_MAT_F32] = rows_f32, [SP_MAT_BF16] = rows_bf16, [SP_MAT_F16] = rows_f16, [SP_MAT_Q8] = rows_q8,
             [SP_MAT_Q4] = rows_q4},
    .quantize_act = quantize_act,
    .base = &sp_matmul_kernels_avx2,
    .row_unit = LANES,
};
