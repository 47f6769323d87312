/* step.c — splash_step: checks everything a step names (slots, pages, tokens, sampling settings, output buffers)
 * before the forward pass writes anything, then runs it. A sequence whose sample cannot be taken (its settings, its
 * buffers, a mask that leaves no token) is refused alone: one bad request never fails the others of its batch. */
#include "model.h"

#include "core/error.h"
#include "core/mask.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

splash_status sp_api_check_sampling(const splash_model *m, int32_t i, const splash_sampling *s) {
    if (!(s->temperature >= 0 && isfinite(s->temperature)))
        return SP_FAIL(SPLASH_ERR_INVALID_ARGUMENT, "seqs[%d].sampling.temperature %g: expected a finite value ≥ 0", i, s->temperature);
    if (!(s->top_p >= 0 && s->top_p <= 1))
        return SP_FAIL(SPLASH_ERR_INVALID_ARGUMENT, "seqs[%d].sampling.top_p %g: expected [0, 1]", i, s->top_p);
    if (s->top_k < 0) return SP_FAIL(SPLASH_ERR_INVALID_ARGUMENT, "seqs[%d].sampling.top_k %d: expected ≥ 0", i, s->top_k);
    if (!(s->min_p >= 0 && s->min_p <= 1))
        return SP_FAIL(SPLASH_ERR_INVALID_ARGUMENT, "seqs[%d].sampling.min_p %g: expected [0, 1]", i, s->min_p);
    if (!(s->repetition_penalty > 0 && isfinite(s->repetition_penalty)))
        return SP_FAIL(SPLASH_ERR_INVALID_ARGUMENT, "seqs[%d].sampling.repetition_penalty %g: expected > 0 (1 = off)", i,
                       s->repetition_penalty);
    if (!isfinite(s->presence_penalty) || !isfinite(s->frequency_penalty))
        return SP_FAIL(SPLASH_ERR_INVALID_ARGUMENT, "seqs[%d].sampling: presence and frequency penalties must be finite", i);
    if (s->n_bias < 0 || (s->n_bias > 0 && (!s->bias_ids || !s->bias)))
        return SP_FAIL(SPLASH_ERR_INVALID_ARGUMENT, "seqs[%d].sampling.n_bias %d: expected ≥ 0 with bias_ids and bias", i, s->n_bias);
    int32_t n_tokens;
    const uint32_t *tokens;
    sp_qwen35_tokens(m->arch, &n_tokens, &tokens);
    for (int32_t k = 0; k < s->n_bias; k++) {
        int32_t t = s->bias_ids[k];
        if (t < 0 || t >= n_tokens || (tokens && !((tokens[t >> 5] >> (t & 31)) & 1)))
            return SP_FAIL(SPLASH_ERR_INVALID_ARGUMENT, "seqs[%d].sampling.bias_ids[%d] = %d is not a token of the model", i, k, t);
        if (!isfinite(s->bias[k]))
            return SP_FAIL(SPLASH_ERR_INVALID_ARGUMENT, "seqs[%d].sampling.bias[%d] %g: expected a finite value", i, k, s->bias[k]);
    }
    return SPLASH_OK;
}

static splash_status check_seq(const splash_cache *c, int32_t vocab, int32_t n_full, int32_t i, const splash_seq *q) {
    if (q->slot < 0 || q->slot >= c->n_slots)
        return SP_FAIL(SPLASH_ERR_CAPACITY, "seqs[%d].slot %d is outside the cache (0..%d)", i, q->slot, c->n_slots - 1);
    if (q->n_past < 0 || q->n_tokens < 1 || q->n_past > INT32_MAX - q->n_tokens)
        return SP_FAIL(SPLASH_ERR_INVALID_ARGUMENT, "seqs[%d]: n_past %d (≥ 0), n_tokens %d (≥ 1)", i, q->n_past, q->n_tokens);
    if (q->n_logits < 0 || q->n_logits > q->n_tokens)
        return SP_FAIL(SPLASH_ERR_INVALID_ARGUMENT, "seqs[%d].n_logits %d: expected 0..n_tokens (%d)", i, q->n_logits, q->n_tokens);
    if (q->sample != 0 && q->sample != 1)
        return SP_FAIL(SPLASH_ERR_INVALID_ARGUMENT, "seqs[%d].sample %d: expected 0 or 1", i, q->sample);
    if (!q->tokens) return SP_FAIL(SPLASH_ERR_INVALID_ARGUMENT, "seqs[%d].tokens is NULL", i);
    for (int32_t j = 0; j < q->n_tokens; j++)
        if (q->tokens[j] < 0 || q->tokens[j] >= vocab)
            return SP_FAIL(SPLASH_ERR_INVALID_ARGUMENT, "seqs[%d].tokens[%d] = %d is outside the vocabulary (0..%d)", i, j,
                           q->tokens[j], vocab - 1);
    if (n_full > 0) {
        int64_t need = ((int64_t)q->n_past + q->n_tokens + c->page_tokens - 1) / c->page_tokens;
        if (!q->pages || q->n_pages < need)
            return SP_FAIL(SPLASH_ERR_INVALID_ARGUMENT, "seqs[%d]: %d positions need %lld pages of %d tokens, the page table has %d",
                           i, q->n_past + q->n_tokens, (long long)need, c->page_tokens, q->pages ? q->n_pages : 0);
        for (int64_t p = 0; p < need; p++)
            if (q->pages[p] < 0 || q->pages[p] >= c->n_pages)
                return SP_FAIL(SPLASH_ERR_CAPACITY, "seqs[%d].pages[%lld] = %d is outside the cache (0..%d)", i, (long long)p,
                               q->pages[p], c->n_pages - 1);
    }
    return SPLASH_OK;
}

