/* attention_tile.h — the tiled form of attention, shared by attention_avx2.c and attention_avx512.c (the reference
 * form and the dispatch are in attention.c; the arithmetic all follow, op for op, is stated in ops.h).
 *
 * A tile is a block of query rows × one kv head: its rows are (query i, query head h of the group), at most 64.
 * For each block of 32 keys counted from position 0:
 *   scores   the tile's rows × the block's keys (scores_rows, from the including file): each K row is read from the
 *            cache once per tile and used by every row of it (GQA heads and neighbouring queries alike);
 *   softmax  per row on the block's 32 scores (softmax_block, from the including file), keys past the row's
 *            position masked;
 *   p · v    two rows at a time (pv_2, from the including file), over the block's V rows.
 * A row takes exactly the steps it would take alone, so the result is the reference's whatever the tile holds.
 * An f16 or int8 cache is converted a block of 32 K and V rows at a time into the tile's own f32 rows, once for
 * every row of the tile.
 *
 * The including file defines, before including this one:
 *   void kv_to_f32(int32_t type, const void *row, int32_t hd, float *out)
 *       a stored f16 / int8 row as the f32 values sp_kv_to_f32 gives (each exact or one product q · d);
 *   void scores_rows(const float *const *q, int32_t r0, int32_t R, const float *const *k, int32_t n_keys, int32_t hd,
 *                    float scale, float (*p)[KB], float *scratch)
 *       p[r][j] = q_r · k_j · scale for rows r0 ≤ r < R and keys j < n_keys rounded up to 4 (k holds that many
 *       pointers), each dot product as ops.h states it; scratch: KB rows of head_dim floats;
 *   void softmax_block(float *p, int32_t nb, float *m, float *l, float *corr)
 *       the online softmax step of one row over its block of 32 scores p, in place (→ weights): keys j ≥ nb masked,
 *       m the running max, l the running sum (its block's part added as sp_attn_block_sum does), corr exp(m − m');
 *   void pv_2(float *oa, float *ob, const float *pa, const float *pb, int32_t na, int32_t nb, float ca, float cb,
 *             bool fresh, const float *const *v, int32_t hd)
 *       o_a = o_a·ca + Σ_{j<na} pa_j·v_j (o_a from zero when fresh), each dim a chain of fused multiply-adds in key
 *       order; o_b likewise. */
#ifndef SP_CPU_ATTENTION_TILE_H
#define SP_CPU_ATTENTION_TILE_H

#include "ops.h"

#include <immintrin.h>
#include <stdbool.h>

enum { KB = SP_ATTN_KEY_BLOCK, MAX_ROWS = 64 };

static void attention_tile(const sp_attn_args *a, int64_t i0, int64_t i1, int32_t g, float *rows) {
    int32_t G = a->n_heads / a->n_kv_heads, hd = a->head_dim, R = (int32_t)(i1 - i0) * G;
    const float *q[MAX_ROWS];
    float *o[MAX_ROWS], m[MAX_ROWS], l[MAX_ROWS], corr[MAX_ROWS];
    int32_t nb[MAX_ROWS];
    _Alignas(64) float p[MAX_ROWS][KB];
    const float *k[KB + 3], *v[KB];
    const sp_kv_view *kv = a->kv;
    for (int32_t r = 0; r < R; r++) {
        int64_t row = ((i0 + r / G) * a->n_heads + (int64_t)g * G + r % G) * hd;
        q[r] = a->q + row, o[r] = a->out + row, m[r] = -INFINITY, l[r] = 0;
    }
    float scale = a->scale;
    int64_t end = a->n_past + i1; /* keys the tile's last row sees */
    for (int64_t p0 = 0; p0 < end; p0 += KB) {
        int32_t n_keys = (int32_t)(end - p0 < KB ? end - p0 : KB);
        for (int32_t j = 0; j < n_keys; j++) {
            const void *ks = sp_kv_at(kv, kv->k, p0 + j, g, hd), *vs = sp_kv_at(kv, kv->v, p0 + j, g, hd);
            if (kv->type == SPLASH_KV_F32) {
                k[j] = ks, v[j] = vs;
                continue;
            }
            kv_to_f32(kv->type, ks, hd, rows + (int64_t)j * hd);
            kv_to_f32(kv->type, vs, hd, rows + (int64_t)(KB + j) * hd);
            k[j] = rows + (int64_t)j * hd, v[j] = rows + (int64_t)(KB + j) * hd;
        }
        for (int32_t j = n_keys; j < KB + 3; j++) k[j] = k[n_keys - 1]; /* a group of four past the end: masked below */
        /* rows whose position n_past + i reaches this block: queries i ≥ p0 − n_past */
        int64_t first = p0 - a->n_past > i0 ? p0 - a->n_past : i0;
        int32_t r0 = (int32_t)(first - i0) * G;
        scores_rows(q, r0, R, k, n_keys, hd, scale, p, rows + (int64_t)2 * KB * hd);
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

#endif
