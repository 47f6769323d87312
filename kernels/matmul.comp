#version 460
// matmul.comp — y = x · Wᵀ for few rows of x (decode, small batches, MoE expert tiles): the bandwidth-bound GEMV.
//
//   MODE 0 (dense):  y[j][r] = Σ_c W[r][c] · x[j][c]                 j < n ≤ NMAX
//   MODE 1 (MoE gate/up):  h[pair][r] = silu(gate_e[r] · x[tok]) · (up_e[r] · x[tok])   for the pairs of one tile
//   MODE 2 (MoE down):     yo[pair][r] = down_e[r] · h[pair]
// In MoE modes a workgroup row of the grid is one tile of the plan (moe.comp): up to NMAX (token, slot) pairs routed
// to the same expert e (the plan's tile size), so the expert's rows are read once for all of them.
//
// Each workgroup owns ROWS weight rows; its invocations stride over the rows in 16-byte chunks, decode a chunk to
// f32 once per row and multiply it with every x row (x stays in L1/L2). With NMAX 1 (batch-1 decode, the
// bandwidth-bound case) the x chunk is loaded once and reused by every row, so L1 traffic stays near the weight
// traffic. Quantized types (Q8, Q4 and MLX's affine MLX8, MLX4) apply each group's scale and offset once per chunk
// (quant_dot). Defines: WT (weight type, common.glsl), MODE, NMAX (1 or 4: most x rows per dispatch, or pairs per MoE
// tile).
// Spec constants: 0 = workgroup size (≤ 128), 1 = ROWS (≤ MAX_ROWS; ≤ 2 in MODE 1), 2 = CHECK (1: cols is not a
// multiple of the chunk's columns, so x reads past cols are masked).
// Caller guarantees: cols % 4 == 0, x rows 16-byte aligned, device weight rows zero-padded to 16 bytes.
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint ROWS = 2;
layout(constant_id = 2) const uint CHECK = 1;
#if MODE == 1
#define MATS 2  // gate and up rows of the same index
#define MAX_ROWS 2
#else
#define MATS 1
#define MAX_ROWS 4
#endif

layout(push_constant) uniform P {
    uint64_t w;       // dense: row 0 of W; MoE: the expert table, per expert [gate, up, down] row-0 addresses
    uint64_t x;       // dense: x [n][x_stride]; MoE gate/up: x [tokens][cols]; down: h [pairs][cols]
    uint64_t y;       // dense: y [n][y_stride]; MoE: h or yo [pairs][rows]
    uint64_t plan;    // MoE: the plan (moe.comp): tiles (expert, start, count), then the pair order
    uint row_bytes;   // device bytes per weight row
    uint rows, cols;
    uint n;           // dense: x rows (≤ NMAX)
    uint x_stride, y_stride;
    uint top_k;       // MoE gate/up: pair p reads token p / top_k
    uint order_at;    // MoE: index of the pair order in the plan (ints)
} p;

// CW: columns per 16-byte chunk (Q4: the same 16 columns of two groups; MLX4, MLX8: within one group of 64).
#if WT == W_F32
#define CW 4
#elif WT == W_BF16 || WT == W_F16
#define CW 8
#elif WT == W_Q8 || WT == W_MLX8
#define CW 16
#else
#define CW 32
#endif
#define QUANT (WT == W_Q8 || WT == W_Q4 || WT == W_MLX8 || WT == W_MLX4)

uint n_chunks() {
    uint nb = (p.cols + QK - 1u) / QK;
#if WT == W_F32
    return p.cols / 4u;
#elif WT == W_BF16 || WT == W_F16
    return (p.cols + 7u) / 8u;
#elif WT == W_Q8
    return nb * 2u;
#elif WT == W_Q4
    return (nb + 1u) / 2u * 2u;
#else
    return p.cols / CW;
#endif
}

