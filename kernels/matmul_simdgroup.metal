// matmul_simdgroup.metal — y = x · Wᵀ for many rows of x on an Apple GPU's matrix units (simdgroup_matrix, Apple
// family 7 and newer): the Metal prefill GEMM. Written in MSL by hand, because SPIRV-Cross does not translate the
// cooperative matrices of its Vulkan twin, kernels/matmul_coopmat.comp; read the two together.
//
//   y[j][r] = Σ_c W[r][c] · x[j][c]        j < n, r < rows
//
// Shared with matmul_coopmat.comp: the product and its numerics (f16 operands, f32 accumulation; x clamped to
// ±65504 before it is rounded to f16, so an outlier costs its own precision instead of turning a row into
// infinities; weights dequantized to f32 by the formulas of kernels/decode8.glsl and common.glsl — load8, unpack8 and
// weight_at below are those functions line for line — then rounded to f16), the weight types it takes (all but f32,
// which stays on matmul_tiled.comp), the layout of y, and the caller's guarantees (cols % 4 == 0, x rows 16-byte
// aligned, weight rows 16-byte aligned: the op layer pads them).
// Different: x is read as f32 and rounded to f16 tile by tile (no separate f16 copy of x, no split over the columns,
// one tile shape); q4 weights take decode8's f32 formula then one rounding to f16, where matmul_coopmat.comp's wide
// q4 path computes d · q + m in f16 arithmetic (the two can differ by an f16 ulp); Metal's matrices are 8 × 8 per
// SIMD-group of 32 threads; the weight type is function constant 1 instead of a define (one library, specialized when
// the pipeline is made); threadgroup memory is at most 32 KiB (15.5 KiB here).
//
// A threadgroup of 4 SIMD-groups (128 threads: function constant 0, which the host sets as for every kernel) computes
// a BM × BN tile of y — BM weight rows, BN x rows — stepping over the columns BK at a time: each step the weight tile
// is dequantized to f16 and the x tile rounded to f16 into threadgroup memory, then each SIMD-group multiplies its
// 16 x rows × 32 weight rows (2 × 4 matrices of 8 × 8) over the step. Tiles at the edges (rows, x rows, columns not
// multiples of the tile) load zeros past the operands and write only the elements inside y, through threadgroup memory.
// The interface follows the translated kernels (scripts/build/msl.ts): the push block at buffer 0 is the only
// argument, buffers are 64-bit device addresses in it, function constants are uint, threadgroup arrays have literal
// sizes; test/unit/kernels/metal-translate.test.ts reads it back and checks it.
#include <metal_stdlib>

using namespace metal;

// Weight types: the values of sp_mtype (native/core/quant.h), as in common.glsl.
#define W_F32 0
#define W_BF16 1
#define W_F16 2
#define W_Q8 3
#define W_Q4 4
#define W_MLX4 5
#define W_MLX8 6
#define QK 32
#define QK_MLX 64

// The tile (kernels/generate.ts SIMDGROUP_GEMM holds the same numbers for the op layer; the test compares them).
#define BM 64
#define BN 32
#define BK 32
#define THREADS 128
#define SK (BK + 8)  // a tile row in threadgroup memory, in halves: BK and 16 bytes of padding

// w: row 0 of W (rows row_bytes apart); x: x [n][x_stride] (f32); y: y [n][y_stride] (f32). The push block of
// matmul_tiled.comp, which the op layer fills the same way for either kernel.
struct P
{
    ulong w;
    ulong x;
    ulong y;
    uint row_bytes;
    uint rows;
    uint cols;
    uint n;
    uint x_stride;
    uint y_stride;
};

// Function constants, declared as SPIRV-Cross declares specialization constants (the host reads them so): 0 = threads
// per threadgroup (the op layer sets THREADS), 1 = the weight type.
constant uint threads_tmp [[function_constant(0)]];
constant uint threads = is_function_constant_defined(threads_tmp) ? threads_tmp : 128u;
constant uint wt_tmp [[function_constant(1)]];
constant uint wt = is_function_constant_defined(wt_tmp) ? wt_tmp : 2u;
constant uint3 gl_WorkGroupSize [[maybe_unused]] = uint3(threads, 1u, 1u);

