#version 460
// conv.comp — the GDN's causal depthwise conv + SiLU with its carried tail, one invocation per channel:
//   y[t][c] = silu(Σ_j w[c][j] · xin[t + j][c]),  xin = tail (K−1 rows) ; x (n rows)
//   tail ← the last K−1 rows of xin (raw, pre-conv values)
// TAIL 1: the tail update alone, of channels [0, p.updated) (the q and k channels the fused GDN core leaves, gdn.comp).
// Spec constant 0: workgroup size. K ≤ 16.
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
#ifndef TAIL
#define TAIL 0
#endif

layout(local_size_x_id = 0) in;

layout(push_constant) uniform P {
    uint64_t y, x, w, tail;
    uint n, channels, kernel;  // channels: of a row
#if TAIL
    uint updated;
#endif
} p;

void main() {
    uint c = flat_group() * gl_WorkGroupSize.x + gl_LocalInvocationID.x;
#if TAIL
    if (c >= p.updated) return;
#else
    if (c >= p.channels) return;
#endif
    Floats y = Floats(p.y), x = Floats(p.x), w = Floats(p.w), tail = Floats(p.tail);
    uint K = p.kernel, C = p.channels;
    float win[16];  // the last K−1 inputs, oldest first, then the current one
    float wk[16];
#if !TAIL
    for (uint j = 0u; j < K; j++) wk[j] = w.v[c * K + j];
#endif
    for (uint j = 0u; j + 1u < K; j++) win[j] = tail.v[j * C + c];
    for (uint t = 0u; t < p.n; t++) {
        win[K - 1u] = x.v[t * C + c];
#if !TAIL
        float acc = 0.0;
        for (uint j = 0u; j < K; j++) acc += wk[j] * win[j];
        y.v[t * C + c] = silu(acc);
#endif
        for (uint j = 0u; j + 1u < K; j++) win[j] = win[j + 1u];
    }
    for (uint j = 0u; j + 1u < K; j++) tail.v[j * C + c] = win[j];
}
