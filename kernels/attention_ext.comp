#version 460
// attention_ext.comp — attention with explicit visibility, for drafters (backends/backend.h attention_ext; the CPU
// reference is backends/cpu/attention_ext.c). Query row i (position q_pos0 + i) sees two ranges of keys:
//   page positions [page_lo, page_hi + i · page_causal) of the sequence's pages (attention.comp's paged layout,
//   rows f32, f16 or int8 as kv_type says: kv_rows.glsl)
//   block rows [0, blk_causal ? i + 1 : n_rows) of k_blk / v_blk ([n_rows][kv_heads][HD], the rows' own keys)
// both cut to |q_pos − k_pos| < window when window > 0 (block row j sits at q_pos0 + j). A row that sees no key
// outputs zeros.
//
// One workgroup per (row, query head): BK keys at a time, invocation j < BK scores key j from q in shared memory,
// online softmax over the block (running max and sum), then invocation d accumulates dims d, d + WG of the output.
// Drafters attend with a handful of rows over a context, so this favours simplicity over attention.comp's tiling.
// Spec constants: 0 = workgroup size (128, which the dim mapping assumes), 1 = head_dim (≤ 256, a multiple of 4).
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint HD = 128;

#include "kv_rows.glsl"

#define BK 32
#define HD_MAX 256
#define WG 128

layout(buffer_reference, std430, buffer_reference_align = 8) readonly buffer Uvec2s { uvec2 v[]; };

layout(push_constant) uniform P {
    uint64_t dst, q, k, v, pages, k_blk, v_blk;  // k, v: this layer's K and V base in page 0; k_blk = 0: no block
    uint n_rows, heads, kv_heads, page_tokens, page_stride;  // page_stride in bytes
    uint q_pos0, page_lo, page_hi, page_causal, window, blk_causal;
    float scale;
    uint kv_type;  // the pages' rows: SPLASH_KV_* (block rows are always f32)
} p;

shared vec4 Qs[HD_MAX / 4];
shared float S[BK];
shared float stat[3];  // running max, running sum, this block's correction (arrays: Metal threadgroup rule)
#define MRUN stat[0]
#define LSUM stat[1]
#define CORR stat[2]

// Key (or value) t of this row's visible keys: page positions p0 .. p0 + np − 1, then block rows b0 ….
uint64_t key_row(bool value, uint t, uint p0, uint np, uint b0, uint g) {
    if (t < np) {
        uint pos = p0 + t;
        uint page = uint(Ints(p.pages).v[pos / p.page_tokens]);
        return (value ? p.v : p.k) + uint64_t(page) * p.page_stride +
               uint64_t(g * p.page_tokens + pos % p.page_tokens) * kv_row_bytes(p.kv_type);
    }
    uint r = b0 + (t - np);
    return (value ? p.v_blk : p.k_blk) + uint64_t((r * p.kv_heads + g) * HD) * 4ul;
}
// Values 4c .. 4c+3 and value d of a key row of type t (KV_F32 for block rows).
vec4 row4(uint64_t a, uint t, uint c) {
    if (t == KV_INT8) return q8_kv4(a, c);
    if (t == KV_F16) {
        uvec2 h = Uvec2s(a).v[c];
        return vec4(unpackHalf2x16(h.x), unpackHalf2x16(h.y));
    }
    return Vec4s(a).v[c];
}
float row1(uint64_t a, uint t, uint d) {
    if (t == KV_INT8) return q8_kv1(a, d);
    if (t == KV_F16) return unpackHalf2x16(Uints(a).v[d >> 1u])[d & 1u];
    return Floats(a).v[d];
}

void main() {
    uint tid = gl_LocalInvocationID.x;
    uint i = flat_group() / p.heads, h = flat_group() % p.heads, g = h / (p.heads / p.kv_heads);
    if (i >= p.n_rows) return;
    // visible ranges (attention_ext.c visible()), in signed arithmetic: the window may start before position 0
    int qpos = int(p.q_pos0 + i);
    int p0 = int(p.page_lo), p1 = int(p.page_hi) + (p.page_causal != 0u ? int(i) : 0);
    int b0 = 0, b1 = p.k_blk != 0ul ? (p.blk_causal != 0u ? int(i) + 1 : int(p.n_rows)) : 0;
    if (p.window > 0u) {
        int w = int(p.window);
        p0 = max(p0, qpos - w + 1);
        b0 = max(b0, int(i) - w + 1);
        b1 = min(b1, int(i) + w);
    }
    p1 = max(p1, p0);
    b0 = max(b0, 0);
    b1 = max(b1, b0);
    uint np = uint(p1 - p0), len = np + uint(b1 - b0);

    uint64_t qa = p.q + uint64_t((i * p.heads + h) * HD) * 4ul;
    for (uint c = tid; c < HD / 4u; c += WG) Qs[c] = Vec4s(qa).v[c] * p.scale;
    if (tid == 0u) {
        MRUN = -1.0 / 0.0;
        LSUM = 0.0;
    }
    float acc[HD_MAX / WG];
    [[unroll]] for (uint c = 0u; c < HD_MAX / WG; c++) acc[c] = 0.0;
    barrier();

    for (uint k0 = 0u; k0 < len; k0 += BK) {
        uint nb = min(BK, len - k0);
        if (tid < BK) {
            float s = -1.0 / 0.0;
            if (tid < nb) {
                uint64_t kr = key_row(false, k0 + tid, uint(p0), np, uint(b0), g);
                uint t = k0 + tid < np ? p.kv_type : KV_F32;
                s = 0.0;
                for (uint c = 0u; c < HD / 4u; c++) s += dot(Qs[c], row4(kr, t, c));
            }
            S[tid] = s;
        }
        barrier();
        if (tid == 0u) {
            float mx = MRUN;
            for (uint j = 0u; j < nb; j++) mx = max(mx, S[j]);
            float c = exp(MRUN - mx), l = LSUM * c;
            for (uint j = 0u; j < nb; j++) {
                float e = exp(S[j] - mx);
                S[j] = e;
                l += e;
            }
            CORR = c;
            LSUM = l;
            MRUN = mx;
        }
        barrier();
        [[unroll]] for (uint c = 0u; c < HD_MAX / WG; c++) {
            uint d = tid + c * WG;
            if (d >= HD) break;
            float a = acc[c] * CORR;
            for (uint j = 0u; j < nb; j++)
                a += S[j] * row1(key_row(true, k0 + j, uint(p0), np, uint(b0), g), k0 + j < np ? p.kv_type : KV_F32, d);
            acc[c] = a;
        }
        barrier();
    }
    uint64_t oa = p.dst + uint64_t((i * p.heads + h) * HD) * 4ul;
    [[unroll]] for (uint c = 0u; c < HD_MAX / WG; c++) {
        uint d = tid + c * WG;
        if (d >= HD) break;
        Floats(oa).v[d] = LSUM > 0.0 ? acc[c] / LSUM : 0.0;
    }
}