/* What sequence i's sample needs; a failure refuses this sequence alone (refuse). */
static splash_status check_sample(const splash_model *m, int32_t i, const splash_seq *q) {
    const splash_speculate *v = q->speculate && q->speculate->n_proposed > 0 ? q->speculate : NULL;
    splash_status st = sp_api_check_sampling(m, i, &q->sampling);
    if (st) return st;
    if (q->n_penalty_tokens < 0 || (q->n_penalty_tokens > 0 && !q->penalty_tokens))
        return SP_FAIL(SPLASH_ERR_INVALID_ARGUMENT, "seqs[%d]: n_penalty_tokens %d without penalty_tokens", i, q->n_penalty_tokens);
    if (q->n_top_logprobs < 0 || q->n_top_logprobs > SPLASH_MAX_TOP_LOGPROBS ||
        (q->n_top_logprobs > 0 && (!q->top_ids || !q->top_logprobs)))
        return SP_FAIL(SPLASH_ERR_INVALID_ARGUMENT, "seqs[%d].n_top_logprobs %d: expected 0..%d with top_ids and top_logprobs",
                       i, q->n_top_logprobs, SPLASH_MAX_TOP_LOGPROBS);
    int32_t n_tokens;
    const uint32_t *tokens;
    sp_qwen35_tokens(m->arch, &n_tokens, &tokens);
    if (q->allowed && !sp_mask_any(n_tokens, q->allowed, tokens))
        return SP_FAIL(SPLASH_ERR_INVALID_ARGUMENT, "seqs[%d].allowed allows none of the model's tokens", i);
    if (v && v->allowed) {
        splash_model_info info = {.struct_size = sizeof info};
        sp_qwen35_info(m->arch, &info);
        int64_t words = (info.vocab_size + 31) / 32;
        for (int32_t r = 0; r <= v->n_draft; r++)
            if (!sp_mask_any(n_tokens, v->allowed + r * words, tokens))
                return SP_FAIL(SPLASH_ERR_INVALID_ARGUMENT, "seqs[%d].speculate.allowed[%d] allows none of the model's tokens", i, r);
    }
    return SPLASH_OK;
}

/* The per-sequence checks of what a step samples (settings, buffers, masks, a verify block's masks): a sequence that
 * fails them is refused alone — seqs[i].error says why, refused[i] = 1, and its sample flag is cleared so the step
 * only computes its positions (and drafts nothing). end_refusals restores the flags and writes token −1 for each
 * refused sequence after the step. */
static splash_status refuse(splash_model *m, splash_cache *c, splash_seq *seqs, int32_t n_seqs, uint8_t *refused) {
    if (c->n_refusals < n_seqs) {
        char (*more)[SP_REFUSAL_BYTES] = realloc(c->refusals, sizeof *more * (size_t)n_seqs);
        if (!more) return SP_FAIL(SPLASH_ERR_OUT_OF_MEMORY, "out of memory");
        c->refusals = more, c->n_refusals = n_seqs;
    }
    for (int32_t i = 0; i < n_seqs; i++) {
        splash_seq *q = &seqs[i];
        q->error = NULL;
        refused[i] = q->sample && check_sample(m, i, q) != SPLASH_OK;
        if (!refused[i]) continue;
        snprintf(c->refusals[i], SP_REFUSAL_BYTES, "%s", splash_last_error());
        q->error = c->refusals[i];
        q->sample = 0;
    }
    return SPLASH_OK;
}

