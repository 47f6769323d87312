/* matmul_avx2.c — AVX2 + FMA + F16C matmul kernels (compiled with those flags; chosen at run time, matmul.c).
 *
 * Each kernel computes tiles of R weight rows × C x rows with one accumulator per pair. GEMV (n = 1) runs 4×1
 * tiles: four independent FMA chains keep the loads flowing. GEMM runs 4×2 tiles (Q8/Q4 with ≥ 4 x rows: 2×4;
 * float weights over many x rows: 4×3 on a widened block) over each 4-row block while the block's weights sit in
 * L1/L2, so a weight byte comes from memory once for all n inputs. A pair's operation
 * sequence does not depend on the tile it is in, so results are batch-invariant (matmul.h).
 *
 * Q8 × int8 x: _mm256_maddubs_epi16 multiplies unsigned by signed bytes, so the weight's sign moves onto x
 * (|w| · sign(x, w) = w · x); |w|, |x| <= 127 keep each pair sum below 32767 (no saturation).
 * Q4 × int8 x: nibbles are already unsigned; the offset term m·d_x·Σq_x is a separate per-pair dot over groups.
 * MLX4 × int8 x (groups of 64): low nibbles are the even elements, high nibbles the odd ones, and x comes split the
 * same way (sp_quantize_act_mlx), so a group is two maddubs. MLX8: q in 0..255 against |x| <= 127 could saturate
 * maddubs' pair sums (255·127·2 > 32767), so the kernel multiplies q − 128 (w ^ 0x80, signed, with the Q8 sign
 * trick; 128·127·2 = 32512 fits) and the bias absorbs the rest: q·s + b = (q − 128)·s + (b + 128·s).
 */
#include "matmul_kernels.h"

#include <immintrin.h>
#include <stdbool.h>

#define INLINE static inline __attribute__((always_inline))

