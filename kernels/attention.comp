#version 460
// attention.comp — causal grouped-query attention over the paged KV cache (define STAGE):
//   KV_WRITE  K, V rows of positions n_past .. n_past+n−1 into the sequence's pages, converted to the cache's type
//             (f32, f16: one invocation per pair of values; int8: a workgroup per pair of rows, below)
//   ATTEND    out = softmax(q·kᵀ · scale + causal) · v, flash style, optionally split over key ranges
//   REDUCE    combines the splits of ATTEND: out = Σ_s e^(m_s − M) o_s / Σ_s e^(m_s − M) l_s
// Where a gate is given (src2 ≠ 0 for ATTEND and REDUCE), the kernel that writes out multiplies it by sigmoid(gate) as
// elementwise.comp's SIGMOID_MUL would (the gated attention's output gate).
//
// Paged layout (backends/backend.h, sp_kv_view): position p of kv head g lives in page pages[p / P], row p % P, at
// byte page · page_stride + (g · P + p % P) · row_bytes from the layer's K (or V) base. Rows are f32, f16 or int8
// (kv_type, SPLASH_KV_*; kv_rows.glsl); values are read as f32 and every sum accumulates in f32.
//
// ATTEND: flash attention for any number of rows, built for decode and verify blocks (few rows, long contexts), where
// it must cost the bytes of K and V rather than latency: a workgroup reads each key row once for all the query vectors
// of its kv head, long contexts are split over workgroups (flash decoding) and REDUCE combines the splits. Prefill
// chunks take flash_attention_coopmat.comp where the device has cooperative matrices; elsewhere they come here too.
// Spec constants: 0 = workgroup size (128 for ATTEND, which its thread mapping assumes), 1 = head_dim (≤ 256, a
// multiple of 8), 2 (ATTEND) = the KV row type.
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint HD = 128;

#include "kv_rows.glsl"

#define KV_WRITE 0
#define ATTEND 1
#define REDUCE 2
#define HD_MAX 256
#define WG_ATTEND 128
#define MAX_SPLITS 1024  // ops.c never splits further

layout(buffer_reference, std430, buffer_reference_align = 8) readonly buffer Uvec2s { uvec2 v[]; };

layout(push_constant) uniform P {
    // ATTEND/REDUCE: dst = out [n][heads][HD], src = q, src2 = the gate or 0 (same shape); KV_WRITE: src = new k rows,
    // src2 = new v rows
    uint64_t dst, src, k, v, pages, part;  // k, v: this layer's K and V base; part: [n][heads][splits][HD + 2]
    uint n_past, n, heads, kv_heads, page_tokens, page_stride;  // page_stride in bytes
    uint split_len, n_splits, hb, rt;  // keys per split; heads per block, rows per tile
    float scale;
    uint kv_type;  // SPLASH_KV_* (KV_WRITE; ATTEND has it as a spec constant)
    uint64_t src2;
} p;

#if STAGE == KV_WRITE
// Byte address of the row of position pos, kv head g.
uint64_t kv_row(uint64_t base, uint pos, uint g) {
    uint page = uint(Ints(p.pages).v[pos / p.page_tokens]);
    return base + uint64_t(page) * p.page_stride + uint64_t(g * p.page_tokens + pos % p.page_tokens) * kv_row_bytes(p.kv_type);
}
void kv_put(uint64_t row, uint c, vec2 x) {
    if (p.kv_type == KV_F16) {
        Uints(row).v[c] = packHalf2x16(x);
    } else {
        Floats(row).v[2u * c] = x.x;
        Floats(row).v[2u * c + 1u] = x.y;
    }
}

// int8 rows are quantized as sp_quantize_row_q8 does, to the same bits for finite values: per group of 32,
// d = f16(max|x| / 127) rounded to nearest even, then q = round-to-even(clamp(x · (1 / d), −127, 127)). A device's
// division and f16 conversion need not be correctly rounded (nor keep subnormals), so both are computed exactly here:
// the f16 of amax / 127 by comparing amax with 127 × the midpoints around a guess (products exact in f32, and the
// CPU's f32 quotient never lands on a midpoint it did not start on), and 1 / d in integers.
#define Q8_MAX_GROUPS 8  // HD ≤ 256
shared uint q8_d[2 * Q8_MAX_GROUPS];     // f16 bits of d, group j of the pair's row k at [k · KV_NB + j]
shared float q8_inv[2 * Q8_MAX_GROUPS];  // 1 / d, or 0 where d = 0

