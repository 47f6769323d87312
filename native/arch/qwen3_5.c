/* qwen3_5.c — the Qwen3.5-family hybrid transformer: dense `qwen3_5` (Qwen3.8-27B) and MoE `qwen3_5_moe`
 * (Qwen3.6-35B-A3B), one forward pass for both (the FFN op is swapped, not the file).
 *
 * Reference: HF transformers models/qwen3_5/modeling_qwen3_5.py and qwen3_5_moe/modeling_qwen3_5_moe.py; facts in
 * shared/reference/qwen35-architecture.md. Every layer is pre-norm with two residual adds:
 *   h = h + Mixer_l(input_layernorm(h))      Mixer = Gated DeltaNet (linear_attention) or gated full attention
 *   h = h + FFN(post_attention_layernorm(h)) FFN = SwiGLU MLP (dense) or routed experts + gated shared expert (MoE)
 *   logits = lm_head(norm(h))
 * A step carries the rows of several sequences: each weight matrix multiplies all rows at once; attention, the
 * conv and the delta rule run per sequence against that sequence's pages and state slot.
 *
 * Layout: config (HF text_config names), weights with a per-layer table, per-sequence state (in the cache: KV
 * pages, GDN slots), scratch. Arithmetic lives in the backend's ops (backends/backend.h). */
#include "qwen3_5.h"

#include "arch/draft.h"
#include "backends/backend.h"
#include "core/checkpoint.h"
#include "core/error.h"
#include "core/mlx.h"
#include "core/quant.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
    /* dense FFN */
    sp_matrix gate_proj, up_proj; /* (I, H) */
    sp_matrix down_proj;         /* (H, I) */
    /* MoE FFN */
    sp_matrix router;            /* (E, H) mlp.gate */
    sp_moe_experts experts;      /* E × {gate (Im, H), up (Im, H), down (H, Im)} views */
    sp_matrix shared_gate, shared_up; /* (Is, H) */
    sp_matrix shared_down;       /* (H, Is) */
    sp_matrix shared_expert_gate; /* (1, H) */
} qwen35_layer;

typedef struct qwen35_weights {
    sp_matrix embed;             /* (vocab, H) as stored: one row read per token, never quantized */
    sp_matrix lm_head;           /* (vocab, H) */
    const float *norm;           /* (H) 1 + w */
    float *inv_freq;             /* (rot_dim / 2) RoPE frequencies */
    qwen35_layer *layers;        /* (num_hidden_layers) */
    sp_matrix *expert_views;     /* (MoE layers · 3 · E) backing the layers' sp_moe_experts */
    float *vectors;              /* one allocation behind every f32 vector above */
    void **owned;                /* quantized copies made at load, freed with the model */
    int64_t n_owned;
    uint64_t bytes;              /* weights held: matrices (mapped or quantized) + vectors */
} qwen35_weights;

/* ---- per-sequence state (lives in the cache; this is its size table) -------------------------------------------
 * KV page of P positions, per full-attention layer j:  K rows (Hkv, P) then V rows (Hkv, P) in the KV type
 *                                                      (sp_kv_layers_bytes, backends/backend.h)
 * GDN slot, per linear-attention layer j:              S (Hv, dk, dv) fp32, then conv tail (K−1, conv_dim) raw rows */
static int64_t gdn_state_floats(const qwen35_config *c) {
    return (int64_t)c->linear_num_value_heads * c->linear_key_head_dim * c->linear_value_head_dim;
}
static int64_t slot_floats(const qwen35_config *c) {
    return (int64_t)c->n_linear * (gdn_state_floats(c) + (int64_t)(c->linear_conv_kernel_dim - 1) * c->conv_dim);
}

/* ---- scratch ------------------------------------------------------------------------------------------------
 * Sized for N = max_step_tokens rows. The mixer and FFN buffers of one phase share memory with the other phases. */
typedef struct qwen35_scratch {
    int32_t *tokens;             /* (N) every row's token */
    int32_t *pos;                /* (N) every row's position, or (N, 3) M-RoPE (t, h, w) when the step has images */
    float *x;                    /* (N, H) residual stream */
    float *xb;                   /* (N, H) normed input of the current block */
    float *out;                  /* (N, H) block output before the residual add */
    /* full attention phase */
    float *qg;                   /* (N, Hq, 2·hd) q_proj output */
    float *q, *gate;             /* (N, Hq, hd) */
    float *k, *v;                /* (N, Hkv, hd) */
    float *att;                  /* (N, Hq, hd) */
    /* GDN phase */
    float *qkv;                  /* (N, conv_dim) raw in_proj_qkv */
    float *qkv_conv;             /* (N, conv_dim) after conv + SiLU */
    float *z;                    /* (N, Hv·dv) */
    float *a, *b;                /* (N, Hv) */
    float *o;                    /* (N, Hv, dv) */
    /* FFN phase */
    float *g, *u;                /* (N, I or Is) */
    float *shared;               /* (N, H) shared expert output */
    float *router;               /* (N, E) */
    int32_t *ids;                /* (N, k) chosen experts */
    float *w;                    /* (N, k) their weights */
    float *sg;                   /* (N) shared expert gate logit */
    float *moe;                  /* sp_moe_scratch_floats(N, k, H, Im) */
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
    /* speculative decoding: the current step's request (NULL outside sp_qwen35_step_spec), and what a verify block
     * leaves for sp_qwen35_commit: per GDN layer, rows of [raw in_proj_qkv (conv_dim) | a (Hv) | b (Hv)] */
    const sp_qwen35_spec *spec;
    float *kept;                 /* (n_linear, verify_rows, conv_dim + 2·Hv) */
    float *state_copy;           /* (one GDN layer's S + conv tail): what a verify block runs on */
    int32_t verify_rows;
    int32_t quant;               /* SPLASH_QUANT_* the weights were loaded with (drafters follow it) */
    /* images (splash_seq.embeds / positions): the token whose rows the tower's output replaces (−1: none), and
     * whether the current step's positions are three M-RoPE streams */
    int32_t image_token_id;
    bool mrope_step;
    /* the rows a sample may choose (splash_load_options.n_tokens / tokens): ids below n_tokens, and of those only
     * the ones set in token_mask when the tokenizer has unused ids (NULL: all of them) */
    int32_t n_tokens;
    uint32_t *token_mask;
};

#ifdef NDEBUG
#define TRACE(m, name, layer, x, rows, cols) ((void)0)
#else
#define TRACE(m, name, layer, x, rows, cols) \
    do { if ((m)->trace) (m)->trace((m)->trace_ctx, name, layer, x, rows, cols); } while (0)
#endif

/* Lays the scratch out at `base` (NULL: only measure); returns its size in bytes. */
static uint64_t scratch_layout(const qwen35_config *c, int64_t N, int n_threads, uint8_t *base, qwen35_scratch *s) {
    uint64_t off = 0;
#define TAKE(field, type, count)                                               \
    do {                                                                       \
        s->field = base ? (type *)(base + off) : NULL;                         \
        off += ((uint64_t)(count) * sizeof(type) + 63) & ~(uint64_t)63;        \
    } while (0)
    int64_t H = c->hidden_size, hd = c->head_dim, Hq = c->num_attention_heads, Hkv = c->num_key_value_heads;
    int64_t vd = (int64_t)c->linear_num_value_heads * c->linear_value_head_dim, Hv = c->linear_num_value_heads;
    TAKE(tokens, int32_t, N);
    TAKE(pos, int32_t, 3 * N);
    TAKE(x, float, N * H);
    TAKE(xb, float, N * H);
    TAKE(out, float, N * H);
    TAKE(hn, float, N * H);
    TAKE(logits, float, (int64_t)LOGIT_ROWS * c->vocab_size);
    uint64_t phase = off, end = off;
    /* attention */
    TAKE(qg, float, N * Hq * 2 * hd);
    TAKE(q, float, N * Hq * hd);
    TAKE(gate, float, N * Hq * hd);
    TAKE(k, float, N * Hkv * hd);
    TAKE(v, float, N * Hkv * hd);
    TAKE(att, float, N * Hq * hd);
    end = off > end ? off : end;
    off = phase;
    /* GDN */
    TAKE(qkv, float, N * c->conv_dim);
    TAKE(qkv_conv, float, N * c->conv_dim);
    TAKE(z, float, N * vd);
    TAKE(a, float, N * Hv);
    TAKE(b, float, N * Hv);
    TAKE(o, float, N * vd);
    end = off > end ? off : end;
    off = phase;
    /* FFN */
    int64_t I = c->moe ? c->shared_expert_intermediate_size : c->intermediate_size;
    TAKE(g, float, N * I);
    TAKE(u, float, N * I);
    if (c->moe) {
        TAKE(shared, float, N * H);
        TAKE(router, float, N * c->num_experts);
        TAKE(ids, int32_t, N * c->num_experts_per_tok);
        TAKE(w, float, N * c->num_experts_per_tok);
        TAKE(sg, float, N);
        TAKE(moe, float, sp_moe_scratch_floats(N, c->num_experts_per_tok, H, c->moe_intermediate_size));
    }
    end = off > end ? off : end;
#undef TAKE
    return end;
}