INLINE float hsum(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

INLINE const uint8_t *row_ptr(const sp_matrix *W, int64_t r) { return (const uint8_t *)W->data + r * W->row_bytes; }

/* Prefetches bytes [from, to) of each of the R rows after this tile (first row `row`), while the tile is at the same
 * fraction of its rows. Without it the hardware prefetcher retrains on R new streams at every tile and a GEMV from
 * DRAM runs markedly slower (matmul_lab, native-core section of BENCHMARKS.md). Prefetching past the matrix is
 * harmless. */
INLINE void prefetch_next_tile(const sp_matrix *W, const uint8_t *row, const int R, int64_t from, int64_t to) {
    const uint8_t *next = row + R * W->row_bytes;
    for (int i = 0; i < R; i++)
        for (int64_t o = from & ~(int64_t)63; o < to; o += 64) _mm_prefetch((const char *)next + i * W->row_bytes + o, _MM_HINT_T0);
}

/* ---- F32 / BF16 / F16 ------------------------------------------------------------------------------------------ */

INLINE __m256 load8(sp_mtype t, const uint8_t *row, int64_t k) {
    if (t == SP_MAT_F32) return _mm256_loadu_ps((const float *)row + k);
    __m128i h = _mm_loadu_si128((const __m128i *)((const uint16_t *)row + k));
    if (t == SP_MAT_BF16) return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
    return _mm256_cvtph_ps(h);
}

INLINE float load1(sp_mtype t, const uint8_t *row, int64_t k) {
    if (t == SP_MAT_F32) return ((const float *)row)[k];
    if (t == SP_MAT_BF16) return sp_bf16_to_f32(((const uint16_t *)row)[k]);
    return _cvtsh_ss(((const uint16_t *)row)[k]);
}

INLINE void float_tile(sp_mtype t, const sp_matrix *W, const sp_act *x, float *y, int64_t r, int64_t c, const int R,
                       const int C) {
    const int64_t cols = W->cols;
    const uint8_t *w[4];
    const float *xr[4];
    __m256 acc[4][2];
    for (int i = 0; i < R; i++) w[i] = row_ptr(W, r + i);
    for (int j = 0; j < C; j++) xr[j] = x->f + (c + j) * cols;
    for (int i = 0; i < R; i++)
        for (int j = 0; j < C; j++) acc[i][j] = _mm256_setzero_ps();
    const int64_t esize = t == SP_MAT_F32 ? 4 : 2;
    int64_t k = 0;
    for (; k + 8 <= cols; k += 8) {
        if (k % 64 == 0) prefetch_next_tile(W, w[0], R, k * esize, (k + 64) * esize);
        __m256 xv[4];
        for (int j = 0; j < C; j++) xv[j] = _mm256_loadu_ps(xr[j] + k);
        for (int i = 0; i < R; i++) {
            __m256 wv = load8(t, w[i], k);
            for (int j = 0; j < C; j++) acc[i][j] = _mm256_fmadd_ps(wv, xv[j], acc[i][j]);
        }
    }
    for (int i = 0; i < R; i++) {
        for (int j = 0; j < C; j++) {
            float s = hsum(acc[i][j]);
            for (int64_t kk = k; kk < cols; kk++) s += load1(t, w[i], kk) * xr[j][kk];
            y[(c + j) * W->rows + r + i] = s;
        }
    }
}

/* 4-row blocks with 4×2 then 4×1 tiles over x; the matrix's last rows one at a time. */
#define TILED_ROWS(name, tile, ...)                                                                                   \
    static void name(const sp_matrix *W, const sp_act *x, float *y, int64_t r0, int64_t r1) {                        \
        int64_t r = r0;                                                                                               \
        for (; r + 4 <= r1; r += 4) {                                                                                 \
            int64_t c = 0;                                                                                            \
            for (; c + 2 <= x->n; c += 2) tile(__VA_ARGS__ W, x, y, r, c, 4, 2);                                      \
            for (; c < x->n; c++) tile(__VA_ARGS__ W, x, y, r, c, 4, 1);                                              \
        }                                                                                                             \
        for (; r < r1; r++)                                                                                           \
            for (int64_t c = 0; c < x->n; c++) tile(__VA_ARGS__ W, x, y, r, c, 1, 1);                                 \
    }

/* 4-row blocks with 4×2 then 4×1 tiles over x; the matrix's last rows one at a time (TILED_ROWS, for a type given
 * by the caller: inlined into each type's function, so t is a constant there). */
INLINE void rows_float_tiles(sp_mtype t, const sp_matrix *W, const sp_act *x, float *y, int64_t r0, int64_t r1) {
    int64_t r = r0;
    for (; r + 4 <= r1; r += 4) {
        int64_t c = 0;
        for (; c + 2 <= x->n; c += 2) float_tile(t, W, x, y, r, c, 4, 2);
        for (; c < x->n; c++) float_tile(t, W, x, y, r, c, 4, 1);
    }
    for (; r < r1; r++)
        for (int64_t c = 0; c < x->n; c++) float_tile(t, W, x, y, r, c, 1, 1);
}

/* GEMM over many x rows with the weights widened first: each 4-row block is converted to f32 once (bf16/f16; f32
 * rows are used in place) and then meets the x rows three at a time from L1/L2, twelve accumulators and no
 * conversion in the inner loop. A pair's operations are float_tile's (the same lanes, the same widened values, the
 * same sums), so the bits do not depend on which path ran. Measured one thread (BENCHMARKS.md, native-core section):
 * 1.3–2× float_tile's rate once x has ≥ 4 rows and the block fits L1 (cols ≤ 2048), and at ≥ 32 rows for wide
 * matrices; below that, converting first costs more than it saves (an extra store and reload per weight, and
 * DRAM rows no longer overlap the arithmetic). */
INLINE void wide_tile(const float *wf, int64_t stride, const sp_matrix *W, const sp_act *x, float *y, int64_t r,
                      int64_t c, const int R, const int C) {
    const int64_t cols = W->cols;
    const float *xr[3];
    __m256 acc[4][3];
    for (int j = 0; j < C; j++) xr[j] = x->f + (c + j) * cols;
    for (int i = 0; i < R; i++)
        for (int j = 0; j < C; j++) acc[i][j] = _mm256_setzero_ps();
    int64_t k = 0;
    for (; k + 8 <= cols; k += 8) {
        __m256 xv[3];
        for (int j = 0; j < C; j++) xv[j] = _mm256_loadu_ps(xr[j] + k);
        for (int i = 0; i < R; i++) {
            __m256 wv = _mm256_loadu_ps(wf + i * stride + k);
            for (int j = 0; j < C; j++) acc[i][j] = _mm256_fmadd_ps(wv, xv[j], acc[i][j]);
        }
    }
    for (int i = 0; i < R; i++)
        for (int j = 0; j < C; j++) {
            float s = hsum(acc[i][j]);
            for (int64_t kk = k; kk < cols; kk++) s += wf[i * stride + kk] * xr[j][kk];
            y[(c + j) * W->rows + r + i] = s;
        }
}

INLINE void rows_float(sp_mtype t, const sp_matrix *W, const sp_act *x, float *y, int64_t r0, int64_t r1) {
    const int64_t cols = W->cols;
    bool wide = x->n >= 32 || (x->n >= 4 && cols <= 2048);
    float *buf = wide && t != SP_MAT_F32 ? aligned_alloc(32, (size_t)(4 * cols * 4 + 31) & ~(size_t)31) : NULL;
    if (!wide || (t != SP_MAT_F32 && !buf)) { /* (without the buffer, the same bits the slower way) */
        rows_float_tiles(t, W, x, y, r0, r1);
        return;
    }
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
                for (; k + 8 <= cols; k += 8) _mm256_storeu_ps(buf + i * cols + k, load8(t, row, k));
                for (; k < cols; k++) buf[i * cols + k] = load1(t, row, k);
            }
            wf = buf, stride = cols;
        }
        int64_t c = 0;
        for (; c + 3 <= x->n; c += 3) wide_tile(wf, stride, W, x, y, r, c, 4, 3);
        for (; c + 2 <= x->n; c += 2) wide_tile(wf, stride, W, x, y, r, c, 4, 2);
        for (; c < x->n; c++) wide_tile(wf, stride, W, x, y, r, c, 4, 1);
    }
    for (; r < r1; r++)
        for (int64_t c = 0; c < x->n; c++) float_tile(t, W, x, y, r, c, 1, 1);
    free(buf);
}

