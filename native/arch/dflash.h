/* dflash.h — a z-lab DFlash or DFlash2 block-diffusion drafter conditioned on the target's hidden states (arch/draft.h). */
#ifndef SP_ARCH_DFLASH_H
#define SP_ARCH_DFLASH_H

#include "arch/draft.h"

typedef struct sp_dflash sp_dflash;

/* Loads the drafter directory `dir` (config.json + safetensors) for target t; drafts for up to max_seqs sequences
 * per call. version: 1 (DFlashDraftModel) or 2 (DFlash2DraftModel); a directory holding the other is refused saying
 * which it holds, and a config it cannot honour with a message naming the key. */
splash_status sp_dflash_load(const char *dir, const sp_draft_target *t, int32_t version, int32_t max_seqs, sp_dflash **out);
void sp_dflash_free(sp_dflash *d);

int32_t sp_dflash_block_size(const sp_dflash *d);     /* B: one pass drafts B − 1 tokens */
int32_t sp_dflash_mask_token(const sp_dflash *d);
/* The target layers whose residual output the drafter reads (config dflash_config.target_layer_ids, in order). */
const int32_t *sp_dflash_taps(const sp_dflash *d, int32_t *n_taps);
uint64_t sp_dflash_page_bytes(const sp_dflash *d, int32_t page_tokens, int32_t kv_type); /* context K/V of every drafter layer */
uint64_t sp_dflash_weight_bytes(const sp_dflash *d);
uint64_t sp_dflash_scratch_bytes(const sp_dflash *d);

/* rows: the target's taps of each committed position ([n][n_taps · H]). */
void sp_dflash_ingest(sp_dflash *d, const sp_draft_memory *mem, const sp_draft_rows *seqs, int32_t n_seqs);
/* One block per sequence, [anchor, mask × n_draft] at n_past … (n_draft ≤ B − 1); picks the tokens of rows 1 … in
 * order (DFlash2: among each row's selector candidates, scored against the previous pick). */
splash_status sp_dflash_draft(sp_dflash *d, const sp_draft_memory *mem, const sp_draft_seq *seqs, int32_t n_seqs,
                              sp_draft_shape shape, sp_draft_pick pick, void *ctx);

#endif
