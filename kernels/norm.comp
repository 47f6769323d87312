#version 460
// norm.comp — RMSNorm over rows of d, one workgroup per row:
//   y = x · rsqrt(mean(x²) + eps) · w                 (GATED 0; zero-centred weights already hold 1 + w)
//   y = w · x · rsqrt(mean(x²) + eps) · silu(z)       (GATED 1: the GDN output norm)
//   x += z, then y = x · rsqrt(mean(x²) + eps) · w    (GATED 0, RESIDUAL 1: a residual add and the next norm, so the
//                                                      add needs no dispatch and no barrier of its own)
// In place allowed (each invocation reads its elements before writing them; RESIDUAL writes x and y ≠ x). Spec
// constant 0: workgroup size (≤ 256, for workgroup_sum).
// QUANT (GATED 0, d % 32 == 0, d ≤ QUANT_MAX_D): y also as the integer-dot GEMV takes its x (quantize.comp's rows at q,
// q_stride bytes apart), so the matmuls after the norm need no dispatch of their own to quantize it. Rows are 16-byte
// aligned (the host checks).
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
#ifndef QUANT
#define QUANT 0
#endif
#if QUANT
#include "quant8.glsl"
#define QUANT_MAX_D 8192  // the row in shared memory: 32 KiB; sp_gpu_quantize_rows asks for no wider rows
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
// The row passes through shared memory so that every access to memory is coalesced (consecutive invocations,
// consecutive vectors): the quantization wants whole groups of 32 per invocation, and an invocation storing its own
// group would touch a different 128-byte line in every lane — thousands of partial writes from one workgroup.
shared vec4 row_v[QUANT_MAX_D / 4];
shared uvec4 row_q[QUANT_MAX_D / 16 + 2];  // the int8 row, padded to an even count of groups

void main() {
    uint row = flat_group();
    if (row >= p.rows) return;
    uint tid = gl_LocalInvocationID.x, wg = gl_WorkGroupSize.x, n4 = p.d / 4u, nb = p.d / QK, nbp = (nb + 1u) / 2u * 2u;
    uint64_t xrow = p.x + uint64_t(row) * p.d * 4ul, yrow = p.y + uint64_t(row) * p.d * 4ul;
    // x (+ z) into shared memory, four vectors in flight per invocation
    float ss = 0.0;
    for (uint i0 = tid; i0 < n4; i0 += 4u * wg) {
        vec4 v[4];
        [[unroll]] for (uint k = 0u; k < 4u; k++) v[k] = i0 + k * wg < n4 ? Vec4s(xrow).v[i0 + k * wg] : vec4(0.0);
#if RESIDUAL
        [[unroll]] for (uint k = 0u; k < 4u; k++)
            if (i0 + k * wg < n4) v[k] += Vec4s(p.z + uint64_t(row) * p.d * 4ul).v[i0 + k * wg];
#endif
        [[unroll]] for (uint k = 0u; k < 4u; k++)
            if (i0 + k * wg < n4) {
#if RESIDUAL
                Vec4Out(xrow).v[i0 + k * wg] = v[k];
#endif
                row_v[i0 + k * wg] = v[k];
                ss += dot(v[k], v[k]);
            }
    }
    float r = inversesqrt(workgroup_sum(ss) / float(p.d) + p.eps);  // its barriers publish row_v
    for (uint i0 = tid; i0 < n4; i0 += 4u * wg) {
        vec4 w[4];
        [[unroll]] for (uint k = 0u; k < 4u; k++) w[k] = i0 + k * wg < n4 ? Vec4s(p.w).v[i0 + k * wg] : vec4(0.0);
        [[unroll]] for (uint k = 0u; k < 4u; k++)
            if (i0 + k * wg < n4) {
                vec4 y = (row_v[i0 + k * wg] * r) * w[k];
                row_v[i0 + k * wg] = y;
                Vec4Out(yrow).v[i0 + k * wg] = y;
            }
    }
    barrier();
    // each invocation quantizes whole groups; the scales go out at once (consecutive groups, consecutive pairs)
    uint64_t qrow = p.q + uint64_t(row) * p.q_stride;
    for (uint g = tid; g < nbp; g += wg) {
        vec4 y[8];
        [[unroll]] for (uint k = 0u; k < 8u; k++) y[k] = g < nb ? row_v[g * 8u + k] : vec4(0.0);
        uint words[8];
        float d, s;
        quant8_group(y, words, d, s);
        row_q[2u * g] = uvec4(words[0], words[1], words[2], words[3]);
        row_q[2u * g + 1u] = uvec4(words[4], words[5], words[6], words[7]);
        Vec2Out(qrow + uint64_t(nbp * QK)).v[g] = vec2(d, s);
    }
    barrier();
    for (uint i = tid; i < 2u * nbp; i += wg) Uvec4Out(qrow).v[i] = row_q[i];
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
