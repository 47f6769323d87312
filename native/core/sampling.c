#include "core/sampling.h"

#include "core/mask.h"

#include <string.h>

void sp_sampling_row(float *z, const float *logits, int32_t V, const splash_sampling *s, const int32_t *penalty,
                     int32_t n_penalty, const uint32_t *allowed, const uint32_t *tokens, uint32_t *seen) {
    memcpy(z, logits, sizeof(float) * (size_t)V);
    int rep = s->repetition_penalty != 1.0f && s->repetition_penalty > 0;
    if (rep || s->presence_penalty != 0 || s->frequency_penalty != 0) {
        memset(seen, 0, (size_t)sp_sampling_row_scratch(V));
        for (int32_t i = 0; i < n_penalty; i++) {
            int32_t t = penalty[i];
            if (t < 0 || t >= V) continue;
            if (!(seen[t >> 5] & (1u << (t & 31)))) {
                seen[t >> 5] |= 1u << (t & 31);
                if (rep) z[t] = z[t] > 0 ? z[t] / s->repetition_penalty : z[t] * s->repetition_penalty;
                z[t] -= s->presence_penalty;
            }
            z[t] -= s->frequency_penalty;
        }
    }
    for (int32_t k = 0; k < s->n_bias; k++) z[s->bias_ids[k]] += s->bias[k];
    sp_mask_row(z, V, allowed, tokens);
}
