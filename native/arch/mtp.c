/* mtp.c — the Qwen3.5 multi-token-prediction layer (`mtp.*` in the checkpoint) as a chained drafter.
 *
 * Reference: vLLM qwen3_5_mtp.py (qwen35-architecture.md §2.6), as trained for models/splash-tiny (its README):
 *   e = pre_fc_norm_embedding(embed(t_{j}));  h = pre_fc_norm_hidden(hidden_{j−1})    (1 + w) RMSNorms
 *   x = fc([e ; h])                                                                     concat order [embedding, hidden]
 *   y = layer(x) at RoPE position j − 1: one gated full-attention decoder layer (dense MLP, or MoE for MoE targets)
 *       with causal attention over its own K/V
 *   g = norm(y);  logits = lm_head(g) predict t_{j+1}
 * where hidden_{j−1} is the target's last hidden state after its final norm. Chained drafting feeds g back as the
 * hidden of the next pair: (d_1, g_1) at position j, (d_2, g_2) at j + 1, …
 *
 * K/V storage: the entry of pair (t_j, hidden_{j−1}) is kept at page position j (RoPE position j − 1). Position j
 * then depends only on tokens ≤ j, like the target's own K/V, so a block the prefix cache names holds exactly the
 * entries a sequence with that prefix needs; position 0 holds nothing and is never read. The one hidden an entry
 * needs from before a step (hidden_{pos0−1}) is the slot state: the last committed row's final-normed hidden.
 *
 * Ingest needs only K and V of each committed pair (fc, input norm, k/v projections, k_norm, RoPE); drafting runs
 * the whole layer, norm and lm_head, one row per sequence per chained step. Everything runs as backend ops on backend
 * memory; only the token ids and positions go up and the logits rows come back. */
#include "mtp.h"

#include "arch/attention.h"
#include "arch/ffn.h"
#include "arch/loader.h"
#include "core/error.h"
#include "core/quant.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

enum { DEFAULT_DRAFT = 3 }; /* chained steps per draft unless asked (each is a full layer and the lm_head) */

/* ---- config (the target's text_config; HF names) -------------------------------------------------------------- */

typedef struct mtp_config {
    bool moe;
    int32_t vocab_size, hidden_size;
    float rms_norm_eps, rope_theta;
    int32_t num_attention_heads, num_key_value_heads, head_dim, rot_dim;
    int32_t intermediate_size;                                                                  /* dense */
    int32_t num_experts, num_experts_per_tok, moe_intermediate_size, shared_expert_intermediate_size; /* MoE */
} mtp_config;

static sp_ffn_shape ffn_shape(const mtp_config *c) {
    return (sp_ffn_shape){c->moe, c->hidden_size, c->moe ? c->shared_expert_intermediate_size : c->intermediate_size,
                          c->num_experts, c->num_experts_per_tok, c->moe_intermediate_size};
}

/* ---- weights ------------------------------------------------------------------------------------------------ */

typedef struct mtp_weights {
    sp_matrix fc;                          /* (H, 2H) */
    const float *norm_embedding;           /* (H) 1 + w */
    const float *norm_hidden;              /* (H) 1 + w */
    const float *norm;                     /* (H) 1 + w: mtp.norm */
    const float *input_norm, *post_norm;   /* (H) 1 + w */
    sp_matrix q_proj;                      /* (Hq·2·hd, H): per head [query | gate] */
    sp_matrix k_proj, v_proj;              /* (Hkv·hd, H) */
    sp_matrix o_proj;                      /* (H, Hq·hd) */
    const float *q_norm, *k_norm;          /* (hd) 1 + w */
    sp_ffn_weights ffn;                               /* dense or MoE */
    sp_matrix *expert_views;                          /* (3E) */
    float *inv_freq;                                  /* (rot_dim / 2) */
    sp_weights held;                                  /* the vector block, quantized copies, bytes held */
} mtp_weights;

/* ---- scratch: N rows (a step's committed rows at ingest; one row per sequence when drafting) --------------------- */

