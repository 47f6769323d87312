/* attention.c — causal grouped-query attention over the paged KV cache, and writing new K/V into it.
 *
 * One work item is (query row, kv head): the kv head's query heads are processed together, so each key and value
 * vector is read once per item. Softmax is online over blocks of positions (running max and sum per head), so no
 * buffer grows with the context; the output row doubles as the accumulator. */
#include "ops.h"

#include <string.h>

enum { BLOCK = 32, MAX_GROUP = 64 };

static inline const float *kv_row(const float *base, const sp_kv_view *kv, int64_t p, int32_t g, int32_t head_dim) {
    int64_t page = kv->pages[p / kv->page_tokens], row = p % kv->page_tokens;
    return base + page * kv->page_stride + ((int64_t)g * kv->page_tokens + row) * head_dim;
}

/* Eight independent partial sums: the loop vectorizes without reassociating a single accumulator. */
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
    const sp_kv_view *kv;
    int32_t n_past, n_heads, n_kv_heads, head_dim;
    float scale;
} attn_args;

static void attend(void *ctx, int64_t begin, int64_t end, int thread) {
    const attn_args *a = ctx;
    int32_t G = a->n_heads / a->n_kv_heads, hd = a->head_dim;
    float m[MAX_GROUP], l[MAX_GROUP], s[MAX_GROUP][BLOCK];
    for (int64_t item = begin; item < end; item++) {
        int64_t i = item / a->n_kv_heads;
        int32_t g = (int32_t)(item % a->n_kv_heads);
        int64_t len = a->n_past + i + 1; /* causal: position n_past+i sees 0 ..= n_past+i */
        const float *q = a->q + (i * a->n_heads + (int64_t)g * G) * hd;
        float *o = a->out + (i * a->n_heads + (int64_t)g * G) * hd;
        memset(o, 0, sizeof(float) * (size_t)G * (size_t)hd);
        for (int32_t h = 0; h < G; h++) m[h] = -INFINITY, l[h] = 0;
        for (int64_t p0 = 0; p0 < len; p0 += BLOCK) {
            int32_t nb = (int32_t)(len - p0 < BLOCK ? len - p0 : BLOCK);
            /* scores = q·kᵀ · scale */
            for (int32_t j = 0; j < nb; j++) {
                const float *k = kv_row(a->kv->k, a->kv, p0 + j, g, hd);
                for (int32_t h = 0; h < G; h++) s[h][j] = dot(q + (int64_t)h * hd, k, hd) * a->scale;
            }
            /* online softmax: rescale what was accumulated under the old max */
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
            /* out += p · v */
            for (int32_t j = 0; j < nb; j++) {
                const float *v = kv_row(a->kv->v, a->kv, p0 + j, g, hd);
                for (int32_t h = 0; h < G; h++) {
                    float p = s[h][j], *oh = o + (int64_t)h * hd;
                    for (int32_t d = 0; d < hd; d++) oh[d] += p * v[d];
                }
            }
        }
        for (int32_t h = 0; h < G; h++)
            for (int32_t d = 0; d < hd; d++) o[(int64_t)h * hd + d] /= l[h];
    }
}

void sp_cpu_attention(const sp_backend *be, float *out, const float *q, const sp_kv_view *kv, int32_t n_past,
                      int64_t n, int32_t n_heads, int32_t n_kv_heads, int32_t head_dim, float scale) {
    attn_args a = {out, q, kv, n_past, n_heads, n_kv_heads, head_dim, scale};
    sp_cpu_for(be, n * n_kv_heads, attend, &a);
}

void sp_cpu_kv_write(const sp_backend *be, const sp_kv_view *kv, const float *k, const float *v, int32_t n_past,
                     int64_t n, int32_t n_kv_heads, int32_t head_dim) {
    size_t bytes = sizeof(float) * (size_t)head_dim;
    for (int64_t i = 0; i < n; i++)
        for (int32_t g = 0; g < n_kv_heads; g++) {
            int64_t src = (i * n_kv_heads + g) * head_dim;
            memcpy((float *)kv_row(kv->k, kv, n_past + i, g, head_dim), k + src, bytes);
            memcpy((float *)kv_row(kv->v, kv, n_past + i, g, head_dim), v + src, bytes);
        }
}
