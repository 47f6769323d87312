#version 460
// matmul.comp — y = x · Wᵀ for few rows of x (decode, batched decode, MoE expert tiles): the bandwidth-bound GEMV.
//
//   MODE 0 (dense):  y[j][r] = Σ_c W[r][c] · x[j][c]                 j < n ≤ NMAX
//   MODE 1 (MoE gate/up):  h[pair][r] = silu(gate_e[r] · x[tok]) · (up_e[r] · x[tok])   for the pairs of one tile
//   MODE 2 (MoE down):     yo[pair][r] = down_e[r] · h[pair]
//   MODE 3 (dense gate/up):  h[j][r] = silu(gate[r] · x[j]) · (up[r] · x[j])   j < n ≤ NMAX (the MLP's first half and
//                            its gate in one dispatch: each x chunk meets the gate and up rows of the same index)
// In MoE modes a workgroup row of the grid is one tile of the plan (moe.comp): up to NMAX (token, slot) pairs routed
// to the same expert e (the plan's tile size), so the expert's rows are read once for all of them. One token needs no
// plan (order_at = 0, never a plan's): tile t is its pair t, of expert ids[t], and `plan` holds the ids.
//
// A workgroup is GROUPS row groups of wg / GROUPS invocations; each group owns ROWS weight rows (of each of MATS
// matrices) and its invocations stride over them in 16-byte chunks. Per chunk an invocation first loads the chunk of
// every row it owns (all those loads in flight at once), then reads each x row's chunk once and uses it for every one
// of its rows; the groups of a workgroup read the same x chunks at the same time (one fetch from L2, the rest hits
// in L1), so x traffic from L2 is 1/(GROUPS·ROWS) of a row-at-a-time loop, and each weight byte is read once for all
// n x rows.
//
// Quantized weights never go through int → float conversion (quarter rate on NVIDIA) or per-element branches: a
// quant placed in the top mantissa bits of 1.0 is the float f = 1 + q/2^bits exactly (Q4, MLX4: four nibbles of a
// word land in two f16 pairs with one shift and one and-or each, then unpackHalf2x16; Q8, MLX8: one byte per f32).
//   NMAX 1:  Σ_j (q_j·d + m)·x_j = d·2^bits·(Σ f_j x_j − Σ x_j) + m·Σ x_j, so the inner loop is one FMA per weight and
//            the group scales are applied once per chunk.
//   NMAX > 1: each weight is dequantized once, w = f·(2^bits·d) + (m − 2^bits·d) (one FMA), then meets every x row.
// DOT (Q4 and Q8, MODE 0 and 3; vulkanOnly): the CPU backend's numerics instead. x comes quantized to int8 per group of
// 32 (quant8.glsl, the bits of the CPU's sp_quantize_act_ref, by the norm that made x or by quantize.comp), so each
// group's product is an exact integer made
// four bytes at a time by OpSDot (SPV_KHR_integer_dot_product): per 32 weights 8 integer dots and 8 and/shift, where
// the float path spends ≥ 2 instructions per weight; then y += dot·(d_w·d_x) (Q4 also + m_w·d_x·Σq_x once per group).
// The results differ from the CPU's only in the order of the f32 sums over groups.
// Defines: WT (weight type, common.glsl), MODE, NMAX (1, 4 or 16: most x rows per dispatch, or pairs per MoE tile), DOT.
// Spec constants: 0 = workgroup size (≤ 128), 1 = ROWS (≤ MAX_ROWS), 2 = CHECK (1: cols is not a multiple of the
// chunk's columns, so x reads past cols are masked), 3 = GROUPS (divides the workgroup size).
// Caller guarantees: cols % 4 == 0, x rows 16-byte aligned, device weight rows zero-padded to 16 bytes; DOT: x rows as
// quantize.comp writes them (x_stride counts 4-byte words).
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
#ifndef DOT
#define DOT 0
#endif
#if DOT
#extension GL_EXT_spirv_intrinsics : require
// OpSDot of two words of four packed signed bytes (PackedVectorFormat4x8Bit = 0): capabilities DotProduct and
// DotProductInput4x8BitPacked.
spirv_instruction(extensions = ["SPV_KHR_integer_dot_product"], capabilities = [6019, 6018], id = 4450)
int sdot4(int a, int b, spirv_literal int packed_format);
// A chunk's integer sums (|Σ| < 2^22) become floats without an int → float conversion (quarter rate on NVIDIA): summed
// onto the bits of 1.5 · 2^23, whose ulp is 1, they are the float 1.5 · 2^23 + Σ exactly.
#define MAGIC 0x4b400000
#define MAGIC_F 12582912.0
#endif

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint ROWS = 2;
layout(constant_id = 2) const uint CHECK = 1;
layout(constant_id = 3) const uint GROUPS = 1;
#if MODE == 1 || MODE == 3
#define MATS 2  // gate and up rows of the same index
#else
#define MATS 1
#endif
// Rows one invocation carries, bounded by registers: MATS·MAX_ROWS·NMAX accumulators (ops.c: gemv_max_rows).
#if NMAX == 1
#define MAX_ROWS (8 / MATS)
#elif NMAX <= 4
#define MAX_ROWS (4 / MATS)
#else
#define MAX_ROWS (2 / MATS)
#endif
#define SLOTS (MATS * MAX_ROWS)

