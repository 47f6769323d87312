#pragma clang diagnostic ignored "-Wmissing-prototypes"

#include <metal_stdlib>
#include <simd/simd.h>

using namespace metal;

struct Ints;
struct Floats;

struct Ints
{
    int v[1];
};

constant uint _156_tmp [[function_constant(0)]];
constant uint _156 = is_function_constant_defined(_156_tmp) ? _156_tmp : 1u;
constant uint3 gl_WorkGroupSize [[maybe_unused]] = uint3(_156, 1u, 1u);

struct P
{
    ulong x;
    ulong pos;
    ulong inv_freq;
    uint n;
    uint heads;
    uint head_dim;
    uint half_rot;
    int section0;
    int section1;
    int section2;
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
int rope_position(thread const ulong& pos, thread const uint& row, thread const uint& f, thread const int& section0, thread const int& section1, thread const int& section2)
{
    if (((section0 == 0) && (section1 == 0)) && (section2 == 0))
    {
        return (reinterpret_cast<device Ints*>(pos))->v[row];
    }
    uint s = f % 3u;
    int section = (s == 1u) ? section1 : section2;
    bool _88 = s != 0u;
    bool _97;
    if (_88)
    {
        _97 = int(f) < (3 * section);
    }
    else
    {
        _97 = _88;
    }
    return (reinterpret_cast<device Ints*>(pos))->v[(row * 3u) + (_97 ? s : 0u)];
}

static inline __attribute__((always_inline))
float2 rope_pair(thread const float& x1, thread const float& x2, thread const int& at, thread const float& inv_freq)
{
    float ang = float(at) * inv_freq;
    float k = round(ang * 0.15915493667125701904296875);
    float r = fma(-k, 6.28125, ang);
    r = fma(-k, 0.00193530716933310031890869140625, r);
    r = fma(-k, 1.0253131677018245682120323181152e-11, r);
    float c = cos(r);
    float s = sin(r);
    return float2((x1 * c) - (x2 * s), (x2 * c) + (x1 * s));
}

kernel void splash_rope(constant P& p [[buffer(0)]], uint3 gl_WorkGroupID [[threadgroup_position_in_grid]], uint3 gl_NumWorkGroups [[threadgroups_per_grid]], uint3 gl_LocalInvocationID [[thread_position_in_threadgroup]])
{
    threadgroup float wg_red[256];
    threadgroup uint wg_red_u[256];
    uint i = (flat_group(gl_WorkGroupID, gl_NumWorkGroups) * gl_WorkGroupSize.x) + gl_LocalInvocationID.x;
    if (i >= ((p.n * p.heads) * p.half_rot))
    {
        return;
    }
    uint f = i % p.half_rot;
    uint head = (i / p.half_rot) % p.heads;
    uint row = i / (p.half_rot * p.heads);
    ulong param = p.pos;
    uint param_1 = row;
    uint param_2 = f;
    int param_3 = p.section0;
    int param_4 = p.section1;
    int param_5 = p.section2;
    int at = rope_position(param, param_1, param_2, param_3, param_4, param_5);
    device Floats* x = reinterpret_cast<device Floats*>(p.x + (ulong(((row * p.heads) + head) * p.head_dim) * 4ul));
    float param_6 = x->v[f];
    float param_7 = x->v[f + p.half_rot];
    int param_8 = at;
    float param_9 = (reinterpret_cast<device Floats*>(p.inv_freq))->v[f];
    float2 y = rope_pair(param_6, param_7, param_8, param_9);
    x->v[f] = y.x;
    x->v[f + p.half_rot] = y.y;
}

