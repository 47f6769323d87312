/* memory.h — where a forward pass finds sequence state: the cache's K/V pages and per-slot recurrent state. The
 * target model (sizes from sp_qwen35_page/slot_bytes) and its drafter (its own pages under the same ids and
 * page_tokens, in the target's KV type) each get their share of the cache (native/api/cache.c) in this one shape. */
#ifndef SP_ARCH_MEMORY_H
#define SP_ARCH_MEMORY_H

#include "backends/backend.h"

#include <stdint.h>

typedef struct sp_seq_memory {
    void *kv;             /* n_pages pages */
    int64_t page_bytes;   /* from one page to the next, padded */
    int32_t page_tokens;
    int32_t kv_type;      /* SPLASH_KV_* of the pages */
    float *state;         /* n_slots slots */
} sp_seq_memory;

/* Attention layer `layer`'s view of the pages a sequence's page table names. */
static inline sp_kv_view sp_memory_kv(const sp_seq_memory *mem, int32_t layer, int32_t n_kv_heads, int32_t head_dim,
                                      const int32_t *pages) {
    return sp_kv_layer_view(mem->kv, mem->page_bytes, mem->kv_type, layer, n_kv_heads, head_dim, mem->page_tokens,
                            pages);
}

#endif
