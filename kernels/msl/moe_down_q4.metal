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
struct Uvec4s;
struct Vec4s;
struct Ints;
struct Addrs;
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

struct Uvec4s
{
    uint4 v[1];
};

struct Vec4s
{
    float4 v[1];
};

constant uint CHECK_tmp [[function_constant(2)]];
constant uint CHECK = is_function_constant_defined(CHECK_tmp) ? CHECK_tmp : 1u;
constant bool _304 = (CHECK == 0u);
constant uint _380_tmp [[function_constant(0)]];
constant uint _380 = is_function_constant_defined(_380_tmp) ? _380_tmp : 1u;
constant uint3 gl_WorkGroupSize [[maybe_unused]] = uint3(_380, 1u, 1u);

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
    return ((nb + 1u) / 2u) * 2u;
}

static inline __attribute__((always_inline))
uint chunk_col(thread const uint& c)
{
    return ((c >> uint(1)) * 64u) + ((c & 1u) * 16u);
}

static inline __attribute__((always_inline))
void load_x(thread const ulong& xrow, thread const uint& col0, thread spvUnsafeArray<float4, 8>& xs, constant P& p)
{
    const device Vec4s* xv = reinterpret_cast<device Vec4s*>(xrow);
    float4 _313;
    for (uint k = 0u; k < 8u; k++)
    {
        uint col = (col0 + (4u * k)) + ((k >= 4u) ? 16u : 0u);
        bool _312;
        if (!_304)
        {
            _312 = col < p.cols;
        }
        else
        {
            _312 = _304;
        }
        if (_312)
        {
            _313 = xv->v[col >> uint(2)];
        }
        else
        {
            _313 = float4(0.0);
        }
        xs[k] = _313;
    }
}

static inline __attribute__((always_inline))
float2 f16x2_at(thread const ulong& row, thread const uint& byte)
{
    device Uints* u = reinterpret_cast<device Uints*>(row);
    if ((byte & 2u) == 0u)
    {
        return float2(as_type<half2>(u->v[byte >> uint(2)]));
    }
    return float2(float2(as_type<half2>(u->v[byte >> uint(2)])).y, float2(as_type<half2>(u->v[(byte >> uint(2)) + 1u])).x);
}

static inline __attribute__((always_inline))
void decode(thread const ulong& row, thread const uint& c, thread spvUnsafeArray<float, 32>& wv, constant P& p)
{
    uint4 q = (reinterpret_cast<device Uvec4s*>(row))->v[c];
    uint nb = ((p.cols + 32u) - 1u) / 32u;
    uint pair = c >> uint(1);
    uint qbytes = ((nb + 1u) / 2u) * 32u;
    ulong param = row;
    uint param_1 = qbytes + (pair * 4u);
    float2 d = f16x2_at(param, param_1) * 255.0;
    ulong param_2 = row;
    uint param_3 = (qbytes + (nb * 2u)) + (pair * 4u);
    float2 m = f16x2_at(param_2, param_3);
    bool has_b = ((2u * pair) + 1u) < nb;
    for (uint i = 0u; i < 4u; i++)
    {
        float4 lo = (unpack_unorm4x8_to_float(q[i] & 252645135u) * d.x) + float4(m.x);
        float4 hi = (unpack_unorm4x8_to_float((q[i] >> uint(4)) & 252645135u) * d.y) + float4(m.y);
        if (!has_b)
        {
            hi = float4(0.0);
        }
        wv[4u * i] = lo.x;
        wv[(4u * i) + 1u] = lo.y;
        wv[(4u * i) + 2u] = lo.z;
        wv[(4u * i) + 3u] = lo.w;
        wv[16u + (4u * i)] = hi.x;
        wv[(16u + (4u * i)) + 1u] = hi.y;
        wv[(16u + (4u * i)) + 2u] = hi.z;
        wv[(16u + (4u * i)) + 3u] = hi.w;
    }
}

