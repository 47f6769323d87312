#version 460
// moe.comp — routing and the bookkeeping around the grouped expert matmuls (define STAGE):
//   ROUTE    ids, w [n][k] from router logits [n][E]: softmax in fp32, top k (ties to the lower id), renormalized.
//            One workgroup per token.
//   PLAN     groups the n·k (token, slot) pairs by expert (counting sort) and cuts each expert's pairs into tiles
//            of ≤ tile pairs (the NMAX of the matmul.comp variant that runs them); writes the two indirect dispatch
//            sizes. One workgroup.
//   COMBINE  y[t] = Σ_k w[t][k] · yo[t·k + slot] in ascending expert order (the CPU's and HF's order), then, where
//            shared_y is set, + sigmoid(shared_gate[t]) · shared_y[t] (the gated shared expert). One workgroup per token.
// Plan buffer (ints): [0..3) dispatch (tiles, row blocks of gate/up, 1), [3..6) dispatch (tiles, row blocks of
// down, 1), [8 ..) tiles (expert, start, count) × max_tiles, then the pair order [n·k] at 8 + 3 · max_tiles.
// The order inside one expert's run depends on atomics, which changes nothing: each pair is computed alone.
// Spec constant 0: workgroup size (≤ 256). E ≤ 1024, k ≤ 64.
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(local_size_x_id = 0) in;

#define ROUTE 0
#define PLAN 1
#define COMBINE 2
#define E_MAX 1024
#define K_MAX 64

layout(push_constant) uniform P {
    uint64_t ids, w, src, dst, plan;  // ROUTE: src = logits; COMBINE: src = yo, dst = y
    uint64_t shared_y, shared_gate;   // COMBINE: the shared expert's output [n][d] and gate logits [n], or 0
    uint n, n_experts, top_k, d;      // d: COMBINE row length; PLAN: row blocks of gate/up
    uint down_blocks, max_tiles, tile;
} p;

#if STAGE == ROUTE
shared uint chosen[K_MAX];
void main() {
    uint t = flat_group(), tid = gl_LocalInvocationID.x, wg = gl_WorkGroupSize.x;
    if (t >= p.n) return;
    Floats l = Floats(p.src + uint64_t(t * p.n_experts) * 4ul);
    float mx = -1.0 / 0.0;
    for (uint e = tid; e < p.n_experts; e += wg) mx = max(mx, l.v[e]);
    mx = workgroup_max(mx);
    float sum = 0.0;
    for (uint e = tid; e < p.n_experts; e += wg) sum += exp(l.v[e] - mx);
    sum = workgroup_sum(sum);
    for (uint j = 0u; j < p.top_k; j++) {
        float best = -1.0 / 0.0;
        uint arg = 0xffffffffu;
        for (uint e = tid; e < p.n_experts; e += wg) {
            bool taken = false;
            for (uint q = 0u; q < j; q++) taken = taken || chosen[q] == e;
            if (!taken && (arg == 0xffffffffu || l.v[e] > best)) best = l.v[e], arg = e;
        }
        float top = workgroup_max(arg == 0xffffffffu ? -1.0 / 0.0 : best);
        uint e = workgroup_min_uint(arg != 0xffffffffu && best == top ? arg : 0xffffffffu);
        if (tid == 0u) chosen[j] = e;
        barrier();
    }
    if (tid == 0u) {
        float s = 0.0, wj[K_MAX];
        for (uint j = 0u; j < p.top_k; j++) {
            wj[j] = exp(l.v[chosen[j]] - mx) / sum;
            s += wj[j];
        }
        for (uint j = 0u; j < p.top_k; j++) {
            Ints(p.ids).v[t * p.top_k + j] = int(chosen[j]);
            Floats(p.w).v[t * p.top_k + j] = wj[j] / s;
        }
    }
}
#elif STAGE == PLAN
shared int count[E_MAX], offs[E_MAX];
void main() {
    uint tid = gl_LocalInvocationID.x, wg = gl_WorkGroupSize.x, pairs = p.n * p.top_k;
    Ints ids = Ints(p.ids), plan = Ints(p.plan);
    uint order_at = 8u + 3u * p.max_tiles;
    for (uint e = tid; e < p.n_experts; e += wg) count[e] = 0;
    barrier();
    for (uint q = tid; q < pairs; q += wg) atomicAdd(count[ids.v[q]], 1);
    barrier();
    if (tid == 0u) {
        int at = 0, tiles = 0;
        for (uint e = 0u; e < p.n_experts; e++) {
            offs[e] = at;
            for (int s = 0; s < count[e]; s += int(p.tile)) {
                plan.v[8 + 3 * tiles] = int(e);
                plan.v[8 + 3 * tiles + 1] = at + s;
                plan.v[8 + 3 * tiles + 2] = min(int(p.tile), count[e] - s);
                tiles++;
            }
            at += count[e];
            count[e] = 0;
        }
        plan.v[0] = tiles;
        plan.v[1] = int(p.d);
        plan.v[2] = 1;
        plan.v[3] = tiles;
        plan.v[4] = int(p.down_blocks);
        plan.v[5] = 1;
    }
    barrier();
    for (uint q = tid; q < pairs; q += wg) {
        int e = ids.v[q];
        int slot = atomicAdd(count[e], 1);
        plan.v[order_at + uint(offs[e] + slot)] = int(q);
    }
}
#else
shared uint slot_order[K_MAX];
void main() {
    uint t = flat_group(), tid = gl_LocalInvocationID.x;
    if (t >= p.n) return;
    Ints ids = Ints(p.ids);
    if (tid == 0u) {  // the k slots sorted by expert id (insertion sort, k is small)
        for (uint j = 0u; j < p.top_k; j++) {
            uint i = j;
            while (i > 0u && ids.v[t * p.top_k + slot_order[i - 1u]] > ids.v[t * p.top_k + j]) {
                slot_order[i] = slot_order[i - 1u];
                i--;
            }
            slot_order[i] = j;
        }
    }
    barrier();
    Floats w = Floats(p.w), yo = Floats(p.src), y = Floats(p.dst);
    float gate = p.shared_y != 0ul ? sigmoid(Floats(p.shared_gate).v[t]) : 0.0;
    for (uint c = tid; c < p.d; c += gl_WorkGroupSize.x) {
        float acc = 0.0;
        for (uint j = 0u; j < p.top_k; j++) {
            uint q = t * p.top_k + slot_order[j];
            acc += yo.v[q * p.d + c] * w.v[q];
        }
        if (p.shared_y != 0ul) acc += gate * Floats(p.shared_y).v[t * p.d + c];
        y.v[t * p.d + c] = acc;
    }
}
#endif