static void rows_f32(const sp_matrix *W, const sp_act *x, float *y, int64_t r0, int64_t r1) { rows_float(SP_MAT_F32, W, x, y, r0, r1); }
static void rows_bf16(const sp_matrix *W, const sp_act *x, float *y, int64_t r0, int64_t r1) { rows_float(SP_MAT_BF16, W, x, y, r0, r1); }
static void rows_f16(const sp_matrix *W, const sp_act *x, float *y, int64_t r0, int64_t r1) { rows_float(SP_MAT_F16, W, x, y, r0, r1); }

/* ---- Q8 and Q4 -------------------------------------------------------------------------------------------------- */

/* Pointers of one tile: R ≤ 4 weight rows (quants, f16 scales) and C ≤ X_MAX x rows (int8 quants, scales). */
enum { X_MAX = 8 };
typedef struct qtile {
    const uint8_t *wq[4];
    const uint16_t *wd[4];
    const int8_t *xq[X_MAX];
    const float *xd[X_MAX];
} qtile;

/* sc[i][j][k] = d_w[i][b+k] · d_x[j][b+k] for groups b..b+n-1 (n <= 8): one vector multiply per pair per eight
 * groups instead of a scalar multiply and a broadcast per group; the products are the same floats either way. */
INLINE void scales(float sc[4][X_MAX][8], const qtile *t, int64_t b, int64_t n, const int R, const int C) {
    if (n == 8) {
        for (int i = 0; i < R; i++) {
            __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(t->wd[i] + b)));
            for (int j = 0; j < C; j++) _mm256_store_ps(sc[i][j], _mm256_mul_ps(dw, _mm256_loadu_ps(t->xd[j] + b)));
        }
    } else {
        for (int i = 0; i < R; i++)
            for (int j = 0; j < C; j++)
                for (int64_t k = 0; k < n; k++) sc[i][j][k] = _cvtsh_ss(t->wd[i][b + k]) * t->xd[j][b + k];
    }
}

