#version 460
// conv.comp — the GDN's causal depthwise conv + SiLU with its carried tail, one invocation per channel:
//   y[t][c] = silu(Σ_j w[c][j] · xin[t + j][c]),  xin = tail (K−1 rows) ; x (n rows)
//   tail ← the last K−1 rows of xin (raw, pre-conv values)
// Spec constant 0: workgroup size. K ≤ 16.
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(local_size_x_id = 0) in;

layout(push_constant) uniform P {
    uint64_t y, x, w, tail;
    uint n, channels, kernel;
} p;

void main() {
    uint c = flat_group() * gl_WorkGroupSize.x + gl_LocalInvocationID.x;
    if (c >= p.channels) return;
    Floats y = Floats(p.y), x = Floats(p.x), w = Floats(p.w), tail = Floats(p.tail);
    uint K = p.kernel, C = p.channels;
    float win[16];  // the last K−1 inputs, oldest first, then the current one
    float wk[16];
    for (uint j = 0u; j < K; j++) wk[j] = w.v[c * K + j];
    for (uint j = 0u; j + 1u < K; j++) win[j] = tail.v[j * C + c];
    for (uint t = 0u; t < p.n; t++) {
        win[K - 1u] = x.v[t * C + c];
        float acc = 0.0;
        for (uint j = 0u; j < K; j++) acc += wk[j] * win[j];
        y.v[t * C + c] = silu(acc);
        for (uint j = 0u; j + 1u < K; j++) win[j] = win[j + 1u];
    }
    for (uint j = 0u; j + 1u < K; j++) tail.v[j * C + c] = win[j];
}
