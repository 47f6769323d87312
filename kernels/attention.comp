#version 460
// attention.comp — causal grouped-query attention over the paged KV cache (define STAGE):
//   KV_WRITE  K, V rows of positions n_past .. n_past+n−1 into the sequence's pages (one invocation per float)
//   ATTEND    out = softmax(q·kᵀ · scale + causal) · v, flash style, optionally split over key ranges
//   REDUCE    combines the splits of ATTEND: out = Σ_s e^(m_s − M) o_s / Σ_s e^(m_s − M) l_s
//
// Paged layout (backends/backend.h, sp_kv_view): position p of kv head g lives in page pages[p / P], row p % P, at
// floats page · page_stride + (g · P + p % P) · head_dim from the layer's K (or V) base.
//
// ATTEND: a workgroup takes one kv head g, a tile of up to QV query vectors that read g (RT rows × HB of g's query
// heads), and one split of the keys. Keys go BK at a time: scores into shared memory, online softmax per vector
// (running max m and sum l), then o = o · e^(m_old − m_new) + p · v with each invocation owning head_dim/WG dims of
// every vector. Decode has one row, so long contexts are split over workgroups (flash decoding); prefill tiles rows.
// Spec constants: 0 = workgroup size (128 for ATTEND, which its thread mapping assumes), 1 = head_dim (≤ 256).
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint HD = 128;

#define KV_WRITE 0
#define ATTEND 1
#define REDUCE 2
#define QV 16
#define BK 32
#define HD_MAX 256
#define WG_ATTEND 128

layout(push_constant) uniform P {
    // ATTEND/REDUCE: dst = out [n][heads][HD], src = q (same shape); KV_WRITE: src = new k rows, src2 = new v rows
    uint64_t dst, src, k, v, pages, part;  // k, v: this layer's K and V base; part: [n][heads][splits][HD + 2]
    uint n_past, n, heads, kv_heads, page_tokens, page_stride;  // page_stride in floats
    uint split_len, n_splits, hb, rt;  // keys per split (multiple of BK); heads per block, rows per tile
    float scale;
    uint64_t src2;
} p;

uint64_t kv_row(uint64_t base, uint pos, uint g) {
    uint page = uint(Ints(p.pages).v[pos / p.page_tokens]);
    return base + (uint64_t(page) * p.page_stride + uint64_t((g * p.page_tokens + pos % p.page_tokens) * HD)) * 4ul;
}

#if STAGE == KV_WRITE
void main() {
    uint i = flat_group() * gl_WorkGroupSize.x + gl_LocalInvocationID.x;
    if (i >= p.n * p.kv_heads * HD) return;
    uint d = i % HD, g = (i / HD) % p.kv_heads, row = i / (HD * p.kv_heads);
    Floats(kv_row(p.k, p.n_past + row, g)).v[d] = Floats(p.src).v[i];
    Floats(kv_row(p.v, p.n_past + row, g)).v[d] = Floats(p.src2).v[i];
}
#elif STAGE == ATTEND
shared vec4 Qs[QV][HD_MAX / 4];
shared float S[QV][BK];
shared float corr[QV], lsum[QV], mrun[QV];

