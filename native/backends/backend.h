/* backend.h — the ops a backend implements so the forward passes in native/arch/ can run on it (ARCHITECTURE §4).
 *
 * A backend is this table plus its memory: the arch file calls `be->rmsnorm(be, ...)` and never sees a kernel.
 * Activations are row-major f32 in buffers the backend allocated; rows are tokens. Weights are sp_matrix views
 * (native/core/quant.h): any row range of a matrix is a matrix, so MoE experts and fused projections are views.
 *
 * What callers guarantee, so no op checks it again: shapes agree with the comment of the op; n ≥ 1; buffers do not
 * overlap unless the op says "in place"; positions and page tables cover what is read. The ABI layer (native/api/)
 * validates everything that comes from outside before the first op runs.
 *
 * The CPU backend (native/backends/cpu/) is the reference: scalar C for every op, a per-ISA file only where a
 * measurement showed it pays, and a thread pool under every op that has enough work to split.
 */
#ifndef SP_BACKEND_H
#define SP_BACKEND_H

#include "core/quant.h"
#include "splash.h"

#include <stdint.h>

typedef struct sp_backend sp_backend;
typedef struct sp_threadpool sp_threadpool; /* core/threadpool.h */

/* ---- the paged KV cache ----
 * A K or V row is head_dim values in the cache's KV type (SPLASH_KV_*), stored as a row of the matrix type below
 * (core/quant.h layouts): f32, f16, or int8 in groups of 32 with an f16 scale per group (Q8: value = q · d, d =
 * max|x| / 127 of the group). Attention reads every row as the f32 values it stores and accumulates in f32. */
static inline sp_mtype sp_kv_mtype(int32_t kv_type) {
    return kv_type == SPLASH_KV_F16 ? SP_MAT_F16 : kv_type == SPLASH_KV_INT8 ? SP_MAT_Q8 : SP_MAT_F32;
}
static inline int64_t sp_kv_row_bytes(int32_t kv_type, int32_t head_dim) {
    return sp_mtype_row_bytes(sp_kv_mtype(kv_type), head_dim);
}

/* One sequence's view of one attention layer in the paged KV cache. A page holds page_tokens positions; inside it
 * this layer's keys are rows [n_kv_heads][page_tokens] and its values the same. Position p of the sequence lives in
 * page pages[p / page_tokens], row p % page_tokens. */
typedef struct sp_kv_view {
    void *k, *v;           /* this layer's K and V inside page 0 of the cache */
    int64_t page_stride;   /* bytes from one page to the next */
    const int32_t *pages;  /* the sequence's page table */
    int32_t page_tokens;
    int32_t type;          /* SPLASH_KV_* of every row */
} sp_kv_view;

/* One sequence's part of a step's attention: its view of the layer, and its query rows [row0, row0 + n) of the step
 * at positions n_past … n_past + n − 1. */
typedef struct sp_attn_seq {
    sp_kv_view kv;
    int64_t row0;
    int32_t n_past, n;
} sp_attn_seq;

/* Bytes of the K and V of n_layers attention layers at page_tokens positions: a page of the cache holds, per layer,
 * K rows [n_kv_heads][page_tokens] then V rows alike (the cache may pad a page; views take its stride). */
static inline int64_t sp_kv_layers_bytes(int32_t kv_type, int32_t n_layers, int32_t n_kv_heads, int32_t head_dim,
                                         int32_t page_tokens) {
    return (int64_t)n_layers * 2 * n_kv_heads * page_tokens * sp_kv_row_bytes(kv_type, head_dim);
}

/* Layer `layer`'s view in such pages: the cache at base, page_stride bytes from one page to the next. */
static inline sp_kv_view sp_kv_layer_view(void *base, int64_t page_stride, int32_t kv_type, int32_t layer,
                                          int32_t n_kv_heads, int32_t head_dim, int32_t page_tokens,
                                          const int32_t *pages) {
    int64_t half = (int64_t)n_kv_heads * page_tokens * sp_kv_row_bytes(kv_type, head_dim);
    uint8_t *k = (uint8_t *)base + 2 * half * layer;
    return (sp_kv_view){k, k + half, page_stride, pages, page_tokens, kv_type};
}