// First column of chunk c; for Q4 the second half of the chunk is 16 columns further (the next group).
uint chunk_col(uint c) {
#if WT == W_Q4
    return (c >> 1) * 64u + (c & 1u) * 16u;
#else
    return c * CW;
#endif
}

#if !QUANT
// Decodes chunk c of the row at `row` into wv (f32 weights in column order); quantized types go through quant_dot.
void decode(uint64_t row, uint c, out float wv[CW]) {
    uvec4 q = Uvec4s(row).v[c];
#if WT == W_F32
    for (uint i = 0u; i < 4u; i++) wv[i] = uintBitsToFloat(q[i]);
#elif WT == W_BF16
    for (uint i = 0u; i < 4u; i++) {
        wv[2u * i] = bf16_lo(q[i]);
        wv[2u * i + 1u] = bf16_hi(q[i]);
    }
#elif WT == W_F16
    for (uint i = 0u; i < 4u; i++) {
        vec2 h = unpackHalf2x16(q[i]);
        wv[2u * i] = h.x;
        wv[2u * i + 1u] = h.y;
    }
#endif
}
#endif

// The chunk's x values of the row at `xrow` (columns ≥ cols read as 0 when CHECK).
void load_x(uint64_t xrow, uint col0, out vec4 xs[CW / 4]) {
    Vec4s xv = Vec4s(xrow);
    [[unroll]] for (uint k = 0u; k < CW / 4u; k++) {
#if WT == W_Q4
        uint col = col0 + 4u * k + (k >= 4u ? 16u : 0u);
#else
        uint col = col0 + 4u * k;
#endif
        xs[k] = CHECK == 0u || col < p.cols ? xv.v[col >> 2] : vec4(0.0);
    }
}

#if QUANT
// Quantized types skip the per-weight int → float conversion (quarter rate on NVIDIA): an integer q placed in the top
// mantissa bits of 1.0f is the float f = 1 + q / 2^bits exactly, with one shift and one and-or. Then
//   Σ_j (q_j·d + m)·x_j = d·Σ q_j x_j + m·Σ x_j,   Σ q_j x_j = 2^bits·(Σ f_j x_j − Σ x_j)
// so the inner loop is one FMA per weight; the scale and min are applied once per group (MLX: w = q·scale + bias, the
// same form).
// The nibble or byte at bit `at` of w, as 1 + q/16 (Q4, MLX4), 1 + (q + 128)/256 (Q8, q signed) or 1 + q/256 (MLX8).
#define MANT(w, at, bits) uintBitsToFloat((((at) <= 23 - (bits) ? (w) << (23 - (bits) - (at)) : (w) >> ((at) - 23 + (bits))) & (((1u << (bits)) - 1u) << (23 - (bits)))) | 0x3f800000u)

