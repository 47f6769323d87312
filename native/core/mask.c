#include "core/mask.h"

#include <math.h>

void sp_mask_row(float *z, int32_t V, const uint32_t *a, const uint32_t *b) {
    if (!a && !b) return;
    for (int32_t w = 0; w < (V + 31) / 32; w++) {
        uint32_t keep = sp_mask_word(a, b, w);
        if (keep == ~0u) continue;
        for (int32_t t = w * 32; t < V && t < w * 32 + 32; t++)
            if (!((keep >> (t & 31)) & 1)) z[t] = -INFINITY;
    }
}

int sp_mask_any(int32_t V, const uint32_t *a, const uint32_t *b) {
    for (int32_t w = 0; w < V / 32; w++)
        if (sp_mask_word(a, b, w)) return 1;
    return V % 32 && (sp_mask_word(a, b, V / 32) & ((1u << (V % 32)) - 1)) != 0;
}
