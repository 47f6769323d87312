#version 460
// matmul_coopmat.comp — y = x · Wᵀ for many rows of x on the matrix units (VK_KHR_cooperative_matrix): the prefill
// GEMM where the device has them; matmul_tiled.comp computes the same product everywhere else. Three stages (STAGE):
//   HALVES  x (f32) → x16 (f16, rows padded to a multiple of 8 with zeros), once per product
//   GEMM    y[j][r] = Σ_c W[r][c] · x16[j][c]        j < n, r < rows
//           or, split over the columns (workgroup z takes columns [z · k_split, (z + 1) · k_split)), each split's sums
//           into its own copy of y, when the tiles alone would leave most of the GPU idle (few weight rows, few x rows)
//   SUM     y = the sum of those copies
// and, with MOE defined (1 or 2), a GEMM stage for the routed experts of a prefill chunk, grouped by the plan of
// kernels/moe.comp (tiles of ≤ BN (token, slot) pairs of one expert, the pairs in the plan's order):
//   MOE 1   h16[pair][r] = silu(gate_e[r] · x16[token]) · (up_e[r] · x16[token])   (f16, saturating), r < rows
//   MOE 2   yo[pair][r] = down_e[r] · h16[pair]                                     (f32)
// A tile's pairs are gathered as the x rows of one workgroup (pairs past its count repeat its first: their products
// are never stored); the workgroup grid is (plan tiles, row blocks). With MOE 1 a workgroup's BM weight rows are BM / 2
// rows of gate and the same rows of up, each subgroup's WM rows half gate, half up, so the two products of an element
// meet in one subgroup's accumulators.
// A GEMM workgroup computes a BM × BN tile of y (BM weight rows × BN x rows), stepping over the columns BK at a time.
// Each step the weight tile is dequantized (decode8.glsl; q4 16 bytes at a time, in f16 arithmetic) to f16 and stored
// with the x16 tile in shared memory; each subgroup multiplies its WM × WN part with 16 × 16 × 16 f16 products
// accumulated in f32. The next step's words are read from memory into registers before the products, so those loads
// are in flight during them; they are decoded when stored (into the other buffer, where there are two). A tile whose
// rows and steps all lie inside the operands takes a copy of the loop without bounds tests.
// Operands are f16: weights of any type lose nothing above 2⁻¹⁴ in magnitude (bf16's 8 significant bits fit in
// f16's 11); activations keep 11 significant bits (relative error ≤ 2⁻¹¹) and saturate at ±65504 (HALVES clamps,
// so an outlier costs its own precision instead of turning a row into infinities).
// Defines: STAGE; GEMM: WT (weight type), BM, BN, BK, WM, WN, MOE (0 unless defined); its workgroup is
// (BM/WM)·(BN/WN) subgroups of SUBGROUP invocations (spec constant 0 = that product; the host enables this kernel only
// where subgroups have SUBGROUP invocations). Caller guarantees: cols % 4 == 0, x rows 16-byte aligned; x16 rows of
// x_stride halves, a multiple of 8, as many as the x tiles cover (HALVES writes them: `rows` = that count there; MOE:
// the rows its pairs name).
// Not translated to Metal (SPIRV-Cross has no cooperative matrices): kernels/generate.ts marks it Vulkan-only.
#extension GL_GOOGLE_include_directive : require
#extension GL_KHR_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#include "common.glsl"

layout(local_size_x_id = 0) in;

#define HALVES 0
#define GEMM 1
#define SUM 2

layout(push_constant) uniform P {
    uint64_t w;       // row 0 of W
    uint64_t x;       // GEMM: x16 [n][x_stride] (f16); HALVES: x [n][cols] (f32)
    uint64_t y;       // GEMM: y [n][y_stride] (split: y + z · n · y_stride, z a split); HALVES: x16 [n][y_stride]; SUM: y
    uint row_bytes, rows, cols, n, x_stride, y_stride;
    uint k_split;     // GEMM: columns per split (a multiple of 128), 0 = one; SUM: splits; MOE: top k
    uint64_t parts;   // SUM: the splits' products [splits][n][rows]; MOE: the plan's tiles, the pair order n ints on
} p;
// MOE: w is the expert table ([E][gate, up, down] row-0 addresses); x is x16 [tokens][x_stride] (MOE 1) or h16
// [pairs][x_stride] (MOE 2), y is h16 [pairs][y_stride] (MOE 1) or yo [pairs][y_stride] (MOE 2); rows and cols are the
// expert matrices'.

