/* qwen3_5_load.c — a Qwen3.5-family checkpoint made into the model qwen3_5.c runs: config.json read and checked,
 * the checkpoint's flavour told apart once (sanitize()), weights mapped, quantized or copied to the device, scratch
 * laid out; and what the loaded model reports (sizes, info, what a drafter borrows). */
#include "arch/qwen3_5_model.h"

#include "arch/draft.h"
#include "core/error.h"
#include "core/mlx.h"
#include "core/quant.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- config ------------------------------------------------------------------------------------------------- */

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
#define INT(field, dflt) if ((st = sp_config_int(tc, dir, "text_config", #field, 0, dflt, &c->field))) return st
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
    c->rope_theta = sp_config_rope(tc, "rope_theta", 10000000.0);
    /* rope_parameters wins: HF fills text_config.partial_rotary_factor with 0.25 for old configs even when
     * rope_parameters says otherwise, and reads only rope_parameters */
    c->partial_rotary_factor = sp_config_rope(tc, "partial_rotary_factor", 0.25);
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
    if (!lt && (st = sp_config_int(tc, dir, "text_config", "full_attention_interval", 0, 4, &interval))) return st;
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

/* ---- scratch ------------------------------------------------------------------------------------------------ */

/* Lays the scratch for N rows out at `base` (NULL: only measures); returns its size in bytes. */
static uint64_t scratch_layout(const qwen35_config *c, int64_t N, uint8_t *base, qwen35_scratch *s) {
    sp_scratch at = {base, 0};
#define TAKE(field, type, count) SP_TAKE(&at, s->field, type, count)
    int64_t H = c->hidden_size, hd = c->head_dim, Hq = c->num_attention_heads, Hkv = c->num_key_value_heads;
    int64_t vd = (int64_t)c->linear_num_value_heads * c->linear_value_head_dim, Hv = c->linear_num_value_heads;
    TAKE(tokens, int32_t, N);
    TAKE(pos, int32_t, 3 * N);
    TAKE(x, float, N * H);
    TAKE(xb, float, N * H);
    TAKE(out, float, N * H);
    TAKE(hn, float, N * H);
    TAKE(logits, float, (int64_t)LOGIT_ROWS * c->vocab_size);
    uint64_t phase = at.off, end = at.off;
    /* attention */
    sp_attn_take(&at, N, Hq, Hkv, hd, &s->attn);
    end = at.off > end ? at.off : end;
    at.off = phase;
    /* GDN */
    TAKE(qkv, float, N * c->conv_dim);
    TAKE(qkv_conv, float, N * c->conv_dim);
    TAKE(z, float, N * vd);
    TAKE(a, float, N * Hv);
    TAKE(b, float, N * Hv);
    TAKE(o, float, N * vd);
    end = at.off > end ? at.off : end;
    at.off = phase;
    sp_ffn_shape ffn = qwen35_ffn_shape(c);
    sp_ffn_take(&at, &ffn, N, &s->ffn);
    end = at.off > end ? at.off : end;
#undef TAKE
    return end;
}

/* ---- checkpoint quirks ---------------------------------------------------------------------------------------- */

/* How this checkpoint stores what the forward pass reads: every difference between checkpoint flavours, decided once
 * by sanitize() and read by the loading code below. */
typedef struct quirks {
    const char *prefix;          /* of every language-model tensor name */
    const char *lm_head;         /* its tensor name */
    bool mlx;                    /* an mlx-lm checkpoint */
    sp_mlx_quant mlx_quant;      /* its config's quantization block (block NULL: floats) */
    float norm_add;              /* added to zero-centred RMSNorm weights: 1, or 0 when already folded in */
} quirks;

