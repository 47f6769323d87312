#include <metal_stdlib>
#include <simd/simd.h>

using namespace metal;

struct Uvec4s;
struct Uints;

constant uint _16_tmp [[function_constant(0)]];
constant uint _16 = is_function_constant_defined(_16_tmp) ? _16_tmp : 1u;
constant uint3 gl_WorkGroupSize [[maybe_unused]] = uint3(_16, 1u, 1u);

struct Uvec4s
{
    uint4 v[1];
};

struct P
{
    ulong src;
    ulong dst;
    uint words;
    uint never;
};

struct Uints
{
    uint v[1];
};

kernel void splash_stream(constant P& p [[buffer(0)]], uint3 gl_NumWorkGroups [[threadgroups_per_grid]], uint3 gl_GlobalInvocationID [[thread_position_in_grid]], uint3 gl_WorkGroupID [[threadgroup_position_in_grid]])
{
    threadgroup float wg_red[256];
    threadgroup uint wg_red_u[256];
    uint _20 = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
    uint4 acc = uint4(0u);
    const device Uvec4s* src = reinterpret_cast<device Uvec4s*>(p.src);
    for (uint stride = _20, i = gl_GlobalInvocationID.x; i < p.words; i += stride)
    {
        acc ^= src->v[i];
    }
    uint fold = simd_xor(((acc.x ^ acc.y) ^ acc.z) ^ acc.w);
    bool _85 = fold == p.never;
    bool _89;
    if (_85)
    {
        bool _88 = simd_is_first();
        _89 = _88;
    }
    else
    {
        _89 = _85;
    }
    if (_89)
    {
        (reinterpret_cast<device Uints*>(p.dst))->v[gl_WorkGroupID.x] = fold;
    }
}