/* What a query row of attention_ext sees (drafters: the MTP layer over its own KV, a DFlash block over context
 * K/V in pages plus its own rows). Row i sits at position q_pos0 + i; block row j (when k_blk is set) at q_pos0 + j. */
typedef struct sp_attn_ext {
    int32_t n_rows, q_pos0;
    const sp_kv_view *kv;       /* keys/values in the sequence's pages */
    int32_t page_lo, page_hi;   /* row i sees page positions [page_lo, page_hi + i · page_causal) */
    int32_t page_causal;
    int32_t window;             /* 0 = none; else only keys with |q_pos − k_pos| < window */
    const float *k_blk, *v_blk; /* NULL, or the rows' own keys and values [n_rows][n_kv_heads][head_dim] */
    int32_t blk_causal;         /* 1: row i sees block rows 0..i; 0: every block row */
} sp_attn_ext;

/* Per-layer constants of a Gated DeltaNet mixer, in the layout the ops read. */
typedef struct sp_gdn_shape {
    int32_t n_k_heads, n_v_heads;  /* Hk, Hv; v head h reads q/k head h / (Hv/Hk) (HF grouped order) */
    int32_t k_dim, v_dim;          /* dk, dv: per-head sizes */
    const float *A;                /* [Hv] −exp(A_log), computed at load */
    const float *dt_bias;          /* [Hv] */
} sp_gdn_shape;

/* A Gated DeltaNet mixer's core for gdn_core: its delta-rule shape, causal conv and gated output norm. */
typedef struct sp_gdn_core {
    sp_gdn_shape shape;
    const float *conv_w;           /* [2·Hk·dk + Hv·dv][kernel] */
    int32_t kernel;
    const float *norm_w;           /* [dv] the gated norm's weight (plain w) */
    float eps;
} sp_gdn_core;

/* One sequence's part of a step's Gated DeltaNet core: rows [row0, row0 + n) of the step's arrays, its recurrent state
 * S and its conv tail. */
typedef struct sp_gdn_seq {
    int64_t row0, n;
    float *S, *tail;
} sp_gdn_seq;

/* Routed experts of one MoE layer: expert e is gate[e], up[e] ([I, H] each) and down[e] ([H, I]). */
typedef struct sp_moe_experts {
    const sp_matrix *gate, *up, *down; /* [n_experts] views */
    int32_t n_experts, top_k;
    int64_t hidden, inter;             /* H, I */
} sp_moe_experts;

/* Scratch one moe_experts call needs for n tokens, in floats (rows are gathered by expert). */
int64_t sp_moe_scratch_floats(int64_t n, int32_t top_k, int64_t hidden, int64_t inter);

/* One row to sample: the logits row, the sequence's settings, and where the answer goes. */
typedef struct sp_sample_job {
    const float *logits;            /* [vocab] raw logits; not modified */
    const splash_sampling *params;
    const int32_t *penalty_tokens;  /* [n_penalty] tokens generated so far (penalties count them) */
    int32_t n_penalty;
    const uint32_t *allowed;        /* NULL or bitmask [ceil(vocab/32)]; bit t set = token t may be chosen */
    uint64_t position;              /* RNG counter: the draw is a function of (seed, position) only */
    int32_t n_top;                  /* top logprobs wanted (≤ SPLASH_MAX_TOP_LOGPROBS) */
    int32_t *top_ids;               /* out [n_top] */
    float *top_logprobs;            /* out [n_top] */
    int32_t token;                  /* out */
    float logprob;                  /* out: log-probability of `token` (see splash_seq) */
    const uint32_t *tokens;         /* NULL or bitmask: the ids below `vocab` that are tokens (the rest are never
                                       chosen nor listed) */
} sp_sample_job;

/* Scratch sample() needs per worker thread, in bytes. */
uint64_t sp_sample_scratch_bytes(int32_t vocab);

struct sp_backend {
    const char *name;
    const char *device;   /* GPU backends: the device's name; the CPU backend: NULL */
    sp_threadpool *pool;  /* CPU: the workers every op splits over */
    int n_threads;
    /* First failure inside an op (an allocation in a kernel; the message is already set), kept until the caller reads
     * and clears it: ops stay void so a forward pass reads as a list of ops, and checks once per step. */
    splash_status *status;
    void *impl;           /* GPU backends: their device state */
    uint32_t kv_types;    /* the KV types (bit 1 << SPLASH_KV_*) kv_write, attention and attention_ext take */
    /* (optional, NULL on the CPU) The prompt tokens a step should carry for a model of this width and depth, as measured
     * on this backend's device; 0 where none was. */
    int32_t (*step_tokens)(const sp_backend *be, int64_t hidden, int32_t layers);

