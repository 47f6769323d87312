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
 * Layout: the model's data (config, weights, scratch) in qwen3_5_model.h, filled by qwen3_5_load.c; here the forward
 * pass, top to bottom: the layer's mixers, the FFN, logits and sampling, then the step that runs them. Arithmetic
 * lives in the backend's ops (backends/backend.h). */
#include "arch/qwen3_5_model.h"

#include "core/error.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>

#ifdef NDEBUG
#define TRACE(m, name, layer, x, rows, cols) ((void)0)
#else
#define TRACE(m, name, layer, x, rows, cols) \
    do { if ((m)->trace) (m)->trace((m)->trace_ctx, name, layer, x, rows, cols); } while (0)
#endif

/* ---- forward ------------------------------------------------------------------------------------------------ */

/* A step's context: its rows (sequence i owns rows [row0[i], row0[i] + n_tokens)) and what it asks besides them. */
typedef struct step_rows {
    splash_seq *seqs;
    int32_t n_seqs;
    int64_t n;                   /* Σ n_tokens */
    bool mrope;                  /* positions are three M-RoPE streams (a sequence with images) */
    const sp_qwen35_speculate *sp; /* speculative decoding's request, or NULL */
    sp_gdn_seq *gdn;             /* [n_seqs]: a GDN layer's sequences, filled per layer */
    sp_attn_seq *attn;           /* [n_seqs]: an attention layer's sequences, filled per layer */
    int64_t row0[];
} step_rows;

/* Gated full attention (HF Qwen3_5Attention), xb → s->out:
 *   [query | gate] = q_proj(x) per head;  q = rope(q_norm(query));  k = rope(k_norm(k_proj(x)));  v = v_proj(x)
 *   out = o_proj(softmax(q·kᵀ/√hd + causal) · v · sigmoid(gate)) */
static void full_attention(sp_qwen35 *m, const qwen35_layer *y, int32_t l, const sp_seq_memory *mem,
                           const step_rows *r) {
    const sp_backend *be = m->be;
    const qwen35_config *c = &m->cfg;
    qwen35_scratch *s = &m->s;
    int64_t T = r->n, hd = c->head_dim, Hq = c->num_attention_heads, Hkv = c->num_key_value_heads;
    be->matmul(be, s->attn.qg, &y->q_proj, s->xb, T);
    be->matmul(be, s->attn.k, &y->k_proj, s->xb, T);
    be->matmul(be, s->attn.v, &y->v_proj, s->xb, T);
    be->attention_prep(be, s->attn.q, s->attn.gate, s->attn.qg, s->attn.k, y->q_norm, y->k_norm, T, (int32_t)Hq, (int32_t)Hkv,
                       (int32_t)hd, c->rms_norm_eps, c->rot_dim, s->pos, r->mrope ? c->mrope_section : NULL, m->w.inv_freq);
    TRACE(m, "attn_q", l, s->attn.q, T, Hq * hd);
    TRACE(m, "attn_k", l, s->attn.k, T, Hkv * hd);
    /* every sequence's K/V first, then every sequence's attention: a sequence writes only its own pages and reads only
     * its own (shared prefix pages are never written), so a GPU runs each phase's sequences at once */
    for (int32_t i = 0; i < r->n_seqs; i++) {
        const splash_seq *q = &r->seqs[i];
        sp_kv_view kv = sp_memory_kv(mem, y->index, c->num_key_value_heads, c->head_dim, q->pages);
        int64_t r0 = r->row0[i];
        be->kv_write(be, &kv, s->attn.k + r0 * Hkv * hd, s->attn.v + r0 * Hkv * hd, q->n_past, q->n_tokens, (int32_t)Hkv, (int32_t)hd);
    }
    for (int32_t i = 0; i < r->n_seqs; i++) {
        const splash_seq *q = &r->seqs[i];
        r->attn[i] = (sp_attn_seq){sp_memory_kv(mem, y->index, c->num_key_value_heads, c->head_dim, q->pages), r->row0[i],
                                   q->n_past, q->n_tokens};
    }
    be->attention(be, s->attn.att, s->attn.q, s->attn.gate, r->attn, r->n_seqs, (int32_t)Hq, (int32_t)Hkv, (int32_t)hd,
                  1.0f / sqrtf((float)hd));
    be->matmul(be, s->out, &y->o_proj, s->attn.att, T);
}

/* ---- speculative decoding: verify blocks leave the GDN state alone --------------------------------------------
 * A verify block of n rows runs its conv and delta rule on a copy of the layer's state, and keeps each row's inputs
 * (raw in_proj_qkv, a, b). Once the accepted count is known, sp_qwen35_commit replays that many rows on the real
 * state with the same ops, so the state is bit for bit what token-by-token decoding would have left (replay from the
 * pre-verify state; the ops are batch-invariant per row). Memory: a copy of one layer's state per verify block of a
 * step (so the blocks' cores run at once), plus verify_rows × (conv_dim + 2·Hv) floats per GDN layer, instead of a
 * full state per draft position. */
