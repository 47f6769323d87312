/* qwen3_5.h — the Qwen3.5-family hybrid forward pass (dense `qwen3_5`, MoE `qwen3_5_moe`) as native/api/ uses it. */
#ifndef SP_QWEN3_5_H
#define SP_QWEN3_5_H

#include "arch/memory.h"
#include "splash.h"

typedef struct sp_backend sp_backend;
typedef struct sp_qwen35 sp_qwen35;

/* Loads checkpoint ck onto `be` (which must outlive the model); the model takes ck (closes it when freed, or at once
 * when the load fails). quant: [SPLASH_N_TENSOR_KINDS] SPLASH_QUANT_* per tensor kind, copied (NULL: all as stored). */
typedef struct sp_checkpoint sp_checkpoint;
splash_status sp_qwen35_load(sp_checkpoint *ck, const sp_backend *be, const int32_t *quant, int32_t max_step_tokens,
                             sp_qwen35 **out);
void sp_qwen35_free(sp_qwen35 *m);
/* The rows a sample may choose (splash_load_options.n_tokens and tokens; n_tokens 0 = every row): set once, at load.
 * tokens_of reports them: n_tokens, and the mask of ids below it that are tokens, NULL when all of them are. */
splash_status sp_qwen35_set_tokens(sp_qwen35 *m, int32_t n_tokens, const uint32_t *tokens);
void sp_qwen35_tokens(const sp_qwen35 *m, int32_t *n_tokens, const uint32_t **mask);
void sp_qwen35_info(const sp_qwen35 *m, splash_model_info *out); /* with an f32 KV cache */

/* The one size table of sequence state: bytes of a KV page (in KV type SPLASH_KV_*) and of a GDN state slot. */
uint64_t sp_qwen35_page_bytes(const sp_qwen35 *m, int32_t page_tokens, int32_t kv_type);
uint64_t sp_qwen35_slot_bytes(const sp_qwen35 *m);

/* Runs one step over already validated sequences (native/api/step.c checks them). */
splash_status sp_qwen35_step(sp_qwen35 *m, const sp_seq_memory *mem, splash_seq *seqs, int32_t n_seqs);

/* ---- speculative decoding (native/api/speculate.c) ------------------------------------------------------------- */

/* What a speculative step asks besides the ordinary one (each field may be NULL / 0). Rows are the step's rows in
 * sequence order (sequence i's rows follow sequence i − 1's). */
typedef struct sp_qwen35_speculate {
    const int32_t *tap_layers;  /* DFlash taps: layer ids whose residual output (after the layer, before the final */
    int32_t n_taps;             /* norm when it is the last layer) is copied to taps */
    float *taps;                /* out [rows][n_taps][H] */
    float *normed;              /* out [rows][H]: every row after the final norm (MTP's hidden input) */
    const uint8_t *verify;      /* [n_seqs]: 1 = a verify block whose GDN state stays as it was; its inputs are kept
                                   and sp_qwen35_commit folds the accepted rows in */
    float *logits;              /* out, backend memory [verify rows][vocab]: every row of the verify blocks, in order
                                   (they stay on the device; a verify sequence asks for no logits of its own) */
} sp_qwen35_speculate;

splash_status sp_qwen35_step_speculate(sp_qwen35 *m, const sp_seq_memory *mem, splash_seq *seqs, int32_t n_seqs,
                                       const sp_qwen35_speculate *sp);
/* Room for up to `blocks` verify blocks of `rows` rows in all in one step (the block inputs kept for the replay, a
 * GDN layer's state per block); returns the bytes. */
splash_status sp_qwen35_reserve_verify(sp_qwen35 *m, int32_t rows, int32_t blocks, uint64_t *bytes);
/* A verify block to fold in: the first n_keep rows of the block whose kept rows start at kept_row (the step keeps
 * verify blocks' rows in sequence order: kept_row = Σ n_tokens of the verify sequences before it), into slot's state. */
typedef struct sp_qwen35_commit_block {
    int32_t slot, n_keep;
    int64_t kept_row;
} sp_qwen35_commit_block;
/* After a step with sp->verify: replays each block's accepted rows into its slot's GDN state (left as it was before
 * the step), so the state equals what token-by-token decoding of those rows would have left; the blocks' replays run
 * at once. Uses the step's scratch: call it after the step, before the next one. */
void sp_qwen35_commit(sp_qwen35 *m, const sp_seq_memory *mem, const sp_qwen35_commit_block *blocks, int32_t n);

/* What a drafter borrows from the target (arch/draft.h). */
typedef struct sp_draft_target sp_draft_target;
void sp_qwen35_draft_target(const sp_qwen35 *m, sp_draft_target *out);

/* Trace hook: called with every named intermediate (name, layer or −1, rows × cols f32) in debug builds; compiled
 * out of release builds (NDEBUG). Parity tools use it to find the first layer that diverges from the reference. */
typedef void (*sp_trace_fn)(void *ctx, const char *name, int32_t layer, const float *x, int64_t rows, int64_t cols);
void sp_qwen35_set_trace(sp_qwen35 *m, sp_trace_fn fn, void *ctx);

#endif
