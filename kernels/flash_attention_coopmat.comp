#version 460
// flash_attention_coopmat.comp — causal grouped-query attention of a prefill chunk over the paged KV cache on the
// matrix units (VK_KHR_cooperative_matrix): out = softmax(q·kᵀ · scale + causal) · v, the op attention.comp's ATTEND
// computes with scalar arithmetic (which runs where the device has no matrix units, and for decode).
//
// A workgroup takes one kv head g and 16·WARPS query vectors that read it: vector v is (row r0 + v / G, head
// g·G + v % G), so the G query heads of a kv head share every K and V tile the workgroup loads. Keys go BC at a time,
// up to the last key its last row sees (tiles past the diagonal are never loaded). Per tile: K to shared memory as f16
// (its loads issued during the previous tile's P·V, V's during this tile's scores and softmax); each subgroup computes
// its 16 vectors' scores S = Q·Kᵀ (Q, pre-scaled, in registers as 16 × 16 f16 fragments) and stages them in shared
// memory, where two lanes per vector (half the keys each) apply the causal mask and the online softmax (running max m
// and sum l; P = e^(S − m) as f16); then V replaces K in shared memory and O = O·e^(m_old − m_new) + P·V accumulates in
// f32 fragments, the rescale skipped when no row's max moved. The rescale needs each fragment element's row, which
// the extension leaves to the implementation: it is read once from a fragment loaded from a matrix of row indices.
// Operands are f16 (q·scale, K, V, P); scores, softmax and O are f32. K and V values saturate at ±65504.
// Paged layout as in attention.comp, rows in the cache's type (kernels/kv_rows.glsl): f32 (rounded to f16 here), f16
// (copied as they are) or int8 (each value q · d rounded to f16 here, as the f32 rows are).
// Every loop inside the loops over the fragment arrays q[], s[] and o[] has a constant trip count, so the driver can
// unroll them and keep the fragments in registers (a run-time trip count there made the GEMM's driver index its
// accumulator array at run time and keep all of it in local memory).
// Defines: D (head dim, a multiple of 16 up to 256), WARPS (default 8). Workgroup: WARPS subgroups of 32 (spec constant
// 0 = 32·WARPS); spec constant 1: the KV type, so each type's pipeline holds only its own loads and conversions.
// Not translated to Metal (SPIRV-Cross has no cooperative matrices): kernels/generate.ts marks it Vulkan-only.
#extension GL_GOOGLE_include_directive : require
#extension GL_KHR_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#include "common.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint KV_TYPE = 0;  // the cache's rows: KV_F32, KV_F16 or KV_INT8 (kv_rows.glsl)

#ifndef D
#define D 256
#endif
#define BC 32                  // keys per tile (two blocks of 16)
#define HD D
#include "kv_rows.glsl"
#ifndef WARPS
#define WARPS 8                // subgroups per workgroup, 16 query vectors each
#endif
#define SUBGROUP 32
#define THREADS (WARPS * SUBGROUP)
#define CM_ELEMS (256 / SUBGROUP)  // a 16 × 16 fragment's elements per invocation
#define KSTRIDE (D / 8 + 1)    // a key's row in shared memory, in uvec4 (8 halves), padded by 16 bytes
#define PSTRIDE (BC + 8)       // a vector's row of P, in halves
#define HALF_BC (BC / 2)       // keys per lane in the softmax
#define TILE_ITEMS (BC * (D / 8))                       // a tile's pieces of 8 values
#define ITEMS ((TILE_ITEMS + THREADS - 1) / THREADS)    // … per invocation
#if D % 16 != 0 || D > 256
#error "D must be a multiple of 16 up to 256"
#endif

// attention.comp's push constants (ops_attention.c fills one struct for both)
layout(push_constant) uniform P {
    uint64_t dst, src, k, v, pages, part;
    uint n_past, n, heads, kv_heads, page_tokens, page_stride;
    uint split_len, n_splits, hb, rt;
    float scale;
    uint kv_type;  // = KV_TYPE
    uint64_t src2;
} p;

shared uvec4 KV[BC * KSTRIDE];            // the tile's keys (then values): KV[key · KSTRIDE + d/8] = 8 dims as f16
shared float S[WARPS][16 * BC];           // a subgroup's scores; at the start, the row-index matrix; at the end, O blocks
shared float16_t Ph[WARPS][16 * PSTRIDE]; // a subgroup's P (f16), and Q blocks on their way to registers
shared float corr[WARPS][16];
shared float part[WARPS][SUBGROUP];       // the softmax's halves: each lane's partial max, then partial sum

#define MatA coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseA>
#define MatB coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseB>
#define MatC coopmat<float, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator>

