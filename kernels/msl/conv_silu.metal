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

constant uint _45_tmp [[function_constant(0)]];
constant uint _45 = is_function_constant_defined(_45_tmp) ? _45_tmp : 1u;
constant uint3 gl_WorkGroupSize [[maybe_unused]] = uint3(_45, 1u, 1u);

struct P
{
    ulong y;
    ulong x;
    ulong w;
    ulong tail;
    uint n;
    uint channels;
    uint kernel0;
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
float silu(thread const float& x)
{
    return x / (1.0 + exp(-x));
}

kernel void splash_conv_silu(constant P& p [[buffer(0)]], uint3 gl_WorkGroupID [[threadgroup_position_in_grid]], uint3 gl_NumWorkGroups [[threadgroups_per_grid]], uint3 gl_LocalInvocationID [[thread_position_in_threadgroup]])
{
    threadgroup float wg_red[256];
    threadgroup uint wg_red_u[256];
    uint c = (flat_group(gl_WorkGroupID, gl_NumWorkGroups) * gl_WorkGroupSize.x) + gl_LocalInvocationID.x;
    if (c >= p.channels)
    {
        return;
    }
    device Floats* y = reinterpret_cast<device Floats*>(p.y);
    device Floats* x = reinterpret_cast<device Floats*>(p.x);
    device Floats* w = reinterpret_cast<device Floats*>(p.w);
    device Floats* tail = reinterpret_cast<device Floats*>(p.tail);
    uint K = p.kernel0;
    uint C = p.channels;
    spvUnsafeArray<float, 16> wk;
    for (uint j = 0u; j < K; j++)
    {
        wk[j] = w->v[(c * K) + j];
    }
    spvUnsafeArray<float, 16> win;
    for (uint j_1 = 0u; (j_1 + 1u) < K; j_1++)
    {
        win[j_1] = tail->v[(j_1 * C) + c];
    }
    for (uint t = 0u; t < p.n; t++)
    {
        win[K - 1u] = x->v[(t * C) + c];
        float acc = 0.0;
        for (uint j_2 = 0u; j_2 < K; j_2++)
        {
            acc += (wk[j_2] * win[j_2]);
        }
        float param = acc;
        y->v[(t * C) + c] = silu(param);
        for (uint j_3 = 0u; (j_3 + 1u) < K; j_3++)
        {
            win[j_3] = win[j_3 + 1u];
        }
    }
    for (uint j_4 = 0u; (j_4 + 1u) < K; j_4++)
    {
        tail->v[(j_4 * C) + c] = win[j_4];
    }
}