    /* ---- memory ---- */
    /* Zeroed, 64-byte aligned; NULL when out of memory. On a GPU backend this is device memory the host must not
     * touch (the addresses are not mapped): move data with write/read/clear/copy_rows below. */
    void *(*alloc)(const sp_backend *be, uint64_t bytes);
    void (*free)(const sp_backend *be, void *p);
    /* (optional, NULL on the CPU) Copies `rows` rows of row_bytes of weights to the backend once, at load, and returns
     * the pointer ops take instead of the host data (row r at + r · row_bytes, so views of it stay views). */
    const void *(*upload)(const sp_backend *be, const void *data, int64_t rows, int64_t row_bytes);
    /* dst (backend memory) ← src (host), bytes. */
    void (*write)(const sp_backend *be, void *dst, const void *src, uint64_t bytes);
    /* dst (host) ← src (backend memory), bytes; waits for the ops before it. */
    void (*read)(const sp_backend *be, void *dst, const void *src, uint64_t bytes);
    /* bytes of backend memory at dst set to zero. */
    void (*clear)(const sp_backend *be, void *dst, uint64_t bytes);
    /* dst[r][0..cols) = src[r][0..cols) for r < rows, rows dst_stride / src_stride floats apart (split and gather). */
    void (*copy_rows)(const sp_backend *be, float *dst, int64_t dst_stride, const float *src, int64_t src_stride,
                      int64_t rows, int64_t cols);

    /* ---- dense algebra ---- */
    /* y[n][W.rows] = x[n][W.cols] · Wᵀ, f32 accumulate. Every row of a step in one call: weights read once. */
    void (*matmul)(const sp_backend *be, float *y, const sp_matrix *W, const float *x, int64_t n);
    /* x[n][d] = table[tokens[i]] (table rows converted to f32). */
    void (*embed)(const sp_backend *be, float *x, const sp_matrix *table, const int32_t *tokens, int64_t n);
    /* y[i] += x[i], i < n. */
    void (*add)(const sp_backend *be, float *y, const float *x, int64_t n);
    /* y[i] = silu(g[i]) · u[i] (SwiGLU), i < n. */
    void (*silu_mul)(const sp_backend *be, float *y, const float *g, const float *u, int64_t n);
    /* h[n][gate.rows] = silu(x · gateᵀ) ⊙ (x · upᵀ): matmul by gate and by up, then silu_mul (gate and up of one shape
     * and type), which a GPU runs as one GEMV for few rows; u: scratch of h's size, which such a pass leaves alone. */
    void (*matmul_gate_up)(const sp_backend *be, float *h, float *u, const sp_matrix *gate, const sp_matrix *up,
                           const float *x, int64_t n);
    /* y[i] *= sigmoid(g[i]) (gated attention output), in place, i < n. */
    void (*sigmoid_mul)(const sp_backend *be, float *y, const float *g, int64_t n);

    /* ---- norms ---- */
    /* y = x / sqrt(mean(x²) + eps) · w over n rows of d; in place allowed. Zero-centred checkpoints store w − 1:
     * the loader adds the 1 once, so this one op serves every norm but the gated one. */
    void (*rmsnorm)(const sp_backend *be, float *y, const float *x, const float *w, int64_t n, int64_t d, float eps);
    /* x[n][d] += r (the residual add), then y = rmsnorm(x) · w: add followed by rmsnorm, which a GPU runs as one
     * step; y must not overlap x or r. */
    void (*add_rmsnorm)(const sp_backend *be, float *y, float *x, const float *r, const float *w, int64_t n, int64_t d,
                        float eps);
    /* y = w · x / sqrt(mean(x²) + eps) · silu(z) over n rows of d (the GDN output norm; plain w); in place allowed. */
    void (*rmsnorm_gated)(const sp_backend *be, float *y, const float *x, const float *z, const float *w, int64_t n,
                          int64_t d, float eps);