/* ---- config parsing ----------------------------------------------------------------------------------------- */

static splash_status int_key(const sp_json *o, const char *dir, const char *key, int64_t dflt, int32_t *out) {
    const sp_json *v = sp_json_get(o, key);
    int64_t x;
    if (!v && dflt >= 0) x = dflt;
    else if (!sp_json_int(v, &x))
        return SP_FAIL(SPLASH_ERR_FORMAT, "%s/config.json: text_config.%s: expected an integer", dir, key);
    if (x < 0 || x > INT32_MAX)
        return SP_FAIL(SPLASH_ERR_FORMAT, "%s/config.json: text_config.%s = %lld is out of range", dir, key, (long long)x);
    *out = (int32_t)x;
    return SPLASH_OK;
}

/* A number from rope_parameters (current HF) or else from text_config itself (older configs), or the default. */
static float rope_key(const sp_json *tc, const char *key, double dflt) {
    double x;
    if (sp_json_double(sp_json_get(sp_json_get(tc, "rope_parameters"), key), &x)) return (float)x;
    if (sp_json_double(sp_json_get(tc, key), &x)) return (float)x;
    return (float)dflt;
}

static splash_status parse_config(const sp_checkpoint *ck, qwen35_config *c) {
    const char *dir = sp_checkpoint_dir(ck);
    const sp_json *root = sp_checkpoint_config(ck);
    if (!root) return SP_FAIL(SPLASH_ERR_FORMAT, "%s: no config.json", dir);
    /* multimodal checkpoints nest the language model's config; text-only ones are flat */
    const sp_json *tc = sp_json_get(root, "text_config") ? sp_json_get(root, "text_config") : root;
    const char *type = sp_json_string(sp_json_get(root, "model_type"));
    if (!type) return SP_FAIL(SPLASH_ERR_FORMAT, "%s/config.json: no model_type", dir);
    if (!strcmp(type, "qwen3_5") || !strcmp(type, "qwen3_5_text")) c->moe = false;
    else if (!strcmp(type, "qwen3_5_moe") || !strcmp(type, "qwen3_5_moe_text")) c->moe = true;
    else
        return SP_FAIL(SPLASH_ERR_UNSUPPORTED, "%s/config.json: model_type \"%s\" is not a Qwen3.5-family model "
                       "(qwen3_5 or qwen3_5_moe)", dir, type);
    splash_status st;
#define INT(field, dflt) if ((st = int_key(tc, dir, #field, dflt, &c->field))) return st
    INT(vocab_size, -1);
    INT(hidden_size, -1);
    INT(num_hidden_layers, -1);
    INT(max_position_embeddings, 262144);
    INT(num_attention_heads, -1);
    INT(num_key_value_heads, -1);
    INT(head_dim, 256);
    INT(linear_num_key_heads, -1);
    INT(linear_num_value_heads, -1);
    INT(linear_key_head_dim, -1);
    INT(linear_value_head_dim, -1);
    INT(linear_conv_kernel_dim, 4);
    if (c->moe) {
        INT(num_experts, -1);
        INT(num_experts_per_tok, -1);
        INT(moe_intermediate_size, -1);
        INT(shared_expert_intermediate_size, -1);
    } else {
        INT(intermediate_size, -1);
    }
#undef INT
    double eps = 1e-6;
    sp_json_double(sp_json_get(tc, "rms_norm_eps"), &eps);
    c->rms_norm_eps = (float)eps;
    c->rope_theta = rope_key(tc, "rope_theta", 10000000.0);
    /* rope_parameters wins: HF fills text_config.partial_rotary_factor with 0.25 for old configs even when
     * rope_parameters says otherwise, and reads only rope_parameters */
    c->partial_rotary_factor = rope_key(tc, "partial_rotary_factor", 0.25);
    const sp_json *sec = sp_json_get(sp_json_get(tc, "rope_parameters"), "mrope_section");
    for (int i = 0; i < 3; i++) {
        int64_t x = (int64_t[]){11, 11, 10}[i];
        if (sec) sp_json_int(sp_json_at(sec, (size_t)i), &x);
        c->mrope_section[i] = (int32_t)x;
    }
    bool tie = false;
    if (!sp_json_bool(sp_json_get(tc, "tie_word_embeddings"), &tie)) sp_json_bool(sp_json_get(root, "tie_word_embeddings"), &tie);
    c->tie_word_embeddings = tie;
    /* variants of the family this forward pass does not compute are refused, never run without their part */
    bool flag = false;
    const char *act = sp_json_string(sp_json_get(tc, "hidden_act"));
    if (sp_json_bool(sp_json_get(tc, "attention_bias"), &flag) && flag)
        return SP_FAIL(SPLASH_ERR_UNSUPPORTED, "%s/config.json: attention_bias true is not supported", dir);
    if (sp_json_bool(sp_json_get(tc, "attn_output_gate"), &flag) && !flag)
        return SP_FAIL(SPLASH_ERR_UNSUPPORTED, "%s/config.json: attn_output_gate false is not supported", dir);
    if (act && strcmp(act, "silu"))
        return SP_FAIL(SPLASH_ERR_UNSUPPORTED, "%s/config.json: hidden_act \"%s\" is not supported (silu)", dir, act);

    if (c->num_hidden_layers < 1 || c->num_hidden_layers > MAX_LAYERS)
        return SP_FAIL(SPLASH_ERR_UNSUPPORTED, "%s/config.json: num_hidden_layers = %d (1..%d supported)", dir,
                       c->num_hidden_layers, MAX_LAYERS);
    /* the layer kind is decided here, once: layer_types, else every full_attention_interval-th layer */
    const sp_json *lt = sp_json_get(tc, "layer_types");
    int32_t interval = 4;
    if (!lt && (st = int_key(tc, dir, "full_attention_interval", 4, &interval))) return st;
    if (lt && (lt->type != SP_JSON_ARRAY || (int64_t)lt->len != c->num_hidden_layers))
        return SP_FAIL(SPLASH_ERR_FORMAT, "%s/config.json: layer_types must list %d layers", dir, c->num_hidden_layers);
    if (!lt && interval < 1) return SP_FAIL(SPLASH_ERR_FORMAT, "%s/config.json: full_attention_interval < 1", dir);
    for (int32_t i = 0; i < c->num_hidden_layers; i++) {
        const char *t = lt ? sp_json_string(sp_json_at(lt, (size_t)i)) : ((i + 1) % interval ? "linear_attention" : "full_attention");
        if (t && !strcmp(t, "linear_attention")) c->layer_types[i] = LAYER_LINEAR_ATTENTION, c->n_linear++;
        else if (t && !strcmp(t, "full_attention")) c->layer_types[i] = LAYER_FULL_ATTENTION, c->n_full++;
        else return SP_FAIL(SPLASH_ERR_UNSUPPORTED, "%s/config.json: layer_types[%d] is not linear_attention or full_attention", dir, i);
    }
    c->conv_dim = 2 * c->linear_num_key_heads * c->linear_key_head_dim + c->linear_num_value_heads * c->linear_value_head_dim;
    c->rot_dim = (int32_t)((float)c->head_dim * c->partial_rotary_factor);

    /* shapes the ops rely on (backends/backend.h states the limits) */
    const char *bad = NULL;
    if (c->vocab_size < 1 || c->hidden_size < 1 || c->head_dim < 2 || c->head_dim % 2 || c->head_dim > 1024)
        bad = "vocab_size, hidden_size, head_dim (even, ≤ 1024)";
    else if (c->num_attention_heads < 1 || c->num_key_value_heads < 1 || c->num_attention_heads % c->num_key_value_heads ||
             c->num_attention_heads / c->num_key_value_heads > 64)
        bad = "num_attention_heads must be a multiple (≤ 64×) of num_key_value_heads";
    else if (c->rot_dim < 2 || c->rot_dim % 2 || c->rot_dim > c->head_dim || c->rot_dim > 1024) bad = "partial_rotary_factor";
    else if (c->linear_num_key_heads < 1 || c->linear_num_value_heads % c->linear_num_key_heads ||
             c->linear_key_head_dim < 1 || c->linear_key_head_dim > 512 || c->linear_value_head_dim < 1 ||
             c->linear_value_head_dim > 512 || c->linear_conv_kernel_dim < 1)
        bad = "linear_* head counts and dims (value heads a multiple of key heads, dims ≤ 512)";
    else if (c->moe && (c->num_experts < 1 || c->num_experts > 1024 || c->num_experts_per_tok < 1 ||
                        c->num_experts_per_tok > c->num_experts))
        bad = "num_experts (≤ 1024) and num_experts_per_tok";
    if (bad) return SP_FAIL(SPLASH_ERR_UNSUPPORTED, "%s/config.json: unsupported shape: %s", dir, bad);
    return SPLASH_OK;
}

