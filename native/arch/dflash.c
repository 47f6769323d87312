/* dflash.c — a DFlash drafter (z-lab DFlash and DFlash2 layouts): a small Qwen3-style transformer that drafts a block
 * of tokens in one pass, conditioned on hidden states tapped from the target.
 *
 * Reference: z-lab dflash/model.py; speculative-decoding.md §1.1–1.3 and §8; scripts/fixtures/reference.py (v1),
 * scripts/fixtures/dflash2_goldens.py (v2, against z-lab's own code):
 *   ctx_t  = hidden_norm(fc(concat_l tap_l(t)))            tap_l = residual stream after target layer l
 *   per committed position t and drafter layer i: K_i(t) = rope(k_norm(k_proj_i(ctx_t)), t), V_i(t) = v_proj_i(ctx_t),
 *   written once into the drafter's pages (never through q, o_proj, MLP or the residual)
 *   block  = embed_target([anchor, mask × (B − 1)]) at positions s … s + B − 1 (s = the anchor's position)
 *   per layer: x = input_layernorm(h); q = rope(q_norm(q_proj(x)));  keys/values = [context 0 … s − 1 ; block rows]
 *              h += o_proj(attention);  h += down(silu(gate(y)) · up(y)), y = post_attention_layernorm(h)
 *   logits = lm_head_target(norm(h)) on block rows 1 … B − 1: row j proposes the token at position s + j
 * Norms are Qwen3 RMSNorm with a plain weight; RoPE is 1-D NeoX over the whole head (YaRN when the config asks);
 * no attention output gate. full_attention layers are bidirectional inside the block, sliding_attention layers causal
 * with a window (|q_pos − k_pos| < sliding_window); a config `is_causal` overrides both. Everything runs as backend
 * ops on backend memory; only the token ids and positions go up and the drafted rows' logits come back.
 *
 * DFlash2 (DFlash2DraftModel) adds, on the block rows only:
 *   a grouped dynamic causal convolution around each sublayer, with its own kernel_projection P and base_kernel b:
 *     dyn = P(x) as [2][K][H / G];  x' = conv(x, dyn[0], b[0]);  y = sublayer(x');  out = conv(y, dyn[1], b[1])
 *     conv(x, d, b)_t[c] = Σ_{o<K} (b[o][c] + d_t[o][c / G]) · x_{t−o}[c], x_{t−o} = 0 before the block's first row
 *     (the anchor row): never across blocks, nothing kept between rounds. Layer: h += conv∘o_proj∘attn∘conv(ln1(h)),
 *     h += conv∘mlp∘conv(ln2(h)); the context K/V are injected exactly as in v1.
 *   a candidate selector on each drafted row t (its final-normed hidden n_t and logits l_t):
 *     cand = the top_k tokens of l_t;  s_t(c) = l_t(c) + Σ_r pred[prev][r] · (W n_t)[r] · succ[c][r]
 *     walked left to right from prev = the anchor, each row's draft becoming the next row's prev: greedy takes the
 *     best score, sampling draws from softmax(s_t / T) over cand (the q that acceptance uses). */
#include "dflash.h"

#include "arch/loader.h"
#include "core/error.h"
#include "core/quant.h"
#include "core/rank.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

enum { MAX_LAYERS = 64, MAX_TAPS = 64, LOGIT_ROWS = 64, MAX_SELECTOR_TOP_K = 1024 };

/* ---- config (the drafter's config.json; dflash_config flattened in) -------------------------------------------- */

typedef struct dflash_config {
    int32_t hidden_size, num_hidden_layers, num_attention_heads, num_key_value_heads, head_dim, intermediate_size;
    float rms_norm_eps;
    int32_t block_size, mask_token_id;
    int32_t target_layer_ids[MAX_TAPS], n_taps;
    bool sliding[MAX_LAYERS];     /* layer_types[i] == "sliding_attention" */
    bool causal[MAX_LAYERS];      /* in-block causality: sliding layers, unless is_causal says otherwise */
    int32_t sliding_window;
    float input_embedding_scale;  /* 1 for Qwen (the only value taken) */
    float output_multiplier;      /* 1 for Qwen */
    float final_logit_softcapping; /* 0 = none */
    float attention_factor;       /* YaRN: cos and sin are scaled by it, so q·k by its square */
    int32_t version;              /* 1: DFlashDraftModel; 2: DFlash2DraftModel (the fields below) */
    int32_t conv_kernel, conv_group; /* K taps; G channels per dynamic coefficient */
    int32_t selector_rank, selector_top_k;
} dflash_config;

/* One DFlash2 grouped dynamic causal convolution pair (before and after a sublayer). */
typedef struct dflash_conv {
    sp_matrix proj;                          /* kernel_projection (2·K·H/G, H) */
    const float *base;                       /* base_kernel (2, K, H) */
} dflash_conv;

typedef struct dflash_layer {
    const float *input_norm, *post_norm;     /* (H) plain w */
    sp_matrix q_proj;                        /* (Hq·hd, H) */
    sp_matrix k_proj, v_proj;                /* (Hkv·hd, H) */
    sp_matrix o_proj;                        /* (H, Hq·hd) */
    const float *q_norm, *k_norm;            /* (hd) plain w */
    sp_matrix gate_proj, up_proj;            /* (I, H) */
    sp_matrix down_proj;                     /* (H, I) */
    dflash_conv attn_conv, mlp_conv;         /* DFlash2 */
} dflash_layer;

typedef struct dflash_weights {
    sp_matrix fc;                            /* (H, n_taps·H) */
    const float *hidden_norm, *norm;         /* (H) */
    dflash_layer *layers;
    sp_matrix sel_hidden;                    /* DFlash2 candidate_selector.hidden_projection (R, H) */
    sp_matrix sel_pred, sel_succ;            /* predecessor / successor codebooks (vocab, R): rows gathered */
    float *inv_freq;                         /* (hd / 2) */
    sp_weights held;                         /* the vector block, quantized copies, bytes held */
} dflash_weights;

