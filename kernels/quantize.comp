#version 460
// quantize.comp — rows of x to int8 per group of 32 for the integer-dot GEMV (matmul.comp DOT), with the bits of the
// CPU backend's sp_quantize_act_ref (native/backends/cpu/matmul.c) for finite x:
//   amax = max |x| over the group, inv = f32(127 / amax), q = round-to-even(clamp(x · inv, −127, 127)),
//   d = f32(amax / 127), s = d · Σq   (all zero when amax = 0; columns past cols are zero).
// A device's division need not be correctly rounded, so both quotients are made exactly in integers: amax = M · 2^E
// with 2^23 ≤ M < 2^24, and 127 / M, M / 127 are rounded to 24 bits from a 64-bit division (ties to even).
// Output row j at q + j · q_stride: int8 q[nbp · 32], then (d, s) as two f32 per group; nbp = nb rounded up to even
// (a Q4 chunk pairs two groups), the padding group zero. One invocation per group.
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(local_size_x = 64) in;

layout(push_constant) uniform P {
    uint64_t x;      // [n][x_stride] f32
    uint64_t q;      // [n][q_stride bytes]
    uint cols, n, x_stride, q_stride;
} p;

// round(num / M) for num < 2^63, M > 0, ties to even.
uint64_t div_round(uint64_t num, uint M) {
    uint64_t r = num / uint64_t(M), rem = num - r * uint64_t(M);
    if (2ul * rem > uint64_t(M) || (2ul * rem == uint64_t(M) && (r & 1ul) == 1ul)) r++;
    return r;
}

void main() {
    uint nb = (p.cols + QK - 1u) / QK, nbp = (nb + 1u) / 2u * 2u, g = flat_group() * gl_WorkGroupSize.x + gl_LocalInvocationID.x;
    if (g >= p.n * nbp) return;
    uint j = g / nbp, b = g % nbp;
    Vec4s xv = Vec4s(p.x + uint64_t(j * p.x_stride) * 4ul);
    vec4 x[8];
    float amax = 0.0;
    [[unroll]] for (uint k = 0u; k < 8u; k++) {
        uint c = b * QK + 4u * k;
        x[k] = c < p.cols ? xv.v[c >> 2] : vec4(0.0);  // cols % 4 == 0: a vec4 is all in or all out
        vec4 a = abs(x[k]);
        amax = max(amax, max(max(a.x, a.y), max(a.z, a.w)));
    }
    float inv = 0.0, d = 0.0;
    if (amax > 0.0) {
        uint bits = floatBitsToUint(amax), e = bits >> 23, M = bits & 0x7fffffu;
        int E = int(e) - 150;
        if (e == 0u) {  // subnormal: normalize the mantissa
            int sh = 23 - findMSB(M);
            M <<= uint(sh);
            E = -149 - sh;
        } else {
            M |= 0x800000u;
        }
        // 127 / M · 2^41 lies in (2^23.99, 2^24.99]: shift one less where it reaches 2^24
        int K = 41;
        if ((127ul << 41) / uint64_t(M) >= (1ul << 24)) K = 40;
        inv = ldexp(float(div_round(127ul << uint(K), M)), -K - E);
        // M / 127 · 2^7 lies in [2^23.01, 2^24.01)
        int L = (uint64_t(M) << 7) / 127ul >= (1ul << 24) ? 6 : 7;
        d = ldexp(float(div_round(uint64_t(M) << uint(L), 127u)), E - L);
    }
    uint words[8];
    int sum = 0;
    [[unroll]] for (uint k = 0u; k < 8u; k++) {
        ivec4 v = ivec4(roundEven(clamp(x[k] * inv, vec4(-127.0), vec4(127.0))));
        sum += v.x + v.y + v.z + v.w;
        words[k] = (uint(v.x) & 0xffu) | (uint(v.y) & 0xffu) << 8 | (uint(v.z) & 0xffu) << 16 | (uint(v.w) & 0xffu) << 24;
    }
    uint64_t row = p.q + uint64_t(j) * uint64_t(p.q_stride);
    Uints out_q = Uints(row + uint64_t(b * QK));
    [[unroll]] for (uint k = 0u; k < 8u; k++) out_q.v[k] = words[k];
    Floats out_s = Floats(row + uint64_t(nbp * QK + b * 8u));
    out_s.v[0] = d;
    out_s.v[1] = d * float(sum);
}
