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
struct Uvec4s;
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
    ulong plan;
    uint row_bytes;
    uint rows;
    uint cols;
    uint n;
    uint x_stride;
    uint y_stride;
    uint top_k;
    uint order_at;
};

struct Vec4s
{
    float4 v[1];
};

constant uint CHECK_tmp [[function_constant(2)]];
constant uint CHECK = is_function_constant_defined(CHECK_tmp) ? CHECK_tmp : 1u;
constant bool _161 = (CHECK == 0u);

struct Uvec4s
{
    uint4 v[1];
};

constant uint _459_tmp [[function_constant(0)]];
constant uint _459 = is_function_constant_defined(_459_tmp) ? _459_tmp : 1u;
constant uint3 gl_WorkGroupSize [[maybe_unused]] = uint3(_459, 1u, 1u);
constant uint ROWS_tmp [[function_constant(1)]];
constant uint ROWS = is_function_constant_defined(ROWS_tmp) ? ROWS_tmp : 2u;

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
uint n_chunks(constant P& p)
{
    uint nb = ((p.cols + 32u) - 1u) / 32u;
    return p.cols / 32u;
}

static inline __attribute__((always_inline))
uint chunk_col(thread const uint& c)
{
    return c * 32u;
}

static inline __attribute__((always_inline))
void load_x(thread const ulong& xrow, thread const uint& col0, thread spvUnsafeArray<float4, 8>& xs, constant P& p)
{
    const device Vec4s* xv = reinterpret_cast<device Vec4s*>(xrow);
    float4 _171;
    for (uint k = 0u; k < 8u; k++)
    {
        uint col = col0 + (4u * k);
        bool _169;
        if (!_161)
        {
            _169 = col < p.cols;
        }
        else
        {
            _169 = _161;
        }
        if (_169)
        {
            _171 = xv->v[col >> uint(2)];
        }
        else
        {
            _171 = float4(0.0);
        }
        xs[k] = _171;
    }
}