#if STAGE == SUM
// y[j][r] = Σ_z parts[z][j][r]: the splits of a GEMM over its columns (few weight rows or few x rows leave too few
// tiles to fill the GPU, so the columns are split too), one invocation per element of y
void main() {
    uint i = flat_group() * gl_WorkGroupSize.x + gl_LocalInvocationID.x;
    if (i >= p.n * p.rows) return;
    uint j = i / p.rows, r = i % p.rows;
    Floats parts = Floats(p.parts);
    float s = 0.0;
    for (uint z = 0u; z < p.k_split; z++) s += parts.v[(z * p.n + j) * p.rows + r];
    Floats(p.y).v[j * p.y_stride + r] = s;
}
#elif STAGE == HALVES

// one invocation per 8 halves of x16; rows from n to `rows` (a whole number of the GEMM's x tiles) are zeros
void main() {
    uint i = flat_group() * gl_WorkGroupSize.x + gl_LocalInvocationID.x, per_row = p.y_stride / 8u;
    if (i >= p.rows * per_row) return;
    uint row = i / per_row, c = (i % per_row) * 8u;
    uvec4 h = uvec4(0u);
    for (uint k = 0u; k < 2u; k++)
        if (row < p.n && c + 4u * k < p.cols) {
            vec4 v = clamp(Vec4s(p.x + uint64_t(row * p.cols + c + 4u * k) * 4ul).v[0], -65504.0, 65504.0);
            h[2u * k] = packHalf2x16(v.xy);
            h[2u * k + 1u] = packHalf2x16(v.zw);
        }
    Uvec4Out(p.y + uint64_t(i) * 16ul).v[0] = h;
}
#else
#include "decode8.glsl"
#ifndef MOE
#define MOE 0
#endif

#ifndef BM
#define BM 128
#define BN 128
#define BK 32
#define WM 64
#define WN 64
#endif
#define SUBGROUP 32
#define THREADS ((BM / WM) * (BN / WN) * SUBGROUP)
#define STRIDE (BK / 8 + 1)              // a tile row in shared memory, in uvec4 (8 halves): BK and 16 bytes of padding
#define A_LOADS (BM * BK / 8 / THREADS)  // 8 weights per load
#define B_LOADS (BN * BK / 8 / THREADS)  // 8 halves of x16 per load
#if A_LOADS * THREADS * 8 != BM * BK || B_LOADS * THREADS * 8 != BN * BK || WM % 16 != 0 || WN % 16 != 0
#error "tile loads must divide evenly over the workgroup, subgroup tiles be whole 16 x 16 blocks"
#endif
#define TILE ((BM + BN) * STRIDE)  // one buffer: the weight tile's BM rows, then the x tile's BN rows
// Two buffers (the next step's tiles stored while this step's products run: one barrier per step instead of two) for
// workgroups of 8 subgroups, where they fit in the 48 KiB the device check asks for (native/backends/vulkan/device.c).
// Those hold one workgroup per multiprocessor anyway (their registers); a workgroup of 4 subgroups keeps one buffer,
// as two workgroups share a multiprocessor only while each takes little shared memory (NVIDIA: ≤ 24 KiB).
#if THREADS >= 256 && 2 * TILE * 16 <= 49152
#define DB 1
#else
#define DB 0
#endif
// result blocks staged per subgroup at the end: one 16 x 16 block (64 uvec4), with MOE 1 a gate block and its up block
#if MOE == 1
#define STAGED 128
#else
#define STAGED 64
#endif
#if (DB + 1) * TILE * 16 > 49152 || (DB + 1) * TILE < (THREADS / SUBGROUP) * STAGED
#error "the tiles take more than 48 KiB of shared memory, or too little for the result blocks"
#endif
#if MOE == 1 && WM % 32 != 0
#error "MOE 1 needs subgroup tiles of whole 16-row blocks of gate and of up"
#endif
// q4 weights are read 16 bytes at a time: 16 columns of a group and 16 of the next (a byte holds one of each), decoded
// in f16 arithmetic; whole steps of 64 columns where the tile is whole (the scales' words then aligned).
#define Q4WIDE (WT == W_Q4 && (BK == 32 || BK == 64))
#define Q_ITEMS (BM * 2 / THREADS)  // halves of a weight row's 32 bytes of nibbles per invocation
#if Q4WIDE && Q_ITEMS * THREADS != BM * 2
#error "the q4 tile loads must divide evenly over the workgroup"
#endif

