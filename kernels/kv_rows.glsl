// kv_rows.glsl — rows of the paged KV cache in its types (SPLASH_KV_*, backends/backend.h sp_kv_mtype): f32, f16,
// or int8 in the Q8 layout of core/quant.h (int8 q[nb·32], then f16 d[nb]; value = q · d). attention.comp and
// attention_ext.comp read through it; values come out as f32. Needs common.glsl and the spec constant HD.
//
// A Q8 row is nb · 34 bytes, so at an odd nb (head_dim 32, 96, …) rows are only 2-byte aligned: the int8 reads
// assemble their words from the aligned 32-bit words around them, as the device enables no 8- or 16-bit storage.
#define KV_F32 0
#define KV_F16 1
#define KV_INT8 2
#define KV_NB ((HD + 31u) / 32u)  // Q8 groups of a row

uint kv_row_bytes(uint type) { return type == KV_INT8 ? KV_NB * 34u : type == KV_F16 ? HD * 2u : HD * 4u; }

// A non-negative f16 (bits h) as f32, exactly, subnormals included (an f16 unpack may flush them). 0x7c00 reads as
// 65536, the bound just past the largest f16, which is what the int8 writer needs of it.
float f16_exact(uint h) {
    uint e = h >> 10;
    return e == 0u ? float(h) * (1.0 / 16777216.0) : uintBitsToFloat(((e + 112u) << 23) | ((h & 0x3ffu) << 13));
}

// The 4 bytes at the 2-aligned address a.
uint kv_word(uint64_t a) {
    Uints u = Uints(a & ~3ul);
    return (a & 2ul) == 0ul ? u.v[0] : (u.v[0] >> 16) | (u.v[1] << 16);
}
// Four signed bytes of a word, low byte first.
vec4 s8x4(uint w) { return vec4(ivec4(int(w << 24), int(w << 16), int(w << 8), int(w)) >> 24); }

// Scale of group j of the Q8 row at `row`.
float q8_scale(uint64_t row, uint j) {
    uint64_t a = row + uint64_t(KV_NB * 32u + 2u * j);
    return f16_exact((Uints(a & ~3ul).v[0] >> ((uint(a) & 2u) * 8u)) & 0xffffu);
}
// Values 4c .. 4c+3 of a Q8 row (one group: 4 divides 32).
vec4 q8_kv4(uint64_t row, uint c) { return s8x4(kv_word(row + uint64_t(4u * c))) * q8_scale(row, c / 8u); }
// Values 2c, 2c+1 of a Q8 row.
vec2 q8_kv2(uint64_t row, uint c) {
    uint64_t a = row + uint64_t(2u * c);
    uint w = Uints(a & ~3ul).v[0] >> ((uint(a) & 2u) * 8u);
    return vec2(ivec2(int(w << 24), int(w << 16)) >> 24) * q8_scale(row, c / 16u);
}
// Value d of a Q8 row.
float q8_kv1(uint64_t row, uint d) {
    uint64_t a = row + uint64_t(d);
    return float(int(Uints(a & ~3ul).v[0] << (24u - (uint(a) & 3u) * 8u)) >> 24) * q8_scale(row, d / 32u);
}
