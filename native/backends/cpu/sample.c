/* sample.c — choosing the next token from a logits row: penalties, allowed-token mask, greedy or temperature
 * sampling with top-k → top-p → min-p, the chosen token's log-probability and the top-N alternatives.
 *
 * Order (each step sees the previous one's output):
 *   z = logits; repetition penalty (HF: z>0 ? z/r : z·r, once per distinct token); presence (−p once per distinct
 *   token) and frequency (−f per occurrence) penalties (OpenAI); the logit bias (OpenAI) added; ids outside the
 *   allowed mask or the model's token mask (unused tokenizer ids) → −inf (core/sampling.c, which speculative
 *   acceptance shares).
 *   logprobs (returned) = log_softmax(z): after penalties and mask, before temperature and truncation.
 *   temperature 0 → argmax z (lowest id on ties). Otherwise w = exp((z − max z) / T) and each token's integer mass
 *   (core/sampling.h: exact arithmetic, so a GPU draws the same token); keep the top_k largest; keep the smallest
 *   most-likely set whose mass reaches top_p; drop w < min_p · max w; draw u from (seed, stream, position) and walk the kept
 *   tokens in id order until their running mass passes u · total; a probed token's mass and the kept total give its
 *   probability (speculative acceptance's p(d)). The top-N alternatives are the N most likely ids
 *   that could have been chosen (fewer when the masks leave fewer). The draw depends on nothing but (seed, position)
 *   and the row, so a sequence samples the same alone or batched, on any backend.
 *
 * Cost is a few passes over the vocabulary (248K entries for Qwen3.5): the exp passes have an AVX2 form
 * (sample_avx2.c), and nothing sorts the vocabulary (the cuts: sp_sample_kept in core/sampling.c). */
#include "ops.h"

#include "core/error.h"
#include "core/rank.h"
#include "core/sampling.h"

#include <string.h>


uint64_t sp_sample_scratch_bytes(int32_t vocab) {
    uint64_t v = (uint64_t)vocab;
    return v * (2 * sizeof(float) + sizeof(int32_t)) + (v + 31) / 32 * sizeof(uint32_t) + SP_SAMPLE_BINS * sizeof(uint64_t) + 64;
}

/* The two exp passes over a row (logsumexp for the logprobs; sampling weights), per ISA. Masked tokens hold −inf
 * and give 0. */
typedef struct {
    double (*sum_exp)(const float *z, int32_t n, float mx, float scale);          /* Σ exp((z − mx) · scale) */
    void (*weights)(float *w, const float *z, int32_t n, float mx, float inv_t); /* w = sp_sample_exp((z − mx) · inv_t) */
} exp_kernels;

static double sum_exp_scalar(const float *z, int32_t n, float mx, float scale) {
    double s = 0;
    for (int32_t i = 0; i < n; i++) s += expf((z[i] - mx) * scale);
    return s;
}

static void weights_scalar(float *w, const float *z, int32_t n, float mx, float inv_t) {
    for (int32_t i = 0; i < n; i++) w[i] = sp_sample_exp((z[i] - mx) * inv_t);
}

