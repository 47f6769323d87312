#pragma clang diagnostic ignored "-Wmissing-prototypes"

#include <metal_stdlib>
#include <simd/simd.h>

using namespace metal;

struct Uints;
struct Floats;
struct Addrs;

struct Uints
{
    uint v[1];
};

struct Floats
{
    float v[1];
};

struct P
{
    ulong rows;
    ulong out_;
    ulong masks;
    ulong params;
    uint n;
    uint vocab;
};

constant uint _336_tmp [[function_constant(0)]];
constant uint _336 = is_function_constant_defined(_336_tmp) ? _336_tmp : 1u;
constant uint3 gl_WorkGroupSize [[maybe_unused]] = uint3(_336, 1u, 1u);

struct Addrs
{
    ulong v[1];
};

static inline __attribute__((always_inline))
uint flat_group(thread uint3& gl_WorkGroupID, thread uint3& gl_NumWorkGroups)
{
    return gl_WorkGroupID.x + (gl_WorkGroupID.y * gl_NumWorkGroups.x);
}

static inline __attribute__((always_inline))
bool bit_set(thread const ulong& mask, thread const uint& t)
{
    bool _192 = mask == 0ul;
    bool _213;
    if (!_192)
    {
        _213 = (((reinterpret_cast<device Uints*>(mask))->v[t >> uint(5)] >> (t & 31u)) & 1u) != 0u;
    }
    else
    {
        _213 = _192;
    }
    return _213;
}

static inline __attribute__((always_inline))
bool may(thread const uint& t, thread ulong& allowed, thread ulong& tokens)
{
    ulong param = allowed;
    uint param_1 = t;
    bool _222 = bit_set(param, param_1);
    bool _231;
    if (_222)
    {
        ulong param_2 = tokens;
        uint param_3 = t;
        _231 = bit_set(param_2, param_3);
    }
    else
    {
        _231 = _222;
    }
    return _231;
}