/* ---- loading ------------------------------------------------------------------------------------------------ */

typedef struct loader {
    sp_qwen35 *m;
    const char *prefix;          /* "model.language_model." (multimodal layout), "model." (text-only), or
                                    "language_model.model." (mlx-lm): see checkpoint_quirks() */
    const char *lm_head;         /* its tensor name */
    bool mlx;                    /* an mlx-lm checkpoint (names, norms, conv axis, split experts, quantized modules) */
    sp_mlx_quant mlx_quant;      /* its config's quantization block (block NULL: floats) */
    float norm_add;              /* added to zero-centred RMSNorm weights: 1, or 0 when already folded in */
    int32_t quant;
    float *next_vector;          /* bump pointer into weights.vectors */
    char name[256];
} loader;

static const char *tname(loader *L, const char *fmt, int32_t layer, const char *suffix) {
    char mid[128];
    snprintf(mid, sizeof mid, fmt, layer);
    snprintf(L->name, sizeof L->name, "%s%s%s", L->prefix, mid, suffix);
    return L->name;
}

/* A matrix over tensor t ([rows, cols] after flattening leading dims): a view of the mapped data, or quantized at
 * load when asked and `quantizable`. */
static splash_status hold(loader *L, const char *name, sp_matrix *out, void *owned);

static splash_status matrix_of(loader *L, const sp_tensor *t, bool quantizable, sp_matrix *out) {
    void *owned = NULL;
    sp_quant q = quantizable ? (sp_quant)L->quant : SP_QUANT_NONE;
    splash_status st = sp_matrix_from_tensor(L->m->be->pool, t, q, out, &owned);
    return st ? st : hold(L, t->name, out, owned);
}

/* Keeps a loaded matrix: on a GPU backend its device copy (the host one goes), else the host rows; counts its bytes
 * (as stored on the host). Every sp_mtype uploads alike: rows that are not a multiple of 16 bytes (MLX4/MLX8 rows of
 * q + scales + biases, 36 or 72 bytes for 64 or 128 columns at 4 bits) are padded on the device, and a view of some
 * rows (sp_matrix_rows: MoE experts of a 3-D tensor) still addresses them by host row (backends/gpu/memory.c). */
static splash_status hold(loader *L, const char *name, sp_matrix *out, void *owned) {
    if (L->m->be->upload) {
        const void *dev = L->m->be->upload(L->m->be, out->data, out->rows, out->row_bytes);
        free(owned);
        owned = NULL;
        if (!dev) return SP_FAIL(SPLASH_ERR_OUT_OF_MEMORY, "no device memory for tensor %s (%s)", name, splash_last_error());
        out->data = dev;
    }
    if (owned) L->m->w.owned[L->m->w.n_owned++] = owned;
    L->m->w.bytes += (uint64_t)out->rows * (uint64_t)out->row_bytes;
    return SPLASH_OK;
}

/* The matrix `name` of logical shape shape[ndim]: an MLX-quantized module (weight + scales + biases, kept as stored),
 * or a float tensor (matrix_of). */
static splash_status matrix_nd(loader *L, const char *name, int32_t ndim, const int64_t *shape, bool quantizable,
                               sp_matrix *out) {
    const sp_tensor *t;
    size_t n = strlen(name);
    if (L->mlx && n > 7 && !strcmp(name + n - 7, ".weight")) {
        char path[256];
        snprintf(path, sizeof path, "%.*s", (int)(n - 7), name);
        int32_t bits = sp_mlx_module_bits(&L->mlx_quant, L->m->ck, path);
        if (bits) {
            void *owned;
            splash_status st = sp_mlx_matrix(L->m->be->pool, L->m->ck, path, bits, ndim, shape, out, &owned);
            return st ? st : hold(L, name, out, owned);
        }
    }
    splash_status st = sp_checkpoint_require(L->m->ck, name, SP_DTYPES_FLOAT, ndim, shape, &t);
    return st ? st : matrix_of(L, t, quantizable, out);
}

static splash_status matrix(loader *L, const char *name, int64_t rows, int64_t cols, bool quantizable, sp_matrix *out) {
    return matrix_nd(L, name, 2, (int64_t[]){rows, cols}, quantizable, out);
}

/* A vector of n floats (any shape holding n) converted to f32, plus `add` (the zero-centred norms' 1). */
static splash_status vector(loader *L, const char *name, int64_t n, int32_t ndim, const int64_t *shape, float add,
                            const float **out) {
    const sp_tensor *t;
    sp_matrix v;
    void *owned = NULL;
    splash_status st = sp_checkpoint_require(L->m->ck, name, SP_DTYPES_FLOAT, ndim, shape, &t);
    if (!st) st = sp_matrix_from_tensor(NULL, t, SP_QUANT_NONE, &v, &owned);
    if (st) return st;
    float *dst = L->next_vector;
    L->next_vector += n;
    for (int64_t r = 0; r < v.rows; r++) sp_matrix_row_f32(&v, r, dst + r * v.cols);
    for (int64_t i = 0; i < n; i++) dst[i] += add;
    *out = dst;
    return SPLASH_OK;
}

static int64_t vector_floats(const qwen35_config *c) {
    int64_t H = c->hidden_size, n = H + c->rot_dim / 2;
    for (int32_t l = 0; l < c->num_hidden_layers; l++) {
        n += 2 * H;
        if (c->layer_types[l] == LAYER_FULL_ATTENTION) n += 2 * c->head_dim;
        else n += (int64_t)c->conv_dim * c->linear_conv_kernel_dim + 2 * c->linear_num_value_heads + c->linear_value_head_dim;
    }
    return n;
}

/* Experts of layer l: per-expert tensors (HF save_pretrained, the official checkpoints) or fused 3-D tensors
 * experts.gate_up_proj [E, 2·Im, H] (gate rows first) and experts.down_proj [E, H, Im]; both become E views each. */
static splash_status experts(loader *L, int32_t l, sp_moe_experts *ex, sp_matrix *views) {
    const qwen35_config *c = &L->m->cfg;
    int32_t E = c->num_experts;
    int64_t H = c->hidden_size, Im = c->moe_intermediate_size;
    *ex = (sp_moe_experts){views, views + E, views + 2 * E, E, c->num_experts_per_tok, H, Im};
    splash_status st;
    if (L->mlx) { /* mlx-lm splits gate_up_proj: switch_mlp.{gate,up}_proj [E, Im, H], switch_mlp.down_proj [E, H, Im] */
        sp_matrix gate, up, down;
        if ((st = matrix_nd(L, tname(L, "layers.%d.mlp.switch_mlp.gate_proj.weight", l, ""), 3, (int64_t[]){E, Im, H}, true, &gate)) ||
            (st = matrix_nd(L, tname(L, "layers.%d.mlp.switch_mlp.up_proj.weight", l, ""), 3, (int64_t[]){E, Im, H}, true, &up)) ||
            (st = matrix_nd(L, tname(L, "layers.%d.mlp.switch_mlp.down_proj.weight", l, ""), 3, (int64_t[]){E, H, Im}, true, &down)))
            return st;
        for (int32_t e = 0; e < E; e++) {
            views[e] = sp_matrix_rows(&gate, e * Im, Im);
            views[E + e] = sp_matrix_rows(&up, e * Im, Im);
            views[2 * E + e] = sp_matrix_rows(&down, e * H, H);
        }
        return SPLASH_OK;
    }
    if (sp_checkpoint_find(L->m->ck, tname(L, "layers.%d.mlp.experts.gate_up_proj", l, ""))) {
        sp_matrix gate_up, down;
        const sp_tensor *t;
        if ((st = sp_checkpoint_require(L->m->ck, L->name, SP_DTYPES_FLOAT, 3, (int64_t[]){E, 2 * Im, H}, &t)) ||
            (st = matrix_of(L, t, true, &gate_up)) ||
            (st = sp_checkpoint_require(L->m->ck, tname(L, "layers.%d.mlp.experts.down_proj", l, ""), SP_DTYPES_FLOAT, 3,
                                        (int64_t[]){E, H, Im}, &t)) ||
            (st = matrix_of(L, t, true, &down)))
            return st;
        for (int32_t e = 0; e < E; e++) {
            views[e] = sp_matrix_rows(&gate_up, e * 2 * Im, Im);
            views[E + e] = sp_matrix_rows(&gate_up, e * 2 * Im + Im, Im);
            views[2 * E + e] = sp_matrix_rows(&down, e * H, H);
        }
        return SPLASH_OK;
    }
    char fmt[96];
    for (int32_t e = 0; e < E; e++) {
        snprintf(fmt, sizeof fmt, "layers.%%d.mlp.experts.%d.", e);
        if ((st = matrix(L, tname(L, fmt, l, "gate_proj.weight"), Im, H, true, &views[e])) ||
            (st = matrix(L, tname(L, fmt, l, "up_proj.weight"), Im, H, true, &views[E + e])) ||
            (st = matrix(L, tname(L, fmt, l, "down_proj.weight"), H, Im, true, &views[2 * E + e])))
            return st;
    }
    return SPLASH_OK;
}

