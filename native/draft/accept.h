/* accept.h — speculative acceptance as pure functions over probability rows, and the sampler's distribution.
 *
 * Exact for any draft distribution q (Leviathan et al. 2023; Chen et al. 2023): with drafts d_i ~ q_i,
 *   accept d_i while u_i · q_i(d_i) < p_i(d_i)                          u_i uniform in [0, 1)
 *   first rejection at i: the token is drawn from normalize(max(0, p_i − q_i))   (p_i when that is all zero)
 *   all k accepted: the bonus token is drawn from p_k
 * so every emitted token is distributed exactly as the target's p. Greedy is the case where p and q are one-hot
 * (accept while the target's argmax equals the draft; the token at the first mismatch is the target's argmax).
 * Every draw is a function of (seed, stream, position) only: the same result alone or batched, run after run. */
#ifndef SP_DRAFT_ACCEPT_H
#define SP_DRAFT_ACCEPT_H

#include "splash.h"

#include <stdint.h>

enum { SP_STREAM_ACCEPT = 1, SP_STREAM_RESIDUAL = 2, SP_STREAM_DRAFT = 3 };

/* u in [0, 1) from (seed, stream, position). */
double sp_accept_uniform(uint64_t seed, uint32_t stream, uint64_t position);

/* Rejection sampling over k drafts. p: [k + 1][V] target distributions (row i is the distribution of the token
 * after draft i's predecessor); q: [q_rows][V] draft distributions, q_rows = k, or k + 1 when a (k+1)-th draft was
 * proposed but refused before verification (a grammar): then position k samples the residual against q_k instead
 * of p_k. Draws use positions pos0 + i. Writes the final token; returns the number of drafts accepted (0..k). */
int32_t sp_accept(const float *p, const float *q, int32_t q_rows, int32_t V, const int32_t *draft, int32_t k,
                       uint64_t seed, uint64_t pos0, int32_t *token);

/* The same rule one position at a time (what a step's verify blocks run, computing p rows only as far as needed):
 * accept_row returns 1 when draft d is kept at position pos, else 0 with the residual draw in *token; bonus draws the
 * token after every draft was kept, from p (q NULL) or from the residual against q (a refused next draft). */
int sp_accept_row(const float *p, const float *q, int32_t V, int32_t d, uint64_t seed, uint64_t pos, int32_t *token);
int32_t sp_accept_bonus(const float *p, const float *q, int32_t V, uint64_t seed, uint64_t pos);

/* A token drawn from probs[V] (Σ = 1) with u in [0, 1). */
int32_t sp_accept_draw(const float *probs, int32_t V, double u);

/* One logits row and what the sampler does to it (native/backends/cpu/sample.c's order). */
typedef struct sp_dist_row {
    const float *logits;            /* [V] raw */
    const splash_sampling *params;
    const int32_t *penalty;         /* tokens the penalties count */
    int32_t n_penalty;
    const uint32_t *allowed;        /* NULL or bitmask */
    const uint32_t *tokens;         /* NULL or bitmask: the model's tokens (ids of the tokenizer) */
} sp_dist_row;

/* Scratch for sp_accept_dist, in bytes. */
uint64_t sp_accept_dist_scratch(int32_t V);

/* z[V] = the row after penalties, bias and the masks (−inf where not allowed): what sp_accept_dist starts from. */
void sp_accept_logits(const sp_dist_row *r, int32_t V, float *z, void *scratch);

/* V is the number of ids a sample may be (rows past it are the output head's padding).
 * z[V] = the row after penalties and the masks (−inf where not allowed); probs[V] (may be NULL) = the distribution the
 * sampler draws from: one-hot at argmax z for temperature 0, else the CPU sampler's kept tokens and integer masses
 * (core/sampling.h: softmax(z / T) cut by top-k, top-p, min-p), normalized. Returns log Σ exp z (logprob of t = z[t] − it), NAN when the mask allows nothing; *argmax = the
 * most likely allowed token (lowest id on ties). */
float sp_accept_dist(const sp_dist_row *r, int32_t V, float *z, float *probs, int32_t *argmax, void *scratch);

/* The n most likely tokens of z (best first, lowest id on ties) and their log-probabilities z − lse; ids at −inf are
 * no alternative (id −1 fills what they leave). */
void sp_accept_top(const float *z, int32_t V, float lse, int32_t n, int32_t *ids, float *logprobs);

#endif
