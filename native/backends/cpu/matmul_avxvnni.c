/* matmul_avxvnni.c — AVX-VNNI kernels for Q8 and Q4 weights (AVX2 + FMA + F16C + the VEX-encoded vpdpbusd of CPUs
 * without AVX-512, such as Intel's client cores; chosen at run time, matmul.c). Everything else runs AVX2's
 * kernels (`base`).
 *
 * matmul_avx512.c's design in eight lanes: vector lanes are weight rows, a panel of 8 rows fills a vector, and one
 * (row, x row) pair's arithmetic is
 *
 *     acc = 0;  for each group b in order:  acc = fma(float(dot_b), d_w[b]·d_x[b], acc)
 *                                           Q4 then:  acc = fma(m_w[b], s_x[b], acc)
 *
 * with dot_b the group's exact integer dot product, whatever the path (batch invariance, matmul.h) — and the same
 * chain as the AVX-512 kernels', so the two ISAs agree bit for bit, though only each one's own invariance is promised.
 *  - GEMM (n > 6): each 8-row panel is repacked into lane order (per group eight 32-byte vectors, vector k holding bytes
 *    4k..4k+3 of the 8 rows, and the rows' scales as f32) and meets the x rows six at a time, eight vpdpbusd per
 *    group and x row with x's 4 bytes broadcast.
 *  - A few x rows (2 ≤ n ≤ 6): the same lane order, but each chunk of the panel is transposed in registers and meets
 *    all n x rows there, without the trip through memory that only a larger n repays.
 *  - GEMV (n = 1): each row's group meets x in one vpdpbusd and horizontal adds give the 8 rows' exact group sums.
 * Q8 weights enter vpdpbusd as w + 128 (w ^ 0x80), corrected by −128·Σq_x in integers; Q4 nibbles are unsigned.
 */
#include "matmul_kernels.h"

#include <immintrin.h>
#include <stdbool.h>
#include <stdlib.h>

#define INLINE static inline __attribute__((always_inline))

enum {
    LANES = 8,            /* weight rows per panel */
    GROUP_BYTES = 8 * 32, /* one group of a repacked panel: eight vectors of 8 rows × 4 bytes */
    X_TILE = 6,           /* x rows per GEMM tile (6 accumulators + 6 dot products + a weight vector in 16 registers),
                             and the most the few-row path takes */
};
#include "matmul_panel.h"

/* Byte offsets of a panel's 8 rows from its first; lanes past the v valid rows repeat the last one. */
INLINE __m256i lane_offsets(const sp_matrix *W, int v) {
    __m256i l = _mm256_min_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7), _mm256_set1_epi32(v - 1));
    return _mm256_mullo_epi32(l, _mm256_set1_epi32((int32_t)W->row_bytes));
}

/* The lanes [0, v) of a store. */
INLINE __m256i lane_mask(int v) { return _mm256_cmpgt_epi32(_mm256_set1_epi32(v), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7)); }

/* The f16 values of groups b and b+1 at `base` (+ each lane's row offset) as f32, one gather for both; when b is the
 * row's last group the dword read is the one ending with it, which stays inside the row. */
INLINE void gather_halves(const uint8_t *base, __m256i offsets, int64_t b, int64_t nb, __m256 *h0, __m256 *h1) {
    const __m256i pack = _mm256_setr_epi8(0, 1, 4, 5, 8, 9, 12, 13, -1, -1, -1, -1, -1, -1, -1, -1, /* low halves */
                                          0, 1, 4, 5, 8, 9, 12, 13, -1, -1, -1, -1, -1, -1, -1, -1);
    __m256i g = _mm256_i32gather_epi32((const int *)(base + (b + 1 < nb ? 2 * b : 2 * b - 2)), offsets, 1);
    if (b + 1 >= nb) g = _mm256_srli_epi32(g, 16);
    /* the low 16 bits of each dword, eight of them in order, then the high ones */
    __m256i lo = _mm256_permute4x64_epi64(_mm256_shuffle_epi8(g, pack), 0x08);
    __m256i hi = _mm256_permute4x64_epi64(_mm256_shuffle_epi8(_mm256_srli_epi32(g, 16), pack), 0x08);
    *h0 = _mm256_cvtph_ps(_mm256_castsi256_si128(lo));
    *h1 = b + 1 < nb ? _mm256_cvtph_ps(_mm256_castsi256_si128(hi)) : _mm256_setzero_ps();
}

