#version 460
// block_conv.comp — DFlash2's grouped dynamic causal convolution over blocks of rows, in place (backends/backend.h
// block_conv; the CPU reference is backends/cpu/conv.c): row t of a block becomes
//   y_t[c] = Σ_{o < K, o ≤ t} (base[o][c] + dyn_t[o][c / G]) · x_{t−o}[c]
// One invocation per (block, channel) walks the block's rows last to first, so x_{t−o} is still the input when row t
// reads it, and no other invocation touches its channel. Spec constant 0: workgroup size.
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(local_size_x_id = 0) in;

layout(push_constant) uniform P {
    uint64_t x, dyn, base, blocks;  // blocks: [n_blocks][2] ints (first row, rows)
    uint H, K, G, dyn_stride, n_blocks;
} p;

void main() {
    uint i = flat_group() * gl_WorkGroupSize.x + gl_LocalInvocationID.x;
    if (i >= p.n_blocks * p.H) return;
    uint b = i / p.H, c = i % p.H, groups = p.H / p.G;
    Floats x = Floats(p.x), dyn = Floats(p.dyn), base = Floats(p.base);
    uint row0 = uint(Ints(p.blocks).v[2u * b]), len = uint(Ints(p.blocks).v[2u * b + 1u]);
    for (uint t = len; t-- > 0u;) {
        uint row = row0 + t;
        float acc = 0.0;
        for (uint o = 0u; o < p.K && o <= t; o++)
            acc += (base.v[o * p.H + c] + dyn.v[row * p.dyn_stride + o * groups + c / p.G]) * x.v[(row - o) * p.H + c];
        x.v[row * p.H + c] = acc;
    }
}