// S[b · TILE + m · STRIDE + k/8] = W[m0 + m][k0 + k … k+7] as f16, S[b · TILE + (BM + j) · STRIDE + k/8] =
// x16[n0 + j][k0 + k … k+7], b the buffer; an edge tile's result blocks go through the first buffer at the end.
shared uvec4 S[(DB + 1) * TILE];

#define MatA coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseA>
#define MatB coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseB>
#define MatC coopmat<float, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator>

uint m0, n0, wm, wn;
uint kb, ke;      // this workgroup's columns: its split
uint64_t ya;      // where its tile of y goes
uint64_t wa, wb;  // row 0 of the weights (MOE 1: of gate, of up; else both W)
#if MOE
uint start, count;        // the tile's pairs: its first in the plan's pair order, how many
uint64_t xrows[B_LOADS];  // the x16 (MOE 1) or h16 (MOE 2) row each of this invocation's x loads reads
#endif
MatC acc[WM / 16][WN / 16];
uvec4 xr[B_LOADS];  // the next step's halves of x16
#if Q4WIDE
uvec4 qn[Q_ITEMS];  // 16 bytes of nibbles
uvec3 qs[Q_ITEMS];  // the words of the two groups' scales (d) and minimums (m: one or two words)
#else
uvec4 wr[A_LOADS];  // load8's words of the next step's weights
#endif

// The loads and stores below take `checked` (a constant where they are called): false inside a whole tile, where every
// bounds test holds and the loads go out untested (loads predicated on their bounds slowed the kernel far beyond the
// tests' own instructions).
#define INSIDE(c) (!checked || (c))

// The output row of the tile's weight row m, and where that weight row is.
uint out_row(uint m) {
#if MOE == 1
    return m0 + m / WM * (WM / 2u) + m % (WM / 2u);
#else
    return m0 + m;
#endif
}
bool row_in(uint m) { return out_row(m) < p.rows; }
uint64_t w_row(uint m) {
#if MOE == 1
    uint64_t base = m % WM < WM / 2u ? wa : wb;
#else
    uint64_t base = wa;
#endif
    return base + uint64_t(out_row(m)) * p.row_bytes;
}

// Row j of the x tile, where x load i of this invocation reads it.
uint64_t x_row(uint i, uint j) {
#if MOE
    return xrows[i];
#else
    return p.x + uint64_t(n0 + j) * p.x_stride * 2ul;
#endif
}

uvec4 pack8(float w[8]) {
    return uvec4(packHalf2x16(vec2(w[0], w[1])), packHalf2x16(vec2(w[2], w[3])), packHalf2x16(vec2(w[4], w[5])),
                 packHalf2x16(vec2(w[6], w[7])));
}

#if Q4WIDE
// Item i of this invocation: row m of the tile, half h of the row's 32 bytes of a pair of groups.
void q_item(uint i, out uint m, out uint h) {
    uint t = gl_LocalInvocationID.x + i * THREADS;
    m = t >> 1;
    h = t & 1u;
}

