/* ffn.c — the Qwen3.5 feed-forward block (ffn.h). */
#include "arch/ffn.h"

void sp_ffn_take(sp_scratch *at, const sp_ffn_shape *c, int64_t n, sp_ffn_scratch *s) {
    if (!c->moe) {
        SP_TAKE(at, s->g, float, n * c->intermediate);
        SP_TAKE(at, s->u, float, n * c->intermediate);
        return;
    }
    SP_TAKE(at, s->router, float, n * c->experts);
    SP_TAKE(at, s->ids, int32_t, n * c->top_k);
    SP_TAKE(at, s->w, float, n * c->top_k);
    SP_TAKE(at, s->moe, float, sp_moe_scratch_floats(n, c->top_k, c->hidden, c->expert_intermediate, c->intermediate));
}

void sp_ffn_forward(const sp_backend *be, const sp_ffn_shape *c, const sp_ffn_weights *w, sp_ffn_scratch *s, float *out,
                    const float *x, int64_t n) {
    if (!c->moe) { /* down(silu(gate(x)) · up(x)) */
        be->matmul_gate_up(be, s->g, s->u, &w->gate_proj, &w->up_proj, x, n);
        be->matmul(be, out, &w->down_proj, s->g, n);
        return;
    }
    /* routing, the routed experts and the shared one as one op, so a backend can fuse them */
    sp_moe_experts ex = w->experts;
    ex.shared_gate = &w->shared_gate, ex.shared_up = &w->shared_up, ex.shared_down = &w->shared_down;
    ex.shared_score = &w->shared_expert_gate;
    be->matmul(be, s->router, &w->router, x, n);
    be->moe(be, out, s->ids, s->w, s->router, x, n, &ex, s->moe);
}
