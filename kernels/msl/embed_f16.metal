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

constant uint _376_tmp [[function_constant(0)]];
constant uint _376 = is_function_constant_defined(_376_tmp) ? _376_tmp : 1u;
constant uint3 gl_WorkGroupSize [[maybe_unused]] = uint3(_376, 1u, 1u);

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
    uint _55;
    if (half_index == 0u)
    {
        _55 = w;
    }
    else
    {
        _55 = w >> uint(16);
    }
    return float2(as_type<half2>(_55)).x;
}

static inline __attribute__((always_inline))
float bf16_at(thread const ulong& row, thread const uint& byte)
{
    uint w = (reinterpret_cast<device Uints*>(row))->v[byte >> uint(2)];
    float _86;
    if ((byte & 2u) == 0u)
    {
        uint param = w;
        _86 = bf16_lo(param);
    }
    else
    {
        uint param_1 = w;
        _86 = bf16_hi(param_1);
    }
    return _86;
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
        float _130;
        if (wt == 1u)
        {
            float _136;
            if ((col & 1u) == 0u)
            {
                uint param = w;
                _136 = bf16_lo(param);
            }
            else
            {
                uint param_1 = w;
                _136 = bf16_hi(param_1);
            }
            _130 = _136;
        }
        else
        {
            uint param_2 = w;
            uint param_3 = col & 1u;
            _130 = f16_at(param_2, param_3);
        }
        return _130;
    }
    if ((wt == 5u) || (wt == 6u))
    {
        uint nb = cols / 64u;
        uint g = col / 64u;
        uint _175;
        if (wt == 5u)
        {
            _175 = cols / 2u;
        }
        else
        {
            _175 = cols;
        }
        uint qbytes = _175;
        uint _186;
        if (wt == 5u)
        {
            _186 = extract_bits(u->v[col >> uint(3)], uint(int((col & 7u) * 4u)), uint(4));
        }
        else
        {
            _186 = extract_bits(u->v[col >> uint(2)], uint(int((col & 3u) * 8u)), uint(8));
        }
        uint q = _186;
        ulong param_4 = row;
        uint param_5 = qbytes + (g * 2u);
        ulong param_6 = row;
        uint param_7 = (qbytes + (nb * 2u)) + (g * 2u);
        return (float(q) * bf16_at(param_4, param_5)) + bf16_at(param_6, param_7);
    }
    uint nb_1 = ((cols + 32u) - 1u) / 32u;
    uint g_1 = col / 32u;
    uint j = col % 32u;
    if (wt == 3u)
    {
        int q_1 = extract_bits(int(u->v[col >> uint(2)]), uint(int((col & 3u) * 8u)), uint(8));
        uint dbyte = (nb_1 * 32u) + (g_1 * 2u);
        uint param_8 = u->v[dbyte >> uint(2)];
        uint param_9 = (dbyte >> uint(1)) & 1u;
        return float(q_1) * f16_at(param_8, param_9);
    }
    uint qbytes_1 = ((nb_1 + 1u) / 2u) * 32u;
    uint byte_index = ((g_1 / 2u) * 32u) + j;
    uint q_2 = extract_bits(u->v[byte_index >> uint(2)], uint(int(((byte_index & 3u) * 8u) + ((g_1 & 1u) * 4u))), uint(4));
    uint db = qbytes_1 + (g_1 * 2u);
    uint mb = (qbytes_1 + (nb_1 * 2u)) + (g_1 * 2u);
    uint param_10 = u->v[db >> uint(2)];
    uint param_11 = (db >> uint(1)) & 1u;
    uint param_12 = u->v[mb >> uint(2)];
    uint param_13 = (mb >> uint(1)) & 1u;
    return (float(q_2) * f16_at(param_10, param_11)) + f16_at(param_12, param_13);
}

kernel void splash_embed_f16(constant P& p [[buffer(0)]], uint3 gl_WorkGroupID [[threadgroup_position_in_grid]], uint3 gl_NumWorkGroups [[threadgroups_per_grid]], uint3 gl_LocalInvocationID [[thread_position_in_threadgroup]])
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
    uint param = 2u;
    ulong param_1 = p.x + (ulong(token) * ulong(p.x_stride));
    uint param_2 = c;
    uint param_3 = p.d;
    y->v[i] = weight_at(param, param_1, param_2, param_3);
}