/* One group of every pair: acc[i][j] += float(Σ w·x over the group) · sc[i][j][k]. Up to 4 x rows stay in registers
 * for the tile's weight rows; more (a one-row tile) are read where they are used. */
INLINE void q8_group(const qtile *t, int64_t b, int k, const float sc[4][X_MAX][8], __m256 acc[4][X_MAX], const int R, const int C) {
    const __m256i ones = _mm256_set1_epi16(1);
    __m256i xv[4];
    for (int j = 0; j < C && C <= 4; j++) xv[j] = _mm256_loadu_si256((const __m256i *)(t->xq[j] + b * SP_QK));
    for (int i = 0; i < R; i++) {
        __m256i wv = _mm256_loadu_si256((const __m256i *)(t->wq[i] + b * SP_QK));
        __m256i aw = _mm256_sign_epi8(wv, wv);
        for (int j = 0; j < C; j++) {
            __m256i xj = C <= 4 ? xv[j] : _mm256_loadu_si256((const __m256i *)(t->xq[j] + b * SP_QK));
            __m256i p = _mm256_madd_epi16(_mm256_maddubs_epi16(aw, _mm256_sign_epi8(xj, wv)), ones);
            acc[i][j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), _mm256_broadcast_ss(&sc[i][j][k]), acc[i][j]);
        }
    }
}

/* Groups b and b+1 (b even; b+1 only when `two`), which share one 32-byte chunk of nibbles. */
INLINE void q4_groups(const qtile *t, int64_t b, int k, bool two, const float sc[4][X_MAX][8], __m256 acc[4][X_MAX],
                      const int R, const int C) {
    const __m256i ones = _mm256_set1_epi16(1), low = _mm256_set1_epi8(15);
    __m256i xv[4][2];
    for (int j = 0; j < C && C <= 4; j++) {
        xv[j][0] = _mm256_loadu_si256((const __m256i *)(t->xq[j] + b * SP_QK));
        if (two) xv[j][1] = _mm256_loadu_si256((const __m256i *)(t->xq[j] + (b + 1) * SP_QK));
    }
    for (int i = 0; i < R; i++) {
        __m256i chunk = _mm256_loadu_si256((const __m256i *)(t->wq[i] + b / 2 * SP_QK));
        __m256i wv[2] = {_mm256_and_si256(chunk, low), _mm256_and_si256(_mm256_srli_epi16(chunk, 4), low)};
        for (int h = 0; h < (two ? 2 : 1); h++)
            for (int j = 0; j < C; j++) {
                __m256i xj = C <= 4 ? xv[j][h] : _mm256_loadu_si256((const __m256i *)(t->xq[j] + (b + h) * SP_QK));
                __m256i p = _mm256_madd_epi16(_mm256_maddubs_epi16(wv[h], xj), ones);
                acc[i][j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), _mm256_broadcast_ss(&sc[i][j][k + h]), acc[i][j]);
            }
    }
}

/* Σ_b m[b]·s[b] over a row's groups: the Q4 offset term of one (row, x row) pair. */
INLINE float offset_dot(const uint16_t *m, const float *s, int64_t nb) {
    __m256 acc = _mm256_setzero_ps();
    int64_t b = 0;
    for (; b + 8 <= nb; b += 8)
        acc = _mm256_fmadd_ps(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(m + b))), _mm256_loadu_ps(s + b), acc);
    float t = hsum(acc);
    for (; b < nb; b++) t += _cvtsh_ss(m[b]) * s[b];
    return t;
}

