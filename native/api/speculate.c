/* speculate.c — speculative decoding's ABI (splash.h): attach a drafter; inside splash_step, verify, accept and draft.
 *
 * One cycle of a sequence whose last sampled token t sits at position n (not yet in the cache), all in one step:
 *
 *   verify   the target runs [t, d1 … dk] at n … n + k (the drafts its previous step proposed, cut by the caller's
 *            grammar) in the same pass as the step's other sequences, writing logits for every block row here (never
 *            to the caller: 248K floats a row); draft/accept.c decides per row (greedy: target argmax == draft; else
 *            rejection sampling against the q kept when they were drafted) and sp_qwen35_commit replays the accepted
 *            rows into the GDN state, which the block left untouched
 *   ingest   the drafter takes in every committed position of every sequence of the step
 *   draft    from the token the step sampled, t' at n + a + 1, the drafter proposes the next block (MTP: k chained
 *            steps; DFlash: one block [t', mask × (B − 1)]; DFlash2: the same block, then its selector's walk over
 *            each row's candidates); at temperature > 0 each draft is drawn from q, kept here for the next step
 *
 * Attention K/V of rejected positions and of drafts stays in the pages past the sequence's end, where later steps
 * overwrite it; the caller names a page for its prefix cache only once all its positions are committed, so a shared
 * page never holds a rejected position. */
#include "model.h"

#include "arch/dflash.h"
#include "arch/draft.h"
#include "arch/mtp.h"
#include "core/checkpoint.h"
#include "core/error.h"
#include "draft/accept.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

/* Speculation pays less the more sequences share a step (their rows already amortize the weight reads), so by
 * default at most 8 verify per step: the verify buffers are sized for it (Qwen3.8-27B: ~0.5 GB with 16-token blocks). */
enum { DEFAULT_MAX_SEQS = 8 };

/* The drafters by splash_drafter_options.kind, and whether one is a checkpoint of its own (splash_drafter_options.dir). */
static const struct {
    int32_t kind;
    sp_drafter_load load;
    bool own_checkpoint;
} DRAFTERS[] = {{SPLASH_DRAFT_MTP, sp_mtp_load, false}, {SPLASH_DRAFT_DFLASH, sp_dflash_load, true},
                {SPLASH_DRAFT_DFLASH2, sp_dflash2_load, true}};

/* What the last step drafted for one sequence: its anchor's slot and position, and whether q rows were kept. */
typedef struct drafted {
    int32_t slot, n_past, n_draft;
    int32_t sampled;            /* temperature > 0: q rows were kept */
} drafted;

/* One sequence to draft for after the step: its sampled token (the anchor) at position n_past. */
typedef struct draft_job {
    int32_t slot, n_past, anchor, n_draft;
    const int32_t *pages;
    const splash_sampling *sampling;
    const int32_t *penalty;     /* the generated tokens and the ones the step emitted */
    int32_t n_penalty;
    int32_t *tokens;            /* out [n_draft] */
    float *logits, *probs;      /* NULL or out [n_draft][vocab] */
} draft_job;

struct sp_speculator {
    int32_t kind, max_draft, max_seqs, verify_rows;
    int32_t vocab;              /* the output head's rows: the stride of every logits row here */
    int32_t n_tokens;           /* the ids a draft or an accepted token may be (the rest of a row is padding) … */
    const uint32_t *tokens;     /* … of which those set here (NULL: all): the target's sp_qwen35_tokens */
    sp_drafter *d;
    int64_t row_width;          /* floats per step row handed to the drafter: its taps, or the normed hidden */
    const sp_backend *be;
    /* buffers: rows and logits in backend memory, the rest host memory (picks and sampled acceptance run there) */
    float *rows;                /* (max_step_tokens, row_width) */
    float *logits;              /* (verify_rows, vocab): verify blocks' logits, backend memory */
    float *host_logits;         /* (max_draft + 1, vocab): one block's, read back to sample at temperature > 0 */
    float *q;                   /* (max_seqs, max_draft, vocab): draft distributions at temperature > 0 */
    float *z, *p;               /* (vocab) one row after penalties and mask; its sampling distribution */
    void *dist_scratch;
    sp_sample_job *jobs;        /* (max_draft + 1): a greedy block's rows through the backend's sampler */
    void *sample_scratch;       /* n_threads × sp_sample_scratch_bytes(vocab) */
    int32_t *top_ids;           /* (max_draft + 1, SPLASH_MAX_TOP_LOGPROBS) when the caller wants only the last row's */
    float *top_logprobs;
    drafted *last;              /* (max_seqs): the last step's drafts, by sequence … */
    int32_t *last_tokens;       /* (max_seqs, max_draft) … and their tokens; q holds their distributions */
    int32_t n_last;
    uint64_t weight_bytes, scratch_bytes;
};

