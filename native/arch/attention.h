/* attention.h — the scratch of the Qwen3.5 gated full-attention block, one layout for the target's attention layers
 * (qwen3_5.c) and the MTP layer (mtp.c): q_proj gives each head [query | gate]; the output is the attention times
 * sigmoid(gate). The two forward passes differ in where their rows' K/V go (a step's sequences vs drafting pairs). */
#ifndef SP_ARCH_ATTENTION_H
#define SP_ARCH_ATTENTION_H

#include "arch/loader.h"

#include <stdint.h>

/* N rows of it. */
typedef struct sp_attn_scratch {
    float *qg;                   /* (N, Hq, 2·hd) q_proj output */
    float *q, *gate;             /* (N, Hq, hd) */
    float *k, *v;                /* (N, Hkv, hd) */
    float *att;                  /* (N, Hq, hd) */
} sp_attn_scratch;

/* Takes the scratch for n rows of Hq query and Hkv key/value heads of hd from `at` (a layout pass). */
static inline void sp_attn_take(sp_scratch *at, int64_t n, int64_t Hq, int64_t Hkv, int64_t hd, sp_attn_scratch *s) {
    SP_TAKE(at, s->qg, float, n * Hq * 2 * hd);
    SP_TAKE(at, s->q, float, n * Hq * hd);
    SP_TAKE(at, s->gate, float, n * Hq * hd);
    SP_TAKE(at, s->k, float, n * Hkv * hd);
    SP_TAKE(at, s->v, float, n * Hkv * hd);
    SP_TAKE(at, s->att, float, n * Hq * hd);
}

#endif