// This chunk's share of one row's dot product with the x values xs (their sums per group in sx).
float quant_dot(uint64_t row, uint c, const vec4 xs[CW / 4], vec2 sx) {
    uvec4 q = Uvec4s(row).v[c];
    uint nb = (p.cols + QK - 1u) / QK;
#if WT == W_Q4
    uint pair = c >> 1, qbytes = (nb + 1u) / 2u * QK;
    vec2 d = f16x2_at(row, qbytes + pair * 4u), m = f16x2_at(row, qbytes + nb * 2u + pair * 4u);
    float fa = 0.0, fb = 0.0;
    [[unroll]] for (uint i = 0u; i < 4u; i++) {
        uint w = q[i];
        fa += dot(vec4(MANT(w, 0, 4), MANT(w, 8, 4), MANT(w, 16, 4), MANT(w, 24, 4)), xs[i]);
        fb += dot(vec4(MANT(w, 4, 4), MANT(w, 12, 4), MANT(w, 20, 4), MANT(w, 28, 4)), xs[4u + i]);
    }
    float s = 16.0 * d.x * (fa - sx.x) + m.x * sx.x;
    return 2u * pair + 1u < nb ? s + 16.0 * d.y * (fb - sx.y) + m.y * sx.y : s;
#elif WT == W_MLX4 || WT == W_MLX8
    // element k of the chunk: MLX4 nibble k % 8 of word k / 8, MLX8 byte k % 4 of word k / 4 (little-endian)
    uint g = c * CW / QK_MLX, qbytes = WT == W_MLX4 ? p.cols / 2u : p.cols, groups = p.cols / QK_MLX;
    float scale = bf16_at(row, qbytes + g * 2u), bias = bf16_at(row, qbytes + groups * 2u + g * 2u), f = 0.0;
    [[unroll]] for (uint i = 0u; i < 4u; i++) {
        uint w = q[i];
#if WT == W_MLX4
        f += dot(vec4(MANT(w, 0, 4), MANT(w, 4, 4), MANT(w, 8, 4), MANT(w, 12, 4)), xs[2u * i]);
        f += dot(vec4(MANT(w, 16, 4), MANT(w, 20, 4), MANT(w, 24, 4), MANT(w, 28, 4)), xs[2u * i + 1u]);
    }
    return scale * 16.0 * (f - sx.x) + bias * sx.x;
#else
        f += dot(vec4(MANT(w, 0, 8), MANT(w, 8, 8), MANT(w, 16, 8), MANT(w, 24, 8)), xs[i]);
    }
    return scale * 256.0 * (f - sx.x) + bias * sx.x;
#endif
#else
    uint db = nb * QK + (c >> 1) * 2u;
    float d = f16_at(Uints(row).v[db >> 2], (db >> 1) & 1u), f = 0.0;
    [[unroll]] for (uint i = 0u; i < 4u; i++) {
        uint w = q[i] ^ 0x80808080u; /* int8 q → q + 128 in 0..255 */
        f += dot(vec4(MANT(w, 0, 8), MANT(w, 8, 8), MANT(w, 16, 8), MANT(w, 24, 8)), xs[i]);
    }
    return d * (256.0 * (f - sx.x) - 128.0 * sx.x);
#endif
}

// Σ x over the chunk's groups: (group A, group B) for Q4, (the chunk's columns, 0) for the others (one group).
vec2 x_sums(const vec4 xs[CW / 4]) {
    vec4 a = vec4(0.0), b = vec4(0.0);
    [[unroll]] for (uint i = 0u; i < 4u; i++) {
        a += xs[i];
#if CW == 32
        b += xs[4u + i];
#endif
    }
#if WT == W_Q4
    return vec2(a.x + a.y + a.z + a.w, b.x + b.y + b.z + b.w);
#else
    a += b;
    return vec2(a.x + a.y + a.z + a.w, 0.0);
#endif
}
#endif

#if !QUANT
float chunk_dot(const float wv[CW], const vec4 xs[CW / 4]) {
    float s = 0.0;
    [[unroll]] for (uint k = 0u; k < CW / 4u; k++)
        s += dot(vec4(wv[4u * k], wv[4u * k + 1u], wv[4u * k + 2u], wv[4u * k + 3u]), xs[k]);
    return s;
}
#endif

shared float partial[MATS * MAX_ROWS * NMAX][64];