    /* ---- positions ---- */
    /* NeoX RoPE on the first rot_dim dims of each head of x[n][n_heads][head_dim], in place: pairs (i, i + rot_dim/2).
     * pos: [n] (text: one stream) or, when mrope_section is non-NULL, [n][3] (T, H, W) with interleaved MRoPE:
     * frequency i takes stream i % 3 while i < 3 · mrope_section[i % 3], else T. inv_freq: [rot_dim / 2]. */
    void (*rope)(const sp_backend *be, float *x, int64_t n, int32_t n_heads, int32_t head_dim, int32_t rot_dim,
                 const int32_t *pos, const int32_t *mrope_section, const float *inv_freq);

    /* The gated attention's inputs, as copy_rows, rmsnorm and rope would make them: from qg [n][n_heads][2·head_dim]
     * (each head's [query | gate]), q = rope(rmsnorm(query) · q_norm) and gate, both [n][n_heads][head_dim]; and
     * k [n][n_kv_heads][head_dim] = rope(rmsnorm(k) · k_norm) in place (rope's arguments as it takes them). A GPU runs it
     * as one dispatch. */
    void (*attention_prep)(const sp_backend *be, float *q, float *gate, const float *qg, float *k, const float *q_norm,
                           const float *k_norm, int64_t n, int32_t n_heads, int32_t n_kv_heads, int32_t head_dim, float eps,
                           int32_t rot_dim, const int32_t *pos, const int32_t *mrope_section, const float *inv_freq);

    /* ---- attention ---- */
    /* Writes k, v ([n][n_kv_heads][head_dim]) of positions n_past .. n_past+n−1 into the sequence's pages, converted to
     * the view's KV type. */
    void (*kv_write)(const sp_backend *be, const sp_kv_view *kv, const float *k, const float *v, int32_t n_past,
                     int64_t n, int32_t n_kv_heads, int32_t head_dim);
    /* Causal GQA over the pages for each sequence of a step (host array seqs): its row i (position n_past+i) of q
     * [rows][n_heads][head_dim] attends to its positions 0 .. n_past+i; out [rows][n_heads][head_dim] =
     * softmax(q·kᵀ · scale) · v, on the sequence's rows (row0 …). Query head h reads kv head h / (n_heads / n_kv_heads).
     * Prefill block, single-token decode and K-token verify are all this op. gate: NULL, or [rows][n_heads][head_dim],
     * then out ⊙= sigmoid(gate) (sigmoid_mul, the gated attention's output gate), which a GPU applies as it writes out.
     * The sequences share nothing written, so a GPU runs them at once. */
    void (*attention)(const sp_backend *be, float *out, const float *q, const float *gate, const sp_attn_seq *seqs,
                      int32_t n_seqs, int32_t n_heads, int32_t n_kv_heads, int32_t head_dim, float scale);

    /* (optional: drafters need it) GQA of q [n_rows][n_heads][head_dim] over the keys `x` makes visible;
     * out = softmax(q·kᵀ · scale) · v, same layout; a row that sees no key gets zeros. */
    void (*attention_ext)(const sp_backend *be, float *out, const float *q, int32_t n_heads, int32_t n_kv_heads,
                          int32_t head_dim, float scale, const sp_attn_ext *x);

    /* ---- Gated DeltaNet ---- */
    /* Causal depthwise conv + SiLU for one sequence: y[t][c] = silu(Σ_j w[c][j] · xin[t+j][c]), xin = tail ; x, with
     * x, y [n][channels], w [channels][kernel], tail [kernel−1][channels] = the last raw (pre-conv) rows, updated. */
    void (*conv_silu)(const sp_backend *be, float *y, const float *x, int64_t n, int64_t channels, const float *w,
                      int32_t kernel, float *tail);
    /* The gated delta rule for one sequence, token by token, state S [Hv][dk][dv] fp32 updated in place.
     * qkv [n][2·Hk·dk + Hv·dv] (post conv: q | k | v), a, b [n][Hv] raw projections; out [n][Hv][dv]. Per v head:
     *   q, k ← l2norm(q), l2norm(k) (eps 1e-6); q ← q · dk^−½; β = sigmoid(b); g = A · softplus(a + dt_bias)
     *   S ← S · exp(g);  δ = (v − Sᵀk) · β;  S ← S + k ⊗ δ;  o = Sᵀq */
    void (*gdn_recurrent)(const sp_backend *be, float *out, const float *qkv, const float *a, const float *b,
                          const sp_gdn_shape *shape, float *S, int64_t n);

