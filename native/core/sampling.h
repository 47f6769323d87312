/* sampling.h — the row a sampler draws from: the logits after the penalties, the bias and the masks. The CPU
 * sampler (backends/cpu/sample.c) and speculative acceptance (draft/accept.c) build it the same way through this. */
#ifndef SP_CORE_SAMPLING_H
#define SP_CORE_SAMPLING_H

#include "splash.h"

#include <stdint.h>

/* Bytes of the scratch sp_sampling_row needs for a vocabulary of V (a bitmask of the penalized ids). */
static inline uint64_t sp_sampling_row_scratch(int32_t V) { return ((uint64_t)V + 31) / 32 * sizeof(uint32_t); }

/* z[V] = logits with s's repetition, presence and frequency penalties over the n_penalty tokens (each distinct id
 * once for repetition and presence, every occurrence for frequency), then s's bias, then −inf outside the
 * intersection of `allowed` and `tokens` (NULL: every id). seen: sp_sampling_row_scratch(V) bytes. */
void sp_sampling_row(float *z, const float *logits, int32_t V, const splash_sampling *s, const int32_t *penalty,
                     int32_t n_penalty, const uint32_t *allowed, const uint32_t *tokens, uint32_t *seen);

/* min-p: the candidates idx[0..c) keep those of weight ≥ min_p (weights relative to the largest, which is 1), in
 * order; at least the first. Returns how many are kept. */
static inline int64_t sp_min_p_keep(int32_t *idx, int64_t c, const float *w, float min_p) {
    int64_t m = 0;
    for (int64_t i = 0; i < c; i++)
        if (w[idx[i]] >= min_p) idx[m++] = idx[i];
    return m > 0 ? m : 1;
}

#endif