/* ---- sizes (the cache and the memory plan use these) ------------------------------------------------------------ */

uint64_t sp_speculator_page_bytes(const sp_speculator *s, int32_t page_tokens, int32_t kv_type) {
    return s->d->ops->page_bytes(s->d, page_tokens, kv_type);
}

uint64_t sp_speculator_slot_bytes(const sp_speculator *s) { return s->d->ops->slot_bytes(s->d); }

void sp_speculator_add_info(const sp_speculator *s, splash_model_info *info) {
    info->weight_bytes += s->weight_bytes;
    info->scratch_bytes += s->scratch_bytes;
}

void sp_speculator_free(sp_speculator *s) {
    if (!s) return;
    if (s->d) s->d->ops->free(s->d);
    if (s->rows) s->be->free(s->be, s->rows);
    if (s->logits) s->be->free(s->be, s->logits);
    free(s->host_logits);
    free(s->q);
    free(s->z);
    free(s->p);
    free(s->dist_scratch);
    free(s->jobs);
    free(s->sample_scratch);
    free(s->top_ids);
    free(s->top_logprobs);
    free(s->last);
    free(s->last_tokens);
    free(s);
}

/* ---- attach --------------------------------------------------------------------------------------------------- */

static splash_status buffers(sp_speculator *s, int32_t max_step_tokens) {
    const sp_backend *be = s->be;
    uint64_t V = (uint64_t)s->vocab;
    uint64_t rows = sizeof(float) * (uint64_t)max_step_tokens * (uint64_t)s->row_width;
    uint64_t logits = sizeof(float) * (uint64_t)s->verify_rows * V;
    uint64_t q = sizeof(float) * (uint64_t)s->max_seqs * (uint64_t)s->max_draft * V;
    s->rows = be->alloc(be, rows);
    s->logits = be->alloc(be, logits);
    s->host_logits = malloc(sizeof(float) * ((size_t)s->max_draft + 1) * V);
    s->q = malloc(q);
    s->z = malloc(sizeof(float) * V);
    s->p = malloc(sizeof(float) * V);
    s->dist_scratch = malloc(sp_accept_dist_scratch(s->vocab));
    s->jobs = calloc((size_t)s->max_draft + 1, sizeof(sp_sample_job));
    uint64_t sample = (uint64_t)be->n_threads * sp_sample_scratch_bytes(s->vocab);
    s->sample_scratch = malloc(sample);
    s->top_ids = malloc(sizeof(int32_t) * ((size_t)s->max_draft + 1) * SPLASH_MAX_TOP_LOGPROBS);
    s->top_logprobs = malloc(sizeof(float) * ((size_t)s->max_draft + 1) * SPLASH_MAX_TOP_LOGPROBS);
    s->last = calloc((size_t)s->max_seqs, sizeof(drafted));
    s->last_tokens = calloc((size_t)s->max_seqs * (size_t)s->max_draft, sizeof(int32_t));
    if (!s->rows || !s->logits || !s->host_logits || !s->q || !s->z || !s->p || !s->dist_scratch || !s->jobs || !s->sample_scratch ||
        !s->top_ids || !s->top_logprobs || !s->last || !s->last_tokens)
        return SP_FAIL(SPLASH_ERR_OUT_OF_MEMORY, "out of memory for the speculative buffers");
    s->scratch_bytes += rows + logits + q + sizeof(float) * ((uint64_t)s->max_draft + 3) * V + sp_accept_dist_scratch(s->vocab) +
                        sample;
    return SPLASH_OK;
}

