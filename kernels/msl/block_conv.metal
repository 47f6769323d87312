#pragma clang diagnostic ignored "-Wmissing-prototypes"

#include <metal_stdlib>
#include <simd/simd.h>

using namespace metal;

struct Floats;
struct Ints;

constant uint _30_tmp [[function_constant(0)]];
constant uint _30 = is_function_constant_defined(_30_tmp) ? _30_tmp : 1u;
constant uint3 gl_WorkGroupSize [[maybe_unused]] = uint3(_30, 1u, 1u);

struct P
{
    ulong x;
    ulong dyn;
    ulong base;
    ulong blocks;
    uint H;
    uint K;
    uint G;
    uint dyn_stride;
    uint n_blocks;
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

kernel void splash_block_conv(constant P& p [[buffer(0)]], uint3 gl_WorkGroupID [[threadgroup_position_in_grid]], uint3 gl_NumWorkGroups [[threadgroups_per_grid]], uint3 gl_LocalInvocationID [[thread_position_in_threadgroup]])
{
    threadgroup float wg_red[256];
    threadgroup uint wg_red_u[256];
    uint i = (flat_group(gl_WorkGroupID, gl_NumWorkGroups) * gl_WorkGroupSize.x) + gl_LocalInvocationID.x;
    if (i >= (p.n_blocks * p.H))
    {
        return;
    }
    uint b = i / p.H;
    uint c = i % p.H;
    uint groups = p.H / p.G;
    device Floats* x = reinterpret_cast<device Floats*>(p.x);
    device Floats* dyn = reinterpret_cast<device Floats*>(p.dyn);
    device Floats* base = reinterpret_cast<device Floats*>(p.base);
    uint row0 = uint((reinterpret_cast<device Ints*>(p.blocks))->v[2u * b]);
    uint len = uint((reinterpret_cast<device Ints*>(p.blocks))->v[(2u * b) + 1u]);
    uint t = len;
    for (;;)
    {
        uint _127 = t;
        uint _128 = _127 - uint(1);
        t = _128;
        if (_127 > 0u)
        {
            uint row = row0 + t;
            float acc = 0.0;
            for (uint o = 0u; (o < p.K) && (o <= t); o++)
            {
                acc += ((base->v[(o * p.H) + c] + dyn->v[((row * p.dyn_stride) + (o * groups)) + (c / p.G)]) * x->v[((row - o) * p.H) + c]);
            }
            x->v[(row * p.H) + c] = acc;
            continue;
        }
        else
        {
            break;
        }
    }
}

