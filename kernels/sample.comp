#version 460
// sample.comp — the token a logits row samples and its log-probability, without copying the row to the host:
//   out[8j …] = (token, z[token] − lse, z[d] − lse, mass of d (2 words), kept mass (2 words), 0)
// over the ids row j may take, lse = logsumexp z, d the row's probed token (speculative acceptance's p(d) = mass of d /
// kept mass; greedy: 1 / 1 at the argmax, else 0 / 1).
// One workgroup per row; rows[j] holds row j's address, masks[2j] and masks[2j + 1] the addresses of its allowed-token
// bitmask (a grammar's) and of the model's token bitmask, each 0 for none: an id whose bit is clear in either is never
// chosen and counts in no sum. params[8j …] = (1/T, top_k, top-p fraction, top-p on, min-p, u53 low, u53 high, d or
// 0xffffffff) of row j as uints (1/T = 0: greedy).
//
// The CPU sampler's rule in its exact arithmetic (native/core/sampling.h, whose functions are copied here op for op):
// temperature 0 takes the argmax (lowest id on ties). Otherwise w = sp_sample_exp((z − max z) · 1/T) and the integer
// mass ⌊w · 2^44⌋; top-k, then top-p, then min-p each keep a best-first prefix of the candidates ranked by (w
// descending, id ascending); the token is the first kept id, in id order, whose running mass passes the draw's point.
// A prefix by rank is every token whose key (w's float bits: positive floats order like their bits) is above θ, plus
// the ties at θ up to an id. θ is found by a radix select over the keys (three passes of 10 bits, counting tokens or
// summing masses per digit), the cut id among ties by counting them over each invocation's stretch of ids.
// Spec constant 0: workgroup size (256: the reductions and scans below assume it).
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(local_size_x_id = 0) in;

layout(push_constant) uniform P {
    uint64_t rows, out_, masks, params;
    uint n, vocab;
} p;

const uint NONE = 0xffffffffu;

bool bit_set(uint64_t mask, uint t) {
    return mask == 0ul || ((Uints(mask).v[t >> 5] >> (t & 31u)) & 1u) != 0u;
}

Floats z;
uint64_t allowed, tokens;
float mx, inv_t;
// the kept set: key ≠ 0, key ≥ floor_key (min-p), and key > th or (key = th and id ≤ cut)
uint th = 0u, cut = NONE, floor_key = 0u;

bool may(uint t) { return bit_set(allowed, t) && bit_set(tokens, t); }

// sp_sample_exp (core/sampling.h): `precise` keeps every multiply and add a separate, correctly rounded operation.
float sample_exp(float in_) {
    precise float x = in_ > -87.0 ? in_ : -87.0;
    precise float n = roundEven(x * 1.44269504);
    precise float a = n * 0.693359375;
    precise float r = x - a;
    precise float b = n * 2.12194440e-4;
    r = r + b;
    precise float q = 1.9875691500e-4, t;
    t = q * r; q = t + 1.3981999507e-3;
    t = q * r; q = t + 8.3334519073e-3;
    t = q * r; q = t + 4.1665795894e-2;
    t = q * r; q = t + 1.6666665459e-1;
    t = q * r; q = t + 5.0000001201e-1;
    t = q * r;
    t = t * r;
    precise float y = t + r;
    y = y + 1.0;
    precise float e = uintBitsToFloat(uint(int(n) + 127) << 23);
    precise float w = y * e;
    return in_ >= -87.0 ? w : 0.0;
}

// The token's key: w's bits when it has mass (w ≥ 2^-44), else 0.
uint key_of(uint t) {
    if (!may(t)) return 0u;
    precise float x = (z.v[t] - mx) * inv_t;
    float w = sample_exp(x);
    return w >= uintBitsToFloat(0x29800000u) ? floatBitsToUint(w) : 0u;
}
uint64_t mass_of(uint key) { return uint64_t(uintBitsToFloat(key) * 17592186044416.0); }
bool kept(uint key, uint t) { return key != 0u && key >= floor_key && (key > th || (key == th && t <= cut)); }

shared uint64_t red64[256];
shared uint hist_n[1024], hist_lo[1024], hist_hi[1024];
// values one invocation finds for all: the selected digit and the count or mass above it; the cut id; the drawn id
shared uint sel_digit[1], found[1], drawn[1];
shared uint64_t sel_acc[1];

