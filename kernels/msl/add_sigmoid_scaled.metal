#pragma clang diagnostic ignored "-Wmissing-prototypes"

#include <metal_stdlib>
#include <simd/simd.h>

using namespace metal;

struct Floats;

constant uint _44_tmp [[function_constant(0)]];
constant uint _44 = is_function_constant_defined(_44_tmp) ? _44_tmp : 1u;
constant uint3 gl_WorkGroupSize [[maybe_unused]] = uint3(_44, 1u, 1u);

struct P
{
    ulong y;
    ulong x;
    ulong g;
    uint n;
    uint d;
    uint x_stride;
    uint y_stride;
};

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
float sigmoid(thread const float& x)
{
    return 1.0 / (1.0 + exp(-x));
}

kernel void splash_add_sigmoid_scaled(constant P& p [[buffer(0)]], uint3 gl_WorkGroupID [[threadgroup_position_in_grid]], uint3 gl_NumWorkGroups [[threadgroups_per_grid]], uint3 gl_LocalInvocationID [[thread_position_in_threadgroup]])
{
    threadgroup float wg_red[256];
    threadgroup uint wg_red_u[256];
    uint i = (flat_group(gl_WorkGroupID, gl_NumWorkGroups) * gl_WorkGroupSize.x) + gl_LocalInvocationID.x;
    if (i >= p.n)
    {
        return;
    }
    device Floats* y = reinterpret_cast<device Floats*>(p.y);
    device Floats* x = reinterpret_cast<device Floats*>(p.x);
    device Floats* g = reinterpret_cast<device Floats*>(p.g);
    float param = g->v[i / p.d];
    y->v[i] += (sigmoid(param) * x->v[i]);
}

