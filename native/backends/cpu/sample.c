/* sample.c — choosing the next token from a logits row: penalties, allowed-token mask, greedy or temperature
 * sampling with top-k → top-p → min-p, the chosen token's log-probability and the top-N alternatives.
 *
 * Order (each step sees the previous one's output):
 *   z = logits; repetition penalty (HF: z>0 ? z/r : z·r, once per distinct token); presence (−p once per distinct
 *   token) and frequency (−f per occurrence) penalties (OpenAI); tokens outside the allowed mask → −inf.
 *   logprobs (returned) = log_softmax(z): after penalties and mask, before temperature and truncation.
 *   temperature 0 → argmax z (lowest id on ties). Otherwise w = exp((z − max z) / T); keep the top_k largest; keep
 *   the smallest most-likely prefix whose mass reaches top_p; drop w < min_p · max w; draw u ∈ [0, 1) from
 *   (seed, position) and walk the kept tokens (most likely first) until their running mass passes u · total.
 * The draw depends on nothing but (seed, position) and the row, so a sequence samples the same alone or batched. */
#include "ops.h"

#include "core/error.h"

#include <string.h>

typedef struct {
    sp_sample_job *jobs;
    int32_t vocab;
    uint8_t *scratch;
    uint64_t scratch_bytes;
    int64_t failed; /* 1 + index of a job whose mask allowed nothing */
} sample_args;

