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

struct P
{
    ulong dst;
    ulong src;
    ulong k;
    ulong v;
    ulong pages;
    ulong part;
    uint n_past;
    uint n;
    uint heads;
    uint kv_heads;
    uint page_tokens;
    uint page_stride;
    uint split_len;
    uint n_splits;
    uint hb;
    uint rt;
    float scale;
    uint kv_type;
    ulong src2;
};

constant uint _113_tmp [[function_constant(0)]];
constant uint _113 = is_function_constant_defined(_113_tmp) ? _113_tmp : 1u;
constant uint3 gl_WorkGroupSize [[maybe_unused]] = uint3(_113, 1u, 1u);

struct Floats
{
    float v[1];
};

constant uint HD_tmp [[function_constant(1)]];
constant uint HD = is_function_constant_defined(HD_tmp) ? HD_tmp : 128u;
constant uint _133 = (HD + 2u);
constant uint _155 = (HD + 2u);
constant uint _182 = (HD + 2u);
constant uint _212 = (HD + 2u);
constant uint _277 = (HD + 2u);
constant uint _322 = (HD + 2u);

static inline __attribute__((always_inline))
uint flat_group(thread uint3& gl_WorkGroupID, thread uint3& gl_NumWorkGroups)
{
    return gl_WorkGroupID.x + (gl_WorkGroupID.y * gl_NumWorkGroups.x);
}

static inline __attribute__((always_inline))
float workgroup_max(thread float& v, threadgroup float (&wg_red)[256], thread uint& gl_SubgroupID, thread uint& gl_NumSubgroups)
{
    v = simd_max(v);
    bool _23 = simd_is_first();
    if (_23)
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
float sigmoid(thread const float& x)
{
    return 1.0 / (1.0 + exp(-x));
}

kernel void splash_attend_reduce(constant P& p [[buffer(0)]], uint gl_SubgroupID [[simdgroup_index_in_threadgroup]], uint gl_NumSubgroups [[simdgroups_per_threadgroup]], uint3 gl_WorkGroupID [[threadgroup_position_in_grid]], uint3 gl_NumWorkGroups [[threadgroups_per_grid]], uint3 gl_LocalInvocationID [[thread_position_in_threadgroup]])
{
    threadgroup float wg_red[256];
    threadgroup float wsplit[1024];
    threadgroup float lsplit[1024];
    threadgroup uint wg_red_u[256];
    uint base = flat_group(gl_WorkGroupID, gl_NumWorkGroups);
    if (base >= (p.n * p.heads))
    {
        return;
    }
    uint tid = gl_LocalInvocationID.x;
    uint WG = gl_WorkGroupSize.x;
    uint ns = p.n_splits;
    device Floats* part = reinterpret_cast<device Floats*>(p.part + (ulong((base * ns) * _133) * 4ul));
    float mx = as_type<float>(0xff800000u /* -inf */);
    for (uint s = tid; s < ns; s += WG)
    {
        mx = fast::max(mx, part->v[(s * _155) + HD]);
    }
    float param = mx;
    float _168 = workgroup_max(param, wg_red, gl_SubgroupID, gl_NumSubgroups);
    float M = _168;
    float _190;
    for (uint s_1 = tid; s_1 < ns; s_1 += WG)
    {
        float m = part->v[(s_1 * _182) + HD];
        if (m != as_type<float>(0xff800000u /* -inf */))
        {
            _190 = exp(m - M);
        }
        else
        {
            _190 = 0.0;
        }
        float w = _190;
        wsplit[s_1] = w;
        lsplit[s_1] = w * part->v[((s_1 * _212) + HD) + 1u];
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    float l = 0.0;
    for (uint s_2 = 0u; s_2 < ns; s_2++)
    {
        l += lsplit[s_2];
    }
    spvUnsafeArray<float, 8> x;
    for (uint d = tid; d < HD; d += WG)
    {
        float o = 0.0;
        uint s_3 = 0u;
        for (; (s_3 + 8u) <= ns; s_3 += 8u)
        {
            for (uint u = 0u; u < 8u; u++)
            {
                x[u] = part->v[((s_3 + u) * _277) + d];
            }
            for (uint u_1 = 0u; u_1 < 8u; u_1++)
            {
                o += (wsplit[s_3 + u_1] * x[u_1]);
            }
        }
        for (; s_3 < ns; s_3++)
        {
            o += (wsplit[s_3] * part->v[(s_3 * _322) + d]);
        }
        float y = o / l;
        if (p.src2 != 0ul)
        {
            float param_1 = (reinterpret_cast<device Floats*>(p.src2))->v[(base * HD) + d];
            y *= sigmoid(param_1);
        }
        (reinterpret_cast<device Floats*>(p.dst))->v[(base * HD) + d] = y;
    }
}