/* The checkpoint's flavour, told apart by tensor names and config.json (never by tensor shapes), as mlx-lm's
 * sanitize() (models/qwen3_5.py, qwen3_5_moe.py) tells it. For HF checkpoints:
 *  - tensor names start with "model.language_model." (multimodal checkpoints) or "model." (text-only ones);
 *  - zero-centred RMSNorm weights are stored as w − 1: add 1 once (input/post-attention/final norms, q_norm, k_norm;
 *    not linear_attn.norm, which is a plain weight);
 *  - A_log is stored; the delta rule wants A = −exp(A_log) (load_layer);
 *  - conv1d.weight is [conv_dim, 1, K]: read as (conv_dim, K);
 *  - MoE experts come per expert or fused (sp_load_experts);
 *  - lm_head.weight is absent when tie_word_embeddings: reuse the embedding.
 * mlx-lm checkpoints are what its sanitize() and quantizer wrote:
 *  - names start with "language_model.model." and lm_head is "language_model.lm_head.weight";
 *  - zero-centred RMSNorm weights already hold 1 + w: add nothing;
 *  - conv1d.weight is [conv_dim, K, 1] (axis moved; the same bytes as [conv_dim, 1, K]);
 *  - experts are split into switch_mlp.{gate,up,down}_proj [E, Im, H] / [E, H, Im] (load_experts);
 *  - mtp.* and the vision tower are dropped (has_mtp, has_vision come out false);
 *  - quantized modules are weight (U32) + scales + biases, at the block's bits or the module's own entry (the MoE
 *    router and shared_expert_gate at 8 bits): kept as stored, as MLX4/MLX8 matrices (load_matrix_nd), which every
 *    backend multiplies and embeds (the embedding too: a tied lm_head is the same MLX matrix). */
static splash_status sanitize(const sp_checkpoint *ck, quirks *q) {
    q->mlx = sp_checkpoint_find(ck, "language_model.model.embed_tokens.weight") != NULL;
    q->prefix = q->mlx ? "language_model.model."
                : sp_checkpoint_find(ck, "model.language_model.embed_tokens.weight") ? "model.language_model." : "model.";
    q->lm_head = q->mlx ? "language_model.lm_head.weight" : "lm_head.weight";
    q->norm_add = q->mlx ? 0.0f : 1.0f;
    return q->mlx ? sp_mlx_quant_parse(sp_checkpoint_config(ck), sp_checkpoint_dir(ck), &q->mlx_quant) : SPLASH_OK;
}

/* ---- weights -------------------------------------------------------------------------------------------------- */

typedef struct loader {
    sp_loader base;
    sp_qwen35 *m;
    quirks q;
    char name[256];              /* tname's buffer */
} loader;