splash_status splash_model_attach_drafter(splash_model *m, const splash_drafter_options *opts) {
    if (!m || !opts) return SP_FAIL(SPLASH_ERR_INVALID_ARGUMENT, "splash_model_attach_drafter: NULL argument");
    if (opts->struct_size < sizeof *opts)
        return SP_FAIL(SPLASH_ERR_INVALID_ARGUMENT, "splash_drafter_options.struct_size %u < %zu: rebuild the binding",
                       opts->struct_size, sizeof *opts);
    sp_drafter_load load = NULL;
    bool own_checkpoint = false;
    for (size_t i = 0; i < sizeof DRAFTERS / sizeof *DRAFTERS; i++)
        if (DRAFTERS[i].kind == opts->kind) load = DRAFTERS[i].load, own_checkpoint = DRAFTERS[i].own_checkpoint;
    if (!load) return SP_FAIL(SPLASH_ERR_INVALID_ARGUMENT, "drafter kind %d: expected 1 (mtp), 2 (dflash) or 3 (dflash2)", opts->kind);
    if (m->speculator) return SP_FAIL(SPLASH_ERR_INVALID_ARGUMENT, "the model has a drafter already");
    if (m->n_caches) return SP_FAIL(SPLASH_ERR_INVALID_ARGUMENT, "attach the drafter before creating a cache (page sizes change)");
    if (!m->be.attention_ext)
        return SP_FAIL(SPLASH_ERR_UNSUPPORTED, "the %s backend has no attention_ext op: drafters cannot run on it", m->be.name);
    if (opts->max_draft < 0 || opts->max_draft > 64 || opts->max_seqs < 0 || opts->max_seqs > 1024)
        return SP_FAIL(SPLASH_ERR_INVALID_ARGUMENT, "max_draft %d (0..64), max_seqs %d (0..1024)", opts->max_draft, opts->max_seqs);
    sp_draft_target t;
    sp_qwen35_draft_target(m->arch, &t);
    sp_speculator *s = calloc(1, sizeof *s);
    if (!s) return SP_FAIL(SPLASH_ERR_OUT_OF_MEMORY, "out of memory");
    *s = (sp_speculator){.kind = opts->kind, .max_seqs = opts->max_seqs ? opts->max_seqs : DEFAULT_MAX_SEQS,
                         .vocab = t.vocab_size, .n_tokens = t.n_tokens, .tokens = t.token_mask, .be = &m->be};
    sp_checkpoint *ck = NULL;
    splash_status st = own_checkpoint && opts->dir ? sp_checkpoint_open(opts->dir, &ck) : SPLASH_OK;
    if (!st) st = load(&t, ck, opts->max_draft, s->max_seqs, &s->d); /* the drafter owns ck from here */
    if (!st) {
        s->max_draft = s->d->max_draft;
        s->row_width = (int64_t)(s->d->n_taps ? s->d->n_taps : 1) * t.hidden_size;
        s->weight_bytes = s->d->weight_bytes, s->scratch_bytes = s->d->scratch_bytes;
    }
    uint64_t kept = 0;
    s->verify_rows = s->max_seqs * (s->max_draft + 1);
    if (!st) st = sp_qwen35_reserve_verify(m->arch, s->verify_rows, s->max_seqs, &kept);
    s->scratch_bytes += kept;
    if (!st) st = buffers(s, t.max_step_tokens);
    if (st) {
        sp_speculator_free(s);
        return st;
    }
    m->speculator = s;
    return SPLASH_OK;
}

splash_status splash_model_get_drafter_info(const splash_model *m, splash_drafter_info *out) {
    if (!m || !out) return SP_FAIL(SPLASH_ERR_INVALID_ARGUMENT, "splash_model_get_drafter_info: NULL argument");
    if (out->struct_size < sizeof *out)
        return SP_FAIL(SPLASH_ERR_INVALID_ARGUMENT, "splash_drafter_info.struct_size %u < %zu: rebuild the binding",
                       out->struct_size, sizeof *out);
    const sp_speculator *s = m->speculator;
    *out = (splash_drafter_info){.struct_size = sizeof *out, .kind = SPLASH_DRAFT_NONE, .mask_token_id = -1};
    if (!s) return SPLASH_OK;
    out->kind = s->kind;
    out->max_draft = s->max_draft;
    out->max_seqs = s->max_seqs;
    out->block_size = s->d->block_size;
    out->mask_token_id = s->d->mask_token_id;
    out->weight_bytes = s->weight_bytes;
    out->scratch_bytes = s->scratch_bytes;
    out->kv_bytes_per_token = sp_speculator_page_bytes(s, 1, m->kv_type);
    out->state_bytes = sp_speculator_slot_bytes(s);
    return SPLASH_OK;
}

