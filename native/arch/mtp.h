/* mtp.h — the checkpoint's own multi-token-prediction layer (`mtp.*`) as a drafter (arch/draft.h). */
#ifndef SP_ARCH_MTP_H
#define SP_ARCH_MTP_H

#include "arch/draft.h"

/* Loads mtp.* from the target's checkpoint (a checkpoint of its own is refused): a chain of max_draft steps (0: the default) per draft. Its
 * ingest rows are the target's final-normed hidden; its slot state the last committed one. */
splash_status sp_mtp_load(const sp_draft_target *t, sp_checkpoint *ck, int32_t max_draft, int32_t max_seqs, sp_drafter **out);

#endif
