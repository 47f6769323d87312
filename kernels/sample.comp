#version 460
// sample.comp — what greedy decoding needs from a logits row, without copying the row to the host:
//   stats[j] = (argmax z, max z, Σ exp(z − max z))   over the ids row j may take, ties to the lowest id
// so token = argmax and its log-probability = −log Σ. One workgroup per row; rows[j] holds row j's address, masks[2j]
// and masks[2j + 1] the addresses of its allowed-token bitmask (a grammar's) and of the model's token bitmask, each 0
// for none: an id whose bit is clear in either is left out of the argmax and the sum.
// Spec constant 0: workgroup size (≤ 256).
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(local_size_x_id = 0) in;

layout(push_constant) uniform P {
    uint64_t rows, stats, masks;
    uint n, vocab;
} p;

bool bit_set(uint64_t mask, uint t) {
    return mask == 0ul || ((Uints(mask).v[t >> 5] >> (t & 31u)) & 1u) != 0u;
}

void main() {
    uint j = flat_group(), tid = gl_LocalInvocationID.x, wg = gl_WorkGroupSize.x;
    if (j >= p.n) return;
    Floats z = Floats(Addrs(p.rows).v[j]);
    uint64_t allowed = Addrs(p.masks).v[2u * j], tokens = Addrs(p.masks).v[2u * j + 1u];
    float best = -1.0 / 0.0;
    uint arg = 0xffffffffu;
    for (uint t = tid; t < p.vocab; t += wg)
        if (bit_set(allowed, t) && bit_set(tokens, t) && (arg == 0xffffffffu || z.v[t] > best)) best = z.v[t], arg = t;
    float mx = workgroup_max(best);
    uint a = workgroup_min_uint(best == mx ? arg : 0xffffffffu);
    float s = 0.0;
    for (uint t = tid; t < p.vocab; t += wg)
        if (bit_set(allowed, t) && bit_set(tokens, t)) s += exp(z.v[t] - mx);
    s = workgroup_sum(s);
    if (tid == 0u) {
        Floats st = Floats(p.stats);
        st.v[3u * j] = uintBitsToFloat(a);
        st.v[3u * j + 1u] = mx;
        st.v[3u * j + 2u] = s;
    }
}
