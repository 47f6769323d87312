/* ffn.c — the Qwen3.5 feed-forward block (ffn.h). */
#include "arch/ffn.h"

void sp_ffn_take(sp_scratch *at, const sp_ffn_shape *c, int64_t n, sp_ffn_scratch *s) {
    SP_TAKE(at, s->g, float, n * c->intermediate);
    SP_TAKE(at, s->u, float, n * c->intermediate);
    if (!c->moe) return;
    SP_TAKE(at, s->shared, float, n * c->hidden);
    SP_TAKE(at, s->router, float, n * c->experts);
    SP_TAKE(at, s->ids, int32_t, n * c->top_k);
    SP_TAKE(at, s->w, float, n * c->top_k);
    SP_TAKE(at, s->sg, float, n);
    SP_TAKE(at, s->moe, float, sp_moe_scratch_floats(n, c->top_k, c->hidden, c->expert_intermediate));
}

/* down(silu(gate(x)) · up(x)) → dst */
static void swiglu(const sp_backend *be, sp_ffn_scratch *s, float *dst, const sp_matrix *gate, const sp_matrix *up,
                   const sp_matrix *down, const float *x, int64_t n) {
    be->matmul_gate_up(be, s->g, s->u, gate, up, x, n);
    be->matmul(be, dst, down, s->g, n);
}

void sp_ffn_forward(const sp_backend *be, const sp_ffn_shape *c, const sp_ffn_weights *w, sp_ffn_scratch *s, float *out,
                    const float *x, int64_t n) {
    if (!c->moe) {
        swiglu(be, s, out, &w->gate_proj, &w->up_proj, &w->down_proj, x, n);
        return;
    }
    /* in an order whose independent steps a GPU runs together: the router, the shared expert's gate·up and its gate
     * (all of x), then the routing beside the shared down, then the routed experts, whose last pass adds the gated
     * shared expert */
    be->matmul(be, s->router, &w->router, x, n);
    be->matmul_gate_up(be, s->g, s->u, &w->shared_gate, &w->shared_up, x, n);
    be->matmul(be, s->sg, &w->shared_expert_gate, x, n);
    be->moe_route(be, s->ids, s->w, s->router, n, c->experts, c->top_k);
    be->matmul(be, s->shared, &w->shared_down, s->g, n);
    be->moe_experts(be, out, x, s->ids, s->w, n, &w->experts, s->moe, s->shared, s->sg);
}
