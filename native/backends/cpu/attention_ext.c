/* attention_ext.c — attention with explicit visibility, for drafters: a key range of the sequence's pages plus,
 * optionally, the query rows' own keys held outside the pages (a DFlash block), bidirectional or causal among
 * themselves, with an optional sliding window (the contract is attention_ext in backends/backend.h).
 *
 * Same scheme as attention.c: one work item is (query row, kv head), the head group's queries share each key read,
 * softmax is online over blocks of keys. Page rows of an f16 / int8 cache are converted to f32 a block at a time. */
#include "ops.h"

#include "core/error.h"
#include "core/threadpool.h"

#include <stdlib.h>
#include <string.h>

enum { BLOCK = 32, MAX_GROUP = 64 };

static inline float dot(const float *a, const float *b, int32_t n) {
    float s[8] = {0};
    int32_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int j = 0; j < 8; j++) s[j] += a[i + j] * b[i + j];
    float r = ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
    for (; i < n; i++) r += a[i] * b[i];
    return r;
}

typedef struct {
    float *out;
    const float *q;
    const sp_attn_ext *x;
    int32_t n_heads, n_kv_heads, head_dim;
    float scale;
    float *converted;            /* per worker: 2 · BLOCK rows of head_dim floats (an f16 / int8 cache), or NULL */
} ext_args;

/* The visible keys of query row i, as two ranges: page positions [p0, p1) and block rows [b0, b1). */
static void visible(const sp_attn_ext *x, int64_t i, int64_t n, int64_t *p0, int64_t *p1, int64_t *b0, int64_t *b1) {
    int64_t qpos = (int64_t)x->q_pos0 + i;
    *p0 = x->page_lo;
    *p1 = (int64_t)x->page_hi + (x->page_causal ? i : 0);
    *b0 = 0;
    *b1 = x->k_blk ? (x->blk_causal ? i + 1 : n) : 0;
    if (x->window > 0) {
        /* |q_pos − k_pos| < window; block row j sits at q_pos0 + j */
        if (*p0 < qpos - x->window + 1) *p0 = qpos - x->window + 1;
        if (*b0 < i - x->window + 1) *b0 = i - x->window + 1;
        if (*b1 > i + x->window) *b1 = i + x->window;
    }
    if (*p1 < *p0) *p1 = *p0;
    if (*b0 < 0) *b0 = 0;
    if (*b1 < *b0) *b1 = *b0;
}

static void attend_ext(void *ctx, int64_t begin, int64_t end, int thread) {
    const ext_args *a = ctx;
    const sp_attn_ext *x = a->x;
    int32_t G = a->n_heads / a->n_kv_heads, hd = a->head_dim, Hkv = a->n_kv_heads;
    float m[MAX_GROUP], l[MAX_GROUP], s[MAX_GROUP][BLOCK];
    const float *keys[BLOCK], *vals[BLOCK];
    const sp_kv_view *kv = x->kv;
    float *rows = a->converted ? a->converted + (int64_t)thread * 2 * BLOCK * hd : NULL;
    for (int64_t item = begin; item < end; item++) {
        int64_t i = item / Hkv;
        int32_t g = (int32_t)(item % Hkv);
        const float *q = a->q + (i * a->n_heads + (int64_t)g * G) * hd;
        float *o = a->out + (i * a->n_heads + (int64_t)g * G) * hd;
        int64_t p0, p1, b0, b1;
        visible(x, i, x->n_rows, &p0, &p1, &b0, &b1);
        int64_t np = p1 - p0, len = np + (b1 - b0);
        memset(o, 0, sizeof(float) * (size_t)G * (size_t)hd);
        for (int32_t h = 0; h < G; h++) m[h] = -INFINITY, l[h] = 0;
        for (int64_t k0 = 0; k0 < len; k0 += BLOCK) {
            int32_t nb = (int32_t)(len - k0 < BLOCK ? len - k0 : BLOCK);
            for (int32_t j = 0; j < nb; j++) {
                int64_t t = k0 + j;
                if (t < np && !rows) {
                    keys[j] = sp_kv_at(kv, kv->k, p0 + t, g, hd);
                    vals[j] = sp_kv_at(kv, kv->v, p0 + t, g, hd);
                } else if (t < np) {
                    sp_kv_to_f32(kv->type, sp_kv_at(kv, kv->k, p0 + t, g, hd), hd, rows + (int64_t)j * hd);
                    sp_kv_to_f32(kv->type, sp_kv_at(kv, kv->v, p0 + t, g, hd), hd, rows + (int64_t)(BLOCK + j) * hd);
                    keys[j] = rows + (int64_t)j * hd, vals[j] = rows + (int64_t)(BLOCK + j) * hd;
                } else {
                    int64_t r = b0 + (t - np);
                    keys[j] = x->k_blk + (r * Hkv + g) * hd;
                    vals[j] = x->v_blk + (r * Hkv + g) * hd;
                }
                for (int32_t h = 0; h < G; h++) s[h][j] = dot(q + (int64_t)h * hd, keys[j], hd) * a->scale;
            }
            for (int32_t h = 0; h < G; h++) {
                float mx = m[h];
                for (int32_t j = 0; j < nb; j++) mx = s[h][j] > mx ? s[h][j] : mx;
                float corr = expf(m[h] - mx);
                if (corr != 1.0f) {
                    l[h] *= corr;
                    for (int32_t d = 0; d < hd; d++) o[(int64_t)h * hd + d] *= corr;
                }
                for (int32_t j = 0; j < nb; j++) {
                    s[h][j] = expf(s[h][j] - mx);
                    l[h] += s[h][j];
                }
                m[h] = mx;
            }
            for (int32_t j = 0; j < nb; j++)
                for (int32_t h = 0; h < G; h++) {
                    float p = s[h][j], *oh = o + (int64_t)h * hd;
                    for (int32_t d = 0; d < hd; d++) oh[d] += p * vals[j][d];
                }
        }
        /* a row that sees no key (never asked by the drafters) outputs zeros rather than NaN */
        for (int32_t h = 0; h < G; h++)
            if (l[h] > 0)
                for (int32_t d = 0; d < hd; d++) o[(int64_t)h * hd + d] /= l[h];
    }
}

void sp_cpu_attention_ext(const sp_backend *be, float *out, const float *q, int32_t n_heads, int32_t n_kv_heads,
                          int32_t head_dim, float scale, const sp_attn_ext *x) {
    ext_args a = {out, q, x, n_heads, n_kv_heads, head_dim, scale, NULL};
    if (x->kv && x->kv->type != SPLASH_KV_F32) {
        a.converted = malloc(sizeof(float) * 2 * BLOCK * (size_t)head_dim * (size_t)sp_threadpool_size(be->pool));
        if (!a.converted) {
            splash_status st = SP_FAIL(SPLASH_ERR_OUT_OF_MEMORY, "out of memory for attention's converted K/V rows");
            if (*be->status == SPLASH_OK) *be->status = st;
            return;
        }
    }
    sp_cpu_for(be, (int64_t)x->n_rows * n_kv_heads, attend_ext, &a);
    free(a.converted);
}
