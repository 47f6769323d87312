/* model.h — what a loaded splash_model is, shared by the ABI files in native/api/. */
#ifndef SP_API_MODEL_H
#define SP_API_MODEL_H

#include "arch/qwen3_5.h"
#include "backends/backend.h"

#include <pthread.h>

typedef struct sp_speculator sp_speculator; /* speculate.c */
typedef struct sp_qwen35_vision sp_qwen35_vision; /* arch/qwen3_5_vision.h */

struct splash_model {
    /* Held by every call that runs on the model's backend, pool or scratch (a step, a draft, an image, a cache copy):
     * callers on different threads (the engine's step thread, the server's) take turns. */
    pthread_mutex_t lock;
    sp_backend be;         /* the arch holds a pointer to it: the model never moves */
    sp_threadpool *pool;
    sp_qwen35 *arch;
    splash_status op_status; /* be.status points here */
    sp_speculator *speculator; /* the attached drafter, or NULL */
    sp_qwen35_vision *vision; /* the checkpoint's vision tower, or NULL */
    int32_t n_caches;      /* caches alive: a drafter attaches, and the KV type changes, only before the first */
    int32_t kv_type;       /* SPLASH_KV_* of the caches */
    char backend[160];     /* splash_model_backend's text */
};

enum { SP_REFUSAL_BYTES = 256 };

struct splash_cache {
    splash_model *m;
    int32_t page_tokens, n_pages, n_slots, kv_type;
    uint64_t page_bytes, slot_bytes;
    void *kv;              /* n_pages × page_bytes */
    float *state;          /* n_slots × slot_bytes */
    /* the drafter's share, when one is attached: its K/V per page and its state per slot (splash_cache_page_bytes
     * and splash_cache_slot_bytes report the sums) */
    uint64_t draft_page_bytes, draft_slot_bytes;
    void *draft_kv;
    float *draft_state;
    /* why each sequence of the last step was refused (splash_seq.error points here), grown to the largest step */
    char (*refusals)[SP_REFUSAL_BYTES];
    int32_t n_refusals;
};

/* Where a step on this cache finds the target's sequence state. */
sp_seq_memory sp_cache_memory(const splash_cache *c);

/* A sequence's sampling settings, its logit bias among them (ids that are tokens of the model). */
splash_status sp_api_check_sampling(const splash_model *m, int32_t i, const splash_sampling *s);

/* The attached drafter's share of a page and a slot (speculate.c), its fixed bytes, and its release. */
uint64_t sp_speculator_page_bytes(const sp_speculator *s, int32_t page_tokens, int32_t kv_type);
uint64_t sp_speculator_slot_bytes(const sp_speculator *s);
void sp_speculator_add_info(const sp_speculator *s, splash_model_info *info);
void sp_speculator_free(sp_speculator *s);
/* The speculative parts of a step's sequences (splash_seq.speculate) against the drafter and the drafts of the last
 * step (under the model's lock); nothing is written. Without a drafter, any speculative part fails. */
splash_status sp_speculator_check(const splash_model *m, const splash_cache *c, const splash_seq *seqs, int32_t n_seqs);
/* splash_step with a drafter attached: the forward pass with its verify blocks, the acceptance, the drafter's ingest
 * of every committed position, and the next drafts. */
splash_status sp_speculator_step(splash_model *m, splash_cache *c, splash_seq *seqs, int32_t n_seqs);

#endif