layout(push_constant) uniform P {
    uint64_t w;       // dense: row 0 of W; MoE: the expert table, per expert [gate, up, down] row-0 addresses
    uint64_t x;       // dense: x [n][x_stride]; MoE gate/up: x [tokens][cols]; down: h [pairs][cols]
    uint64_t y;       // dense: y [n][y_stride]; MoE: h or yo [pairs][rows]
    uint64_t plan;    // MoE: the plan (moe.comp): tiles (expert, start, count), then the pair order, or the ids of one
                      // token's pairs (order_at = 0); MODE 3: row 0 of up
    uint row_bytes;   // device bytes per weight row
    uint rows, cols;
    uint n;           // dense: x rows (≤ NMAX)
    uint x_stride, y_stride;
    uint top_k;       // MoE gate/up: pair p reads token p / top_k
    uint order_at;    // MoE: index of the pair order in the plan (ints)
} p;

// CW: columns per 16-byte chunk (Q4: 16 columns of each of two groups; MLX4, MLX8: within one group of 64).
#if WT == W_F32
#define CW 4
#elif WT == W_BF16 || WT == W_F16
#define CW 8
#elif WT == W_Q8 || WT == W_MLX8
#define CW 16
#else
#define CW 32
#endif
#define NIBBLES (WT == W_Q4 || WT == W_MLX4)
#define BYTES (WT == W_Q8 || WT == W_MLX8)

uint n_chunks() {
#if WT == W_Q4
    uint nb = (p.cols + QK - 1u) / QK;
    return (nb + 1u) / 2u * 2u;
#else
    return (p.cols + CW - 1u) / CW;
#endif
}

// First column of chunk c; for Q4 the chunk's high nibbles are the columns 32 further (the next group).
uint chunk_col(uint c) {
#if WT == W_Q4
    return (c >> 1) * 64u + (c & 1u) * 16u;
#else
    return c * CW;
#endif
}

// One row's chunk: its 16 bytes and, for quantized types, the scales that apply to it:
// Q4 (d_A, d_B, m_A, m_B) of its two groups (B zero past the last group); MLX4 (scale, scale, bias, bias) (its even
// and odd columns play the two groups); Q8 (d, 0, 0, 0); MLX8 (scale, bias, 0, 0).
struct Chunk {
    uvec4 q;
    vec4 s;
};