/* Checkpoint quirks, each chosen from the spec, all here (and in checkpoint_quirks() for mlx-lm checkpoints):
 *  - tensor names start with "model.language_model." (multimodal checkpoints) or "model." (text-only ones);
 *  - zero-centred RMSNorm weights are stored as w − 1: add 1 once (input/post-attention/final norms, q_norm, k_norm;
 *    not linear_attn.norm, which is a plain weight);
 *  - A_log is stored; the delta rule wants A = −exp(A_log);
 *  - conv1d.weight is [conv_dim, 1, K]: read as (conv_dim, K);
 *  - MoE experts come per expert or fused (see experts());
 *  - lm_head.weight is absent when tie_word_embeddings: reuse the embedding. */
static splash_status sanitize_layer(loader *L, int32_t l) {
    const qwen35_config *c = &L->m->cfg;
    qwen35_layer *y = &L->m->w.layers[l];
    int64_t H = c->hidden_size, hd = c->head_dim, Hq = c->num_attention_heads, Hkv = c->num_key_value_heads;
    int64_t Hv = c->linear_num_value_heads, vd = Hv * c->linear_value_head_dim, K = c->linear_conv_kernel_dim;
    splash_status st;
#define MAT(field, suffix, r, cols, q) if ((st = matrix(L, tname(L, "layers.%d.", l, suffix), r, cols, q, &y->field))) return st
#define VEC(field, suffix, n, add) \
    if ((st = vector(L, tname(L, "layers.%d.", l, suffix), n, 1, (int64_t[]){n}, add, &y->field))) return st
    y->kind = c->layer_types[l];
    VEC(input_norm, "input_layernorm.weight", H, L->norm_add);
    VEC(post_norm, "post_attention_layernorm.weight", H, L->norm_add);
    if (y->kind == LAYER_FULL_ATTENTION) {
        MAT(q_proj, "self_attn.q_proj.weight", Hq * 2 * hd, H, true);
        MAT(k_proj, "self_attn.k_proj.weight", Hkv * hd, H, true);
        MAT(v_proj, "self_attn.v_proj.weight", Hkv * hd, H, true);
        MAT(o_proj, "self_attn.o_proj.weight", H, Hq * hd, true);
        VEC(q_norm, "self_attn.q_norm.weight", hd, L->norm_add);
        VEC(k_norm, "self_attn.k_norm.weight", hd, L->norm_add);
    } else {
        MAT(in_proj_qkv, "linear_attn.in_proj_qkv.weight", c->conv_dim, H, true);
        MAT(in_proj_z, "linear_attn.in_proj_z.weight", vd, H, true);
        MAT(in_proj_b, "linear_attn.in_proj_b.weight", Hv, H, true);
        MAT(in_proj_a, "linear_attn.in_proj_a.weight", Hv, H, true);
        MAT(out_proj, "linear_attn.out_proj.weight", H, vd, true);
        if ((st = vector(L, tname(L, "layers.%d.", l, "linear_attn.conv1d.weight"), c->conv_dim * K, 3,
                         L->mlx ? (int64_t[]){c->conv_dim, K, 1} : (int64_t[]){c->conv_dim, 1, K}, 0.0f, &y->conv1d)))
            return st;
        VEC(A, "linear_attn.A_log", Hv, 0.0f);
        for (int64_t h = 0; h < Hv; h++) ((float *)y->A)[h] = -expf(y->A[h]);
        VEC(dt_bias, "linear_attn.dt_bias", Hv, 0.0f);
        VEC(gdn_norm, "linear_attn.norm.weight", c->linear_value_head_dim, 0.0f);
    }
    if (c->moe) {
        int64_t Is = c->shared_expert_intermediate_size;
        /* the router and the shared expert's scalar gate stay as stored: routing decisions are sensitive */
        MAT(router, "mlp.gate.weight", c->num_experts, H, false);
        MAT(shared_gate, "mlp.shared_expert.gate_proj.weight", Is, H, true);
        MAT(shared_up, "mlp.shared_expert.up_proj.weight", Is, H, true);
        MAT(shared_down, "mlp.shared_expert.down_proj.weight", H, Is, true);
        MAT(shared_expert_gate, "mlp.shared_expert_gate.weight", 1, H, false);
        int32_t moe_index = l; /* every layer is MoE: layer l owns views [l · 3E, (l + 1) · 3E) */
        if ((st = experts(L, l, &y->experts, L->m->w.expert_views + (int64_t)moe_index * 3 * c->num_experts))) return st;
    } else {
        int64_t I = c->intermediate_size;
        MAT(gate_proj, "mlp.gate_proj.weight", I, H, true);
        MAT(up_proj, "mlp.up_proj.weight", I, H, true);
        MAT(down_proj, "mlp.down_proj.weight", H, I, true);
    }
#undef MAT
#undef VEC
    return SPLASH_OK;
}

/* mlx-lm checkpoints are recognised by their names (mlx-lm's sanitize renames "model.language_model." to
 * "language_model.model."), their quantization by config.json's block, never by tensor shapes. What mlx-lm's
 * sanitize (models/qwen3_5.py, qwen3_5_moe.py) changed, and its quantizer wrote:
 *  - lm_head is "language_model.lm_head.weight";
 *  - zero-centred RMSNorm weights already hold 1 + w (input/post-attention/final norms, q_norm, k_norm): add nothing;
 *  - conv1d.weight is [conv_dim, K, 1] (axis moved; the same bytes as [conv_dim, 1, K]);
 *  - experts are split into switch_mlp.{gate,up,down}_proj (see experts());
 *  - mtp.* and the vision tower are dropped (has_mtp, has_vision come out false);
 *  - quantized modules are weight (U32) + scales + biases, at the block's bits or the module's own entry (the MoE
 *    router and shared_expert_gate at 8 bits): kept as stored, as MLX4/MLX8 matrices (matrix_nd), which every
 *    backend multiplies and embeds (the embedding too: a tied lm_head is the same MLX matrix). */
static splash_status checkpoint_quirks(loader *L) {
    const sp_checkpoint *ck = L->m->ck;
    L->mlx = sp_checkpoint_find(ck, "language_model.model.embed_tokens.weight") != NULL;
    L->prefix = L->mlx ? "language_model.model."
                : sp_checkpoint_find(ck, "model.language_model.embed_tokens.weight") ? "model.language_model." : "model.";
    L->lm_head = L->mlx ? "language_model.lm_head.weight" : "lm_head.weight";
    L->norm_add = L->mlx ? 0.0f : 1.0f;
    return L->mlx ? sp_mlx_quant_parse(sp_checkpoint_config(ck), sp_checkpoint_dir(ck), &L->mlx_quant) : SPLASH_OK;
}

