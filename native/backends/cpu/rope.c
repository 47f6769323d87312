/* rope.c — partial NeoX rotary embedding, with interleaved MRoPE position streams for vision inputs. */
#include "ops.h"

typedef struct {
    float *x;
    int32_t n_heads, head_dim, rot_dim;
    const int32_t *pos, *mrope_section;
    const float *inv_freq;
} rope_args;

/* Which position stream frequency i reads: HF Qwen3_5TextRotaryEmbedding.recomposition_frequencies keeps T and
 * overwrites i ≡ 1 (mod 3) with H while i < 3·section[1], i ≡ 2 with W while i < 3·section[2]. */
static int32_t stream_of(int32_t i, const int32_t *section) {
    int32_t s = i % 3;
    return s != 0 && i < 3 * section[s] ? s : 0;
}

static void rope_rows(void *ctx, int64_t b, int64_t e, int t) {
    const rope_args *a = ctx;
    int32_t half = a->rot_dim / 2;
    float cs[512], sn[512]; /* rot_dim/2 ≤ 512: checked at load */
    for (int64_t r = b; r < e; r++) {
        for (int32_t i = 0; i < half; i++) {
            int32_t p = a->mrope_section ? a->pos[r * 3 + stream_of(i, a->mrope_section)] : a->pos[r];
            /* freqs = inv_freq · position in fp32, then cos/sin in fp32 (HF casts to the activation dtype) */
            float ang = (float)p * a->inv_freq[i];
            cs[i] = cosf(ang);
            sn[i] = sinf(ang);
        }
        for (int32_t h = 0; h < a->n_heads; h++) {
            float *x = a->x + (r * a->n_heads + h) * a->head_dim;
            /* x_rot·cos + rotate_half(x_rot)·sin, rotate_half(x) = [−x2, x1]; dims ≥ rot_dim pass through */
            for (int32_t i = 0; i < half; i++) {
                float x1 = x[i], x2 = x[i + half];
                x[i] = x1 * cs[i] - x2 * sn[i];
                x[i + half] = x2 * cs[i] + x1 * sn[i];
            }
        }
    }
}

void sp_cpu_rope(const sp_backend *be, float *x, int64_t n, int32_t n_heads, int32_t head_dim, int32_t rot_dim,
                 const int32_t *pos, const int32_t *mrope_section, const float *inv_freq) {
    rope_args a = {x, n_heads, head_dim, rot_dim, pos, mrope_section, inv_freq};
    if (n < 4) rope_rows(&a, 0, n, 0);
    else sp_cpu_for(be, n, rope_rows, &a);
}

void sp_cpu_attention_prep(const sp_backend *be, float *q, float *gate, const float *qg, float *k, const float *q_norm,
                           const float *k_norm, int64_t n, int32_t n_heads, int32_t n_kv_heads, int32_t head_dim, float eps,
                           int32_t rot_dim, const int32_t *pos, const int32_t *mrope_section, const float *inv_freq) {
    int64_t hd = head_dim;
    be->copy_rows(be, q, hd, qg, 2 * hd, n * n_heads, hd); /* split each head's [query | gate] */
    be->copy_rows(be, gate, hd, qg + hd, 2 * hd, n * n_heads, hd);
    sp_cpu_rmsnorm(be, q, q, q_norm, n * n_heads, hd, eps);
    sp_cpu_rmsnorm(be, k, k, k_norm, n * n_kv_heads, hd, eps);
    sp_cpu_rope(be, q, n, n_heads, head_dim, rot_dim, pos, mrope_section, inv_freq);
    sp_cpu_rope(be, k, n, n_kv_heads, head_dim, rot_dim, pos, mrope_section, inv_freq);
}
