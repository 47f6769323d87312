#version 460
// gdn_chunked.comp — the gated delta rule of gdn.comp (same inputs, state S [Hv][dk][dv] fp32 in place, same outputs)
// in chunks of C = 64 tokens, the UT / WY form (HF torch_chunk_gated_delta_rule; CPU reference: sp_cpu_gdn_chunked).
// With q, k normalized as in gdn.comp, β_i = sigmoid(b_i), γ_i = Σ_{j≤i} g_j over the chunk (≤ 0, decreasing):
//   L[i][j] = β_i (k_i · k_j) e^(γ_i − γ_j), j < i          T = (I + L)⁻¹ by forward substitution
//   W = T (β ⊙ k ⊙ e^γ),  U = T (β ⊙ v)                       [C, dk], [C, dv]
//   v' = U − W S;  o_i = e^(γ_i) q_i S + Σ_{j≤i} (q_i · k_j) e^(γ_i − γ_j) v'_j
//   S ← e^(γ_last) S + Σ_j e^(γ_last − γ_j) k_j ⊗ v'_j
// Every exponent is ≤ 0. Two stages, one dispatch each:
//   STAGE 0 (gdn_intra), grid (Hv, chunks): what depends on the chunk's inputs alone — W, U, Qg = e^γ q, Kd = e^(γ_last − γ) k, the
//     masked Aqk[i][j] = (q_i · k_j) e^(γ_i − γ_j) and e^(γ_last) — into a block of `work` per (chunk, head).
//   STAGE 1 (gdn_inter), grid (Hv, ceil(dv / COLS)): the recurrence over the chunks, in order. Column j of S, v' and o depends on
//     column j of S alone, so a workgroup owns COLS columns of one head's state (in shared memory) for all chunks.
// Spec constants: 0 = workgroup size (256), 1 = dk (≤ DK_MAX, a multiple of 4), 2 = dv.
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint DK = 128;
layout(constant_id = 2) const uint DV = 128;
#define C 64u
#define THREADS 256u
#define COLS 16u
#define DK_MAX 128u
#define SLICE 32u

layout(push_constant) uniform P {
    uint64_t o, qkv, a, b, S, A, dt_bias;
    uint n, k_heads, v_heads;
    uint64_t work;
} p;

// A (chunk, head) block of `work`, in floats: W, Qg, Kd [C][DK], U [C][DV], Aqk [C][C], e^(γ_last) (padded to 4).
const uint OFF_QG = C * DK, OFF_KD = 2u * C * DK, OFF_U = 3u * C * DK, OFF_AQK = OFF_U + C * DV, OFF_EL = OFF_AQK + C * C;
const uint BLOCK = OFF_EL + 4u;

#if STAGE == 0
// the q and k slices [C][SLICE] of the Gram products, then L [C][C + 1]
shared float smem[2u * C * (SLICE + 1u)];
shared float rq[C], rk[C], beta[C], gam[C];
shared float ssq[4][C], ssk[4][C];

