#version 460
// flash_attention_coopmat.comp — causal grouped-query attention of a prefill chunk over the paged KV cache on the
// matrix units (VK_KHR_cooperative_matrix): out = softmax(q·kᵀ · scale + causal) · v, the op attention.comp's ATTEND
// computes with scalar arithmetic (which runs where the device has no matrix units, and for decode).
//
// A workgroup takes one kv head g and 16·WARPS query vectors that read it: vector v is (row r0 + v / G, head
// g·G + v % G), so the G query heads of a kv head share every K and V tile the workgroup loads. Keys go BC at a time,
// up to the last key its last row sees (tiles past the diagonal are never loaded). Per tile: K to shared memory as f16;
// each subgroup computes its 16 vectors' scores S = Q·Kᵀ (Q, pre-scaled, in registers as 16 × 16 f16 fragments),
// stages them in shared memory, where one lane per vector applies the causal mask and the online softmax (running
// max m and sum l; P = e^(S − m) as f16), then V replaces K in shared memory and O = O·e^(m_old − m_new) + P·V
// accumulates in f32 fragments. The rescale needs each fragment element's row, which the extension leaves to the
// implementation: it is read once from a fragment loaded from a matrix of row indices.
// Operands are f16 (q·scale, K, V, P); scores, softmax and O are f32. K and V values saturate at ±65504.
// Paged layout as in attention.comp: position p of kv head g in page pages[p / P], row p % P; rows of f32 (converted
// to f16 here) or f16 (copied as they are).
// Defines: D (head dim, a multiple of 16 up to 256). Workgroup: WARPS subgroups of 32 (spec constant 0 = 32·WARPS).
// Not translated to Metal (SPIRV-Cross has no cooperative matrices): kernels/generate.ts marks it Vulkan-only.
#extension GL_GOOGLE_include_directive : require
#extension GL_KHR_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#include "common.glsl"

layout(local_size_x_id = 0) in;

#ifndef D
#define D 256
#endif
#define WARPS 4
#define SUBGROUP 32
#define THREADS (WARPS * SUBGROUP)
#define BC 32                  // keys per tile
#define KSTRIDE (D / 8 + 1)    // a key's row in shared memory, in uvec4 (8 halves), padded by 16 bytes
#define PSTRIDE (BC + 8)       // a vector's row of P, in halves
#if D % 16 != 0 || D > 256
#error "D must be a multiple of 16 up to 256"
#endif

// attention.comp's push constants (ops.c fills one struct for both)
layout(push_constant) uniform P {
    uint64_t dst, src, k, v, pages, part;
    uint n_past, n, heads, kv_heads, page_tokens, page_stride;
    uint split_len, n_splits, hb, rt;
    float scale;
    uint kv_type;  // SPLASH_KV_F32 or SPLASH_KV_F16
    uint64_t src2;
} p;

shared uvec4 KV[BC * KSTRIDE];           // the tile's keys (then values): KV[key · KSTRIDE + d/8] = 8 dims as f16
shared float S[WARPS][16 * BC];          // a subgroup's scores; at the start, the row-index matrix; at the end, O blocks
shared float16_t Ph[WARPS][16 * PSTRIDE]; // a subgroup's P (f16), and Q blocks on their way to registers
shared float corr[WARPS][16];

#define MatA coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseA>
#define MatB coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseB>
#define MatC coopmat<float, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator>

uint64_t kv_row(uint64_t base, uint pos, uint g) {
    uint page = uint(Ints(p.pages).v[pos / p.page_tokens]);
    uint row_bytes = p.kv_type == 1u ? D * 2u : D * 4u;
    return base + uint64_t(page) * p.page_stride + uint64_t(g * p.page_tokens + pos % p.page_tokens) * row_bytes;
}

// Keys (or values) k0 … k0 + BC − 1 of kv head g into KV as f16; zeros from key_end on.
void load_tile(uint64_t base, uint k0, uint key_end, uint g) {
    for (uint u = gl_LocalInvocationID.x; u < BC * (D / 8u); u += THREADS) {
        uint key = u / (D / 8u), q = u % (D / 8u);
        uvec4 h = uvec4(0u);
        if (k0 + key < key_end && p.kv_type == 1u) {
            h = Uvec4s(kv_row(base, k0 + key, g)).v[q];
        } else if (k0 + key < key_end) {
            Vec4s r = Vec4s(kv_row(base, k0 + key, g) + uint64_t(q) * 32ul);
            vec4 a = clamp(r.v[0], -65504.0, 65504.0), b = clamp(r.v[1], -65504.0, 65504.0);
            h = uvec4(packHalf2x16(a.xy), packHalf2x16(a.zw), packHalf2x16(b.xy), packHalf2x16(b.zw));
        }
        KV[key * KSTRIDE + q] = h;
    }
}