typedef struct mtp_scratch {
    int32_t *tokens, *pos;                 /* (N) */
    float *e, *h;                          /* (N, H) normed embedding and hidden */
    float *cat;                            /* (N, 2H) */
    float *x, *xb, *out;                   /* (N, H) */
    sp_attn_scratch attn;
    sp_ffn_scratch ffn;
    float *chain;                          /* (max_seqs, H): each drafting sequence's last normed MTP output */
    float *logits;                         /* (max_seqs, vocab) */
} mtp_scratch;

typedef struct sp_mtp {
    sp_drafter base;                       /* first: the drafter's table and sizes */
    mtp_config cfg;
    mtp_weights w;
    mtp_scratch s;
    void *scratch_mem;
    uint64_t scratch_bytes;
    int64_t rows;                          /* N */
    int32_t max_seqs;
    const sp_matrix *embed, *lm_head;
    const sp_backend *be;
    sp_checkpoint *ck;
    const int32_t *quant;
    int32_t *host_ints;                    /* (2N): tokens and positions, written to s.tokens and s.pos */
    float *host_logits;                    /* (max_seqs, vocab): a chained step's rows, read back for pick */
} sp_mtp;

/* Lays the scratch out at `base` (NULL: only measures); returns its size in bytes. */
static uint64_t scratch_layout(const mtp_config *c, int64_t N, int64_t R, uint8_t *base, mtp_scratch *s) {
    sp_scratch at = {base, 0};
#define TAKE(field, type, count) SP_TAKE(&at, s->field, type, count)
    int64_t H = c->hidden_size, hd = c->head_dim, Hq = c->num_attention_heads, Hkv = c->num_key_value_heads;
    TAKE(tokens, int32_t, N);
    TAKE(pos, int32_t, N);
    TAKE(e, float, N * H);
    TAKE(h, float, N * H);
    TAKE(cat, float, N * 2 * H);
    TAKE(x, float, N * H);
    TAKE(xb, float, N * H);
    TAKE(out, float, N * H);
    sp_attn_take(&at, N, Hq, Hkv, hd, &s->attn);
    sp_ffn_shape ffn = ffn_shape(c);
    sp_ffn_take(&at, &ffn, N, &s->ffn);
    TAKE(chain, float, R * H);
    TAKE(logits, float, R * c->vocab_size);
#undef TAKE
    return at.off;
}

/* ---- loading ------------------------------------------------------------------------------------------------ */

static splash_status parse_config(const sp_draft_target *t, mtp_config *c) {
    const sp_json *tc = t->text_config, *root = sp_checkpoint_config(t->ck);
    const char *type = sp_json_string(sp_json_get(root, "model_type"));
    c->moe = type && !strncmp(type, "qwen3_5_moe", 11);
    c->vocab_size = t->vocab_size;
    c->hidden_size = t->hidden_size;
    c->rms_norm_eps = t->rms_norm_eps;
    int64_t layers = 1;
    if (sp_json_get(tc, "mtp_num_hidden_layers") && (!sp_json_int(sp_json_get(tc, "mtp_num_hidden_layers"), &layers) || layers != 1))
        return SP_FAIL(SPLASH_ERR_UNSUPPORTED, "%s/config.json: mtp_num_hidden_layers = %lld: only one MTP layer is supported",
                       sp_checkpoint_dir(t->ck), (long long)layers);
    const char *dir = sp_checkpoint_dir(t->ck);
    splash_status st;
#define INT(field, dflt) (st = sp_config_int(tc, dir, "text_config", #field, 1, dflt, &c->field))
    if (INT(num_attention_heads, -1) || INT(num_key_value_heads, -1) || INT(head_dim, 256)) return st;
    if (c->moe) {
        if (INT(num_experts, -1) || INT(num_experts_per_tok, -1) || INT(moe_intermediate_size, -1) ||
            INT(shared_expert_intermediate_size, -1))
            return st;
    } else if (INT(intermediate_size, -1)) {
        return st;
    }
#undef INT
    c->rope_theta = sp_config_rope(tc, "rope_theta", 10000000.0);
    c->rot_dim = (int32_t)((float)c->head_dim * sp_config_rope(tc, "partial_rotary_factor", 0.25));
    if (c->rot_dim < 2 || c->rot_dim % 2 || c->rot_dim > c->head_dim || c->num_attention_heads % c->num_key_value_heads)
        return SP_FAIL(SPLASH_ERR_UNSUPPORTED, "%s/config.json: unsupported MTP attention shape", dir);
    return SPLASH_OK;
}