// Whether amax / 127 rounds up from f16 lo to lo + 1 (ties to even).
bool q8_rounds_up(float amax, uint lo) {
    float t = 127.0 * (0.5 * (f16_exact(lo) + f16_exact(lo + 1u)));
    return amax > t || (amax == t && (lo & 1u) == 1u);
}
uint q8_d_bits(float amax) {
    float a = amax / 127.0;  // within a few ulps: its f16 (truncated) is the answer or one below it
    uint h = a < 0.00006103515625 ? uint(a * 16777216.0) : min((floatBitsToUint(a) >> 13) - (112u << 10), 0x7c00u);
    if (h < 0x7c00u && q8_rounds_up(amax, h)) h++;
    if (h > 0u && !q8_rounds_up(amax, h - 1u)) h--;
    return h;
}
// 1 / d of f16 bits h (0 < h < 0x7c00), correctly rounded: d = M · 2^e with 1024 ≤ M < 2048, 1/d = round(2^34 / M) · 2^(−34−e).
float q8_recip(uint h) {
    uint m = h & 0x3ffu, e = h >> 10;
    int s = e == 0u ? 10 - findMSB(m) : 0, ex = e == 0u ? -24 - s : int(e) - 25;
    uint M = e == 0u ? m << s : m | 0x400u;
    uint64_t num = 1ul << 34;
    uint r = uint(num / uint64_t(M)), rem = uint(num - uint64_t(r) * uint64_t(M));
    if (2u * rem > M || (2u * rem == M && (r & 1u) == 1u)) r++;
    return ldexp(float(r), -34 - ex);
}

// Row r (= g · P + p % P) of logical page lp is being written; its new values in src ([n][kv_heads][HD]).
bool q8_written(uint lp, uint r) { return lp * p.page_tokens + r % p.page_tokens - p.n_past < p.n; }
Floats q8_source(uint64_t src, uint lp, uint r) {
    uint P = p.page_tokens;
    return Floats(src + uint64_t(((lp * P + r % P - p.n_past) * p.kv_heads + r / P) * HD) * 4ul);
}

// A workgroup per written row of K or V: with 2-byte aligned rows, two rows share a word, so the even row of each
// pair (r, r + 1) of a page's rows writes the pair's whole words (the odd one when the even is not written), and the
// bytes of a row not written are kept. ops.c makes K and V start 4-byte aligned, so pairs never share a word.
void kv_write_q8() {
    uint rows = p.n * p.kv_heads, idx = flat_group(), tid = gl_LocalInvocationID.x;
    if (idx >= 2u * rows) return;
    uint i = idx % rows, pos = p.n_past + i / p.kv_heads, g = i % p.kv_heads;
    uint P = p.page_tokens, lp = pos / P, r0 = (g * P + pos % P) & ~1u;
    if (r0 != g * P + pos % P && q8_written(lp, r0)) return;
    uint nrows = min(2u, p.kv_heads * P - r0), RB = KV_NB * 34u;
    uint64_t base = (idx < rows ? p.k : p.v) + uint64_t(Ints(p.pages).v[lp]) * p.page_stride + uint64_t(r0) * RB;
    uint64_t src = idx < rows ? p.src : p.src2;
    if (tid < nrows * KV_NB) {
        uint k = tid / KV_NB, j = tid % KV_NB, r = r0 + k;
        if (q8_written(lp, r)) {
            Floats x = q8_source(src, lp, r);
            float amax = 0.0;
            for (uint c = 32u * j; c < min(32u * j + 32u, HD); c++) amax = max(amax, abs(x.v[c]));
            uint h = q8_d_bits(amax);
            q8_d[tid] = h;
            q8_inv[tid] = h > 0u && h < 0x7c00u ? q8_recip(h) : 0.0;
        }
    }
    barrier();
    for (uint w = tid; w < nrows * RB / 4u; w += gl_WorkGroupSize.x) {
        uint word = 0u, keep = 0u;
        for (uint b = 0u; b < 4u; b++) {
            uint k = (4u * w + b) / RB, o = (4u * w + b) % RB, r = r0 + k, byte = 0u;
            if (!q8_written(lp, r)) {
                keep |= 0xffu << (8u * b);
                continue;
            }
            if (o < KV_NB * 32u) {
                if (o < HD) {
                    float x = q8_source(src, lp, r).v[o];
                    byte = uint(int(roundEven(min(max(x * q8_inv[k * KV_NB + o / 32u], -127.0), 127.0)))) & 0xffu;
                }
            } else {
                uint e = o - KV_NB * 32u;
                byte = (q8_d[k * KV_NB + e / 2u] >> (8u * (e & 1u))) & 0xffu;
            }
            word |= byte << (8u * b);
        }
        Uints dst = Uints(base + uint64_t(4u * w));
        if (keep != 0xffffffffu) dst.v[0] = keep == 0u ? word : (dst.v[0] & keep) | word;
    }
}

