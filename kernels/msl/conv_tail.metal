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

constant uint _30_tmp [[function_constant(0)]];
constant uint _30 = is_function_constant_defined(_30_tmp) ? _30_tmp : 1u;
constant uint3 gl_WorkGroupSize [[maybe_unused]] = uint3(_30, 1u, 1u);

struct P
{
    ulong y;
    ulong x;
    ulong w;
    ulong tail;
    uint n;
    uint channels;
    uint kernel0;
    uint updated;
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

kernel void splash_conv_tail(constant P& p [[buffer(0)]], uint3 gl_WorkGroupID [[threadgroup_position_in_grid]], uint3 gl_NumWorkGroups [[threadgroups_per_grid]], uint3 gl_LocalInvocationID [[thread_position_in_threadgroup]])
{
    threadgroup float wg_red[256];
    threadgroup uint wg_red_u[256];
    uint c = (flat_group(gl_WorkGroupID, gl_NumWorkGroups) * gl_WorkGroupSize.x) + gl_LocalInvocationID.x;
    if (c >= p.updated)
    {
        return;
    }
    device Floats* y = reinterpret_cast<device Floats*>(p.y);
    device Floats* x = reinterpret_cast<device Floats*>(p.x);
    device Floats* w = reinterpret_cast<device Floats*>(p.w);
    device Floats* tail = reinterpret_cast<device Floats*>(p.tail);
    uint K = p.kernel0;
    uint C = p.channels;
    spvUnsafeArray<float, 16> win;
    for (uint j = 0u; (j + 1u) < K; j++)
    {
        win[j] = tail->v[(j * C) + c];
    }
    for (uint t = 0u; t < p.n; t++)
    {
        win[K - 1u] = x->v[(t * C) + c];
        for (uint j_1 = 0u; (j_1 + 1u) < K; j_1++)
        {
            win[j_1] = win[j_1 + 1u];
        }
    }
    for (uint j_2 = 0u; (j_2 + 1u) < K; j_2++)
    {
        tail->v[(j_2 * C) + c] = win[j_2];
    }
}