static inline __attribute__((always_inline))
float chunk_dot(spvUnsafeArray<float, 32> wv, spvUnsafeArray<float4, 8> xs)
{
    float s = 0.0;
    for (uint k = 0u; k < 8u; k++)
    {
        spvUnsafeArray<float, 32> indexable;
        indexable = wv;
        spvUnsafeArray<float, 32> indexable_1;
        indexable_1 = wv;
        spvUnsafeArray<float, 32> indexable_2;
        indexable_2 = wv;
        spvUnsafeArray<float, 32> indexable_3;
        indexable_3 = wv;
        spvUnsafeArray<float4, 8> indexable_4;
        indexable_4 = xs;
        s += dot(float4(indexable[4u * k], indexable_1[(4u * k) + 1u], indexable_2[(4u * k) + 2u], indexable_3[(4u * k) + 3u]), indexable_4[k]);
    }
    return s;
}

kernel void splash_moe_down_q4(constant P& p [[buffer(0)]], uint3 gl_LocalInvocationID [[thread_position_in_threadgroup]], uint3 gl_WorkGroupID [[threadgroup_position_in_grid]], uint gl_SubgroupID [[simdgroup_index_in_threadgroup]], uint gl_NumSubgroups [[simdgroups_per_threadgroup]])
{
    threadgroup float partial[4][64];
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
    spvUnsafeArray<uint, 1> pairs;
    uint _460;
    spvUnsafeArray<ulong, 1> xrows;
    for (uint j = 0u; j < 1u; j++)
    {
        if (j < n)
        {
            _460 = uint(plan->v[(p.order_at + start) + j]);
        }
        else
        {
            _460 = 0u;
        }
        pairs[j] = _460;
        xrows[j] = p.x + (ulong(pairs[j] * p.cols) * 4ul);
    }
    if (r0 >= p.rows)
    {
        return;
    }
    spvUnsafeArray<spvUnsafeArray<float, 1>, 4> acc;
    for (uint r = 0u; r < 4u; r++)
    {
        for (uint j_1 = 0u; j_1 < 1u; j_1++)
        {
            acc[r][j_1] = 0.0;
        }
    }
    uint chunks = n_chunks(p);
    spvUnsafeArray<float4, 8> param_3;
    spvUnsafeArray<float, 32> param_6;
    for (uint c = tid; c < chunks; c += wg)
    {
        uint param = c;
        uint col0 = chunk_col(param);
        ulong param_1 = xrows[0];
        uint param_2 = col0;
        load_x(param_1, param_2, param_3, p);
        spvUnsafeArray<float4, 8> xs;
        xs = param_3;
        for (uint m = 0u; m < 1u; m++)
        {
            for (uint r_1 = 0u; r_1 < 4u; r_1++)
            {
                bool _571 = r_1 >= ROWS;
                bool _581;
                if (!_571)
                {
                    _581 = (r0 + r_1) >= p.rows;
                }
                else
                {
                    _581 = _571;
                }
                if (_581)
                {
                    break;
                }
                ulong param_4 = wbase[m] + (ulong(r0 + r_1) * ulong(p.row_bytes));
                uint param_5 = c;
                decode(param_4, param_5, param_6, p);
                spvUnsafeArray<float, 32> wv;
                wv = param_6;
                for (uint j_2 = 0u; j_2 < 1u; j_2++)
                {
                    if (j_2 >= n)
                    {
                        break;
                    }
                    uint _621 = (m * 4u) + r_1;
                    acc[_621][j_2] += chunk_dot(wv, xs);
                }
            }
        }
    }
    for (uint r_2 = 0u; r_2 < 4u; r_2++)
    {
        for (uint j_3 = 0u; j_3 < 1u; j_3++)
        {
            float s = simd_sum(acc[r_2][j_3]);
            bool _661 = simd_is_first();
            if (_661)
            {
                partial[(r_2 * 1u) + j_3][gl_SubgroupID] = s;
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
                s_1[m_1] += partial[(((m_1 * 4u) + r_3) * 1u) + j_4][i];
            }
        }
        (reinterpret_cast<device Floats*>(p.y))->v[((pairs[j_4] * p.rows) + r0) + r_3] = s_1[0];
    }
}