/* The f16 values of groups [b, b + 8) of the panel's 8 rows, `at` bytes into each row, as f32: out[k] holds group
 * b + k. One 16-byte load per row and a transpose instead of four gathers (matmul_avx512.c's scales_8 in eight
 * lanes); at the row's last groups the gathers serve. */
INLINE void scales_8(const uint8_t *const row[LANES], __m256i offsets, int64_t at, int64_t b, int64_t nb, __m256 out[8]) {
    if (b + 8 > nb) {
        for (int k = 0; k < 8; k += 2)
            if (b + k < nb) gather_halves(row[0] + at, offsets, b + k, nb, &out[k], &out[k + 1]);
        return;
    }
    __m256i z[4]; /* z[i]: row i's eight halves, then row i + 4's */
    for (int i = 0; i < 4; i++)
        z[i] = _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)(row[i] + at + 2 * b))),
                                       _mm_loadu_si128((const __m128i *)(row[i + 4] + at + 2 * b)), 1);
    /* per 128-bit lane j, rows 4j..4j+3: u[k] holds groups 2k and 2k + 1, four rows each */
    const __m256i t0 = _mm256_unpacklo_epi16(z[0], z[1]), t1 = _mm256_unpackhi_epi16(z[0], z[1]);
    const __m256i t2 = _mm256_unpacklo_epi16(z[2], z[3]), t3 = _mm256_unpackhi_epi16(z[2], z[3]);
    const __m256i u[4] = {_mm256_unpacklo_epi32(t0, t2), _mm256_unpackhi_epi32(t0, t2), _mm256_unpacklo_epi32(t1, t3), _mm256_unpackhi_epi32(t1, t3)};
    for (int k = 0; k < 4; k++) {
        const __m256i g = _mm256_permute4x64_epi64(u[k], _MM_SHUFFLE(3, 1, 2, 0)); /* the 8 rows of group 2k, then 2k + 1 */
        out[2 * k] = _mm256_cvtph_ps(_mm256_castsi256_si128(g));
        out[2 * k + 1] = _mm256_cvtph_ps(_mm256_extracti128_si256(g, 1));
    }
}

/* ---- GEMM: repacked panels --------------------------------------------------------------------------------------- */

typedef struct panel {
    uint8_t *q; /* [nb][8][8 rows × 4 bytes]: Q8 w + 128, Q4 nibbles */
    float *d;   /* [nb][8] scales */
    float *m;   /* [nb][8] Q4 mins */
} panel;

/* out[k] = dword k of the 32 bytes at `off` of each of the 8 rows: an 8 × 8 dword transpose (4×4 transposes within
 * 128-bit lanes, then the lanes swapped into place). */
INLINE void transpose_8x8(const uint8_t *const row[LANES], int64_t off, __m256i out[8]) {
    __m256i z[8], t[8];
    for (int l = 0; l < 4; l++) /* rows l and l + 4: their dwords 0-3 in the low lane and 4-7 in the high one */
        z[l] = _mm256_loadu_si256((const __m256i *)(row[l] + off)), z[l + 4] = _mm256_loadu_si256((const __m256i *)(row[l + 4] + off));
    for (int h = 0; h < 2; h++) {
        const __m256i *s = z + 4 * h;
        __m256i t0 = _mm256_unpacklo_epi32(s[0], s[1]), t1 = _mm256_unpackhi_epi32(s[0], s[1]);
        __m256i t2 = _mm256_unpacklo_epi32(s[2], s[3]), t3 = _mm256_unpackhi_epi32(s[2], s[3]);
        t[4 * h + 0] = _mm256_unpacklo_epi64(t0, t2), t[4 * h + 1] = _mm256_unpackhi_epi64(t0, t2);
        t[4 * h + 2] = _mm256_unpacklo_epi64(t1, t3), t[4 * h + 3] = _mm256_unpackhi_epi64(t1, t3);
    }
    /* t[4h + k] holds rows 4h..4h+3: dword k in the low lane, dword k + 4 in the high one */
    for (int k = 0; k < 4; k++) {
        out[k] = _mm256_permute2x128_si256(t[k], t[4 + k], 0x20);
        out[k + 4] = _mm256_permute2x128_si256(t[k], t[4 + k], 0x31);
    }
}