uint64_t sp_sample_scratch_bytes(int32_t vocab) {
    uint64_t v = (uint64_t)vocab;
    return v * (2 * sizeof(float) + sizeof(int32_t)) + (v + 31) / 32 * sizeof(uint32_t) + 64;
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

/* a ranks before b: larger value, then lower id. */
static inline int before(const float *w, int32_t a, int32_t b) { return w[a] > w[b] || (w[a] == w[b] && a < b); }

static void sift(int32_t *idx, int64_t root, int64_t n, const float *w) {
    for (;;) {
        int64_t c = 2 * root + 1;
        if (c >= n) return;
        /* a min-heap under `before`, so popping to the end leaves the array best-first */
        if (c + 1 < n && before(w, idx[c], idx[c + 1])) c++;
        if (!before(w, idx[root], idx[c])) return;
        int32_t t = idx[root];
        idx[root] = idx[c];
        idx[c] = t;
        root = c;
    }
}

/* Heapsort idx[0..n) best-first (deterministic, in place). */
static void sort_best_first(int32_t *idx, int64_t n, const float *w) {
    for (int64_t i = n / 2 - 1; i >= 0; i--) sift(idx, i, n, w);
    for (int64_t end = n - 1; end > 0; end--) {
        int32_t t = idx[0];
        idx[0] = idx[end];
        idx[end] = t;
        sift(idx, 0, end, w);
    }
    /* the max-heap under !before put the worst first; reverse */
    for (int64_t i = 0, j = n - 1; i < j; i++, j--) {
        int32_t t = idx[i];
        idx[i] = idx[j];
        idx[j] = t;
    }
}

/* Moves the k best of idx[0..n) to the front (unordered), by quickselect. */
static void select_best(int32_t *idx, int64_t n, int64_t k, const float *w) {
    int64_t lo = 0, hi = n - 1;
    while (lo < hi) {
        int32_t pivot = idx[lo + (hi - lo) / 2];
        int64_t i = lo, j = hi;
        while (i <= j) {
            while (before(w, idx[i], pivot)) i++;
            while (before(w, pivot, idx[j])) j--;
            if (i <= j) {
                int32_t t = idx[i];
                idx[i++] = idx[j];
                idx[j--] = t;
            }
        }
        if (k - 1 <= j) hi = j;
        else if (k - 1 >= i) lo = i;
        else return;
    }
}

static void apply_penalties(float *z, const sp_sample_job *job, uint32_t *seen, int32_t vocab) {
    const splash_sampling *s = job->params;
    int rep = s->repetition_penalty != 1.0f && s->repetition_penalty > 0;
    if (!rep && s->presence_penalty == 0 && s->frequency_penalty == 0) return;
    memset(seen, 0, (size_t)(vocab + 31) / 32 * sizeof(uint32_t));
    for (int32_t i = 0; i < job->n_penalty; i++) {
        int32_t t = job->penalty_tokens[i];
        if (t < 0 || t >= vocab) continue;
        if (!(seen[t >> 5] & (1u << (t & 31)))) {
            seen[t >> 5] |= 1u << (t & 31);
            if (rep) z[t] = z[t] > 0 ? z[t] / s->repetition_penalty : z[t] * s->repetition_penalty;
            z[t] -= s->presence_penalty;
        }
        z[t] -= s->frequency_penalty;
    }
}

static int allowed(const uint32_t *mask, int32_t t) { return !mask || (mask[t >> 5] >> (t & 31)) & 1; }

/* Returns 0 when the mask allows no token. */
static int sample_one(sp_sample_job *job, int32_t V, uint8_t *scratch) {
    const splash_sampling *s = job->params;
    float *z = (float *)scratch, *w = z + V;
    int32_t *idx = (int32_t *)(w + V);
    uint32_t *seen = (uint32_t *)(idx + V);
    memcpy(z, job->logits, sizeof(float) * (size_t)V);
    apply_penalties(z, job, seen, V);

    float mx = -INFINITY;
    int32_t arg = -1;
    for (int32_t t = 0; t < V; t++) {
        if (!allowed(job->allowed, t)) z[t] = -INFINITY;
        else if (arg < 0 || z[t] > mx) mx = z[t], arg = t;
    }
    if (arg < 0) return 0;
    double sum = 0;
    for (int32_t t = 0; t < V; t++) sum += z[t] == -INFINITY ? 0.0 : exp((double)z[t] - mx);
    float lse = mx + (float)log(sum);

    int32_t token = arg;
    if (s->temperature > 0) {
        /* candidates: every allowed token, weights relative to the max */
        int64_t c = 0;
        double inv_t = 1.0 / s->temperature;
        for (int32_t t = 0; t < V; t++) {
            w[t] = z[t] == -INFINITY ? 0.0f : (float)exp(((double)z[t] - mx) * inv_t);
            if (z[t] != -INFINITY) idx[c++] = t;
        }
        int sorted = 0;
        if (s->top_k > 0 && s->top_k < c) {
            select_best(idx, c, s->top_k, w);
            c = s->top_k;
            sort_best_first(idx, c, w);
            sorted = 1;
        }
        if (s->top_p > 0 && s->top_p < 1) {
            double total = 0;
            for (int64_t i = 0; i < c; i++) total += w[idx[i]];
            if (!sorted) {
                /* sort only the tokens above a threshold whose mass already reaches top_p: the nucleus is inside */
                float thr = 1.0f / 64;
                int64_t m;
                for (;;) {
                    double mass = 0;
                    m = 0;
                    for (int64_t i = 0; i < c; i++)
                        if (w[idx[i]] >= thr) {
                            int32_t t = idx[m];
                            idx[m++] = idx[i];
                            idx[i] = t;
                            mass += w[idx[m - 1]];
                        }
                    if (mass >= s->top_p * total || thr == 0) break;
                    thr = thr < 1e-30f ? 0 : thr / 16;
                }
                sort_best_first(idx, m, w);
                c = m;
            }
            double cum = 0;
            int64_t keep = 0;
            while (keep < c && cum < s->top_p * total) cum += w[idx[keep++]];
            c = keep > 0 ? keep : 1;
        }
        if (s->min_p > 0) {
            float floor_w = s->min_p; /* max w is 1 */
            int64_t m = 0;
            for (int64_t i = 0; i < c; i++)
                if (w[idx[i]] >= floor_w) idx[m++] = idx[i];
            c = m > 0 ? m : 1;
        }
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

    /* top-N by z: keep a best-first list of N while scanning */
    int32_t n = job->n_top, have = 0;
    for (int32_t t = 0; t < V && n > 0; t++) {
        if (have == n && !before(z, t, job->top_ids[n - 1])) continue;
        int32_t i = have < n ? have++ : n - 1;
        while (i > 0 && before(z, t, job->top_ids[i - 1])) {
            job->top_ids[i] = job->top_ids[i - 1];
            i--;
        }
        job->top_ids[i] = t;
    }
    for (int32_t i = 0; i < have; i++) job->top_logprobs[i] = z[job->top_ids[i]] - lse;
    return 1;
}

static void sample_jobs(void *ctx, int64_t b, int64_t e, int thread) {
    sample_args *a = ctx;
    for (int64_t j = b; j < e; j++)
        if (!sample_one(&a->jobs[j], a->vocab, a->scratch + (uint64_t)thread * a->scratch_bytes)) a->failed = j + 1;
}

splash_status sp_cpu_sample(const sp_backend *be, sp_sample_job *jobs, int32_t n_jobs, int32_t vocab, void *scratch,
                            uint64_t scratch_bytes_per_thread) {
    sample_args a = {jobs, vocab, scratch, scratch_bytes_per_thread, 0};
    if (n_jobs == 1) sample_jobs(&a, 0, 1, 0);
    else sp_cpu_for(be, n_jobs, sample_jobs, &a);
    if (a.failed)
        return SP_FAIL(SPLASH_ERR_INVALID_ARGUMENT, "sampled row %lld: the allowed-token mask allows no token",
                       (long long)(a.failed - 1));
    return SPLASH_OK;
}