    /* The mixer's core for each sequence of a step, the three ops above in turn on its rows: qkv_conv = conv_silu(qkv)
     * (its tail updated), out = gdn_recurrent(qkv_conv) (its S updated), then, when z is set, out = rmsnorm_gated(out,
     * z) over its n · Hv rows of dv. Sequence i's rows start at seqs[i].row0 in out, qkv_conv, qkv, z, a and b (host
     * array seqs). The sequences share nothing, so a GPU runs them at once, each as one dispatch for few rows (decode,
     * verify blocks), leaving qkv_conv (scratch [rows][channels]) alone. */
    void (*gdn_core)(const sp_backend *be, float *out, float *qkv_conv, const float *qkv, const float *z, const float *a,
                     const float *b, const sp_gdn_core *core, const sp_gdn_seq *seqs, int32_t n_seqs);

    /* (optional: DFlash2 drafters need it) A grouped dynamic causal convolution over blocks of rows of x [·][H], in
     * place: block b is rows row0[b] … row0[b] + len[b] − 1, and its row t becomes
     *   y_t[c] = Σ_{o < K, o ≤ t} (base[o][c] + dyn_t[o][c / G]) · x_{t−o}[c]
     * (nothing before a block's first row), dyn_t the row's K · H / G coefficients, dyn rows dyn_stride floats apart,
     * base [K][H]. row0 and len are host arrays. */
    void (*block_conv)(const sp_backend *be, float *x, const float *dyn, int64_t dyn_stride, const float *base, int64_t H,
                       int32_t K, int32_t G, const int64_t *row0, const int32_t *len, int32_t n_blocks);

    /* ---- mixture of experts ---- */
    /* ids, w [n][top_k] from router logits [n][n_experts]: softmax in fp32, top k, weights renormalized to sum 1. */
    void (*moe_route)(const sp_backend *be, int32_t *ids, float *w, const float *logits, int64_t n, int32_t n_experts,
                      int32_t top_k);
    /* y[n][H] = Σ_k w[i][k] · down_e(silu(gate_e x) · up_e x), e = ids[i][k], then + sigmoid(shared_gate[i]) ·
     * shared[i][:] (the gated shared expert, added to the finished sum) where shared is not NULL. Rows are sorted by
     * expert so each expert's weights are read once for all its rows. scratch: sp_moe_scratch_floats(n, ...) floats. */
    void (*moe_experts)(const sp_backend *be, float *y, const float *x, const int32_t *ids, const float *w, int64_t n,
                        const sp_moe_experts *experts, float *scratch, const float *shared, const float *shared_gate);

    /* ---- vision tower (optional: the CPU backend has them; the tower runs there) ---- */
    /* y = (x − mean) / sqrt(var + eps) · w + b over n rows of d (LayerNorm, biased variance); in place allowed. */
    void (*layernorm)(const sp_backend *be, float *y, const float *x, const float *w, const float *b, int64_t n,
                      int64_t d, float eps);
    /* y[i] = gelu(x[i]), i < n: approx_tanh 1 = gelu_pytorch_tanh, 0 = the exact erf form (nn.GELU); in place allowed. */
    void (*gelu)(const sp_backend *be, float *y, const float *x, int64_t n, int32_t approx_tanh);
    /* y[i][:] += b over n rows of d (a Linear layer's bias). */
    void (*add_rows)(const sp_backend *be, float *y, const float *b, int64_t n, int64_t d);

    /* ---- sampling ---- */
    /* Samples every job (in parallel over jobs) from the first `vocab` entries of its row: the rows past them are
     * the output head's padding. scratch: n_threads regions of sp_sample_scratch_bytes each. Fails only when a job's
     * masks exclude every token. */
    splash_status (*sample)(const sp_backend *be, sp_sample_job *jobs, int32_t n_jobs, int32_t vocab, void *scratch,
                            uint64_t scratch_bytes_per_thread);
};

/* The CPU backend over `pool` (not owned); op failures land in *status. */
void sp_cpu_backend_init(sp_backend *be, sp_threadpool *pool, int n_threads, splash_status *status);

#endif