/* ---- checks --------------------------------------------------------------------------------------------------- */

/* The entry of the last step's drafts for `slot`, or −1. */
static int32_t drafted_for(const sp_speculator *s, int32_t slot) {
    for (int32_t k = 0; k < s->n_last; k++)
        if (s->last[k].slot == slot) return k;
    return -1;
}

splash_status sp_speculator_check(const splash_model *m, const splash_cache *c, const splash_seq *seqs, int32_t n) {
    const sp_speculator *s = m->speculator;
    int64_t rows = 0;
    int32_t verifying = 0, drafting = 0;
    for (int32_t i = 0; i < n; i++) {
        const splash_seq *q = &seqs[i];
        const splash_speculate *v = q->speculate;
        if (!v) continue;
        if (!s) return SP_FAIL(SPLASH_ERR_INVALID_ARGUMENT, "seqs[%d].speculate: the model has no drafter", i);
        if ((v->n_proposed > 0 || v->n_next > 0) && !q->sample)
            return SP_FAIL(SPLASH_ERR_INVALID_ARGUMENT, "seqs[%d].speculate needs sample = 1", i);
        if (v->n_next < 0 || v->n_next > s->max_draft || (v->n_next > 0 && !v->next))
            return SP_FAIL(SPLASH_ERR_INVALID_ARGUMENT, "seqs[%d].speculate.n_next %d: expected 0..%d with `next`", i, v->n_next,
                           s->max_draft);
        if (v->n_next > 0) {
            drafting++;
            int64_t need = ((int64_t)q->n_past + q->n_tokens + v->n_next + c->page_tokens - 1) / c->page_tokens;
            if (q->n_pages < need)
                return SP_FAIL(SPLASH_ERR_INVALID_ARGUMENT, "seqs[%d]: %lld positions with the next drafts need %lld pages, the page "
                               "table has %d", i, (long long)q->n_past + q->n_tokens + v->n_next, (long long)need, q->n_pages);
            for (int64_t p = 0; p < need; p++)
                if (q->pages[p] < 0 || q->pages[p] >= c->n_pages)
                    return SP_FAIL(SPLASH_ERR_CAPACITY, "seqs[%d].pages[%lld] = %d is outside the cache (0..%d)", i, (long long)p,
                                   q->pages[p], c->n_pages - 1);
        }
        if (v->n_proposed == 0 && v->n_draft == 0) continue;
        if (v->n_draft < 0 || v->n_draft > s->max_draft || v->n_proposed < v->n_draft || v->n_proposed > v->n_draft + 1 ||
            v->n_proposed > s->max_draft || q->n_tokens != v->n_draft + 1)
            return SP_FAIL(SPLASH_ERR_INVALID_ARGUMENT, "seqs[%d].speculate: n_draft %d (0..%d), n_proposed %d (n_draft or one more) "
                           "need n_tokens = n_draft + 1 (got %d)", i, v->n_draft, s->max_draft, v->n_proposed, q->n_tokens);
        if (q->n_top_logprobs > 0 && (v->top_ids == NULL) != (v->top_logprobs == NULL))
            return SP_FAIL(SPLASH_ERR_INVALID_ARGUMENT, "seqs[%d].speculate: top_ids and top_logprobs go together", i);
        verifying++;
        rows += q->n_tokens;
        if (!(q->sampling.temperature > 0)) continue; /* greedy acceptance is exact for drafts from anywhere */
        int32_t k = drafted_for(s, q->slot);
        const drafted *d = k < 0 ? NULL : &s->last[k];
        if (!d || d->n_past != q->n_past || v->n_proposed > d->n_draft || !d->sampled)
            return SP_FAIL(SPLASH_ERR_INVALID_ARGUMENT, "seqs[%d]: the verify block (slot %d at %d, %d drafts, sampled) is not what "
                           "the sequence's previous step drafted", i, q->slot, q->n_past, v->n_proposed);
        for (int32_t j = 0; j < v->n_draft; j++)
            if (q->tokens[1 + j] != s->last_tokens[k * s->max_draft + j])
                return SP_FAIL(SPLASH_ERR_INVALID_ARGUMENT, "seqs[%d].tokens[%d] is not the drafted token", i, 1 + j);
    }
    if (s && (verifying > s->max_seqs || drafting > s->max_seqs || rows > s->verify_rows))
        return SP_FAIL(SPLASH_ERR_INVALID_ARGUMENT, "%d verify blocks of %lld rows and %d drafting sequences: at most %d sequences "
                       "and %d rows", verifying, (long long)rows, drafting, s->max_seqs, s->verify_rows);
    return SPLASH_OK;
}

