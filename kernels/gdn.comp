#version 460
// gdn.comp — the gated delta rule for one sequence, token by token, state S [Hv][dk][dv] fp32 in place:
//   per v head h (q/k head h / (Hv/Hk)), per token:
//     q, k ← l2norm(q), l2norm(k) (eps 1e-6); q ← q · dk^−½;  β = sigmoid(b);  g = A · softplus(a + dt_bias)
//     S ← S · e^g;  δ = (v − Sᵀk) · β;  S ← S + k ⊗ δ;  o = Sᵀq
// Columns of S are independent given q and k, so a workgroup owns COLS columns of one head and keeps them in
// registers for all n tokens: invocation t holds column t % COLS, rows [t / COLS · dk/SPLIT, …) (SPLIT invocations
// per column, summed through shared memory). Spec constants: 0 = workgroup size (COLS · SPLIT), 1 = dk (≤ 512),
// 2 = dv. Grid: (Hv, ceil(dv / COLS)), COLS = 32.
//
// FUSED 1: the whole mixer core of a few tokens in one dispatch (the GDN op of decode and verify blocks), a workgroup
// per v head owning all its columns (COLS = dv ≤ 256, SPLIT · dv invocations; grid (Hv)). Per token, before the
// delta rule: the causal depthwise conv + SiLU (conv.comp) of the channels the head reads — its k head's q and k, its
// v — invocation i convolving the i-th of them with its window in registers (2·dk + dv ≤ SPLIT · dv); after it, when z
// is set, the gated RMSNorm (norm.comp's GATED) of the head's row. Each step is the separate kernel's arithmetic in its
// order (the sums over as many invocations, the rest adding zeros), so the results are theirs. Spec constant 3: the
// workgroup norm.comp takes for rows of dv (its sum's order). The conv tail of a k head's q and k channels is read by
// the Hv/Hk workgroups of its v heads, so none of them may change it (no atomics: Metal's translation has none on device
// addresses): where Hv > Hk the op updates those channels' tails with conv.comp's TAIL pass after this dispatch, which
// shares the barrier the mixer's output needs anyway. The v channels' tails are each one workgroup's, written here.
// QUANT (FUSED, with the norm; dv % 32 == 0, an even count of groups in a row): the output rows also as the
// integer-dot GEMV takes its x (norm.comp QUANT's layout, q_stride bytes apart), each head's groups quantized by its
// workgroup, so the out_proj after it needs no dispatch of its own to quantize them.
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
#ifndef FUSED
#define FUSED 0
#endif
#ifndef QUANT
#define QUANT 0
#endif
#if QUANT
#include "quant8.glsl"
#endif

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint DK = 128;
layout(constant_id = 2) const uint DV = 128;
#define PLAIN_COLS 32
#define SPLIT 4
#define DK_MAX 512
#define ROWS_MAX (DK_MAX / SPLIT)
#if FUSED
layout(constant_id = 3) const uint NORM_WG = 64;
#define COLS DV
#define COLS_MAX 256
#else
#define COLS PLAIN_COLS
#define COLS_MAX PLAIN_COLS
#endif

layout(push_constant) uniform P {
    uint64_t o, qkv, a, b, S, A, dt_bias;  // FUSED: qkv raw (pre-conv)
#if FUSED
    uint64_t z, conv_w, tail, norm_w;  // z = 0: no norm (o is the delta rule's output)
#endif
    uint n, k_heads, v_heads;
#if FUSED
    uint kernel;
    float eps;
#endif
#if QUANT
    uint q_stride;
    uint64_t q;
#endif
} p;

shared float qs[DK_MAX], ks[DK_MAX];
shared float red[SPLIT][COLS_MAX];
#if FUSED
shared float vs[COLS_MAX], os[COLS_MAX];
#endif