static inline __attribute__((always_inline))
float2 x_sums(spvUnsafeArray<float4, 8> xs)
{
    float4 a = float4(0.0);
    float4 b = float4(0.0);
    for (uint i = 0u; i < 4u; i++)
    {
        spvUnsafeArray<float4, 8> indexable;
        indexable = xs;
        a += indexable[i];
        spvUnsafeArray<float4, 8> indexable_1;
        indexable_1 = xs;
        b += indexable_1[4u + i];
    }
    a += b;
    return float2(((a.x + a.y) + a.z) + a.w, 0.0);
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
float bf16_at(thread const ulong& row, thread const uint& byte)
{
    uint w = (reinterpret_cast<device Uints*>(row))->v[byte >> uint(2)];
    float _88;
    if ((byte & 2u) == 0u)
    {
        uint param = w;
        _88 = bf16_lo(param);
    }
    else
    {
        uint param_1 = w;
        _88 = bf16_hi(param_1);
    }
    return _88;
}

static inline __attribute__((always_inline))
float quant_dot(thread const ulong& row, thread const uint& c, spvUnsafeArray<float4, 8> xs, thread const float2& sx, constant P& p)
{
    uint4 q = (reinterpret_cast<device Uvec4s*>(row))->v[c];
    uint nb = ((p.cols + 32u) - 1u) / 32u;
    uint g = (c * 32u) / 64u;
    uint _213;
    if (true)
    {
        _213 = p.cols / 2u;
    }
    else
    {
        _213 = p.cols;
    }
    uint qbytes = _213;
    uint groups = p.cols / 64u;
    ulong param = row;
    uint param_1 = qbytes + (g * 2u);
    float scale = bf16_at(param, param_1);
    ulong param_2 = row;
    uint param_3 = (qbytes + (groups * 2u)) + (g * 2u);
    float bias0 = bf16_at(param_2, param_3);
    float f = 0.0;
    uint _261;
    uint _277;
    uint _291;
    uint _305;
    uint _328;
    uint _343;
    uint _356;
    uint _370;
    for (uint i = 0u; i < 4u; i++)
    {
        uint w = q[i];
        if (true)
        {
            _261 = w << uint(19);
        }
        else
        {
            _261 = w >> uint(-19);
        }
        if (true)
        {
            _277 = w << uint(15);
        }
        else
        {
            _277 = w >> uint(-15);
        }
        if (true)
        {
            _291 = w << uint(11);
        }
        else
        {
            _291 = w >> uint(-11);
        }
        if (true)
        {
            _305 = w << uint(7);
        }
        else
        {
            _305 = w >> uint(-7);
        }
        spvUnsafeArray<float4, 8> indexable;
        indexable = xs;
        f += dot(float4(as_type<float>((_261 & 7864320u) | 1065353216u), as_type<float>((_277 & 7864320u) | 1065353216u), as_type<float>((_291 & 7864320u) | 1065353216u), as_type<float>((_305 & 7864320u) | 1065353216u)), indexable[2u * i]);
        if (true)
        {
            _328 = w << uint(3);
        }
        else
        {
            _328 = w >> uint(-3);
        }
        if (false)
        {
            _343 = w << uint(-1);
        }
        else
        {
            _343 = w >> uint(1);
        }
        if (false)
        {
            _356 = w << uint(-5);
        }
        else
        {
            _356 = w >> uint(5);
        }
        if (false)
        {
            _370 = w << uint(-9);
        }
        else
        {
            _370 = w >> uint(9);
        }
        spvUnsafeArray<float4, 8> indexable_1;
        indexable_1 = xs;
        f += dot(float4(as_type<float>((_328 & 7864320u) | 1065353216u), as_type<float>((_343 & 7864320u) | 1065353216u), as_type<float>((_356 & 7864320u) | 1065353216u), as_type<float>((_370 & 7864320u) | 1065353216u)), indexable_1[(2u * i) + 1u]);
    }
    return ((scale * 16.0) * (f - sx.x)) + (bias0 * sx.x);
}

kernel void splash_matmul4_mlx4(constant P& p [[buffer(0)]], uint3 gl_WorkGroupID [[threadgroup_position_in_grid]], uint3 gl_NumWorkGroups [[threadgroups_per_grid]], uint3 gl_LocalInvocationID [[thread_position_in_threadgroup]], uint gl_SubgroupID [[simdgroup_index_in_threadgroup]], uint gl_NumSubgroups [[simdgroups_per_threadgroup]])
{
    threadgroup float partial[16][64];
    threadgroup float wg_red[256];
    threadgroup uint wg_red_u[256];
    uint tid = gl_LocalInvocationID.x;
    uint wg = gl_WorkGroupSize.x;
    uint r0 = flat_group(gl_WorkGroupID, gl_NumWorkGroups) * ROWS;
    uint n = p.n;
    spvUnsafeArray<ulong, 1> wbase;
    wbase[0] = p.w;
    spvUnsafeArray<ulong, 4> xrows;
    for (uint j = 0u; j < 4u; j++)
    {
        xrows[j] = p.x + (ulong(j * p.x_stride) * 4ul);
    }
    if (r0 >= p.rows)
    {
        return;
    }
    spvUnsafeArray<spvUnsafeArray<float, 4>, 4> acc;
    for (uint r = 0u; r < 4u; r++)
    {
        for (uint j_1 = 0u; j_1 < 4u; j_1++)
        {
            acc[r][j_1] = 0.0;
        }
    }
    uint chunks = n_chunks(p);
    spvUnsafeArray<float4, 8> param_3;
    for (uint c = tid; c < chunks; c += wg)
    {
        uint param = c;
        uint col0 = chunk_col(param);
        for (uint m = 0u; m < 1u; m++)
        {
            for (uint r_1 = 0u; r_1 < 4u; r_1++)
            {
                bool _569 = r_1 >= ROWS;
                bool _579;
                if (!_569)
                {
                    _579 = (r0 + r_1) >= p.rows;
                }
                else
                {
                    _579 = _569;
                }
                if (_579)
                {
                    break;
                }
                for (uint j_2 = 0u; j_2 < 4u; j_2++)
                {
                    if (j_2 >= n)
                    {
                        break;
                    }
                    ulong param_1 = xrows[j_2];
                    uint param_2 = col0;
                    load_x(param_1, param_2, param_3, p);
                    spvUnsafeArray<float4, 8> xs;
                    xs = param_3;
                    float2 sx = x_sums(xs);
                    uint _613 = (m * 4u) + r_1;
                    ulong param_4 = wbase[m] + (ulong(r0 + r_1) * ulong(p.row_bytes));
                    uint param_5 = c;
                    float2 param_6 = sx;
                    acc[_613][j_2] += quant_dot(param_4, param_5, xs, param_6, p);
                }
            }
        }
    }
    for (uint r_2 = 0u; r_2 < 4u; r_2++)
    {
        for (uint j_3 = 0u; j_3 < 4u; j_3++)
        {
            float s = simd_sum(acc[r_2][j_3]);
            bool _670 = simd_is_first();
            if (_670)
            {
                partial[(r_2 * 4u) + j_3][gl_SubgroupID] = s;
            }
        }
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    spvUnsafeArray<float, 1> s_1;
    for (uint o = tid; o < (ROWS * n); o += wg)
    {
        uint r_3 = o / n;
        uint j_4 = o % n;
        if ((r0 + r_3) >= p.rows)
        {
            continue;
        }
        for (uint m_1 = 0u; m_1 < 1u; m_1++)
        {
            s_1[m_1] = 0.0;
            for (uint i = 0u; i < gl_NumSubgroups; i++)
            {
                s_1[m_1] += partial[(((m_1 * 4u) + r_3) * 4u) + j_4][i];
            }
        }
        (reinterpret_cast<device Floats*>(p.y))->v[((j_4 * p.y_stride) + r0) + r_3] = s_1[0];
    }
}