static int64_t kept_width(const qwen35_config *c) { return c->conv_dim + 2 * (int64_t)c->linear_num_value_heads; }

static float *kept_rows(const sp_qwen35 *m, int32_t layer_index, int64_t row) {
    return m->kept + ((int64_t)layer_index * m->verify_rows + row) * kept_width(&m->cfg);
}

static void keep_verify_inputs(sp_qwen35 *m, const qwen35_layer *y, int64_t r0, int64_t n, int64_t kept_row,
                               const float *S, float *copy) {
    const qwen35_config *c = &m->cfg;
    const qwen35_scratch *s = &m->s;
    const sp_backend *be = m->be;
    int64_t C = c->conv_dim, Hv = c->linear_num_value_heads, w = kept_width(c);
    float *dst = kept_rows(m, y->index, kept_row);
    be->copy_rows(be, dst, w, s->qkv + r0 * C, C, n, C);
    be->copy_rows(be, dst + C, w, s->a + r0 * Hv, Hv, n, Hv);
    be->copy_rows(be, dst + C + Hv, w, s->b + r0 * Hv, Hv, n, Hv);
    int64_t state = layer_state_floats(c);
    be->copy_rows(be, copy, state, S, state, 1, state);
}

/* Layer y's conv, delta-rule and output-norm constants, as gdn_core takes them. */
static sp_gdn_core gdn_core(const qwen35_config *c, const qwen35_layer *y) {
    sp_gdn_shape shape = {c->linear_num_key_heads, c->linear_num_value_heads, c->linear_key_head_dim, c->linear_value_head_dim,
                          y->A, y->dt_bias};
    return (sp_gdn_core){shape, y->conv1d, c->linear_conv_kernel_dim, y->gdn_norm, c->rms_norm_eps};
}

/* Gated DeltaNet (HF Qwen3_5GatedDeltaNet), xb → s->out:
 *   qkv = silu(conv1d(in_proj_qkv(x)));  z = in_proj_z(x);  b = in_proj_b(x);  a = in_proj_a(x)
 *   o = delta rule(q, k, v, g(a), β(b)) per v head;  out = out_proj(rmsnorm_gated(o, z)) */
static void gated_deltanet(sp_qwen35 *m, const qwen35_layer *y, int32_t l, const sp_seq_memory *mem,
                           const step_rows *r) {
    const sp_backend *be = m->be;
    const qwen35_config *c = &m->cfg;
    qwen35_scratch *s = &m->s;
    int64_t T = r->n;
    sp_gdn_core core = gdn_core(c, y);
    be->matmul(be, s->qkv, &y->in_proj_qkv, s->xb, T);
    be->matmul(be, s->z, &y->in_proj_z, s->xb, T);
    be->matmul(be, s->b, &y->in_proj_b, s->xb, T);
    be->matmul(be, s->a, &y->in_proj_a, s->xb, T);
    int64_t kept_row = 0, state = layer_state_floats(c);
    int32_t verifying = 0;
    for (int32_t i = 0; i < r->n_seqs; i++) {
        const splash_seq *q = &r->seqs[i];
        float *S = mem->state + (int64_t)q->slot * slot_floats(c) + y->index * state;
        if (r->sp && r->sp->verify && r->sp->verify[i]) { /* speculative: see keep_verify_inputs */
            float *copy = m->state_copy + verifying++ * state;
            keep_verify_inputs(m, y, r->row0[i], q->n_tokens, kept_row, S, copy);
            kept_row += q->n_tokens;
            S = copy;
        }
        r->gdn[i] = (sp_gdn_seq){r->row0[i], q->n_tokens, S, S + gdn_state_floats(c)};
    }
    be->gdn_core(be, s->o, s->qkv_conv, s->qkv, s->z, s->a, s->b, &core, r->gdn, r->n_seqs);
    TRACE(m, "gdn_core", l, s->o, T, (int64_t)c->linear_num_value_heads * c->linear_value_head_dim);
    be->matmul(be, s->out, &y->out_proj, s->o, T);
}

/* Whether sequence i of the step is a verify block (its logits go to the speculative request's buffer). */
static bool verifying(const step_rows *r, int32_t i) {
    return r->sp && r->sp->verify && r->sp->verify[i];
}

/* Rows that need logits: a verify block's every row, else each sequence's last n_logits rows, or its last row when
 * it samples. */