void main() {
    uint tid = gl_LocalInvocationID.x;
    uint G = p.heads / p.kv_heads, blocks = (G + p.hb - 1u) / p.hb;
    uint g = gl_WorkGroupID.x / blocks, h0 = g * G + (gl_WorkGroupID.x % blocks) * p.hb;
    uint h_end = min(h0 + p.hb, (g + 1u) * G);
    uint row0 = gl_WorkGroupID.y * p.rt, split = gl_WorkGroupID.z;
    // vector v of the tile: row row0 + v / hb, head h0 + v % hb
    uint last_row = min(row0 + p.rt, p.n) - 1u;
    uint key_begin = split * p.split_len;
    uint key_end = min(key_begin + p.split_len, p.n_past + last_row + 1u);

    for (uint t = tid; t < QV * (HD / 4u); t += WG_ATTEND) {
        uint v = t / (HD / 4u), c = t % (HD / 4u), row = row0 + v / p.hb, h = h0 + v % p.hb;
        vec4 x = vec4(0.0);
        if (v < p.hb * p.rt && row < p.n && h < h_end)
            x = Vec4s(p.src + uint64_t((row * p.heads + h) * HD) * 4ul).v[c] * p.scale;
        Qs[v][c] = x;
    }
    if (tid < QV) {
        mrun[tid] = -1.0 / 0.0;
        lsum[tid] = 0.0;
    }
    float acc[QV][HD_MAX / WG_ATTEND];
    [[unroll]] for (uint v = 0u; v < QV; v++)
        [[unroll]] for (uint c = 0u; c < HD_MAX / WG_ATTEND; c++) acc[v][c] = 0.0;
    barrier();

    uint j = tid % BK, vg = tid / BK;  // scores: this invocation's key and its 4 vectors
    for (uint k0 = key_begin; k0 < key_end; k0 += BK) {
        uint key = k0 + j;
        float s[4] = float[4](0.0, 0.0, 0.0, 0.0);
        if (key < key_end) {
            Vec4s kr = Vec4s(kv_row(p.k, key, g));
            for (uint c = 0u; c < HD / 4u; c++) {
                vec4 kv = kr.v[c];
                [[unroll]] for (uint i = 0u; i < 4u; i++) s[i] += dot(Qs[vg * 4u + i][c], kv);
            }
        }
        [[unroll]] for (uint i = 0u; i < 4u; i++) {
            uint v = vg * 4u + i, row = row0 + v / p.hb;
            bool ok = key < key_end && v < p.hb * p.rt && row < p.n && h0 + v % p.hb < h_end && key <= p.n_past + row;
            S[v][j] = ok ? s[i] : -1.0 / 0.0;
        }
        barrier();
        if (tid < QV) {  // online softmax for vector tid
            float mx = mrun[tid];
            for (uint i = 0u; i < BK; i++) mx = max(mx, S[tid][i]);
            float c = 1.0, l = lsum[tid];
            if (mx != -1.0 / 0.0) {
                c = exp(mrun[tid] - mx);
                l *= c;
                for (uint i = 0u; i < BK; i++) {
                    float e = exp(S[tid][i] - mx);
                    S[tid][i] = e;
                    l += e;
                }
            } else {
                for (uint i = 0u; i < BK; i++) S[tid][i] = 0.0;
            }
            corr[tid] = c;
            lsum[tid] = l;
            mrun[tid] = mx;
        }
        barrier();
        [[unroll]] for (uint v = 0u; v < QV; v++)
            [[unroll]] for (uint c = 0u; c < HD_MAX / WG_ATTEND; c++) acc[v][c] *= corr[v];
        uint nk = min(BK, key_end - k0);
        for (uint i = 0u; i < nk; i++) {
            Floats vr = Floats(kv_row(p.v, k0 + i, g));
            [[unroll]] for (uint c = 0u; c < HD_MAX / WG_ATTEND; c++) {
                uint d = tid + c * WG_ATTEND;
                if (d >= HD) break;
                float x = vr.v[d];
                [[unroll]] for (uint v = 0u; v < QV; v++) acc[v][c] += S[v][i] * x;
            }
        }
        barrier();
    }

    [[unroll]] for (uint v = 0u; v < QV; v++) {
        uint row = row0 + v / p.hb, h = h0 + v % p.hb;
        if (v >= p.hb * p.rt || row >= p.n || h >= h_end) continue;
        uint base = row * p.heads + h;
        [[unroll]] for (uint c = 0u; c < HD_MAX / WG_ATTEND; c++) {
            uint d = tid + c * WG_ATTEND;
            if (d >= HD) break;
            if (p.n_splits == 1u) Floats(p.dst).v[base * HD + d] = acc[v][c] / lsum[v];
            else Floats(p.part).v[(base * p.n_splits + split) * (HD + 2u) + d] = acc[v][c];
        }
        if (p.n_splits > 1u && tid == 0u) {
            Floats part = Floats(p.part);
            part.v[(base * p.n_splits + split) * (HD + 2u) + HD] = mrun[v];
            part.v[(base * p.n_splits + split) * (HD + 2u) + HD + 1u] = lsum[v];
        }
    }
}
#else
void main() {  // one workgroup per (row, head), invocations over dims
    uint base = flat_group();
    if (base >= p.n * p.heads) return;
    Floats part = Floats(p.part + uint64_t(base * p.n_splits * (HD + 2u)) * 4ul);
    float M = -1.0 / 0.0;
    for (uint s = 0u; s < p.n_splits; s++) M = max(M, part.v[s * (HD + 2u) + HD]);
    float l = 0.0;
    for (uint s = 0u; s < p.n_splits; s++) {
        float m = part.v[s * (HD + 2u) + HD];
        if (m != -1.0 / 0.0) l += exp(m - M) * part.v[s * (HD + 2u) + HD + 1u];
    }
    for (uint d = gl_LocalInvocationID.x; d < HD; d += gl_WorkGroupSize.x) {
        float o = 0.0;
        for (uint s = 0u; s < p.n_splits; s++) {
            float m = part.v[s * (HD + 2u) + HD];
            if (m != -1.0 / 0.0) o += exp(m - M) * part.v[s * (HD + 2u) + d];
        }
        Floats(p.dst).v[base * HD + d] = o / l;
    }
}
#endif