void main() {
    if (p.kv_type == KV_INT8) {
        kv_write_q8();
        return;
    }
    uint i = flat_group() * gl_WorkGroupSize.x + gl_LocalInvocationID.x;  // values 2i, 2i+1 of k and v
    if (i >= p.n * p.kv_heads * (HD / 2u)) return;
    uint c = i % (HD / 2u), g = (i / (HD / 2u)) % p.kv_heads, row = i / ((HD / 2u) * p.kv_heads);
    Floats k = Floats(p.src), v = Floats(p.src2);
    kv_put(kv_row(p.k, p.n_past + row, g), c, vec2(k.v[2u * i], k.v[2u * i + 1u]));
    kv_put(kv_row(p.v, p.n_past + row, g), c, vec2(v.v[2u * i], v.v[2u * i + 1u]));
}
#elif STAGE == ATTEND
// A workgroup takes kv head g, a tile of up to NV query vectors that read g (rt rows × hb of g's query heads) and one
// split of the keys. Every K and V row a workgroup reads serves all its vectors, and is read once: tiles of BK rows are
// staged into shared memory by the whole workgroup, consecutive invocations loading consecutive bytes of a row, the next
// tile's loads issued before the current tile's arithmetic. Keys go CH at a time: their scores stay in shared memory, so
// the softmax of a chunk is exact over it (max, then e^(s − max) and their sum, in parallel over 8 invocations per
// vector) and rescales the running sums once per chunk. The rows' offsets (page table) are found a chunk ahead.
layout(constant_id = 2) const uint KV_TYPE = KV_F32;  // SPLASH_KV_* of every row
// NV (query vectors per workgroup) and BK (keys per staged tile) are defines (generate.ts), NV · BK = WG_ATTEND
#define CH 64                        // keys per chunk (scores kept in shared memory)
#define TS (HD_MAX / 4 + 1)          // a staged row in vec4s: padded so that rows start 4 banks apart
#define UNITS (BK * HD_MAX / 4 / WG_ATTEND)  // vec4s of a tile each invocation stages
#define SM_PARTS (WG_ATTEND / NV)    // invocations per vector in the softmax
// a chunk's sum of e^(s − max) goes in this many parts (the narrow width's SM_PARTS is 16, the wide one's 8), so a
// vector's result does not depend on the width its step took: a decode row and a verify block agree to the bit
#define SUM_PARTS 8u

shared vec4 Qs[NV][TS];
shared vec4 Ts[BK][TS];
shared float S[NV][CH];
shared uint64_t roff[2][CH];  // byte offset of each key's row (K or V) in the current chunk and in the next
// the softmax's partial maxima and sums, one per invocation, in Ts (free between the chunk's K and V passes)
#define RED(i) Ts[(i) / 4u / TS][((i) / 4u) % TS][(i) % 4u]
shared float corr[NV], lsum[NV], mrun[NV];

// Values 4c .. 4c+3 of a row.
vec4 kv4(uint64_t row, uint c) {
    if (KV_TYPE == KV_INT8) return q8_kv4(row, c);
    if (KV_TYPE == KV_F16) {
        uvec2 h = Uvec2s(row).v[c];
        return vec4(unpackHalf2x16(h.x), unpackHalf2x16(h.y));
    }
    return Vec4s(row).v[c];
}