/* ---- draft ---------------------------------------------------------------------------------------------------- */

typedef struct pick_ctx {
    sp_speculator *s;
    draft_job *jobs;
    int32_t *penalty;           /* room for the longest penalty list + max_draft */
} pick_ctx;

/* The penalty list of draft j of job i: the generated and emitted tokens, then the earlier drafts. */
static int32_t penalty_list(pick_ctx *c, const draft_job *d, int32_t j) {
    memcpy(c->penalty, d->penalty, sizeof(int32_t) * (size_t)d->n_penalty);
    memcpy(c->penalty + d->n_penalty, d->tokens, sizeof(int32_t) * (size_t)j);
    return d->n_penalty + j;
}

/* sp_draft_shape: the row after the sampler's penalties, bias and the model's tokens, −inf past them to the row's end. */
static const float *shape(void *ctx, int32_t i, int32_t j, const float *logits) {
    pick_ctx *c = ctx;
    sp_speculator *s = c->s;
    const draft_job *d = &c->jobs[i];
    sp_dist_row row = {logits, d->sampling, c->penalty, penalty_list(c, d, j), NULL, s->tokens};
    sp_accept_logits(&row, s->n_tokens, s->z, s->dist_scratch);
    for (int32_t t = s->n_tokens; t < s->vocab; t++) s->z[t] = -INFINITY;
    return s->z;
}

/* Draft j of job i, kept for the acceptance with the q it was drawn from. Without candidates: the argmax of the
 * biased row over the model's tokens, or a draw from q = the sampler's distribution of the drafter's row (penalties
 * over the generated tokens and the earlier drafts). With a selector's candidates (z-lab CandidateSelector.select):
 * the best-scored one, or a draw from q = softmax(scores / T) over them (zero elsewhere), the temperature alone
 * shaping it as in the reference. */
static int32_t pick(void *ctx, int32_t i, int32_t j, const sp_draft_choice *ch) {
    pick_ctx *c = ctx;
    sp_speculator *s = c->s;
    draft_job *d = &c->jobs[i];
    const splash_sampling *sm = d->sampling;
    int32_t V = s->vocab, N = s->n_tokens, token = -1;
    int sampled = sm->temperature > 0;
    float *q = s->q + ((int64_t)i * s->max_draft + j) * V;
    if (ch->n_cand > 0 && !sampled) {
        int32_t best = 0;
        for (int32_t k = 1; k < ch->n_cand; k++)
            if (ch->scores[k] > ch->scores[best]) best = k;
        token = ch->cand[best];
    } else if (ch->n_cand > 0) {
        float mx = ch->scores[0];
        for (int32_t k = 1; k < ch->n_cand; k++) mx = ch->scores[k] > mx ? ch->scores[k] : mx;
        double total = 0;
        for (int32_t k = 0; k < ch->n_cand; k++) total += exp(((double)ch->scores[k] - mx) / sm->temperature);
        memset(q, 0, sizeof(float) * (size_t)V);
        for (int32_t k = 0; k < ch->n_cand; k++) q[ch->cand[k]] = (float)(exp(((double)ch->scores[k] - mx) / sm->temperature) / total);
    } else if (!sampled) {
        const float *z = ch->logits;
        if (sm->n_bias > 0) { /* the argmax the target's greedy sampler takes: biased */
            memcpy(s->z, ch->logits, sizeof(float) * (size_t)N);
            for (int32_t k = 0; k < sm->n_bias; k++) s->z[sm->bias_ids[k]] += sm->bias[k];
            z = s->z;
        }
        for (int32_t t = 0; t < N; t++)
            if ((!s->tokens || ((s->tokens[t >> 5] >> (t & 31)) & 1)) && (token < 0 || z[t] > z[token])) token = t;
    } else {
        sp_dist_row row = {ch->logits, sm, c->penalty, penalty_list(c, d, j), NULL, s->tokens};
        int32_t arg;
        sp_accept_dist(&row, N, s->z, q, &arg, s->dist_scratch);
        for (int32_t t = N; t < V; t++) q[t] = 0;
    }
    if (sampled) token = sp_accept_draw(q, N, sp_accept_uniform(sm->seed, SP_STREAM_DRAFT, (uint64_t)d->n_past + 1 + j));
    d->tokens[j] = token;
    s->last_tokens[i * s->max_draft + j] = token;
    if (d->logits) memcpy(d->logits + (int64_t)j * V, ch->logits, sizeof(float) * (size_t)V);
    if (d->probs) {
        float *out = d->probs + (int64_t)j * V;
        if (sampled) memcpy(out, q, sizeof(float) * (size_t)V);
        else memset(out, 0, sizeof(float) * (size_t)V), out[token] = 1;
    }
    return token;
}