/* A tile of Q8 (q4 = false) or Q4 weights: groups eight at a time with their scales, then the row's last groups. */
INLINE void quant_tile(bool q4, const sp_matrix *W, const sp_act *x, float *y, int64_t r, int64_t c, const int R,
                       const int C) {
    const int64_t nb = x->nb;
    qtile t;
    __m256 acc[4][X_MAX];
    float sc[4][X_MAX][8] __attribute__((aligned(32)));
    for (int i = 0; i < R; i++) {
        t.wq[i] = row_ptr(W, r + i);
        t.wd[i] = (const uint16_t *)(t.wq[i] + (q4 ? (nb + 1) / 2 * SP_QK : nb * SP_QK));
    }
    for (int j = 0; j < C; j++) {
        t.xq[j] = x->q + (c + j) * nb * SP_QK;
        t.xd[j] = x->d + (c + j) * nb;
    }
    for (int i = 0; i < R; i++)
        for (int j = 0; j < C; j++) acc[i][j] = _mm256_setzero_ps();
    int64_t b = 0;
    for (; b + 8 <= nb; b += 8) { /* constant trip counts, so the compiler unrolls and keeps acc in registers */
        prefetch_next_tile(W, t.wq[0], R, b * W->row_bytes / nb, (b + 8) * W->row_bytes / nb);
        scales(sc, &t, b, 8, R, C);
        if (q4)
            for (int k = 0; k < 8; k += 2) q4_groups(&t, b + k, k, true, sc, acc, R, C);
        else
            for (int k = 0; k < 8; k++) q8_group(&t, b + k, k, sc, acc, R, C);
    }
    if (b < nb) {
        int n = (int)(nb - b);
        scales(sc, &t, b, n, R, C);
        if (q4)
            for (int k = 0; k < n; k += 2) q4_groups(&t, b + k, k, k + 1 < n, sc, acc, R, C);
        else
            for (int k = 0; k < n; k++) q8_group(&t, b + k, k, sc, acc, R, C);
    }
    for (int i = 0; i < R; i++)
        for (int j = 0; j < C; j++)
            y[(c + j) * W->rows + r + i] = hsum(acc[i][j]) + (q4 ? offset_dot(t.wd[i] + nb, x->s + (c + j) * nb, nb) : 0.0f);
}

/* Q8/Q4 rows in 4-row blocks. One x row: 4×1 tiles (four chains keep the loads flowing). A few (2 to X_MAX, as
 * verify blocks and a few streams make): every weight group is loaded and unpacked once for all of them, in tiles
 * that keep their accumulators in the 16 registers: 4×2, 2×3, 2×4, then one weight row against 5–8 x rows. More x
 * rows: 2×4 tiles (a weight group's load and |w| shared by four x rows, faster than 4×2 at n = 4 in L2), then 4×2
 * and 4×1 for the rest. A pair's chain is the same in every tile, so the bits are too. */
INLINE void quant_block(bool q4, const sp_matrix *W, const sp_act *x, float *y, int64_t r) {
    switch (x->n) { /* constant widths: acc in registers */
    case 1: quant_tile(q4, W, x, y, r, 0, 4, 1); return;
    case 2: quant_tile(q4, W, x, y, r, 0, 4, 2); return;
    case 3: for (int i = 0; i < 4; i += 2) quant_tile(q4, W, x, y, r + i, 0, 2, 3); return;
    case 4: for (int i = 0; i < 4; i += 2) quant_tile(q4, W, x, y, r + i, 0, 2, 4); return;
    case 5: for (int i = 0; i < 4; i++) quant_tile(q4, W, x, y, r + i, 0, 1, 5); return;
    case 6: for (int i = 0; i < 4; i++) quant_tile(q4, W, x, y, r + i, 0, 1, 6); return;
    case 7: for (int i = 0; i < 4; i++) quant_tile(q4, W, x, y, r + i, 0, 1, 7); return;
    case 8: for (int i = 0; i < 4; i++) quant_tile(q4, W, x, y, r + i, 0, 1, 8); return;
    }
    int64_t c = 0;
    for (; c + 4 <= x->n; c += 4) {
        quant_tile(q4, W, x, y, r, c, 2, 4);
        quant_tile(q4, W, x, y, r + 2, c, 2, 4);
    }
    for (; c + 2 <= x->n; c += 2) quant_tile(q4, W, x, y, r, c, 4, 2);
    for (; c < x->n; c++) quant_tile(q4, W, x, y, r, c, 4, 1);
}

