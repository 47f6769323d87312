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

constant uint CHECK_tmp [[function_constant(2)]];
constant uint CHECK = is_function_constant_defined(CHECK_tmp) ? CHECK_tmp : 1u;
constant bool _224 = (CHECK == 0u);
constant bool _244 = (CHECK == 0u);
constant uint _315_tmp [[function_constant(0)]];
constant uint _315 = is_function_constant_defined(_315_tmp) ? _315_tmp : 1u;
constant uint3 gl_WorkGroupSize [[maybe_unused]] = uint3(_315, 1u, 1u);
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

constant uint _863 = (GROUPS * ROWS);

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
Chunk load_chunk(thread const ulong& row, thread const uint& c, constant P& p)
{
    Chunk k;
    k.q = (reinterpret_cast<device Uvec4s*>(row))->v[c];
    k.s = float4(0.0);
    uint nb = ((p.cols + 32u) - 1u) / 32u;
    uint pair = c >> uint(1);
    uint qbytes = ((nb + 1u) / 2u) * 32u;
    ulong param = row;
    uint param_1 = qbytes + (pair * 4u);
    float2 d = f16x2_at(param, param_1);
    ulong param_2 = row;
    uint param_3 = (qbytes + (nb * 2u)) + (pair * 4u);
    float2 m = f16x2_at(param_2, param_3);
    bool two = ((2u * pair) + 1u) < nb;
    float _186;
    if (two)
    {
        _186 = d.y;
    }
    else
    {
        _186 = 0.0;
    }
    float _196;
    if (two)
    {
        _196 = m.y;
    }
    else
    {
        _196 = 0.0;
    }
    k.s = float4(d.x, _186, m.x, _196);
    return k;
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

static inline __attribute__((always_inline))
void load_x(thread const ulong& xrow, thread const uint& col0, thread const uint& i, thread float4& a, thread float4& b, constant P& p)
{
    const device Vec4s* xv = reinterpret_cast<device Vec4s*>(xrow);
    uint ca = col0 + (4u * i);
    uint cb = ca + 32u;
    bool _232;
    if (!_224)
    {
        _232 = ca < p.cols;
    }
    else
    {
        _232 = _224;
    }
    float4 _233;
    if (_232)
    {
        _233 = xv->v[ca >> uint(2)];
    }
    else
    {
        _233 = float4(0.0);
    }
    a = _233;
    bool _252;
    if (!_244)
    {
        _252 = cb < p.cols;
    }
    else
    {
        _252 = _244;
    }
    float4 _253;
    if (_252)
    {
        _253 = xv->v[cb >> uint(2)];
    }
    else
    {
        _253 = float4(0.0);
    }
    b = _253;
}

kernel void splash_moe_down4_q4(constant P& p [[buffer(0)]], uint3 gl_LocalInvocationID [[thread_position_in_threadgroup]], uint3 gl_WorkGroupID [[threadgroup_position_in_grid]])
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
    uint _352;
    if (direct)
    {
        _352 = tile;
    }
    else
    {
        _352 = 3u * tile;
    }
    uint e = uint(plan->v[_352]);
    uint _367;
    if (direct)
    {
        _367 = tile;
    }
    else
    {
        _367 = uint(plan->v[(3u * tile) + 1u]);
    }
    uint start = _367;
    uint _382;
    if (direct)
    {
        _382 = 1u;
    }
    else
    {
        _382 = uint(plan->v[(3u * tile) + 2u]);
    }
    uint n = _382;
    uint rg0 = (gl_WorkGroupID.y * GROUPS) * ROWS;
    uint r0 = rg0 + (grp * ROWS);
    const device Addrs* table = reinterpret_cast<device Addrs*>(p.w);
    spvUnsafeArray<ulong, 1> wbase;
    wbase[0] = table->v[(3u * e) + 2u];
    spvUnsafeArray<uint, 4> pairs;
    uint _439;
    uint _444;
    spvUnsafeArray<ulong, 4> xrows;
    for (uint j = 0u; j < 4u; j++)
    {
        if (j >= n)
        {
            _439 = 0u;
        }
        else
        {
            if (direct)
            {
                _444 = start + j;
            }
            else
            {
                _444 = uint(plan->v[(p.order_at + start) + j]);
            }
            _439 = _444;
        }
        pairs[j] = _439;
        xrows[j] = p.x + (ulong(pairs[j] * p.cols) * 4ul);
    }
    if (rg0 >= p.rows)
    {
        return;
    }
    spvUnsafeArray<ulong, 4> rowaddr;
    for (uint m = 0u; m < 1u; m++)
    {
        for (uint r = 0u; r < 4u; r++)
        {
            rowaddr[(m * 4u) + r] = wbase[m] + (ulong(min((r0 + r), (p.rows - 1u))) * ulong(p.row_bytes));
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
    uint _566;
    if (r0 < p.rows)
    {
        _566 = n_chunks(p);
    }
    else
    {
        _566 = 0u;
    }
    uint chunks = _566;
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
        for (uint m_1 = 0u; m_1 < 1u; m_1++)
        {
            for (uint r_1 = 0u; r_1 < 4u; r_1++)
            {
                if (r_1 < ROWS)
                {
                    ulong param_1 = rowaddr[(m_1 * 4u) + r_1];
                    uint param_2 = c;
                    k[(m_1 * 4u) + r_1] = load_chunk(param_1, param_2, p);
                }
            }
        }
        for (uint i = 0u; i < 4u; i++)
        {
            for (uint m_2 = 0u; m_2 < 1u; m_2++)
            {
                for (uint r_2 = 0u; r_2 < 4u; r_2++)
                {
                    if (r_2 >= ROWS)
                    {
                        break;
                    }
                    uint s_1 = (m_2 * 4u) + r_2;
                    float4 sc = k[s_1].s;
                    uint param_3 = k[s_1].q[i];
                    nibbles(param_3, param_4, param_5);
                    wa[s_1] = param_4;
                    wb[s_1] = param_5;
                    wa[s_1] = (wa[s_1] * (16.0 * sc.x)) + float4(sc.z - (16.0 * sc.x));
                    wb[s_1] = (wb[s_1] * (16.0 * sc.y)) + float4(sc.w - (16.0 * sc.y));
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
                for (uint m_3 = 0u; m_3 < 1u; m_3++)
                {
                    for (uint r_3 = 0u; r_3 < 4u; r_3++)
                    {
                        if (r_3 >= ROWS)
                        {
                            break;
                        }
                        uint s_2 = (m_3 * 4u) + r_3;
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
            if (((s_3 % 4u) >= ROWS) || (j_3 >= n))
            {
                break;
            }
            partial[(((s_3 * 4u) + j_3) * 129u) + tid] = acc[s_3][j_3];
        }
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    spvUnsafeArray<float, 1> v;
    for (uint o = tid; o < (_863 * n); o += wg)
    {
        uint g = o / (ROWS * n);
        uint r_4 = (o / n) % ROWS;
        uint j_4 = o % n;
        uint row = (rg0 + (g * ROWS)) + r_4;
        if (row >= p.rows)
        {
            continue;
        }
        for (uint m_4 = 0u; m_4 < 1u; m_4++)
        {
            v[m_4] = 0.0;
            uint at = (((((m_4 * 4u) + r_4) * 4u) + j_4) * 129u) + (g * lanes);
            for (uint i_1 = 0u; i_1 < lanes; i_1++)
            {
                v[m_4] += partial[at + i_1];
            }
        }
        (reinterpret_cast<device Floats*>(p.y))->v[(pairs[j_4] * p.rows) + row] = v[0];
    }
}

