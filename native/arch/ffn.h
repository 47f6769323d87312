/* ffn.h — the Qwen3.5 feed-forward block, one home for the target's layers (qwen3_5.c) and the MTP drafter's layer
 * (mtp.c): its weights, its scratch and its forward pass. Dense: SwiGLU. MoE (HF Qwen3_5MoeSparseMoeBlock):
 *   routed = Σ_topk w_e · expert_e(x) (softmax over all experts, top k, renormalized)
 *   out = routed + sigmoid(shared_expert_gate(x)) · shared_expert(x) */
#ifndef SP_ARCH_FFN_H
#define SP_ARCH_FFN_H

#include "arch/loader.h"
#include "backends/backend.h"

#include <stdbool.h>
#include <stdint.h>

typedef struct sp_ffn_shape {
    bool moe;
    int64_t hidden;              /* H */
    int64_t intermediate;        /* dense I, or the shared expert's Is */
    int32_t experts, top_k;      /* MoE: E, k */
    int64_t expert_intermediate; /* MoE: Im */
} sp_ffn_shape;

typedef struct sp_ffn_weights {
    sp_matrix gate_proj, up_proj;     /* dense (I, H) */
    sp_matrix down_proj;              /* dense (H, I) */
    sp_matrix router;                 /* MoE (E, H) mlp.gate */
    sp_moe_experts experts;           /* E × {gate (Im, H), up (Im, H), down (H, Im)} views */
    sp_matrix shared_gate, shared_up; /* (Is, H) */
    sp_matrix shared_down;            /* (H, Is) */
    sp_matrix shared_expert_gate;     /* (1, H) */
} sp_ffn_weights;

/* N rows of it. */
typedef struct sp_ffn_scratch {
    float *g, *u;                /* dense: (N, I) */
    float *router;               /* MoE: (N, E) */
    int32_t *ids;                /* (N, k) chosen experts */
    float *w;                    /* (N, k) their weights */
    float *moe;                  /* sp_moe_scratch_floats(N, k, H, Im, Is) */
} sp_ffn_scratch;

/* Takes the scratch for n rows from `at` (a layout pass: NULL pointers when it only measures). */
void sp_ffn_take(sp_scratch *at, const sp_ffn_shape *c, int64_t n, sp_ffn_scratch *s);

/* The block over n rows, x → out (H wide each). */
void sp_ffn_forward(const sp_backend *be, const sp_ffn_shape *c, const sp_ffn_weights *w, sp_ffn_scratch *s, float *out,
                    const float *x, int64_t n);

#endif