#define QUANT_ROWS(name, q4)                                                                                          \
    static void name(const sp_matrix *W, const sp_act *x, float *y, int64_t r0, int64_t r1) {                        \
        int64_t r = r0;                                                                                               \
        for (; r + 4 <= r1; r += 4) quant_block(q4, W, x, y, r);                                                      \
        for (; r < r1; r++)                                                                                           \
            for (int64_t c = 0; c < x->n; c++) quant_tile(q4, W, x, y, r, c, 1, 1);                                   \
    }

QUANT_ROWS(rows_q8, false)
QUANT_ROWS(rows_q4, true)

/* ---- MLX4 and MLX8 ------------------------------------------------------------------------------------------------ */

/* A tile of MLX4 (m4) or MLX8 weights; the affine offset is summed per pair in scalar, once per group. */
INLINE void mlx_tile(bool m4, const sp_matrix *W, const sp_act *x, float *y, int64_t r, int64_t c, const int R,
                     const int C) {
    enum { G = SP_QK_MLX };
    const int64_t nb = x->nb, qbytes = m4 ? W->cols / 2 : W->cols, gbytes = m4 ? G / 2 : G;
    const __m256i ones = _mm256_set1_epi16(1), low = _mm256_set1_epi8(15), flip = _mm256_set1_epi8((char)0x80);
    const uint8_t *wq[4];
    const uint16_t *sc[4], *bi[4];
    const int8_t *xq[2];
    const float *xd[2], *xs[2];
    __m256 acc[4][2];
    float off[4][2];
    for (int i = 0; i < R; i++) {
        wq[i] = row_ptr(W, r + i);
        sc[i] = (const uint16_t *)(wq[i] + qbytes);
        bi[i] = sc[i] + nb;
    }
    for (int j = 0; j < C; j++) {
        xq[j] = x->q + (c + j) * nb * G;
        xd[j] = x->d + (c + j) * nb;
        xs[j] = x->s + (c + j) * nb;
    }
    for (int i = 0; i < R; i++)
        for (int j = 0; j < C; j++) acc[i][j] = _mm256_setzero_ps(), off[i][j] = 0;
    for (int64_t b = 0; b < nb; b++) {
        if (b % 2 == 0) prefetch_next_tile(W, wq[0], R, b * gbytes, (b + 2) * gbytes);
        __m256i xv[2][2];
        for (int j = 0; j < C; j++) {
            xv[j][0] = _mm256_loadu_si256((const __m256i *)(xq[j] + b * G));
            xv[j][1] = _mm256_loadu_si256((const __m256i *)(xq[j] + b * G + 32));
        }
        for (int i = 0; i < R; i++) {
            float s = sp_bf16_to_f32(sc[i][b]), bias = sp_bf16_to_f32(bi[i][b]);
            __m256i p[2];
            if (m4) {
                __m256i chunk = _mm256_loadu_si256((const __m256i *)(wq[i] + b * G / 2));
                __m256i lo = _mm256_and_si256(chunk, low), hi = _mm256_and_si256(_mm256_srli_epi16(chunk, 4), low);
                for (int j = 0; j < C; j++) /* each int16 lane is at most 2·(15·127) per maddubs: the sum fits */
                    p[j] = _mm256_madd_epi16(_mm256_add_epi16(_mm256_maddubs_epi16(lo, xv[j][0]), _mm256_maddubs_epi16(hi, xv[j][1])), ones);
            } else {
                __m256i w0 = _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)(wq[i] + b * G)), flip);
                __m256i w1 = _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)(wq[i] + b * G + 32)), flip);
                __m256i a0 = _mm256_sign_epi8(w0, w0), a1 = _mm256_sign_epi8(w1, w1); /* |−128| stays 0x80: 128 unsigned */
                for (int j = 0; j < C; j++)
                    p[j] = _mm256_add_epi32(_mm256_madd_epi16(_mm256_maddubs_epi16(a0, _mm256_sign_epi8(xv[j][0], w0)), ones),
                                            _mm256_madd_epi16(_mm256_maddubs_epi16(a1, _mm256_sign_epi8(xv[j][1], w1)), ones));
                bias += 128.0f * s;
            }
            for (int j = 0; j < C; j++) {
                acc[i][j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p[j]), _mm256_set1_ps(s * xd[j][b]), acc[i][j]);
                off[i][j] += bias * xs[j][b];
            }
        }
    }
    for (int i = 0; i < R; i++)
        for (int j = 0; j < C; j++) y[(c + j) * W->rows + r + i] = hsum(acc[i][j]) + off[i][j];
}