/* Rows [r, r + v) of W (v ≤ 8) into P's lane order. */
INLINE void pack_panel(bool q4, const sp_matrix *W, int64_t r, int v, int64_t nb, const panel *P) {
    const uint8_t *row[LANES];
    for (int l = 0; l < LANES; l++) row[l] = row_ptr(W, r + (l < v ? l : v - 1));
    const __m256i flip = _mm256_set1_epi8((char)0x80), low = _mm256_set1_epi8(15);
    __m256i out[8];
    if (q4) {
        for (int64_t p = 0; p < (nb + 1) / 2; p++) { /* chunk p: group 2p in the low nibbles, 2p + 1 in the high */
            prefetch_ahead(W, r, p, (nb + 1) / 2);
            transpose_8x8(row, p * SP_QK, out);
            __m256i *lo = (__m256i *)(P->q + 2 * p * GROUP_BYTES), *hi = lo + 8;
            for (int k = 0; k < 8; k++) _mm256_store_si256(lo + k, _mm256_and_si256(out[k], low));
            if (2 * p + 1 < nb)
                for (int k = 0; k < 8; k++) _mm256_store_si256(hi + k, _mm256_and_si256(_mm256_srli_epi16(out[k], 4), low));
        }
    } else {
        for (int64_t b = 0; b < nb; b++) {
            prefetch_ahead(W, r, b, nb);
            transpose_8x8(row, b * SP_QK, out);
            __m256i *q = (__m256i *)(P->q + b * GROUP_BYTES);
            for (int k = 0; k < 8; k++) _mm256_store_si256(q + k, _mm256_xor_si256(out[k], flip));
        }
    }
    const __m256i offsets = lane_offsets(W, v);
    const uint8_t *sc = row[0] + scales_at(q4, nb);
    for (int64_t b = 0; b < nb; b += 2) {
        __m256 h0, h1;
        gather_halves(sc, offsets, b, nb, &h0, &h1);
        _mm256_store_ps(P->d + b * LANES, h0);
        if (b + 1 < nb) _mm256_store_ps(P->d + (b + 1) * LANES, h1);
        if (q4) {
            gather_halves(sc + 2 * nb, offsets, b, nb, &h0, &h1);
            _mm256_store_ps(P->m + b * LANES, h0);
            if (b + 1 < nb) _mm256_store_ps(P->m + (b + 1) * LANES, h1);
        }
    }
}

/* A packed x tile of C rows against a packed panel; lane l of x row j goes to y[j·stride + l] for l < v. */
INLINE void gemm_tile(bool q4, const panel *P, const xgroup *xt, int64_t nb, const int C, float *y, int64_t stride, int v) {
    __m256 acc[X_TILE];
    for (int j = 0; j < C; j++) acc[j] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        const xgroup *g = xt + b;
        const __m256i *wq = (const __m256i *)(P->q + b * GROUP_BYTES);
        __m256i s[X_TILE];
        for (int j = 0; j < C; j++) s[j] = q4 ? _mm256_setzero_si256() : _mm256_set1_epi32(g->corr[j]);
        for (int k = 0; k < 8; k++) {
            __m256i w = _mm256_load_si256(wq + k);
            for (int j = 0; j < C; j++)
                s[j] = _mm256_dpbusd_avx_epi32(s[j], w, _mm256_set1_epi32(*(const i32_unaligned *)(g->q[j] + 4 * k)));
        }
        __m256 dw = _mm256_load_ps(P->d + b * LANES);
        for (int j = 0; j < C; j++) {
            acc[j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s[j]), _mm256_mul_ps(dw, _mm256_set1_ps(g->d[j])), acc[j]);
            if (q4) acc[j] = _mm256_fmadd_ps(_mm256_load_ps(P->m + b * LANES), _mm256_set1_ps(g->s[j]), acc[j]);
        }
    }
    const __m256i keep = lane_mask(v);
    for (int j = 0; j < C; j++) _mm256_maskstore_ps(y + j * stride, keep, acc[j]);
}