uint64_t kv_row(uint64_t base, uint pos, uint g) {
    uint page = uint(Ints(p.pages).v[pos / p.page_tokens]);
    return base + uint64_t(page) * p.page_stride + uint64_t(g * p.page_tokens + pos % p.page_tokens) * kv_row_bytes(KV_TYPE);
}

uvec4 pack8(vec4 a, vec4 b) {
    a = clamp(a, -65504.0, 65504.0), b = clamp(b, -65504.0, 65504.0);
    return uvec4(packHalf2x16(a.xy), packHalf2x16(a.zw), packHalf2x16(b.xy), packHalf2x16(b.zw));
}

// A tile of keys or values goes global memory → registers (fetch) → shared memory as f16 (stash), so that its loads
// are in flight while the matrix units work on the tile before: this invocation's pieces u = t · THREADS + invocation,
// each 8 values of key u / (D/8) as they are stored: f16 in fa; int8 as two words (fa.x, fa.y) and the group's scale
// (fa.z; 8 divides 32); f32 in fa and fb.
uvec4 fa[ITEMS], fb[ITEMS];
void fetch(uint64_t base, uint k0, uint key_end, uint g) {
    [[unroll]] for (uint t = 0u; t < ITEMS; t++) {
        uint u = t * THREADS + gl_LocalInvocationID.x, key = u / (D / 8u), q = u % (D / 8u);
        fa[t] = uvec4(0u), fb[t] = uvec4(0u);  // zeros from key_end on
        if ((TILE_ITEMS % THREADS == 0 || u < TILE_ITEMS) && k0 + key < key_end) {
            uint64_t row = kv_row(base, k0 + key, g);
            if (KV_TYPE == KV_F16) {
                fa[t] = Uvec4s(row).v[q];
            } else if (KV_TYPE == KV_INT8) {
                fa[t] = uvec4(kv_word(row + uint64_t(8u * q)), kv_word(row + uint64_t(8u * q + 4u)),
                              floatBitsToUint(q8_scale(row, q / 4u)), 0u);
            } else {
                Vec4s r = Vec4s(row + uint64_t(q) * 32ul);
                fa[t] = floatBitsToUint(r.v[0]), fb[t] = floatBitsToUint(r.v[1]);
            }
        }
    }
}
void stash() {
    [[unroll]] for (uint t = 0u; t < ITEMS; t++) {
        uint u = t * THREADS + gl_LocalInvocationID.x;
        if (TILE_ITEMS % THREADS == 0 || u < TILE_ITEMS) {
            uvec4 h = fa[t];
            if (KV_TYPE == KV_INT8) {
                float d = uintBitsToFloat(fa[t].z);
                h = pack8(s8x4(fa[t].x) * d, s8x4(fa[t].y) * d);
            } else if (KV_TYPE == KV_F32) {
                h = pack8(uintBitsToFloat(fa[t]), uintBitsToFloat(fb[t]));
            }
            KV[(u / (D / 8u)) * KSTRIDE + u % (D / 8u)] = h;
        }
    }
}