/* Checkpoint quirks: mtp.* sits at the root of the target's checkpoint; its norms are zero-centred (stored w − 1);
 * experts come per expert or fused (sp_load_experts). */
static splash_status load_weights(sp_mtp *d) {
    const mtp_config *c = &d->cfg;
    mtp_weights *w = &d->w;
    int64_t H = c->hidden_size, hd = c->head_dim, Hq = c->num_attention_heads, Hkv = c->num_key_value_heads;
    splash_status st = sp_weights_alloc(&w->held, d->ck, 5 * H + 2 * hd + c->rot_dim / 2);
    if (st) return st;
    w->expert_views = c->moe ? calloc(3 * (size_t)c->num_experts, sizeof(sp_matrix)) : NULL;
    if (c->moe && !w->expert_views) return SP_FAIL(SPLASH_ERR_OUT_OF_MEMORY, "out of memory");
    sp_loader L = {.ck = d->ck, .pool = d->be->pool, .upload = d->be->upload ? d->be : NULL, .quant = d->quant,
                   .w = &w->held};
#define MAT(name, rows, cols, kind, out) sp_load_matrix(&L, name, rows, cols, SPLASH_KIND_##kind, out)
#define NORM(name, n, out) sp_load_vector(&L, name, SPLASH_KIND_NORM, n, 1, (int64_t[]){n}, 1.0f, out)
#define P "mtp.layers.0."
    if ((st = MAT("mtp.fc.weight", H, 2 * H, MTP_FC, &w->fc)) ||
        (st = NORM("mtp.pre_fc_norm_embedding.weight", H, &w->norm_embedding)) ||
        (st = NORM("mtp.pre_fc_norm_hidden.weight", H, &w->norm_hidden)) || (st = NORM("mtp.norm.weight", H, &w->norm)) ||
        (st = NORM(P "input_layernorm.weight", H, &w->input_norm)) ||
        (st = NORM(P "post_attention_layernorm.weight", H, &w->post_norm)) ||
        (st = MAT(P "self_attn.q_proj.weight", Hq * 2 * hd, H, ATTN_PROJ, &w->q_proj)) ||
        (st = MAT(P "self_attn.k_proj.weight", Hkv * hd, H, ATTN_PROJ, &w->k_proj)) ||
        (st = MAT(P "self_attn.v_proj.weight", Hkv * hd, H, ATTN_PROJ, &w->v_proj)) ||
        (st = MAT(P "self_attn.o_proj.weight", H, Hq * hd, ATTN_PROJ, &w->o_proj)) ||
        (st = NORM(P "self_attn.q_norm.weight", hd, &w->q_norm)) || (st = NORM(P "self_attn.k_norm.weight", hd, &w->k_norm)))
        return st;
    if (c->moe) {
        int64_t Is = c->shared_expert_intermediate_size;
        if ((st = MAT(P "mlp.gate.weight", c->num_experts, H, MOE_ROUTER, &w->ffn.router)) ||
            (st = MAT(P "mlp.shared_expert.gate_proj.weight", Is, H, SHARED_EXPERT, &w->ffn.shared_gate)) ||
            (st = MAT(P "mlp.shared_expert.up_proj.weight", Is, H, SHARED_EXPERT, &w->ffn.shared_up)) ||
            (st = MAT(P "mlp.shared_expert.down_proj.weight", H, Is, SHARED_EXPERT, &w->ffn.shared_down)) ||
            (st = MAT(P "mlp.shared_expert_gate.weight", 1, H, SHARED_EXPERT_GATE, &w->ffn.shared_expert_gate)) ||
            (st = sp_load_experts(&L, P "mlp.experts.", c->num_experts, c->num_experts_per_tok, H, c->moe_intermediate_size,
                                  w->expert_views, &w->ffn.experts)))
            return st;
    } else {
        int64_t I = c->intermediate_size;
        if ((st = MAT(P "mlp.gate_proj.weight", I, H, MLP, &w->ffn.gate_proj)) ||
            (st = MAT(P "mlp.up_proj.weight", I, H, MLP, &w->ffn.up_proj)) ||
            (st = MAT(P "mlp.down_proj.weight", H, I, MLP, &w->ffn.down_proj)))
            return st;
    }
#undef P
#undef NORM
#undef MAT
    if ((st = sp_load_floats(&L, c->rot_dim / 2, &w->inv_freq))) return st;
    for (int32_t i = 0; i < c->rot_dim / 2; i++) w->inv_freq[i] = 1.0f / powf(c->rope_theta, (float)(2 * i) / (float)c->rot_dim);
    /* on a GPU backend the f32 vectors go to the device in one piece, and every pointer into them moves along */
    if (!d->be->upload) return SPLASH_OK;
    const float *base = w->held.vectors, *dev;
    if ((st = sp_weights_upload(d->be, &w->held, &dev))) return st;
#define MOVE(p) SP_MOVE(p, base, dev)
    MOVE(w->norm_embedding), MOVE(w->norm_hidden), MOVE(w->norm), MOVE(w->input_norm), MOVE(w->post_norm);
    MOVE(w->q_norm), MOVE(w->k_norm), MOVE(w->inv_freq);
#undef MOVE
    return SPLASH_OK;
}