/* Scratch for N = max(max_step_tokens, max_seqs · B) rows. */
typedef struct dflash_scratch {
    int32_t *tokens, *pos;                   /* (N) */
    float *h, *xb, *out;                     /* (N, H) residual stream, normed input, block output */
    float *q, *att;                          /* (N, Hq·hd) */
    float *k, *v;                            /* (N, Hkv·hd) */
    float *g, *u;                            /* (N, I) */
    float *dyn;                              /* DFlash2: (N, 2·K·H/G) one sublayer's dynamic kernels */
    float *logits;                           /* (LOGIT_ROWS, vocab) */
    float *proj;                             /* DFlash2: (LOGIT_ROWS, R) the selector's projections of drafted rows */
    float *pred, *succ;                      /* DFlash2: (R) prev's codebook row; (top_k, R) the candidates' rows */
    int32_t *cand;                           /* DFlash2: (1 + top_k) the previous draft and the candidates */
} dflash_scratch;

typedef struct sp_dflash {
    sp_drafter base;                         /* first: the drafter's table and sizes */
    dflash_config cfg;
    dflash_weights w;
    dflash_scratch s;
    void *scratch_mem;
    uint64_t scratch_bytes;
    int64_t rows;
    int32_t max_seqs, vocab_size;
    const sp_matrix *embed, *lm_head;
    const sp_backend *be;
    sp_checkpoint *ck;
    const int32_t *quant;
    int32_t *host_ints;                      /* (2N): tokens and positions, written to s.tokens and s.pos */
    float *host_logits;                      /* (LOGIT_ROWS, vocab): the rows pick reads */
    /* DFlash2's selector, on the host: [prev, candidates] (1 + top_k), their scores (top_k), the codebook rows
     * (R; top_k · R) and the drafted rows' projections (LOGIT_ROWS · R) read back */
    int32_t *sel_ids;
    float *sel_scores, *sel_pred, *sel_succ, *sel_proj;
} sp_dflash;

/* Per page of P positions, per drafter layer i: K rows (Hkv, P) then V rows (Hkv, P) in the KV type. */

/* Lays the scratch out at `base` (NULL: only measures); returns its size in bytes. */
static uint64_t scratch_layout(const dflash_config *c, int64_t N, int32_t vocab, uint8_t *base, dflash_scratch *s) {
    sp_scratch at = {base, 0};
#define TAKE(field, type, count) SP_TAKE(&at, s->field, type, count)
    int64_t H = c->hidden_size, hd = c->head_dim, Hq = c->num_attention_heads, Hkv = c->num_key_value_heads;
    int64_t taps = (int64_t)c->n_taps * H;
    TAKE(tokens, int32_t, N);
    TAKE(pos, int32_t, N);
    TAKE(h, float, N * H);
    TAKE(xb, float, N * (taps > H ? taps : H)); /* also holds the taps handed to fc at ingest */
    TAKE(out, float, N * H);
    TAKE(q, float, N * Hq * hd);
    TAKE(att, float, N * Hq * hd);
    TAKE(k, float, N * Hkv * hd);
    TAKE(v, float, N * Hkv * hd);
    TAKE(g, float, N * c->intermediate_size);
    TAKE(u, float, N * c->intermediate_size);
    TAKE(logits, float, (int64_t)LOGIT_ROWS * vocab);
    if (c->version == 2) {
        int64_t R = c->selector_rank;
        TAKE(dyn, float, N * 2 * c->conv_kernel * (H / c->conv_group));
        TAKE(proj, float, (int64_t)LOGIT_ROWS * R);
        TAKE(pred, float, R);
        TAKE(succ, float, (int64_t)c->selector_top_k * R);
        TAKE(cand, int32_t, c->selector_top_k + 1);
    }
#undef TAKE
    return at.off;
}

/* RoPE: rope_parameters (newer configs) or rope_theta + rope_scaling (older). Plain, or YaRN (HF
 * _compute_yarn_parameters): per frequency a ramp between interpolation (÷ factor) and extrapolation, and cos/sin
 * scaled by attention_factor. The Qwen3.6 drafters are trained with YaRN (z-lab 1fe684b "Fix Qwen3.6 Rope"). */