// Byte offset of the row of position pos, kv head g, in page `page`.
uint64_t row_offset(uint page, uint pos, uint g) {
    return uint64_t(page) * p.page_stride + uint64_t(g * p.page_tokens + pos % p.page_tokens) * kv_row_bytes(KV_TYPE);
}
// Loads this invocation's vec4s of tile t of the chunk from c0 (K or V rows; row offsets in roff[b]); zeros from key_end
// on, so that a key of probability 0 adds 0.
void stage_load(out vec4 x[UNITS], uint64_t base, uint key_end, uint c0, uint t, uint b) {
    [[unroll]] for (uint u = 0u; u < UNITS; u++) {
        uint e = u * WG_ATTEND + gl_LocalInvocationID.x, j = e / (HD / 4u), c = e % (HD / 4u), key = c0 + t * BK + j;
        x[u] = vec4(0.0);
        if (j < BK && key < key_end) {
            x[u] = kv4(base + roff[b][t * BK + j], c);
        }
    }
}
// Stores what stage_load loaded into Ts (a macro: a function taking Ts would take a threadgroup array of float4 by
// reference in MSL, which the Metal syntax check rejects).
#define STAGE_STORE(x)                                                          \
    [[unroll]] for (uint u = 0u; u < UNITS; u++) {                              \
        uint e = u * WG_ATTEND + tid, j = e / (HD / 4u);                        \
        if (j < BK) Ts[j][e % (HD / 4u)] = x[u];                                \
    }

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

    for (uint t = tid; t < NV * (HD / 4u); t += WG_ATTEND) {
        uint v = t / (HD / 4u), c = t % (HD / 4u), row = row0 + v / p.hb, h = h0 + v % p.hb;
        vec4 x = vec4(0.0);
        if (v < p.hb * p.rt && row < p.n && h < h_end)
            x = Vec4s(p.src + uint64_t((row * p.heads + h) * HD) * 4ul).v[c] * p.scale;
        Qs[v][c] = x;
    }
    if (tid < NV) {
        mrun[tid] = -1.0 / 0.0;
        lsum[tid] = 0.0;
    }
    if (tid < CH && key_begin + tid < key_end)
        roff[0][tid] = row_offset(uint(Ints(p.pages).v[(key_begin + tid) / p.page_tokens]), key_begin + tid, g);
    // scores: this invocation's key of a tile and its vector
    uint sj = tid % BK, sv = tid / BK, srow = row0 + sv / p.hb;
    bool svalid = sv < p.hb * p.rt && srow < p.n && h0 + sv % p.hb < h_end;
    uint skey_end = svalid ? min(key_end, p.n_past + srow + 1u) : 0u;  // causal
    vec2 acc[NV];  // dims 2·tid, 2·tid + 1 of every vector
    [[unroll]] for (uint v = 0u; v < NV; v++) acc[v] = vec2(0.0);
    bool owns_dims = 2u * tid < HD;
    vec4 x[UNITS];
    barrier();
    stage_load(x, p.k, key_end, key_begin, 0u, 0u);

    for (uint c0 = key_begin, b = 0u; c0 < key_end; c0 += CH, b ^= 1u) {
        uint nt = (min(CH, key_end - c0) + BK - 1u) / BK;
        uint next = c0 + CH + tid, next_page = 0u;  // the next chunk's page ids: their rows' offsets are stored once this chunk's are read
        if (tid < CH && next < key_end) next_page = uint(Ints(p.pages).v[next / p.page_tokens]);
        for (uint t = 0u; t < nt; t++) {  // q · k
            STAGE_STORE(x);
            barrier();
            if (t + 1u < nt) stage_load(x, p.k, key_end, c0, t + 1u, b);
            else stage_load(x, p.v, key_end, c0, 0u, b);
            float s0 = 0.0, s1 = 0.0;  // two chains (HD / 4 is even); no array a loop indexes (it would live in memory)
            uint key = c0 + t * BK + sj;
            if (key < skey_end)
                [[unroll]] for (uint c = 0u; c < HD / 4u; c += 2u) {
                    s0 += dot(Qs[sv][c], Ts[sj][c]);
                    s1 += dot(Qs[sv][c + 1u], Ts[sj][c + 1u]);
                }
            S[sv][t * BK + sj] = key < skey_end ? s0 + s1 : -1.0 / 0.0;
            barrier();
        }
        {  // softmax of the chunk: SM_PARTS invocations per vector, a fixed order of sums
            uint v = tid / SM_PARTS, part = tid % SM_PARTS, len = nt * BK;
            float mx = -1.0 / 0.0;
            for (uint i = part; i < len; i += SM_PARTS) mx = max(mx, S[v][i]);
            RED(tid) = mx;
            if (tid < CH && next < key_end) roff[b ^ 1u][tid] = row_offset(next_page, next, g);
            barrier();
            float M = mrun[v];
            for (uint i = 0u; i < SM_PARTS; i++) M = max(M, RED(v * SM_PARTS + i));
            for (uint i = part; i < len; i += SM_PARTS) S[v][i] = M == -1.0 / 0.0 ? 0.0 : exp(S[v][i] - M);
            barrier();
            if (part < SUM_PARTS) {
                float l = 0.0;
                for (uint i = part; i < len; i += SUM_PARTS) l += S[v][i];
                RED(v * SUM_PARTS + part) = l;
            }
            barrier();
            if (part == 0u) {
                float c = M == -1.0 / 0.0 ? 1.0 : exp(mrun[v] - M), sum = 0.0;
                for (uint i = 0u; i < SUM_PARTS; i++) sum += RED(v * SUM_PARTS + i);
                corr[v] = c;
                lsum[v] = lsum[v] * c + sum;
                mrun[v] = M;
            }
            barrier();
        }
        [[unroll]] for (uint v = 0u; v < NV; v++) acc[v] *= corr[v];
        for (uint t = 0u; t < nt; t++) {  // p · v
            STAGE_STORE(x);
            barrier();
            if (t + 1u < nt) stage_load(x, p.v, key_end, c0, t + 1u, b);
            else if (c0 + CH < key_end) stage_load(x, p.k, key_end, c0 + CH, 0u, b ^ 1u);
            if (owns_dims) {
                [[unroll]] for (uint j = 0u; j < BK; j++) {
                    vec4 y4 = Ts[j][tid >> 1];
                    vec2 y = (tid & 1u) == 0u ? y4.xy : y4.zw;
                    [[unroll]] for (uint v = 0u; v < NV; v++) acc[v] += S[v][t * BK + j] * y;
                }
            }
            barrier();
        }
    }

    [[unroll]] for (uint v = 0u; v < NV; v++) {
        uint row = row0 + v / p.hb, h = h0 + v % p.hb;
        if (v >= p.hb * p.rt || row >= p.n || h >= h_end) continue;
        uint base = row * p.heads + h;
        if (owns_dims) {
            if (p.n_splits == 1u) {
                Floats o = Floats(p.dst + uint64_t(base * HD + 2u * tid) * 4ul);
                vec2 y = vec2(acc[v].x / lsum[v], acc[v].y / lsum[v]);
                if (p.src2 != 0ul) {
                    Floats gate = Floats(p.src2 + uint64_t(base * HD + 2u * tid) * 4ul);
                    y = vec2(y.x * sigmoid(gate.v[0]), y.y * sigmoid(gate.v[1]));
                }
                o.v[0] = y.x;
                o.v[1] = y.y;
            } else {
                Floats part = Floats(p.part + uint64_t((base * p.n_splits + split) * (HD + 2u) + 2u * tid) * 4ul);
                part.v[0] = acc[v].x;
                part.v[1] = acc[v].y;
            }
        }
        if (p.n_splits > 1u && tid == 0u) {
            Floats part = Floats(p.part);
            part.v[(base * p.n_splits + split) * (HD + 2u) + HD] = mrun[v];
            part.v[(base * p.n_splits + split) * (HD + 2u) + HD + 1u] = lsum[v];
        }
    }
}
#else
shared float wsplit[MAX_SPLITS], lsplit[MAX_SPLITS];  // e^(m_s − M), and that times l_s