static sp_seq_memory draft_memory(const splash_cache *c) {
    return (sp_seq_memory){.kv = c->draft_kv, .page_bytes = (int64_t)c->draft_page_bytes, .page_tokens = c->page_tokens,
                           .kv_type = c->kv_type, .state = c->draft_state};
}

/* Drafts the next block of every sequence that asks for one and sampled a token, from that token at its position
 * after the committed ones; the drafts and their q replace the last step's. */
static splash_status draft_next(splash_model *m, splash_cache *c, splash_seq *seqs, int32_t n, const int32_t *committed) {
    sp_speculator *s = m->speculator;
    s->n_last = 0; /* the last step's drafts were verified (or dropped) by now */
    int64_t penalty_room = 0;
    int32_t longest = 0, n_jobs = 0;
    for (int32_t i = 0; i < n; i++) {
        const splash_speculate *v = seqs[i].speculate;
        if (!v || v->n_next == 0) continue;
        for (int32_t j = 0; j < v->n_next; j++) v->next[j] = -1;
        if (!seqs[i].sample || seqs[i].token < 0) continue; /* refused */
        int32_t emitted = v->n_proposed > 0 ? v->n_accepted + 1 : 1;
        int32_t len = seqs[i].n_penalty_tokens + emitted;
        penalty_room += len;
        longest = len > longest ? len : longest;
        n_jobs++;
    }
    if (!n_jobs) return SPLASH_OK;
    draft_job jobs[n_jobs];
    sp_draft_seq seqs_d[n_jobs];
    int32_t *lists = malloc(sizeof(int32_t) * (size_t)(penalty_room + longest + s->max_draft));
    if (!lists) return SP_FAIL(SPLASH_ERR_OUT_OF_MEMORY, "out of memory");
    int32_t *at = lists, k = 0;
    for (int32_t i = 0; i < n; i++) {
        splash_seq *q = &seqs[i];
        splash_speculate *v = q->speculate;
        if (!v || v->n_next == 0 || !q->sample || q->token < 0) continue;
        /* the penalties' tokens: the generated ones, the verify block's accepted drafts, the sampled token */
        int32_t accepted = v->n_proposed > 0 ? v->n_accepted : 0;
        if (q->n_penalty_tokens) memcpy(at, q->penalty_tokens, sizeof(int32_t) * (size_t)q->n_penalty_tokens);
        memcpy(at + q->n_penalty_tokens, q->tokens + 1, sizeof(int32_t) * (size_t)accepted);
        at[q->n_penalty_tokens + accepted] = q->token;
        int32_t n_past = q->n_past + committed[i];
        jobs[k] = (draft_job){q->slot, n_past, q->token, v->n_next, q->pages, &q->sampling, at, q->n_penalty_tokens + accepted + 1,
                              v->next, v->next_logits, v->next_probs};
        seqs_d[k] = (sp_draft_seq){q->slot, n_past, q->token, v->n_next, q->pages};
        s->last[k] = (drafted){q->slot, n_past, v->n_next, q->sampling.temperature > 0};
        at += jobs[k].n_penalty;
        k++;
    }
    pick_ctx ctx = {s, jobs, at};
    m->op_status = SPLASH_OK;
    sp_seq_memory mem = draft_memory(c);
    splash_status st = s->d->ops->draft(s->d, &mem, seqs_d, n_jobs, shape, pick, &ctx);
    free(lists);
    if (!st && m->op_status) st = m->op_status;
    if (!st) s->n_last = n_jobs;
    return st;
}

/* ---- verify --------------------------------------------------------------------------------------------------- */

/* Accepts or rejects sequence q's drafts against its block logits (backend memory); returns the accepted count,
 * q->token set. */