/* ---- GEMV: rows as they are stored ------------------------------------------------------------------------------- */

/* p[l] holds row l's eight partial sums of one group: returns the 8 rows' sums in row order (horizontal adds of row
 * pairs, then of pairs of pairs, then the two 128-bit lanes). Integer sums: exact. */
INLINE __m256i reduce_8(const __m256i p[LANES]) {
    __m256i a = _mm256_hadd_epi32(_mm256_hadd_epi32(p[0], p[1]), _mm256_hadd_epi32(p[2], p[3])); /* rows 0-3 per lane */
    __m256i b = _mm256_hadd_epi32(_mm256_hadd_epi32(p[4], p[5]), _mm256_hadd_epi32(p[6], p[7])); /* rows 4-7 per lane */
    return _mm256_add_epi32(_mm256_permute2x128_si256(a, b, 0x20), _mm256_permute2x128_si256(a, b, 0x31));
}

/* The pair (rows [r, r + v), one x row) for every row of the panel: y[l] for l < v. */
static void gemv_panel(bool q4, const sp_matrix *W, const int8_t *xq, const float *xd, const float *xs,
                       const int32_t *xsum, float *y, int64_t r, int v, int64_t nb) {
    const uint8_t *row[LANES];
    for (int l = 0; l < LANES; l++) row[l] = row_ptr(W, r + (l < v ? l : v - 1));
    const __m256i flip = _mm256_set1_epi8((char)0x80), low = _mm256_set1_epi8(15), offsets = lane_offsets(W, v);
    const int64_t at = scales_at(q4, nb);
    __m256 acc = _mm256_setzero_ps(), d[8], m[8]; /* groups [b & ~7, +8) */
    for (int64_t b = 0; b < nb; b += 2) { /* two groups: Q4's chunk, Q8's next two */
        const bool two = b + 1 < nb;
        prefetch_ahead(W, r, b / 2, (nb + 1) / 2);
        __m256i x0 = _mm256_loadu_si256((const __m256i *)(xq + b * SP_QK)), p0[LANES], p1[LANES];
        __m256i x1 = two ? _mm256_loadu_si256((const __m256i *)(xq + (b + 1) * SP_QK)) : _mm256_setzero_si256();
        for (int l = 0; l < LANES; l++) {
            if (q4) {
                __m256i c = _mm256_loadu_si256((const __m256i *)(row[l] + b / 2 * SP_QK));
                p0[l] = _mm256_dpbusd_avx_epi32(_mm256_setzero_si256(), _mm256_and_si256(c, low), x0);
                p1[l] = _mm256_dpbusd_avx_epi32(_mm256_setzero_si256(), _mm256_and_si256(_mm256_srli_epi16(c, 4), low), x1);
            } else {
                __m256i w0 = _mm256_loadu_si256((const __m256i *)(row[l] + b * SP_QK));
                p0[l] = _mm256_dpbusd_avx_epi32(_mm256_setzero_si256(), _mm256_xor_si256(w0, flip), x0);
                if (two) {
                    __m256i w1 = _mm256_loadu_si256((const __m256i *)(row[l] + (b + 1) * SP_QK));
                    p1[l] = _mm256_dpbusd_avx_epi32(_mm256_setzero_si256(), _mm256_xor_si256(w1, flip), x1);
                }
            }
        }
        if (b % 8 == 0) {
            scales_8(row, offsets, at, b, nb, d);
            if (q4) scales_8(row, offsets, at + 2 * nb, b, nb, m);
        }
        const __m256 d0 = d[b % 8], d1 = d[(b + 1) % 8];
        const __m256 m0 = q4 ? m[b % 8] : _mm256_setzero_ps(), m1 = q4 ? m[(b + 1) % 8] : _mm256_setzero_ps();
        __m256i g0 = reduce_8(p0);
        if (!q4) g0 = _mm256_sub_epi32(g0, _mm256_set1_epi32(128 * xsum[b]));
        acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(g0), _mm256_mul_ps(d0, _mm256_set1_ps(xd[b])), acc);
        if (q4) acc = _mm256_fmadd_ps(m0, _mm256_set1_ps(xs[b]), acc);
        if (two) {
            __m256i g1 = reduce_8(p1);
            if (!q4) g1 = _mm256_sub_epi32(g1, _mm256_set1_epi32(128 * xsum[b + 1]));
            acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(g1), _mm256_mul_ps(d1, _mm256_set1_ps(xd[b + 1])), acc);
            if (q4) acc = _mm256_fmadd_ps(m1, _mm256_set1_ps(xs[b + 1]), acc);
        }
    }
    _mm256_maskstore_ps(y + r, lane_mask(v), acc);
}

