#version 460
// gdn.comp — the gated delta rule for one sequence, token by token, state S [Hv][dk][dv] fp32 in place:
//   per v head h (q/k head h / (Hv/Hk)), per token:
//     q, k ← l2norm(q), l2norm(k) (eps 1e-6); q ← q · dk^−½;  β = sigmoid(b);  g = A · softplus(a + dt_bias)
//     S ← S · e^g;  δ = (v − Sᵀk) · β;  S ← S + k ⊗ δ;  o = Sᵀq
// Columns of S are independent given q and k, so a workgroup owns COLS columns of one head and keeps them in
// registers for all n tokens: invocation t holds column t % COLS, rows [t / COLS · dk/SPLIT, …) (SPLIT invocations
// per column, summed through shared memory). Spec constants: 0 = workgroup size (COLS · SPLIT = 128), 1 = dk
// (≤ 512), 2 = dv. Grid: (Hv, ceil(dv / COLS)).
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint DK = 128;
layout(constant_id = 2) const uint DV = 128;
#define COLS 32
#define SPLIT 4
#define DK_MAX 512
#define ROWS_MAX (DK_MAX / SPLIT)

layout(push_constant) uniform P {
    uint64_t o, qkv, a, b, S, A, dt_bias;
    uint n, k_heads, v_heads;
} p;

shared float qs[DK_MAX], ks[DK_MAX];
shared float red[SPLIT][COLS];

void main() {
    uint tid = gl_LocalInvocationID.x, h = gl_WorkGroupID.x;
    uint col = tid % COLS, part = tid / COLS, j = gl_WorkGroupID.y * COLS + col;
    uint rows = (DK + SPLIT - 1u) / SPLIT, i0 = part * rows;
    uint kh = h / (p.v_heads / p.k_heads), key_dim = p.k_heads * DK, width = 2u * key_dim + p.v_heads * DV;
    bool live = j < DV;
    Floats S = Floats(p.S + uint64_t(h * DK * DV) * 4ul);
    float s[ROWS_MAX];
    [[unroll]] for (uint r = 0u; r < ROWS_MAX; r++) {
        if (r >= rows) break;
        s[r] = live && i0 + r < DK ? S.v[(i0 + r) * DV + j] : 0.0;
    }
    float A = Floats(p.A).v[h], dt = Floats(p.dt_bias).v[h];
    for (uint t = 0u; t < p.n; t++) {
        Floats row = Floats(p.qkv + uint64_t(t * width) * 4ul);
        float sq = 0.0, sk = 0.0;
        for (uint i = tid; i < DK; i += gl_WorkGroupSize.x) {
            float q = row.v[kh * DK + i], k = row.v[key_dim + kh * DK + i];
            qs[i] = q;
            ks[i] = k;
            sq += q * q;
            sk += k * k;
        }
        float rq = inversesqrt(workgroup_sum(sq) + 1e-6) * inversesqrt(float(DK)), rk = inversesqrt(workgroup_sum(sk) + 1e-6);
        float beta = sigmoid(Floats(p.b).v[t * p.v_heads + h]);
        float x = Floats(p.a).v[t * p.v_heads + h] + dt;
        float decay = exp(A * (x > 20.0 ? x : log(1.0 + exp(x))));  // softplus with torch's threshold
        float v = live ? row.v[2u * key_dim + h * DV + j] : 0.0;
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
        if (part == 0u && live) {
            float sum = 0.0;
            for (uint q = 0u; q < SPLIT; q++) sum += red[q][col];
            Floats(p.o).v[(t * p.v_heads + h) * DV + j] = sum;
        }
        barrier();
    }
    [[unroll]] for (uint r = 0u; r < ROWS_MAX; r++) {
        if (r >= rows) break;
        if (live && i0 + r < DK) S.v[(i0 + r) * DV + j] = s[r];
    }
}
