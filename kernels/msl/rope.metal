#pragma clang diagnostic ignored "-Wmissing-prototypes"

#include <metal_stdlib>
#include <simd/simd.h>

using namespace metal;

struct Ints;
struct Floats;

constant uint _30_tmp [[function_constant(0)]];
constant uint _30 = is_function_constant_defined(_30_tmp) ? _30_tmp : 1u;
constant uint3 gl_WorkGroupSize [[maybe_unused]] = uint3(_30, 1u, 1u);

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

struct Ints
{
    int v[1];
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
    device Ints* pos = reinterpret_cast<device Ints*>(p.pos);
    bool _97 = p.section0 == 0;
    bool _104;
    if (_97)
    {
        _104 = p.section1 == 0;
    }
    else
    {
        _104 = _97;
    }
    bool _111;
    if (_104)
    {
        _111 = p.section2 == 0;
    }
    else
    {
        _111 = _104;
    }
    int at;
    if (_111)
    {
        at = pos->v[row];
    }
    else
    {
        uint s = f % 3u;
        int _129;
        if (s == 1u)
        {
            _129 = p.section1;
        }
        else
        {
            _129 = p.section2;
        }
        int section = _129;
        bool _142 = s != 0u;
        bool _150;
        if (_142)
        {
            _150 = int(f) < (3 * section);
        }
        else
        {
            _150 = _142;
        }
        at = pos->v[(row * 3u) + (_150 ? s : 0u)];
    }
    float ang = float(at) * (reinterpret_cast<device Floats*>(p.inv_freq))->v[f];
    float k = round(ang * 0.15915493667125701904296875);
    float r = fma(-k, 6.28125, ang);
    r = fma(-k, 0.00193530716933310031890869140625, r);
    r = fma(-k, 1.0253131677018245682120323181152e-11, r);
    float c = cos(r);
    float s_1 = sin(r);
    device Floats* x = reinterpret_cast<device Floats*>(p.x + (ulong(((row * p.heads) + head) * p.head_dim) * 4ul));
    float x1 = x->v[f];
    float x2 = x->v[f + p.half_rot];
    x->v[f] = (x1 * c) - (x2 * s_1);
    x->v[f + p.half_rot] = (x2 * c) + (x1 * s_1);
}