static void end_refusals(splash_seq *seqs, int32_t n_seqs, const uint8_t *refused) {
    for (int32_t i = 0; i < n_seqs; i++)
        if (refused[i]) seqs[i].sample = 1, seqs[i].token = -1, seqs[i].logprob = NAN;
}

/* Image rows: embeds replace exactly the image-pad tokens of the step (the tower's image_token_id); positions are
 * the caller's M-RoPE ids, any non-negative values. */
static splash_status check_images(const splash_model *m, int32_t i, const splash_seq *q) {
    if (q->positions)
        for (int32_t j = 0; j < 3 * q->n_tokens; j++)
            if (q->positions[j] < 0)
                return SP_FAIL(SPLASH_ERR_INVALID_ARGUMENT, "seqs[%d].positions[%d][%d] = %d: expected ≥ 0", i, j / 3, j % 3,
                               q->positions[j]);
    if (!q->embeds && !q->n_embeds) return SPLASH_OK;
    if (!m->vision) return SP_FAIL(SPLASH_ERR_INVALID_ARGUMENT, "seqs[%d].embeds: this checkpoint has no vision tower", i);
    splash_vision_info info = {.struct_size = sizeof info};
    splash_vision_get_info(m, &info);
    int32_t pads = 0;
    for (int32_t j = 0; j < q->n_tokens; j++) pads += q->tokens[j] == info.image_token_id;
    if (!q->embeds || q->n_embeds != pads)
        return SP_FAIL(SPLASH_ERR_INVALID_ARGUMENT, "seqs[%d]: n_embeds %d with%s embeds, but tokens[] holds %d image-pad "
                       "tokens (%d)", i, q->n_embeds, q->embeds ? "" : "out", pads, info.image_token_id);
    return SPLASH_OK;
}

static splash_status check_step(splash_model *m, splash_cache *c, const splash_seq *seqs, int32_t n_seqs) {
    if (!m || !c || !seqs || n_seqs < 1)
        return SP_FAIL(SPLASH_ERR_INVALID_ARGUMENT, "splash_step: model, cache and at least one sequence are required");
    if (c->m != m) return SP_FAIL(SPLASH_ERR_INVALID_ARGUMENT, "splash_step: the cache belongs to another model");
    splash_model_info info = {.struct_size = sizeof info};
    sp_qwen35_info(m->arch, &info);
    int64_t total = 0;
    for (int32_t i = 0; i < n_seqs; i++) {
        splash_status st = check_seq(c, info.vocab_size, info.n_full_attention_layers, i, &seqs[i]);
        if (!st) st = check_images(m, i, &seqs[i]);
        if (st) return st;
        total += seqs[i].n_tokens;
        for (int32_t j = 0; j < i; j++)
            if (seqs[j].slot == seqs[i].slot)
                return SP_FAIL(SPLASH_ERR_INVALID_ARGUMENT, "seqs[%d] and seqs[%d] both use slot %d", j, i, seqs[i].slot);
    }
    if (total > info.max_step_tokens)
        return SP_FAIL(SPLASH_ERR_INVALID_ARGUMENT, "splash_step: %lld tokens, more than max_step_tokens (%d) of this model",
                       (long long)total, info.max_step_tokens);
    return SPLASH_OK;
}

splash_status splash_step(splash_model *m, splash_cache *c, splash_seq *seqs, int32_t n_seqs) {
    splash_status st = check_step(m, c, seqs, n_seqs);
    if (st) return st;
    uint8_t refused[n_seqs];
    pthread_mutex_lock(&m->lock);
    /* the speculative checks read the drafts of the last step, kept in the model */
    if (!(st = sp_speculator_check(m, c, seqs, n_seqs)) && !(st = refuse(m, c, seqs, n_seqs, refused))) {
        sp_seq_memory mem = sp_cache_memory(c);
        /* with a drafter: verify, accept, ingest what the step commits, draft (speculate.c) */
        st = m->speculator ? sp_speculator_step(m, c, seqs, n_seqs) : sp_qwen35_step(m->arch, &mem, seqs, n_seqs);
        end_refusals(seqs, n_seqs, refused);
    }
    pthread_mutex_unlock(&m->lock);
    return st;
}