void main() {
    uint warp = gl_SubgroupID, lane = gl_SubgroupInvocationID;
    uint G = p.heads / p.kv_heads, g = gl_WorkGroupID.x, vec0 = gl_WorkGroupID.y * (16u * WARPS);
    uint rows_total = p.n * G;  // query vectors of this kv head
    // the last row this workgroup holds, and so the keys it sees
    uint last_vec = min(vec0 + 16u * WARPS, rows_total) - 1u;
    uint key_end = p.n_past + last_vec / G + 1u;
    // this subgroup's vectors: vec0 + 16·warp + i; lane i < 16 keeps the softmax state of vector i
    uint my_vec = vec0 + 16u * warp + (lane & 15u), my_row = my_vec / G;
    bool my_live = my_vec < rows_total;
    float m_run = -1.0 / 0.0, l_run = 0.0;

    // Q fragments (× scale, f16) through this subgroup's part of Ph
    MatA q[D / 16];
    [[unroll]] for (uint db = 0u; db < D / 16u; db++) {
        for (uint e = lane; e < 256u; e += SUBGROUP) {
            uint i = e / 16u, d = db * 16u + e % 16u, v = vec0 + 16u * warp + i;
            float x = 0.0;
            if (v < rows_total) x = Floats(p.src).v[((v / G) * p.heads + g * G + v % G) * D + d] * p.scale;
            Ph[warp][i * PSTRIDE + e % 16u] = float16_t(clamp(x, -65504.0, 65504.0));
        }
        subgroupBarrier();
        coopMatLoad(q[db], Ph[warp], 0u, PSTRIDE, gl_CooperativeMatrixLayoutRowMajor);
        subgroupBarrier();
    }
    // which row of a fragment each of this invocation's accumulator elements holds
    for (uint e = lane; e < 256u; e += SUBGROUP) S[warp][e] = float(e / 16u);
    subgroupBarrier();
    MatC rows;
    coopMatLoad(rows, S[warp], 0u, 16u, gl_CooperativeMatrixLayoutRowMajor);
    subgroupBarrier();

    MatC o[D / 16];
    [[unroll]] for (uint db = 0u; db < D / 16u; db++) o[db] = MatC(0.0);

    for (uint k0 = 0u; k0 < key_end; k0 += BC) {
        barrier();  // the last tile's values have been read
        load_tile(p.k, k0, key_end, g);
        barrier();
        MatC s[BC / 16];
        [[unroll]] for (uint kb = 0u; kb < BC / 16u; kb++) {
            s[kb] = MatC(0.0);
            [[unroll]] for (uint db = 0u; db < D / 16u; db++) {
                MatB kf;
                coopMatLoad(kf, KV, kb * 16u * KSTRIDE + db * 2u, KSTRIDE, gl_CooperativeMatrixLayoutColumnMajor);
                s[kb] = coopMatMulAdd(q[db], kf, s[kb]);
            }
            coopMatStore(s[kb], S[warp], kb * 16u, BC, gl_CooperativeMatrixLayoutRowMajor);
        }
        subgroupBarrier();
        if (lane < 16u) {  // the online softmax of vector `lane`: keys up to its own position
            uint seen = my_live ? p.n_past + my_row + 1u : 0u;
            float mx = m_run;
            for (uint j = 0u; j < BC; j++)
                if (k0 + j < seen) mx = max(mx, S[warp][lane * BC + j]);
            float c = 1.0;
            if (mx == -1.0 / 0.0) {
                for (uint j = 0u; j < BC; j++) Ph[warp][lane * PSTRIDE + j] = float16_t(0.0);
            } else {
                c = exp(m_run - mx);
                l_run *= c;
                for (uint j = 0u; j < BC; j++) {
                    float e = k0 + j < seen ? exp(S[warp][lane * BC + j] - mx) : 0.0;
                    l_run += e;
                    Ph[warp][lane * PSTRIDE + j] = float16_t(e);
                }
            }
            m_run = mx;
            corr[warp][lane] = c;
        }
        subgroupBarrier();
        [[unroll]] for (uint db = 0u; db < D / 16u; db++)
            for (uint e = 0u; e < o[db].length(); e++) o[db][e] *= corr[warp][uint(rows[e])];
        barrier();  // every subgroup has read the keys
        load_tile(p.v, k0, key_end, g);
        barrier();
        [[unroll]] for (uint kb = 0u; kb < BC / 16u; kb++) {
            MatA pf;
            coopMatLoad(pf, Ph[warp], kb * 16u, PSTRIDE, gl_CooperativeMatrixLayoutRowMajor);
            [[unroll]] for (uint db = 0u; db < D / 16u; db++) {
                MatB vf;
                coopMatLoad(vf, KV, kb * 16u * KSTRIDE + db * 2u, KSTRIDE, gl_CooperativeMatrixLayoutRowMajor);
                o[db] = coopMatMulAdd(pf, vf, o[db]);
            }
        }
    }

    // O / l, each 16 × 16 block through shared memory to its vectors' rows of out
    if (lane < 16u) corr[warp][lane] = l_run > 0.0 ? 1.0 / l_run : 0.0;
    subgroupBarrier();
    [[unroll]] for (uint db = 0u; db < D / 16u; db++) {
        coopMatStore(o[db], S[warp], 0u, 16u, gl_CooperativeMatrixLayoutRowMajor);
        subgroupBarrier();
        for (uint e = lane; e < 256u; e += SUBGROUP) {
            uint i = e / 16u, v = vec0 + 16u * warp + i;
            if (v < rows_total)
                Floats(p.dst).v[((v / G) * p.heads + g * G + v % G) * D + db * 16u + e % 16u] = S[warp][e] * corr[warp][i];
        }
        subgroupBarrier();
    }
}
