#version 460
// attention_prep.comp — the gated attention's inputs in one pass, a workgroup per (row, head) of n rows × (heads query
// heads, then kv_heads key heads):
//   query head: its row of qg is [query | gate]; q = rope(rmsnorm(query) · q_norm), gate = the gate half
//   key head:   k = rope(rmsnorm(k) · k_norm), in place
// norm.comp's arithmetic at the workgroup size it takes for rows of head_dim (spec constant 0, set by the host), then
// rope.glsl's: the results are those of copy_rows, rmsnorm and rope in turn. Spec constant 1: head_dim (≤ 256).
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
#include "rope.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint HD = 256;
#define HD_MAX 256

layout(push_constant) uniform P {
    uint64_t q, gate, qg, k, q_norm, k_norm, pos, inv_freq;
    uint n, heads, kv_heads, half_rot;
    int section0, section1, section2;  // all 0: text positions [n]
    float eps;
} p;

shared float ys[HD_MAX];

void main() {
    uint g = flat_group(), per = p.heads + p.kv_heads;
    if (g >= p.n * per) return;
    uint tid = gl_LocalInvocationID.x, wg = gl_WorkGroupSize.x, row = g / per, head = g % per;
    bool query = head < p.heads;
    uint64_t src = query ? p.qg + uint64_t((row * p.heads + head) * 2u * HD) * 4ul
                         : p.k + uint64_t((row * p.kv_heads + head - p.heads) * HD) * 4ul;
    uint64_t dst = query ? p.q + uint64_t((row * p.heads + head) * HD) * 4ul : src;
    Floats x = Floats(src), w = Floats(query ? p.q_norm : p.k_norm), y = Floats(dst);
    if (query) {
        Floats gate = Floats(p.gate + uint64_t((row * p.heads + head) * HD) * 4ul);
        for (uint j = tid; j < HD; j += wg) gate.v[j] = x.v[HD + j];
    }
    float ss = 0.0;
    for (uint j = tid; j < HD; j += wg) ss += x.v[j] * x.v[j];
    float r = inversesqrt(workgroup_sum(ss) / float(HD) + p.eps);
    for (uint j = tid; j < HD; j += wg) ys[j] = (x.v[j] * r) * w.v[j];
    barrier();
    for (uint f = tid; f < p.half_rot; f += wg) {
        int at = rope_position(p.pos, row, f, p.section0, p.section1, p.section2);
        vec2 v = rope_pair(ys[f], ys[f + p.half_rot], at, Floats(p.inv_freq).v[f]);
        y.v[f] = v.x;
        y.v[f + p.half_rot] = v.y;
    }
    for (uint j = 2u * p.half_rot + tid; j < HD; j += wg) y.v[j] = ys[j];
}
