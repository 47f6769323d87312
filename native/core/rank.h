/* rank.h — ordering token ids by a weight (a logit or a probability), deterministically: a larger weight ranks
 * first, ties go to the lower id. The CPU sampler and speculative acceptance (draft/accept.c) both build the
 * sampling distribution with these, so a drafted token is judged against exactly the distribution the sampler
 * would have drawn from. */
#ifndef SP_CORE_RANK_H
#define SP_CORE_RANK_H

#include <stdint.h>

/* a ranks before b: larger weight, then lower id */
static inline int sp_rank_before(const float *w, int32_t a, int32_t b) { return w[a] > w[b] || (w[a] == w[b] && a < b); }

/* Sorts idx[0..n) best-first (heapsort: in place, no allocation). */
void sp_rank_sort(int32_t *idx, int64_t n, const float *w);

/* Moves the k best of idx[0..n) to its front, in no particular order (quickselect). */
void sp_rank_select(int32_t *idx, int64_t n, int64_t k, const float *w);

/* The k best ids of w[0..n) into ids[], best first (one scan keeping them in order: for small k); ids at −inf (masked
 * out) are none of them. Returns how many (at most k). */
int32_t sp_rank_top(const float *w, int64_t n, int32_t k, int32_t *ids);

#endif
