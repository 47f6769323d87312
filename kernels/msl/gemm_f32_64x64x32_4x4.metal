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

struct Uints;
struct Vec4s;
struct Floats;

struct Uints
{
    uint v[1];
};

struct P
{
    ulong w;
    ulong x;
    ulong y;
    uint row_bytes;
    uint rows;
    uint cols;
    uint n;
    uint x_stride;
    uint y_stride;
};

struct Vec4s
{
    float4 v[1];
};

struct Floats
{
    float v[1];
};

constant uint _865_tmp [[function_constant(0)]];
constant uint _865 = is_function_constant_defined(_865_tmp) ? _865_tmp : 1u;
constant uint3 gl_WorkGroupSize [[maybe_unused]] = uint3(_865, 1u, 1u);

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
    uint _62;
    if (half_index == 0u)
    {
        _62 = w;
    }
    else
    {
        _62 = w >> uint(16);
    }
    return float2(as_type<half2>(_62)).x;
}

static inline __attribute__((always_inline))
float bf16_at(thread const ulong& row, thread const uint& byte)
{
    uint w = (reinterpret_cast<device Uints*>(row))->v[byte >> uint(2)];
    float _93;
    if ((byte & 2u) == 0u)
    {
        uint param = w;
        _93 = bf16_lo(param);
    }
    else
    {
        uint param_1 = w;
        _93 = bf16_hi(param_1);
    }
    return _93;
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
        float _137;
        if (wt == 1u)
        {
            float _143;
            if ((col & 1u) == 0u)
            {
                uint param = w;
                _143 = bf16_lo(param);
            }
            else
            {
                uint param_1 = w;
                _143 = bf16_hi(param_1);
            }
            _137 = _143;
        }
        else
        {
            uint param_2 = w;
            uint param_3 = col & 1u;
            _137 = f16_at(param_2, param_3);
        }
        return _137;
    }
    if ((wt == 5u) || (wt == 6u))
    {
        uint nb = cols / 64u;
        uint g = col / 64u;
        uint _182;
        if (wt == 5u)
        {
            _182 = cols / 2u;
        }
        else
        {
            _182 = cols;
        }
        uint qbytes = _182;
        uint _193;
        if (wt == 5u)
        {
            _193 = extract_bits(u->v[col >> uint(3)], uint(int((col & 7u) * 4u)), uint(4));
        }
        else
        {
            _193 = extract_bits(u->v[col >> uint(2)], uint(int((col & 3u) * 8u)), uint(8));
        }
        uint q = _193;
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

static inline __attribute__((always_inline))
void decode8(thread const ulong& row, thread const uint& col0, thread const uint& cols, thread spvUnsafeArray<float, 8>& w)
{
    if ((col0 + 8u) <= cols)
    {
        device Uints* u = reinterpret_cast<device Uints*>(row);
        for (uint i = 0u; i < 8u; i++)
        {
            w[i] = as_type<float>(u->v[col0 + i]);
        }
    }
    else
    {
        float _408;
        for (uint i_1 = 0u; i_1 < 8u; i_1++)
        {
            if ((col0 + i_1) < cols)
            {
                uint param = 0u;
                ulong param_1 = row;
                uint param_2 = col0 + i_1;
                uint param_3 = cols;
                _408 = weight_at(param, param_1, param_2, param_3);
            }
            else
            {
                _408 = 0.0;
            }
            w[i_1] = _408;
        }
    }
}

kernel void splash_gemm_f32_64x64x32_4x4(constant P& p [[buffer(0)]], uint3 gl_LocalInvocationID [[thread_position_in_threadgroup]], uint3 gl_WorkGroupID [[threadgroup_position_in_grid]])
{
    threadgroup float4 Ws[32][16];
    threadgroup float4 Xs[32][16];
    threadgroup float wg_red[256];
    threadgroup uint wg_red_u[256];
    uint tid = gl_LocalInvocationID.x;
    uint m0 = gl_WorkGroupID.x * 64u;
    uint n0 = gl_WorkGroupID.y * 64u;
    uint tm = tid % 16u;
    uint tn = tid / 16u;
    spvUnsafeArray<spvUnsafeArray<float, 4>, 4> acc;
    for (uint i = 0u; i < 4u; i++)
    {
        for (uint j = 0u; j < 4u; j++)
        {
            acc[i][j] = 0.0;
        }
    }
    spvUnsafeArray<float, 8> w;
    spvUnsafeArray<float, 8> param_3;
    spvUnsafeArray<float, 4> a;
    spvUnsafeArray<float, 4> b;
    for (uint k0 = 0u; k0 < p.cols; k0 += 32u)
    {
        for (uint t = tid; t < 256u; t += 256u)
        {
            uint m = t / 4u;
            uint kk = (t % 4u) * 8u;
            bool _514 = (m0 + m) < p.rows;
            bool _523;
            if (_514)
            {
                _523 = (k0 + kk) < p.cols;
            }
            else
            {
                _523 = _514;
            }
            if (_523)
            {
                ulong param = p.w + (ulong(m0 + m) * ulong(p.row_bytes));
                uint param_1 = k0 + kk;
                uint param_2 = p.cols;
                decode8(param, param_1, param_2, param_3);
                w = param_3;
            }
            else
            {
                for (uint i_1 = 0u; i_1 < 8u; i_1++)
                {
                    w[i_1] = 0.0;
                }
            }
            for (uint i_2 = 0u; i_2 < 8u; i_2++)
            {
                ((threadgroup float*)&Ws[kk + i_2][m >> uint(2)])[m & 3u] = w[i_2];
            }
        }
        for (uint t_1 = tid; t_1 < 512u; t_1 += 256u)
        {
            uint j_1 = t_1 / 8u;
            uint kk_1 = (t_1 % 8u) * 4u;
            float4 v = float4(0.0);
            bool _618 = (n0 + j_1) < p.n;
            bool _627;
            if (_618)
            {
                _627 = (k0 + kk_1) < p.cols;
            }
            else
            {
                _627 = _618;
            }
            if (_627)
            {
                v = (reinterpret_cast<device Vec4s*>(p.x + (ulong((((n0 + j_1) * p.x_stride) + k0) + kk_1) * 4ul)))->v[0];
            }
            for (uint i_3 = 0u; i_3 < 4u; i_3++)
            {
                ((threadgroup float*)&Xs[kk_1 + i_3][j_1 >> uint(2)])[j_1 & 3u] = v[i_3];
            }
        }
        threadgroup_barrier(mem_flags::mem_threadgroup);
        for (uint k = 0u; k < 32u; k++)
        {
            for (uint i_4 = 0u; i_4 < 4u; i_4 += 4u)
            {
                float4 v_1 = Ws[k][((tm * 4u) + i_4) >> uint(2)];
                a[i_4] = v_1.x;
                a[i_4 + 1u] = v_1.y;
                a[i_4 + 2u] = v_1.z;
                a[i_4 + 3u] = v_1.w;
            }
            for (uint j_2 = 0u; j_2 < 4u; j_2++)
            {
                b[j_2] = ((threadgroup float*)&Xs[k][((tn * 4u) + j_2) >> uint(2)])[((tn * 4u) + j_2) & 3u];
            }
            for (uint i_5 = 0u; i_5 < 4u; i_5++)
            {
                for (uint j_3 = 0u; j_3 < 4u; j_3++)
                {
                    acc[i_5][j_3] += (a[i_5] * b[j_3]);
                }
            }
        }
        threadgroup_barrier(mem_flags::mem_threadgroup);
    }
    device Floats* y = reinterpret_cast<device Floats*>(p.y);
    for (uint i_6 = 0u; i_6 < 4u; i_6++)
    {
        for (uint j_4 = 0u; j_4 < 4u; j_4++)
        {
            uint r = (m0 + (tm * 4u)) + i_6;
            uint c = (n0 + (tn * 4u)) + j_4;
            bool _832 = r < p.rows;
            bool _839;
            if (_832)
            {
                _839 = c < p.n;
            }
            else
            {
                _839 = _832;
            }
            if (_839)
            {
                y->v[(c * p.y_stride) + r] = acc[i_6][j_4];
            }
        }
    }
}