static splash_status rope(const sp_json *root, const char *dir, dflash_config *c, float *inv_freq) {
    const sp_json *rp = sp_json_get(root, "rope_parameters");
    const sp_json *sc = rp ? rp : sp_json_get(root, "rope_scaling");
    double theta = sp_config_number(sp_json_get(rp, "rope_theta"), sp_config_number(sp_json_get(root, "rope_theta"), 10000.0));
    const char *type = sp_json_string(sp_json_get(sc, "rope_type"));
    if (!type) type = sp_json_string(sp_json_get(sc, "type"));
    int32_t d = c->head_dim, half = d / 2;
    for (int32_t i = 0; i < half; i++) inv_freq[i] = (float)(1.0 / pow(theta, (double)(2 * i) / d));
    c->attention_factor = 1.0f;
    if (!type || !strcmp(type, "default")) return SPLASH_OK;
    if (strcmp(type, "yarn"))
        return SP_FAIL(SPLASH_ERR_UNSUPPORTED, "%s/config.json: rope type \"%s\" is not supported (default or yarn)", dir, type);
    double factor = sp_config_number(sp_json_get(sc, "factor"), 0);
    double original = sp_config_number(sp_json_get(sc, "original_max_position_embeddings"),
                                sp_config_number(sp_json_get(root, "max_position_embeddings"), 0));
    if (!(factor >= 1) || !(original > 0))
        return SP_FAIL(SPLASH_ERR_FORMAT, "%s/config.json: yarn rope needs factor ≥ 1 and original_max_position_embeddings", dir);
    double beta_fast = sp_config_number(sp_json_get(sc, "beta_fast"), 32), beta_slow = sp_config_number(sp_json_get(sc, "beta_slow"), 1);
    double mscale = sp_config_number(sp_json_get(sc, "mscale"), 0), mscale_all = sp_config_number(sp_json_get(sc, "mscale_all_dim"), 0);
#define GET_MSCALE(s, m) ((s) <= 1 ? 1.0 : 0.1 * (m) * log(s) + 1.0)
    double af = sp_config_number(sp_json_get(sc, "attention_factor"), -1);
    if (af < 0) af = mscale && mscale_all ? GET_MSCALE(factor, mscale) / GET_MSCALE(factor, mscale_all) : GET_MSCALE(factor, 1);
#undef GET_MSCALE
    c->attention_factor = (float)af;
    bool truncate = true;
    sp_json_bool(sp_json_get(sc, "truncate"), &truncate);
    /* find_correction_range: the dims whose wavelength fits between beta_fast and beta_slow rotations */
    double lo = d * log(original / (beta_fast * 2 * M_PI)) / (2 * log(theta));
    double hi = d * log(original / (beta_slow * 2 * M_PI)) / (2 * log(theta));
    if (truncate) lo = floor(lo), hi = ceil(hi);
    if (lo < 0) lo = 0;
    if (hi > d - 1) hi = d - 1;
    if (lo == hi) hi += 0.001;
    for (int32_t i = 0; i < half; i++) {
        double ramp = (i - lo) / (hi - lo);
        ramp = ramp < 0 ? 0 : ramp > 1 ? 1 : ramp;
        double extra = 1 - ramp, pos_freq = pow(theta, (double)(2 * i) / d);
        inv_freq[i] = (float)(1.0 / (factor * pos_freq) * (1 - extra) + 1.0 / pos_freq * extra);
    }
    return SPLASH_OK;
}

/* Where a drafter key lives: dflash_config, else the top level (z-lab `_draft_value`). */
static const sp_json *draft_obj(const sp_json *root, const sp_json *dc, const char *key) { return sp_json_get(dc, key) ? dc : root; }
static const sp_json *draft_key(const sp_json *root, const sp_json *dc, const char *key) { return sp_json_get(draft_obj(root, dc, key), key); }

/* 2 when config.json's architectures names DFlash2DraftModel (the class z-lab's code builds), else 1. */
static int32_t config_version(const sp_json *root) {
    const sp_json *arch = sp_json_get(root, "architectures");
    for (size_t i = 0; arch && arch->type == SP_JSON_ARRAY && i < arch->len; i++) {
        const char *a = sp_json_string(sp_json_at(arch, i));
        if (a && !strcmp(a, "DFlash2DraftModel")) return 2;
    }
    return 1;
}