void main() {
    uint tid = gl_LocalInvocationID.x, wg = gl_WorkGroupSize.x;
    uint r0, n;
    uint64_t wbase[MATS];
    uint64_t xrows[NMAX];
#if MODE == 0
    r0 = flat_group() * ROWS;
    n = p.n;
    wbase[0] = p.w;
    for (uint j = 0u; j < NMAX; j++) xrows[j] = p.x + uint64_t(j * p.x_stride) * 4ul;
#else
    Ints plan = Ints(p.plan);
    uint tile = gl_WorkGroupID.x;
    uint e = uint(plan.v[3u * tile]), start = uint(plan.v[3u * tile + 1u]);
    n = uint(plan.v[3u * tile + 2u]);
    r0 = gl_WorkGroupID.y * ROWS;
    Addrs table = Addrs(p.w);
#if MODE == 1
    wbase[0] = table.v[3u * e];
    wbase[1] = table.v[3u * e + 1u];
#else
    wbase[0] = table.v[3u * e + 2u];
#endif
    uint pairs[NMAX];
    for (uint j = 0u; j < NMAX; j++) {
        pairs[j] = j < n ? uint(plan.v[p.order_at + start + j]) : 0u;
#if MODE == 1
        xrows[j] = p.x + uint64_t((pairs[j] / p.top_k) * p.cols) * 4ul;
#else
        xrows[j] = p.x + uint64_t(pairs[j] * p.cols) * 4ul;
#endif
    }
#endif
    if (r0 >= p.rows) return;

    float acc[MATS * MAX_ROWS][NMAX];
    [[unroll]] for (uint r = 0u; r < MATS * MAX_ROWS; r++)
        [[unroll]] for (uint j = 0u; j < NMAX; j++) acc[r][j] = 0.0;

    uint chunks = n_chunks();
    vec4 xs[CW / 4];
#if QUANT
    vec2 sx;
    for (uint c = tid; c < chunks; c += wg) {
        uint col0 = chunk_col(c);
#if NMAX == 1
        load_x(xrows[0], col0, xs);
        sx = x_sums(xs);
#endif
        [[unroll]] for (uint m = 0u; m < MATS; m++)
            [[unroll]] for (uint r = 0u; r < MAX_ROWS; r++) {
                if (r >= ROWS || r0 + r >= p.rows) break;
                [[unroll]] for (uint j = 0u; j < NMAX; j++) {
                    if (j >= n) break;
#if NMAX > 1
                    load_x(xrows[j], col0, xs);
                    sx = x_sums(xs);
#endif
                    acc[m * MAX_ROWS + r][j] += quant_dot(wbase[m] + uint64_t(r0 + r) * p.row_bytes, c, xs, sx);
                }
            }
    }
#else
    float wv[CW];
    for (uint c = tid; c < chunks; c += wg) {
        uint col0 = chunk_col(c);
#if NMAX == 1
        load_x(xrows[0], col0, xs);
#endif
        [[unroll]] for (uint m = 0u; m < MATS; m++)
            [[unroll]] for (uint r = 0u; r < MAX_ROWS; r++) {
                if (r >= ROWS || r0 + r >= p.rows) break;
                decode(wbase[m] + uint64_t(r0 + r) * p.row_bytes, c, wv);
                [[unroll]] for (uint j = 0u; j < NMAX; j++) {
                    if (j >= n) break;
#if NMAX > 1
                    load_x(xrows[j], col0, xs);
#endif
                    acc[m * MAX_ROWS + r][j] += chunk_dot(wv, xs);
                }
            }
    }
#endif

    // one subgroup sum per accumulator, then one slot per subgroup; invocation i finishes output i
    [[unroll]] for (uint r = 0u; r < MATS * MAX_ROWS; r++)
        [[unroll]] for (uint j = 0u; j < NMAX; j++) {
            float s = subgroupAdd(acc[r][j]);
            if (subgroupElect()) partial[r * NMAX + j][gl_SubgroupID] = s;
        }
    barrier();
    for (uint o = tid; o < ROWS * n; o += wg) {
        uint r = o / n, j = o % n;
        if (r0 + r >= p.rows) continue;
        float s[MATS];
        for (uint m = 0u; m < MATS; m++) {
            s[m] = 0.0;
            for (uint i = 0u; i < gl_NumSubgroups; i++) s[m] += partial[(m * MAX_ROWS + r) * NMAX + j][i];
        }
#if MODE == 0
        Floats(p.y).v[j * p.y_stride + r0 + r] = s[0];
#elif MODE == 1
        Floats(p.y).v[pairs[j] * p.rows + r0 + r] = silu(s[0]) * s[1];
#else
        Floats(p.y).v[pairs[j] * p.rows + r0 + r] = s[0];
#endif
    }
}