/* ---- few x rows: panels transposed in registers ------------------------------------------------------------------ */

/* matmul_avx512.c's few_panel in eight lanes: each chunk of the 8 rows transposed into GEMM's lane order in registers
 * meets all C x rows at once, with gemm_tile's per-(row, x row) chain, so the same bits. */
INLINE void few_panel(bool q4, const sp_matrix *W, const sp_act *x, float *y, int64_t r, int v, const int C) {
    const int64_t nb = x->nb, steps = q4 ? (nb + 1) / 2 : nb;
    const uint8_t *row[LANES];
    for (int l = 0; l < LANES; l++) row[l] = row_ptr(W, r + (l < v ? l : v - 1));
    const __m256i flip = _mm256_set1_epi8((char)0x80), low = _mm256_set1_epi8(15), offsets = lane_offsets(W, v);
    const int64_t at = scales_at(q4, nb);
    __m256 acc[X_TILE];
    for (int j = 0; j < C; j++) acc[j] = _mm256_setzero_ps();
    __m256 d[8], m[8]; /* groups [b0 & ~7, +8) */
    for (int64_t p = 0; p < steps; p++) {
        prefetch_ahead(W, r, p, steps);
        __m256i out[8];
        transpose_8x8(row, p * SP_QK, out);
        const int64_t b0 = q4 ? 2 * p : p;
        if (b0 % 8 == 0) {
            scales_8(row, offsets, at, b0, nb, d);
            if (q4) scales_8(row, offsets, at + 2 * nb, b0, nb, m);
        }
        for (int h = 0; h < (q4 ? 2 : 1) && b0 + h < nb; h++) {
            const int64_t b = b0 + h;
            __m256i s[X_TILE];
            for (int j = 0; j < C; j++) s[j] = q4 ? _mm256_setzero_si256() : _mm256_set1_epi32(-128 * x->sum[j * nb + b]);
            for (int k = 0; k < 8; k++) {
                __m256i w = q4 ? _mm256_and_si256(h ? _mm256_srli_epi16(out[k], 4) : out[k], low) : _mm256_xor_si256(out[k], flip);
                for (int j = 0; j < C; j++)
                    s[j] = _mm256_dpbusd_avx_epi32(s[j], w, _mm256_set1_epi32(*(const i32_unaligned *)(x->q + (j * nb + b) * SP_QK + 4 * k)));
            }
            const __m256 dw = d[b % 8];
            for (int j = 0; j < C; j++) {
                acc[j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s[j]), _mm256_mul_ps(dw, _mm256_set1_ps(x->d[j * nb + b])), acc[j]);
                if (q4) acc[j] = _mm256_fmadd_ps(m[b % 8], _mm256_set1_ps(x->s[j * nb + b]), acc[j]);
            }
        }
    }
    const __m256i keep = lane_mask(v);
    for (int j = 0; j < C; j++) _mm256_maskstore_ps(y + j * W->rows + r, keep, acc[j]);
}

