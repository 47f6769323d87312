// rope.glsl — partial NeoX rotary embedding of one pair (i, i + rot/2), for rope.comp and attention_prep.comp.
// With MRoPE (sections non-zero) frequency f reads position stream f % 3 while f < 3 · section[f % 3], else stream 0
// (T); pos is [n] or [n][3].

// The position frequency f of row `row` turns by.
int rope_position(uint64_t pos, uint row, uint f, int section0, int section1, int section2) {
    if (section0 == 0 && section1 == 0 && section2 == 0) return Ints(pos).v[row];
    uint s = f % 3u;
    int section = s == 1u ? section1 : section2;
    return Ints(pos).v[row * 3u + (s != 0u && int(f) < 3 * section ? s : 0u)];
}

// (x1, x2) turned by the angle at · inv_freq. The fp32 angle (as the reference) is reduced to [-π, π] before cos/sin:
// Vulkan bounds their error only there (2^-11), and NVIDIA's driver takes positions in the tens of thousands 5e-4 off
// without it. 2π in three parts (the first with few bits, so k · C1 is exact; Cody–Waite), each step one fused
// multiply-add.
vec2 rope_pair(float x1, float x2, int at, float inv_freq) {
    float ang = float(at) * inv_freq;
    float k = round(ang * 0.15915494309189535), r = fma(-k, 6.28125, ang);
    r = fma(-k, 0.0019353071693331003, r);
    r = fma(-k, 1.0253131677018246e-11, r);
    float c = cos(r), s = sin(r);
    return vec2(x1 * c - x2 * s, x2 * c + x1 * s);
}
