#pragma clang diagnostic ignored "-Wmissing-prototypes"
#pragma clang diagnostic ignored "-Wmissing-braces"

#include <metal_stdlib>
#include <simd/simd.h>

using namespace metal;

template<typename T, size_t Num>
struct spvUnsafeArray
{
    T elements[Num ? Num : 1];
    
    thread T& operator [] (size_t pos) thread
    {
        return elements[pos];
    }
    constexpr const thread T& operator [] (size_t pos) const thread
    {
        return elements[pos];
    }
    
    device T& operator [] (size_t pos) device
    {
        return elements[pos];
    }
    constexpr const device T& operator [] (size_t pos) const device
    {
        return elements[pos];
    }
    
    constexpr const constant T& operator [] (size_t pos) const constant
    {
        return elements[pos];
    }
    
    threadgroup T& operator [] (size_t pos) threadgroup
    {
        return elements[pos];
    }
    constexpr const threadgroup T& operator [] (size_t pos) const threadgroup
    {
        return elements[pos];
    }
};

struct Floats;
struct Ints;

constant uint _155_tmp [[function_constant(0)]];
constant uint _155 = is_function_constant_defined(_155_tmp) ? _155_tmp : 1u;
constant uint3 gl_WorkGroupSize [[maybe_unused]] = uint3(_155, 1u, 1u);

struct P
{
    ulong ids;
    ulong w;
    ulong src;
    ulong dst;
    ulong plan;
    ulong shared_y;
    ulong shared_gate;
    uint n;
    uint n_experts;
    uint top_k;
    uint d;
    uint down_blocks;
    uint max_tiles;
    uint tile;
};

struct Floats
{
    float v[1];
};

struct Ints
{
    int v[1];
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

kernel void splash_moe_route(constant P& p [[buffer(0)]], uint gl_SubgroupID [[simdgroup_index_in_threadgroup]], uint gl_NumSubgroups [[simdgroups_per_threadgroup]], uint3 gl_WorkGroupID [[threadgroup_position_in_grid]], uint3 gl_NumWorkGroups [[threadgroups_per_grid]], uint3 gl_LocalInvocationID [[thread_position_in_threadgroup]])
{
    threadgroup float wg_red[256];
    threadgroup uint wg_red_u[256];
    threadgroup uint chosen[64];
    uint t = flat_group(gl_WorkGroupID, gl_NumWorkGroups);
    uint tid = gl_LocalInvocationID.x;
    uint wg = gl_WorkGroupSize.x;
    if (t >= p.n)
    {
        return;
    }
    device Floats* l = reinterpret_cast<device Floats*>(p.src + (ulong(t * p.n_experts) * 4ul));
    float mx = as_type<float>(0xff800000u /* -inf */);
    for (uint e = tid; e < p.n_experts; e += wg)
    {
        mx = fast::max(mx, l->v[e]);
    }
    float param = mx;
    float _215 = workgroup_max(param, wg_red, gl_SubgroupID, gl_NumSubgroups);
    mx = _215;
    float sum = 0.0;
    for (uint e_1 = tid; e_1 < p.n_experts; e_1 += wg)
    {
        sum += exp(l->v[e_1] - mx);
    }
    float param_1 = sum;
    float _242 = workgroup_sum(param_1, wg_red, gl_SubgroupID, gl_NumSubgroups);
    sum = _242;
    for (uint j = 0u; j < p.top_k; j++)
    {
        float best = as_type<float>(0xff800000u /* -inf */);
        uint arg = 4294967295u;
        for (uint e_2 = tid; e_2 < p.n_experts; e_2 += wg)
        {
            bool taken = false;
            for (uint q = 0u; q < j; q++)
            {
                bool _293;
                if (!taken)
                {
                    _293 = chosen[q] == e_2;
                }
                else
                {
                    _293 = taken;
                }
                taken = _293;
            }
            bool _297 = !taken;
            bool _312;
            if (_297)
            {
                bool _301 = arg == 4294967295u;
                bool _311;
                if (!_301)
                {
                    _311 = l->v[e_2] > best;
                }
                else
                {
                    _311 = _301;
                }
                _312 = _311;
            }
            else
            {
                _312 = _297;
            }
            if (_312)
            {
                best = l->v[e_2];
                arg = e_2;
            }
        }
        float param_2 = (arg == 4294967295u) ? as_type<float>(0xff800000u /* -inf */) : best;
        float _329 = workgroup_max(param_2, wg_red, gl_SubgroupID, gl_NumSubgroups);
        float top = _329;
        uint param_3 = ((arg != 4294967295u) && (best == top)) ? arg : 4294967295u;
        uint _340 = workgroup_min_uint(param_3, gl_SubgroupID, gl_NumSubgroups, wg_red_u);
        uint e_3 = _340;
        if (tid == 0u)
        {
            chosen[j] = e_3;
        }
        threadgroup_barrier(mem_flags::mem_threadgroup);
    }
    if (tid == 0u)
    {
        float s = 0.0;
        spvUnsafeArray<float, 64> wj;
        for (uint j_1 = 0u; j_1 < p.top_k; j_1++)
        {
            wj[j_1] = exp(l->v[chosen[j_1]] - mx) / sum;
            s += wj[j_1];
        }
        for (uint j_2 = 0u; j_2 < p.top_k; j_2++)
        {
            (reinterpret_cast<device Ints*>(p.ids))->v[(t * p.top_k) + j_2] = int(chosen[j_2]);
            (reinterpret_cast<device Floats*>(p.w))->v[(t * p.top_k) + j_2] = wj[j_2] / s;
        }
    }
}