static splash_status load_weights(loader *L) {
    sp_qwen35 *m = L->m;
    const qwen35_config *c = &m->cfg;
    int64_t H = c->hidden_size;
    splash_status st = checkpoint_quirks(L);
    if (st) return st;
    int64_t nv = vector_floats(c);
    m->w.vectors = malloc(sizeof(float) * (size_t)nv);
    m->w.layers = calloc((size_t)c->num_hidden_layers, sizeof(qwen35_layer));
    m->w.expert_views = c->moe ? calloc((size_t)c->num_hidden_layers * 3 * (size_t)c->num_experts, sizeof(sp_matrix)) : NULL;
    m->w.owned = calloc(sp_checkpoint_count(m->ck), sizeof(void *)); /* at most one copy per tensor */
    if (!m->w.vectors || !m->w.layers || !m->w.owned || (c->moe && !m->w.expert_views))
        return SP_FAIL(SPLASH_ERR_OUT_OF_MEMORY, "out of memory for the layer table");
    m->w.bytes += sizeof(float) * (uint64_t)nv;
    L->next_vector = m->w.vectors;
    if ((st = matrix(L, tname(L, "embed_tokens.weight", 0, ""), c->vocab_size, H, false, &m->w.embed)) ||
        (st = vector(L, tname(L, "norm.weight", 0, ""), H, 1, (int64_t[]){H}, L->norm_add, &m->w.norm)))
        return st;
    if (c->tie_word_embeddings && !sp_checkpoint_find(m->ck, L->lm_head)) m->w.lm_head = m->w.embed;
    else if ((st = matrix(L, L->lm_head, c->vocab_size, H, true, &m->w.lm_head))) return st;
    /* RoPE inverse frequencies, fp32 as HF computes them: 1 / θ^(2i / rot_dim) */
    m->w.inv_freq = L->next_vector;
    L->next_vector += c->rot_dim / 2;
    for (int32_t i = 0; i < c->rot_dim / 2; i++)
        m->w.inv_freq[i] = 1.0f / powf(c->rope_theta, (float)(2 * i) / (float)c->rot_dim);
    int32_t n_full = 0, n_linear = 0;
    for (int32_t l = 0; l < c->num_hidden_layers; l++) {
        if ((st = sanitize_layer(L, l))) return st;
        m->w.layers[l].index = c->layer_types[l] == LAYER_FULL_ATTENTION ? n_full++ : n_linear++;
    }
    m->has_mtp = sp_checkpoint_find(m->ck, "mtp.fc.weight") != NULL;
    for (size_t i = 0; i < sp_checkpoint_count(m->ck) && !m->has_vision; i++)
        m->has_vision = !strncmp(sp_checkpoint_tensor(m->ck, i)->name, "model.visual.", 13);
    return SPLASH_OK;
}

/* On a GPU backend the f32 vectors go to the device in one piece, and every pointer into them moves along. */
static splash_status upload_vectors(sp_qwen35 *m) {
    const sp_backend *be = m->be;
    if (!be->upload) return SPLASH_OK;
    const float *base = m->w.vectors;
    const float *dev = be->upload(be, base, 1, sizeof(float) * vector_floats(&m->cfg));
    if (!dev) return SP_FAIL(SPLASH_ERR_OUT_OF_MEMORY, "no device memory for the norm and GDN vectors (%s)", splash_last_error());
#define MOVE(p) ((p) = (p) ? (void *)(dev + ((p) - base)) : NULL)
    MOVE(m->w.norm);
    MOVE(m->w.inv_freq);
    for (int32_t l = 0; l < m->cfg.num_hidden_layers; l++) {
        qwen35_layer *y = &m->w.layers[l];
        MOVE(y->input_norm), MOVE(y->post_norm), MOVE(y->q_norm), MOVE(y->k_norm);
        MOVE(y->conv1d), MOVE(y->A), MOVE(y->dt_bias), MOVE(y->gdn_norm);
    }
#undef MOVE
    return SPLASH_OK;
}

splash_status sp_qwen35_load(const char *dir, const sp_backend *be, int32_t quant, int32_t max_step_tokens,
                             sp_qwen35 **out) {
    *out = NULL;
    sp_qwen35 *m = calloc(1, sizeof *m);
    if (!m) return SP_FAIL(SPLASH_ERR_OUT_OF_MEMORY, "out of memory");
    m->be = be;
    m->quant = quant;
    m->max_step_tokens = max_step_tokens > 0 ? max_step_tokens : DEFAULT_STEP_TOKENS;
    loader L = {.m = m, .quant = quant};
    splash_status st = sp_checkpoint_open(dir, &m->ck);
    if (!st) st = parse_config(m->ck, &m->cfg);
    int64_t image_token = -1;
    if (!st) sp_json_int(sp_json_get(sp_checkpoint_config(m->ck), "image_token_id"), &image_token);
    m->image_token_id = (int32_t)image_token;
    if (!st) st = load_weights(&L);
    if (!st) st = upload_vectors(m);
    m->n_tokens = m->cfg.vocab_size;
    if (!st) {
        m->scratch_bytes = scratch_layout(&m->cfg, m->max_step_tokens, be->n_threads, NULL, &m->s);
        m->scratch_mem = be->alloc(be, m->scratch_bytes);
        m->s.sample = malloc((size_t)be->n_threads * (size_t)sp_sample_scratch_bytes(m->cfg.vocab_size));
        m->s.jobs = malloc(sizeof(sp_sample_job) * LOGIT_ROWS);
        if (!m->scratch_mem || !m->s.sample || !m->s.jobs)
            st = SP_FAIL(SPLASH_ERR_OUT_OF_MEMORY, "out of memory for %llu bytes of scratch (max_step_tokens %d)",
                         (unsigned long long)m->scratch_bytes, m->max_step_tokens);
        else scratch_layout(&m->cfg, m->max_step_tokens, be->n_threads, m->scratch_mem, &m->s);
    }
    if (st) {
        sp_qwen35_free(m);
        return st;
    }
    *out = m;
    return SPLASH_OK;
}

void sp_qwen35_free(sp_qwen35 *m) {
    if (!m) return;
    for (int64_t i = 0; i < m->w.n_owned; i++) free(m->w.owned[i]);
    free(m->w.owned);
    free(m->w.layers);
    free(m->w.expert_views);
    free(m->w.vectors);
    if (m->scratch_mem) m->be->free(m->be, m->scratch_mem);
    free(m->s.sample);
    free(m->s.jobs);
    free(m->token_mask);
    if (m->kept) m->be->free(m->be, m->kept);
    if (m->state_copy) m->be->free(m->be, m->state_copy);
    sp_checkpoint_close(m->ck);
    free(m);
}

/* ---- forward ------------------------------------------------------------------------------------------------ */

/* A step's rows: sequence i owns rows [row0[i], row0[i] + n_tokens). */
typedef struct step_rows {
    splash_seq *seqs;
    int32_t n_seqs;
    int64_t n;                   /* Σ n_tokens */
    int64_t row0[];
} step_rows;

static sp_kv_view kv_view(const sp_qwen35 *m, const sp_qwen35_memory *mem, const qwen35_layer *y, const splash_seq *s) {
    const qwen35_config *c = &m->cfg;
    return sp_kv_layer_view(mem->kv, mem->page_bytes, mem->kv_type, y->index, c->num_key_value_heads, c->head_dim,
                            mem->page_tokens, s->pages);
}

/* Gated full attention (HF Qwen3_5Attention), xb → s->out:
 *   [query | gate] = q_proj(x) per head;  q = rope(q_norm(query));  k = rope(k_norm(k_proj(x)));  v = v_proj(x)
 *   out = o_proj(softmax(q·kᵀ/√hd + causal) · v · sigmoid(gate)) */
