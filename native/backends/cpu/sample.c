/* sample.c — choosing the next token from a logits row: penalties, allowed-token mask, greedy or temperature
 * sampling with top-k → top-p → min-p, the chosen token's log-probability and the top-N alternatives.
 *
 * Order (each step sees the previous one's output):
 *   z = logits; repetition penalty (HF: z>0 ? z/r : z·r, once per distinct token); presence (−p once per distinct
 *   token) and frequency (−f per occurrence) penalties (OpenAI); the logit bias (OpenAI) added; ids outside the
 *   allowed mask or the model's token mask (unused tokenizer ids) → −inf (core/sampling.c, which speculative
 *   acceptance shares).
 *   logprobs (returned) = log_softmax(z): after penalties and mask, before temperature and truncation.
 *   temperature 0 → argmax z (lowest id on ties). Otherwise w = exp((z − max z) / T); keep the top_k largest; keep
 *   the smallest most-likely set whose mass reaches top_p; drop w < min_p · max w; draw u ∈ [0, 1) from
 *   (seed, position) and walk the kept tokens (in the order the filters leave them) until their running mass passes
 *   u · total. The top-N alternatives are the N most likely ids that could have been chosen (fewer when the masks
 *   leave fewer). The draw depends on nothing but (seed, position) and the row, so a sequence samples the same alone or
 *   batched.
 *
 * Cost is a few passes over the vocabulary (248K entries for Qwen3.5): the exp passes have an AVX2 form
 * (sample_avx2.c), and nothing sorts the vocabulary: top-k is a quickselect, top-p bins the weights by their float
 * exponent and sorts only the bin where the cut falls. */
#include "ops.h"

#include "core/error.h"
#include "core/rank.h"
#include "core/sampling.h"

#include <string.h>


enum { BINS = 2048 };

uint64_t sp_sample_scratch_bytes(int32_t vocab) {
    uint64_t v = (uint64_t)vocab;
    return v * (2 * sizeof(float) + sizeof(int32_t)) + (v + 31) / 32 * sizeof(uint32_t) + BINS * sizeof(double) + 64;
}

/* splitmix64 finalizer over (seed, position): a counter-based generator, no state between calls. */
static double uniform01(uint64_t seed, uint64_t position) {
    uint64_t z = seed + 0x9E3779B97F4A7C15ull * (position + 1);
    for (int i = 0; i < 2; i++) {
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        z ^= z >> 31;
    }
    return (double)(z >> 11) * 0x1.0p-53;
}

/* Bin of a weight in (0, 1]: its exponent and top 3 mantissa bits, 0 for the largest weights. */
static inline int32_t bin_of(float w) {
    uint32_t bits;
    memcpy(&bits, &w, sizeof bits);
    int32_t b = (int32_t)((127u << 3) - (bits >> 20)); /* (exponent, 3 mantissa bits) counted down from 1.0 */
    return b < 0 ? 0 : b >= BINS ? BINS - 1 : b;
}

/* Keeps the smallest most-likely subset of idx[0..c) whose weight reaches `need`, moved to the front; returns its
 * size. Bins by weight, takes whole bins from the top, then sorts only the bin where the mass crosses `need`. */
static int64_t nucleus(int32_t *idx, int64_t c, const float *w, double need, double *mass) {
    memset(mass, 0, sizeof(double) * BINS);
    for (int64_t i = 0; i < c; i++) mass[bin_of(w[idx[i]])] += w[idx[i]];
    double cum = 0;
    int32_t cut = 0;
    while (cut < BINS - 1 && cum + mass[cut] < need) cum += mass[cut++];
    int64_t above = 0; /* tokens in bins before `cut` go first, then the cut bin's tokens */
    for (int64_t i = 0; i < c; i++)
        if (bin_of(w[idx[i]]) < cut) {
            int32_t t = idx[above];
            idx[above++] = idx[i];
            idx[i] = t;
        }
    int64_t in_cut = above;
    for (int64_t i = above; i < c; i++)
        if (bin_of(w[idx[i]]) == cut) {
            int32_t t = idx[in_cut];
            idx[in_cut++] = idx[i];
            idx[i] = t;
        }
    sp_rank_sort(idx + above, in_cut - above, w);
    int64_t keep = above;
    while (keep < in_cut && cum < need) cum += w[idx[keep++]];
    return keep > 0 ? keep : 1;
}

/* The two exp passes over a row (logsumexp for the logprobs; sampling weights), per ISA. Masked tokens hold −inf
 * and give 0. */
typedef struct {
    double (*sum_exp)(const float *z, int32_t n, float mx, float scale);          /* Σ exp((z − mx) · scale) */
    void (*exp_weights)(float *w, const float *z, int32_t n, float mx, float scale); /* w = exp((z − mx) · scale) */
} exp_kernels;

