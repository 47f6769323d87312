/* quant.h — weight matrices as the matmul kernels read them, and the quantized formats made at load.
 *
 * An sp_matrix is `rows` independent rows of `cols` weights, row r starting at data + r·row_bytes. A row range is
 * again a matrix (sp_matrix_rows), so MoE experts are views into a fused [E·2I, H] tensor and nothing is copied.
 *
 * Types and row layouts (nb = ceil(cols / 32) groups; the last group is zero-padded when cols % 32 != 0):
 *   F32, BF16, F16  cols elements as stored in the checkpoint (zero-copy views of the mapped file).
 *   Q8              int8 q[nb·32], then f16 d[nb]                         w = q·d           8.5 bits/weight
 *                   d = max|w|/127 per group (rounded to f16 first, then q = round(w/d) in [-127, 127]).
 *   Q4              u8 qs[ceil(nb/2)·32], then f16 d[nb], then f16 m[nb]   w = q·d + m   5 bits/weight
 *                   q in 0..15, groups in pairs: byte j of chunk p holds element j of group 2p in its low nibble and
 *                   element j of group 2p+1 in its high nibble (zero when nb is odd), so one 32-byte load and three
 *                   ops (and, shift, and) give two groups in element order. Affine: d = (max-min)/15, m = min. The
 *                   min costs 0.5 bit/weight over a symmetric format and lowers the weight error, the more so the
 *                   heavier the weights' tails (native-core section of BENCHMARKS.md).
 *                   It is also the shape of MLX's affine formats.
 *   MLX4, MLX8      MLX's affine formats (mlx-lm checkpoints), group 64 (nb = cols / 64; cols must be a multiple):
 *                   packed quants as mlx.core.quantize writes them, then bf16 scales[nb], then bf16 biases[nb];
 *                   w = q·scale + bias. MLX4: u8[cols/2], element k in byte k/2, low nibble when k is even (the
 *                   uint32 words of the checkpoint read as little-endian bytes). MLX8: u8[cols], q in 0..255.
 *                   Loading an MLX checkpoint interleaves its three tensors into these rows (core/mlx.h): the
 *                   quants, scales and biases are the checkpoint's bits, nothing is requantized.
 * Scales sit after the quants so a kernel streams each row front to back; f16 scales keep the bytes per weight low.
 */
#ifndef SP_QUANT_H
#define SP_QUANT_H

#include "core/safetensors.h"
#include "core/threadpool.h"
#include "splash.h"

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#define SP_QK 32     /* weights per group in Q8 and Q4 */
#define SP_QK_MLX 64 /* weights per group in MLX4 and MLX8 */

typedef enum sp_mtype {
    SP_MAT_F32,
    SP_MAT_BF16,
    SP_MAT_F16,
    SP_MAT_Q8,
    SP_MAT_Q4,
    SP_MAT_MLX4,
    SP_MAT_MLX8,
    SP_MAT_TYPE_COUNT,
} sp_mtype;

/* What to make of float weights at load. Values match SPLASH_QUANT_* in splash.h. */
typedef enum sp_quant { SP_QUANT_NONE = 0, SP_QUANT_Q8 = 1, SP_QUANT_Q4 = 2 } sp_quant;

typedef struct sp_matrix {
    sp_mtype type;
    int64_t rows, cols;
    const void *data;  /* row r at (const uint8_t *)data + r * row_bytes */
    int64_t row_bytes;
} sp_matrix;

const char *sp_mtype_name(sp_mtype t);
/* Bytes of one row of `cols` weights in type t (0 for MLX4/MLX8 when cols is not a multiple of 64). */
int64_t sp_mtype_row_bytes(sp_mtype t, int64_t cols);
/* MLX4 and MLX8: the types whose groups are 64 wide. */
static inline bool sp_mtype_is_mlx(sp_mtype t) { return t == SP_MAT_MLX4 || t == SP_MAT_MLX8; }

/* Rows [r0, r0 + n) of m as a matrix of its own (a view; caller keeps r0 + n <= m->rows). */
static inline sp_matrix sp_matrix_rows(const sp_matrix *m, int64_t r0, int64_t n) {
    sp_matrix v = *m;
    v.rows = n;
    v.data = (const uint8_t *)m->data + r0 * m->row_bytes;
    return v;
}

/* A matrix from a checkpoint tensor: its last dim is `cols`, all leading dims are flattened into `rows`.
 * SP_QUANT_NONE keeps F32/BF16/F16 as stored: zero-copy, *owned = NULL. A tensor with a layout (a packed file's)
 * is a zero-copy view in that type whatever `quant` says. SP_QUANT_Q8/Q4 quantizes (in parallel on
 * `pool`, which may be NULL) into a new 64-byte-aligned buffer returned in *owned; free it with free() after the
 * last use of the matrix. Other dtypes, or a 0-dim tensor, are SPLASH_ERR_UNSUPPORTED naming the tensor and file. */
splash_status sp_matrix_from_tensor(sp_threadpool *pool, const sp_tensor *t, sp_quant quant, sp_matrix *m, void **owned);

/* Row r of m as f32 (dequantized for Q8/Q4/MLX4/MLX8): out[cols]. For embedding lookups and tests. */
void sp_matrix_row_f32(const sp_matrix *m, int64_t r, float *out);

/* One row of `cols` floats into the Q8 / Q4 layout above (sp_mtype_row_bytes bytes). The scalar reference; the
 * formats are defined by these two functions. */
void sp_quantize_row_q8(const float *x, int64_t cols, void *row);
void sp_quantize_row_q4(const float *x, int64_t cols, void *row);
/* The same two quantizers reading an F32/BF16/F16 row as stored, eight lanes at a time (quant_avx2.c; the caller
 * checks the CPU): the reference's bits. False, with `row` unspecified, where it leaves the row to the reference
 * (cols % 32 != 0, a Q4 row holding a NaN). */
bool sp_quantize_row_avx2(sp_mtype to, sp_mtype from, const void *src, int64_t cols, void *row);
/* One row into the MLX4 / MLX8 layout (cols a multiple of 64) as mlx.core.quantize(mode="affine") computes it:
 * scale = (max − min) / (2^bits − 1), then the larger-magnitude edge is made exact (scale = edge / round(edge /
 * scale), bias = edge), q = round((w − bias) / scale) clamped. For tests and fixtures; checkpoints bring their own. */
void sp_quantize_row_mlx(const float *x, int64_t cols, int bits, void *row);

/* Scalar conversions. bf16 -> f32 is exact; f32 -> bf16/f16 round to nearest even (f16: with subnormals,
 * overflow to infinity); NaN stays NaN. */
static inline float sp_bf16_to_f32(uint16_t h) {
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}
uint16_t sp_f32_to_bf16(float f);
float sp_f16_to_f32(uint16_t h);
uint16_t sp_f32_to_f16(float f);

#endif