static inline float bf16_lo(uint w) { return as_type<float>(w << 16); }
static inline float bf16_hi(uint w) { return as_type<float>(w & 0xffff0000u); }
static inline float f16_at(uint w, uint half_index) { return float(as_type<half2>(half_index == 0u ? w : w >> 16).x); }
static inline float bf16_at(ulong row, uint byte)
{
    uint w = reinterpret_cast<device const uint*>(row)[byte >> 2];
    return (byte & 2u) == 0u ? bf16_lo(w) : bf16_hi(w);
}

// common.glsl weight_at: weight `col` of the row at `row`, dequantized (the one group of 8 the matrix ends inside).
static float weight_at(ulong row, uint col, uint cols)
{
    device const uint* u = reinterpret_cast<device const uint*>(row);
    if (wt == W_BF16 || wt == W_F16)
    {
        uint w = u[col >> 1];
        return wt == W_BF16 ? ((col & 1u) == 0u ? bf16_lo(w) : bf16_hi(w)) : f16_at(w, col & 1u);
    }
    if (wt == W_MLX4 || wt == W_MLX8)
    {
        uint nb = cols / QK_MLX, g = col / QK_MLX, qbytes = wt == W_MLX4 ? cols / 2u : cols;
        uint q = wt == W_MLX4 ? extract_bits(u[col >> 3], (col & 7u) * 4u, 4u) : extract_bits(u[col >> 2], (col & 3u) * 8u, 8u);
        return float(q) * bf16_at(row, qbytes + g * 2u) + bf16_at(row, qbytes + nb * 2u + g * 2u);
    }
    uint nb = (cols + QK - 1u) / QK, g = col / QK, j = col % QK;
    if (wt == W_Q8)
    {
        int q = extract_bits(as_type<int>(u[col >> 2]), (col & 3u) * 8u, 8u);
        uint dbyte = nb * QK + g * 2u;
        return float(q) * f16_at(u[dbyte >> 2], (dbyte >> 1) & 1u);
    }
    uint qbytes = (nb + 1u) / 2u * QK, byte_index = (g / 2u) * QK + j;
    uint q = extract_bits(u[byte_index >> 2], (byte_index & 3u) * 8u + (g & 1u) * 4u, 4u);
    uint db = qbytes + g * 2u, mb = qbytes + nb * 2u + g * 2u;
    return float(q) * f16_at(u[db >> 2], (db >> 1) & 1u) + f16_at(u[mb >> 2], (mb >> 1) & 1u);
}

// decode8.glsl load8: the words holding weights col0 … col0 + 7 (col0 a multiple of 8, col0 + 8 ≤ cols).
static uint4 load8(ulong row, uint col0, uint cols)
{
    device const uint* u = reinterpret_cast<device const uint*>(row);
    if (wt == W_BF16 || wt == W_F16)
        return *reinterpret_cast<device const uint4*>(row + ulong(col0) * 2ul);
    if (wt == W_Q8)
    {
        uint nb = (cols + QK - 1u) / QK, db = nb * QK + (col0 / QK) * 2u;
        return uint4(u[col0 >> 2], u[(col0 >> 2) + 1u], u[db >> 2], 0u);
    }
    if (wt == W_MLX4 || wt == W_MLX8)
    {
        uint groups = cols / QK_MLX, g = col0 / QK_MLX, qbytes = wt == W_MLX4 ? cols / 2u : cols;
        uint sb = qbytes + g * 2u, bb = qbytes + groups * 2u + g * 2u;
        if (wt == W_MLX4)
            return uint4(u[col0 >> 3], 0u, u[sb >> 2], u[bb >> 2]);
        return uint4(u[col0 >> 2], u[(col0 >> 2) + 1u], u[sb >> 2], u[bb >> 2]);
    }
    uint nb = (cols + QK - 1u) / QK, g = col0 / QK, qbytes = (nb + 1u) / 2u * QK;
    uint byte0 = (g >> 1) * QK + (col0 % QK), db = qbytes + g * 2u, mb = qbytes + nb * 2u + g * 2u;
    return uint4(u[byte0 >> 2], u[(byte0 >> 2) + 1u], u[db >> 2], u[mb >> 2]);
}

