/* matmul_neon.c — arm64 NEON matmul kernels with the dotprod extension (compiled with
 * -march=armv8.2-a+dotprod+fp16; chosen at run time only when the CPU reports dotprod, matmul.c).
 *
 * Same structure as matmul_avx2.c: tiles of R weight rows × C x rows, one accumulator per pair, GEMV as 4×1 tiles,
 * GEMM as 4×2 tiles over each 4-row block; a pair's operation sequence does not depend on its tile (batch
 * invariance). Q8 and Q4 groups are exact integer dot products (SDOT: 4 int8 products into each int32 lane), scaled
 * by d_w·d_x per group; Q4 nibbles (0..15) are valid signed bytes, so SDOT takes them as they are.
 * MLX4 (groups of 64): low nibbles are the even elements, high nibbles the odd ones, and x comes split the same way
 * (sp_quantize_act_mlx). MLX8: q in 0..255 is not a signed byte, so SDOT takes q − 128 (w ^ 0x80) and the bias
 * absorbs the rest: q·s + b = (q − 128)·s + (b + 128·s).
 */
#include "matmul_kernels.h"

#include <arm_neon.h>
#include <stdbool.h>

#define INLINE static inline __attribute__((always_inline))

INLINE const uint8_t *row_ptr(const sp_matrix *W, int64_t r) { return (const uint8_t *)W->data + r * W->row_bytes; }

/* ---- F32 / BF16 / F16 ------------------------------------------------------------------------------------------ */

INLINE float32x4_t load4(sp_mtype t, const uint8_t *row, int64_t k) {
    if (t == SP_MAT_F32) return vld1q_f32((const float *)row + k);
    uint16x4_t h = vld1_u16((const uint16_t *)row + k);
    if (t == SP_MAT_BF16) return vreinterpretq_f32_u32(vshll_n_u16(h, 16));
    return vcvt_f32_f16(vreinterpret_f16_u16(h));
}

INLINE float load1(sp_mtype t, const uint8_t *row, int64_t k) {
    if (t == SP_MAT_F32) return ((const float *)row)[k];
    if (t == SP_MAT_BF16) return sp_bf16_to_f32(((const uint16_t *)row)[k]);
    return sp_f16_to_f32(((const uint16_t *)row)[k]);
}

/* Eight columns per step in two 4-lane accumulators per pair (two FMA chains), summed at the end. */
INLINE void float_tile(sp_mtype t, const sp_matrix *W, const sp_act *x, float *y, int64_t r, int64_t c, const int R,
                       const int C) {
    const int64_t cols = W->cols;
    const uint8_t *w[4];
    const float *xr[2];
    float32x4_t acc[4][2][2];
    for (int i = 0; i < R; i++) w[i] = row_ptr(W, r + i);
    for (int j = 0; j < C; j++) xr[j] = x->f + (c + j) * cols;
    for (int i = 0; i < R; i++)
        for (int j = 0; j < C; j++) acc[i][j][0] = acc[i][j][1] = vdupq_n_f32(0);
    int64_t k = 0;
    for (; k + 8 <= cols; k += 8) {
        float32x4_t xv[2][2];
        for (int j = 0; j < C; j++) xv[j][0] = vld1q_f32(xr[j] + k), xv[j][1] = vld1q_f32(xr[j] + k + 4);
        for (int i = 0; i < R; i++) {
            float32x4_t w0 = load4(t, w[i], k), w1 = load4(t, w[i], k + 4);
            for (int j = 0; j < C; j++) {
                acc[i][j][0] = vfmaq_f32(acc[i][j][0], w0, xv[j][0]);
                acc[i][j][1] = vfmaq_f32(acc[i][j][1], w1, xv[j][1]);
            }
        }
    }
    for (int i = 0; i < R; i++) {
        for (int j = 0; j < C; j++) {
            float s = vaddvq_f32(vaddq_f32(acc[i][j][0], acc[i][j][1]));
            for (int64_t kk = k; kk < cols; kk++) s += load1(t, w[i], kk) * xr[j][kk];
            y[(c + j) * W->rows + r + i] = s;
        }
    }
}

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

TILED_ROWS(rows_f32, float_tile, SP_MAT_F32, )
TILED_ROWS(rows_bf16, float_tile, SP_MAT_BF16, )
TILED_ROWS(rows_f16, float_tile, SP_MAT_F16, )

/* ---- Q8 and Q4 -------------------------------------------------------------------------------------------------- */

typedef struct qtile {
    const uint8_t *wq[4];
    const uint16_t *wd[4];
    const int8_t *xq[2];
    const float *xd[2];
} qtile;

/* The group's exact integer dot product, as a float vector of four partial sums. */
INLINE float32x4_t dot32(int8x16_t w0, int8x16_t w1, const int8_t *xq) {
    int32x4_t s = vdotq_s32(vdupq_n_s32(0), w0, vld1q_s8(xq));
    return vcvtq_f32_s32(vdotq_s32(s, w1, vld1q_s8(xq + 16)));
}

