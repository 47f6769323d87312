/* model.h — what a loaded splash_model is, shared by the ABI files in native/api/. */
#ifndef SP_API_MODEL_H
#define SP_API_MODEL_H

#include "arch/qwen3_5.h"
#include "backends/backend.h"

struct splash_model {
    sp_backend be;         /* the arch holds a pointer to it: the model never moves */
    sp_threadpool *pool;
    sp_qwen35 *arch;
    splash_status op_status; /* be.status points here */
};

struct splash_cache {
    splash_model *m;
    int32_t page_tokens, n_pages, n_slots;
    uint64_t page_bytes, slot_bytes;
    float *kv;             /* n_pages × page_bytes */
    float *state;          /* n_slots × slot_bytes */
};

#endif
