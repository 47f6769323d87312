/* matmul_kernels.h — what each ISA file provides to matmul.c (internal to the CPU matmul).
 *
 * A kernel computes y[c][r] for every x row c in [0, x->n) and weight rows r in [r0, r1). The driver has already
 * prepared x: for Q8/Q4 weights it is quantized into int8 groups of 32 (sp_act.q/d/s/sum), for MLX4/MLX8 into groups
 * of 64 (sp_quantize_act_mlx), otherwise it is read as f32.
 * Kernels must keep the per-(row, x row) operation sequence independent of n and of [r0, r1) (batch invariance,
 * matmul.h), and must not read past the padded row (sp_mtype_row_bytes) or x's cols.
 */
#ifndef SP_CPU_MATMUL_KERNELS_H
#define SP_CPU_MATMUL_KERNELS_H

#include "core/quant.h"

typedef struct sp_act {
    int64_t n, cols, nb;  /* x rows, columns, groups (of 32 for Q8/Q4, of 64 for MLX4/MLX8) */
    int64_t group;        /* 32 or 64: a row of q is nb·group bytes */
    const float *f;       /* [n][cols] as given */
    const int8_t *q;      /* [n][nb·group] int8, zero-padded: the quantized x (quantized weights only) */
    const float *d;       /* [n][nb] scale of each group */
    const float *s;       /* [n][nb] d·Σq of each group (the Q4 offset term) */
    const int32_t *sum;   /* [n][nb] Σq of each group (for kernels that multiply q against w + 128) */
} sp_act;

typedef void (*sp_matmul_rows_fn)(const sp_matrix *W, const sp_act *x, float *y, int64_t r0, int64_t r1);

typedef void (*sp_quantize_act_fn)(const float *x, int64_t cols, int8_t *q, float *d, float *s, int32_t *sum);

typedef struct sp_matmul_kernels {
    sp_matmul_rows_fn rows[SP_MAT_TYPE_COUNT];
    /* Quantizes one row of x (cols floats) into q[nb·32], d[nb], s[nb], sum[nb]; bit-identical to the scalar one. */
    sp_quantize_act_fn quantize_act;
    /* A set that extends another (AVX-512 extends AVX2) leaves the entries it does not improve NULL: `base` has them. */
    const struct sp_matmul_kernels *base;
    /* Threads take weight rows in multiples of this (the kernels' tile height), except at the matrix's end. */
    int row_unit;
} sp_matmul_kernels;

/* A set's kernel for type t and its x quantizer, taking the entries it leaves NULL from its base. */
static inline sp_matmul_rows_fn sp_matmul_rows_of(const sp_matmul_kernels *k, sp_mtype t) {
    while (!k->rows[t] && k->base) k = k->base;
    return k->rows[t];
}
static inline sp_quantize_act_fn sp_matmul_quantizer_of(const sp_matmul_kernels *k) {
    while (!k->quantize_act && k->base) k = k->base;
    return k->quantize_act;
}

extern const sp_matmul_kernels sp_matmul_kernels_scalar;
#if defined(__x86_64__)
extern const sp_matmul_kernels sp_matmul_kernels_avx2;
extern const sp_matmul_kernels sp_matmul_kernels_avxvnni;
extern const sp_matmul_kernels sp_matmul_kernels_avx512;
#endif
#if defined(__aarch64__)
extern const sp_matmul_kernels sp_matmul_kernels_neon;
#endif

/* The scalar quantizer of x, shared as the definition the SIMD ones must match. */
void sp_quantize_act_ref(const float *x, int64_t cols, int8_t *q, float *d, float *s, int32_t *sum);
/* x for MLX4/MLX8 weights (cols a multiple of 64): int8 per group of 64, d = max|x|/127, s = d·Σq, sum = Σq, as the
 * one above.
 * For MLX4 (`split`) each group's 64 values are stored even elements first, then odd ones, the order in which a
 * row's nibbles come apart (low nibbles hold even elements); MLX8 keeps element order. One scalar version serves
 * every ISA: it costs O(cols) per x row against O(rows·cols) for the product. */
void sp_quantize_act_mlx(const float *x, int64_t cols, bool split, int8_t *q, float *d, float *s, int32_t *sum);

#endif
