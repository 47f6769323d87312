#pragma clang diagnostic ignored "-Wmissing-prototypes"

#include <metal_stdlib>
#include <simd/simd.h>

using namespace metal;

struct Uints;
struct Floats;
struct Ints;

struct Uints
{
    uint v[1];
};

constant uint _267_tmp [[function_constant(0)]];
constant uint _267 = is_function_constant_defined(_267_tmp) ? _267_tmp : 1u;
constant uint3 gl_WorkGroupSize [[maybe_unused]] = uint3(_267, 1u, 1u);

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

struct Ints
{
    int v[1];
};

static inline __attribute__((always_inline))
uint flat_group(thread uint3& gl_WorkGroupID, thread uint3& gl_NumWorkGroups)
{
    return gl_WorkGroupID.x + (gl_WorkGroupID.y * gl_NumWorkGroups.x);
}

static inline __attribute__((always_inline))
float bf16_lo(thread const uint& w)
{
    return as_type<float>(w << uint(16));
}

static inline __attribute__((always_inline))
float bf16_hi(thread const uint& w)
{
    return as_type<float>(w & 4294901760u);
}

static inline __attribute__((always_inline))
float f16_at(thread const uint& w, thread const uint& half_index)
{
    uint _50;
    if (half_index == 0u)
    {
        _50 = w;
    }
    else
    {
        _50 = w >> uint(16);
    }
    return float2(as_type<half2>(_50)).x;
}

static inline __attribute__((always_inline))
float weight_at(thread const uint& wt, thread const ulong& row, thread const uint& col, thread const uint& cols)
{
    device Uints* u = reinterpret_cast<device Uints*>(row);
    if (wt == 0u)
    {
        return as_type<float>(u->v[col]);
    }
    if ((wt == 1u) || (wt == 2u))
    {
        uint w = u->v[col >> uint(1)];
        float _101;
        if (wt == 1u)
        {
            float _107;
            if ((col & 1u) == 0u)
            {
                uint param = w;
                _107 = bf16_lo(param);
            }
            else
            {
                uint param_1 = w;
                _107 = bf16_hi(param_1);
            }
            _101 = _107;
        }
        else
        {
            uint param_2 = w;
            uint param_3 = col & 1u;
            _101 = f16_at(param_2, param_3);
        }
        return _101;
    }
    uint nb = ((cols + 32u) - 1u) / 32u;
    uint g = col / 32u;
    uint j = col % 32u;
    if (wt == 3u)
    {
        int q = extract_bits(int(u->v[col >> uint(2)]), uint(int((col & 3u) * 8u)), uint(8));
        uint dbyte = (nb * 32u) + (g * 2u);
        uint param_4 = u->v[dbyte >> uint(2)];
        uint param_5 = (dbyte >> uint(1)) & 1u;
        return float(q) * f16_at(param_4, param_5);
    }
    uint qbytes = ((nb + 1u) / 2u) * 32u;
    uint byte_index = ((g / 2u) * 32u) + j;
    uint q_1 = extract_bits(u->v[byte_index >> uint(2)], uint(int(((byte_index & 3u) * 8u) + ((g & 1u) * 4u))), uint(4));
    uint db = qbytes + (g * 2u);
    uint mb = (qbytes + (nb * 2u)) + (g * 2u);
    uint param_6 = u->v[db >> uint(2)];
    uint param_7 = (db >> uint(1)) & 1u;
    uint param_8 = u->v[mb >> uint(2)];
    uint param_9 = (mb >> uint(1)) & 1u;
    return (float(q_1) * f16_at(param_6, param_7)) + f16_at(param_8, param_9);
}

kernel void splash_embed_bf16(constant P& p [[buffer(0)]], uint3 gl_WorkGroupID [[threadgroup_position_in_grid]], uint3 gl_NumWorkGroups [[threadgroups_per_grid]], uint3 gl_LocalInvocationID [[thread_position_in_threadgroup]])
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
    uint r = i / p.d;
    uint c = i % p.d;
    uint token = uint((reinterpret_cast<device Ints*>(p.g))->v[r]);
    uint param = 1u;
    ulong param_1 = p.x + (ulong(token) * ulong(p.x_stride));
    uint param_2 = c;
    uint param_3 = p.d;
    y->v[i] = weight_at(param, param_1, param_2, param_3);
}

