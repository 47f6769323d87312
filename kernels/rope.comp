#version 460
// rope.comp — partial NeoX rotary embedding in place on x [n][heads][head_dim] (rope.glsl): the pairs (i, i + rot/2)
// of the first rot dims of every head. One invocation per (row, head, pair).
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
#include "rope.glsl"

layout(local_size_x_id = 0) in;

layout(push_constant) uniform P {
    uint64_t x, pos, inv_freq;
    uint n, heads, head_dim, half_rot;
    int section0, section1, section2;  // all 0: text positions [n]
} p;

void main() {
    uint i = flat_group() * gl_WorkGroupSize.x + gl_LocalInvocationID.x;
    if (i >= p.n * p.heads * p.half_rot) return;
    uint f = i % p.half_rot, head = (i / p.half_rot) % p.heads, row = i / (p.half_rot * p.heads);
    int at = rope_position(p.pos, row, f, p.section0, p.section1, p.section2);
    Floats x = Floats(p.x + uint64_t((row * p.heads + head) * p.head_dim) * 4ul);
    vec2 y = rope_pair(x.v[f], x.v[f + p.half_rot], at, Floats(p.inv_freq).v[f]);
    x.v[f] = y.x;
    x.v[f + p.half_rot] = y.y;
}