// decode8.glsl unpack8: the eight weights load8 read for column col0.
static void unpack8(uint4 r, uint col0, uint cols, thread float* w)
{
    if (wt == W_BF16)
    {
        for (uint i = 0u; i < 4u; i++)
        {
            w[2u * i] = bf16_lo(r[i]);
            w[2u * i + 1u] = bf16_hi(r[i]);
        }
    }
    else if (wt == W_F16)
    {
        for (uint i = 0u; i < 4u; i++)
        {
            float2 h = float2(as_type<half2>(r[i]));
            w[2u * i] = h.x;
            w[2u * i + 1u] = h.y;
        }
    }
    else if (wt == W_Q8)
    {
        uint nb = (cols + QK - 1u) / QK, db = nb * QK + (col0 / QK) * 2u;
        float d = f16_at(r.z, (db >> 1) & 1u) * 127.0f;
        for (uint i = 0u; i < 2u; i++)
        {
            float4 s = unpack_snorm4x8_to_float(r[i]) * d;
            for (uint e = 0u; e < 4u; e++) w[4u * i + e] = s[e];
        }
    }
    else if (wt == W_MLX4 || wt == W_MLX8)
    {
        uint groups = cols / QK_MLX, g = col0 / QK_MLX, qbytes = wt == W_MLX4 ? cols / 2u : cols;
        uint sb = qbytes + g * 2u, bb = qbytes + groups * 2u + g * 2u;
        float s = ((sb & 2u) == 0u ? bf16_lo(r.z) : bf16_hi(r.z)) * 255.0f, b = (bb & 2u) == 0u ? bf16_lo(r.w) : bf16_hi(r.w);
        if (wt == W_MLX4)
        {
            // eight nibbles, element k at bits 4k
            float4 even = unpack_unorm4x8_to_float(r.x & 0x0f0f0f0fu) * s + b;
            float4 odd = unpack_unorm4x8_to_float((r.x >> 4) & 0x0f0f0f0fu) * s + b;
            for (uint i = 0u; i < 4u; i++)
            {
                w[2u * i] = even[i];
                w[2u * i + 1u] = odd[i];
            }
        }
        else
        {
            for (uint i = 0u; i < 2u; i++)
            {
                float4 t = unpack_unorm4x8_to_float(r[i]) * s + b;
                for (uint e = 0u; e < 4u; e++) w[4u * i + e] = t[e];
            }
        }
    }
    else // W_Q4
    {
        uint nb = (cols + QK - 1u) / QK, g = col0 / QK, qbytes = (nb + 1u) / 2u * QK;
        uint db = qbytes + g * 2u, mb = qbytes + nb * 2u + g * 2u;
        float d = f16_at(r.z, (db >> 1) & 1u) * 255.0f, m = f16_at(r.w, (mb >> 1) & 1u);
        for (uint i = 0u; i < 2u; i++)
        {
            float4 s = unpack_unorm4x8_to_float((r[i] >> ((g & 1u) * 4u)) & 0x0f0f0f0fu) * d + m;
            for (uint e = 0u; e < 4u; e++) w[4u * i + e] = s[e];
        }
    }
}

// decode8.glsl decode8: eight weights of the row at `row` from column col0 (a multiple of 8), zero past cols.
static void decode8(ulong row, uint col0, uint cols, thread float* w)
{
    if (col0 + 8u <= cols)
        unpack8(load8(row, col0, cols), col0, cols, w);
    else
        for (uint i = 0u; i < 8u; i++) w[i] = col0 + i < cols ? weight_at(row, col0 + i, cols) : 0.0f;
}

