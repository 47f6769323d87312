/* qwen3_5.h — the Qwen3.5-family hybrid forward pass (dense `qwen3_5`, MoE `qwen3_5_moe`) as native/api/ uses it. */
#ifndef SP_QWEN3_5_H
#define SP_QWEN3_5_H

#include "splash.h"

typedef struct sp_backend sp_backend;
typedef struct sp_qwen35 sp_qwen35;

/* Where a step finds sequence state: the cache's pages and slots (sizes from sp_qwen35_page/slot_bytes). */
typedef struct sp_qwen35_memory {
    float *kv;            /* n_pages pages */
    int32_t page_tokens;
    float *state;         /* n_slots slots */
} sp_qwen35_memory;

/* Loads `dir` onto `be` (which must outlive the model). quant: SPLASH_QUANT_*. */
splash_status sp_qwen35_load(const char *dir, const sp_backend *be, int32_t quant, int32_t max_step_tokens,
                             sp_qwen35 **out);
void sp_qwen35_free(sp_qwen35 *m);
void sp_qwen35_info(const sp_qwen35 *m, splash_model_info *out);
int32_t sp_qwen35_vocab(const sp_qwen35 *m);
int32_t sp_qwen35_max_step_tokens(const sp_qwen35 *m);

/* The one size table of sequence state: bytes of a KV page and of a GDN state slot. */
uint64_t sp_qwen35_page_bytes(const sp_qwen35 *m, int32_t page_tokens);
uint64_t sp_qwen35_slot_bytes(const sp_qwen35 *m);

/* Runs one step over already validated sequences (native/api/step.c checks them). */
splash_status sp_qwen35_step(sp_qwen35 *m, const sp_qwen35_memory *mem, splash_seq *seqs, int32_t n_seqs);

/* Trace hook: called with every named intermediate (name, layer or −1, rows × cols f32) in debug builds; compiled
 * out of release builds (NDEBUG). Parity tools use it to find the first layer that diverges from the reference. */
typedef void (*sp_trace_fn)(void *ctx, const char *name, int32_t layer, const float *x, int64_t rows, int64_t cols);
void sp_qwen35_set_trace(sp_qwen35 *m, sp_trace_fn fn, void *ctx);

#endif