INLINE void few_rows(bool q4, const sp_matrix *W, const sp_act *x, float *y, int64_t r0, int64_t r1, const int C) {
    for (int64_t r = r0; r < r1; r += LANES) few_panel(q4, W, x, y, r, r1 - r < LANES ? (int)(r1 - r) : LANES, C);
}

/* ---- rows ---------------------------------------------------------------------------------------------------------- */

static void gemv_rows(bool q4, const sp_matrix *W, const sp_act *x, float *y, int64_t r0, int64_t r1) {
    const int64_t nb = x->nb;
    for (int64_t c = 0; c < x->n; c++)
        for (int64_t r = r0; r < r1; r += LANES)
            gemv_panel(q4, W, x->q + c * nb * SP_QK, x->d + c * nb, x->s + c * nb, x->sum + c * nb, y + c * W->rows, r,
                       r1 - r < LANES ? (int)(r1 - r) : LANES, nb);
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
    }
    uint8_t *buf = x->n > X_TILE ? aligned_alloc(64, bytes) : NULL;
    if (!buf) { /* one x row, or no memory for the packed copies: the same bits the slower way */
        gemv_rows(q4, W, x, y, r0, r1);
        return;
    }
    const panel P = {.q = buf, .d = (float *)(buf + nb * GROUP_BYTES), .m = (float *)(buf + nb * GROUP_BYTES) + nb * LANES};
    xgroup *xp = (xgroup *)(buf + panel_bytes);
    for (int64_t t = 0; t < tiles; t++) pack_x(x, t * X_TILE, x->n - t * X_TILE < X_TILE ? (int)(x->n - t * X_TILE) : X_TILE, xp + t * nb);
    for (int64_t r = r0; r < r1; r += LANES) {
        int v = r1 - r < LANES ? (int)(r1 - r) : LANES;
        pack_panel(q4, W, r, v, nb, &P);
        for (int64_t t = 0; t < tiles; t++) {
            float *yt = y + t * X_TILE * W->rows + r;
            switch (x->n - t * X_TILE < X_TILE ? x->n - t * X_TILE : X_TILE) { /* constant widths: acc in registers */
            case 6: gemm_tile(q4, &P, xp + t * nb, nb, 6, yt, W->rows, v); break;
            case 5: gemm_tile(q4, &P, xp + t * nb, nb, 5, yt, W->rows, v); break;
            case 4: gemm_tile(q4, &P, xp + t * nb, nb, 4, yt, W->rows, v); break;
            case 3: gemm_tile(q4, &P, xp + t * nb, nb, 3, yt, W->rows, v); break;
            case 2: gemm_tile(q4, &P, xp + t * nb, nb, 2, yt, W->rows, v); break;
            default: gemm_tile(q4, &P, xp + t * nb, nb, 1, yt, W->rows, v); break;
            }
        }
    }
    free(buf);
}

static void rows_q8(const sp_matrix *W, const sp_act *x, float *y, int64_t r0, int64_t r1) { rows_quant(false, W, x, y, r0, r1); }
static void rows_q4(const sp_matrix *W, const sp_act *x, float *y, int64_t r0, int64_t r1) { rows_quant(true, W, x, y, r0, r1); }

const sp_matmul_kernels sp_matmul_kernels_avxvnni = {
    .rows = {[SP_MAT_Q8] = rows_q8, [SP_MAT_Q4] = rows_q4},
    .base = &sp_matmul_kernels_avx2,
    .row_unit = LANES,
};
