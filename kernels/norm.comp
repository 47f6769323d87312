#version 460
// norm.comp — RMSNorm over rows of d, one workgroup per row:
//   y = x · rsqrt(mean(x²) + eps) · w                 (GATED 0; zero-centred weights already hold 1 + w)
//   y = w · x · rsqrt(mean(x²) + eps) · silu(z)       (GATED 1: the GDN output norm)
//   x += z, then y = x · rsqrt(mean(x²) + eps) · w    (GATED 0, RESIDUAL 1: a residual add and the next norm, so the
//                                                      add needs no dispatch and no barrier of its own)
// In place allowed (each invocation reads its elements before writing them; RESIDUAL writes x and y ≠ x). Spec
// constant 0: workgroup size (≤ 256, for workgroup_sum).
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(local_size_x_id = 0) in;

layout(push_constant) uniform P {
    uint64_t y, x, z, w;
    uint rows, d;
    float eps;
} p;

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