static void full_attention(sp_qwen35 *m, const qwen35_layer *y, int32_t l, const sp_qwen35_memory *mem,
                           const step_rows *r) {
    const sp_backend *be = m->be;
    const qwen35_config *c = &m->cfg;
    qwen35_scratch *s = &m->s;
    int64_t T = r->n, hd = c->head_dim, Hq = c->num_attention_heads, Hkv = c->num_key_value_heads;
    be->matmul(be, s->qg, &y->q_proj, s->xb, T);
    be->matmul(be, s->k, &y->k_proj, s->xb, T);
    be->matmul(be, s->v, &y->v_proj, s->xb, T);
    be->copy_rows(be, s->q, hd, s->qg, 2 * hd, T * Hq, hd); /* split each head's [query | gate] */
    be->copy_rows(be, s->gate, hd, s->qg + hd, 2 * hd, T * Hq, hd);
    be->rmsnorm(be, s->q, s->q, y->q_norm, T * Hq, hd, c->rms_norm_eps);
    be->rmsnorm(be, s->k, s->k, y->k_norm, T * Hkv, hd, c->rms_norm_eps);
    const int32_t *mrope = m->mrope_step ? c->mrope_section : NULL;
    be->rope(be, s->q, T, (int32_t)Hq, (int32_t)hd, c->rot_dim, s->pos, mrope, m->w.inv_freq);
    be->rope(be, s->k, T, (int32_t)Hkv, (int32_t)hd, c->rot_dim, s->pos, mrope, m->w.inv_freq);
    TRACE(m, "attn_q", l, s->q, T, Hq * hd);
    TRACE(m, "attn_k", l, s->k, T, Hkv * hd);
    for (int32_t i = 0; i < r->n_seqs; i++) {
        const splash_seq *q = &r->seqs[i];
        sp_kv_view kv = kv_view(m, mem, y, q);
        int64_t r0 = r->row0[i];
        be->kv_write(be, &kv, s->k + r0 * Hkv * hd, s->v + r0 * Hkv * hd, q->n_past, q->n_tokens, (int32_t)Hkv, (int32_t)hd);
        be->attention(be, s->att + r0 * Hq * hd, s->q + r0 * Hq * hd, &kv, q->n_past, q->n_tokens, (int32_t)Hq,
                      (int32_t)Hkv, (int32_t)hd, 1.0f / sqrtf((float)hd));
    }
    be->sigmoid_mul(be, s->att, s->gate, T * Hq * hd);
    be->matmul(be, s->out, &y->o_proj, s->att, T);
}

/* ---- speculative decoding: verify blocks leave the GDN state alone --------------------------------------------
 * A verify block of n rows runs its conv and delta rule on a copy of the layer's state, and keeps each row's inputs
 * (raw in_proj_qkv, a, b). Once the accepted count is known, sp_qwen35_commit replays that many rows on the real
 * state with the same ops, so the state is bit for bit what token-by-token decoding would have left (replay from the
 * pre-verify state; the ops are batch-invariant per row). Memory: one layer's state, plus verify_rows × (conv_dim +
 * 2·Hv) floats per GDN layer, instead of a full state per draft position. */
static int64_t kept_width(const qwen35_config *c) { return c->conv_dim + 2 * (int64_t)c->linear_num_value_heads; }

static float *kept_rows(const sp_qwen35 *m, int32_t layer_index, int64_t row) {
    return m->kept + ((int64_t)layer_index * m->verify_rows + row) * kept_width(&m->cfg);
}

static void keep_verify_inputs(sp_qwen35 *m, const qwen35_layer *y, int64_t r0, int64_t n, int64_t kept_row,
                               const float *S) {
    const qwen35_config *c = &m->cfg;
    const qwen35_scratch *s = &m->s;
    const sp_backend *be = m->be;
    int64_t C = c->conv_dim, Hv = c->linear_num_value_heads, w = kept_width(c);
    float *dst = kept_rows(m, y->index, kept_row);
    be->copy_rows(be, dst, w, s->qkv + r0 * C, C, n, C);
    be->copy_rows(be, dst + C, w, s->a + r0 * Hv, Hv, n, Hv);
    be->copy_rows(be, dst + C + Hv, w, s->b + r0 * Hv, Hv, n, Hv);
    int64_t state = gdn_state_floats(c) + (int64_t)(c->linear_conv_kernel_dim - 1) * C;
    be->copy_rows(be, m->state_copy, state, S, state, 1, state);
}

/* Gated DeltaNet (HF Qwen3_5GatedDeltaNet), xb → s->out:
 *   qkv = silu(conv1d(in_proj_qkv(x)));  z = in_proj_z(x);  b = in_proj_b(x);  a = in_proj_a(x)
 *   o = delta rule(q, k, v, g(a), β(b)) per v head;  out = out_proj(rmsnorm_gated(o, z)) */
static void gated_deltanet(sp_qwen35 *m, const qwen35_layer *y, int32_t l, const sp_qwen35_memory *mem,
                           const step_rows *r) {
    const sp_backend *be = m->be;
    const qwen35_config *c = &m->cfg;
    qwen35_scratch *s = &m->s;
    int64_t T = r->n, C = c->conv_dim, Hv = c->linear_num_value_heads, dv = c->linear_value_head_dim;
    int32_t K = c->linear_conv_kernel_dim;
    sp_gdn_shape shape = {c->linear_num_key_heads, (int32_t)Hv, c->linear_key_head_dim, (int32_t)dv, y->A, y->dt_bias};
    be->matmul(be, s->qkv, &y->in_proj_qkv, s->xb, T);
    be->matmul(be, s->z, &y->in_proj_z, s->xb, T);
    be->matmul(be, s->b, &y->in_proj_b, s->xb, T);
    be->matmul(be, s->a, &y->in_proj_a, s->xb, T);
    int64_t kept_row = 0;
    for (int32_t i = 0; i < r->n_seqs; i++) {
        const splash_seq *q = &r->seqs[i];
        float *S = mem->state + (int64_t)q->slot * slot_floats(c) + y->index * (gdn_state_floats(c) + (int64_t)(K - 1) * C);
        float *tail = S + gdn_state_floats(c);
        int64_t r0 = r->row0[i];
        if (m->spec && m->spec->verify && m->spec->verify[i]) { /* speculative: see keep_verify_inputs */
            keep_verify_inputs(m, y, r0, q->n_tokens, kept_row, S);
            kept_row += q->n_tokens;
            S = m->state_copy;
            tail = S + gdn_state_floats(c);
        }
        be->conv_silu(be, s->qkv_conv + r0 * C, s->qkv + r0 * C, q->n_tokens, C, y->conv1d, K, tail);
        be->gdn_recurrent(be, s->o + r0 * Hv * dv, s->qkv_conv + r0 * C, s->a + r0 * Hv, s->b + r0 * Hv, &shape, S,
                          q->n_tokens);
    }
    TRACE(m, "gdn_core", l, s->o, T, Hv * dv);
    be->rmsnorm_gated(be, s->o, s->o, s->z, y->gdn_norm, T * Hv, dv, c->rms_norm_eps);
    be->matmul(be, s->out, &y->out_proj, s->o, T);
}

/* down(silu(gate(x)) · up(x)), xb → dst */
static void swiglu(sp_qwen35 *m, float *dst, const sp_matrix *gate, const sp_matrix *up, const sp_matrix *down, int64_t T) {
    const sp_backend *be = m->be;
    qwen35_scratch *s = &m->s;
    be->matmul_gate_up(be, s->g, s->u, gate, up, s->xb, T);
    be->matmul(be, dst, down, s->g, T);
}

/* FFN, xb → s->out. Dense: SwiGLU. MoE (HF Qwen3_5MoeSparseMoeBlock):
 *   routed = Σ_topk w_e · expert_e(x) (softmax over all experts, top k, renormalized)
 *   out = routed + sigmoid(shared_expert_gate(x)) · shared_expert(x) */
static void ffn(sp_qwen35 *m, const qwen35_layer *y, int64_t T) {
    const sp_backend *be = m->be;
    const qwen35_config *c = &m->cfg;
    qwen35_scratch *s = &m->s;
    if (!c->moe) {
        swiglu(m, s->out, &y->gate_proj, &y->up_proj, &y->down_proj, T);
        return;
    }
    be->matmul(be, s->router, &y->router, s->xb, T);
    be->moe_route(be, s->ids, s->w, s->router, T, c->num_experts, c->num_experts_per_tok);
    be->moe_experts(be, s->out, s->xb, s->ids, s->w, T, &y->experts, s->moe);
    swiglu(m, s->shared, &y->shared_gate, &y->shared_up, &y->shared_down, T);
    be->matmul(be, s->sg, &y->shared_expert_gate, s->xb, T);
    be->add_sigmoid_scaled(be, s->out, s->shared, s->sg, T, c->hidden_size);
}

/* Rows that need logits: each sequence's last n_logits rows, or its last row when it samples. */
static int64_t logit_rows(const splash_seq *q) {
    return q->n_logits > 0 ? q->n_logits : q->sample ? 1 : 0;
}

/* Final norm and lm_head over the rows that need logits, LOGIT_ROWS at a time; copies out the requested logits
 * and samples each sampling sequence from its last row. */