static splash_status parse_config(const sp_checkpoint *ck, const sp_draft_target *t, int32_t version, dflash_config *c) {
    const char *dir = sp_checkpoint_dir(ck);
    const sp_json *root = sp_checkpoint_config(ck);
    if (!root) return SP_FAIL(SPLASH_ERR_FORMAT, "%s: no config.json (a DFlash drafter needs one)", dir);
    c->version = config_version(root);
    if (c->version != version)
        return SP_FAIL(SPLASH_ERR_INVALID_ARGUMENT, "%s holds a %s drafter (config.json architectures), not a %s one: attach it as "
                       "%s (--draft %s)", dir, c->version == 2 ? "DFlash2" : "DFlash (v1)", version == 2 ? "DFlash2" : "DFlash (v1)",
                       c->version == 2 ? "DFlash2" : "DFlash", c->version == 2 ? "dflash2" : "dflash");
    if (c->version == 1 && (sp_checkpoint_find(ck, "layers.0.attention_conv.base_kernel") ||
                            sp_checkpoint_find(ck, "candidate_selector.hidden_projection.weight")))
        return SP_FAIL(SPLASH_ERR_FORMAT, "%s has DFlash2 tensors (attention_conv, candidate_selector) but its config.json does "
                       "not name DFlash2DraftModel in architectures", dir);
    const sp_json *dc = sp_json_get(root, "dflash_config");
    if (!dc) return SP_FAIL(SPLASH_ERR_FORMAT, "%s/config.json: no dflash_config (not a z-lab DFlash drafter)", dir);
    splash_status st;
    if ((st = sp_config_int(root, dir, NULL, "hidden_size", 1, -1, &c->hidden_size)) ||
        (st = sp_config_int(root, dir, NULL, "num_hidden_layers", 1, -1, &c->num_hidden_layers)) ||
        (st = sp_config_int(root, dir, NULL, "num_attention_heads", 1, -1, &c->num_attention_heads)) ||
        (st = sp_config_int(root, dir, NULL, "num_key_value_heads", 1, -1, &c->num_key_value_heads)) ||
        (st = sp_config_int(root, dir, NULL, "head_dim", 2, c->hidden_size / c->num_attention_heads, &c->head_dim)) ||
        (st = sp_config_int(root, dir, NULL, "intermediate_size", 1, -1, &c->intermediate_size)))
        return st;
    /* block_size moved into dflash_config in newer revisions */
    if ((st = sp_config_int(draft_obj(root, dc, "block_size"), dir, NULL, "block_size", 2, -1, &c->block_size)) ||
        (st = sp_config_int(dc, dir, NULL, "mask_token_id", 0, -1, &c->mask_token_id)))
        return st;
    if (c->version == 2) {
        if ((st = sp_config_int(draft_obj(root, dc, "conv_kernel_size"), dir, NULL, "conv_kernel_size", 1, -1, &c->conv_kernel)) ||
            (st = sp_config_int(draft_obj(root, dc, "conv_group_size"), dir, NULL, "conv_group_size", 1, -1, &c->conv_group)) ||
            (st = sp_config_int(draft_obj(root, dc, "selector_rank"), dir, NULL, "selector_rank", 1, -1, &c->selector_rank)) ||
            (st = sp_config_int(draft_obj(root, dc, "selector_top_k"), dir, NULL, "selector_top_k", 1, -1, &c->selector_top_k)))
            return st;
        if (c->hidden_size % c->conv_group)
            return SP_FAIL(SPLASH_ERR_FORMAT, "%s/config.json: conv_group_size %d does not divide hidden_size %d", dir, c->conv_group,
                           c->hidden_size);
        if (c->selector_top_k > MAX_SELECTOR_TOP_K || c->selector_top_k > t->vocab_size)
            return SP_FAIL(SPLASH_ERR_UNSUPPORTED, "%s/config.json: selector_top_k %d (at most %d and the vocabulary)", dir,
                           c->selector_top_k, MAX_SELECTOR_TOP_K);
    }
    const sp_json *ids = sp_json_get(dc, "target_layer_ids");
    if (!ids || ids->type != SP_JSON_ARRAY || ids->len < 1 || ids->len > MAX_TAPS)
        return SP_FAIL(SPLASH_ERR_FORMAT, "%s/config.json: dflash_config.target_layer_ids must list 1..%d target layers "
                       "(Splash reads it, never derives it)", dir, MAX_TAPS);
    c->n_taps = (int32_t)ids->len;
    for (int32_t i = 0; i < c->n_taps; i++) {
        int64_t x;
        if (!sp_json_int(sp_json_at(ids, (size_t)i), &x) || x < 0 || x >= t->num_hidden_layers)
            return SP_FAIL(SPLASH_ERR_FORMAT, "%s/config.json: target_layer_ids[%d] is not a layer of the target (0..%d)", dir, i,
                           t->num_hidden_layers - 1);
        c->target_layer_ids[i] = (int32_t)x;
    }
    if (c->num_hidden_layers > MAX_LAYERS)
        return SP_FAIL(SPLASH_ERR_UNSUPPORTED, "%s/config.json: num_hidden_layers %d (at most %d)", dir, c->num_hidden_layers, MAX_LAYERS);
    const sp_json *lt = sp_json_get(root, "layer_types");
    if (lt && (lt->type != SP_JSON_ARRAY || (int64_t)lt->len != c->num_hidden_layers))
        return SP_FAIL(SPLASH_ERR_FORMAT, "%s/config.json: layer_types must list %d layers", dir, c->num_hidden_layers);
    bool any_sliding = false, is_causal = false, has_causal = sp_json_bool(sp_json_get(root, "is_causal"), &is_causal);
    for (int32_t i = 0; i < c->num_hidden_layers; i++) {
        const char *k = lt ? sp_json_string(sp_json_at(lt, (size_t)i)) : "full_attention";
        if (!k || (strcmp(k, "full_attention") && strcmp(k, "sliding_attention")))
            return SP_FAIL(SPLASH_ERR_UNSUPPORTED, "%s/config.json: layer_types[%d] is not full_attention or sliding_attention", dir, i);
        c->sliding[i] = !strcmp(k, "sliding_attention");
        c->causal[i] = has_causal ? is_causal : c->sliding[i];
        any_sliding |= c->sliding[i];
    }
    if (any_sliding && (st = sp_config_int(root, dir, NULL, "sliding_window", 1, -1, &c->sliding_window))) return st;
    double eps = 1e-6;
    sp_json_double(sp_json_get(root, "rms_norm_eps"), &eps);
    c->rms_norm_eps = (float)eps;
    c->input_embedding_scale = (float)sp_config_number(draft_key(root, dc, "input_embedding_scale"), 1.0);
    c->output_multiplier = (float)sp_config_number(draft_key(root, dc, "output_multiplier"), 1.0);
    c->final_logit_softcapping = (float)sp_config_number(draft_key(root, dc, "final_logit_softcapping"), 0.0);
    if (c->input_embedding_scale != 1.0f)
        return SP_FAIL(SPLASH_ERR_UNSUPPORTED, "%s/config.json: input_embedding_scale %g: Splash's targets (Qwen) take "
                       "drafters that embed with scale 1", dir, (double)c->input_embedding_scale);
    if (c->hidden_size != t->hidden_size)
        return SP_FAIL(SPLASH_ERR_FORMAT, "%s/config.json: hidden_size %d differs from the target's %d (the drafter embeds "
                       "and decodes with the target's tables)", dir, c->hidden_size, t->hidden_size);
    if (c->mask_token_id >= t->vocab_size)
        return SP_FAIL(SPLASH_ERR_FORMAT, "%s/config.json: mask_token_id %d is outside the target's vocabulary (%d)", dir,
                       c->mask_token_id, t->vocab_size);
    if (c->num_attention_heads % c->num_key_value_heads || c->head_dim % 2 || c->head_dim > 1024)
        return SP_FAIL(SPLASH_ERR_UNSUPPORTED, "%s/config.json: unsupported attention shape", dir);
    return SPLASH_OK;
}

/* ---- loading ------------------------------------------------------------------------------------------------ */

/* The tensor "layers.{i}.{suffix}". */
static const char *lname(sp_loader *L, int32_t i, const char *suffix) { return sp_load_name(L, "layers.%d.%s", i, suffix); }

static splash_status matrix(sp_loader *L, const char *name, int64_t rows, int64_t cols, sp_matrix *out) {
    return sp_load_matrix(L, name, rows, cols, SPLASH_KIND_DFLASH, out);
}

static splash_status vector(sp_loader *L, const char *name, int64_t n, const float **out) {
    return sp_load_vector(L, name, SPLASH_KIND_DFLASH, n, 1, &n, 0.0f, out);
}

