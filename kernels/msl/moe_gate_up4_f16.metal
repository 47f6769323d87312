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
constant bool _114 = (CHECK == 0u);
constant bool _135 = (CHECK == 0u);
constant uint _187_tmp [[function_constant(0)]];
constant uint _187 = is_function_constant_defined(_187_tmp) ? _187_tmp : 1u;
constant uint3 gl_WorkGroupSize [[maybe_unused]] = uint3(_187, 1u, 1u);
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

constant uint _709 = (GROUPS * ROWS);

struct Floats
{
    float v[1];
};

static inline __attribute__((always_inline))
uint n_chunks(constant P& p)
{
    return ((p.cols + 8u) - 1u) / 8u;
}

static inline __attribute__((always_inline))
uint chunk_col(thread const uint& c)
{
    return c * 8u;
}

static inline __attribute__((always_inline))
Chunk load_chunk(thread const ulong& row, thread const uint& c)
{
    Chunk k;
    k.q = (reinterpret_cast<device Uvec4s*>(row))->v[c];
    k.s = float4(0.0);
    return k;
}

static inline __attribute__((always_inline))
void floats(thread const uint4& q, thread float4& a, thread float4& b)
{
    a = float4(float2(as_type<half2>(q.x)), float2(as_type<half2>(q.y)));
    b = float4(float2(as_type<half2>(q.z)), float2(as_type<half2>(q.w)));
}

static inline __attribute__((always_inline))
void load_x(thread const ulong& xrow, thread const uint& col0, thread const uint& i, thread float4& a, thread float4& b, constant P& p)
{
    const device Vec4s* xv = reinterpret_cast<device Vec4s*>(xrow);
    uint ca = col0 + (8u * i);
    uint cb = ca + 4u;
    bool _122;
    if (!_114)
    {
        _122 = ca < p.cols;
    }
    else
    {
        _122 = _114;
    }
    float4 _123;
    if (_122)
    {
        _123 = xv->v[ca >> uint(2)];
    }
    else
    {
        _123 = float4(0.0);
    }
    a = _123;
    bool _143;
    if (!_135)
    {
        _143 = cb < p.cols;
    }
    else
    {
        _143 = _135;
    }
    float4 _144;
    if (_143)
    {
        _144 = xv->v[cb >> uint(2)];
    }
    else
    {
        _144 = float4(0.0);
    }
    b = _144;
}

static inline __attribute__((always_inline))
float silu(thread const float& x)
{
    return x / (1.0 + exp(-x));
}

