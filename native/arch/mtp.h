/* mtp.h — the checkpoint's own multi-token-prediction layer (`mtp.*`) as a drafter (arch/draft.h). */
#ifndef SP_ARCH_MTP_H
#define SP_ARCH_MTP_H

#include "arch/draft.h"

typedef struct sp_mtp sp_mtp;

/* Loads mtp.* from the target's checkpoint; drafts up to max_draft tokens for up to max_seqs sequences per call. */
splash_status sp_mtp_load(const sp_draft_target *t, int32_t max_draft, int32_t max_seqs, sp_mtp **out);
void sp_mtp_free(sp_mtp *d);

uint64_t sp_mtp_page_bytes(const sp_mtp *d, int32_t page_tokens, int32_t kv_type); /* its K/V of page_tokens positions */
uint64_t sp_mtp_slot_bytes(const sp_mtp *d);                      /* the last committed hidden of a sequence */
uint64_t sp_mtp_weight_bytes(const sp_mtp *d);
uint64_t sp_mtp_scratch_bytes(const sp_mtp *d);

/* rows: the target's final-normed hidden of each committed position. */
void sp_mtp_ingest(sp_mtp *d, const sp_draft_memory *mem, const sp_draft_rows *seqs, int32_t n_seqs);
/* Chains n_draft MTP steps per sequence (n_past ≥ 1), calling pick for each token. */
splash_status sp_mtp_draft(sp_mtp *d, const sp_draft_memory *mem, const sp_draft_seq *seqs, int32_t n_seqs,
                           sp_draft_pick pick, void *ctx);

#endif