/* Returns 0 when the mask allows no token. */
static int sample_one(sp_sample_job *job, int32_t V, uint8_t *scratch, const exp_kernels *ex) {
    const splash_sampling *s = job->params;
    float *z = (float *)scratch, *w = z + V;
    int32_t *idx = (int32_t *)(w + V);
    uint32_t *seen = (uint32_t *)(idx + V);
    uint64_t *bins = (uint64_t *)(((uintptr_t)(seen + (V + 31) / 32) + 7) & ~(uintptr_t)7);
    sp_sampling_row(z, job->logits, V, s, job->penalty_tokens, job->n_penalty, job->allowed, job->tokens, seen);
    int32_t arg = 0;
    float mx = z[0];
    for (int32_t t = 1; t < V; t++)
        if (z[t] > mx) mx = z[t], arg = t;
    if (mx == -INFINITY) return 0;
    float lse = mx + (float)log(ex->sum_exp(z, V, mx, 1.0f));

    int32_t token = arg, d = job->probe ? *job->probe : -1;
    job->probe_mass = d == arg, job->kept_mass = 1;
    if (s->temperature > 0) {
        float inv_t = 1.0f / s->temperature;
        ex->weights(w, z, V, mx, inv_t);
        int64_t c = sp_sample_kept(w, V, s, idx, bins);
        /* the draw walks the kept ids in id order, which a GPU does without sorting them (kernels/sample.comp) */
        memset(seen, 0, sizeof(uint32_t) * (size_t)((V + 31) / 32));
        uint64_t total = 0;
        for (int64_t i = 0; i < c; i++) total += sp_sample_mass(w[idx[i]]), seen[idx[i] >> 5] |= 1u << (idx[i] & 31);
        uint64_t r = sp_sample_point(sp_sample_u53(s->seed, job->stream, job->position), total), cum = 0;
        job->probe_mass = d >= 0 && d < V && (seen[d >> 5] >> (d & 31) & 1) ? sp_sample_mass(w[d]) : 0;
        job->kept_mass = total;
        token = -1;
        for (int32_t b = 0; b < (V + 31) / 32 && token < 0; b++)
            for (uint32_t bits = seen[b]; bits && token < 0; bits &= bits - 1) {
                int32_t t = b * 32 + __builtin_ctz(bits);
                cum += sp_sample_mass(w[t]);
                if (r < cum) token = t;
            }
    }
    job->token = token;
    job->logprob = z[token] - lse;
    job->probe_logprob = d >= 0 && d < V ? z[d] - lse : -INFINITY;

    /* top-N by z: keep a best-first list of N while scanning; masked ids are no alternative (−1 fills the rest) */
    int32_t n = job->n_top, have = 0;
    for (int32_t t = 0; t < V && n > 0; t++) {
        if (z[t] == -INFINITY || (have == n && !sp_rank_before(z, t, job->top_ids[n - 1]))) continue;
        int32_t i = have < n ? have++ : n - 1;
        while (i > 0 && sp_rank_before(z, t, job->top_ids[i - 1])) {
            job->top_ids[i] = job->top_ids[i - 1];
            i--;
        }
        job->top_ids[i] = t;
    }
    for (int32_t i = 0; i < have; i++) job->top_logprobs[i] = z[job->top_ids[i]] - lse;
    for (int32_t i = have; i < n; i++) job->top_ids[i] = -1, job->top_logprobs[i] = -INFINITY;
    return 1;
}

typedef struct {
    sp_sample_job *jobs;
    int32_t vocab;
    uint8_t *scratch;
    uint64_t scratch_bytes;
    exp_kernels ex;
    int64_t failed; /* 1 + index of a job whose mask allowed nothing */
} sample_args;

static void sample_jobs(void *ctx, int64_t b, int64_t e, int thread) {
    sample_args *a = ctx;
    for (int64_t j = b; j < e; j++)
        if (!sample_one(&a->jobs[j], a->vocab, a->scratch + (uint64_t)thread * a->scratch_bytes, &a->ex)) a->failed = j + 1;
}

splash_status sp_cpu_sample(const sp_backend *be, sp_sample_job *jobs, int32_t n_jobs, int32_t vocab, void *scratch,
                            uint64_t scratch_bytes_per_thread) {
    sample_args a = {jobs, vocab, scratch, scratch_bytes_per_thread, {sum_exp_scalar, weights_scalar}, 0};
#if defined(__x86_64__)
    if (sp_backend_avx2(be)) a.ex = (exp_kernels){sp_sum_exp_avx2, sp_sample_weights_avx2};
#endif
    if (n_jobs == 1) sample_jobs(&a, 0, 1, 0);
    else sp_cpu_for(be, n_jobs, sample_jobs, &a);
    if (a.failed)
        return SP_FAIL(SPLASH_ERR_INVALID_ARGUMENT, "sampled row %lld: the allowed-token mask allows no token",
                       (long long)(a.failed - 1));
    return SPLASH_OK;
}