void main() {
    uint tid = gl_LocalInvocationID.x, h = gl_WorkGroupID.x, t0 = gl_WorkGroupID.y * C, c = min(C, p.n - t0);
    uint kh = h / (p.v_heads / p.k_heads), key_dim = p.k_heads * DK, width = 2u * key_dim + p.v_heads * DV;
    uint qoff = kh * DK, koff = key_dim + kh * DK, voff = 2u * key_dim + h * DV;
    Floats x = Floats(p.qkv + uint64_t(t0) * uint64_t(width) * 4ul);
    Floats blk = Floats(p.work + uint64_t(gl_WorkGroupID.y * p.v_heads + h) * uint64_t(BLOCK) * 4ul);

    // sums of squares of q_i and k_i, four invocations a token
    {
        uint i = tid / 4u, part = tid % 4u;
        float sq = 0.0, sk = 0.0;
        if (i < c)
            for (uint e = part; e < DK; e += 4u) {
                float q = x.v[i * width + qoff + e], k = x.v[i * width + koff + e];
                sq += q * q;
                sk += k * k;
            }
        ssq[part][i] = sq;
        ssk[part][i] = sk;
    }
    barrier();
    if (tid < C) {
        uint i = tid;
        float g = 0.0, bt = 0.0;
        if (i < c) {
            bt = sigmoid(Floats(p.b).v[(t0 + i) * p.v_heads + h]);
            float xa = Floats(p.a).v[(t0 + i) * p.v_heads + h] + Floats(p.dt_bias).v[h];
            g = Floats(p.A).v[h] * (xa > 20.0 ? xa : log(1.0 + exp(xa)));  // softplus with torch's threshold
        }
        rq[i] = inversesqrt(ssq[0][i] + ssq[1][i] + ssq[2][i] + ssq[3][i] + 1e-6) * inversesqrt(float(DK));
        rk[i] = inversesqrt(ssk[0][i] + ssk[1][i] + ssk[2][i] + ssk[3][i] + 1e-6);
        beta[i] = bt;
        gam[i] = g;
    }
    barrier();
    if (tid == 0u) {  // padding tokens have g = 0: γ stays at γ_last
        float acc = 0.0;
        for (uint i = 0u; i < C; i++) {
            acc += gam[i];
            gam[i] = acc;
        }
    }
    barrier();

    // Gram products of the normalized rows, invocation (ti, tj) owning rows ti + 16m and columns tj + 16m'
    uint ti = tid / 16u, tj = tid % 16u;
    float kk[4][4], qk[4][4];
    [[unroll]] for (uint m = 0u; m < 4u; m++)
        [[unroll]] for (uint m2 = 0u; m2 < 4u; m2++) kk[m][m2] = 0.0, qk[m][m2] = 0.0;
    for (uint e0 = 0u; e0 < DK; e0 += SLICE) {
        for (uint idx = tid; idx < C * SLICE; idx += THREADS) {
            uint i = idx / SLICE, e = idx % SLICE;
            bool ok = i < c && e0 + e < DK;
            smem[i * (SLICE + 1u) + e] = ok ? x.v[i * width + qoff + e0 + e] * rq[i] : 0.0;
            smem[(C + i) * (SLICE + 1u) + e] = ok ? x.v[i * width + koff + e0 + e] * rk[i] : 0.0;
        }
        barrier();
        for (uint e = 0u; e < SLICE; e++) {
            float qi[4], ki[4], kj[4];
            [[unroll]] for (uint m = 0u; m < 4u; m++) {
                qi[m] = smem[(ti + 16u * m) * (SLICE + 1u) + e];
                ki[m] = smem[(C + ti + 16u * m) * (SLICE + 1u) + e];
                kj[m] = smem[(C + tj + 16u * m) * (SLICE + 1u) + e];
            }
            // column tj + 16m2 lies above the diagonal of row ti + 16m when m2 > m, where L and Aqk are 0
            [[unroll]] for (uint m = 0u; m < 4u; m++)
                [[unroll]] for (uint m2 = 0u; m2 <= m; m2++) {
                    kk[m][m2] += ki[m] * kj[m2];
                    qk[m][m2] += qi[m] * kj[m2];
                }
        }
        barrier();
    }
    // L into smem (the slices are done), Aqk into the block
    [[unroll]] for (uint m = 0u; m < 4u; m++)
        [[unroll]] for (uint m2 = 0u; m2 < 4u; m2++) {
            uint i = ti + 16u * m, j = tj + 16u * m2;
            float d = j <= i ? exp(gam[i] - gam[j]) : 0.0;
            smem[i * (C + 1u) + j] = j < i && i < c ? beta[i] * kk[m][m2] * d : 0.0;
            blk.v[OFF_AQK + i * C + j] = i < c ? qk[m][m2] * d : 0.0;
        }
    barrier();

    // W and U: forward substitution, an invocation per column of [W | U], the column in registers
    for (uint col = tid; col < DK + DV; col += THREADS) {
        bool isw = col < DK;
        uint src = isw ? koff + col : voff + col - DK, dst = isw ? col : OFF_U + col - DK, stride = isw ? DK : DV;
        float s[C];
        [[unroll]] for (uint i = 0u; i < C; i++) {
            float r = 0.0;
            if (i < c) r = x.v[i * width + src] * beta[i] * (isw ? rk[i] * exp(gam[i]) : 1.0);
            [[unroll]] for (uint j = 0u; j < i; j++) r -= smem[i * (C + 1u) + j] * s[j];
            s[i] = r;
            blk.v[dst + i * stride] = r;
        }
    }
    // Qg and Kd
    float last = gam[C - 1u];
    for (uint idx = tid; idx < C * DK; idx += THREADS) {
        uint i = idx / DK, e = idx % DK;
        bool ok = i < c;
        blk.v[OFF_QG + idx] = ok ? x.v[i * width + qoff + e] * rq[i] * exp(gam[i]) : 0.0;
        blk.v[OFF_KD + idx] = ok ? x.v[i * width + koff + e] * rk[i] * exp(last - gam[i]) : 0.0;
    }
    if (tid == 0u) blk.v[OFF_EL] = exp(last);
}