static const sp_drafter_ops MTP_OPS;
static void mtp_free(sp_drafter *base);

splash_status sp_mtp_load(const sp_draft_target *t, sp_checkpoint *ck, int32_t max_draft, int32_t max_seqs, sp_drafter **out) {
    *out = NULL;
    if (ck) {
        sp_checkpoint_close(ck);
        return SP_FAIL(SPLASH_ERR_INVALID_ARGUMENT, "the MTP drafter is the target's own mtp.* layer: it takes no directory");
    }
    if (!sp_checkpoint_find(t->ck, "mtp.fc.weight"))
        return SP_FAIL(SPLASH_ERR_UNSUPPORTED, "%s has no MTP layer (mtp.* tensors): draft with dflash or none",
                       sp_checkpoint_dir(t->ck));
    sp_mtp *d = calloc(1, sizeof *d);
    if (!d) return SP_FAIL(SPLASH_ERR_OUT_OF_MEMORY, "out of memory");
    if (max_draft == 0) max_draft = DEFAULT_DRAFT;
    *d = (sp_mtp){.base = {.ops = &MTP_OPS, .max_draft = max_draft, .mask_token_id = -1}, .max_seqs = max_seqs,
                  .embed = t->embed, .lm_head = t->lm_head, .be = t->be, .ck = t->ck, .quant = t->quant};
    d->rows = t->max_step_tokens > max_seqs ? t->max_step_tokens : max_seqs;
    splash_status st = parse_config(t, &d->cfg);
    if (!st) st = load_weights(d);
    if (!st) {
        d->scratch_bytes = scratch_layout(&d->cfg, d->rows, max_seqs, NULL, &d->s);
        d->scratch_mem = d->be->alloc(d->be, d->scratch_bytes);
        d->host_ints = malloc(sizeof(int32_t) * 2 * (size_t)d->rows);
        d->host_logits = malloc(sizeof(float) * (size_t)max_seqs * (size_t)d->cfg.vocab_size);
        if (!d->scratch_mem || !d->host_ints || !d->host_logits)
            st = SP_FAIL(SPLASH_ERR_OUT_OF_MEMORY, "out of memory for the MTP drafter's scratch");
        else scratch_layout(&d->cfg, d->rows, max_seqs, d->scratch_mem, &d->s);
    }
    if (st) {
        mtp_free(&d->base);
        return st;
    }
    d->base.weight_bytes = d->w.held.bytes;
    d->base.scratch_bytes = d->scratch_bytes;
    *out = &d->base;
    return SPLASH_OK;
}