static inline __attribute__((always_inline))
float workgroup_max(thread float& v, threadgroup float (&wg_red)[256], thread uint& gl_SubgroupID, thread uint& gl_NumSubgroups)
{
    v = simd_max(v);
    bool _112 = simd_is_first();
    if (_112)
    {
        wg_red[gl_SubgroupID] = v;
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    float s = wg_red[0];
    for (uint i = 1u; i < gl_NumSubgroups; i++)
    {
        s = fast::max(s, wg_red[i]);
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    return s;
}

static inline __attribute__((always_inline))
uint workgroup_min_uint(thread uint& v, thread uint& gl_SubgroupID, thread uint& gl_NumSubgroups, threadgroup uint (&wg_red_u)[256])
{
    v = simd_min(v);
    bool _158 = simd_is_first();
    if (_158)
    {
        wg_red_u[gl_SubgroupID] = v;
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    uint s = wg_red_u[0];
    for (uint i = 1u; i < gl_NumSubgroups; i++)
    {
        s = min(s, wg_red_u[i]);
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    return s;
}

static inline __attribute__((always_inline))
float workgroup_sum(thread float& v, threadgroup float (&wg_red)[256], thread uint& gl_SubgroupID, thread uint& gl_NumSubgroups)
{
    v = simd_sum(v);
    bool _72 = simd_is_first();
    if (_72)
    {
        wg_red[gl_SubgroupID] = v;
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    float s = 0.0;
    for (uint i = 0u; i < gl_NumSubgroups; i++)
    {
        s += wg_red[i];
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    return s;
}

static inline __attribute__((always_inline))
float weight(thread const uint& t, thread ulong& allowed, thread ulong& tokens, device Floats* thread & z, thread float& mx, thread float& inv_t)
{
    uint param = t;
    float _237;
    if (may(param, allowed, tokens))
    {
        _237 = exp((z->v[t] - mx) * inv_t);
    }
    else
    {
        _237 = 0.0;
    }
    return _237;
}

static inline __attribute__((always_inline))
bool kept(thread const float& w, thread const uint& t, thread float& th, thread float& floor_w, thread uint& cut)
{
    bool _262 = w > 0.0;
    bool _279;
    if (_262)
    {
        bool _267 = w > th;
        bool _278;
        if (!_267)
        {
            _278 = (w == th) && (t <= cut);
        }
        else
        {
            _278 = _267;
        }
        _279 = _278;
    }
    else
    {
        _279 = _262;
    }
    return _279 && (w >= floor_w);
}

static inline __attribute__((always_inline))
float over(thread const float& theta, thread const bool& strict, thread const bool& mass, thread float& th, thread float& floor_w, thread uint& cut, threadgroup float (&wg_red)[256], thread uint& gl_SubgroupID, thread uint& gl_NumSubgroups, thread ulong& allowed, thread ulong& tokens, device Floats* thread & z, thread float& mx, thread float& inv_t, thread uint3& gl_LocalInvocationID, constant P& p)
{
    float s = 0.0;
    bool _316;
    for (uint t = gl_LocalInvocationID.x; t < p.vocab; t += gl_WorkGroupSize.x)
    {
        uint param = t;
        float w = weight(param, allowed, tokens, z, mx, inv_t);
        float param_1 = w;
        uint param_2 = t;
        bool _312 = kept(param_1, param_2, th, floor_w, cut);
        bool _327;
        if (_312)
        {
            if (strict)
            {
                _316 = w > theta;
            }
            else
            {
                _316 = w >= theta;
            }
            _327 = _316;
        }
        else
        {
            _327 = _312;
        }
        if (_327)
        {
            s += (mass ? w : 1.0);
        }
    }
    float param_3 = s;
    float _343 = workgroup_sum(param_3, wg_red, gl_SubgroupID, gl_NumSubgroups);
    return _343;
}

static inline __attribute__((always_inline))
float search_weight(thread const float& need, thread const bool& mass, thread float& th, thread float& floor_w, thread uint& cut, threadgroup float (&wg_red)[256], thread uint& gl_SubgroupID, thread uint& gl_NumSubgroups, thread ulong& allowed, thread ulong& tokens, device Floats* thread & z, thread float& mx, thread float& inv_t, thread uint3& gl_LocalInvocationID, constant P& p)
{
    uint lo = 1u;
    uint hi = as_type<uint>(1.0);
    while (lo < hi)
    {
        uint mid = lo + (((hi - lo) + 1u) / 2u);
        float param = as_type<float>(mid);
        bool param_1 = false;
        bool param_2 = mass;
        float _372 = over(param, param_1, param_2, th, floor_w, cut, wg_red, gl_SubgroupID, gl_NumSubgroups, allowed, tokens, z, mx, inv_t, gl_LocalInvocationID, p);
        if (_372 >= need)
        {
            lo = mid;
        }
        else
        {
            hi = mid - 1u;
        }
    }
    return as_type<float>(lo);
}

static inline __attribute__((always_inline))
void keep_prefix(thread const float& theta, thread const uint& m, thread float& th, thread float& floor_w, thread uint& cut, threadgroup float (&wg_red)[256], thread uint& gl_SubgroupID, thread uint& gl_NumSubgroups, thread ulong& allowed, thread ulong& tokens, device Floats* thread & z, thread float& mx, thread float& inv_t, thread uint3& gl_LocalInvocationID, constant P& p)
{
    uint lo = 0u;
    uint hi = p.vocab - 1u;
    while (lo < hi)
    {
        uint mid = (lo + hi) / 2u;
        float c = 0.0;
        for (uint t = gl_LocalInvocationID.x; t <= mid; t += gl_WorkGroupSize.x)
        {
            uint param = t;
            float w = weight(param, allowed, tokens, z, mx, inv_t);
            float param_1 = w;
            uint param_2 = t;
            if (kept(param_1, param_2, th, floor_w, cut) && (w == theta))
            {
                c += 1.0;
            }
        }
        float param_3 = c;
        float _437 = workgroup_sum(param_3, wg_red, gl_SubgroupID, gl_NumSubgroups);
        if (_437 >= float(m))
        {
            hi = mid;
        }
        else
        {
            lo = mid + 1u;
        }
    }
    th = theta;
    cut = lo;
}

kernel void splash_sample(constant P& p [[buffer(0)]], uint gl_SubgroupID [[simdgroup_index_in_threadgroup]], uint gl_NumSubgroups [[simdgroups_per_threadgroup]], uint3 gl_WorkGroupID [[threadgroup_position_in_grid]], uint3 gl_NumWorkGroups [[threadgroups_per_grid]], uint3 gl_LocalInvocationID [[thread_position_in_threadgroup]])
{
    threadgroup float wg_red[256];
    threadgroup uint wg_red_u[256];
    threadgroup float seg_mass[256];
    float th = 0.0;
    float floor_w = 0.0;
    uint cut = 0u;
    uint j = flat_group(gl_WorkGroupID, gl_NumWorkGroups);
    uint tid = gl_LocalInvocationID.x;
    uint wg = gl_WorkGroupSize.x;
    ulong allowed;
    ulong tokens;
    device Floats* z;
    float mx;
    float inv_t;
    if (j >= p.n)
    {
        return;
    }
    z = reinterpret_cast<device Floats*>((reinterpret_cast<device Addrs*>(p.rows))->v[j]);
    allowed = (reinterpret_cast<device Addrs*>(p.masks))->v[2u * j];
    tokens = (reinterpret_cast<device Addrs*>(p.masks))->v[(2u * j) + 1u];
    device Floats* prm = reinterpret_cast<device Floats*>(p.params + (32ul * ulong(j)));
    float temperature = prm->v[0];
    float top_p = prm->v[1];
    float min_p = prm->v[2];
    float u = prm->v[3];
    uint top_k = as_type<uint>(prm->v[4]);
    float best = as_type<float>(0xff800000u /* -inf */);
    uint arg = 4294967295u;
    for (uint t = tid; t < p.vocab; t += wg)
    {
        uint param = t;
        bool _541 = may(param, allowed, tokens);
        bool _556;
        if (_541)
        {
            bool _545 = arg == 4294967295u;
            bool _555;
            if (!_545)
            {
                _555 = z->v[t] > best;
            }
            else
            {
                _555 = _545;
            }
            _556 = _555;
        }
        else
        {
            _556 = _541;
        }
        if (_556)
        {
            best = z->v[t];
            arg = t;
        }
    }
    float param_1 = best;
    float _569 = workgroup_max(param_1, wg_red, gl_SubgroupID, gl_NumSubgroups);
    mx = _569;
    uint param_2 = (best == mx) ? arg : 4294967295u;
    uint _577 = workgroup_min_uint(param_2, gl_SubgroupID, gl_NumSubgroups, wg_red_u);
    uint token = _577;
    float s = 0.0;
    for (uint t_1 = tid; t_1 < p.vocab; t_1 += wg)
    {
        uint param_3 = t_1;
        if (may(param_3, allowed, tokens))
        {
            s += exp(z->v[t_1] - mx);
        }
    }
    float param_4 = s;
    float _610 = workgroup_sum(param_4, wg_red, gl_SubgroupID, gl_NumSubgroups);
    float lse = log(_610);
    if ((temperature > 0.0) && (token != 4294967295u))
    {
        inv_t = 1.0 / temperature;
        if (top_k > 0u)
        {
            float param_5 = 0.0;
            bool param_6 = true;
            bool param_7 = false;
            float _630 = over(param_5, param_6, param_7, th, floor_w, cut, wg_red, gl_SubgroupID, gl_NumSubgroups, allowed, tokens, z, mx, inv_t, gl_LocalInvocationID, p);
            float n = _630;
            if (float(top_k) < n)
            {
                float param_8 = float(top_k);
                bool param_9 = false;
                float _642 = search_weight(param_8, param_9, th, floor_w, cut, wg_red, gl_SubgroupID, gl_NumSubgroups, allowed, tokens, z, mx, inv_t, gl_LocalInvocationID, p);
                float theta = _642;
                float param_10 = theta;
                bool param_11 = true;
                bool param_12 = false;
                float _648 = over(param_10, param_11, param_12, th, floor_w, cut, wg_red, gl_SubgroupID, gl_NumSubgroups, allowed, tokens, z, mx, inv_t, gl_LocalInvocationID, p);
                float param_13 = theta;
                uint param_14 = top_k - uint(_648);
                keep_prefix(param_13, param_14, th, floor_w, cut, wg_red, gl_SubgroupID, gl_NumSubgroups, allowed, tokens, z, mx, inv_t, gl_LocalInvocationID, p);
            }
        }
        if (top_p < 1.0)
        {
            float param_15 = 0.0;
            bool param_16 = true;
            bool param_17 = true;
            float _664 = over(param_15, param_16, param_17, th, floor_w, cut, wg_red, gl_SubgroupID, gl_NumSubgroups, allowed, tokens, z, mx, inv_t, gl_LocalInvocationID, p);
            float need = top_p * _664;
            float param_18 = need;
            bool param_19 = true;
            float _670 = search_weight(param_18, param_19, th, floor_w, cut, wg_red, gl_SubgroupID, gl_NumSubgroups, allowed, tokens, z, mx, inv_t, gl_LocalInvocationID, p);
            float theta_1 = _670;
            float param_20 = theta_1;
            bool param_21 = true;
            bool param_22 = true;
            float _676 = over(param_20, param_21, param_22, th, floor_w, cut, wg_red, gl_SubgroupID, gl_NumSubgroups, allowed, tokens, z, mx, inv_t, gl_LocalInvocationID, p);
            float above = _676;
            float param_23 = theta_1;
            bool param_24 = false;
            bool param_25 = false;
            float _682 = over(param_23, param_24, param_25, th, floor_w, cut, wg_red, gl_SubgroupID, gl_NumSubgroups, allowed, tokens, z, mx, inv_t, gl_LocalInvocationID, p);
            float param_26 = theta_1;
            bool param_27 = true;
            bool param_28 = false;
            float _687 = over(param_26, param_27, param_28, th, floor_w, cut, wg_red, gl_SubgroupID, gl_NumSubgroups, allowed, tokens, z, mx, inv_t, gl_LocalInvocationID, p);
            float ties = _682 - _687;
            float param_29 = theta_1;
            uint param_30 = uint(fast::min(fast::max(ceil((need - above) / theta_1), 1.0), ties));
            keep_prefix(param_29, param_30, th, floor_w, cut, wg_red, gl_SubgroupID, gl_NumSubgroups, allowed, tokens, z, mx, inv_t, gl_LocalInvocationID, p);
        }
        floor_w = fast::min(min_p, 1.0);
        uint per = ((p.vocab + wg) - 1u) / wg;
        uint b = min((tid * per), p.vocab);
        uint e = min((b + per), p.vocab);
        float m = 0.0;
        uint last = 0u;
        for (uint t_2 = b; t_2 < e; t_2++)
        {
            uint param_31 = t_2;
            float w = weight(param_31, allowed, tokens, z, mx, inv_t);
            float param_32 = w;
            uint param_33 = t_2;
            if (kept(param_32, param_33, th, floor_w, cut))
            {
                m += w;
                last = t_2 + 1u;
            }
        }
        seg_mass[tid] = m;
        threadgroup_barrier(mem_flags::mem_threadgroup);
        float base = 0.0;
        float total = 0.0;
        for (uint i = 0u; i < wg; i++)
        {
            if (i < tid)
            {
                base += seg_mass[i];
            }
            total += seg_mass[i];
        }
        float r = u * total;
        float cum = base;
        uint hit = 4294967295u;
        bool _798 = base <= r;
        bool _806;
        if (_798)
        {
            _806 = r < (base + m);
        }
        else
        {
            _806 = _798;
        }
        if (_806)
        {
            for (uint t_3 = b; t_3 < e; t_3++)
            {
                uint param_34 = t_3;
                float w_1 = weight(param_34, allowed, tokens, z, mx, inv_t);
                float param_35 = w_1;
                uint param_36 = t_3;
                if (kept(param_35, param_36, th, floor_w, cut))
                {
                    cum += w_1;
                    if (r < cum)
                    {
                        hit = t_3;
                        break;
                    }
                }
            }
        }
        uint param_37 = hit;
        uint _844 = workgroup_min_uint(param_37, gl_SubgroupID, gl_NumSubgroups, wg_red_u);
        hit = _844;
        uint _847;
        if (hit != 4294967295u)
        {
            _847 = hit;
        }
        else
        {
            uint _854;
            if (last > 0u)
            {
                _854 = last - 1u;
            }
            else
            {
                _854 = 0u;
            }
            uint param_38 = 4294967295u - _854;
            uint _863 = workgroup_min_uint(param_38, gl_SubgroupID, gl_NumSubgroups, wg_red_u);
            _847 = 4294967295u - _863;
        }
        token = _847;
    }
    if (tid == 0u)
    {
        device Floats* o = reinterpret_cast<device Floats*>(p.out_);
        o->v[2u * j] = as_type<float>(token);
        float _886;
        if (token != 4294967295u)
        {
            _886 = (z->v[token] - mx) - lse;
        }
        else
        {
            _886 = 0.0;
        }
        o->v[(2u * j) + 1u] = _886;
    }
}

