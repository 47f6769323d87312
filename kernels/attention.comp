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
// ATTEND: a workgroup takes one kv head g, a tile of up to QV query vectors that read g (RT rows × HB of g's query
// heads), and one split of the keys. Keys go BK at a time: scores into shared memory, online softmax per vector
// (running max m and sum l), then o = o · e^(m_old − m_new) + p · v with each invocation owning two adjacent dims of
// every vector. Decode has one row, so long contexts are split over workgroups (flash decoding); prefill tiles rows.
// The loops over a key row and over the keys of a tile are unrolled with their loads issued before the arithmetic
// that uses them: with few workgroups per multiprocessor, a decode is bound by how many loads are in flight.
// Spec constants: 0 = workgroup size (128 for ATTEND, which its thread mapping assumes), 1 = head_dim (≤ 256).
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint HD = 128;

#include "kv_rows.glsl"

#define KV_WRITE 0
#define ATTEND 1
#define REDUCE 2
#define QV 16
#define BK 32
#define PV_KEYS 8  // keys whose values are loaded together in o += p · v
#define HD_MAX 256
#define WG_ATTEND 128
#define MAX_SPLITS 1024  // ops.c never splits further

layout(buffer_reference, std430, buffer_reference_align = 8) readonly buffer Vec2s { vec2 v[]; };
layout(buffer_reference, std430, buffer_reference_align = 8) readonly buffer Uvec2s { uvec2 v[]; };

layout(push_constant) uniform P {
    // ATTEND/REDUCE: dst = out [n][heads][HD], src = q, src2 = the gate or 0 (same shape); KV_WRITE: src = new k rows,
    // src2 = new v rows
    uint64_t dst, src, k, v, pages, part;  // k, v: this layer's K and V base; part: [n][heads][splits][HD + 2]
    uint n_past, n, heads, kv_heads, page_tokens, page_stride;  // page_stride in bytes
    uint split_len, n_splits, hb, rt;  // keys per split (multiple of BK); heads per block, rows per tile
    float scale;
    uint kv_type;  // SPLASH_KV_*
    uint64_t src2;
} p;

// Byte address of the row of position pos, kv head g.
uint64_t kv_row(uint64_t base, uint pos, uint g) {
    uint page = uint(Ints(p.pages).v[pos / p.page_tokens]);
    return base + uint64_t(page) * p.page_stride + uint64_t(g * p.page_tokens + pos % p.page_tokens) * kv_row_bytes(p.kv_type);
}
// Values 8c .. 8c+7 of a row, in one 16-byte load where the row is f16.
void kv8(uint64_t row, uint c, out vec4 a, out vec4 b) {
    if (p.kv_type == KV_INT8) {
        a = q8_kv4(row, 2u * c);
        b = q8_kv4(row, 2u * c + 1u);
    } else if (p.kv_type == KV_F16) {
        uvec4 h = Uvec4s(row).v[c];
        a = vec4(unpackHalf2x16(h.x), unpackHalf2x16(h.y));
        b = vec4(unpackHalf2x16(h.z), unpackHalf2x16(h.w));
    } else {
        a = Vec4s(row).v[2u * c];
        b = Vec4s(row).v[2u * c + 1u];
    }
}
// Values 2c, 2c+1 of a row.
vec2 kv2(uint64_t row, uint c) {
    if (p.kv_type == KV_INT8) return q8_kv2(row, c);
    if (p.kv_type == KV_F16) return unpackHalf2x16(Uints(row).v[c]);
    return Vec2s(row).v[c];
}

#if STAGE == KV_WRITE
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
    vec2 acc[QV];  // dims 2·tid, 2·tid + 1 of every vector
    [[unroll]] for (uint v = 0u; v < QV; v++) acc[v] = vec2(0.0);
    bool owns_dims = 2u * tid < HD;
    barrier();

    uint j = tid % BK, vg = tid / BK;  // scores: this invocation's key and its 4 vectors
    for (uint k0 = key_begin; k0 < key_end; k0 += BK) {
        uint key = k0 + j;
        float s[4] = float[4](0.0, 0.0, 0.0, 0.0);
        if (key < key_end) {
            uint64_t kr = kv_row(p.k, key, g);
            [[unroll]] for (uint c = 0u; c < HD / 8u; c++) {
                vec4 a, b;
                kv8(kr, c, a, b);
                [[unroll]] for (uint i = 0u; i < 4u; i++) {
                    s[i] += dot(Qs[vg * 4u + i][2u * c], a);
                    s[i] += dot(Qs[vg * 4u + i][2u * c + 1u], b);
                }
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
        [[unroll]] for (uint v = 0u; v < QV; v++) acc[v] *= corr[v];
        uint nk = min(BK, key_end - k0);  // keys past nk have p = 0: their loads are skipped, not their products
        if (owns_dims) {
            for (uint i0 = 0u; i0 < nk; i0 += PV_KEYS) {
                vec2 x[PV_KEYS];
                [[unroll]] for (uint u = 0u; u < PV_KEYS; u++)
                    x[u] = i0 + u < nk ? kv2(kv_row(p.v, k0 + i0 + u, g), tid) : vec2(0.0);
                [[unroll]] for (uint u = 0u; u < PV_KEYS; u++)
                    [[unroll]] for (uint v = 0u; v < QV; v++) acc[v] += S[v][i0 + u] * x[u];
            }
        }
        barrier();
    }

    [[unroll]] for (uint v = 0u; v < QV; v++) {
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
