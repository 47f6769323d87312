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

constant uint _188_tmp [[function_constant(0)]];
constant uint _188 = is_function_constant_defined(_188_tmp) ? _188_tmp : 1u;
constant uint3 gl_WorkGroupSize [[maybe_unused]] = uint3(_188, 1u, 1u);

struct P
{
    ulong rows;
    ulong stats;
    ulong masks;
    uint n;
    uint vocab;
};

struct Floats
{
    float v[1];
};

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
    bool _157 = mask == 0ul;
    bool _178;
    if (!_157)
    {
        _178 = (((reinterpret_cast<device Uints*>(mask))->v[t >> uint(5)] >> (t & 31u)) & 1u) != 0u;
    }
    else
    {
        _178 = _157;
    }
    return _178;
}

static inline __attribute__((always_inline))
float workgroup_max(thread float& v, threadgroup float (&wg_red)[256], thread uint& gl_SubgroupID, thread uint& gl_NumSubgroups)
{
    v = simd_max(v);
    bool _77 = simd_is_first();
    if (_77)
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
    bool _123 = simd_is_first();
    if (_123)
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
    bool _35 = simd_is_first();
    if (_35)
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

kernel void splash_sample_stats(constant P& p [[buffer(0)]], uint gl_SubgroupID [[simdgroup_index_in_threadgroup]], uint gl_NumSubgroups [[simdgroups_per_threadgroup]], uint3 gl_WorkGroupID [[threadgroup_position_in_grid]], uint3 gl_NumWorkGroups [[threadgroups_per_grid]], uint3 gl_LocalInvocationID [[thread_position_in_threadgroup]])
{
    threadgroup float wg_red[256];
    threadgroup uint wg_red_u[256];
    uint j = flat_group(gl_WorkGroupID, gl_NumWorkGroups);
    uint tid = gl_LocalInvocationID.x;
    uint wg = gl_WorkGroupSize.x;
    if (j >= p.n)
    {
        return;
    }
    device Floats* z = reinterpret_cast<device Floats*>((reinterpret_cast<device Addrs*>(p.rows))->v[j]);
    ulong allowed = (reinterpret_cast<device Addrs*>(p.masks))->v[2u * j];
    ulong tokens = (reinterpret_cast<device Addrs*>(p.masks))->v[(2u * j) + 1u];
    float best = as_type<float>(0xff800000u /* -inf */);
    uint arg = 4294967295u;
    for (uint t = tid; t < p.vocab; t += wg)
    {
        ulong param = allowed;
        uint param_1 = t;
        bool _258 = bit_set(param, param_1);
        bool _266;
        if (_258)
        {
            ulong param_2 = tokens;
            uint param_3 = t;
            _266 = bit_set(param_2, param_3);
        }
        else
        {
            _266 = _258;
        }
        bool _282;
        if (_266)
        {
            bool _270 = arg == 4294967295u;
            bool _281;
            if (!_270)
            {
                _281 = z->v[t] > best;
            }
            else
            {
                _281 = _270;
            }
            _282 = _281;
        }
        else
        {
            _282 = _266;
        }
        if (_282)
        {
            best = z->v[t];
            arg = t;
        }
    }
    float param_4 = best;
    float _296 = workgroup_max(param_4, wg_red, gl_SubgroupID, gl_NumSubgroups);
    float mx = _296;
    uint param_5 = (best == mx) ? arg : 4294967295u;
    uint _304 = workgroup_min_uint(param_5, gl_SubgroupID, gl_NumSubgroups, wg_red_u);
    uint a = _304;
    float s = 0.0;
    for (uint t_1 = tid; t_1 < p.vocab; t_1 += wg)
    {
        ulong param_6 = allowed;
        uint param_7 = t_1;
        bool _321 = bit_set(param_6, param_7);
        bool _329;
        if (_321)
        {
            ulong param_8 = tokens;
            uint param_9 = t_1;
            _329 = bit_set(param_8, param_9);
        }
        else
        {
            _329 = _321;
        }
        if (_329)
        {
            s += exp(z->v[t_1] - mx);
        }
    }
    float param_10 = s;
    float _346 = workgroup_sum(param_10, wg_red, gl_SubgroupID, gl_NumSubgroups);
    s = _346;
    if (tid == 0u)
    {
        device Floats* st = reinterpret_cast<device Floats*>(p.stats);
        st->v[3u * j] = as_type<float>(a);
        st->v[(3u * j) + 1u] = mx;
        st->v[(3u * j) + 2u] = s;
    }
}