static void mtp_free(sp_drafter *base) {
    sp_mtp *d = (sp_mtp *)base;
    if (!d) return;
    free(d->host_ints);
    free(d->host_logits);
    sp_weights_free(&d->w.held);
    free(d->w.expert_views);
    if (d->scratch_mem) d->be->free(d->be, d->scratch_mem);
    free(d);
}

static uint64_t mtp_page_bytes(const sp_drafter *base, int32_t page_tokens, int32_t kv_type) {
    const sp_mtp *d = (const sp_mtp *)base;
    return (uint64_t)sp_kv_layers_bytes(kv_type, 1, d->cfg.num_key_value_heads, d->cfg.head_dim, page_tokens);
}
static uint64_t mtp_slot_bytes(const sp_drafter *base) {
    return sizeof(float) * (uint64_t)((const sp_mtp *)base)->cfg.hidden_size;
}

/* ---- forward ------------------------------------------------------------------------------------------------ */

/* s->tokens, s->pos ← the first n of host_ints' tokens and positions */
static void upload_rows(sp_mtp *d, int64_t n) {
    d->be->write(d->be, d->s.tokens, d->host_ints, sizeof(int32_t) * (uint64_t)n);
    d->be->write(d->be, d->s.pos, d->host_ints + d->rows, sizeof(int32_t) * (uint64_t)n);
}

/* x = fc([pre_fc_norm_embedding(embed(tokens)) ; pre_fc_norm_hidden(h)]) over n rows (s->tokens, s->h raw) */
static void fuse_inputs(sp_mtp *d, int64_t n) {
    const sp_backend *be = d->be;
    mtp_scratch *s = &d->s;
    int64_t H = d->cfg.hidden_size;
    float eps = d->cfg.rms_norm_eps;
    be->embed(be, s->e, d->embed, s->tokens, n);
    be->rmsnorm(be, s->e, s->e, d->w.norm_embedding, n, H, eps);
    be->rmsnorm(be, s->h, s->h, d->w.norm_hidden, n, H, eps);
    be->copy_rows(be, s->cat, 2 * H, s->e, H, n, H);
    be->copy_rows(be, s->cat + H, 2 * H, s->h, H, n, H);
    be->matmul(be, s->x, &d->w.fc, s->cat, n);
}

/* k = rope(k_norm(k_proj(xb))), v = v_proj(xb) over n rows at s->pos */
static void keys_values(sp_mtp *d, int64_t n) {
    const sp_backend *be = d->be;
    const mtp_config *c = &d->cfg;
    mtp_scratch *s = &d->s;
    be->matmul(be, s->attn.k, &d->w.k_proj, s->xb, n);
    be->matmul(be, s->attn.v, &d->w.v_proj, s->xb, n);
    be->rmsnorm(be, s->attn.k, s->attn.k, d->w.k_norm, n * c->num_key_value_heads, c->head_dim, c->rms_norm_eps);
    be->rope(be, s->attn.k, n, c->num_key_value_heads, c->head_dim, c->rot_dim, s->pos, NULL, d->w.inv_freq);
}

