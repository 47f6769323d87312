/* mask.h — token bitmasks (bit t of word t >> 5 set = id t is in): a grammar's allowed tokens and the model's
 * tokens (ids the tokenizer has, splash_load_options.tokens). The CPU sampler, speculative acceptance and the
 * step's argument checks read them the same way through these. */
#ifndef SP_CORE_MASK_H
#define SP_CORE_MASK_H

#include <stdint.h>

/* Word w of the intersection of two masks, either of which may be NULL (every id). */
static inline uint32_t sp_mask_word(const uint32_t *a, const uint32_t *b, int32_t w) {
    return (a ? a[w] : ~0u) & (b ? b[w] : ~0u);
}

/* z[t] = −inf for every id t < V outside the intersection of `a` and `b` (NULL: every id). */
void sp_mask_row(float *z, int32_t V, const uint32_t *a, const uint32_t *b);

/* Whether the intersection of `a` and `b` holds any id below V. */
int sp_mask_any(int32_t V, const uint32_t *a, const uint32_t *b);

#endif