kernel void splash_moe_gate_up4_f16(constant P& p [[buffer(0)]], uint3 gl_LocalInvocationID [[thread_position_in_threadgroup]], uint3 gl_WorkGroupID [[threadgroup_position_in_grid]])
{
    threadgroup float partial[2064];
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
    uint _225;
    if (direct)
    {
        _225 = tile;
    }
    else
    {
        _225 = 3u * tile;
    }
    uint e = uint(plan->v[_225]);
    uint _239;
    if (direct)
    {
        _239 = tile;
    }
    else
    {
        _239 = uint(plan->v[(3u * tile) + 1u]);
    }
    uint start = _239;
    uint _254;
    if (direct)
    {
        _254 = 1u;
    }
    else
    {
        _254 = uint(plan->v[(3u * tile) + 2u]);
    }
    uint n = _254;
    uint rg0 = (gl_WorkGroupID.y * GROUPS) * ROWS;
    uint r0 = rg0 + (grp * ROWS);
    const device Addrs* table = reinterpret_cast<device Addrs*>(p.w);
    spvUnsafeArray<ulong, 2> wbase;
    wbase[0] = table->v[3u * e];
    wbase[1] = table->v[(3u * e) + 1u];
    spvUnsafeArray<uint, 4> pairs;
    uint _317;
    uint _322;
    spvUnsafeArray<ulong, 4> xrows;
    for (uint j = 0u; j < 4u; j++)
    {
        if (j >= n)
        {
            _317 = 0u;
        }
        else
        {
            if (direct)
            {
                _322 = start + j;
            }
            else
            {
                _322 = uint(plan->v[(p.order_at + start) + j]);
            }
            _317 = _322;
        }
        pairs[j] = _317;
        xrows[j] = p.x + (ulong((pairs[j] / p.top_k) * p.cols) * 4ul);
    }
    if (rg0 >= p.rows)
    {
        return;
    }
    spvUnsafeArray<ulong, 4> rowaddr;
    for (uint m = 0u; m < 2u; m++)
    {
        for (uint r = 0u; r < 2u; r++)
        {
            rowaddr[(m * 2u) + r] = wbase[m] + (ulong(min((r0 + r), (p.rows - 1u))) * ulong(p.row_bytes));
        }
    }
    spvUnsafeArray<spvUnsafeArray<float, 4>, 4> acc;
    for (uint s = 0u; s < 4u; s++)
    {
        for (uint j_1 = 0u; j_1 < 4u; j_1++)
        {
            acc[s][j_1] = 0.0;
        }
    }
    uint _448;
    if (r0 < p.rows)
    {
        _448 = n_chunks(p);
    }
    else
    {
        _448 = 0u;
    }
    uint chunks = _448;
    spvUnsafeArray<Chunk, 4> k;
    spvUnsafeArray<float4, 4> wa;
    spvUnsafeArray<float4, 4> wb;
    float4 param_4;
    float4 param_5;
    float4 param_9;
    float4 param_10;
    for (uint c = lane; c < chunks; c += lanes)
    {
        uint param = c;
        uint col0 = chunk_col(param);
        for (uint m_1 = 0u; m_1 < 2u; m_1++)
        {
            for (uint r_1 = 0u; r_1 < 2u; r_1++)
            {
                if (r_1 < ROWS)
                {
                    ulong param_1 = rowaddr[(m_1 * 2u) + r_1];
                    uint param_2 = c;
                    k[(m_1 * 2u) + r_1] = load_chunk(param_1, param_2);
                }
            }
        }
        for (uint i = 0u; i < 1u; i++)
        {
            for (uint m_2 = 0u; m_2 < 2u; m_2++)
            {
                for (uint r_2 = 0u; r_2 < 2u; r_2++)
                {
                    if (r_2 >= ROWS)
                    {
                        break;
                    }
                    uint s_1 = (m_2 * 2u) + r_2;
                    float4 sc = k[s_1].s;
                    uint4 param_3 = k[s_1].q;
                    floats(param_3, param_4, param_5);
                    wa[s_1] = param_4;
                    wb[s_1] = param_5;
                }
            }
            for (uint j_2 = 0u; j_2 < 4u; j_2++)
            {
                if (j_2 >= n)
                {
                    break;
                }
                ulong param_6 = xrows[j_2];
                uint param_7 = col0;
                uint param_8 = i;
                load_x(param_6, param_7, param_8, param_9, param_10, p);
                float4 xa = param_9;
                float4 xb = param_10;
                for (uint m_3 = 0u; m_3 < 2u; m_3++)
                {
                    for (uint r_3 = 0u; r_3 < 2u; r_3++)
                    {
                        if (r_3 >= ROWS)
                        {
                            break;
                        }
                        uint s_2 = (m_3 * 2u) + r_3;
                        acc[s_2][j_2] += (dot(wa[s_2], xa) + dot(wb[s_2], xb));
                    }
                }
            }
        }
    }
    for (uint s_3 = 0u; s_3 < 4u; s_3++)
    {
        for (uint j_3 = 0u; j_3 < 4u; j_3++)
        {
            if (((s_3 % 2u) >= ROWS) || (j_3 >= n))
            {
                break;
            }
            partial[(((s_3 * 4u) + j_3) * 129u) + tid] = acc[s_3][j_3];
        }
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    spvUnsafeArray<float, 2> v;
    for (uint o = tid; o < (_709 * n); o += wg)
    {
        uint g = o / (ROWS * n);
        uint r_4 = (o / n) % ROWS;
        uint j_4 = o % n;
        uint row = (rg0 + (g * ROWS)) + r_4;
        if (row >= p.rows)
        {
            continue;
        }
        for (uint m_4 = 0u; m_4 < 2u; m_4++)
        {
            v[m_4] = 0.0;
            uint at = (((((m_4 * 2u) + r_4) * 4u) + j_4) * 129u) + (g * lanes);
            for (uint i_1 = 0u; i_1 < lanes; i_1++)
            {
                v[m_4] += partial[at + i_1];
            }
        }
        float param_11 = v[0];
        (reinterpret_cast<device Floats*>(p.y))->v[(pairs[j_4] * p.rows) + row] = silu(param_11) * v[1];
    }
}