static splash_status logits_and_samples(sp_qwen35 *m, const step_rows *r) {
    const sp_backend *be = m->be;
    const qwen35_config *c = &m->cfg;
    qwen35_scratch *s = &m->s;
    int64_t H = c->hidden_size, V = c->vocab_size, R = 0;
    for (int32_t i = 0; i < r->n_seqs; i++) {
        const splash_seq *q = &r->seqs[i];
        int64_t k = logit_rows(q), first = r->row0[i] + q->n_tokens - k;
        be->copy_rows(be, s->hn + R * H, H, s->x + first * H, H, k, H);
        R += k;
    }
    be->rmsnorm(be, s->hn, s->hn, m->w.norm, R, H, c->rms_norm_eps);
    TRACE(m, "final_norm", -1, s->hn, R, H);
    /* walk the rows in blocks, remembering which sequence and which of its logit rows each one is */
    int32_t seq = 0;
    int64_t within = 0;
    for (int64_t b0 = 0; b0 < R; b0 += LOGIT_ROWS) {
        int64_t nb = R - b0 < LOGIT_ROWS ? R - b0 : LOGIT_ROWS;
        be->matmul(be, s->logits, &m->w.lm_head, s->hn + b0 * H, nb);
        TRACE(m, "logits", -1, s->logits, nb, V);
        splash_seq *job_seq[LOGIT_ROWS];
        int32_t n_jobs = 0;
        for (int64_t j = 0; j < nb; j++) {
            while (logit_rows(&r->seqs[seq]) == 0) seq++;
            splash_seq *q = &r->seqs[seq];
            const float *row = s->logits + j * V;
            if (q->logits && q->n_logits > 0) be->read(be, q->logits + within * V, row, sizeof(float) * (uint64_t)V);
            if (++within < logit_rows(q)) continue;
            if (q->sample) {
                job_seq[n_jobs] = q;
                s->jobs[n_jobs++] = (sp_sample_job){row, &q->sampling, q->penalty_tokens, q->n_penalty_tokens,
                                                    q->allowed, (uint64_t)q->n_past + (uint64_t)q->n_tokens,
                                                    q->n_top_logprobs, q->top_ids, q->top_logprobs, 0, 0, m->token_mask};
            }
            seq++, within = 0;
        }
        if (!n_jobs) continue;
        /* rows past the last token are padding: the sampler sees only the tokenizer's ids */
        splash_status st = be->sample(be, s->jobs, n_jobs, m->n_tokens, s->sample, sp_sample_scratch_bytes(m->n_tokens));
        if (st) return st;
        for (int32_t j = 0; j < n_jobs; j++) {
            job_seq[j]->token = s->jobs[j].token;
            job_seq[j]->logprob = s->jobs[j].logprob;
        }
    }
    return SPLASH_OK;
}

/* Speculative decoding's outputs of layer l: the residual stream of every row after the layer, for each tap on it. */
static void keep_taps(sp_qwen35 *m, int32_t l, int64_t T) {
    const sp_qwen35_spec *sp = m->spec;
    int64_t H = m->cfg.hidden_size;
    for (int32_t t = 0; t < sp->n_taps; t++)
        if (sp->tap_layers[t] == l) m->be->copy_rows(m->be, sp->taps + t * H, sp->n_taps * H, m->s.x, H, T, H);
}

/* Image-pad rows take the vision tower's output instead of their embedding (HF masked_scatter of image_embeds), one
 * run of consecutive pads per write. */
static void image_rows(sp_qwen35 *m, const step_rows *r) {
    int64_t H = m->cfg.hidden_size;
    for (int32_t i = 0; i < r->n_seqs; i++) {
        const splash_seq *q = &r->seqs[i];
        int64_t used = 0;
        for (int32_t j = 0; q->embeds && j < q->n_tokens;) {
            int32_t e = j;
            while (e < q->n_tokens && q->tokens[e] == m->image_token_id) e++;
            if (e > j) {
                m->be->write(m->be, m->s.x + (r->row0[i] + j) * H, q->embeds + used * H, sizeof(float) * (uint64_t)((e - j) * H));
                used += e - j;
            }
            j = e > j ? e : j + 1;
        }
    }
}

splash_status sp_qwen35_step(sp_qwen35 *m, const sp_qwen35_memory *mem, splash_seq *seqs, int32_t n_seqs) {
    return sp_qwen35_step_spec(m, mem, seqs, n_seqs, NULL);
}

splash_status sp_qwen35_step_spec(sp_qwen35 *m, const sp_qwen35_memory *mem, splash_seq *seqs, int32_t n_seqs,
                                  const sp_qwen35_spec *spec) {
    const sp_backend *be = m->be;
    const qwen35_config *c = &m->cfg;
    qwen35_scratch *s = &m->s;
    step_rows *r = malloc(sizeof *r + sizeof(int64_t) * (size_t)n_seqs);
    if (!r) return SP_FAIL(SPLASH_ERR_OUT_OF_MEMORY, "out of memory");
    *be->status = SPLASH_OK;
    r->seqs = seqs;
    r->n_seqs = n_seqs;
    r->n = 0;
    for (int32_t i = 0; i < n_seqs; i++) r->n += seqs[i].n_tokens;
    int32_t *tokens = malloc(sizeof(int32_t) * 4 * (size_t)r->n), *pos = tokens + r->n; /* host copies for be->write */
    if (!tokens) {
        free(r);
        return SP_FAIL(SPLASH_ERR_OUT_OF_MEMORY, "out of memory");
    }
    r->n = 0;
    m->mrope_step = false;
    for (int32_t i = 0; i < n_seqs; i++) m->mrope_step |= seqs[i].positions != NULL;
    for (int32_t i = 0; i < n_seqs; i++) {
        const splash_seq *q = &seqs[i];
        r->row0[i] = r->n;
        for (int32_t j = 0; j < q->n_tokens; j++) {
            tokens[r->n] = q->tokens[j];
            if (!m->mrope_step) pos[r->n] = q->n_past + j;
            else for (int32_t k = 0; k < 3; k++) pos[3 * r->n + k] = q->positions ? q->positions[3 * j + k] : q->n_past + j;
            r->n++;
        }
        /* a sequence at position 0 starts from a zero recurrent state and an empty conv tail */
        if (q->n_past == 0) be->clear(be, mem->state + (int64_t)q->slot * slot_floats(c), sizeof(float) * (uint64_t)slot_floats(c));
    }
    be->write(be, s->tokens, tokens, sizeof(int32_t) * (uint64_t)r->n);
    be->write(be, s->pos, pos, sizeof(int32_t) * (uint64_t)r->n * (m->mrope_step ? 3 : 1));
    free(tokens);
    int64_t T = r->n, H = c->hidden_size, verify_rows = 0;
    for (int32_t i = 0; spec && spec->verify && i < n_seqs; i++) verify_rows += spec->verify[i] ? seqs[i].n_tokens : 0;
    if (verify_rows > m->verify_rows) {
        free(r);
        return SP_FAIL(SPLASH_ERR_INVALID_ARGUMENT, "%lld verify rows in one step, more than the %d reserved",
                       (long long)verify_rows, m->verify_rows);
    }
    m->spec = spec;
    be->embed(be, s->x, &m->w.embed, s->tokens, T);
    image_rows(m, r);
    TRACE(m, "embed", -1, s->x, T, H);
    /* each residual add runs with the norm after it (add_rmsnorm): the next layer's input norm, the post norm */
    be->rmsnorm(be, s->xb, s->x, m->w.layers[0].input_norm, T, H, c->rms_norm_eps);
    for (int32_t l = 0; l < c->num_hidden_layers; l++) {
        const qwen35_layer *y = &m->w.layers[l];
        if (y->kind == LAYER_FULL_ATTENTION) full_attention(m, y, l, mem, r);
        else gated_deltanet(m, y, l, mem, r);
        TRACE(m, "mixer_out", l, s->out, T, H);
        be->add_rmsnorm(be, s->xb, s->x, s->out, y->post_norm, T, H, c->rms_norm_eps);
        ffn(m, y, T);
        TRACE(m, "ffn_out", l, s->out, T, H);
        if (l + 1 < c->num_hidden_layers) be->add_rmsnorm(be, s->xb, s->x, s->out, m->w.layers[l + 1].input_norm, T, H, c->rms_norm_eps);
        else be->add(be, s->x, s->out, T * H);
        TRACE(m, "layer_out", l, s->x, T, H);
        if (spec && spec->n_taps) keep_taps(m, l, T);
    }
    if (spec && spec->normed) be->rmsnorm(be, spec->normed, s->x, m->w.norm, T, H, c->rms_norm_eps);
    m->spec = NULL;
    splash_status st = *be->status ? *be->status : logits_and_samples(m, r);
    free(r);
    return st ? st : *be->status;
}