/* Greedy: each block row goes through the backend's own sampler (the argmax, its log-probability and alternatives,
 * bit for bit what decoding without a drafter reports; a GPU returns the argmax rather than the rows), all rows at
 * once; drafts are kept while they are the argmax. */
static splash_status accept_greedy(sp_speculator *s, splash_seq *q, splash_speculate *v, const float *logits, const int32_t *penalty) {
    const sp_backend *be = s->be;
    int32_t V = s->vocab, k = v->n_draft, words = (V + 31) / 32, n_top = q->n_top_logprobs;
    int32_t *top_ids = v->top_ids ? v->top_ids : s->top_ids;
    float *top_lp = v->top_ids ? v->top_logprobs : s->top_logprobs;
    for (int32_t r = 0; r <= k; r++)
        s->jobs[r] = (sp_sample_job){logits + (int64_t)r * V, &q->sampling, penalty, q->n_penalty_tokens + r,
                                     v->allowed ? v->allowed + (int64_t)r * words : NULL, (uint64_t)q->n_past + 1 + r, n_top,
                                     top_ids + (int64_t)r * n_top, top_lp + (int64_t)r * n_top, 0, 0, s->tokens};
    splash_status st = be->sample(be, s->jobs, k + 1, s->n_tokens, s->sample_scratch, sp_sample_scratch_bytes(s->n_tokens));
    if (st) return st;
    int32_t r = 0;
    while (r < k && s->jobs[r].token == q->tokens[1 + r]) r++;
    for (int32_t j = 0; j <= r && v->logprobs; j++) v->logprobs[j] = s->jobs[j].logprob;
    v->n_accepted = r;
    q->token = s->jobs[r].token;
    q->logprob = s->jobs[r].logprob;
    if (n_top > 0 && q->top_ids) {
        memcpy(q->top_ids, top_ids + (int64_t)r * n_top, sizeof(int32_t) * (size_t)n_top);
        memcpy(q->top_logprobs, top_lp + (int64_t)r * n_top, sizeof(float) * (size_t)n_top);
    }
    return SPLASH_OK;
}

/* qrows: the q the drafts were drawn from (temperature > 0), [n_proposed][vocab]. */
static splash_status accept(sp_speculator *s, splash_seq *q, splash_speculate *v, const float *logits, const float *qrows,
                            int32_t *penalty) {
    int32_t V = s->vocab, N = s->n_tokens, k = v->n_draft, words = (V + 31) / 32;
    const int32_t *draft = q->tokens + 1;
    uint64_t pos0 = (uint64_t)q->n_past + 1; /* block row r decides position n_past + 1 + r */
    if (q->n_penalty_tokens) memcpy(penalty, q->penalty_tokens, sizeof(int32_t) * (size_t)q->n_penalty_tokens);
    memcpy(penalty + q->n_penalty_tokens, draft, sizeof(int32_t) * (size_t)k);
    if (!(q->sampling.temperature > 0)) return accept_greedy(s, q, v, logits, penalty);
    s->be->read(s->be, s->host_logits, logits, sizeof(float) * (uint64_t)(k + 1) * (uint64_t)V);
    logits = s->host_logits;
    for (int32_t r = 0; r <= k; r++) {
        sp_dist_row row = {logits + (int64_t)r * V, &q->sampling, penalty, q->n_penalty_tokens + r,
                           v->allowed ? v->allowed + (int64_t)r * words : NULL, s->tokens};
        int32_t arg, token;
        float lse = sp_accept_dist(&row, N, s->z, s->p, &arg, s->dist_scratch);
        if (isnan(lse)) return SP_FAIL(SPLASH_ERR_INTERNAL, "verify: the masks of block position %d allow no token", r);
        int kept = 0;
        if (r < k) kept = sp_accept_row(s->p, qrows + (int64_t)r * V, N, draft[r], q->sampling.seed, pos0 + r, &token);
        else token = sp_accept_bonus(s->p, v->n_proposed > k ? qrows + (int64_t)k * V : NULL, N, q->sampling.seed, pos0 + k);
        if (kept) token = draft[r];
        if (v->logprobs) v->logprobs[r] = s->z[token] - lse;
        if (q->n_top_logprobs > 0 && v->top_ids)
            sp_accept_top(s->z, N, lse, q->n_top_logprobs, v->top_ids + (int64_t)r * q->n_top_logprobs,
                          v->top_logprobs + (int64_t)r * q->n_top_logprobs);
        if (kept) continue;
        v->n_accepted = r;
        q->token = token;
        q->logprob = s->z[token] - lse;
        if (q->n_top_logprobs > 0 && q->top_ids) sp_accept_top(s->z, N, lse, q->n_top_logprobs, q->top_ids, q->top_logprobs);
        return SPLASH_OK;
    }
    return SP_FAIL(SPLASH_ERR_INTERNAL, "verify: no final token");
}