TILED_ROWS(rows_mlx4, mlx_tile, true, )
TILED_ROWS(rows_mlx8, mlx_tile, false, )

/* ---- quantizing x ----------------------------------------------------------------------------------------------- */

/* Bit-identical to sp_quantize_act_ref: same max, same 127/amax, same round-to-nearest-even, same clamp. */
static void quantize_act(const float *x, int64_t cols, int8_t *q, float *d, float *s, int32_t *sum_out) {
    int64_t nb = (cols + SP_QK - 1) / SP_QK;
    const __m256 sign = _mm256_set1_ps(-0.0f), lo = _mm256_set1_ps(-127.0f), hi = _mm256_set1_ps(127.0f);
    for (int64_t b = 0; b < nb; b++) {
        if ((b + 1) * SP_QK > cols) { /* the zero-padded last group */
            sp_quantize_act_ref(x + b * SP_QK, cols - b * SP_QK, q + b * SP_QK, d + b, s + b, sum_out + b);
            break;
        }
        __m256 v[4], m = _mm256_setzero_ps();
        for (int k = 0; k < 4; k++) {
            v[k] = _mm256_loadu_ps(x + b * SP_QK + 8 * k);
            m = _mm256_max_ps(_mm256_andnot_ps(sign, v[k]), m); /* a NaN lane yields m, as fmaxf does */
        }
        __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
        m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
        m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
        float amax = _mm_cvtss_f32(m4);
        __m256 inv = _mm256_set1_ps(amax > 0 ? 127.0f / amax : 0.0f);
        __m256i i32[4];
        for (int k = 0; k < 4; k++) {
            __m256 t = _mm256_min_ps(_mm256_max_ps(_mm256_mul_ps(v[k], inv), lo), hi); /* NaN -> -127 as fmaxf */
            i32[k] = _mm256_cvtps_epi32(_mm256_round_ps(t, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
        }
        /* Pack 32 int32 into 32 int8 in order: packs interleave 128-bit lanes, the permute restores the order. */
        __m256i p16a = _mm256_packs_epi32(i32[0], i32[1]), p16b = _mm256_packs_epi32(i32[2], i32[3]);
        __m256i p8 = _mm256_packs_epi16(p16a, p16b);
        p8 = _mm256_permutevar8x32_epi32(p8, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
        _mm256_storeu_si256((__m256i *)(q + b * SP_QK), p8);
        __m256i sum = _mm256_add_epi32(_mm256_add_epi32(i32[0], i32[1]), _mm256_add_epi32(i32[2], i32[3]));
        __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(sum), _mm256_extracti128_si256(sum, 1));
        s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0x4e));
        s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0xb1));
        d[b] = amax / 127.0f;
        sum_out[b] = _mm_cvtsi128_si32(s4);
        s[b] = d[b] * (float)sum_out[b];
    }
}

const sp_matmul_kernels sp_matmul_kernels_avx2 = {
    .rows = {[SP_MAT_F32] = rows_f32, [SP_MAT_BF16] = rows_bf16, [SP_MAT_F16] = rows_f16, [SP_MAT_Q8] = rows_q8,
             [SP_MAT_Q4] = rows_q4, [SP_MAT_MLX4] = rows_mlx4, [SP_MAT_MLX8] = rows_mlx8},
    .quantize_act = quantize_act,
    .row_unit = 4,
};
