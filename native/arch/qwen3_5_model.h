/* qwen3_5_model.h — what a loaded Qwen3.5-family model is: its config, weights, the size table of per-sequence state,
 * and the scratch of a step. The forward pass (qwen3_5.c) reads it; the load (qwen3_5_load.c) fills it. */
#ifndef SP_ARCH_QWEN3_5_MODEL_H
#define SP_ARCH_QWEN3_5_MODEL_H

#include "qwen3_5.h"

#include "arch/attention.h"
#include "arch/ffn.h"
#include "arch/loader.h"
#include "backends/backend.h"
#include "core/checkpoint.h"

#include <stdbool.h>
#include <stdint.h>

/* ---- config ------------------------------------------------------------------------------------------------- */

typedef enum { LAYER_LINEAR_ATTENTION, LAYER_FULL_ATTENTION } layer_kind;

enum { MAX_LAYERS = 1024, LOGIT_ROWS = 64, DEFAULT_STEP_TOKENS = 512 };

typedef struct qwen35_config {
    bool moe;                              /* model_type qwen3_5_moe */
    int32_t vocab_size, hidden_size, num_hidden_layers, max_position_embeddings;
    float rms_norm_eps;
    /* full attention */
    int32_t num_attention_heads, num_key_value_heads, head_dim;
    float rope_theta, partial_rotary_factor;
    int32_t mrope_section[3];
    int32_t rot_dim;                       /* head_dim · partial_rotary_factor: the rotated leading dims */
    /* Gated DeltaNet */
    int32_t linear_num_key_heads, linear_num_value_heads, linear_key_head_dim, linear_value_head_dim;
    int32_t linear_conv_kernel_dim;
    int32_t conv_dim;                      /* 2·Hk·dk + Hv·dv: channels of in_proj_qkv and the conv */
    /* FFN */
    int32_t intermediate_size;             /* dense */
    int32_t num_experts, num_experts_per_tok, moe_intermediate_size, shared_expert_intermediate_size; /* MoE */
    bool tie_word_embeddings;
    layer_kind layer_types[MAX_LAYERS];
    int32_t n_full, n_linear;
} qwen35_config;

static inline sp_ffn_shape qwen35_ffn_shape(const qwen35_config *c) {
    return (sp_ffn_shape){c->moe, c->hidden_size, c->moe ? c->shared_expert_intermediate_size : c->intermediate_size,
                          c->num_experts, c->num_experts_per_tok, c->moe_intermediate_size};
}

/* ---- weights ------------------------------------------------------------------------------------------------ */

/* One decoder layer. Matrices are [out, in] (PyTorch order); vectors are f32 after sanitize(). */
typedef struct qwen35_layer {
    layer_kind kind;
    int32_t index;               /* among layers of its kind: KV offset in a page, or state offset in a slot */
    const float *input_norm;     /* (H) 1 + w */
    const float *post_norm;      /* (H) 1 + w */
    /* full attention */
    sp_matrix q_proj;            /* (Hq·2·hd, H): per head [query (hd) | gate (hd)] */
    sp_matrix k_proj, v_proj;    /* (Hkv·hd, H) */
    sp_matrix o_proj;            /* (H, Hq·hd) */
    const float *q_norm, *k_norm; /* (hd) 1 + w */
    /* Gated DeltaNet */
    sp_matrix in_proj_qkv;       /* (conv_dim, H): rows [q (Hk·dk) | k (Hk·dk) | v (Hv·dv)] */
    sp_matrix in_proj_z;         /* (Hv·dv, H) output gate */
    sp_matrix in_proj_b;         /* (Hv, H) β logits */
    sp_matrix in_proj_a;         /* (Hv, H) decay input */
    const float *conv1d;         /* (conv_dim, K) depthwise, no bias */
    const float *A;              /* (Hv) −exp(A_log) */
    const float *dt_bias;        /* (Hv) */
    const float *gdn_norm;       /* (dv) plain w */
    sp_matrix out_proj;          /* (H, Hv·dv) */
    sp_ffn_weights ffn;          /* dense or MoE */
} qwen35_layer;