static splash_status conv(sp_loader *L, const dflash_config *c, int32_t i, const char *which, dflash_conv *out) {
    int64_t H = c->hidden_size, K = c->conv_kernel, proj_rows = 2 * K * (H / c->conv_group);
    splash_status st = matrix(L, sp_load_name(L, "layers.%d.%s.kernel_projection.weight", i, which), proj_rows, H, &out->proj);
    if (st) return st;
    return sp_load_vector(L, sp_load_name(L, "layers.%d.%s.base_kernel", i, which), SPLASH_KIND_DFLASH, 2 * K * H, 3, (int64_t[]){2, K, H}, 0.0f,
                          &out->base);
}

static splash_status load_weights(sp_dflash *d) {
    const dflash_config *c = &d->cfg;
    dflash_weights *w = &d->w;
    int64_t H = c->hidden_size, hd = c->head_dim, Hq = c->num_attention_heads, Hkv = c->num_key_value_heads, I = c->intermediate_size;
    int64_t conv_floats = c->version == 2 ? 2 * 2 * (int64_t)c->conv_kernel * H : 0; /* two base kernels (2, K, H) */
    int64_t nv = 2 * H + (int64_t)c->num_hidden_layers * (2 * H + 2 * hd + conv_floats) + hd / 2;
    splash_status st = sp_weights_alloc(&w->held, d->ck, nv);
    if (st) return st;
    w->layers = calloc((size_t)c->num_hidden_layers, sizeof(dflash_layer));
    if (!w->layers) return SP_FAIL(SPLASH_ERR_OUT_OF_MEMORY, "out of memory");
    sp_loader L = {.ck = d->ck, .pool = d->be->pool, .upload = d->be->upload ? d->be : NULL, .quant = d->quant,
                   .w = &w->held};
    if ((st = matrix(&L, "fc.weight", H, (int64_t)c->n_taps * H, &w->fc)) || (st = vector(&L, "hidden_norm.weight", H, &w->hidden_norm)) ||
        (st = vector(&L, "norm.weight", H, &w->norm)))
        return st;
    for (int32_t i = 0; i < c->num_hidden_layers; i++) {
        dflash_layer *y = &w->layers[i];
        if ((st = vector(&L, lname(&L, i, "input_layernorm.weight"), H, &y->input_norm)) ||
            (st = vector(&L, lname(&L, i, "post_attention_layernorm.weight"), H, &y->post_norm)) ||
            (st = matrix(&L, lname(&L, i, "self_attn.q_proj.weight"), Hq * hd, H, &y->q_proj)) ||
            (st = matrix(&L, lname(&L, i, "self_attn.k_proj.weight"), Hkv * hd, H, &y->k_proj)) ||
            (st = matrix(&L, lname(&L, i, "self_attn.v_proj.weight"), Hkv * hd, H, &y->v_proj)) ||
            (st = matrix(&L, lname(&L, i, "self_attn.o_proj.weight"), H, Hq * hd, &y->o_proj)) ||
            (st = vector(&L, lname(&L, i, "self_attn.q_norm.weight"), hd, &y->q_norm)) ||
            (st = vector(&L, lname(&L, i, "self_attn.k_norm.weight"), hd, &y->k_norm)) ||
            (st = matrix(&L, lname(&L, i, "mlp.gate_proj.weight"), I, H, &y->gate_proj)) ||
            (st = matrix(&L, lname(&L, i, "mlp.up_proj.weight"), I, H, &y->up_proj)) ||
            (st = matrix(&L, lname(&L, i, "mlp.down_proj.weight"), H, I, &y->down_proj)))
            return st;
        if (c->version == 2 && ((st = conv(&L, c, i, "attention_conv", &y->attn_conv)) || (st = conv(&L, c, i, "mlp_conv", &y->mlp_conv))))
            return st;
    }
    if (c->version == 2) {
        /* the codebooks are stored without ".weight" (z-lab's DFlash2DraftModel remaps them at load) */
        int64_t R = c->selector_rank, V = d->vocab_size;
        if ((st = matrix(&L, "candidate_selector.hidden_projection.weight", R, H, &w->sel_hidden)) ||
            (st = matrix(&L, "candidate_selector.predecessor_codebook", V, R, &w->sel_pred)) ||
            (st = matrix(&L, "candidate_selector.successor_codebook", V, R, &w->sel_succ)))
            return st;
    }
    if ((st = sp_load_floats(&L, hd / 2, &w->inv_freq))) return st;
    if ((st = rope(sp_checkpoint_config(d->ck), sp_checkpoint_dir(d->ck), &d->cfg, w->inv_freq))) return st;
    /* on a GPU backend the f32 vectors go to the device in one piece, and every pointer into them moves along */
    if (!d->be->upload) return SPLASH_OK;
    const float *base = w->held.vectors, *dev;
    if ((st = sp_weights_upload(d->be, &w->held, &dev))) return st;
#define MOVE(p) SP_MOVE(p, base, dev)
    MOVE(w->hidden_norm), MOVE(w->norm), MOVE(w->inv_freq);
    for (int32_t i = 0; i < c->num_hidden_layers; i++) {
        dflash_layer *y = &w->layers[i];
        MOVE(y->input_norm), MOVE(y->post_norm), MOVE(y->q_norm), MOVE(y->k_norm);
        if (c->version == 2) MOVE(y->attn_conv.base), MOVE(y->mlp_conv.base);
    }
#undef MOVE
    return SPLASH_OK;
}

static const sp_drafter_ops DFLASH_OPS, DFLASH2_OPS;
static void dflash_free(sp_drafter *base);

