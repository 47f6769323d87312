#version 460
// sample.comp — the token a logits row samples and its log-probability, without copying the row to the host:
//   out[j] = (token, z[token] − logsumexp z)   over the ids row j may take
// One workgroup per row; rows[j] holds row j's address, masks[2j] and masks[2j + 1] the addresses of its allowed-token
// bitmask (a grammar's) and of the model's token bitmask, each 0 for none: an id whose bit is clear in either is never
// chosen and counts in no sum. params[8j …] = (temperature, top_p, min_p, u, top_k) of row j, u the draw in [0, 1).
//
// The CPU sampler's rule (backends/cpu/sample.c): temperature 0 takes the argmax (lowest id on ties). Otherwise
// w = exp((z − max z) / T) (so the best weighs 1); top-k, then top-p, then min-p each keep a best-first prefix of the
// candidates ranked by (w descending, id ascending), and the token is the first kept id, in id order, whose running
// mass passes u · (kept mass). A prefix by rank is everything above a weight θ plus the ties at θ up to an id, so each
// filter is a binary search over θ's float bits (weights are positive, so their bits order like them) and one over
// the cut id among ties — passes over the row, no sort.
// Spec constant 0: workgroup size (≤ 256).
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(local_size_x_id = 0) in;

layout(push_constant) uniform P {
    uint64_t rows, out_, masks, params;
    uint n, vocab;
} p;

bool bit_set(uint64_t mask, uint t) {
    return mask == 0ul || ((Uints(mask).v[t >> 5] >> (t & 31u)) & 1u) != 0u;
}

Floats z;
uint64_t allowed, tokens;
float mx, inv_t;
// the kept set: weight > th, or = th with id ≤ cut; and ≥ floor_w (min-p)
float th = 0.0, floor_w = 0.0;
uint cut = 0u;

bool may(uint t) { return bit_set(allowed, t) && bit_set(tokens, t); }
float weight(uint t) { return may(t) ? exp((z.v[t] - mx) * inv_t) : 0.0; }
bool kept(float w, uint t) { return w > 0.0 && (w > th || (w == th && t <= cut)) && w >= floor_w; }

// Σ over kept ids of (w ≥ theta (or > when strict) ? (mass ? w : 1) : 0)
float over(float theta, bool strict, bool mass) {
    float s = 0.0;
    for (uint t = gl_LocalInvocationID.x; t < p.vocab; t += gl_WorkGroupSize.x) {
        float w = weight(t);
        if (kept(w, t) && (strict ? w > theta : w >= theta)) s += mass ? w : 1.0;
    }
    return workgroup_sum(s);
}

// The largest weight theta ≤ 1 with over(theta) ≥ need (the smallest positive weight satisfies it by the caller's
// choice of need).
float search_weight(float need, bool mass) {
    uint lo = 1u, hi = floatBitsToUint(1.0);
    while (lo < hi) {
        uint mid = lo + (hi - lo + 1u) / 2u;
        if (over(uintBitsToFloat(mid), false, mass) >= need) lo = mid;
        else hi = mid - 1u;
    }
    return uintBitsToFloat(lo);
}

// Keeps the kept ids above theta and the first m (in id order) of those equal to theta.
void keep_prefix(float theta, uint m) {
    uint lo = 0u, hi = p.vocab - 1u; // the smallest id x with m kept ties at theta in [0, x]
    while (lo < hi) {
        uint mid = (lo + hi) / 2u;
        float c = 0.0;
        for (uint t = gl_LocalInvocationID.x; t <= mid; t += gl_WorkGroupSize.x) {
            float w = weight(t);
            if (kept(w, t) && w == theta) c += 1.0;
        }
        if (workgroup_sum(c) >= float(m)) hi = mid;
        else lo = mid + 1u;
    }
    th = theta, cut = lo;
}

shared float seg_mass[256];

void main() {
    uint j = flat_group(), tid = gl_LocalInvocationID.x, wg = gl_WorkGroupSize.x;
    if (j >= p.n) return;
    z = Floats(Addrs(p.rows).v[j]);
    allowed = Addrs(p.masks).v[2u * j], tokens = Addrs(p.masks).v[2u * j + 1u];
    Floats prm = Floats(p.params + 32ul * j);
    float temperature = prm.v[0], top_p = prm.v[1], min_p = prm.v[2], u = prm.v[3];
    uint top_k = floatBitsToUint(prm.v[4]);

    float best = -1.0 / 0.0;
    uint arg = 0xffffffffu;
    for (uint t = tid; t < p.vocab; t += wg)
        if (may(t) && (arg == 0xffffffffu || z.v[t] > best)) best = z.v[t], arg = t;
    mx = workgroup_max(best);
    uint token = workgroup_min_uint(best == mx ? arg : 0xffffffffu);
    float s = 0.0;
    for (uint t = tid; t < p.vocab; t += wg)
        if (may(t)) s += exp(z.v[t] - mx);
    float lse = log(workgroup_sum(s));

    if (temperature > 0.0 && token != 0xffffffffu) {
        inv_t = 1.0 / temperature;
        if (top_k > 0u) {
            float n = over(0.0, true, false);
            if (float(top_k) < n) {
                float theta = search_weight(float(top_k), false);
                keep_prefix(theta, top_k - uint(over(theta, true, false)));
            }
        }
        if (top_p < 1.0) {
            float need = top_p * over(0.0, true, true), theta = search_weight(need, true);
            float above = over(theta, true, true), ties = over(theta, false, false) - over(theta, true, false);
            keep_prefix(theta, uint(min(max(ceil((need - above) / theta), 1.0), ties)));
        }
        floor_w = min(min_p, 1.0);
        // the draw: each invocation walks its own contiguous stretch of ids, starting from the mass of those before it
        uint per = (p.vocab + wg - 1u) / wg, b = min(tid * per, p.vocab), e = min(b + per, p.vocab);
        float m = 0.0;
        uint last = 0u;
        for (uint t = b; t < e; t++) {
            float w = weight(t);
            if (kept(w, t)) m += w, last = t + 1u;
        }
        seg_mass[tid] = m;
        barrier();
        float base = 0.0, total = 0.0;
        for (uint i = 0u; i < wg; i++) {
            if (i < tid) base += seg_mass[i];
            total += seg_mass[i];
        }
        float r = u * total, cum = base;
        uint hit = 0xffffffffu;
        if (base <= r && r < base + m)
            for (uint t = b; t < e; t++) {
                float w = weight(t);
                if (kept(w, t)) {
                    cum += w;
                    if (r < cum) {
                        hit = t;
                        break;
                    }
                }
            }
        hit = workgroup_min_uint(hit);
        // rounding can leave r at or past the last running sum: the last kept id, as on the CPU
        token = hit != 0xffffffffu ? hit : 0xffffffffu - workgroup_min_uint(0xffffffffu - (last > 0u ? last - 1u : 0u));
    }
    if (tid == 0u) {
        Floats o = Floats(p.out_);
        o.v[2u * j] = uintBitsToFloat(token);
        o.v[2u * j + 1u] = token != 0xffffffffu ? z.v[token] - mx - lse : 0.0;
    }
}