// Loads the pair of groups that columns k0 … k0 + BK - 1 are in, where a step starts one (with BK = 32, every other).
void fetch_q4(uint k0, bool checked) {
    if (BK == 32 && (k0 & 32u) != 0u) return;  // the high nibbles of the words already here
    uint nb = (p.cols + QK - 1u) / QK, qbytes = (nb + 1u) / 2u * QK, g = k0 / QK;
    bool aligned = !checked || ((p.row_bytes | uint(wa) | uint(wb)) & 15u) == 0u;
    [[unroll]] for (uint i = 0u; i < Q_ITEMS; i++) {
        uint m, h;
        q_item(i, m, h);
        qn[i] = uvec4(0u);
        qs[i] = uvec3(0u);
        if (INSIDE(row_in(m))) {
            uint64_t row = w_row(m);
            uint off = (g >> 1) * QK + h * 16u, db = qbytes + g * 2u, mb = qbytes + nb * 2u + g * 2u;
            Uints u = Uints(row);
            qn[i] = aligned ? Uvec4s(row + off).v[0] : uvec4(u.v[off >> 2], u.v[(off >> 2) + 1u], u.v[(off >> 2) + 2u], u.v[(off >> 2) + 3u]);
            qs[i].xy = uvec2(u.v[db >> 2], u.v[mb >> 2]);
            if (checked && (mb & 2u) != 0u && g + 1u < nb) qs[i].z = u.v[(mb >> 2) + 1u];
        }
    }
}

// Stores the step's 16 weights of each item in f16: d · q + m with q exact in f16 (a nibble under the exponent of
// 1024, less 1024), one rounding. Bytes are taken in the order 0, 2, 1, 3 so that each word's halves are adjacent
// columns.
void stash_q4(uint k0, uint base, uint cut, bool partial, bool checked) {
    uint hi = BK == 32 ? (k0 >> 5) & 1u : 0u;
    bool odd = checked && (((p.cols + QK - 1u) / QK) & 1u) != 0u;  // an odd number of groups: the minimums 2 bytes off
    [[unroll]] for (uint i = 0u; i < Q_ITEMS; i++) {
        uint m, h;
        q_item(i, m, h);
        f16vec2 d = unpackFloat2x16(qs[i].x);
        f16vec2 mn = odd ? unpackFloat2x16((qs[i].y >> 16) | (qs[i].z << 16)) : unpackFloat2x16(qs[i].y);
        [[unroll]] for (uint part = 0u; part < BK / 32u; part++) {
            uint half_ = BK == 32 ? hi : part, c0 = k0 - (BK == 32 ? hi * 32u : 0u) + half_ * 32u + h * 16u;
            float16_t dh = half_ == 0u ? d.x : d.y, mh = half_ == 0u ? mn.x : mn.y;
            uint w2[8];
            [[unroll]] for (uint j = 0u; j < 4u; j++) {
                uint w = qn[i][j] >> (half_ * 4u);
                w = (w & 0xff0000ffu) | ((w >> 8) & 0x0000ff00u) | ((w << 8) & 0x00ff0000u);
                f16vec2 a = unpackFloat2x16((w & 0x000f000fu) | 0x64006400u) - f16vec2(1024.0hf);
                f16vec2 b = unpackFloat2x16(((w >> 8) & 0x000f000fu) | 0x64006400u) - f16vec2(1024.0hf);
                w2[2u * j] = packFloat2x16(fma(a, f16vec2(dh), f16vec2(mh)));
                w2[2u * j + 1u] = packFloat2x16(fma(b, f16vec2(dh), f16vec2(mh)));
            }
            [[unroll]] for (uint e = 0u; e < 2u; e++) {
                uint c = c0 + e * 8u;
                if (partial && c == cut) continue;
                uvec4 v = INSIDE(c + 8u <= p.cols) ? uvec4(w2[4u * e], w2[4u * e + 1u], w2[4u * e + 2u], w2[4u * e + 3u]) : uvec4(0u);
                S[base + m * STRIDE + (c - k0) / 8u] = v;
            }
        }
    }
}
#endif

