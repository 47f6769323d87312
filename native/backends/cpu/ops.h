/* ops.h — the CPU backend's op implementations (the table in backend.c points at these) and their shared helpers.
 * Each op's contract is the comment on its field in backends/backend.h. */
#ifndef SP_CPU_OPS_H
#define SP_CPU_OPS_H

#include "backends/backend.h"

#include <math.h>
#include <stdint.h>

/* Runs fn over [0, n) split across the backend's workers; fn gets a sub-range and the worker's index. */
typedef void (*sp_range_fn)(void *ctx, int64_t begin, int64_t end, int thread);
void sp_cpu_for(const sp_backend *be, int64_t n, sp_range_fn fn, void *ctx);

static inline float sp_sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }
static inline float sp_silu(float x) { return x / (1.0f + expf(-x)); }
/* torch.nn.functional.softplus with its default threshold: linear above 20. */
static inline float sp_softplus(float x) { return x > 20.0f ? x : log1pf(expf(x)); }

/* One token of the delta rule for one v head (see gdn.c); the AVX2 form needs dv % 8 == 0. */
void sp_gdn_token_scalar(float *S, const float *q, const float *k, const float *v, float decay, float beta, float *o,
                         int32_t dk, int32_t dv);
void sp_gdn_token_avx2(float *S, const float *q, const float *k, const float *v, float decay, float beta, float *o,
                       int32_t dk, int32_t dv);

/* Sampling's exp passes over a logits row (sample_avx2.c): Σ exp((z − mx)·scale), and w = exp((z − mx)·scale). */
double sp_sum_exp_avx2(const float *z, int32_t n, float mx, float scale);
void sp_exp_weights_avx2(float *w, const float *z, int32_t n, float mx, float scale);

void sp_cpu_matmul(const sp_backend *be, float *y, const sp_matrix *W, const float *x, int64_t n);
void sp_cpu_embed(const sp_backend *be, float *x, const sp_matrix *table, const int32_t *tokens, int64_t n);
void sp_cpu_add(const sp_backend *be, float *y, const float *x, int64_t n);
void sp_cpu_add_sigmoid_scaled(const sp_backend *be, float *y, const float *x, const float *g, int64_t n, int64_t d);
void sp_cpu_silu_mul(const sp_backend *be, float *y, const float *g, const float *u, int64_t n);
void sp_cpu_sigmoid_mul(const sp_backend *be, float *y, const float *g, int64_t n);
void sp_cpu_rmsnorm(const sp_backend *be, float *y, const float *x, const float *w, int64_t n, int64_t d, float eps);
void sp_cpu_rmsnorm_gated(const sp_backend *be, float *y, const float *x, const float *z, const float *w, int64_t n,
                          int64_t d, float eps);
void sp_cpu_rope(const sp_backend *be, float *x, int64_t n, int32_t n_heads, int32_t head_dim, int32_t rot_dim,
                 const int32_t *pos, const int32_t *mrope_section, const float *inv_freq);
void sp_cpu_kv_write(const sp_backend *be, const sp_kv_view *kv, const float *k, const float *v, int32_t n_past,
                     int64_t n, int32_t n_kv_heads, int32_t head_dim);
void sp_cpu_attention(const sp_backend *be, float *out, const float *q, const sp_kv_view *kv, int32_t n_past,
                      int64_t n, int32_t n_heads, int32_t n_kv_heads, int32_t head_dim, float scale);
void sp_cpu_attention_ext(const sp_backend *be, float *out, const float *q, int32_t n_heads, int32_t n_kv_heads,
                          int32_t head_dim, float scale, const sp_attn_ext *x);
void sp_cpu_conv_silu(const sp_backend *be, float *y, const float *x, int64_t n, int64_t channels, const float *w,
                      int32_t kernel, float *tail);
void sp_cpu_gdn_recurrent(const sp_backend *be, float *out, const float *qkv, const float *a, const float *b,
                          const sp_gdn_shape *shape, float *S, int64_t n);
void sp_cpu_gdn_chunked(const sp_backend *be, float *out, const float *qkv, const float *a, const float *b,
                        const sp_gdn_shape *shape, float *S, int64_t n);
void sp_cpu_moe_route(const sp_backend *be, int32_t *ids, float *w, const float *logits, int64_t n, int32_t n_experts,
                      int32_t top_k);
void sp_cpu_moe_experts(const sp_backend *be, float *y, const float *x, const int32_t *ids, const float *w, int64_t n,
                        const sp_moe_experts *experts, float *scratch);
void sp_cpu_layernorm(const sp_backend *be, float *y, const float *x, const float *w, const float *b, int64_t n,
                      int64_t d, float eps);
void sp_cpu_gelu(const sp_backend *be, float *y, const float *x, int64_t n, int32_t approx_tanh);
void sp_cpu_add_rows(const sp_backend *be, float *y, const float *b, int64_t n, int64_t d);
splash_status sp_cpu_sample(const sp_backend *be, sp_sample_job *jobs, int32_t n_jobs, int32_t vocab, void *scratch,
                            uint64_t scratch_bytes_per_thread);

#endif
