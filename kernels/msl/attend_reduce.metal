#pragma clang diagnostic ignored "-Wmissing-prototypes"

#include <metal_stdlib>
#include <simd/simd.h>

using namespace metal;

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
    ulong src2;
};

struct Floats
{
    float v[1];
};

constant uint HD_tmp [[function_constant(1)]];
constant uint HD = is_function_constant_defined(HD_tmp) ? HD_tmp : 128u;
constant uint _66 = (HD + 2u);
constant uint _90 = (HD + 2u);
constant uint _115 = (HD + 2u);
constant uint _130 = (HD + 2u);
constant uint _166 = (HD + 2u);
constant uint _181 = (HD + 2u);
constant uint _203_tmp [[function_constant(0)]];
constant uint _203 = is_function_constant_defined(_203_tmp) ? _203_tmp : 1u;
constant uint3 gl_WorkGroupSize [[maybe_unused]] = uint3(_203, 1u, 1u);

static inline __attribute__((always_inline))
uint flat_group(thread uint3& gl_WorkGroupID, thread uint3& gl_NumWorkGroups)
{
    return gl_WorkGroupID.x + (gl_WorkGroupID.y * gl_NumWorkGroups.x);
}

kernel void splash_attend_reduce(constant P& p [[buffer(0)]], uint3 gl_WorkGroupID [[threadgroup_position_in_grid]], uint3 gl_NumWorkGroups [[threadgroups_per_grid]], uint3 gl_LocalInvocationID [[thread_position_in_threadgroup]])
{
    threadgroup float wg_red[256];
    threadgroup uint wg_red_u[256];
    uint base = flat_group(gl_WorkGroupID, gl_NumWorkGroups);
    if (base >= (p.n * p.heads))
    {
        return;
    }
    device Floats* part = reinterpret_cast<device Floats*>(p.part + (ulong((base * p.n_splits) * _66) * 4ul));
    float M = as_type<float>(0xff800000u /* -inf */);
    for (uint s = 0u; s < p.n_splits; s++)
    {
        M = fast::max(M, part->v[(s * _90) + HD]);
    }
    float l = 0.0;
    for (uint s_1 = 0u; s_1 < p.n_splits; s_1++)
    {
        float m = part->v[(s_1 * _115) + HD];
        if (m != as_type<float>(0xff800000u /* -inf */))
        {
            l += (exp(m - M) * part->v[((s_1 * _130) + HD) + 1u]);
        }
    }
    for (uint d = gl_LocalInvocationID.x; d < HD; d += gl_WorkGroupSize.x)
    {
        float o = 0.0;
        for (uint s_2 = 0u; s_2 < p.n_splits; s_2++)
        {
            float m_1 = part->v[(s_2 * _166) + HD];
            if (m_1 != as_type<float>(0xff800000u /* -inf */))
            {
                o += (exp(m_1 - M) * part->v[(s_2 * _181) + d]);
            }
        }
        (reinterpret_cast<device Floats*>(p.dst))->v[(base * HD) + d] = o / l;
    }
}