/* The language-model tensor printed from fmt and its arguments, after the checkpoint's prefix. */
static const char *tname(loader *L, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static const char *tname(loader *L, const char *fmt, ...) {
    char mid[192];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(mid, sizeof mid, fmt, ap);
    va_end(ap);
    snprintf(L->name, sizeof L->name, "%s%s", L->q.prefix, mid);
    return L->name;
}

/* The matrix `name` of logical shape shape[ndim]: an MLX-quantized module (weight + scales + biases, kept as stored),
 * or a float tensor. */
static splash_status load_matrix_nd(loader *L, const char *name, int32_t ndim, const int64_t *shape, int32_t kind,
                                    sp_matrix *out) {
    size_t n = strlen(name);
    if (L->q.mlx && n > 7 && !strcmp(name + n - 7, ".weight")) {
        char path[256];
        snprintf(path, sizeof path, "%.*s", (int)(n - 7), name);
        int32_t bits = sp_mlx_module_bits(&L->q.mlx_quant, L->m->ck, path);
        if (bits) {
            void *owned;
            splash_status st = sp_mlx_matrix(L->base.pool, L->m->ck, path, bits, ndim, shape, out, &owned);
            return st ? st : sp_load_keep(&L->base, name, out, owned);
        }
    }
    return sp_load_matrix_nd(&L->base, name, ndim, shape, kind, out);
}

static splash_status load_matrix(loader *L, const char *name, int64_t rows, int64_t cols, int32_t kind, sp_matrix *out) {
    return load_matrix_nd(L, name, 2, (int64_t[]){rows, cols}, kind, out);
}

/* Floats of every f32 vector: the final norm, the RoPE frequencies, and each layer's norms and GDN vectors. */
static int64_t vector_floats(const qwen35_config *c) {
    int64_t H = c->hidden_size, n = H + c->rot_dim / 2;
    for (int32_t l = 0; l < c->num_hidden_layers; l++) {
        n += 2 * H;
        if (c->layer_types[l] == LAYER_FULL_ATTENTION) n += 2 * c->head_dim;
        else n += (int64_t)c->conv_dim * c->linear_conv_kernel_dim + 2 * c->linear_num_value_heads + c->linear_value_head_dim;
    }
    return n;
}

/* Experts of layer l: mlx-lm's split switch_mlp, else HF's per-expert or fused tensors (sp_load_experts). */
static splash_status load_experts(loader *L, int32_t l, sp_moe_experts *ex, sp_matrix *views) {
    const qwen35_config *c = &L->m->cfg;
    int32_t E = c->num_experts;
    int64_t H = c->hidden_size, Im = c->moe_intermediate_size;
    if (!L->q.mlx) return sp_load_experts(&L->base, tname(L, "layers.%d.mlp.experts.", l), E, c->num_experts_per_tok, H, Im, views, ex);
    *ex = (sp_moe_experts){views, views + E, views + 2 * E, E, c->num_experts_per_tok, H, Im};
    sp_matrix gate, up, down;
    splash_status st;
    if ((st = load_matrix_nd(L, tname(L, "layers.%d.mlp.switch_mlp.gate_proj.weight", l), 3, (int64_t[]){E, Im, H}, SPLASH_KIND_MOE_EXPERTS, &gate)) ||
        (st = load_matrix_nd(L, tname(L, "layers.%d.mlp.switch_mlp.up_proj.weight", l), 3, (int64_t[]){E, Im, H}, SPLASH_KIND_MOE_EXPERTS, &up)) ||
        (st = load_matrix_nd(L, tname(L, "layers.%d.mlp.switch_mlp.down_proj.weight", l), 3, (int64_t[]){E, H, Im}, SPLASH_KIND_MOE_EXPERTS, &down)))
        return st;
    for (int32_t e = 0; e < E; e++) {
        views[e] = sp_matrix_rows(&gate, e * Im, Im);
        views[E + e] = sp_matrix_rows(&up, e * Im, Im);
        views[2 * E + e] = sp_matrix_rows(&down, e * H, H);
    }
    return SPLASH_OK;
}

/* One decoder layer's weights, named as HF names them after the prefix. */
static splash_status load_layer(loader *L, int32_t l) {
    const qwen35_config *c = &L->m->cfg;
    qwen35_layer *y = &L->m->w.layers[l];
    int64_t H = c->hidden_size, hd = c->head_dim, Hq = c->num_attention_heads, Hkv = c->num_key_value_heads;
    int64_t Hv = c->linear_num_value_heads, vd = Hv * c->linear_value_head_dim, K = c->linear_conv_kernel_dim;
    float norm_add = L->q.norm_add;
    splash_status st;
#define MAT(field, suffix, r, cols, kind) \
    if ((st = load_matrix(L, tname(L, "layers.%d.%s", l, suffix), r, cols, SPLASH_KIND_##kind, &y->field))) return st
#define VEC(field, suffix, kind, n, add)                                                                                  \
    if ((st = sp_load_vector(&L->base, tname(L, "layers.%d.%s", l, suffix), SPLASH_KIND_##kind, n, 1, (int64_t[]){n}, add, \
                             &y->field)))                                                                                   \
        return st
    y->kind = c->layer_types[l];
    VEC(input_norm, "input_layernorm.weight", NORM, H, norm_add);
    VEC(post_norm, "post_attention_layernorm.weight", NORM, H, norm_add);
    if (y->kind == LAYER_FULL_ATTENTION) {
        MAT(q_proj, "self_attn.q_proj.weight", Hq * 2 * hd, H, ATTN_PROJ);
        MAT(k_proj, "self_attn.k_proj.weight", Hkv * hd, H, ATTN_PROJ);
        MAT(v_proj, "self_attn.v_proj.weight", Hkv * hd, H, ATTN_PROJ);
        MAT(o_proj, "self_attn.o_proj.weight", H, Hq * hd, ATTN_PROJ);
        VEC(q_norm, "self_attn.q_norm.weight", NORM, hd, norm_add);
        VEC(k_norm, "self_attn.k_norm.weight", NORM, hd, norm_add);
    } else {
        MAT(in_proj_qkv, "linear_attn.in_proj_qkv.weight", c->conv_dim, H, GDN_PROJ);
        MAT(in_proj_z, "linear_attn.in_proj_z.weight", vd, H, GDN_PROJ);
        MAT(in_proj_b, "linear_attn.in_proj_b.weight", Hv, H, GDN_GATE_PROJ);
        MAT(in_proj_a, "linear_attn.in_proj_a.weight", Hv, H, GDN_GATE_PROJ);
        MAT(out_proj, "linear_attn.out_proj.weight", H, vd, GDN_PROJ);
        if ((st = sp_load_vector(&L->base, tname(L, "layers.%d.linear_attn.conv1d.weight", l), SPLASH_KIND_GDN_CONV,
                                 c->conv_dim * K, 3,
                                 L->q.mlx ? (int64_t[]){c->conv_dim, K, 1} : (int64_t[]){c->conv_dim, 1, K}, 0.0f, &y->conv1d)))
            return st;
        VEC(A, "linear_attn.A_log", GDN_PARAM, Hv, 0.0f);
        for (int64_t h = 0; h < Hv; h++) ((float *)y->A)[h] = -expf(y->A[h]);
        VEC(dt_bias, "linear_attn.dt_bias", GDN_PARAM, Hv, 0.0f);
        VEC(gdn_norm, "linear_attn.norm.weight", NORM, c->linear_value_head_dim, 0.0f);
    }
    if (c->moe) {
        int64_t Is = c->shared_expert_intermediate_size;
        /* the router and the shared expert's scalar gate stay as stored: routing decisions are sensitive */
        MAT(ffn.router, "mlp.gate.weight", c->num_experts, H, MOE_ROUTER);
        MAT(ffn.shared_gate, "mlp.shared_expert.gate_proj.weight", Is, H, SHARED_EXPERT);
        MAT(ffn.shared_up, "mlp.shared_expert.up_proj.weight", Is, H, SHARED_EXPERT);
        MAT(ffn.shared_down, "mlp.shared_expert.down_proj.weight", H, Is, SHARED_EXPERT);
        MAT(ffn.shared_expert_gate, "mlp.shared_expert_gate.weight", 1, H, SHARED_EXPERT_GATE);
        int32_t moe_index = l; /* every layer is MoE: layer l owns views [l · 3E, (l + 1) · 3E) */
        if ((st = load_experts(L, l, &y->ffn.experts, L->m->w.expert_views + (int64_t)moe_index * 3 * c->num_experts))) return st;
    } else {
        int64_t I = c->intermediate_size;
        MAT(ffn.gate_proj, "mlp.gate_proj.weight", I, H, MLP);
        MAT(ffn.up_proj, "mlp.up_proj.weight", I, H, MLP);
        MAT(ffn.down_proj, "mlp.down_proj.weight", H, I, MLP);
    }
#undef MAT
#undef VEC
    return SPLASH_OK;
}

static splash_status load_weights(loader *L) {
    sp_qwen35 *m = L->m;
    const qwen35_config *c = &m->cfg;
    int64_t H = c->hidden_size;
    splash_status st = sanitize(m->ck, &L->q);
    if (!st) st = sp_weights_alloc(&m->w.held, m->ck, vector_floats(c));
    if (st) return st;
    m->w.layers = calloc((size_t)c->num_hidden_layers, sizeof(qwen35_layer));
    m->w.expert_views = c->moe ? calloc((size_t)c->num_hidden_layers * 3 * (size_t)c->num_experts, sizeof(sp_matrix)) : NULL;
    if (!m->w.layers || (c->moe && !m->w.expert_views)) return SP_FAIL(SPLASH_ERR_OUT_OF_MEMORY, "out of memory for the layer table");
    L->base.w = &m->w.held;
    if ((st = load_matrix(L, tname(L, "embed_tokens.weight"), c->vocab_size, H, SPLASH_KIND_EMBED, &m->w.embed)) ||
        (st = sp_load_vector(&L->base, tname(L, "norm.weight"), SPLASH_KIND_NORM, H, 1, (int64_t[]){H}, L->q.norm_add, &m->w.norm)))
        return st;
    if (c->tie_word_embeddings && !sp_checkpoint_find(m->ck, L->q.lm_head)) m->w.lm_head = m->w.embed;
    else if ((st = load_matrix(L, L->q.lm_head, c->vocab_size, H, SPLASH_KIND_LM_HEAD, &m->w.lm_head))) return st;
    /* RoPE inverse frequencies, fp32 as HF computes them: 1 / θ^(2i / rot_dim) */
    if ((st = sp_load_floats(&L->base, c->rot_dim / 2, &m->w.inv_freq))) return st;
    for (int32_t i = 0; i < c->rot_dim / 2; i++)
        m->w.inv_freq[i] = 1.0f / powf(c->rope_theta, (float)(2 * i) / (float)c->rot_dim);
    int32_t n_full = 0, n_linear = 0;
    for (int32_t l = 0; l < c->num_hidden_layers; l++) {
        if ((st = load_layer(L, l))) return st;
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
    const float *base = m->w.held.vectors, *dev;
    splash_status st = sp_weights_upload(be, &m->w.held, &dev);
    if (st) return st;
#define MOVE(p) SP_MOVE(p, base, dev)
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

splash_status sp_qwen35_load(sp_checkpoint *ck, const sp_backend *be, const int32_t *quant, int32_t max_step_tokens,
                             sp_qwen35 **out) {
    *out = NULL;
    sp_qwen35 *m = calloc(1, sizeof *m);
    if (!m) {
        sp_checkpoint_close(ck);
        return SP_FAIL(SPLASH_ERR_OUT_OF_MEMORY, "out of memory");
    }
    m->be = be;
    if (quant) memcpy(m->quant, quant, sizeof m->quant);
    m->ck = ck;
    splash_status st = SPLASH_OK;
    loader L = {.base = {.ck = m->ck, .pool = be->pool, .upload = be->upload ? be : NULL, .quant = m->quant}, .m = m};
    st = parse_config(m->ck, &m->cfg);
    /* the caller's step size, else the one measured on this backend's device for this model, else the default */
    int32_t measured = !st && be->step_tokens ? be->step_tokens(be, m->cfg.hidden_size, m->cfg.num_hidden_layers) : 0;
    m->max_step_tokens = max_step_tokens > 0 ? max_step_tokens : measured > 0 ? measured : DEFAULT_STEP_TOKENS;
    int64_t image_token = -1;
    if (!st) sp_json_int(sp_json_get(sp_checkpoint_config(m->ck), "image_token_id"), &image_token);
    m->image_token_id = (int32_t)image_token;
    if (!st) st = load_weights(&L);
    if (!st) st = upload_vectors(m);
    m->n_tokens = m->cfg.vocab_size;
    if (!st) {
        m->scratch_bytes = scratch_layout(&m->cfg, m->max_step_tokens, NULL, &m->s);
        m->scratch_mem = be->alloc(be, m->scratch_bytes);
        m->s.sample = malloc((size_t)be->n_threads * (size_t)sp_sample_scratch_bytes(m->cfg.vocab_size));
        m->s.jobs = malloc(sizeof(sp_sample_job) * LOGIT_ROWS);
        if (!m->scratch_mem || !m->s.sample || !m->s.jobs)
            st = SP_FAIL(SPLASH_ERR_OUT_OF_MEMORY, "out of memory for %llu bytes of scratch (max_step_tokens %d)",
                         (unsigned long long)m->scratch_bytes, m->max_step_tokens);
        else scratch_layout(&m->cfg, m->max_step_tokens, m->scratch_mem, &m->s);
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
    sp_weights_free(&m->w.held);
    free(m->w.layers);
    free(m->w.expert_views);
    if (m->scratch_mem) m->be->free(m->be, m->scratch_mem);
    free(m->s.sample);
    free(m->s.jobs);
    free(m->token_mask);
    if (m->kept) m->be->free(m->be, m->kept);
    if (m->state_copy) m->be->free(m->be, m->state_copy);
    sp_checkpoint_close(m->ck);
    free(m);
}

/* ---- what the loaded model reports ------------------------------------------------------------------------- */

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
    uint64_t b = matrix_bytes(&m->w.lm_head) + (uint64_t)m->w.embed.row_bytes + sizeof(float) * (uint64_t)m->w.held.n_vectors;
    for (int32_t l = 0; l < c->num_hidden_layers; l++) {
        const qwen35_layer *y = &m->w.layers[l];
        const sp_matrix *all[] = {&y->q_proj, &y->k_proj, &y->v_proj, &y->o_proj, &y->in_proj_qkv, &y->in_proj_z,
                                  &y->in_proj_b, &y->in_proj_a, &y->out_proj, &y->ffn.gate_proj, &y->ffn.up_proj, &y->ffn.down_proj,
                                  &y->ffn.router, &y->ffn.shared_gate, &y->ffn.shared_up, &y->ffn.shared_down,
                                  &y->ffn.shared_expert_gate};
        for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) b += matrix_bytes(all[i]);
        if (!c->moe) continue;
        uint64_t experts = 0;
        for (int32_t e = 0; e < c->num_experts; e++)
            experts += matrix_bytes(&y->ffn.experts.gate[e]) + matrix_bytes(&y->ffn.experts.up[e]) + matrix_bytes(&y->ffn.experts.down[e]);
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
        .weight_bytes = m->w.held.bytes,
        .scratch_bytes = m->scratch_bytes,
        .kv_bytes_per_token = sp_qwen35_page_bytes(m, 1, SPLASH_KV_F32),
        .state_bytes = sp_qwen35_slot_bytes(m),
        .decode_bytes_per_token = decode_bytes(m),
    };
}