splash_status sp_speculator_step(splash_model *m, splash_cache *c, splash_seq *seqs, int32_t n) {
    sp_speculator *s = m->speculator;
    int32_t V = s->vocab, n_verify = 0, longest = 0;
    uint8_t is_verify[n];
    const float *qrows[n];
    for (int32_t i = 0; i < n; i++) {
        const splash_seq *q = &seqs[i];
        splash_speculate *v = q->speculate;
        /* a refused sequence (sample cleared by step.c's refusals) only computes its rows; a verify block's logits stay
         * in s->logits (backend memory), where the acceptance samples them */
        is_verify[i] = v && q->sample && v->n_proposed > 0;
        if (v) v->n_accepted = 0;
        if (!is_verify[i]) continue;
        int32_t k = q->sampling.temperature > 0 ? drafted_for(s, q->slot) : -1;
        qrows[i] = k < 0 ? NULL : s->q + (int64_t)k * s->max_draft * V;
        n_verify++;
        longest = q->n_penalty_tokens + q->n_tokens > longest ? q->n_penalty_tokens + q->n_tokens : longest;
    }
    sp_qwen35_speculate spec = {s->d->tap_layers, s->d->n_taps, s->d->n_taps ? s->rows : NULL, s->d->n_taps ? NULL : s->rows,
                                is_verify, s->logits};
    sp_seq_memory mem = sp_cache_memory(c);
    splash_status st = sp_qwen35_step_speculate(m->arch, &mem, seqs, n, &spec);
    if (st) return s->n_last = 0, st;
    /* accept, then replay the accepted rows into each verify block's GDN state */
    int32_t *penalty = n_verify ? malloc(sizeof(int32_t) * (size_t)longest) : NULL;
    if (n_verify && !penalty) return SP_FAIL(SPLASH_ERR_OUT_OF_MEMORY, "out of memory");
    int32_t committed[n], n_blocks = 0;
    sp_qwen35_commit_block blocks[n];
    int64_t off = 0;
    for (int32_t i = 0; i < n && !st; i++) {
        committed[i] = seqs[i].n_tokens;
        if (!is_verify[i]) continue;
        st = accept(s, &seqs[i], seqs[i].speculate, s->logits + off * V, qrows[i], penalty);
        if (st) break;
        committed[i] = seqs[i].speculate->n_accepted + 1;
        blocks[n_blocks++] = (sp_qwen35_commit_block){seqs[i].slot, committed[i], off};
        off += seqs[i].n_tokens;
    }
    if (!st && n_blocks) sp_qwen35_commit(m->arch, &mem, blocks, n_blocks);
    free(penalty);
    if (st) return s->n_last = 0, st;
    /* the drafter takes in every committed position, then drafts from each sampled token */
    sp_draft_rows rows[n];
    int64_t row0 = 0;
    for (int32_t i = 0; i < n; i++) {
        rows[i] = (sp_draft_rows){seqs[i].slot, seqs[i].n_past, committed[i], seqs[i].tokens, seqs[i].pages,
                                  s->rows + row0 * s->row_width, s->row_width};
        row0 += seqs[i].n_tokens;
    }
    sp_seq_memory dm = draft_memory(c);
    m->op_status = SPLASH_OK;
    s->d->ops->ingest(s->d, &dm, rows, n);
    if (m->op_status) return s->n_last = 0, m->op_status;
    return draft_next(m, c, seqs, n, committed);
}

int32_t splash_draft_accept(const float *p, const float *q, int32_t q_rows, int32_t vocab, const int32_t *draft, int32_t k,
                            uint64_t seed, uint64_t pos0, int32_t *token) {
    if (!p || (k > 0 && (!q || !draft)) || !token || vocab < 1 || k < 0 || q_rows < k || q_rows > k + 1) return -1;
    return sp_accept(p, q, q_rows, vocab, draft, k, seed, pos0, token);
}
