/* accept.c — speculative acceptance (rejection sampling) and the sampler's distribution over a logits row. */
#include "draft/accept.h"

#include "core/rank.h"
#include "core/sampling.h"

#include <math.h>
#include <string.h>

double sp_accept_uniform(uint64_t seed, uint32_t stream, uint64_t position) {
    return (double)sp_sample_u53(seed, stream, position) * 0x1.0p-53;
}

int32_t sp_accept_draw(const float *probs, int32_t V, double u) {
    double cum = 0;
    int32_t last = -1;
    for (int32_t t = 0; t < V; t++) {
        if (probs[t] <= 0) continue;
        cum += probs[t];
        last = t;
        if (u < cum) return t;
    }
    return last; /* rounding left u above the total: the last token with mass */
}

/* A draw from normalize(max(0, p − q)), or from p when that has no mass. */
static int32_t residual(const float *p, const float *q, int32_t V, double u) {
    double total = 0;
    for (int32_t t = 0; t < V; t++) total += p[t] > q[t] ? p[t] - q[t] : 0;
    if (!(total > 0)) return sp_accept_draw(p, V, u);
    double r = u * total, cum = 0;
    int32_t last = -1;
    for (int32_t t = 0; t < V; t++) {
        if (p[t] <= q[t]) continue;
        cum += p[t] - q[t];
        last = t;
        if (r < cum) return t;
    }
    return last;
}

int sp_accept_row(const float *p, const float *q, int32_t V, int32_t d, uint64_t seed, uint64_t pos, int32_t *token) {
    if (sp_accept_uniform(seed, SP_STREAM_ACCEPT, pos) * q[d] < p[d]) return 1;
    *token = residual(p, q, V, sp_accept_uniform(seed, SP_STREAM_RESIDUAL, pos));
    return 0;
}

int32_t sp_accept_bonus(const float *p, const float *q, int32_t V, uint64_t seed, uint64_t pos) {
    double u = sp_accept_uniform(seed, SP_STREAM_RESIDUAL, pos);
    return q ? residual(p, q, V, u) : sp_accept_draw(p, V, u);
}

int32_t sp_accept(const float *p, const float *q, int32_t q_rows, int32_t V, const int32_t *draft, int32_t k,
                       uint64_t seed, uint64_t pos0, int32_t *token) {
    for (int32_t i = 0; i < k; i++)
        if (!sp_accept_row(p + (int64_t)i * V, q + (int64_t)i * V, V, draft[i], seed, pos0 + i, token)) return i;
    *token = sp_accept_bonus(p + (int64_t)k * V, q_rows > k ? q + (int64_t)k * V : NULL, V, seed, pos0 + k);
    return k;
}

/* ---- the sampler's distribution (same rules and order as backends/cpu/sample.c) ------------------------------- */

uint64_t sp_accept_dist_scratch(int32_t V) {
    return (uint64_t)V * (sizeof(float) + sizeof(int32_t)) + ((uint64_t)V + 31) / 32 * 4 + SP_SAMPLE_BINS * sizeof(uint64_t) + 64;
}

void sp_accept_logits(const sp_dist_row *r, int32_t V, float *z, void *scratch) {
    sp_sampling_row(z, r->logits, V, r->params, r->penalty, r->n_penalty, r->allowed, r->tokens,
                    (uint32_t *)((int32_t *)((float *)scratch + V) + V));
}

float sp_accept_dist(const sp_dist_row *r, int32_t V, float *z, float *probs, int32_t *argmax, void *scratch) {
    const splash_sampling *s = r->params;
    float *w = scratch;
    int32_t *idx = (int32_t *)(w + V);
    uint64_t *bins = (uint64_t *)(((uintptr_t)((uint32_t *)(idx + V) + (V + 31) / 32) + 7) & ~(uintptr_t)7);
    sp_accept_logits(r, V, z, scratch);
    float mx = -INFINITY;
    int32_t arg = -1;
    for (int32_t t = 0; t < V; t++)
        if (z[t] != -INFINITY && (arg < 0 || z[t] > mx)) mx = z[t], arg = t;
    *argmax = arg;
    if (arg < 0) return NAN;
    double sum = 0;
    for (int32_t t = 0; t < V; t++) sum += z[t] == -INFINITY ? 0.0 : exp((double)z[t] - mx);
    float lse = mx + (float)log(sum);
    if (!probs) return lse;
    memset(probs, 0, sizeof(float) * (size_t)V);
    if (!(s->temperature > 0)) {
        probs[arg] = 1;
        return lse;
    }
    float inv_t = 1.0f / s->temperature; /* the CPU sampler's weights, bit for bit (core/sampling.h) */
    for (int32_t t = 0; t < V; t++) w[t] = sp_sample_exp((z[t] - mx) * inv_t);
    int64_t c = sp_sample_kept(w, V, s, idx, bins);
    uint64_t total = 0;
    for (int64_t i = 0; i < c; i++) total += sp_sample_mass(w[idx[i]]);
    for (int64_t i = 0; i < c; i++) probs[idx[i]] = (float)((double)sp_sample_mass(w[idx[i]]) / (double)total);
    return lse;
}

void sp_accept_top(const float *z, int32_t V, float lse, int32_t n, int32_t *ids, float *logprobs) {
    int32_t have = sp_rank_top(z, V, n, ids);
    for (int32_t i = 0; i < have; i++) logprobs[i] = z[ids[i]] - lse;
    for (int32_t i = have; i < n; i++) ids[i] = -1, logprobs[i] = -INFINITY;
}