INLINE void q8_group(const qtile *t, int64_t b, float32x4_t acc[4][2], const int R, const int C) {
    for (int i = 0; i < R; i++) {
        int8x16_t w0 = vld1q_s8((const int8_t *)t->wq[i] + b * SP_QK), w1 = vld1q_s8((const int8_t *)t->wq[i] + b * SP_QK + 16);
        float dw = sp_f16_to_f32(t->wd[i][b]);
        for (int j = 0; j < C; j++) acc[i][j] = vfmaq_n_f32(acc[i][j], dot32(w0, w1, t->xq[j] + b * SP_QK), dw * t->xd[j][b]);
    }
}

/* Groups b and b+1 (b even; b+1 only when `two`) from one 32-byte chunk of nibbles. */
INLINE void q4_groups(const qtile *t, int64_t b, bool two, float32x4_t acc[4][2], const int R, const int C) {
    const uint8x16_t low = vdupq_n_u8(15);
    for (int i = 0; i < R; i++) {
        const uint8_t *chunk = t->wq[i] + b / 2 * SP_QK;
        uint8x16_t c0 = vld1q_u8(chunk), c1 = vld1q_u8(chunk + 16);
        int8x16_t lo0 = vreinterpretq_s8_u8(vandq_u8(c0, low)), lo1 = vreinterpretq_s8_u8(vandq_u8(c1, low));
        int8x16_t hi0 = vreinterpretq_s8_u8(vshrq_n_u8(c0, 4)), hi1 = vreinterpretq_s8_u8(vshrq_n_u8(c1, 4));
        float d0 = sp_f16_to_f32(t->wd[i][b]), d1 = two ? sp_f16_to_f32(t->wd[i][b + 1]) : 0;
        for (int j = 0; j < C; j++) {
            acc[i][j] = vfmaq_n_f32(acc[i][j], dot32(lo0, lo1, t->xq[j] + b * SP_QK), d0 * t->xd[j][b]);
            if (two) acc[i][j] = vfmaq_n_f32(acc[i][j], dot32(hi0, hi1, t->xq[j] + (b + 1) * SP_QK), d1 * t->xd[j][b + 1]);
        }
    }
}

/* Σ_b m[b]·s[b] over a row's groups: the Q4 offset term of one (row, x row) pair. */
INLINE float offset_dot(const uint16_t *m, const float *s, int64_t nb) {
    float32x4_t acc = vdupq_n_f32(0);
    int64_t b = 0;
    for (; b + 4 <= nb; b += 4) acc = vfmaq_f32(acc, vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(m + b))), vld1q_f32(s + b));
    float t = vaddvq_f32(acc);
    for (; b < nb; b++) t += sp_f16_to_f32(m[b]) * s[b];
    return t;
}

INLINE void quant_tile(bool q4, const sp_matrix *W, const sp_act *x, float *y, int64_t r, int64_t c, const int R,
                       const int C) {
    const int64_t nb = x->nb;
    qtile t;
    float32x4_t acc[4][2];
    for (int i = 0; i < R; i++) {
        t.wq[i] = row_ptr(W, r + i);
        t.wd[i] = (const uint16_t *)(t.wq[i] + (q4 ? (nb + 1) / 2 * SP_QK : nb * SP_QK));
    }
    for (int j = 0; j < C; j++) {
        t.xq[j] = x->q + (c + j) * nb * SP_QK;
        t.xd[j] = x->d + (c + j) * nb;
    }
    for (int i = 0; i < R; i++)
        for (int j = 0; j < C; j++) acc[i][j] = vdupq_n_f32(0);
    if (q4) {
        int64_t b = 0;
        for (; b + 2 <= nb; b += 2) q4_groups(&t, b, true, acc, R, C);
        if (b < nb) q4_groups(&t, b, false, acc, R, C);
    } else {
        for (int64_t b = 0; b < nb; b++) q8_group(&t, b, acc, R, C);
    }
    for (int i = 0; i < R; i++)
        for (int j = 0; j < C; j++)
            y[(c + j) * W->rows + r + i] =
                vaddvq_f32(acc[i][j]) + (q4 ? offset_dot(t.wd[i] + nb, x->s + (c + j) * nb, nb) : 0.0f);
}

TILED_ROWS(rows_q8, quant_tile, false, )
TILED_ROWS(rows_q4, quant_tile, true, )

/* ---- MLX4 and MLX8 ------------------------------------------------------------------------------------------------ */