static void mtp_ingest(sp_drafter *base, const sp_seq_memory *mem, const sp_draft_rows *seqs, int32_t n_seqs) {
    sp_mtp *d = (sp_mtp *)base;
    const sp_backend *be = d->be;
    const mtp_config *c = &d->cfg;
    mtp_scratch *s = &d->s;
    int64_t H = c->hidden_size, Hkv = c->num_key_value_heads, hd = c->head_dim;
    /* pair j = (t_j, hidden_{j−1}) for each committed position j ≥ 1; hidden_{pos0−1} is the slot's */
    int64_t n = 0;
    for (int32_t i = 0; i < n_seqs; i++) {
        const sp_draft_rows *q = &seqs[i];
        int32_t j0 = q->pos0 == 0; /* position 0 has no pair */
        if (j0 >= q->n) continue;
        for (int32_t j = j0; j < q->n; j++) {
            d->host_ints[n + j - j0] = q->tokens[j];
            d->host_ints[d->rows + n + j - j0] = q->pos0 + j - 1;
        }
        /* hidden_{pos0 − 1} is the slot's; the rest are this step's rows 0 … n − 2 */
        if (j0 == 0) be->copy_rows(be, s->h + n * H, H, mem->state + (int64_t)q->slot * H, H, 1, H);
        int32_t from = j0 == 0 ? 1 : j0;
        if (from < q->n) be->copy_rows(be, s->h + (n + from - j0) * H, H, q->rows + (from - 1) * q->stride, q->stride, q->n - from, H);
        n += q->n - j0;
    }
    if (n > 0) {
        upload_rows(d, n);
        fuse_inputs(d, n);
        be->rmsnorm(be, s->xb, s->x, d->w.input_norm, n, H, c->rms_norm_eps);
        keys_values(d, n);
    }
    int64_t r = 0;
    for (int32_t i = 0; i < n_seqs; i++) {
        const sp_draft_rows *q = &seqs[i];
        int32_t skip = q->pos0 == 0, m = q->n - skip;
        if (m > 0) {
            sp_kv_view kv = sp_memory_kv(mem, 0, c->num_key_value_heads, c->head_dim, q->pages);
            be->kv_write(be, &kv, s->attn.k + r * Hkv * hd, s->attn.v + r * Hkv * hd, q->pos0 + skip, m, (int32_t)Hkv, (int32_t)hd);
            r += m;
        }
        if (q->n > 0) be->copy_rows(be, mem->state + (int64_t)q->slot * H, H, q->rows + (q->n - 1) * q->stride, q->stride, 1, H);
    }
}

/* The MTP layer on n rows (one per sequence, seqs[i] at storage position pos[i] + 1), then mtp.norm into s->h. */
static void layer(sp_mtp *d, const sp_seq_memory *mem, const sp_draft_seq *seqs, int64_t n) {
    const sp_backend *be = d->be;
    const mtp_config *c = &d->cfg;
    mtp_scratch *s = &d->s;
    int64_t H = c->hidden_size, hd = c->head_dim, Hq = c->num_attention_heads, Hkv = c->num_key_value_heads;
    float eps = c->rms_norm_eps;
    be->rmsnorm(be, s->xb, s->x, d->w.input_norm, n, H, eps);
    be->matmul(be, s->attn.qg, &d->w.q_proj, s->xb, n);
    keys_values(d, n);
    be->copy_rows(be, s->attn.q, hd, s->attn.qg, 2 * hd, n * Hq, hd);
    be->copy_rows(be, s->attn.gate, hd, s->attn.qg + hd, 2 * hd, n * Hq, hd);
    be->rmsnorm(be, s->attn.q, s->attn.q, d->w.q_norm, n * Hq, hd, eps);
    be->rope(be, s->attn.q, n, (int32_t)Hq, (int32_t)hd, c->rot_dim, s->pos, NULL, d->w.inv_freq);
    for (int64_t i = 0; i < n; i++) {
        sp_kv_view kv = sp_memory_kv(mem, 0, c->num_key_value_heads, c->head_dim, seqs[i].pages);
        int32_t at = d->host_ints[d->rows + i] + 1; /* storage position of this pair */
        be->kv_write(be, &kv, s->attn.k + i * Hkv * hd, s->attn.v + i * Hkv * hd, at, 1, (int32_t)Hkv, (int32_t)hd);
        sp_attn_ext x = {.n_rows = 1, .q_pos0 = at, .kv = &kv, .page_lo = 1, .page_hi = at + 1};
        be->attention_ext(be, s->attn.att + i * Hq * hd, s->attn.q + i * Hq * hd, (int32_t)Hq, (int32_t)Hkv, (int32_t)hd,
                          1.0f / sqrtf((float)hd), &x);
    }
    be->sigmoid_mul(be, s->attn.att, s->attn.gate, n * Hq * hd);
    be->matmul(be, s->out, &d->w.o_proj, s->attn.att, n);
    be->add(be, s->x, s->out, n * H);
    be->rmsnorm(be, s->xb, s->x, d->w.post_norm, n, H, eps);
    const mtp_weights *w = &d->w;
    const sp_ffn_shape ffn = ffn_shape(c);
    sp_ffn_forward(be, &ffn, &w->ffn, &s->ffn, s->out, s->xb, n);
    be->add(be, s->x, s->out, n * H);
    be->rmsnorm(be, s->h, s->x, w->norm, n, H, eps);
}