typedef struct qwen35_weights {
    sp_matrix embed;             /* (vocab, H) at the recipe's type for embed: one row read per token */
    sp_matrix lm_head;           /* (vocab, H) */
    const float *norm;           /* (H) 1 + w */
    float *inv_freq;             /* (rot_dim / 2) RoPE frequencies */
    qwen35_layer *layers;        /* (num_hidden_layers) */
    sp_matrix *expert_views;     /* (MoE layers · 3 · E) backing the layers' sp_moe_experts */
    sp_weights held;             /* the vector block behind every f32 vector above, quantized copies, bytes held */
} qwen35_weights;

/* ---- per-sequence state (lives in the cache; this is its size table) -------------------------------------------
 * KV page of P positions, per full-attention layer j:  K rows (Hkv, P) then V rows (Hkv, P) in the KV type
 *                                                      (sp_kv_layers_bytes, backends/backend.h)
 * GDN slot, per linear-attention layer j:              S (Hv, dk, dv) fp32, then conv tail (K−1, conv_dim) raw rows */
static inline int64_t gdn_state_floats(const qwen35_config *c) {
    return (int64_t)c->linear_num_value_heads * c->linear_key_head_dim * c->linear_value_head_dim;
}
/* One linear-attention layer's part of a slot: S, then the conv tail. */
static inline int64_t layer_state_floats(const qwen35_config *c) {
    return gdn_state_floats(c) + (int64_t)(c->linear_conv_kernel_dim - 1) * c->conv_dim;
}
static inline int64_t slot_floats(const qwen35_config *c) { return (int64_t)c->n_linear * layer_state_floats(c); }

/* ---- scratch ------------------------------------------------------------------------------------------------
 * Sized for N = max_step_tokens rows. The mixer and FFN buffers of one phase share memory with the other phases. */
typedef struct qwen35_scratch {
    int32_t *tokens;             /* (N) every row's token */
    int32_t *pos;                /* (N) every row's position, or (N, 3) M-RoPE (t, h, w) when the step has images */
    float *x;                    /* (N, H) residual stream */
    float *xb;                   /* (N, H) normed input of the current block */
    float *out;                  /* (N, H) block output before the residual add */
    /* full attention phase */
    sp_attn_scratch attn;
    /* GDN phase */
    float *qkv;                  /* (N, conv_dim) raw in_proj_qkv */
    float *qkv_conv;             /* (N, conv_dim) after conv + SiLU */
    float *z;                    /* (N, Hv·dv) */
    float *a, *b;                /* (N, Hv) */
    float *o;                    /* (N, Hv, dv) */
    sp_ffn_scratch ffn;          /* FFN phase */
    /* logits */
    float *hn;                   /* (N, H) final-normed rows that need logits */
    float *logits;               /* (LOGIT_ROWS, vocab) */
    uint8_t *sample;             /* n_threads × sp_sample_scratch_bytes(vocab), host memory (the sampler's) */
    sp_sample_job *jobs;         /* (LOGIT_ROWS) host memory */
} qwen35_scratch;

struct sp_qwen35 {
    qwen35_config cfg;
    qwen35_weights w;
    qwen35_scratch s;
    void *scratch_mem;
    uint64_t scratch_bytes;
    int32_t max_step_tokens;
    bool has_mtp, has_vision;
    sp_checkpoint *ck;           /* kept open: mapped weights, and MTP / vision tensors for later issues */
    const sp_backend *be;
    sp_trace_fn trace;
    void *trace_ctx;
    /* speculative decoding: what a verify block leaves for sp_qwen35_commit: per GDN layer, rows of
     * [raw in_proj_qkv (conv_dim) | a (Hv) | b (Hv)] */
    float *kept;                 /* (n_linear, verify_rows, conv_dim + 2·Hv) */
    float *state_copy;           /* (verify blocks, one GDN layer's S + conv tail): what each verify block runs on */
    int32_t verify_rows;
    int32_t quant[SPLASH_N_TENSOR_KINDS]; /* SPLASH_QUANT_* per tensor kind loaded with (drafters follow it) */
    /* images (splash_seq.embeds / positions): the token whose rows the tower's output replaces (−1: none) */
    int32_t image_token_id;
    /* the rows a sample may choose (splash_load_options.n_tokens / tokens): ids below n_tokens, and of those only
     * the ones set in token_mask when the tokenizer has unused ids (NULL: all of them) */
    int32_t n_tokens;
    uint32_t *token_mask;
};

#endif
