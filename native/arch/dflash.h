/* dflash.h — a z-lab DFlash or DFlash2 block-diffusion drafter conditioned on the target's hidden states (arch/draft.h). */
#ifndef SP_ARCH_DFLASH_H
#define SP_ARCH_DFLASH_H

#include "arch/draft.h"

/* Loads the drafter checkpoint ck (config.json + safetensors; taken, as arch/draft.h says) for target t: one block [anchor, mask × n_draft] per
 * draft, n_draft ≤ max_draft ≤ B − 1 (0: B − 1). sp_dflash_load takes a DFlash (v1, DFlashDraftModel) drafter,
 * sp_dflash2_load a DFlash2 one (DFlash2DraftModel: a dynamic convolution around each sublayer, the backend's
 * block_conv, and a candidate selector); a directory holding the other is refused saying which it holds, and a config
 * it cannot honour with a message naming the key. Its ingest rows are the target's taps (config
 * dflash_config.target_layer_ids, in order). */
splash_status sp_dflash_load(const sp_draft_target *t, sp_checkpoint *ck, int32_t max_draft, int32_t max_seqs, sp_drafter **out);
splash_status sp_dflash2_load(const sp_draft_target *t, sp_checkpoint *ck, int32_t max_draft, int32_t max_seqs, sp_drafter **out);

#endif