void main() {  // one workgroup per (row, head): the splits' weights in parallel, then invocations over dims
    uint base = flat_group();
    if (base >= p.n * p.heads) return;
    uint tid = gl_LocalInvocationID.x, WG = gl_WorkGroupSize.x, ns = p.n_splits;
    Floats part = Floats(p.part + uint64_t(base * ns * (HD + 2u)) * 4ul);
    float mx = -1.0 / 0.0;
    for (uint s = tid; s < ns; s += WG) mx = max(mx, part.v[s * (HD + 2u) + HD]);
    float M = workgroup_max(mx);
    for (uint s = tid; s < ns; s += WG) {
        float m = part.v[s * (HD + 2u) + HD];
        float w = m != -1.0 / 0.0 ? exp(m - M) : 0.0;
        wsplit[s] = w;
        lsplit[s] = w * part.v[s * (HD + 2u) + HD + 1u];
    }
    barrier();
    float l = 0.0;  // the same order in every invocation
    for (uint s = 0u; s < ns; s++) l += lsplit[s];
    for (uint d = tid; d < HD; d += WG) {
        float o = 0.0;
        uint s = 0u;
        for (; s + 8u <= ns; s += 8u) {  // eight loads in flight, summed in order
            float x[8];
            [[unroll]] for (uint u = 0u; u < 8u; u++) x[u] = part.v[(s + u) * (HD + 2u) + d];
            [[unroll]] for (uint u = 0u; u < 8u; u++) o += wsplit[s + u] * x[u];
        }
        for (; s < ns; s++) o += wsplit[s] * part.v[s * (HD + 2u) + d];
        float y = o / l;
        if (p.src2 != 0ul) y = y * sigmoid(Floats(p.src2).v[base * HD + d]);
        Floats(p.dst).v[base * HD + d] = y;
    }
}
#endif