kernel void splash_gemm_simdgroup(constant P& p [[buffer(0)]], uint tid [[thread_index_in_threadgroup]],
    uint sg [[simdgroup_index_in_threadgroup]], uint lane [[thread_index_in_simdgroup]],
    uint3 group [[threadgroup_position_in_grid]])
{
    // Ws[m · SK + k] = W[m0 + m][k0 + k], Xs[j · SK + k] = x[n0 + j][k0 + k] (f16); Ys: each SIMD-group's 16 × 32
    // block of an edge tile (f32), written to y inside its bounds
    threadgroup half Ws[2560];
    threadgroup half Xs[1280];
    threadgroup float Ys[2048];

    // consecutive threadgroups take the x tiles of one weight tile, so its bytes come from memory once
    uint n0 = group.x * BN, m0 = group.y * BM;
    uint xb = sg / 2u * 16u, wb = sg % 2u * 32u;  // this SIMD-group's x rows and weight rows in the tile
    simdgroup_float8x8 acc[2][4];
    for (uint i = 0u; i < 2u; i++)
        for (uint j = 0u; j < 4u; j++) acc[i][j] = make_filled_simdgroup_matrix<float, 8, 8>(0.0f);

    for (uint k0 = 0u; k0 < p.cols; k0 += BK)
    {
        // the weight tile: BM rows × BK columns, 8 weights per load
        for (uint t = tid; t < BM * BK / 8u; t += THREADS)
        {
            uint m = t / (BK / 8u), kk = t % (BK / 8u) * 8u;
            float w[8];
            if (m0 + m < p.rows && k0 + kk < p.cols)
                decode8(p.w + ulong(m0 + m) * p.row_bytes, k0 + kk, p.cols, w);
            else
                for (uint i = 0u; i < 8u; i++) w[i] = 0.0f;
            for (uint i = 0u; i < 8u; i++) Ws[m * SK + kk + i] = half(w[i]);
        }
        // the x tile: BN rows × BK columns, 4 per load (cols % 4 == 0: a load is inside or past the row)
        for (uint t = tid; t < BN * BK / 4u; t += THREADS)
        {
            uint j = t / (BK / 4u), kk = t % (BK / 4u) * 4u;
            float4 v = float4(0.0f);
            if (n0 + j < p.n && k0 + kk < p.cols)
                v = clamp(*reinterpret_cast<device const float4*>(p.x + (ulong(n0 + j) * p.x_stride + k0 + kk) * 4ul), float4(-65504.0f), float4(65504.0f));
            half4 h = half4(v);
            for (uint i = 0u; i < 4u; i++) Xs[j * SK + kk + i] = h[i];
        }
        threadgroup_barrier(mem_flags::mem_threadgroup);
        for (uint kk = 0u; kk < BK; kk += 8u)
        {
            simdgroup_half8x8 a[2], b[4];
            for (uint i = 0u; i < 2u; i++) simdgroup_load(a[i], Xs + (xb + i * 8u) * SK + kk, SK, ulong2(0, 0), false);
            // b = the weight rows transposed: element (k, r) at Ws[r · SK + k]
            for (uint j = 0u; j < 4u; j++) simdgroup_load(b[j], Ws + (wb + j * 8u) * SK + kk, SK, ulong2(0, 0), true);
            for (uint i = 0u; i < 2u; i++)
                for (uint j = 0u; j < 4u; j++) simdgroup_multiply_accumulate(acc[i][j], a[i], b[j], acc[i][j]);
        }
        threadgroup_barrier(mem_flags::mem_threadgroup);
    }

    // element (x row, weight row) of the product at y[x row · y_stride + weight row]
    device float* y = reinterpret_cast<device float*>(p.y);
    if (m0 + BM <= p.rows && n0 + BN <= p.n)
    {
        for (uint i = 0u; i < 2u; i++)
            for (uint j = 0u; j < 4u; j++)
                simdgroup_store(acc[i][j], y + ulong(n0 + xb + i * 8u) * p.y_stride + m0 + wb + j * 8u, p.y_stride, ulong2(0, 0), false);
        return;
    }
    uint ys = sg * 512u;
    for (uint i = 0u; i < 2u; i++)
        for (uint j = 0u; j < 4u; j++) simdgroup_store(acc[i][j], Ys + ys + i * 8u * 32u + j * 8u, 32ul, ulong2(0, 0), false);
    simdgroup_barrier(mem_flags::mem_threadgroup);
    for (uint e = lane; e < 512u; e += 32u)
    {
        uint j = n0 + xb + e / 32u, r = m0 + wb + e % 32u;
        if (j < p.n && r < p.rows) y[ulong(j) * p.y_stride + r] = Ys[ys + e];
    }
}