static int64_t logit_rows(const step_rows *r, int32_t i) {
    const splash_seq *q = &r->seqs[i];
    return verifying(r, i) ? q->n_tokens : q->n_logits > 0 ? q->n_logits : q->sample ? 1 : 0;
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
        int64_t k = logit_rows(r, i), first = r->row0[i] + q->n_tokens - k;
        be->copy_rows(be, s->hn + R * H, H, s->x + first * H, H, k, H);
        R += k;
    }
    be->rmsnorm(be, s->hn, s->hn, m->w.norm, R, H, c->rms_norm_eps);
    TRACE(m, "final_norm", -1, s->hn, R, H);
    /* walk the rows in blocks, remembering which sequence and which of its logit rows each one is */
    int32_t seq = 0;
    int64_t within = 0, verify_row = 0;
    for (int64_t b0 = 0; b0 < R; b0 += LOGIT_ROWS) {
        int64_t nb = R - b0 < LOGIT_ROWS ? R - b0 : LOGIT_ROWS;
        be->matmul(be, s->logits, &m->w.lm_head, s->hn + b0 * H, nb);
        TRACE(m, "logits", -1, s->logits, nb, V);
        splash_seq *job_seq[LOGIT_ROWS];
        int32_t n_jobs = 0;
        for (int64_t j = 0; j < nb; j++) {
            while (logit_rows(r, seq) == 0) seq++;
            splash_seq *q = &r->seqs[seq];
            const float *row = s->logits + j * V;
            bool verify = verifying(r, seq);
            if (verify) be->copy_rows(be, r->sp->logits + verify_row++ * V, V, row, V, 1, V);
            else if (q->logits && q->n_logits > 0) be->read(be, q->logits + within * V, row, sizeof(float) * (uint64_t)V);
            if (++within < logit_rows(r, seq)) continue;
            if (q->sample && !verify) {
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
static void keep_taps(sp_qwen35 *m, const sp_qwen35_speculate *sp, int32_t l, int64_t T) {
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

splash_status sp_qwen35_step(sp_qwen35 *m, const sp_seq_memory *mem, splash_seq *seqs, int32_t n_seqs) {
    return sp_qwen35_step_speculate(m, mem, seqs, n_seqs, NULL);
}

splash_status sp_qwen35_step_speculate(sp_qwen35 *m, const sp_seq_memory *mem, splash_seq *seqs, int32_t n_seqs,
                                       const sp_qwen35_speculate *sp) {
    const sp_backend *be = m->be;
    const qwen35_config *c = &m->cfg;
    qwen35_scratch *s = &m->s;
    step_rows *r = malloc(sizeof *r + (sizeof(int64_t) + sizeof(sp_gdn_seq) + sizeof(sp_attn_seq)) * (size_t)n_seqs);
    if (!r) return SP_FAIL(SPLASH_ERR_OUT_OF_MEMORY, "out of memory");
    r->gdn = (sp_gdn_seq *)(r->row0 + n_seqs);
    r->attn = (sp_attn_seq *)(r->gdn + n_seqs);
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
    r->mrope = false;
    r->sp = sp;
    for (int32_t i = 0; i < n_seqs; i++) r->mrope |= seqs[i].positions != NULL;
    for (int32_t i = 0; i < n_seqs; i++) {
        const splash_seq *q = &seqs[i];
        r->row0[i] = r->n;
        for (int32_t j = 0; j < q->n_tokens; j++) {
            tokens[r->n] = q->tokens[j];
            if (!r->mrope) pos[r->n] = q->n_past + j;
            else for (int32_t k = 0; k < 3; k++) pos[3 * r->n + k] = q->positions ? q->positions[3 * j + k] : q->n_past + j;
            r->n++;
        }
        /* a sequence at position 0 starts from a zero recurrent state and an empty conv tail */
        if (q->n_past == 0) be->clear(be, mem->state + (int64_t)q->slot * slot_floats(c), sizeof(float) * (uint64_t)slot_floats(c));
    }
    be->write(be, s->tokens, tokens, sizeof(int32_t) * (uint64_t)r->n);
    be->write(be, s->pos, pos, sizeof(int32_t) * (uint64_t)r->n * (r->mrope ? 3 : 1));
    free(tokens);
    int64_t T = r->n, H = c->hidden_size, verify_rows = 0;
    for (int32_t i = 0; sp && sp->verify && i < n_seqs; i++) verify_rows += sp->verify[i] ? seqs[i].n_tokens : 0;
    if (verify_rows > m->verify_rows) {
        free(r);
        return SP_FAIL(SPLASH_ERR_INVALID_ARGUMENT, "%lld verify rows in one step, more than the %d reserved",
                       (long long)verify_rows, m->verify_rows);
    }
    be->embed(be, s->x, &m->w.embed, s->tokens, T);
    image_rows(m, r);
    TRACE(m, "embed", -1, s->x, T, H);
    /* each residual add runs with the norm after it (add_rmsnorm): the next layer's input norm, the post norm */
    be->rmsnorm(be, s->xb, s->x, m->w.layers[0].input_norm, T, H, c->rms_norm_eps);
    const sp_ffn_shape ffn = qwen35_ffn_shape(c);
    for (int32_t l = 0; l < c->num_hidden_layers; l++) {
        const qwen35_layer *y = &m->w.layers[l];
        if (y->kind == LAYER_FULL_ATTENTION) full_attention(m, y, l, mem, r);
        else gated_deltanet(m, y, l, mem, r);
        TRACE(m, "mixer_out", l, s->out, T, H);
        be->add_rmsnorm(be, s->xb, s->x, s->out, y->post_norm, T, H, c->rms_norm_eps);
        sp_ffn_forward(be, &ffn, &y->ffn, &s->ffn, s->out, s->xb, T);
        TRACE(m, "ffn_out", l, s->out, T, H);
        if (l + 1 < c->num_hidden_layers) be->add_rmsnorm(be, s->xb, s->x, s->out, m->w.layers[l + 1].input_norm, T, H, c->rms_norm_eps);
        else be->add(be, s->x, s->out, T * H);
        TRACE(m, "layer_out", l, s->x, T, H);
        if (sp && sp->n_taps) keep_taps(m, sp, l, T);
    }
    if (sp && sp->normed) be->rmsnorm(be, sp->normed, s->x, m->w.norm, T, H, c->rms_norm_eps);
    splash_status st = *be->status ? *be->status : logits_and_samples(m, r);
    free(r);
    return st ? st : *be->status;
}

splash_status sp_qwen35_reserve_verify(sp_qwen35 *m, int32_t rows, int32_t blocks, uint64_t *bytes) {
    const qwen35_config *c = &m->cfg;
    if (m->kept) m->be->free(m->be, m->kept);
    if (m->state_copy) m->be->free(m->be, m->state_copy);
    m->kept = m->state_copy = NULL;
    m->verify_rows = 0;
    uint64_t kept = sizeof(float) * (uint64_t)c->n_linear * (uint64_t)rows * (uint64_t)kept_width(c);
    uint64_t copy = sizeof(float) * (uint64_t)blocks *
                    (uint64_t)layer_state_floats(c);
    m->kept = m->be->alloc(m->be, kept ? kept : 64);
    m->state_copy = m->be->alloc(m->be, copy);
    if (!m->kept || !m->state_copy)
        return SP_FAIL(SPLASH_ERR_OUT_OF_MEMORY, "out of memory for %llu bytes of verify-block inputs and states",
                       (unsigned long long)(kept + copy));
    m->verify_rows = rows;
    *bytes = kept + copy;
    return SPLASH_OK;
}

void sp_qwen35_commit(sp_qwen35 *m, const sp_seq_memory *mem, const sp_qwen35_commit_block *blocks, int32_t n) {
    const sp_backend *be = m->be;
    const qwen35_config *c = &m->cfg;
    qwen35_scratch *s = &m->s;
    int64_t C = c->conv_dim, Hv = c->linear_num_value_heads, w = kept_width(c);
    int64_t state = layer_state_floats(c), rows = 0;
    sp_gdn_seq seqs[n > 0 ? n : 1];
    for (int32_t i = 0; i < n; i++)
        if (blocks[i].kept_row + blocks[i].n_keep > rows) rows = blocks[i].kept_row + blocks[i].n_keep;
    for (int32_t l = 0; l < c->num_hidden_layers; l++) {
        const qwen35_layer *y = &m->w.layers[l];
        if (y->kind != LAYER_LINEAR_ATTENTION) continue;
        sp_gdn_core core = gdn_core(c, y);
        int32_t k = 0;
        for (int32_t i = 0; i < n; i++) {
            if (blocks[i].n_keep <= 0) continue;
            float *S = mem->state + (int64_t)blocks[i].slot * slot_floats(c) + y->index * state;
            seqs[k++] = (sp_gdn_seq){blocks[i].kept_row, blocks[i].n_keep, S, S + gdn_state_floats(c)};
        }
        /* the same ops on the same rows as the step: the kept rows split back into qkv, a, b (at their kept row) */
        const float *kept = kept_rows(m, y->index, 0);
        be->copy_rows(be, s->qkv, C, kept, w, rows, C);
        be->copy_rows(be, s->a, Hv, kept + C, w, rows, Hv);
        be->copy_rows(be, s->b, Hv, kept + C + Hv, w, rows, Hv);
        be->gdn_core(be, s->o, s->qkv_conv, s->qkv, NULL, s->a, s->b, &core, seqs, k);
    }
}

void sp_qwen35_set_trace(sp_qwen35 *m, sp_trace_fn fn, void *ctx) {
    m->trace = fn;
    m->trace_ctx = ctx;
}