Chunk load_chunk(uint64_t row, uint c) {
    Chunk k;
    k.q = Uvec4s(row).v[c];
    k.s = vec4(0.0);
#if WT == W_Q4
    uint nb = (p.cols + QK - 1u) / QK, pair = c >> 1, qbytes = (nb + 1u) / 2u * QK;
    vec2 d = f16x2_at(row, qbytes + pair * 4u), m = f16x2_at(row, qbytes + nb * 2u + pair * 4u);
    bool two = 2u * pair + 1u < nb;
    k.s = vec4(d.x, two ? d.y : 0.0, m.x, two ? m.y : 0.0);
#elif WT == W_MLX4 || WT == W_MLX8
    uint g = c * CW / QK_MLX, qbytes = WT == W_MLX4 ? p.cols / 2u : p.cols, groups = p.cols / QK_MLX;
    float scale = bf16_at(row, qbytes + g * 2u), bias = bf16_at(row, qbytes + groups * 2u + g * 2u);
    k.s = WT == W_MLX4 ? vec4(scale, scale, bias, bias) : vec4(scale, bias, 0.0, 0.0);
#elif WT == W_Q8
    uint nb = (p.cols + QK - 1u) / QK, db = nb * QK + (c >> 1) * 2u;
    k.s = vec4(f16_at(Uints(row).v[db >> 2], (db >> 1) & 1u), 0.0, 0.0, 0.0);
#endif
    return k;
}

// Word i of a chunk as x sees it: the x values its weights meet, in two vec4 (a, b):
// Q4: a = group A's columns 4i..4i+3, b = group B's (32 further); MLX4: the word's columns 8i..8i+7 as (even, odd);
// 8-bit types: a = columns 4i..4i+3 (b unused); float types: the chunk's columns 4·(2i), 4·(2i+1) (bf16, f16) or 4i.
void load_x(uint64_t xrow, uint col0, uint i, out vec4 a, out vec4 b) {
    Vec4s xv = Vec4s(xrow);
#if WT == W_Q4
    uint ca = col0 + 4u * i, cb = ca + 32u;
    a = CHECK == 0u || ca < p.cols ? xv.v[ca >> 2] : vec4(0.0);
    b = CHECK == 0u || cb < p.cols ? xv.v[cb >> 2] : vec4(0.0);
#elif WT == W_MLX4
    vec4 u = xv.v[(col0 >> 2) + 2u * i], v = xv.v[(col0 >> 2) + 2u * i + 1u];  // MLX rows are whole groups: no mask
    a = vec4(u.x, u.z, v.x, v.z);
    b = vec4(u.y, u.w, v.y, v.w);
#elif WT == W_BF16 || WT == W_F16
    uint ca = col0 + 8u * i, cb = ca + 4u;  // i < 1: the chunk's 8 columns
    a = CHECK == 0u || ca < p.cols ? xv.v[ca >> 2] : vec4(0.0);
    b = CHECK == 0u || cb < p.cols ? xv.v[cb >> 2] : vec4(0.0);
#else
    uint ca = col0 + 4u * i;
    a = CHECK == 0u || ca < p.cols ? xv.v[ca >> 2] : vec4(0.0);
    b = vec4(0.0);
#endif
}

// Steps per chunk (one load_x each): Q4, MLX4, 8-bit types 4 words; bf16, f16 one step of 8 columns; f32 one of 4.
#if NIBBLES || BYTES
#define STEPS 4u
#else
#define STEPS 1u
#endif

// Word w's eight nibbles as 1 + q/16, in the (a, b) order of load_x: Q4 (group A elements 0..3, group B 0..3) = the
// low and high nibbles of bytes 0..3; MLX4 (even, odd columns) = nibbles (0, 2, 4, 6), (1, 3, 5, 7). Both are the
// nibbles at bits (0, 8, 16, 24) and (4, 12, 20, 28): each shift puts two of them in the top mantissa bits of the two
// halves of an f16 pair (bits 6..9 and 22..25), one and-or makes the pair 1 + q/16.
#define PAIR(v) unpackHalf2x16(((v) & 0x03c003c0u) | 0x3c003c00u)
void nibbles(uint w, out vec4 a, out vec4 b) {
    vec2 a02 = PAIR(w << 6), a13 = PAIR(w >> 2), b02 = PAIR(w << 2), b13 = PAIR(w >> 6);
    a = vec4(a02.x, a13.x, a02.y, a13.y);
    b = vec4(b02.x, b13.x, b02.y, b13.y);
}

// Byte k of w as 1 + u/256 in an f32 (u: the byte unsigned; Q8 flips the sign bit first so u = q + 128).
#define BYTE(w, at) uintBitsToFloat(((at) <= 15 ? ((w) << (15 - (at))) : ((w) >> ((at) - 15))) & 0x007f8000u | 0x3f800000u)
vec4 bytes4(uint w) {
#if WT == W_Q8
    w ^= 0x80808080u;
#endif
    return vec4(BYTE(w, 0), BYTE(w, 8), BYTE(w, 16), BYTE(w, 24));
}