static splash_status mtp_draft(sp_drafter *base, const sp_seq_memory *mem, const sp_draft_seq *seqs, int32_t n_seqs,
                               sp_draft_shape shape, sp_draft_pick pick, void *ctx) {
    (void)shape; /* no candidate selector */
    sp_mtp *d = (sp_mtp *)base;
    const sp_backend *be = d->be;
    mtp_scratch *s = &d->s;
    int64_t H = d->cfg.hidden_size, V = d->cfg.vocab_size;
    if (n_seqs > d->max_seqs) return SP_FAIL(SPLASH_ERR_INVALID_ARGUMENT, "%d sequences to draft, at most %d", n_seqs, d->max_seqs);
    int32_t steps = 0, last[n_seqs > 0 ? n_seqs : 1]; /* last[i]: sequence i's token fed to the next step */
    for (int32_t i = 0; i < n_seqs; i++) {
        steps = seqs[i].n_draft > steps ? seqs[i].n_draft : steps;
        last[i] = seqs[i].anchor;
    }
    sp_draft_seq rows[n_seqs > 0 ? n_seqs : 1];
    int32_t row_seq[n_seqs > 0 ? n_seqs : 1];
    for (int32_t j = 0; j < steps; j++) {
        /* step j of sequence i: the pair (last[i], hidden) at RoPE position n_past − 1 + j, where hidden is the
         * slot's last committed hidden at j = 0 and the previous step's normed output after (s->chain) */
        int64_t n = 0;
        for (int32_t i = 0; i < n_seqs; i++) {
            if (seqs[i].n_draft <= j) continue;
            rows[n] = seqs[i];
            row_seq[n] = i;
            d->host_ints[n] = last[i];
            d->host_ints[d->rows + n] = seqs[i].n_past - 1 + j;
            be->copy_rows(be, s->h + n * H, H, j == 0 ? mem->state + (int64_t)seqs[i].slot * H : s->chain + (int64_t)i * H, H, 1, H);
            n++;
        }
        upload_rows(d, n);
        fuse_inputs(d, n);
        layer(d, mem, rows, n);
        be->matmul(be, s->logits, d->lm_head, s->h, n);
        for (int64_t r = 0; r < n; r++) be->copy_rows(be, s->chain + (int64_t)row_seq[r] * H, H, s->h + r * H, H, 1, H);
        be->read(be, d->host_logits, s->logits, sizeof(float) * (uint64_t)(n * V));
        if (*be->status) return *be->status;
        for (int64_t r = 0; r < n; r++) last[row_seq[r]] = pick(ctx, row_seq[r], j, &(sp_draft_choice){.logits = d->host_logits + r * V});
    }
    return SPLASH_OK;
}

static const sp_drafter_ops MTP_OPS = {"mtp", mtp_free, mtp_page_bytes, mtp_slot_bytes, mtp_ingest, mtp_draft};
