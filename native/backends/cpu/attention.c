/* attention.c — causal grouped-query attention over the paged KV cache, and writing new K/V into it.
 *
 * The arithmetic is fixed in ops.h (blocks of SP_ATTN_KEY_BLOCK keys from position 0, online softmax, eight-lane
 * dot products): every query row's result depends only on its own query and the keys it sees, never on which
 * other rows share a call, so prefill chunks, decode and verify blocks agree bit for bit.
 *
 * Two forms of it:
 *  - the reference below: one work item per (query row, kv head), plain C, the oracle for the others;
 *  - the tiled form (attention_tile.h, in attention_avx2.c and attention_avx512.c with the same bits): one work item
 *    per (block of query rows, kv head), every query head of the group and every row of the block sharing each key
 *    and value read, exp eight or sixteen lanes at a time. Long prompts spend their time here: an 8K-token prefill
 *    of the embedded model was 2/3 attention in the reference form.
 * build/tools/attention_lab checks the two against each other bit for bit and times them.
 *
 * The cache holds rows of its KV type (backends/backend.h): an f32 cache is read in place, an f16 or int8 one row by
 * row into f32 (the reference converts each row where it uses it, the tiled form a block of rows at a time). */
#include "ops.h"

#include "core/error.h"
#include "core/threadpool.h"

#include <stdlib.h>
#include <string.h>

enum { KB = SP_ATTN_KEY_BLOCK };

/* q·k as ops.h defines it: eight lane chains of fused multiply-adds, then a fixed tree (head_dim % 8 == 0; a
 * remainder, which only the reference form accepts, is added last in order). */
static float dot_ref(const float *q, const float *k, int32_t hd) {
    float l[8] = {0};
    int32_t d = 0;
    for (; d + 8 <= hd; d += 8)
        for (int j = 0; j < 8; j++) l[j] = fmaf(q[d + j], k[d + j], l[j]);
    float s = ((l[0] + l[1]) + (l[2] + l[3])) + ((l[4] + l[5]) + (l[6] + l[7]));
    for (; d < hd; d++) s = fmaf(q[d], k[d], s);
    return s;
}

void sp_kv_to_f32(int32_t type, const void *row, int32_t head_dim, float *out) {
    if (type == SPLASH_KV_F16) {
        for (int32_t d = 0; d < head_dim; d++) out[d] = sp_f16_to_f32(((const uint16_t *)row)[d]);
    } else if (type == SPLASH_KV_INT8) {
        const int8_t *q = row;
        const uint16_t *dh = (const uint16_t *)(q + (head_dim + SP_QK - 1) / SP_QK * SP_QK);
        for (int32_t d = 0; d < head_dim; d++) out[d] = (float)q[d] * sp_f16_to_f32(dh[d / SP_QK]);
    } else {
        memcpy(out, row, sizeof(float) * (size_t)head_dim);
    }
}

void sp_kv_from_f32(const sp_backend *be, int32_t type, const float *x, int32_t head_dim, void *row) {
    if (type == SPLASH_KV_F16) {
        for (int32_t d = 0; d < head_dim; d++) ((uint16_t *)row)[d] = sp_f32_to_f16(x[d]);
    } else if (type == SPLASH_KV_INT8) {
#if defined(__x86_64__)
        const sp_cpu *cpu = be->pool ? sp_threadpool_cpu(be->pool) : NULL;
        if (cpu && cpu->avx2 && cpu->f16c && sp_quantize_row_avx2(SP_MAT_Q8, SP_MAT_F32, x, head_dim, row)) return;
#endif
        sp_quantize_row_q8(x, head_dim, row);
    } else {
        memcpy(row, x, sizeof(float) * (size_t)head_dim);
    }
}

/* One query head of row i, written out as ops.h states the arithmetic. */
static void attend_row(const sp_attn_args *a, int64_t i, int32_t g, const float *q, float *o) {
    int32_t hd = a->head_dim;
    int64_t len = a->n_past + i + 1; /* causal: position n_past+i sees 0 ..= n_past+i */
    float m = -INFINITY, l = 0, s[KB], buf[hd];
    const sp_kv_view *kv = a->kv;
    for (int64_t p0 = 0; p0 < len; p0 += KB) {
        int32_t nb = (int32_t)(len - p0 < KB ? len - p0 : KB);
        float mx = m;
        for (int32_t j = 0; j < KB; j++) {
            s[j] = j < nb ? dot_ref(q, sp_kv_row(kv, kv->k, p0 + j, g, hd, buf), hd) * a->scale : -INFINITY;
            mx = s[j] > mx ? s[j] : mx;
        }
        float corr = sp_exp_neg(m - mx);
        for (int32_t j = 0; j < KB; j++) s[j] = sp_exp_neg(s[j] - mx);
        l = l * corr + sp_attn_block_sum(s);
        for (int32_t d = 0; d < hd; d++) o[d] = p0 ? o[d] * corr : 0.0f;
        for (int32_t j = 0; j < nb; j++) {
            const float *v = sp_kv_row(kv, kv->v, p0 + j, g, hd, buf);
            for (int32_t d = 0; d < hd; d++) o[d] = fmaf(s[j], v[d], o[d]);
        }
        m = mx;
    }
    for (int32_t d = 0; d < hd; d++) o[d] /= l;
}

