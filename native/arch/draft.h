/* draft.h — the seam between a target model and its drafters (mtp.c, dflash.c), and between the drafters and
 * native/api/speculate.c, which runs the speculative cycle.
 *
 * A drafter is an op table, like a backend (backends/backend.h): speculate.c loads one and calls it, never its kind.
 * It borrows the target's backend, embedding table and lm_head and runs only backend ops, so it runs wherever the
 * target runs; every buffer it is handed (rows, memory) is backend memory. It keeps its own K/V per sequence
 * position in pages beside the target's (same page ids, its own memory) and, if it needs one, a small per-sequence
 * state beside each GDN slot. Each step, every committed row of every sequence is `ingest`ed (so a page the prefix
 * cache names always holds the drafter's K/V too); `draft` proposes the next tokens of a sequence whose last token
 * (the anchor, not yet in the cache) sits at position n_past. */
#ifndef SP_ARCH_DRAFT_H
#define SP_ARCH_DRAFT_H

#include "arch/memory.h"
#include "splash.h"

#include <stdint.h>

typedef struct sp_backend sp_backend;
typedef struct sp_matrix sp_matrix;
typedef struct sp_checkpoint sp_checkpoint;
typedef struct sp_json sp_json;

typedef struct sp_draft_target {
    const sp_backend *be;
    sp_checkpoint *ck;              /* the target's checkpoint (mtp.* lives there) */
    const sp_json *text_config;     /* the target's text_config (or its root config when flat) */
    const sp_matrix *embed;         /* (vocab, H) */
    const sp_matrix *lm_head;       /* (vocab, H) */
    int32_t vocab_size, hidden_size, num_hidden_layers;
    int32_t n_tokens;               /* rows a draft may be: ids below n_tokens ... */
    const uint32_t *token_mask;     /* ... set here, or all of them when NULL (sp_qwen35_set_tokens) */
    float rms_norm_eps;
    const int32_t *quant;           /* [SPLASH_N_TENSOR_KINDS] SPLASH_QUANT_*: the drafter's matrices follow the target's */
    int32_t max_step_tokens;        /* rows one step carries: ingest is sized for it */
} sp_draft_target;

/* Committed rows of one sequence in a step: positions pos0 .. pos0 + n − 1 with their tokens and the target's
 * rows for them (MTP: final-normed hidden [n][H]; DFlash: taps [n][n_taps · H]), row stride `stride` floats. */
typedef struct sp_draft_rows {
    int32_t slot, pos0, n;
    const int32_t *tokens;
    const int32_t *pages;
    const float *rows;
    int64_t stride;
} sp_draft_rows;

/* One sequence to draft for: the anchor token sits at position n_past; propose n_draft tokens. */
typedef struct sp_draft_seq {
    int32_t slot, n_past, anchor, n_draft;
    const int32_t *pages;
} sp_draft_seq;

/* What draft j of a sequence is chosen from: the drafter's logits row and, for a drafter with a candidate selector
 * (DFlash2), the few candidates the draft must be one of (from the shaped row), with their scores: greedy takes the best-scored (the first
 * on ties), sampling draws from softmax(scores / T) over them; without candidates, the logits row is the choice. */
typedef struct sp_draft_choice {
    const float *logits;        /* [vocab], raw, host memory */
    int32_t n_cand;             /* 0: any token */
    const int32_t *cand;        /* [n_cand] token ids, best unary logit first */
    const float *scores;        /* [n_cand] */
} sp_draft_choice;

/* Picks draft token j (0-based) of sequence i (greedy or sampled; the caller keeps q) and returns it. */
typedef int32_t (*sp_draft_pick)(void *ctx, int32_t i, int32_t j, const sp_draft_choice *choice);

/* The drafter's row for draft j of sequence i as the target's sampler sees it (penalties, logit bias, −inf at ids a
 * draft may not be), valid until the next call: a candidate selector takes its candidates and their unary scores
 * from it, so its drafts follow the distribution they are judged against. */
typedef const float *(*sp_draft_shape)(void *ctx, int32_t i, int32_t j, const float *logits);

typedef struct sp_drafter sp_drafter;

/* What every drafter implements. */
typedef struct sp_drafter_ops {
    const char *name;
    void (*free)(sp_drafter *d);
    /* its K/V of page_tokens positions in pages of kv_type, and its state per sequence slot (0: none) */
    uint64_t (*page_bytes)(const sp_drafter *d, int32_t page_tokens, int32_t kv_type);
    uint64_t (*slot_bytes)(const sp_drafter *d);
    /* takes in the committed rows of a step: each sequence's rows hold the target's taps of those positions
     * (tap_layers below), or its final-normed hidden when the drafter names no taps */
    void (*ingest)(sp_drafter *d, const sp_seq_memory *mem, const sp_draft_rows *seqs, int32_t n_seqs);
    /* proposes seqs[i].n_draft tokens per sequence, calling pick for each (a drafter with a candidate selector
     * takes its candidates from the row shape gives) */
    splash_status (*draft)(sp_drafter *d, const sp_seq_memory *mem, const sp_draft_seq *seqs, int32_t n_seqs,
                           sp_draft_shape shape, sp_draft_pick pick, void *ctx);
} sp_drafter_ops;

/* The head of every drafter: its table and what the speculative cycle sizes around it. */
struct sp_drafter {
    const sp_drafter_ops *ops;
    int32_t max_draft;              /* tokens one draft proposes at most */
    int32_t block_size;             /* a block drafter's B (it drafts B − 1 per pass), else 0 */
    int32_t mask_token_id;          /* a block drafter's mask token, else −1 */
    const int32_t *tap_layers;      /* the target layers whose residual output ingest reads, in order ... */
    int32_t n_taps;                 /* ... or none: the target's final-normed hidden */
    uint64_t weight_bytes, scratch_bytes;
};

/* Loads a drafter for target t: ck is its own checkpoint, which the drafter takes (closes when freed, or at once when
 * the load fails), or NULL for one inside the target's (MTP's); max_draft 0 takes the drafter's default; up to
 * max_seqs sequences per draft call. */
typedef splash_status (*sp_drafter_load)(const sp_draft_target *t, sp_checkpoint *ck, int32_t max_draft, int32_t max_seqs,
                                         sp_drafter **out);

#endif