static double sum_exp_scalar(const float *z, int32_t n, float mx, float scale) {
    double s = 0;
    for (int32_t i = 0; i < n; i++) s += expf((z[i] - mx) * scale);
    return s;
}

static void exp_weights_scalar(float *w, const float *z, int32_t n, float mx, float scale) {
    for (int32_t i = 0; i < n; i++) w[i] = expf((z[i] - mx) * scale);
}

/* Returns 0 when the mask allows no token. */
static int sample_one(sp_sample_job *job, int32_t V, uint8_t *scratch, const exp_kernels *ex) {
    const splash_sampling *s = job->params;
    float *z = (float *)scratch, *w = z + V;
    int32_t *idx = (int32_t *)(w + V);
    uint32_t *seen = (uint32_t *)(idx + V);
    double *bins = (double *)(((uintptr_t)(seen + (V + 31) / 32) + 7) & ~(uintptr_t)7);
    sp_sampling_row(z, job->logits, V, s, job->penalty_tokens, job->n_penalty, job->allowed, job->tokens, seen);
    int32_t arg = 0;
    float mx = z[0];
    for (int32_t t = 1; t < V; t++)
        if (z[t] > mx) mx = z[t], arg = t;
    if (mx == -INFINITY) return 0;
    float lse = mx + (float)log(ex->sum_exp(z, V, mx, 1.0f));

    int32_t token = arg;
    if (s->temperature > 0) {
        float inv_t = 1.0f / s->temperature;
        ex->exp_weights(w, z, V, mx, inv_t);
        /* candidates: tokens of non-zero weight. With top_p alone, a token below (1 − top_p)·total / V cannot be in
         * the nucleus (all of them together weigh less than what top_p leaves out), so the filter drops most of a
         * peaked distribution before any selection. */
        float floor_w = 0;
        double all = 0; /* total weight of every token, when top_p applies to all of them */
        if (s->top_p < 1 && s->top_k <= 0) {
            all = ex->sum_exp(z, V, mx, inv_t);
            floor_w = (float)((1 - s->top_p) * all / V);
        }
        int64_t c = 0; /* ≥ keeps the most likely token when top_p = 0 makes the floor the mean weight */
        for (int32_t t = 0; t < V; t++)
            if (w[t] > 0 && w[t] >= floor_w) idx[c++] = t;
        int sorted = 0;
        if (s->top_k > 0 && s->top_k < c) {
            if (s->top_k <= 64) { /* one scan keeping the best k in order: few insertions after the first rows */
                int32_t k = s->top_k, have = 0;
                for (int64_t i = 0; i < c; i++) {
                    int32_t t = idx[i];
                    if (have == k && !sp_rank_before(w, t, idx[k - 1])) continue;
                    int32_t at = have < k ? have++ : k - 1;
                    while (at > 0 && sp_rank_before(w, t, idx[at - 1])) idx[at] = idx[at - 1], at--;
                    idx[at] = t;
                }
            } else {
                sp_rank_select(idx, c, s->top_k, w);
                sp_rank_sort(idx, s->top_k, w);
            }
            c = s->top_k;
            sorted = 1;
        }
        if (s->top_p < 1) {
            double total = all; /* after top_k, top_p is relative to the kept tokens */
            if (total == 0)
                for (int64_t i = 0; i < c; i++) total += w[idx[i]];
            double need = s->top_p * total, cum = 0;
            if (sorted) {
                int64_t keep = 0;
                while (keep < c && cum < need) cum += w[idx[keep++]];
                c = keep > 0 ? keep : 1;
            } else {
                c = nucleus(idx, c, w, need, bins);
            }
        }
        if (s->min_p > 0) c = sp_min_p_keep(idx, c, w, s->min_p);
        double total = 0;
        for (int64_t i = 0; i < c; i++) total += w[idx[i]];
        double r = uniform01(s->seed, job->position) * total, cum = 0;
        token = idx[c - 1];
        for (int64_t i = 0; i < c; i++) {
            cum += w[idx[i]];
            if (r < cum) {
                token = idx[i];
                break;
            }
        }
    }
    job->token = token;
    job->logprob = z[token] - lse;

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
    sample_args a = {jobs, vocab, scratch, scratch_bytes_per_thread, {sum_exp_scalar, exp_weights_scalar}, 0};
#if defined(__x86_64__)
    if (sp_backend_avx2(be)) a.ex = (exp_kernels){sp_sum_exp_avx2, sp_exp_weights_avx2};
#endif
    if (n_jobs == 1) sample_jobs(&a, 0, 1, 0);
    else sp_cpu_for(be, n_jobs, sample_jobs, &a);
    if (a.failed)
        return SP_FAIL(SPLASH_ERR_INVALID_ARGUMENT, "sampled row %lld: the allowed-token mask allows no token",
                       (long long)(a.failed - 1));
    return SPLASH_OK;
}