void main() {
    uint tid = gl_LocalInvocationID.x, h = gl_WorkGroupID.x, wg = gl_WorkGroupSize.x;
    uint col = tid % COLS, part = tid / COLS, j = gl_WorkGroupID.y * COLS + col;
    uint rows = (DK + SPLIT - 1u) / SPLIT, i0 = part * rows;
    uint ratio = p.v_heads / p.k_heads, kh = h / ratio, key_dim = p.k_heads * DK, width = 2u * key_dim + p.v_heads * DV;
    bool live = j < DV;
    Floats S = Floats(p.S + uint64_t(h * DK * DV) * 4ul);
    float s[ROWS_MAX];
    [[unroll]] for (uint r = 0u; r < ROWS_MAX; r++) {
        if (r >= rows) break;
        s[r] = live && i0 + r < DK ? S.v[(i0 + r) * DV + j] : 0.0;
    }
    float A = Floats(p.A).v[h], dt = Floats(p.dt_bias).v[h];
    // the l2norm sums run over the plain kernel's invocations (the others add zeros)
    uint sum_wg = min(wg, PLAIN_COLS * SPLIT);
#if FUSED
    // this invocation's conv channel: q, then k of head kh, then v of head h
    bool conv = tid < 2u * DK + DV;
    uint ch = tid < DK ? kh * DK + tid : tid < 2u * DK ? key_dim + kh * DK + tid - DK : 2u * key_dim + h * DV + tid - 2u * DK;
    uint K = p.kernel;
    float win[16];  // the last K−1 inputs, oldest first, then the current one
    float wk[16];
    if (conv) {
        for (uint i = 0u; i < K; i++) wk[i] = Floats(p.conv_w).v[ch * K + i];
        for (uint i = 0u; i + 1u < K; i++) win[i] = Floats(p.tail).v[i * width + ch];
    }
#endif
    for (uint t = 0u; t < p.n; t++) {
        Floats row = Floats(p.qkv + uint64_t(t * width) * 4ul);
        float sq = 0.0, sk = 0.0;
#if FUSED
        if (conv) {
            win[K - 1u] = row.v[ch];
            float acc = 0.0;
            for (uint i = 0u; i < K; i++) acc += wk[i] * win[i];
            float y = silu(acc);
            for (uint i = 0u; i + 1u < K; i++) win[i] = win[i + 1u];
            if (tid < DK) qs[tid] = y;
            else if (tid < 2u * DK) ks[tid - DK] = y;
            else vs[tid - 2u * DK] = y;
        }
        barrier();
        for (uint i = tid; tid < sum_wg && i < DK; i += sum_wg) {
            float q = qs[i], k = ks[i];
            sq += q * q;
            sk += k * k;
        }
#else
        for (uint i = tid; i < DK; i += sum_wg) {
            float q = row.v[kh * DK + i], k = row.v[key_dim + kh * DK + i];
            qs[i] = q;
            ks[i] = k;
            sq += q * q;
            sk += k * k;
        }
#endif
        float rq = inversesqrt(workgroup_sum(sq) + 1e-6) * inversesqrt(float(DK)), rk = inversesqrt(workgroup_sum(sk) + 1e-6);
        float beta = sigmoid(Floats(p.b).v[t * p.v_heads + h]);
        float x = Floats(p.a).v[t * p.v_heads + h] + dt;
        float decay = exp(A * (x > 20.0 ? x : log(1.0 + exp(x))));  // softplus with torch's threshold
#if FUSED
        float v = vs[col];
#else
        float v = live ? row.v[2u * key_dim + h * DV + j] : 0.0;
#endif
        // S ← S · e^g;  Sᵀk over this invocation's rows
        float mem = 0.0;
        [[unroll]] for (uint r = 0u; r < ROWS_MAX; r++) {
            if (r >= rows) break;
            s[r] *= decay;
            if (i0 + r < DK) mem += s[r] * ks[i0 + r];
        }
        red[part][col] = mem * rk;
        barrier();
        mem = 0.0;
        for (uint q = 0u; q < SPLIT; q++) mem += red[q][col];
        float delta = (v - mem) * beta;
        barrier();
        float o = 0.0;
        [[unroll]] for (uint r = 0u; r < ROWS_MAX; r++) {
            if (r >= rows) break;
            if (i0 + r < DK) {
                s[r] += ks[i0 + r] * rk * delta;
                o += s[r] * qs[i0 + r];
            }
        }
        red[part][col] = o * rq;
        barrier();
#if FUSED
        if (part == 0u) {
            float sum = 0.0;
            for (uint q = 0u; q < SPLIT; q++) sum += red[q][col];
            os[col] = sum;
        }
        barrier();
        Floats orow = Floats(p.o + uint64_t((t * p.v_heads + h) * DV) * 4ul);
        if (p.z != 0ul) {
            uint nw = min(NORM_WG, wg);
            float ss = 0.0;
            for (uint i = tid; tid < nw && i < DV; i += nw) ss += os[i] * os[i];
            float r = inversesqrt(workgroup_sum(ss) / float(DV) + p.eps);
            if (tid < DV) {
                Floats z = Floats(p.z + uint64_t((t * p.v_heads + h) * DV) * 4ul);
                float y = Floats(p.norm_w).v[tid] * (os[tid] * r) * silu(z.v[tid]);
                orow.v[tid] = y;
#if QUANT
                os[tid] = y;
#endif
            }
#if QUANT
            // the head's dv / 32 groups of the row, one invocation each (the next token's os writes wait on its barriers)
            barrier();
            uint groups = DV / QK, nbp = (p.v_heads * groups + 1u) / 2u * 2u, g = h * groups + tid;
            if (tid < groups) {
                vec4 y[8];
                [[unroll]] for (uint k = 0u; k < 8u; k++)
                    y[k] = vec4(os[tid * QK + 4u * k], os[tid * QK + 4u * k + 1u], os[tid * QK + 4u * k + 2u], os[tid * QK + 4u * k + 3u]);
                uint words[8];
                float d, s;
                quant8_group(y, words, d, s);
                uint64_t qrow = p.q + uint64_t(t) * p.q_stride;
                Uvec4Out(qrow).v[2u * g] = uvec4(words[0], words[1], words[2], words[3]);
                Uvec4Out(qrow).v[2u * g + 1u] = uvec4(words[4], words[5], words[6], words[7]);
                Vec2Out(qrow + uint64_t(nbp * QK)).v[g] = vec2(d, s);
            }
#endif
        } else if (tid < DV) {
            orow.v[tid] = os[tid];
        }
#else
        if (part == 0u && live) {
            float sum = 0.0;
            for (uint q = 0u; q < SPLIT; q++) sum += red[q][col];
            Floats(p.o).v[(t * p.v_heads + h) * DV + j] = sum;
        }
        barrier();
#endif
    }
    [[unroll]] for (uint r = 0u; r < ROWS_MAX; r++) {
        if (r >= rows) break;
        if (live && i0 + r < DK) S.v[(i0 + r) * DV + j] = s[r];
    }
#if FUSED
    // the new tail: the last K−1 raw inputs of this workgroup's own channels (q and k too where no other head reads them)
    Floats tail = Floats(p.tail);
    if (conv && (tid >= 2u * DK || ratio == 1u))
        for (uint i = 0u; i + 1u < K; i++) tail.v[i * width + ch] = win[i];
#endif
}