splash_status sp_qwen35_reserve_verify(sp_qwen35 *m, int32_t rows, uint64_t *bytes) {
    const qwen35_config *c = &m->cfg;
    if (m->kept) m->be->free(m->be, m->kept);
    if (m->state_copy) m->be->free(m->be, m->state_copy);
    m->kept = m->state_copy = NULL;
    m->verify_rows = 0;
    uint64_t kept = sizeof(float) * (uint64_t)c->n_linear * (uint64_t)rows * (uint64_t)kept_width(c);
    uint64_t copy = sizeof(float) * (uint64_t)(gdn_state_floats(c) + (int64_t)(c->linear_conv_kernel_dim - 1) * c->conv_dim);
    m->kept = m->be->alloc(m->be, kept ? kept : 64);
    m->state_copy = m->be->alloc(m->be, copy);
    if (!m->kept || !m->state_copy)
        return SP_FAIL(SPLASH_ERR_OUT_OF_MEMORY, "out of memory for %llu bytes of verify-block inputs", (unsigned long long)kept);
    m->verify_rows = rows;
    *bytes = kept + copy;
    return SPLASH_OK;
}

void sp_qwen35_commit(sp_qwen35 *m, const sp_qwen35_memory *mem, int32_t slot, int64_t kept_row, int32_t n_keep) {
    const sp_backend *be = m->be;
    const qwen35_config *c = &m->cfg;
    qwen35_scratch *s = &m->s;
    int64_t C = c->conv_dim, Hv = c->linear_num_value_heads, w = kept_width(c);
    int32_t K = c->linear_conv_kernel_dim;
    for (int32_t l = 0; l < c->num_hidden_layers; l++) {
        const qwen35_layer *y = &m->w.layers[l];
        if (y->kind != LAYER_LINEAR_ATTENTION) continue;
        sp_gdn_shape shape = {c->linear_num_key_heads, (int32_t)Hv, c->linear_key_head_dim, c->linear_value_head_dim, y->A, y->dt_bias};
        float *S = mem->state + (int64_t)slot * slot_floats(c) + y->index * (gdn_state_floats(c) + (int64_t)(K - 1) * C);
        const float *kept = kept_rows(m, y->index, kept_row);
        /* the same ops on the same rows as the step: split the kept rows back into qkv, a, b */
        be->copy_rows(be, s->qkv, C, kept, w, n_keep, C);
        be->copy_rows(be, s->a, Hv, kept + C, w, n_keep, Hv);
        be->copy_rows(be, s->b, Hv, kept + C + Hv, w, n_keep, Hv);
        be->conv_silu(be, s->qkv_conv, s->qkv, n_keep, C, y->conv1d, K, S + gdn_state_floats(c));
        be->gdn_recurrent(be, s->o, s->qkv_conv, s->a, s->b, &shape, S, n_keep);
    }
}

void sp_qwen35_draft_target(const sp_qwen35 *m, sp_draft_target *out) {
    const sp_json *root = sp_checkpoint_config(m->ck);
    *out = (sp_draft_target){
        .be = m->be,
        .ck = m->ck,
        .text_config = sp_json_get(root, "text_config") ? sp_json_get(root, "text_config") : root,
        .embed = &m->w.embed,
        .lm_head = &m->w.lm_head,
        .vocab_size = m->cfg.vocab_size,
        .n_tokens = m->n_tokens,
        .token_mask = m->token_mask,
        .hidden_size = m->cfg.hidden_size,
        .num_hidden_layers = m->cfg.num_hidden_layers,
        .rms_norm_eps = m->cfg.rms_norm_eps,
        .quant = m->quant,
        .max_step_tokens = m->max_step_tokens,
    };
}

splash_status sp_qwen35_set_tokens(sp_qwen35 *m, int32_t n_tokens, const uint32_t *tokens) {
    int32_t V = m->cfg.vocab_size;
    if (n_tokens < 0 || n_tokens > V)
        return SP_FAIL(SPLASH_ERR_INVALID_ARGUMENT, "n_tokens %d: the tokenizer has more ids than the model's %d output rows",
                       n_tokens, V);
    int32_t n = n_tokens ? n_tokens : V, words = (n + 31) / 32;
    uint32_t *mask = NULL;
    if (tokens) {
        int any = 0, holes = 0;
        for (int32_t t = 0; t < n; t++) {
            int set = (tokens[t >> 5] >> (t & 31)) & 1;
            any |= set, holes |= !set;
        }
        if (!any) return SP_FAIL(SPLASH_ERR_INVALID_ARGUMENT, "tokens: the mask names no token among ids 0..%d", n - 1);
        if (holes) {
            mask = malloc(sizeof(uint32_t) * (size_t)words);
            if (!mask) return SP_FAIL(SPLASH_ERR_OUT_OF_MEMORY, "out of memory");
            memcpy(mask, tokens, sizeof(uint32_t) * (size_t)words);
            if (n % 32) mask[words - 1] &= (1u << (n % 32)) - 1;
        }
    }
    free(m->token_mask);
    m->token_mask = mask;
    m->n_tokens = n;
    return SPLASH_OK;
}

void sp_qwen35_tokens(const sp_qwen35 *m, int32_t *n_tokens, const uint32_t **mask) {
    *n_tokens = m->n_tokens;
    *mask = m->token_mask;
}

/* ---- sizes and info ----------------------------------------------------------------------------------------- */

uint64_t sp_qwen35_page_bytes(const sp_qwen35 *m, int32_t page_tokens, int32_t kv_type) {
    const qwen35_config *c = &m->cfg;
    return (uint64_t)sp_kv_layers_bytes(kv_type, c->n_full, c->num_key_value_heads, c->head_dim, page_tokens);
}

uint64_t sp_qwen35_slot_bytes(const sp_qwen35 *m) { return sizeof(float) * (uint64_t)slot_floats(&m->cfg); }

static uint64_t matrix_bytes(const sp_matrix *w) { return (uint64_t)w->rows * (uint64_t)w->row_bytes; }

/* Weight bytes a single-token decode reads: every matrix of every layer (MoE: top_k of E experts, on average),
 * lm_head, one embedding row and the f32 vectors. */
static uint64_t decode_bytes(const sp_qwen35 *m) {
    const qwen35_config *c = &m->cfg;
    uint64_t b = matrix_bytes(&m->w.lm_head) + (uint64_t)m->w.embed.row_bytes + sizeof(float) * (uint64_t)vector_floats(c);
    for (int32_t l = 0; l < c->num_hidden_layers; l++) {
        const qwen35_layer *y = &m->w.layers[l];
        const sp_matrix *all[] = {&y->q_proj, &y->k_proj, &y->v_proj, &y->o_proj, &y->in_proj_qkv, &y->in_proj_z,
                                  &y->in_proj_b, &y->in_proj_a, &y->out_proj, &y->gate_proj, &y->up_proj, &y->down_proj,
                                  &y->router, &y->shared_gate, &y->shared_up, &y->shared_down, &y->shared_expert_gate};
        for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) b += matrix_bytes(all[i]);
        if (!c->moe) continue;
        uint64_t experts = 0;
        for (int32_t e = 0; e < c->num_experts; e++)
            experts += matrix_bytes(&y->experts.gate[e]) + matrix_bytes(&y->experts.up[e]) + matrix_bytes(&y->experts.down[e]);
        b += experts / (uint64_t)c->num_experts * (uint64_t)c->num_experts_per_tok;
    }
    return b;
}

void sp_qwen35_info(const sp_qwen35 *m, splash_model_info *out) {
    const qwen35_config *c = &m->cfg;
    *out = (splash_model_info){
        .struct_size = sizeof *out,
        .arch = c->moe ? SPLASH_ARCH_QWEN3_5_MOE : SPLASH_ARCH_QWEN3_5,
        .vocab_size = c->vocab_size,
        .hidden_size = c->hidden_size,
        .n_layers = c->num_hidden_layers,
        .n_full_attention_layers = c->n_full,
        .n_linear_attention_layers = c->n_linear,
        .max_position_embeddings = c->max_position_embeddings,
        .has_mtp = m->has_mtp,
        .has_vision = m->has_vision,
        .n_threads = m->be->n_threads,
        .max_step_tokens = m->max_step_tokens,
        .weight_bytes = m->w.bytes,
        .scratch_bytes = m->scratch_bytes,
        .kv_bytes_per_token = sp_qwen35_page_bytes(m, 1, SPLASH_KV_F32),
        .state_bytes = sp_qwen35_slot_bytes(m),
        .decode_bytes_per_token = decode_bytes(m),
    };
}

void sp_qwen35_set_trace(sp_qwen35 *m, sp_trace_fn fn, void *ctx) {
    m->trace = fn;
    m->trace_ctx = ctx;
}