// Issues the loads of the tile at column k0: whole groups of 8 weights inside the matrix (others are stash's).
void fetch(uint k0, bool checked) {
    uint tid = gl_LocalInvocationID.x;
#if Q4WIDE
    fetch_q4(k0, checked);
#else
    [[unroll]] for (uint i = 0u; i < A_LOADS; i++) {
        uint t = tid + i * THREADS, m = t / (BK / 8u), c = k0 + (t % (BK / 8u)) * 8u;
        wr[i] = INSIDE(row_in(m) && c + 8u <= p.cols) ? load8(w_row(m), c, p.cols) : uvec4(0u);
    }
#endif
    [[unroll]] for (uint i = 0u; i < B_LOADS; i++) {
        uint t = tid + i * THREADS, j = t / (BK / 8u), c = k0 + (t % (BK / 8u)) * 8u;
        xr[i] = INSIDE(c < p.x_stride) ? Uvec4s(x_row(i, j) + uint64_t(c) * 2ul).v[0] : uvec4(0u);
    }
}

// Decodes the fetched words into buffer buf. The one group of 8 columns that the matrix ends inside (cols % 8 is 4)
// goes through the general decoder, in a loop of its own, so the unrolled loads above stay small.
void stash(uint k0, uint buf, bool checked) {
    uint tid = gl_LocalInvocationID.x, cut = p.cols & ~7u, base = buf * TILE;
    bool partial = checked && cut != p.cols && cut >= k0 && cut < k0 + BK;
#if Q4WIDE
    stash_q4(k0, base, cut, partial, checked);
#else
    [[unroll]] for (uint i = 0u; i < A_LOADS; i++) {
        uint t = tid + i * THREADS, m = t / (BK / 8u), q = t % (BK / 8u), c = k0 + q * 8u;
        if (partial && c == cut) continue;
        uvec4 h = uvec4(0u);
        if (INSIDE(row_in(m) && c + 8u <= p.cols)) {
#if WT == W_F16
            h = wr[i];
#else
            float w[8];
            unpack8(wr[i], c, p.cols, w);
            h = pack8(w);
#endif
        }
        S[base + m * STRIDE + q] = h;
    }
#endif
    [[unroll]] for (uint i = 0u; i < B_LOADS; i++) {
        uint t = tid + i * THREADS, j = t / (BK / 8u), q = t % (BK / 8u);
        S[base + (BM + j) * STRIDE + q] = xr[i];
    }
    if (partial)
        for (uint m = tid; m < BM; m += THREADS) {
            float w[8];
            [[unroll]] for (uint e = 0u; e < 8u; e++)
                w[e] = row_in(m) && cut + e < p.cols ? weight_at(WT, w_row(m), cut + e, p.cols) : 0.0;
            S[base + m * STRIDE + (cut - k0) / 8u] = pack8(w);
        }
}

// The products over every column, in steps of BK.
void steps(bool checked) {
    fetch(kb, checked);
#if DB
    stash(kb, 0u, checked);
    barrier();
#endif
    for (uint k0 = kb; k0 < ke; k0 += BK) {
#if DB
        uint base = ((k0 - kb) / BK) & 1u;
        if (k0 + BK < ke) fetch(k0 + BK, checked);
#else
        uint base = 0u;
        barrier();  // the last step's products have read the tiles
        stash(k0, 0u, checked);
        barrier();
        if (k0 + BK < ke) fetch(k0 + BK, checked);
#endif
        base *= TILE;
        [[unroll]] for (uint k = 0u; k < BK / 8u; k += 2u) {  // 16 columns: two uvec4 of halves
            MatA a[WM / 16];
            [[unroll]] for (uint i = 0u; i < WM / 16u; i++)
                coopMatLoad(a[i], S, base + (wm + i * 16u) * STRIDE + k, STRIDE, gl_CooperativeMatrixLayoutRowMajor);
            [[unroll]] for (uint j = 0u; j < WN / 16u; j++) {
                MatB b;
                coopMatLoad(b, S, base + (BM + wn + j * 16u) * STRIDE + k, STRIDE, gl_CooperativeMatrixLayoutColumnMajor);
                [[unroll]] for (uint i = 0u; i < WM / 16u; i++) acc[i][j] = coopMatMulAdd(a[i], b, acc[i][j]);
            }
        }
#if DB
        // buffer base ^ 1 was last read by the step before, which every invocation finished before the last barrier
        if (k0 + BK < ke) stash(k0 + BK, (((k0 - kb) / BK) & 1u) ^ 1u, checked);
        barrier();
#endif
    }
}

