#pragma clang diagnostic ignored "-Wmissing-prototypes"

#include <metal_stdlib>
#include <simd/simd.h>

using namespace metal;

struct Floats;

struct P
{
    ulong y;
    ulong x;
    ulong z;
    ulong w;
    uint rows;
    uint d;
    float eps;
};

constant uint _96_tmp [[function_constant(0)]];
constant uint _96 = is_function_constant_defined(_96_tmp) ? _96_tmp : 1u;
constant uint3 gl_WorkGroupSize [[maybe_unused]] = uint3(_96, 1u, 1u);

struct Floats
{
    float v[1];
};

static inline __attribute__((always_inline))
uint flat_group(thread uint3& gl_WorkGroupID, thread uint3& gl_NumWorkGroups)
{
    return gl_WorkGroupID.x + (gl_WorkGroupID.y * gl_NumWorkGroups.x);
}

static inline __attribute__((always_inline))
float workgroup_sum(thread float& v, threadgroup float (&wg_red)[256], thread uint& gl_SubgroupID, thread uint& gl_NumSubgroups)
{
    v = simd_sum(v);
    bool _20 = simd_is_first();
    if (_20)
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

kernel void splash_add_rmsnorm(constant P& p [[buffer(0)]], uint gl_SubgroupID [[simdgroup_index_in_threadgroup]], uint gl_NumSubgroups [[simdgroups_per_threadgroup]], uint3 gl_WorkGroupID [[threadgroup_position_in_grid]], uint3 gl_NumWorkGroups [[threadgroups_per_grid]], uint3 gl_LocalInvocationID [[thread_position_in_threadgroup]])
{
    threadgroup float wg_red[256];
    threadgroup uint wg_red_u[256];
    uint row = flat_group(gl_WorkGroupID, gl_NumWorkGroups);
    if (row >= p.rows)
    {
        return;
    }
    uint tid = gl_LocalInvocationID.x;
    uint wg = gl_WorkGroupSize.x;
    device Floats* x = reinterpret_cast<device Floats*>(p.x + ((ulong(row) * ulong(p.d)) * 4ul));
    device Floats* y = reinterpret_cast<device Floats*>(p.y + ((ulong(row) * ulong(p.d)) * 4ul));
    device Floats* w = reinterpret_cast<device Floats*>(p.w);
    float ss = 0.0;
    device Floats* res = reinterpret_cast<device Floats*>(p.z + ((ulong(row) * ulong(p.d)) * 4ul));
    for (uint j = tid; j < p.d; j += wg)
    {
        float v = x->v[j] + res->v[j];
        x->v[j] = v;
        ss += (v * v);
    }
    float param = ss;
    float _187 = workgroup_sum(param, wg_red, gl_SubgroupID, gl_NumSubgroups);
    float r = rsqrt((_187 / float(p.d)) + p.eps);
    for (uint j_1 = tid; j_1 < p.d; j_1 += wg)
    {
        y->v[j_1] = (x->v[j_1] * r) * w->v[j_1];
    }
}