static splash_status load(const sp_draft_target *t, sp_checkpoint *ck, int32_t version, int32_t max_draft, int32_t max_seqs,
                          sp_drafter **out) {
    *out = NULL;
    if (!ck) return SP_FAIL(SPLASH_ERR_INVALID_ARGUMENT, "a DFlash drafter needs its directory");
    sp_dflash *d = calloc(1, sizeof *d);
    if (!d) {
        sp_checkpoint_close(ck);
        return SP_FAIL(SPLASH_ERR_OUT_OF_MEMORY, "out of memory");
    }
    *d = (sp_dflash){.base = {.ops = version == 2 ? &DFLASH2_OPS : &DFLASH_OPS}, .max_seqs = max_seqs, .vocab_size = t->vocab_size,
                     .embed = t->embed, .lm_head = t->lm_head, .be = t->be, .ck = ck, .quant = t->quant};
    splash_status st = SPLASH_OK;
    if (version == 2 && !t->be->block_conv)
        st = SP_FAIL(SPLASH_ERR_UNSUPPORTED, "the %s backend has no block_conv op (DFlash2's dynamic convolution): draft "
                     "with mtp or dflash", t->be->name);
    if (!st) st = parse_config(d->ck, t, version, &d->cfg);
    if (!st) st = load_weights(d);
    if (!st) {
        int64_t block_rows = (int64_t)max_seqs * d->cfg.block_size;
        d->rows = t->max_step_tokens > block_rows ? t->max_step_tokens : block_rows;
        d->scratch_bytes = scratch_layout(&d->cfg, d->rows, d->vocab_size, NULL, &d->s);
        d->scratch_mem = d->be->alloc(d->be, d->scratch_bytes);
        d->host_ints = malloc(sizeof(int32_t) * 2 * (size_t)d->rows);
        d->host_logits = malloc(sizeof(float) * LOGIT_ROWS * (size_t)d->vocab_size);
        if (version == 2) {
            int64_t R = d->cfg.selector_rank, k = d->cfg.selector_top_k;
            d->sel_ids = malloc(sizeof(int32_t) * (size_t)(1 + k));
            d->sel_scores = malloc(sizeof(float) * (size_t)(k + R + k * R + LOGIT_ROWS * R));
            if (d->sel_scores) d->sel_pred = d->sel_scores + k, d->sel_succ = d->sel_pred + R, d->sel_proj = d->sel_succ + k * R;
        }
        if (!d->scratch_mem || !d->host_ints || !d->host_logits || (version == 2 && (!d->sel_ids || !d->sel_scores)))
            st = SP_FAIL(SPLASH_ERR_OUT_OF_MEMORY, "out of memory for the DFlash drafter's scratch");
        else scratch_layout(&d->cfg, d->rows, d->vocab_size, d->scratch_mem, &d->s);
    }
    int32_t B = st ? 0 : d->cfg.block_size;
    if (!st && (max_draft < 0 || max_draft > B - 1))
        st = SP_FAIL(SPLASH_ERR_INVALID_ARGUMENT, "max_draft %d: a block of %d drafts at most %d", max_draft, B, B - 1);
    if (st) {
        dflash_free(&d->base);
        return st;
    }
    d->base.max_draft = max_draft ? max_draft : B - 1;
    d->base.block_size = B;
    d->base.mask_token_id = d->cfg.mask_token_id;
    d->base.tap_layers = d->cfg.target_layer_ids;
    d->base.n_taps = d->cfg.n_taps;
    d->base.weight_bytes = d->w.held.bytes;
    d->base.scratch_bytes = d->scratch_bytes;
    *out = &d->base;
    return SPLASH_OK;
}

static void dflash_free(sp_drafter *base) {
    sp_dflash *d = (sp_dflash *)base;
    if (!d) return;
    free(d->host_ints);
    free(d->host_logits);
    free(d->sel_ids);
    free(d->sel_scores);
    sp_weights_free(&d->w.held);
    free(d->w.layers);
    if (d->scratch_mem) d->be->free(d->be, d->scratch_mem);
    sp_checkpoint_close(d->ck);
    free(d);
}

static uint64_t dflash_page_bytes(const sp_drafter *base, int32_t page_tokens, int32_t kv_type) {
    const dflash_config *c = &((const sp_dflash *)base)->cfg;
    return (uint64_t)sp_kv_layers_bytes(kv_type, c->num_hidden_layers, c->num_key_value_heads, c->head_dim, page_tokens);
}
static uint64_t dflash_slot_bytes(const sp_drafter *base) {
    (void)base;
    return 0;
}

/* ---- forward ------------------------------------------------------------------------------------------------ */

/* k = rope(k_norm(k_proj(x))), v = v_proj(x) for drafter layer i over n rows of x at s->pos */
static void keys_values(sp_dflash *d, const dflash_layer *y, const float *x, int64_t n) {
    const sp_backend *be = d->be;
    const dflash_config *c = &d->cfg;
    dflash_scratch *s = &d->s;
    be->matmul(be, s->k, &y->k_proj, x, n);
    be->matmul(be, s->v, &y->v_proj, x, n);
    be->rmsnorm(be, s->k, s->k, y->k_norm, n * c->num_key_value_heads, c->head_dim, c->rms_norm_eps);
    be->rope(be, s->k, n, c->num_key_value_heads, c->head_dim, c->head_dim, s->pos, NULL, d->w.inv_freq);
}

/* s->tokens, s->pos ← the first n of host_ints' tokens and positions (tokens only when drafting) */
static void upload_rows(sp_dflash *d, int64_t n, bool tokens) {
    if (tokens) d->be->write(d->be, d->s.tokens, d->host_ints, sizeof(int32_t) * (uint64_t)n);
    d->be->write(d->be, d->s.pos, d->host_ints + d->rows, sizeof(int32_t) * (uint64_t)n);
}

