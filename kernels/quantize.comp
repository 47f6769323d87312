#version 460
// quantize.comp — rows of x to int8 per group of 32 for the integer-dot GEMV (matmul.comp DOT), with the bits of the
// CPU backend's quantizer (quant8.glsl). Output row j at q + j · q_stride: int8 q[nbp · 32], then (d, s) as two f32 per
// group; nbp = nb rounded up to even (a Q4 chunk pairs two groups), the padding group zero. One invocation per group.
// Rows 16-byte aligned (q_stride is a multiple of 80).
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
#include "quant8.glsl"

layout(local_size_x = 64) in;

layout(push_constant) uniform P {
    uint64_t x;      // [n][x_stride] f32
    uint64_t q;      // [n][q_stride bytes]
    uint cols, n, x_stride, q_stride;
} p;

void main() {
    uint nb = (p.cols + QK - 1u) / QK, nbp = (nb + 1u) / 2u * 2u, g = flat_group() * gl_WorkGroupSize.x + gl_LocalInvocationID.x;
    if (g >= p.n * nbp) return;
    uint j = g / nbp, b = g % nbp;
    Vec4s xv = Vec4s(p.x + uint64_t(j * p.x_stride) * 4ul);
    vec4 x[8];
    [[unroll]] for (uint k = 0u; k < 8u; k++) {
        uint c = b * QK + 4u * k;
        x[k] = c < p.cols ? xv.v[c >> 2] : vec4(0.0);  // cols % 4 == 0: a vec4 is all in or all out
    }
    uint words[8];
    float d, s;
    quant8_group(x, words, d, s);
    // whole vectors out: scalar stores 32 bytes apart in consecutive lanes would touch a line per lane each
    uint64_t row = p.q + uint64_t(j) * uint64_t(p.q_stride);
    Uvec4Out(row + uint64_t(b * QK)).v[0] = uvec4(words[0], words[1], words[2], words[3]);
    Uvec4Out(row + uint64_t(b * QK)).v[1] = uvec4(words[4], words[5], words[6], words[7]);
    Vec2Out(row + uint64_t(nbp * QK)).v[b] = vec2(d, s);
}