#if !NIBBLES && !BYTES
// Word-step i's weights of a float chunk, in load_x's (a, b) order.
void floats(uvec4 q, out vec4 a, out vec4 b) {
#if WT == W_F32
    a = uintBitsToFloat(q);
    b = vec4(0.0);
#elif WT == W_BF16
    a = vec4(bf16_lo(q.x), bf16_hi(q.x), bf16_lo(q.y), bf16_hi(q.y));
    b = vec4(bf16_lo(q.z), bf16_hi(q.z), bf16_lo(q.w), bf16_hi(q.w));
#else
    a = vec4(unpackHalf2x16(q.x), unpackHalf2x16(q.y));
    b = vec4(unpackHalf2x16(q.z), unpackHalf2x16(q.w));
#endif
}
#endif

// Each invocation's sums, per accumulator (PAD keeps one accumulator's row of invocations off one bank). Row groups
// need not be whole subgroups (results must not depend on the subgroup size), so the reduction is in shared memory.
#define PAD 129u
shared float partial[SLOTS * NMAX * PAD];

void main() {
    uint tid = gl_LocalInvocationID.x, wg = gl_WorkGroupSize.x, lanes = wg / GROUPS, grp = tid / lanes, lane = tid % lanes;
    uint r0, n;
    uint64_t wbase[MATS];
    uint64_t xrows[NMAX];
#if MODE == 0 || MODE == 3
    uint rg0 = flat_group() * GROUPS * ROWS;
    r0 = rg0 + grp * ROWS;
    n = p.n;
    wbase[0] = p.w;
#if MODE == 3
    wbase[1] = p.plan;
#endif
    [[unroll]] for (uint j = 0u; j < NMAX; j++) xrows[j] = p.x + uint64_t(j * p.x_stride) * 4ul;
#else
    Ints plan = Ints(p.plan);
    uint tile = gl_WorkGroupID.x;
    bool direct = p.order_at == 0u;
    uint e = uint(plan.v[direct ? tile : 3u * tile]), start = direct ? tile : uint(plan.v[3u * tile + 1u]);
    n = direct ? 1u : uint(plan.v[3u * tile + 2u]);
    uint rg0 = gl_WorkGroupID.y * GROUPS * ROWS;
    r0 = rg0 + grp * ROWS;
    Addrs table = Addrs(p.w);
#if MODE == 1
    wbase[0] = table.v[3u * e];
    wbase[1] = table.v[3u * e + 1u];
#else
    wbase[0] = table.v[3u * e + 2u];
#endif
    uint pairs[NMAX];
    [[unroll]] for (uint j = 0u; j < NMAX; j++) {
        pairs[j] = j >= n ? 0u : direct ? start + j : uint(plan.v[p.order_at + start + j]);
#if MODE == 1
        xrows[j] = p.x + uint64_t((pairs[j] / p.top_k) * p.cols) * 4ul;
#else
        xrows[j] = p.x + uint64_t(pairs[j] * p.cols) * 4ul;
#endif
    }
#endif
    if (rg0 >= p.rows) return;
    // rows past the matrix repeat its last row (their sums are never stored): no per-row branch in the loop
    uint64_t rowaddr[SLOTS];
    [[unroll]] for (uint m = 0u; m < MATS; m++)
        [[unroll]] for (uint r = 0u; r < MAX_ROWS; r++)
            rowaddr[m * MAX_ROWS + r] = wbase[m] + uint64_t(min(r0 + r, p.rows - 1u)) * p.row_bytes;

    float acc[SLOTS][NMAX];
    [[unroll]] for (uint s = 0u; s < SLOTS; s++)
        [[unroll]] for (uint j = 0u; j < NMAX; j++) acc[s][j] = 0.0;

    uint chunks = r0 < p.rows ? n_chunks() : 0u;
#if DOT
    uint xscales = ((p.cols + QK - 1u) / QK + 1u) / 2u * 2u * QK;  // a quantized x row: int8 q[nbp·32], then (d, s)[nbp]
#endif
    for (uint c = lane; c < chunks; c += lanes) {
        uint col0 = chunk_col(c);
        Chunk k[SLOTS];
        [[unroll]] for (uint m = 0u; m < MATS; m++)
            [[unroll]] for (uint r = 0u; r < MAX_ROWS; r++)
                if (r < ROWS) k[m * MAX_ROWS + r] = load_chunk(rowaddr[m * MAX_ROWS + r], c);
#if DOT
        // the weights' words as packed signed bytes: Q4 low nibbles (group A) and high nibbles (group B); Q8 as stored
        uvec4 qa[SLOTS], qb[SLOTS];
        [[unroll]] for (uint s = 0u; s < SLOTS; s++) {
            if ((s % MAX_ROWS) >= ROWS) continue;
#if WT == W_Q4
            qa[s] = k[s].q & 0x0f0f0f0fu;
            qb[s] = (k[s].q >> 4) & 0x0f0f0f0fu;
#else
            qa[s] = k[s].q;
#endif
        }
        bool first_half = (c & 1u) == 0u;  // the chunk holding a group's first 16 columns adds its offset term
        [[unroll]] for (uint j = 0u; j < NMAX; j++) {
            if (j >= n) break;
            Uvec4s xq = Uvec4s(xrows[j]);
#if WT == W_Q4
            // the chunk's 16 columns of groups A and B (32 bytes further), and (d, s) of both groups
            uvec4 xa = xq.v[col0 >> 4], xb = xq.v[(col0 >> 4) + 2u];
            vec4 xs = Vec4s(xrows[j] + xscales).v[c >> 1];
            float oa = first_half ? xs.y : 0.0, ob = first_half ? xs.w : 0.0;
#else
            uvec4 xa = xq.v[c];
            float xd = Floats(xrows[j] + xscales).v[(c >> 1) * 2u];
#endif
            [[unroll]] for (uint m = 0u; m < MATS; m++)
                [[unroll]] for (uint r = 0u; r < MAX_ROWS; r++) {
                    if (r >= ROWS) break;
                    uint s = m * MAX_ROWS + r;
                    int ia = MAGIC;
                    [[unroll]] for (uint i = 0u; i < 4u; i++) ia += sdot4(int(qa[s][i]), int(xa[i]), 0);
#if WT == W_Q4
                    int ib = MAGIC;
                    [[unroll]] for (uint i = 0u; i < 4u; i++) ib += sdot4(int(qb[s][i]), int(xb[i]), 0);
                    vec4 sc = k[s].s;
                    acc[s][j] += (intBitsToFloat(ia) - MAGIC_F) * (sc.x * xs.x) + (intBitsToFloat(ib) - MAGIC_F) * (sc.y * xs.z) +
                                 (sc.z * oa + sc.w * ob);
#else
                    acc[s][j] += (intBitsToFloat(ia) - MAGIC_F) * (k[s].s.x * xd);
#endif
                }
        }
#elif NMAX == 1 && (NIBBLES || BYTES)
        // Σ f·x per group (t) and Σ x per group (sx), then the scales once
        vec2 t[SLOTS];
        [[unroll]] for (uint s = 0u; s < SLOTS; s++) t[s] = vec2(0.0);
        vec4 sa = vec4(0.0), sb = vec4(0.0);
        [[unroll]] for (uint i = 0u; i < STEPS; i++) {
            vec4 xa, xb;
            load_x(xrows[0], col0, i, xa, xb);
            sa += xa;
            sb += xb;
            [[unroll]] for (uint m = 0u; m < MATS; m++)
                [[unroll]] for (uint r = 0u; r < MAX_ROWS; r++) {
                    if (r >= ROWS) break;
                    uint s = m * MAX_ROWS + r;
#if NIBBLES
                    vec4 fa, fb;
                    nibbles(k[s].q[i], fa, fb);
                    t[s] += vec2(dot(fa, xa), dot(fb, xb));
#else
                    t[s].x += dot(bytes4(k[s].q[i]), xa);
#endif
                }
        }
        float sxa = dot(sa, vec4(1.0)), sxb = dot(sb, vec4(1.0));
        [[unroll]] for (uint m = 0u; m < MATS; m++)
            [[unroll]] for (uint r = 0u; r < MAX_ROWS; r++) {
                if (r >= ROWS) break;
                uint s = m * MAX_ROWS + r;
                vec4 sc = k[s].s;
#if NIBBLES
                acc[s][0] += 16.0 * sc.x * (t[s].x - sxa) + sc.z * sxa + 16.0 * sc.y * (t[s].y - sxb) + sc.w * sxb;
#elif WT == W_Q8
                acc[s][0] += sc.x * (256.0 * (t[s].x - sxa) - 128.0 * sxa);
#else
                acc[s][0] += 256.0 * sc.x * (t[s].x - sxa) + sc.y * sxa;
#endif
            }
#else
        // dequantize each weight once (quantized: one FMA), then every x row
        [[unroll]] for (uint i = 0u; i < STEPS; i++) {
            vec4 wa[SLOTS], wb[SLOTS];
            [[unroll]] for (uint m = 0u; m < MATS; m++)
                [[unroll]] for (uint r = 0u; r < MAX_ROWS; r++) {
                    if (r >= ROWS) break;
                    uint s = m * MAX_ROWS + r;
                    vec4 sc = k[s].s;
#if NIBBLES
                    nibbles(k[s].q[i], wa[s], wb[s]);
                    wa[s] = wa[s] * (16.0 * sc.x) + (sc.z - 16.0 * sc.x);
                    wb[s] = wb[s] * (16.0 * sc.y) + (sc.w - 16.0 * sc.y);
#elif WT == W_Q8
                    wa[s] = bytes4(k[s].q[i]) * (256.0 * sc.x) - 384.0 * sc.x;
                    wb[s] = vec4(0.0);
#elif WT == W_MLX8
                    wa[s] = bytes4(k[s].q[i]) * (256.0 * sc.x) + (sc.y - 256.0 * sc.x);
                    wb[s] = vec4(0.0);
#else
                    floats(k[s].q, wa[s], wb[s]);
#endif
                }
            [[unroll]] for (uint j = 0u; j < NMAX; j++) {
                if (j >= n) break;
                vec4 xa, xb;
                load_x(xrows[j], col0, i, xa, xb);
                [[unroll]] for (uint m = 0u; m < MATS; m++)
                    [[unroll]] for (uint r = 0u; r < MAX_ROWS; r++) {
                        if (r >= ROWS) break;
                        uint s = m * MAX_ROWS + r;
#if BYTES || WT == W_F32
                        acc[s][j] += dot(wa[s], xa);
#else
                        acc[s][j] += dot(wa[s], xa) + dot(wb[s], xb);
#endif
                    }
            }
        }
#endif
    }

    // invocation i finishes output i: (row group, row, x row), summing its group's invocations
    [[unroll]] for (uint s = 0u; s < SLOTS; s++)
        [[unroll]] for (uint j = 0u; j < NMAX; j++) {
            if ((s % MAX_ROWS) >= ROWS || j >= n) break;
            partial[(s * NMAX + j) * PAD + tid] = acc[s][j];
        }
    barrier();
    for (uint o = tid; o < GROUPS * ROWS * n; o += wg) {
        uint g = o / (ROWS * n), r = o / n % ROWS, j = o % n, row = rg0 + g * ROWS + r;
        if (row >= p.rows) continue;
        float v[MATS];
        for (uint m = 0u; m < MATS; m++) {
            v[m] = 0.0;
            uint at = ((m * MAX_ROWS + r) * NMAX + j) * PAD + g * lanes;
            for (uint i = 0u; i < lanes; i++) v[m] += partial[at + i];
        }
#if MODE == 0
        Floats(p.y).v[j * p.y_stride + row] = v[0];
#elif MODE == 3
        Floats(p.y).v[j * p.y_stride + row] = silu(v[0]) * v[1];
#elif MODE == 1
        Floats(p.y).v[pairs[j] * p.rows + row] = silu(v[0]) * v[1];
#else
        Floats(p.y).v[pairs[j] * p.rows + row] = v[0];
#endif
    }
}