static void dflash_ingest(sp_drafter *base, const sp_seq_memory *mem, const sp_draft_rows *seqs, int32_t n_seqs) {
    sp_dflash *d = (sp_dflash *)base;
    const sp_backend *be = d->be;
    const dflash_config *c = &d->cfg;
    dflash_scratch *s = &d->s;
    int64_t H = c->hidden_size, W = (int64_t)c->n_taps * H, Hkv = c->num_key_value_heads, hd = c->head_dim, n = 0;
    for (int32_t i = 0; i < n_seqs; i++) {
        if (seqs[i].n > 0) be->copy_rows(be, s->xb + n * W, W, seqs[i].rows, seqs[i].stride, seqs[i].n, W);
        for (int32_t j = 0; j < seqs[i].n; j++, n++) d->host_ints[d->rows + n] = seqs[i].pos0 + j;
    }
    if (n == 0) return;
    upload_rows(d, n, false);
    /* ctx = hidden_norm(fc(taps)) */
    be->matmul(be, s->h, &d->w.fc, s->xb, n);
    be->rmsnorm(be, s->h, s->h, d->w.hidden_norm, n, H, c->rms_norm_eps);
    for (int32_t l = 0; l < c->num_hidden_layers; l++) {
        keys_values(d, &d->w.layers[l], s->h, n);
        int64_t r = 0;
        for (int32_t i = 0; i < n_seqs; i++) {
            sp_kv_view kv = sp_memory_kv(mem, l, c->num_key_value_heads, c->head_dim, seqs[i].pages);
            be->kv_write(be, &kv, s->k + r * Hkv * hd, s->v + r * Hkv * hd, seqs[i].pos0, seqs[i].n, (int32_t)Hkv, (int32_t)hd);
            r += seqs[i].n;
        }
    }
}

/* The selector's candidates for one drafted row: the top_k tokens of z (the row shaped as the target samples it),
 * scored z + the bilinear term against the previous draft. The codebook rows are gathered by the backend and read
 * back: a few hundred floats, scored here beside the row they extend. proj: the row's projection (host). */
static void select_candidates(sp_dflash *d, const float *z, const float *proj, int32_t prev, sp_draft_choice *out) {
    const sp_backend *be = d->be;
    const dflash_config *c = &d->cfg;
    dflash_scratch *s = &d->s;
    int64_t R = c->selector_rank;
    int32_t *ids = d->sel_ids; /* [prev, candidates …] */
    ids[0] = prev;
    int32_t k = sp_rank_top(z, d->vocab_size, c->selector_top_k, ids + 1);
    be->write(be, s->cand, ids, sizeof(int32_t) * (uint64_t)(1 + k));
    be->embed(be, s->pred, &d->w.sel_pred, s->cand, 1);
    be->embed(be, s->succ, &d->w.sel_succ, s->cand + 1, k);
    be->read(be, d->sel_pred, s->pred, sizeof(float) * (uint64_t)R);
    be->read(be, d->sel_succ, s->succ, sizeof(float) * (uint64_t)(k * R));
    for (int64_t r = 0; r < R; r++) d->sel_pred[r] *= proj[r];
    for (int32_t j = 0; j < k; j++) {
        const float *succ = d->sel_succ + j * R;
        float dot = 0;
        for (int64_t r = 0; r < R; r++) dot += d->sel_pred[r] * succ[r];
        d->sel_scores[j] = z[ids[1 + j]] + dot;
    }
    out->n_cand = k, out->cand = ids + 1, out->scores = d->sel_scores;
}

/* DFlash2's convolution `side` (0 before a sublayer, 1 after) over every block's rows of x, in place. */
static void conv_blocks(sp_dflash *d, float *x, const dflash_conv *cv, int32_t side, const int64_t *row0, const int32_t *len,
                        int32_t n_seqs) {
    const dflash_config *c = &d->cfg;
    int64_t H = c->hidden_size, K = c->conv_kernel, groups = H / c->conv_group;
    d->be->block_conv(d->be, x, d->s.dyn + side * K * groups, 2 * K * groups, cv->base + side * K * H, H, (int32_t)K,
                      c->conv_group, row0, len, n_seqs);
}

