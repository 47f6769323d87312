/* matmul.h — y = x · Wᵀ on the CPU for every sp_matrix type, with f32 accumulation.
 *
 *   y[n][W.rows] = x[n][W.cols] · Wᵀ      (row-major, contiguous)
 *
 * n = 1 is a GEMV and is memory-bandwidth bound; n > 1 (prefill, batched decode, verify blocks) reads each weight
 * row once and reuses it for all n inputs from cache, so 4 sequences cost far less than 4 times one.
 * Threads split W's rows (sp_parallel_for); each output element is computed whole by one thread.
 *
 * Numerics
 *  - F32/BF16/F16 weights: x stays f32; bf16 and f16 widen exactly; products accumulate in f32.
 *  - Q8/Q4 weights: each row of x is quantized on the fly to int8 per group of 32 (d = max|x|/127, as llama.cpp's
 *    Q8_0), so a group's dot product is an exact integer; it is scaled by d_w·d_x and accumulated in f32. Q4 adds
 *    m_w · d_x·Σq_x per group for its offset.
 *  - MLX4/MLX8 weights (group 64): x is quantized to int8 per group of 64 the same way; each group's exact integer
 *    dot product is scaled by scale_w·d_x, plus bias_w · d_x·Σq_x for the affine offset.
 *  - Batch invariance: for a given ISA, row c of y is bit-identical whatever n is, whatever x's other rows hold,
 *    and whatever the thread count: every (weight row, x row) pair goes through the same sequence of operations.
 *    Different ISAs agree to rounding (the tests bound the difference), not bit for bit.
 *
 * ISAs: scalar C (the reference, and the path for an x86-64 without AVX2), AVX2+FMA+F16C, AVX-VNNI (AVX2's with
 * VEX vpdpbusd for Q8/Q4), AVX-512 F/BW/VL + VNNI, NEON with dotprod.
 * sp_matmul picks the best the pool's CPU has (sp_threadpool_cpu); sp_matmul_isa forces one (tests, lab).
 */
#ifndef SP_CPU_MATMUL_H
#define SP_CPU_MATMUL_H

#include "core/cpu.h"
#include "core/quant.h"
#include "core/threadpool.h"

#include <stdbool.h>

typedef enum sp_isa { SP_ISA_SCALAR, SP_ISA_AVX2, SP_ISA_AVXVNNI, SP_ISA_AVX512, SP_ISA_NEON, SP_ISA_COUNT } sp_isa;

const char *sp_isa_name(sp_isa isa);
/* Whether this build has kernels for `isa` and the CPU can run them. */
bool sp_isa_supported(sp_isa isa, const sp_cpu *cpu);
/* The fastest supported ISA. */
sp_isa sp_isa_best(const sp_cpu *cpu);

/* y = x · Wᵀ as above. pool may be NULL (one thread; the CPU is then detected on each call, so pass a pool on hot
 * paths). y must not alias x. Errors: SPLASH_ERR_INVALID_ARGUMENT (bad type, negative n), SPLASH_ERR_OUT_OF_MEMORY
 * (the quantized copy of x for quantized weights, about n·(cols + 12·cols/32) bytes, is allocated per call). */
splash_status sp_matmul(sp_threadpool *pool, float *y, const sp_matrix *W, const float *x, int64_t n);
/* The same with a chosen ISA; SPLASH_ERR_UNSUPPORTED when this build or CPU lacks it. */
splash_status sp_matmul_isa(sp_threadpool *pool, sp_isa isa, float *y, const sp_matrix *W, const float *x, int64_t n);

#endif