// Σ of v over the workgroup (wg = 256), the same in every invocation; exact for integers.
uint64_t workgroup_sum64(uint64_t v) {
    uint tid = gl_LocalInvocationID.x;
    red64[tid] = v;
    barrier();
    for (uint s = 128u; s > 0u; s >>= 1) {
        if (tid < s) red64[tid] += red64[tid + s];
        barrier();
    }
    uint64_t r = red64[0];
    barrier();
    return r;
}

// The key θ where the best-first running count (by_mass false) or mass (true) of the kept tokens first reaches need,
// and *above = the count or mass of the kept tokens with a key above θ.
uint radix_select(bool by_mass, uint64_t need, out uint64_t above) {
    uint tid = gl_LocalInvocationID.x, wg = gl_WorkGroupSize.x, prefix = 0u;
    uint64_t acc = 0ul;
    for (int shift = 20; shift >= 0; shift -= 10) {
        for (uint d = tid; d < 1024u; d += wg) hist_n[d] = 0u, hist_lo[d] = 0u, hist_hi[d] = 0u;
        barrier();
        uint high = shift == 20 ? 0u : NONE << uint(shift + 10);
        for (uint t = tid; t < p.vocab; t += wg) {
            uint key = key_of(t);
            if (!kept(key, t) || (key & high) != prefix) continue;
            uint d = (key >> uint(shift)) & 1023u;
            if (!by_mass) {
                atomicAdd(hist_n[d], 1u);
                continue;
            }
            uint64_t m = mass_of(key);
            uint lo = uint(m), old = atomicAdd(hist_lo[d], lo), hi = uint(m >> 32) + (old + lo < old ? 1u : 0u);
            if (hi != 0u) atomicAdd(hist_hi[d], hi); // the low words' carries go to the high word: the sum is exact
        }
        barrier();
        // the digit where the running total from digit 1023 down first reaches need: each invocation holds four digits,
        // a scan over the invocations gives the total above each four
        uint64_t u[4], own = 0ul;
        for (uint i = 0u; i < 4u; i++) {
            uint d = 1023u - 4u * tid - i;
            u[i] = by_mass ? (uint64_t(hist_hi[d]) << 32) | uint64_t(hist_lo[d]) : uint64_t(hist_n[d]);
            own += u[i];
        }
        red64[tid] = own;
        if (tid == 0u) sel_digit[0] = 0u, sel_acc[0] = acc; // not reached: need is at most the total
        barrier();
        for (uint off = 1u; off < 256u; off <<= 1) {
            uint64_t add = tid >= off ? red64[tid - off] : 0ul;
            barrier();
            red64[tid] += add;
            barrier();
        }
        uint64_t before = acc + red64[tid] - own;
        if (before < need && need <= before + own)
            for (uint i = 0u; i < 4u; i++) {
                if (before + u[i] >= need) {
                    sel_digit[0] = 1023u - 4u * tid - i, sel_acc[0] = before;
                    break;
                }
                before += u[i];
            }
        barrier();
        prefix |= sel_digit[0] << uint(shift);
        acc = sel_acc[0];
        barrier();
    }
    above = acc;
    return prefix;
}

// Each invocation's stretch of ids, for the passes that need id order.
uint stretch_begin() { return min(gl_LocalInvocationID.x * ((p.vocab + gl_WorkGroupSize.x - 1u) / gl_WorkGroupSize.x), p.vocab); }
uint stretch_end() { return min(stretch_begin() + (p.vocab + gl_WorkGroupSize.x - 1u) / gl_WorkGroupSize.x, p.vocab); }

// Keeps the kept tokens above theta and the first m (in id order) of the kept ties at theta.
void keep_prefix(uint theta, uint m) {
    uint tid = gl_LocalInvocationID.x, b = stretch_begin(), e = stretch_end(), c = 0u;
    for (uint t = b; t < e; t++)
        if (key_of(t) == theta && kept(theta, t)) c++;
    red64[tid] = c;
    if (tid == 0u) found[0] = NONE;
    barrier();
    uint before = 0u;
    for (uint i = 0u; i < tid; i++) before += uint(red64[i]);
    if (before < m && m <= before + c)
        for (uint t = b; t < e; t++)
            if (key_of(t) == theta && kept(theta, t) && ++before == m) {
                found[0] = t;
                break;
            }
    barrier();
    th = theta, cut = found[0];
    barrier();
}