static splash_status dflash_draft(sp_drafter *base, const sp_seq_memory *mem, const sp_draft_seq *seqs, int32_t n_seqs,
                                  sp_draft_shape shape, sp_draft_pick pick, void *ctx) {
    sp_dflash *d = (sp_dflash *)base;
    const sp_backend *be = d->be;
    const dflash_config *c = &d->cfg;
    dflash_scratch *s = &d->s;
    int64_t H = c->hidden_size, hd = c->head_dim, Hq = c->num_attention_heads, Hkv = c->num_key_value_heads, V = d->vocab_size;
    if (n_seqs > d->max_seqs) return SP_FAIL(SPLASH_ERR_INVALID_ARGUMENT, "%d sequences to draft, at most %d", n_seqs, d->max_seqs);
    /* sequence i's block, rows row0[i] … row0[i] + len[i] − 1: [anchor, mask × n_draft], at most the trained B rows.
     * A block shorter than B drafts a little worse (its masks see fewer masks: splash-tiny's τ at 2 drafts is 1.96
     * in a block of 3 rows, 2.03 in the full 8) but costs rows, not B (DFlash paper Table 8: a block smaller than the
     * trained one works) */
    int32_t len[n_seqs > 0 ? n_seqs : 1];
    int64_t row0[n_seqs > 0 ? n_seqs : 1], n = 0;
    for (int32_t i = 0; i < n_seqs; i++) {
        len[i] = seqs[i].n_draft + 1 < c->block_size ? seqs[i].n_draft + 1 : c->block_size;
        row0[i] = n;
        for (int32_t j = 0; j < len[i]; j++, n++) {
            d->host_ints[n] = j == 0 ? seqs[i].anchor : c->mask_token_id;
            d->host_ints[d->rows + n] = seqs[i].n_past + j;
        }
    }
    upload_rows(d, n, true);
    be->embed(be, s->h, d->embed, s->tokens, n);
    float scale = c->attention_factor * c->attention_factor / sqrtf((float)hd);
    bool v2 = c->version == 2;
    for (int32_t l = 0; l < c->num_hidden_layers; l++) {
        const dflash_layer *y = &d->w.layers[l];
        be->rmsnorm(be, s->xb, s->h, y->input_norm, n, H, c->rms_norm_eps);
        if (v2) {
            be->matmul(be, s->dyn, &y->attn_conv.proj, s->xb, n);
            conv_blocks(d, s->xb, &y->attn_conv, 0, row0, len, n_seqs);
        }
        be->matmul(be, s->q, &y->q_proj, s->xb, n);
        be->rmsnorm(be, s->q, s->q, y->q_norm, n * Hq, hd, c->rms_norm_eps);
        be->rope(be, s->q, n, (int32_t)Hq, (int32_t)hd, (int32_t)hd, s->pos, NULL, d->w.inv_freq);
        keys_values(d, y, s->xb, n);
        for (int32_t i = 0; i < n_seqs; i++) {
            sp_kv_view kv = sp_memory_kv(mem, l, c->num_key_value_heads, c->head_dim, seqs[i].pages);
            int64_t r0 = row0[i];
            sp_attn_ext x = {.n_rows = len[i], .q_pos0 = seqs[i].n_past, .kv = &kv, .page_lo = 0, .page_hi = seqs[i].n_past,
                             .window = c->sliding[l] ? c->sliding_window : 0, .k_blk = s->k + r0 * Hkv * hd,
                             .v_blk = s->v + r0 * Hkv * hd, .blk_causal = c->causal[l]};
            be->attention_ext(be, s->att + r0 * Hq * hd, s->q + r0 * Hq * hd, (int32_t)Hq, (int32_t)Hkv, (int32_t)hd, scale, &x);
        }
        be->matmul(be, s->out, &y->o_proj, s->att, n);
        if (v2) conv_blocks(d, s->out, &y->attn_conv, 1, row0, len, n_seqs);
        be->add(be, s->h, s->out, n * H);
        be->rmsnorm(be, s->xb, s->h, y->post_norm, n, H, c->rms_norm_eps);
        if (v2) {
            be->matmul(be, s->dyn, &y->mlp_conv.proj, s->xb, n);
            conv_blocks(d, s->xb, &y->mlp_conv, 0, row0, len, n_seqs);
        }
        be->matmul(be, s->g, &y->gate_proj, s->xb, n);
        be->matmul(be, s->u, &y->up_proj, s->xb, n);
        be->silu_mul(be, s->g, s->g, s->u, n * c->intermediate_size);
        be->matmul(be, s->out, &y->down_proj, s->g, n);
        if (v2) conv_blocks(d, s->out, &y->mlp_conv, 1, row0, len, n_seqs);
        be->add(be, s->h, s->out, n * H);
    }
    /* norm, then lm_head on the rows each sequence drafts from (rows 1 … n_draft of its block) */
    int64_t R = 0;
    int32_t row_seq[n > 0 ? n : 1], row_j[n > 0 ? n : 1];
    for (int32_t i = 0; i < n_seqs; i++)
        for (int32_t j = 1; j <= seqs[i].n_draft && j < len[i]; j++) {
            be->rmsnorm(be, s->xb + R * H, s->h + (row0[i] + j) * H, d->w.norm, 1, H, c->rms_norm_eps);
            row_seq[R] = i, row_j[R] = j - 1;
            R++;
        }
    int32_t prev[n_seqs > 0 ? n_seqs : 1]; /* DFlash2: the selector's walk starts at the anchor */
    for (int32_t i = 0; i < n_seqs; i++) prev[i] = seqs[i].anchor;
    for (int64_t b0 = 0; b0 < R; b0 += LOGIT_ROWS) {
        int64_t nb = R - b0 < LOGIT_ROWS ? R - b0 : LOGIT_ROWS;
        be->matmul(be, s->logits, d->lm_head, s->xb + b0 * H, nb);
        if (v2) be->matmul(be, s->proj, &d->w.sel_hidden, s->xb + b0 * H, nb);
        be->read(be, d->host_logits, s->logits, sizeof(float) * (uint64_t)(nb * V));
        if (v2) be->read(be, d->sel_proj, s->proj, sizeof(float) * (uint64_t)(nb * c->selector_rank));
        if (*be->status) return *be->status;
        for (int64_t k = 0; k < nb; k++) {
            float *row = d->host_logits + k * V;
            if (c->output_multiplier != 1.0f)
                for (int64_t t = 0; t < V; t++) row[t] *= c->output_multiplier;
            if (c->final_logit_softcapping > 0)
                for (int64_t t = 0; t < V; t++) row[t] = c->final_logit_softcapping * tanhf(row[t] / c->final_logit_softcapping);
            int32_t i = row_seq[b0 + k];
            sp_draft_choice choice = {.logits = row};
            if (v2) select_candidates(d, shape(ctx, i, row_j[b0 + k], row), d->sel_proj + k * c->selector_rank, prev[i], &choice);
            prev[i] = pick(ctx, i, row_j[b0 + k], &choice);
        }
    }
    return SPLASH_OK;
}

static const sp_drafter_ops DFLASH_OPS = {"dflash", dflash_free, dflash_page_bytes, dflash_slot_bytes, dflash_ingest, dflash_draft};
static const sp_drafter_ops DFLASH2_OPS = {"dflash2", dflash_free, dflash_page_bytes, dflash_slot_bytes, dflash_ingest, dflash_draft};

splash_status sp_dflash_load(const sp_draft_target *t, sp_checkpoint *ck, int32_t max_draft, int32_t max_seqs, sp_drafter **out) {
    return load(t, ck, 1, max_draft, max_seqs, out);
}

splash_status sp_dflash2_load(const sp_draft_target *t, sp_checkpoint *ck, int32_t max_draft, int32_t max_seqs, sp_drafter **out) {
    return load(t, ck, 2, max_draft, max_seqs, out);
}