#if MOE
// The tile's results, from each subgroup's accumulators through its part of shared memory (free once every subgroup is
// past its products) to the rows of its pairs: MOE 1 two rows of h per lane and word (silu(gate) · up in f16), MOE 2
// one float of yo per lane. Every loop here has a constant trip count and unrolls (see the dense edge tiles below).
void store_pairs(Ints order) {
#if !DB
    barrier();
#endif
    uint lane = gl_SubgroupInvocationID, cs = gl_SubgroupID * STAGED;
#if MOE == 1
    [[unroll]] for (uint i = 0u; i < WM / 32u; i++)
        [[unroll]] for (uint j = 0u; j < WN / 16u; j++) {
            coopMatStore(acc[i][j], S, cs, 4u, gl_CooperativeMatrixLayoutColumnMajor);
            coopMatStore(acc[i + WM / 32u][j], S, cs + 64u, 4u, gl_CooperativeMatrixLayoutColumnMajor);
            subgroupBarrier();
            [[unroll]] for (uint e0 = 0u; e0 < 128u; e0 += SUBGROUP) {
                uint e = e0 + lane, c = e / 8u, r = (e % 8u) * 2u, at = c * 16u + r;  // element (r, c) at float c · 16 + r
                uint col = wn + j * 16u + c, row = out_row(wm + i * 16u + r);
                if (col < count && row < p.rows) {
                    vec2 g = vec2(uintBitsToFloat(S[cs + at / 4u][at % 4u]), uintBitsToFloat(S[cs + at / 4u][at % 4u + 1u]));
                    vec2 u = vec2(uintBitsToFloat(S[cs + 64u + at / 4u][at % 4u]), uintBitsToFloat(S[cs + 64u + at / 4u][at % 4u + 1u]));
                    vec2 h = clamp(vec2(silu(g.x) * u.x, silu(g.y) * u.y), -65504.0, 65504.0);
                    uint pair = uint(order.v[start + col]);
                    Uints(p.y).v[(pair * p.y_stride + row) / 2u] = packHalf2x16(h);
                }
            }
            subgroupBarrier();
        }
#else
    [[unroll]] for (uint i = 0u; i < WM / 16u; i++)
        [[unroll]] for (uint j = 0u; j < WN / 16u; j++) {
            coopMatStore(acc[i][j], S, cs, 4u, gl_CooperativeMatrixLayoutColumnMajor);
            subgroupBarrier();
            [[unroll]] for (uint e0 = 0u; e0 < 256u; e0 += SUBGROUP) {
                uint e = e0 + lane, col = wn + j * 16u + e / 16u, row = out_row(wm + i * 16u + e % 16u);
                if (col < count && row < p.rows)
                    Floats(p.y).v[uint(order.v[start + col]) * p.y_stride + row] = uintBitsToFloat(S[cs + e / 4u][e % 4u]);
            }
            subgroupBarrier();
        }
#endif
}