INLINE void mlx_tile(bool m4, const sp_matrix *W, const sp_act *x, float *y, int64_t r, int64_t c, const int R,
                     const int C) {
    enum { G = SP_QK_MLX };
    const int64_t nb = x->nb, qbytes = m4 ? W->cols / 2 : W->cols;
    const uint8x16_t low = vdupq_n_u8(15), flip = vdupq_n_u8(0x80);
    const uint8_t *wq[4];
    const uint16_t *sc[4], *bi[4];
    const int8_t *xq[2];
    const float *xd[2], *xs[2];
    float32x4_t acc[4][2];
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
        for (int j = 0; j < C; j++) acc[i][j] = vdupq_n_f32(0), off[i][j] = 0;
    for (int64_t b = 0; b < nb; b++) {
        for (int i = 0; i < R; i++) {
            float s = sp_bf16_to_f32(sc[i][b]), bias = sp_bf16_to_f32(bi[i][b]);
            int8x16_t w[4];
            if (m4) {
                uint8x16_t c0 = vld1q_u8(wq[i] + b * G / 2), c1 = vld1q_u8(wq[i] + b * G / 2 + 16);
                w[0] = vreinterpretq_s8_u8(vandq_u8(c0, low)), w[1] = vreinterpretq_s8_u8(vandq_u8(c1, low));
                w[2] = vreinterpretq_s8_u8(vshrq_n_u8(c0, 4)), w[3] = vreinterpretq_s8_u8(vshrq_n_u8(c1, 4));
            } else {
                for (int k = 0; k < 4; k++) w[k] = vreinterpretq_s8_u8(veorq_u8(vld1q_u8(wq[i] + b * G + 16 * k), flip));
                bias += 128.0f * s;
            }
            for (int j = 0; j < C; j++) {
                const int8_t *xg = xq[j] + b * G;
                int32x4_t d = vdotq_s32(vdupq_n_s32(0), w[0], vld1q_s8(xg));
                d = vdotq_s32(d, w[1], vld1q_s8(xg + 16));
                d = vdotq_s32(d, w[2], vld1q_s8(xg + 32));
                d = vdotq_s32(d, w[3], vld1q_s8(xg + 48));
                acc[i][j] = vfmaq_n_f32(acc[i][j], vcvtq_f32_s32(d), s * xd[j][b]);
                off[i][j] += bias * xs[j][b];
            }
        }
    }
    for (int i = 0; i < R; i++)
        for (int j = 0; j < C; j++) y[(c + j) * W->rows + r + i] = vaddvq_f32(acc[i][j]) + off[i][j];
}

TILED_ROWS(rows_mlx4, mlx_tile, true, )
TILED_ROWS(rows_mlx8, mlx_tile, false, )

/* ---- quantizing x ----------------------------------------------------------------------------------------------- */

/* Bit-identical to sp_quantize_act_ref: FMAXNM/FMINNM treat NaN as fmaxf/fminf do, FCVTNS rounds to nearest even. */
static void quantize_act(const float *x, int64_t cols, int8_t *q, float *d, float *s, int32_t *sum_out) {
    int64_t nb = (cols + SP_QK - 1) / SP_QK;
    const float32x4_t lo = vdupq_n_f32(-127.0f), hi = vdupq_n_f32(127.0f);
    for (int64_t b = 0; b < nb; b++) {
        if ((b + 1) * SP_QK > cols) { /* the zero-padded last group */
            sp_quantize_act_ref(x + b * SP_QK, cols - b * SP_QK, q + b * SP_QK, d + b, s + b, sum_out + b);
            break;
        }
        float32x4_t v[8], m = vdupq_n_f32(0);
        for (int k = 0; k < 8; k++) {
            v[k] = vld1q_f32(x + b * SP_QK + 4 * k);
            m = vmaxnmq_f32(m, vabsq_f32(v[k]));
        }
        float amax = vmaxnmvq_f32(m);
        float32x4_t inv = vdupq_n_f32(amax > 0 ? 127.0f / amax : 0.0f);
        int32x4_t sum = vdupq_n_s32(0);
        for (int k = 0; k < 8; k += 2) {
            int32x4_t a = vcvtnq_s32_f32(vminnmq_f32(vmaxnmq_f32(vmulq_f32(v[k], inv), lo), hi));
            int32x4_t c = vcvtnq_s32_f32(vminnmq_f32(vmaxnmq_f32(vmulq_f32(v[k + 1], inv), lo), hi));
            sum = vaddq_s32(sum, vaddq_s32(a, c));
            int16x8_t h = vcombine_s16(vqmovn_s32(a), vqmovn_s32(c));
            vst1_s8(q + b * SP_QK + 4 * k, vqmovn_s16(h));
        }
        d[b] = amax / 127.0f;
        sum_out[b] = vaddvq_s32(sum);
        s[b] = d[b] * (float)sum_out[b];
    }
}

const sp_matmul_kernels sp_matmul_kernels_neon = {
    .rows = {[SP_MAT_F32] = rows_f32, [SP_MAT_BF16] = rows_bf16, [SP_MAT_F16] = rows_f16, [SP_MAT_Q8] = rows_q8,
             [SP_MAT_Q4] = rows_q4, [SP_MAT_MLX4] = rows_mlx4, [SP_MAT_MLX8] = rows_mlx8},
    .quantize_act = quantize_act,
    .row_unit = 4,
};
