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

struct Vec4s;
struct Uvec4s;
struct Uints;
struct Ints;
struct Addrs;
struct Floats;

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
constant bool _109 = (CHECK == 0u);

struct Uvec4s
{
    uint4 v[1];
};

struct Uints
{
    uint v[1];
};

constant uint _324_tmp [[function_constant(0)]];
constant uint _324 = is_function_constant_defined(_324_tmp) ? _324_tmp : 1u;
constant uint3 gl_WorkGroupSize [[maybe_unused]] = uint3(_324, 1u, 1u);

struct Ints
{
    int v[1];
};

constant uint ROWS_tmp [[function_constant(1)]];
constant uint ROWS = is_function_constant_defined(ROWS_tmp) ? ROWS_tmp : 2u;

struct Addrs
{
    ulong v[1];
};

struct Floats
{
    float v[1];
};

static inline __attribute__((always_inline))
uint n_chunks(constant P& p)
{
    uint nb = ((p.cols + 32u) - 1u) / 32u;
    return nb * 2u;
}

static inline __attribute__((always_inline))
uint chunk_col(thread const uint& c)
{
    return c * 16u;
}

static inline __attribute__((always_inline))
void load_x(thread const ulong& xrow, thread const uint& col0, thread spvUnsafeArray<float4, 4>& xs, constant P& p)
{
    const device Vec4s* xv = reinterpret_cast<device Vec4s*>(xrow);
    float4 _119;
    for (uint k = 0u; k < 4u; k++)
    {
        uint col = col0 + (4u * k);
        bool _117;
        if (!_109)
        {
            _117 = col < p.cols;
        }
        else
        {
            _117 = _109;
        }
        if (_117)
        {
            _119 = xv->v[col >> uint(2)];
        }
        else
        {
            _119 = float4(0.0);
        }
        xs[k] = _119;
    }
}

static inline __attribute__((always_inline))
float2 x_sums(spvUnsafeArray<float4, 4> xs)
{
    float4 a = float4(0.0);
    float4 b = float4(0.0);
    for (uint i = 0u; i < 4u; i++)
    {
        spvUnsafeArray<float4, 4> indexable;
        indexable = xs;
        a += indexable[i];
    }
    a += b;
    return float2(((a.x + a.y) + a.z) + a.w, 0.0);
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
float quant_dot(thread const ulong& row, thread const uint& c, spvUnsafeArray<float4, 4> xs, thread const float2& sx, constant P& p)
{
    uint4 q = (reinterpret_cast<device Uvec4s*>(row))->v[c];
    uint nb = ((p.cols + 32u) - 1u) / 32u;
    uint db = (nb * 32u) + ((c >> uint(1)) * 2u);
    uint param = (reinterpret_cast<device Uints*>(row))->v[db >> uint(2)];
    uint param_1 = (db >> uint(1)) & 1u;
    float d = f16_at(param, param_1);
    float f = 0.0;
    uint _197;
    uint _213;
    uint _228;
    uint _241;
    for (uint i = 0u; i < 4u; i++)
    {
        uint w = q[i] ^ 2155905152u;
        if (true)
        {
            _197 = w << uint(15);
        }
        else
        {
            _197 = w >> uint(-15);
        }
        if (true)
        {
            _213 = w << uint(7);
        }
        else
        {
            _213 = w >> uint(-7);
        }
        if (false)
        {
            _228 = w << uint(-1);
        }
        else
        {
            _228 = w >> uint(1);
        }
        if (false)
        {
            _241 = w << uint(-9);
        }
        else
        {
            _241 = w >> uint(9);
        }
        spvUnsafeArray<float4, 4> indexable;
        indexable = xs;
        f += dot(float4(as_type<float>((_197 & 8355840u) | 1065353216u), as_type<float>((_213 & 8355840u) | 1065353216u), as_type<float>((_228 & 8355840u) | 1065353216u), as_type<float>((_241 & 8355840u) | 1065353216u)), indexable[i]);
    }
    return d * ((256.0 * (f - sx.x)) - (128.0 * sx.x));
}

kernel void splash_moe_down4_q8(constant P& p [[buffer(0)]], uint3 gl_LocalInvocationID [[thread_position_in_threadgroup]], uint3 gl_WorkGroupID [[threadgroup_position_in_grid]], uint gl_SubgroupID [[simdgroup_index_in_threadgroup]], uint gl_NumSubgroups [[simdgroups_per_threadgroup]])
{
    threadgroup float partial[16][64];
    threadgroup float wg_red[256];
    threadgroup uint wg_red_u[256];
    uint tid = gl_LocalInvocationID.x;
    uint wg = gl_WorkGroupSize.x;
    device Ints* plan = reinterpret_cast<device Ints*>(p.plan);
    uint tile = gl_WorkGroupID.x;
    uint e = uint(plan->v[3u * tile]);
    uint start = uint(plan->v[(3u * tile) + 1u]);
    uint n = uint(plan->v[(3u * tile) + 2u]);
    uint r0 = gl_WorkGroupID.y * ROWS;
    const device Addrs* table = reinterpret_cast<device Addrs*>(p.w);
    spvUnsafeArray<ulong, 1> wbase;
    wbase[0] = table->v[(3u * e) + 2u];
    spvUnsafeArray<uint, 4> pairs;
    uint _404;
    spvUnsafeArray<ulong, 4> xrows;
    for (uint j = 0u; j < 4u; j++)
    {
        if (j < n)
        {
            _404 = uint(plan->v[(p.order_at + start) + j]);
        }
        else
        {
            _404 = 0u;
        }
        pairs[j] = _404;
        xrows[j] = p.x + (ulong(pairs[j] * p.cols) * 4ul);
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
    spvUnsafeArray<float4, 4> param_3;
    for (uint c = tid; c < chunks; c += wg)
    {
        uint param = c;
        uint col0 = chunk_col(param);
        for (uint m = 0u; m < 1u; m++)
        {
            for (uint r_1 = 0u; r_1 < 4u; r_1++)
            {
                bool _508 = r_1 >= ROWS;
                bool _518;
                if (!_508)
                {
                    _518 = (r0 + r_1) >= p.rows;
                }
                else
                {
                    _518 = _508;
                }
                if (_518)
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
                    spvUnsafeArray<float4, 4> xs;
                    xs = param_3;
                    float2 sx = x_sums(xs);
                    uint _552 = (m * 4u) + r_1;
                    ulong param_4 = wbase[m] + (ulong(r0 + r_1) * ulong(p.row_bytes));
                    uint param_5 = c;
                    float2 param_6 = sx;
                    acc[_552][j_2] += quant_dot(param_4, param_5, xs, param_6, p);
                }
            }
        }
    }
    for (uint r_2 = 0u; r_2 < 4u; r_2++)
    {
        for (uint j_3 = 0u; j_3 < 4u; j_3++)
        {
            float s = simd_sum(acc[r_2][j_3]);
            bool _609 = simd_is_first();
            if (_609)
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
        (reinterpret_cast<device Floats*>(p.y))->v[((pairs[j_4] * p.rows) + r0) + r_3] = s_1[0];
    }
}

