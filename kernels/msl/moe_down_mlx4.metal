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

struct Chunk
{
    uint4 q;
    float4 s;
};

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

constant uint _293_tmp [[function_constant(0)]];
constant uint _293 = is_function_constant_defined(_293_tmp) ? _293_tmp : 1u;
constant uint3 gl_WorkGroupSize [[maybe_unused]] = uint3(_293, 1u, 1u);
constant uint GROUPS_tmp [[function_constant(3)]];
constant uint GROUPS = is_function_constant_defined(GROUPS_tmp) ? GROUPS_tmp : 1u;

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

constant uint _847 = (GROUPS * ROWS);

struct Floats
{
    float v[1];
};

constant uint CHECK_tmp [[function_constant(2)]];
constant uint CHECK = is_function_constant_defined(CHECK_tmp) ? CHECK_tmp : 1u;

static inline __attribute__((always_inline))
uint n_chunks(constant P& p)
{
    return ((p.cols + 32u) - 1u) / 32u;
}

static inline __attribute__((always_inline))
uint chunk_col(thread const uint& c)
{
    return c * 32u;
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
Chunk load_chunk(thread const ulong& row, thread const uint& c, constant P& p)
{
    Chunk k;
    k.q = (reinterpret_cast<device Uvec4s*>(row))->v[c];
    k.s = float4(0.0);
    uint g = (c * 32u) / 64u;
    uint _141;
    if (true)
    {
        _141 = p.cols / 2u;
    }
    else
    {
        _141 = p.cols;
    }
    uint qbytes = _141;
    uint groups = p.cols / 64u;
    ulong param = row;
    uint param_1 = qbytes + (g * 2u);
    float scale = bf16_at(param, param_1);
    ulong param_2 = row;
    uint param_3 = (qbytes + (groups * 2u)) + (g * 2u);
    float bias0 = bf16_at(param_2, param_3);
    float4 _176;
    if (true)
    {
        _176 = float4(scale, scale, bias0, bias0);
    }
    else
    {
        _176 = float4(scale, bias0, 0.0, 0.0);
    }
    k.s = _176;
    return k;
}

static inline __attribute__((always_inline))
void load_x(thread const ulong& xrow, thread const uint& col0, thread const uint& i, thread float4& a, thread float4& b)
{
    const device Vec4s* xv = reinterpret_cast<device Vec4s*>(xrow);
    float4 u = xv->v[(col0 >> uint(2)) + (2u * i)];
    float4 v = xv->v[((col0 >> uint(2)) + (2u * i)) + 1u];
    a = float4(u.x, u.z, v.x, v.z);
    b = float4(u.y, u.w, v.y, v.w);
}

static inline __attribute__((always_inline))
void nibbles(thread const uint& w, thread float4& a, thread float4& b)
{
    float2 a02 = float2(as_type<half2>(((w << uint(6)) & 62915520u) | 1006648320u));
    float2 a13 = float2(as_type<half2>(((w >> uint(2)) & 62915520u) | 1006648320u));
    float2 b02 = float2(as_type<half2>(((w << uint(2)) & 62915520u) | 1006648320u));
    float2 b13 = float2(as_type<half2>(((w >> uint(6)) & 62915520u) | 1006648320u));
    a = float4(a02.x, a13.x, a02.y, a13.y);
    b = float4(b02.x, b13.x, b02.y, b13.y);
}

kernel void splash_moe_down_mlx4(constant P& p [[buffer(0)]], uint3 gl_LocalInvocationID [[thread_position_in_threadgroup]], uint3 gl_WorkGroupID [[threadgroup_position_in_grid]])
{
    threadgroup float partial[1032];
    threadgroup float wg_red[256];
    threadgroup uint wg_red_u[256];
    uint tid = gl_LocalInvocationID.x;
    uint wg = gl_WorkGroupSize.x;
    uint lanes = wg / GROUPS;
    uint grp = tid / lanes;
    uint lane = tid % lanes;
    device Ints* plan = reinterpret_cast<device Ints*>(p.plan);
    uint tile = gl_WorkGroupID.x;
    bool direct = p.order_at == 0u;
    uint _331;
    if (direct)
    {
        _331 = tile;
    }
    else
    {
        _331 = 3u * tile;
    }
    uint e = uint(plan->v[_331]);
    uint _345;
    if (direct)
    {
        _345 = tile;
    }
    else
    {
        _345 = uint(plan->v[(3u * tile) + 1u]);
    }
    uint start = _345;
    uint _360;
    if (direct)
    {
        _360 = 1u;
    }
    else
    {
        _360 = uint(plan->v[(3u * tile) + 2u]);
    }
    uint n = _360;
    uint rg0 = (gl_WorkGroupID.y * GROUPS) * ROWS;
    uint r0 = rg0 + (grp * ROWS);
    const device Addrs* table = reinterpret_cast<device Addrs*>(p.w);
    spvUnsafeArray<ulong, 1> wbase;
    wbase[0] = table->v[(3u * e) + 2u];
    spvUnsafeArray<uint, 1> pairs;
    uint _417;
    uint _422;
    spvUnsafeArray<ulong, 1> xrows;
    for (uint j = 0u; j < 1u; j++)
    {
        if (j >= n)
        {
            _417 = 0u;
        }
        else
        {
            if (direct)
            {
                _422 = start + j;
            }
            else
            {
                _422 = uint(plan->v[(p.order_at + start) + j]);
            }
            _417 = _422;
        }
        pairs[j] = _417;
        xrows[j] = p.x + (ulong(pairs[j] * p.cols) * 4ul);
    }
    if (rg0 >= p.rows)
    {
        return;
    }
    spvUnsafeArray<ulong, 8> rowaddr;
    for (uint m = 0u; m < 1u; m++)
    {
        for (uint r = 0u; r < 8u; r++)
        {
            rowaddr[(m * 8u) + r] = wbase[m] + (ulong(min((r0 + r), (p.rows - 1u))) * ulong(p.row_bytes));
        }
    }
    spvUnsafeArray<spvUnsafeArray<float, 1>, 8> acc;
    for (uint s = 0u; s < 8u; s++)
    {
        for (uint j_1 = 0u; j_1 < 1u; j_1++)
        {
            acc[s][j_1] = 0.0;
        }
    }
    uint _545;
    if (r0 < p.rows)
    {
        _545 = n_chunks(p);
    }
    else
    {
        _545 = 0u;
    }
    uint chunks = _545;
    spvUnsafeArray<Chunk, 8> k;
    spvUnsafeArray<float2, 8> t;
    float4 param_6;
    float4 param_7;
    float4 param_9;
    float4 param_10;
    for (uint c = lane; c < chunks; c += lanes)
    {
        uint param = c;
        uint col0 = chunk_col(param);
        for (uint m_1 = 0u; m_1 < 1u; m_1++)
        {
            for (uint r_1 = 0u; r_1 < 8u; r_1++)
            {
                if (r_1 < ROWS)
                {
                    ulong param_1 = rowaddr[(m_1 * 8u) + r_1];
                    uint param_2 = c;
                    k[(m_1 * 8u) + r_1] = load_chunk(param_1, param_2, p);
                }
            }
        }
        for (uint s_1 = 0u; s_1 < 8u; s_1++)
        {
            t[s_1] = float2(0.0);
        }
        float4 sa = float4(0.0);
        float4 sb = float4(0.0);
        for (uint i = 0u; i < 4u; i++)
        {
            ulong param_3 = xrows[0];
            uint param_4 = col0;
            uint param_5 = i;
            load_x(param_3, param_4, param_5, param_6, param_7);
            float4 xa = param_6;
            float4 xb = param_7;
            sa += xa;
            sb += xb;
            for (uint m_2 = 0u; m_2 < 1u; m_2++)
            {
                for (uint r_2 = 0u; r_2 < 8u; r_2++)
                {
                    if (r_2 >= ROWS)
                    {
                        break;
                    }
                    uint s_2 = (m_2 * 8u) + r_2;
                    uint param_8 = k[s_2].q[i];
                    nibbles(param_8, param_9, param_10);
                    float4 fa = param_9;
                    float4 fb = param_10;
                    t[s_2] += float2(dot(fa, xa), dot(fb, xb));
                }
            }
        }
        float sxa = dot(sa, float4(1.0));
        float sxb = dot(sb, float4(1.0));
        for (uint m_3 = 0u; m_3 < 1u; m_3++)
        {
            for (uint r_3 = 0u; r_3 < 8u; r_3++)
            {
                if (r_3 >= ROWS)
                {
                    break;
                }
                uint s_3 = (m_3 * 8u) + r_3;
                float4 sc = k[s_3].s;
                acc[s_3][0] += (((((16.0 * sc.x) * (t[s_3].x - sxa)) + (sc.z * sxa)) + ((16.0 * sc.y) * (t[s_3].y - sxb))) + (sc.w * sxb));
            }
        }
    }
    for (uint s_4 = 0u; s_4 < 8u; s_4++)
    {
        for (uint j_2 = 0u; j_2 < 1u; j_2++)
        {
            if (((s_4 % 8u) >= ROWS) || (j_2 >= n))
            {
                break;
            }
            partial[(((s_4 * 1u) + j_2) * 129u) + tid] = acc[s_4][j_2];
        }
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    spvUnsafeArray<float, 1> v;
    for (uint o = tid; o < (_847 * n); o += wg)
    {
        uint g = o / (ROWS * n);
        uint r_4 = (o / n) % ROWS;
        uint j_3 = o % n;
        uint row = (rg0 + (g * ROWS)) + r_4;
        if (row >= p.rows)
        {
            continue;
        }
        for (uint m_4 = 0u; m_4 < 1u; m_4++)
        {
            v[m_4] = 0.0;
            uint at = (((((m_4 * 8u) + r_4) * 1u) + j_3) * 129u) + (g * lanes);
            for (uint i_1 = 0u; i_1 < lanes; i_1++)
            {
                v[m_4] += partial[at + i_1];
            }
        }
        (reinterpret_cast<device Floats*>(p.y))->v[(pairs[j_3] * p.rows) + row] = v[0];
    }
}