static void attend_ref(void *ctx, int64_t begin, int64_t end, int thread) {
    const sp_attn_args *a = ctx;
    int32_t G = a->n_heads / a->n_kv_heads, hd = a->head_dim;
    for (int64_t item = begin; item < end; item++) {
        int64_t i = item / a->n_kv_heads;
        int32_t g = (int32_t)(item % a->n_kv_heads);
        for (int32_t h = g * G; h < (g + 1) * G; h++)
            attend_row(a, i, g, a->q + (i * a->n_heads + h) * hd, a->out + (i * a->n_heads + h) * hd);
    }
}

#if defined(__x86_64__)
/* The tiled form's work items. Query blocks near the end of a prompt see more keys, and the pool splits items into
 * contiguous ranges, so blocks are listed from both ends alternately (first, last, second, second to last, …):
 * every range then holds about the same work. */
typedef struct {
    const sp_attn_args *a;
    int64_t n_blocks, rows;
    float *scratch;              /* per worker: 3 · KB rows of head_dim floats (ops.h, sp_attention_tile_avx2) */
    void (*tile)(const sp_attn_args *a, int64_t i0, int64_t i1, int32_t g, float *rows);
} tile_items;

static void attend_tiles(void *ctx, int64_t begin, int64_t end, int thread) {
    const tile_items *t = ctx;
    float *rows = t->scratch + (int64_t)thread * 3 * KB * t->a->head_dim;
    for (int64_t item = begin; item < end; item++) {
        int64_t z = item / t->a->n_kv_heads, b = z % 2 ? t->n_blocks - 1 - z / 2 : z / 2;
        int64_t i1 = (b + 1) * t->rows < t->a->n ? (b + 1) * t->rows : t->a->n;
        t->tile(t->a, b * t->rows, i1, (int32_t)(item % t->a->n_kv_heads), rows);
    }
}
#endif

static void attend(const sp_backend *be, float *out, const float *q, const sp_kv_view *kv, int32_t n_past, int64_t n,
                   int32_t n_heads, int32_t n_kv_heads, int32_t head_dim, float scale) {
    sp_attn_args a = {out, q, kv, n, n_past, n_heads, n_kv_heads, head_dim, scale};
#if defined(__x86_64__)
    if (sp_backend_avx2(be) && head_dim % 8 == 0) {
        /* about 64 (query row, head) pairs per tile: K and V blocks stay in L1/L2 while every pair uses them */
        int32_t G = n_heads / n_kv_heads;
        tile_items t = {&a, 0, 64 / G > 1 ? 64 / G : 1, NULL, sp_attention_tile_avx2};
        if (sp_backend_avx512(be) && head_dim % 16 == 0) t.tile = sp_attention_tile_avx512;
        t.n_blocks = (n + t.rows - 1) / t.rows;
        t.scratch = malloc(sizeof(float) * 3 * KB * (size_t)head_dim * (size_t)sp_threadpool_size(be->pool));
        if (!t.scratch) {
            splash_status st = SP_FAIL(SPLASH_ERR_OUT_OF_MEMORY, "out of memory for attention's tile scratch");
            if (*be->status == SPLASH_OK) *be->status = st;
            return;
        }
        sp_cpu_for(be, t.n_blocks * n_kv_heads, attend_tiles, &t);
        free(t.scratch);
        return;
    }
#endif
    sp_cpu_for(be, n * n_kv_heads, attend_ref, &a);
}

void sp_cpu_attention(const sp_backend *be, float *out, const float *q, const float *gate, const sp_attn_seq *seqs,
                      int32_t n_seqs, int32_t n_heads, int32_t n_kv_heads, int32_t head_dim, float scale) {
    for (int32_t i = 0; i < n_seqs; i++) {
        int64_t at = seqs[i].row0 * n_heads * head_dim, n = seqs[i].n;
        attend(be, out + at, q + at, &seqs[i].kv, seqs[i].n_past, n, n_heads, n_kv_heads, head_dim, scale);
        if (gate) sp_cpu_sigmoid_mul(be, out + at, gate + at, n * n_heads * head_dim);
    }
}

/* The reference form whatever the CPU (the lab and tests compare the tiled form with it). */
void sp_cpu_attention_ref(const sp_backend *be, const sp_attn_args *a) {
    sp_cpu_for(be, a->n * a->n_kv_heads, attend_ref, (void *)a);
}

void sp_cpu_kv_write(const sp_backend *be, const sp_kv_view *kv, const float *k, const float *v, int32_t n_past,
                     int64_t n, int32_t n_kv_heads, int32_t head_dim) {
    for (int64_t i = 0; i < n; i++)
        for (int32_t g = 0; g < n_kv_heads; g++) {
            int64_t src = (i * n_kv_heads + g) * head_dim;
            sp_kv_from_f32(be, kv->type, k + src, head_dim, (void *)sp_kv_at(kv, kv->k, n_past + i, g, head_dim));
            sp_kv_from_f32(be, kv->type, v + src, head_dim, (void *)sp_kv_at(kv, kv->v, n_past + i, g, head_dim));
        }
}
