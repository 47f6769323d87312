/* matmul_panel.h — what the AVX-512 and AVX-VNNI panel kernels share whatever their vector width (internal to the
 * CPU matmul). Include after defining INLINE and the file's LANES (weight rows per panel) and X_TILE (x rows per tile).
 */
#ifndef SP_CPU_MATMUL_PANEL_H
#define SP_CPU_MATMUL_PANEL_H

#include "matmul_kernels.h"

#include <immintrin.h>
#include <stdbool.h>

/* An unaligned int32 that may alias the int8 x quants (4 of them, broadcast to every lane). */
typedef int32_t i32_unaligned __attribute__((may_alias, aligned(1)));

INLINE const uint8_t *row_ptr(const sp_matrix *W, int64_t r) { return (const uint8_t *)W->data + r * W->row_bytes; }

/* Where a row's f16 scales start; Q4's f16 mins follow them, nb halves later (quant.h). */
INLINE int64_t scales_at(bool q4, int64_t nb) { return q4 ? (nb + 1) / 2 * SP_QK : nb * SP_QK; }

/* A panel's rows are one contiguous block of memory, which the kernels read LANES strided streams at a time: the
 * hardware prefetcher does not follow, so step s of S prefetches the s-th S-th of the block PREFETCH_PANELS ahead. */
enum { PREFETCH_PANELS = 2 };
INLINE void prefetch_ahead(const sp_matrix *W, int64_t r, int64_t s, int64_t S) {
    const int64_t bytes = LANES * W->row_bytes;
    const char *next = (const char *)row_ptr(W, r) + PREFETCH_PANELS * bytes;
    for (int64_t o = (s * bytes / S) & ~(int64_t)63; o < (s + 1) * bytes / S; o += 64) _mm_prefetch(next + o, _MM_HINT_T0);
}

/* x rows in tiles of X_TILE, each group of a tile together: the tile's quants (32 bytes per row), then per row d_x,
 * the Q8 correction −128·Σq_x and s_x, so that a GEMM tile reads one stream at constant offsets. */
typedef struct xgroup {
    int8_t q[X_TILE][SP_QK];
    float d[X_TILE];
    int32_t corr[X_TILE];
    float s[X_TILE];
} xgroup;

/* Rows [c, c + C) of x into tile t (nb groups); rows past C are left as they are (never read). */
static void pack_x(const sp_act *x, int64_t c, int C, xgroup *t) {
    const int64_t nb = x->nb;
    for (int j = 0; j < C; j++) {
        const int8_t *q = x->q + (c + j) * nb * SP_QK;
        const float *d = x->d + (c + j) * nb, *s = x->s + (c + j) * nb;
        const int32_t *sum = x->sum + (c + j) * nb;
        for (int64_t b = 0; b < nb; b++) {
            _mm256_storeu_si256((__m256i *)t[b].q[j], _mm256_loadu_si256((const __m256i *)(q + b * SP_QK)));
            t[b].d[j] = d[b], t[b].corr[j] = -128 * sum[b], t[b].s[j] = s[b];
        }
    }
}

#endif
