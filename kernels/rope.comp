#version 460
// rope.comp — partial NeoX rotary embedding in place on x [n][heads][head_dim]: the pairs (i, i + rot/2) of the
// first rot dims of every head; with MRoPE (sections non-zero) frequency i reads position stream i % 3 while
// i < 3 · section[i % 3], else stream 0 (T). pos: [n] or [n][3]. One invocation per (row, head, pair).
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

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
    Ints pos = Ints(p.pos);
    int at;
    if (p.section0 == 0 && p.section1 == 0 && p.section2 == 0) at = pos.v[row];
    else {
        uint s = f % 3u;
        int section = s == 1u ? p.section1 : p.section2;
        at = pos.v[row * 3u + (s != 0u && int(f) < 3 * section ? s : 0u)];
    }
    // fp32 angle (as the reference), reduced to [-π, π] before cos/sin: Vulkan bounds their error only there (2^-11),
    // and NVIDIA's driver takes positions in the tens of thousands 5e-4 off without it. 2π in three parts (the first
    // with few bits, so k · C1 is exact; Cody–Waite), each step one fused multiply-add.
    float ang = float(at) * Floats(p.inv_freq).v[f];
    float k = round(ang * 0.15915494309189535), r = fma(-k, 6.28125, ang);
    r = fma(-k, 0.0019353071693331003, r);
    r = fma(-k, 1.0253131677018246e-11, r);
    float c = cos(r), s = sin(r);
    Floats x = Floats(p.x + uint64_t((row * p.heads + head) * p.head_dim) * 4ul);
    float x1 = x.v[f], x2 = x.v[f + p.half_rot];
    x.v[f] = x1 * c - x2 * s;
    x.v[f + p.half_rot] = x2 * c + x1 * s;
}
