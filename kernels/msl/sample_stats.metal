#pragma clang diagnostic ignored "-Wmissing-prototypes"

#include <metal_stdlib>
#include <simd/simd.h>

using namespace metal;

struct Floats;
struct Addrs;

constant uint _155_tmp [[function_constant(0)]];
constant uint _155 = is_function_constant_defined(_155_tmp) ? _155_tmp : 1u;
constant uint3 gl_WorkGroupSize [[maybe_unused]] = uint3(_155, 1u, 1u);

struct P
{
    ulong rows;
    ulong stats;
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
float workgroup_max(thread float& v, threadgroup float (&wg_red)[256], thread uint& gl_SubgroupID, thread uint& gl_NumSubgroups)
{
    v = simd_max(v);
    bool _70 = simd_is_first();
    if (_70)
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
    bool _116 = simd_is_first();
    if (_116)
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
    bool _28 = simd_is_first();
    if (_28)
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
    float best = as_type<float>(0xff800000u /* -inf */);
    uint arg = 4294967295u;
    for (uint t = tid; t < p.vocab; t += wg)
    {
        bool _205 = arg == 4294967295u;
        bool _216;
        if (!_205)
        {
            _216 = z->v[t] > best;
        }
        else
        {
            _216 = _205;
        }
        if (_216)
        {
            best = z->v[t];
            arg = t;
        }
    }
    float param = best;
    float _230 = workgroup_max(param, wg_red, gl_SubgroupID, gl_NumSubgroups);
    float mx = _230;
    uint param_1 = (best == mx) ? arg : 4294967295u;
    uint _238 = workgroup_min_uint(param_1, gl_SubgroupID, gl_NumSubgroups, wg_red_u);
    uint a = _238;
    float s = 0.0;
    for (uint t_1 = tid; t_1 < p.vocab; t_1 += wg)
    {
        s += exp(z->v[t_1] - mx);
    }
    float param_2 = s;
    float _265 = workgroup_sum(param_2, wg_red, gl_SubgroupID, gl_NumSubgroups);
    s = _265;
    if (tid == 0u)
    {
        device Floats* st = reinterpret_cast<device Floats*>(p.stats);
        st->v[3u * j] = as_type<float>(a);
        st->v[(3u * j) + 1u] = mx;
        st->v[(3u * j) + 2u] = s;
    }
}

