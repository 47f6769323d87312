#version 460
// norm.comp — RMSNorm over rows of d, one workgroup per row:
//   y = x · rsqrt(mean(x²) + eps) · w                 (GATED 0; zero-centred weights already hold 1 + w)
//   y = w · x · rsqrt(mean(x²) + eps) · silu(z)       (GATED 1: the GDN output norm)
//   x += z, then y = x · rsqrt(mean(x²) + eps) · w    (GATED 0, RESIDUAL 1: a residual add and the next norm, so the
//                                                      add needs no dispatch and no barrier of its own)
// In place allowed (each invocation reads its elements before writing them; RESIDUAL writes x and y ≠ x). Spec
// constant 0: workgroup size (≤ 256, for workgroup_sum).
// QUANT (GATED 0, d % 32 == 0): y also as the integer-dot GEMV takes its x (quantize.comp's rows at q, q_stride bytes
// apart), so the matmuls after the norm need no dispatch of their own to quantize it. Each invocation then owns whole
// groups of 32 in both passes.
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
#ifndef QUANT
#define QUANT 0
#endif
#if QUANT
#include "quant8.glsl"
#endif

layout(local_size_x_id = 0) in;

layout(push_constant) uniform P {
    uint64_t y, x, z, w;
    uint rows, d;
    float eps;
#if QUANT
    uint q_stride;
    uint64_t q;
#endif
} p;

#if QUANT
void main() {
    uint row = flat_group();
    if (row >= p.rows) return;
    uint tid = gl_LocalInvocationID.x, wg = gl_WorkGroupSize.x, nb = p.d / QK, nbp = (nb + 1u) / 2u * 2u;
    uint64_t xrow = p.x + uint64_t(row) * p.d * 4ul, yrow = p.y + uint64_t(row) * p.d * 4ul;
    // each pass loads its group's vectors before it stores any (a store may alias a later load: the compiler would
    // otherwise wait for each load in turn)
    float ss = 0.0;
    for (uint g = tid; g < nb; g += wg) {
        vec4 v[8];
        [[unroll]] for (uint k = 0u; k < 8u; k++) v[k] = Vec4s(xrow).v[g * 8u + k];
#if RESIDUAL
        [[unroll]] for (uint k = 0u; k < 8u; k++) v[k] += Vec4s(p.z + uint64_t(row) * p.d * 4ul).v[g * 8u + k];
        [[unroll]] for (uint k = 0u; k < 8u; k++) {
            Floats o = Floats(xrow + uint64_t(g * 8u + k) * 16ul);
            o.v[0] = v[k].x, o.v[1] = v[k].y, o.v[2] = v[k].z, o.v[3] = v[k].w;
        }
#endif
        [[unroll]] for (uint k = 0u; k < 8u; k++) ss += dot(v[k], v[k]);
    }
    float r = inversesqrt(workgroup_sum(ss) / float(p.d) + p.eps);
    uint64_t qrow = p.q + uint64_t(row) * p.q_stride;
    for (uint g = tid; g < nbp; g += wg) {
        vec4 y[8], wv[8];
        [[unroll]] for (uint k = 0u; k < 8u; k++) {
            y[k] = g < nb ? Vec4s(xrow).v[g * 8u + k] : vec4(0.0);
            wv[k] = g < nb ? Vec4s(p.w).v[g * 8u + k] : vec4(0.0);
        }
        [[unroll]] for (uint k = 0u; k < 8u; k++) {
            y[k] = (y[k] * r) * wv[k];
            if (g < nb) {
                Floats o = Floats(yrow + uint64_t(g * 8u + k) * 16ul);
                o.v[0] = y[k].x, o.v[1] = y[k].y, o.v[2] = y[k].z, o.v[3] = y[k].w;
            }
        }
        uint words[8];
        float d, s;
        quant8_group(y, words, d, s);
        [[unroll]] for (uint k = 0u; k < 8u; k++) Uints(qrow + uint64_t(g * QK)).v[k] = words[k];
        Floats(qrow + uint64_t(nbp * QK + g * 8u)).v[0] = d;
        Floats(qrow + uint64_t(nbp * QK + g * 8u)).v[1] = s;
    }
}
#else
void main() {
    uint row = flat_group();
    if (row >= p.rows) return;
    uint tid = gl_LocalInvocationID.x, wg = gl_WorkGroupSize.x;
    Floats x = Floats(p.x + uint64_t(row) * p.d * 4ul), y = Floats(p.y + uint64_t(row) * p.d * 4ul), w = Floats(p.w);
    float ss = 0.0;
#if RESIDUAL
    Floats res = Floats(p.z + uint64_t(row) * p.d * 4ul);
    for (uint j = tid; j < p.d; j += wg) {
        float v = x.v[j] + res.v[j];
        x.v[j] = v;
        ss += v * v;
    }
#else
    for (uint j = tid; j < p.d; j += wg) ss += x.v[j] * x.v[j];
#endif
    float r = inversesqrt(workgroup_sum(ss) / float(p.d) + p.eps);
    for (uint j = tid; j < p.d; j += wg) {
#if GATED
        Floats z = Floats(p.z + uint64_t(row) * p.d * 4ul);
        y.v[j] = w.v[j] * (x.v[j] * r) * silu(z.v[j]);
#else
        y.v[j] = (x.v[j] * r) * w.v[j];
#endif
    }
}
#endif