void main() {
    uint warp = gl_SubgroupID, lane = gl_SubgroupInvocationID;
    uint G = p.heads / p.kv_heads, g = gl_WorkGroupID.x, vec0 = gl_WorkGroupID.y * (16u * WARPS);
    uint rows_total = p.n * G;  // query vectors of this kv head
    // the last row this workgroup holds, and so the keys it sees
    uint last_vec = min(vec0 + 16u * WARPS, rows_total) - 1u;
    uint key_end = p.n_past + last_vec / G + 1u;
    // this subgroup's vectors: vec0 + 16·warp + i; lanes i and i + 16 keep the softmax state of vector i (the same in
    // both), each over half of a tile's keys
    uint mine = lane & 15u, half_keys = (lane >> 4) * HALF_BC;
    uint my_vec = vec0 + 16u * warp + mine, my_row = my_vec / G;
    uint seen = my_vec < rows_total ? p.n_past + my_row + 1u : 0u;  // keys this vector sees
    float m_run = -1.0 / 0.0, l_run = 0.0;

    // Q fragments (× scale, f16) through this subgroup's part of Ph
    MatA q[D / 16];
    [[unroll]] for (uint db = 0u; db < D / 16u; db++) {
        [[unroll]] for (uint t = 0u; t < CM_ELEMS; t++) {
            uint e = t * SUBGROUP + lane, i = e / 16u, d = db * 16u + e % 16u, v = vec0 + 16u * warp + i;
            float x = 0.0;
            if (v < rows_total) x = Floats(p.src).v[((v / G) * p.heads + g * G + v % G) * D + d] * p.scale;
            Ph[warp][i * PSTRIDE + e % 16u] = float16_t(clamp(x, -65504.0, 65504.0));
        }
        subgroupBarrier();
        coopMatLoad(q[db], Ph[warp], 0u, PSTRIDE, gl_CooperativeMatrixLayoutRowMajor);
        subgroupBarrier();
    }
    // which row of a fragment each of this invocation's accumulator elements holds, 4 bits each
    [[unroll]] for (uint t = 0u; t < CM_ELEMS; t++) S[warp][t * SUBGROUP + lane] = float((t * SUBGROUP + lane) / 16u);
    subgroupBarrier();
    MatC rows;
    coopMatLoad(rows, S[warp], 0u, 16u, gl_CooperativeMatrixLayoutRowMajor);
    uint row_of = 0u;
    [[unroll]] for (uint e = 0u; e < CM_ELEMS; e++)
        if (e < rows.length()) row_of |= uint(rows[e]) << (4u * e);
    subgroupBarrier();

    MatC o[D / 16];
    [[unroll]] for (uint db = 0u; db < D / 16u; db++) o[db] = MatC(0.0);

    fetch(p.k, 0u, key_end, g);
    for (uint k0 = 0u; k0 < key_end; k0 += BC) {
        barrier();  // the last tile's values have been read
        stash();    // its keys
        barrier();
        fetch(p.v, k0, key_end, g);  // its values, in flight during the scores and the softmax
        // S = Q·Kᵀ for both blocks of 16 keys: two independent chains of products
        MatC s[2];
        [[unroll]] for (uint kb = 0u; kb < 2u; kb++) s[kb] = MatC(0.0);
        [[unroll]] for (uint db = 0u; db < D / 16u; db++) {
            [[unroll]] for (uint kb = 0u; kb < 2u; kb++) {
                MatB kf;
                coopMatLoad(kf, KV, kb * 16u * KSTRIDE + db * 2u, KSTRIDE, gl_CooperativeMatrixLayoutColumnMajor);
                s[kb] = coopMatMulAdd(q[db], kf, s[kb]);
            }
        }
        [[unroll]] for (uint kb = 0u; kb < 2u; kb++)
            coopMatStore(s[kb], S[warp], kb * 16u, BC, gl_CooperativeMatrixLayoutRowMajor);
        subgroupBarrier();
        // the online softmax of vector `mine` over keys k0 + half_keys …: keys up to its own position. Lane i of a half
        // takes its keys from key i on, round its half: the 16 rows' reads of a step then fall in 16 banks, not one.
        float mx = -1.0 / 0.0;
        [[unroll]] for (uint j = 0u; j < HALF_BC; j++) {
            uint jj = half_keys + ((j + mine) & (HALF_BC - 1u));
            if (k0 + jj < seen) mx = max(mx, S[warp][mine * BC + jj]);
        }
        part[warp][lane] = mx;
        subgroupBarrier();
        mx = max(max(mx, part[warp][lane ^ 16u]), m_run);
        float c = 1.0, sum = 0.0;
        if (mx != -1.0 / 0.0) {
            c = exp(m_run - mx);
            [[unroll]] for (uint j = 0u; j < HALF_BC; j++) {
                uint jj = half_keys + ((j + mine) & (HALF_BC - 1u));
                float e = k0 + jj < seen ? exp(S[warp][mine * BC + jj] - mx) : 0.0;
                sum += e;
                Ph[warp][mine * PSTRIDE + jj] = float16_t(e);
            }
        } else {
            [[unroll]] for (uint j = 0u; j < HALF_BC; j++) Ph[warp][mine * PSTRIDE + half_keys + j] = float16_t(0.0);
        }
        subgroupBarrier();  // both halves have read their partner's max
        part[warp][lane] = sum;
        subgroupBarrier();
        l_run = l_run * c + sum + part[warp][lane ^ 16u];
        m_run = mx;
        if (lane < 16u) corr[warp][lane] = c;
        subgroupBarrier();
        if (subgroupMin(c) < 1.0) {  // rescale O where a row's max moved (c ≤ 1)
            [[unroll]] for (uint e = 0u; e < CM_ELEMS; e++) {
                if (e < o[0].length()) {
                    float ce = corr[warp][(row_of >> (4u * e)) & 15u];
                    [[unroll]] for (uint db = 0u; db < D / 16u; db++) o[db][e] *= ce;
                }
            }
        }
        barrier();  // every subgroup has read the keys
        stash();    // the values
        barrier();
        if (k0 + BC < key_end) fetch(p.k, k0 + BC, key_end, g);  // the next keys, in flight during P·V
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
        [[unroll]] for (uint t = 0u; t < CM_ELEMS; t++) {
            uint e = t * SUBGROUP + lane, i = e / 16u, v = vec0 + 16u * warp + i;
            if (v < rows_total)
                Floats(p.dst).v[((v / G) * p.heads + g * G + v % G) * D + db * 16u + e % 16u] = S[warp][e] * corr[warp][i];
        }
        subgroupBarrier();
    }
}
