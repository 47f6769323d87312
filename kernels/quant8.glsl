// quant8.glsl — one group of 32 x values to int8 with the bits of the CPU backend's sp_quantize_act_ref
// (native/backends/cpu/matmul.c), for finite x:
//   amax = max |x|, inv = f32(127 / amax), q = round-to-even(clamp(x · inv, −127, 127)), d = f32(amax / 127), s = d · Σq
// (all zero when amax = 0). A device's division need not be correctly rounded, so both quotients are made exact: with
// amax = M · 2^E (2^23 ≤ M < 2^24), the 24-bit mantissas round(127 · 2^K / M) and round(M · 2^L / 127) start from the
// f32 quotient (a few ulps off) and are corrected by their exact 64-bit residuals. Used by quantize.comp and norm.comp.

// round(num / den) (ties to even) from a guess within a few units of it.
uint quant8_round(uint64_t num, uint den, uint guess) {
    int64_t rem = int64_t(num) - int64_t(uint64_t(guess) * uint64_t(den)), D = int64_t(den);
    for (int i = 0; i < 8 && (2l * rem > D || (2l * rem == D && (guess & 1u) == 1u)); i++) guess++, rem -= D;
    for (int i = 0; i < 8 && (2l * rem < -D || (2l * rem == -D && (guess & 1u) == 1u)); i++) guess--, rem += D;
    return guess;
}

// The group x[0..7] (32 values) as 8 words of packed int8 (element order, little-endian bytes), with d and s.
void quant8_group(vec4 x[8], out uint words[8], out float d, out float s) {
    float amax = 0.0;
    [[unroll]] for (uint k = 0u; k < 8u; k++) {
        vec4 a = abs(x[k]);
        amax = max(amax, max(max(a.x, a.y), max(a.z, a.w)));
    }
    float inv = 0.0;
    d = 0.0;
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
        // 127 · 2^K / M and M · 2^L / 127 in [2^23, 2^24]: K = 40, L = 7 up to M = 127 · 2^17, then 41 and 6
        bool high = M > 127u << 17;
        int K = high ? 41 : 40, L = high ? 6 : 7;
        uint64_t num = 127ul << uint(K);
        uint r = quant8_round(num, M, uint(float(num) / float(M)));
        inv = ldexp(float(r), -K - E);
        uint64_t mnum = uint64_t(M) << uint(L);
        uint t = quant8_round(mnum, 127u, uint(float(mnum) / 127.0));
        d = ldexp(float(t), E - L);
    }
    int sum = 0;
    [[unroll]] for (uint k = 0u; k < 8u; k++) {
        ivec4 v = ivec4(roundEven(clamp(x[k] * inv, vec4(-127.0), vec4(127.0))));
        sum += v.x + v.y + v.z + v.w;
        words[k] = (uint(v.x) & 0xffu) | (uint(v.y) & 0xffu) << 8 | (uint(v.z) & 0xffu) << 16 | (uint(v.w) & 0xffu) << 24;
    }
    s = d * float(sum);
}