void main() {
    uint j = flat_group(), tid = gl_LocalInvocationID.x, wg = gl_WorkGroupSize.x;
    if (j >= p.n) return;
    z = Floats(Addrs(p.rows).v[j]);
    allowed = Addrs(p.masks).v[2u * j], tokens = Addrs(p.masks).v[2u * j + 1u];
    Uints prm = Uints(p.params + 32ul * j);
    inv_t = uintBitsToFloat(prm.v[0]);
    uint top_k = prm.v[1], fraction = prm.v[2], top_p_on = prm.v[3], min_p = prm.v[4];
    uint64_t u53 = (uint64_t(prm.v[6]) << 32) | uint64_t(prm.v[5]);
    uint probe = prm.v[7];

    float best = -1.0 / 0.0;
    uint arg = NONE;
    for (uint t = tid; t < p.vocab; t += wg)
        if (may(t) && (arg == NONE || z.v[t] > best)) best = z.v[t], arg = t;
    mx = workgroup_max(best);
    uint token = workgroup_min_uint(best == mx ? arg : NONE);
    float s = 0.0;
    for (uint t = tid; t < p.vocab; t += wg)
        if (may(t)) s += exp(z.v[t] - mx);
    float lse = log(workgroup_sum(s));

    uint64_t probe_mass = probe == token ? 1ul : 0ul, kept_mass = 1ul;
    if (inv_t > 0.0 && token != NONE) {
        uint64_t above;
        if (top_k > 0u) {
            uint c = 0u;
            for (uint t = tid; t < p.vocab; t += wg)
                if (key_of(t) != 0u) c++;
            if (uint64_t(top_k) < workgroup_sum64(c)) {
                uint theta = radix_select(false, top_k, above);
                keep_prefix(theta, top_k - uint(above));
            }
        }
        if (top_p_on != 0u) {
            uint64_t total = 0ul;
            for (uint t = tid; t < p.vocab; t += wg) {
                uint key = key_of(t);
                if (kept(key, t)) total += mass_of(key);
            }
            total = workgroup_sum64(total);
            // sp_top_p_need
            uint64_t need = (total >> 32) * fraction + (((total & 0xfffffffful) * fraction + 0xfffffffful) >> 32);
            need = max(need, 1ul);
            uint theta = radix_select(true, need, above);
            uint64_t m = mass_of(theta);
            keep_prefix(theta, uint((need - above + m - 1ul) / m));
        }
        floor_key = min_p;
        // the draw: the stretches' kept masses, then the one stretch where the running mass passes the point
        uint b = stretch_begin(), e = stretch_end();
        uint64_t own = 0ul;
        for (uint t = b; t < e; t++) {
            uint key = key_of(t);
            if (kept(key, t)) own += mass_of(key);
        }
        red64[tid] = own;
        if (tid == 0u) drawn[0] = NONE;
        barrier();
        uint64_t base = 0ul, total = 0ul;
        for (uint i = 0u; i < wg; i++) {
            if (i < tid) base += red64[i];
            total += red64[i];
        }
        // sp_sample_point: ⌊u53 · total / 2^53⌋
        uint64_t lo32 = 0xfffffffful, al = u53 & lo32, ah = u53 >> 32, bl = total & lo32, bh = total >> 32;
        uint64_t p0 = al * bl, p1 = al * bh, p2 = ah * bl, p3 = ah * bh;
        uint64_t mid = (p0 >> 32) + (p1 & lo32) + (p2 & lo32);
        uint64_t hi = p3 + (p1 >> 32) + (p2 >> 32) + (mid >> 32), lo = (mid << 32) | (p0 & lo32);
        uint64_t point = (hi << 11) | (lo >> 53), cum = base;
        if (base <= point && point < base + own)
            for (uint t = b; t < e; t++) {
                uint key = key_of(t);
                if (kept(key, t)) {
                    cum += mass_of(key);
                    if (point < cum) {
                        drawn[0] = t;
                        break;
                    }
                }
            }
        barrier();
        token = drawn[0];
        uint key = probe < p.vocab ? key_of(probe) : 0u;
        probe_mass = kept(key, probe) ? mass_of(key) : 0ul;
        kept_mass = total;
    }
    if (tid == 0u) {
        Uints o = Uints(p.out_ + 32ul * j);
        o.v[0] = token;
        o.v[1] = floatBitsToUint(token != NONE ? z.v[token] - mx - lse : 0.0);
        o.v[2] = floatBitsToUint(probe < p.vocab && may(probe) ? z.v[probe] - mx - lse : -1.0 / 0.0);
        o.v[3] = uint(probe_mass), o.v[4] = uint(probe_mass >> 32);
        o.v[5] = uint(kept_mass), o.v[6] = uint(kept_mass >> 32);
        o.v[7] = 0u;
    }
}