#else
shared float Ss[DK_MAX][COLS];
shared float vp[C][COLS];

void main() {
    uint tid = gl_LocalInvocationID.x, h = gl_WorkGroupID.x, col = tid % COLS, r = tid / COLS, j = gl_WorkGroupID.y * COLS + col;
    bool live = j < DV;
    Floats S = Floats(p.S + uint64_t(h * DK * DV) * 4ul);
    // invocation (r, col) owns rows 4·(r + 16m) .. + 3 of the state in the update, and rows r + 16m of v' and o
    for (uint x = r; x < DK; x += THREADS / COLS) Ss[x][col] = live ? S.v[x * DV + j] : 0.0;
    barrier();
    uint chunks = (p.n + C - 1u) / C;
    for (uint ch = 0u; ch < chunks; ch++) {
        uint t0 = ch * C, c = min(C, p.n - t0);
        uint64_t base = p.work + uint64_t(ch * p.v_heads + h) * uint64_t(BLOCK) * 4ul;
        Floats blk = Floats(base);
        Vec4s blk4 = Vec4s(base);
        // v' = U − W S and e^γ q S, against the state before the chunk
        float sw[4], qs[4];
        [[unroll]] for (uint m = 0u; m < 4u; m++) sw[m] = 0.0, qs[m] = 0.0;
        for (uint x = 0u; x < DK; x += 4u) {
            vec4 s = vec4(Ss[x][col], Ss[x + 1u][col], Ss[x + 2u][col], Ss[x + 3u][col]);
            [[unroll]] for (uint m = 0u; m < 4u; m++) {
                uint i = r + 16u * m;
                sw[m] += dot(blk4.v[(i * DK + x) / 4u], s);
                qs[m] += dot(blk4.v[(OFF_QG + i * DK + x) / 4u], s);
            }
        }
        [[unroll]] for (uint m = 0u; m < 4u; m++) {
            uint i = r + 16u * m;
            vp[i][col] = (live ? blk.v[OFF_U + i * DV + j] : 0.0) - sw[m];
        }
        barrier();
        // o_i = e^γ_i q_i S + Σ_{l≤i} Aqk[i][l] v'_l
        [[unroll]] for (uint m = 0u; m < 4u; m++) {
            uint i = r + 16u * m;
            if (i < c && live) {
                float o = qs[m];
                for (uint l = 0u; l <= i; l++) o += blk.v[OFF_AQK + i * C + l] * vp[l][col];
                Floats(p.o).v[((t0 + i) * p.v_heads + h) * DV + j] = o;
            }
        }
        // S ← e^γ_last S + Σ_i Kd_iᵀ v'_i
        float el = blk.v[OFF_EL];
        for (uint x = 4u * r; x < DK; x += 4u * (THREADS / COLS)) {
            vec4 s = vec4(Ss[x][col], Ss[x + 1u][col], Ss[x + 2u][col], Ss[x + 3u][col]) * el;
            for (uint i = 0u; i < c; i++) s += blk4.v[(OFF_KD + i * DK + x) / 4u] * vp[i][col];
            Ss[x][col] = s.x, Ss[x + 1u][col] = s.y, Ss[x + 2u][col] = s.z, Ss[x + 3u][col] = s.w;
        }
        barrier();
    }
    for (uint x = r; x < DK; x += THREADS / COLS)
        if (live) S.v[x * DV + j] = Ss[x][col];
}
#endif
