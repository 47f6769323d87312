/* dflash.h — a z-lab DFlash (v1) block-diffusion drafter conditioned on the target's hidden states (arch/draft.h). */
#ifndef SP_ARCH_DFLASH_H
#define SP_ARCH_DFLASH_H

#include "arch/draft.h"

/* Loads the drafter directory `dir` (config.json + safetensors) for target t: one block [anchor, mask × n_draft] per
 * draft, n_draft ≤ max_draft ≤ B − 1 (0: B − 1). Refuses DFlash2 drafters and configs it cannot honour with a
 * message naming the key. Its ingest rows are the target's taps (config dflash_config.target_layer_ids, in order). */
splash_status sp_dflash_load(const sp_draft_target *t, const char *dir, int32_t max_draft, int32_t max_seqs, sp_drafter **out);

#endif