void main() {
    Ints plan = Ints(p.parts), order = Ints(p.parts + uint64_t(p.n) * 4ul);
    uint tile = gl_WorkGroupID.x, e = uint(plan.v[3u * tile]);
    start = uint(plan.v[3u * tile + 1u]);
    count = uint(plan.v[3u * tile + 2u]);
    Addrs table = Addrs(p.w);
#if MOE == 1
    wa = table.v[3u * e], wb = table.v[3u * e + 1u];
    m0 = gl_WorkGroupID.y * (BM / 2u);
#else
    wa = table.v[3u * e + 2u], wb = wa;
    m0 = gl_WorkGroupID.y * BM;
#endif
    n0 = 0u;
    [[unroll]] for (uint i = 0u; i < B_LOADS; i++) {
        uint j = (gl_LocalInvocationID.x + i * THREADS) / (BK / 8u), pair = uint(order.v[start + min(j, count - 1u)]);
        xrows[i] = p.x + uint64_t(MOE == 1 ? pair / p.k_split : pair) * p.x_stride * 2ul;
    }
    uint warp = gl_SubgroupID;
    wm = (warp % (BM / WM)) * WM;
    wn = (warp / (BM / WM)) * WN;
    [[unroll]] for (uint i = 0u; i < WM / 16u; i++)
        [[unroll]] for (uint j = 0u; j < WN / 16u; j++) acc[i][j] = MatC(0.0);
    kb = 0u;
    ke = p.cols;
    bool whole = row_in(BM - 1u) && p.cols % (Q4WIDE ? 64u : BK) == 0u && (!Q4WIDE || ((p.row_bytes | uint(wa) | uint(wb)) & 15u) == 0u);
    if (whole) steps(false);
    else steps(true);
    store_pairs(order);
}
#else
void main() {
    // Consecutive workgroups take the x tiles of one weight tile, so that tile is read from memory once and the
    // others find it in L2 (x, a few MiB in f16, stays there).
    uint tiles_n = (p.n + BN - 1u) / BN, tile = gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x;
    m0 = tile / tiles_n * BM;
    n0 = tile % tiles_n * BN;
    uint warp = gl_SubgroupID;
    wm = (warp % (BM / WM)) * WM;
    wn = (warp / (BM / WM)) * WN;
    [[unroll]] for (uint i = 0u; i < WM / 16u; i++)
        [[unroll]] for (uint j = 0u; j < WN / 16u; j++) acc[i][j] = MatC(0.0);
    kb = p.k_split == 0u ? 0u : gl_WorkGroupID.z * p.k_split;
    ke = p.k_split == 0u ? p.cols : min(p.cols, kb + p.k_split);
    ya = p.y + uint64_t(gl_WorkGroupID.z) * p.n * p.y_stride * 4ul;

    wa = p.w, wb = p.w;
    // a whole tile: every weight row inside (x16 has whole x tiles, zero rows past n), whole steps (of 64 columns for
    // q4: its scales' words aligned), q4 rows 16-byte aligned
    bool whole = row_in(BM - 1u) && p.cols % (Q4WIDE ? 64u : BK) == 0u && (!Q4WIDE || ((p.row_bytes | uint(wa)) & 15u) == 0u);
    if (whole) steps(false);
    else steps(true);

    // y is column-major from the product's view: element (r, j) of this tile at y[(n0 + j) · y_stride + m0 + r]
    if (m0 + BM <= p.rows && n0 + BN <= p.n) {
        [[unroll]] for (uint i = 0u; i < WM / 16u; i++)
            [[unroll]] for (uint j = 0u; j < WN / 16u; j++) {
                uint off = (n0 + wn + j * 16u) * p.y_stride + m0 + wm + i * 16u;
                coopMatStore(acc[i][j], Floats(ya).v, off, p.y_stride, gl_CooperativeMatrixLayoutColumnMajor);
            }
        return;
    }
    // an edge tile: each subgroup stages its 16 × 16 blocks through shared memory (64 uvec4 of the first buffer, free
    // once every subgroup is past its products) and writes those inside y. Every loop here has a constant trip count
    // and unrolls: one that did not would index acc at run time, and the driver would then keep all of acc in local
    // memory for the whole kernel, products included.
#if !DB
    barrier();
#endif
    uint lane = gl_SubgroupInvocationID, cs = warp * 64u;
    [[unroll]] for (uint i = 0u; i < WM / 16u; i++)
        [[unroll]] for (uint j = 0u; j < WN / 16u; j++) {
            coopMatStore(acc[i][j], S, cs, 4u, gl_CooperativeMatrixLayoutColumnMajor);
            subgroupBarrier();
            [[unroll]] for (uint e0 = 0u; e0 < 256u; e0 += SUBGROUP) {
                uint e = e0 + lane, r = m0 + wm + i * 16u + e % 16u, c = n0 + wn + j * 16u + e / 16u;
                if (r < p.rows && c < p.n) Floats(ya).v[c * p.y_stride + r] = uintBitsToFloat(S[cs + e / 4u][e % 4u]);
            }
            subgroupBarrier();
        }
}
#endif  // MOE
#endif
