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
struct Floats;
struct Addrs;

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
    ulong ids;
    ulong weights;
    ulong score;
};

struct Uvec4s
{
    uint4 v[1];
};

struct Vec4s
{
    float4 v[1];
};

constant uint _405_tmp [[function_constant(0)]];
constant uint _405 = is_function_constant_defined(_405_tmp) ? _405_tmp : 1u;
constant uint3 gl_WorkGroupSize [[maybe_unused]] = uint3(_405, 1u, 1u);
constant uint GROUPS_tmp [[function_constant(3)]];
constant uint GROUPS = is_function_constant_defined(GROUPS_tmp) ? GROUPS_tmp : 1u;
constant uint ROWS_tmp [[function_constant(1)]];
constant uint ROWS = is_function_constant_defined(ROWS_tmp) ? ROWS_tmp : 2u;

struct Ints
{
    int v[1];
};

struct Floats
{
    float v[1];
};

struct Addrs
{
    ulong v[1];
};

constant uint _818 = (GROUPS * ROWS);
constant uint CHECK_tmp [[function_constant(2)]];
constant uint CHECK = is_function_constant_defined(CHECK_tmp) ? CHECK_tmp : 1u;

static inline __attribute__((always_inline))
float sigmoid(thread const float& x)
{
    return 1.0 / (1.0 + exp(-x));
}

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
    float _97;
    if ((byte & 2u) == 0u)
    {
        uint param = w;
        _97 = bf16_lo(param);
    }
    else
    {
        uint param_1 = w;
        _97 = bf16_hi(param_1);
    }
    return _97;
}

static inline __attribute__((always_inline))
Chunk load_chunk(thread const ulong& row, thread const uint& c, constant P& p)
{
    Chunk k;
    k.q = (reinterpret_cast<device Uvec4s*>(row))->v[c];
    k.s = float4(0.0);
    uint g = (c * 32u) / 64u;
    uint _159;
    if (true)
    {
        _159 = p.cols / 2u;
    }
    else
    {
        _159 = p.cols;
    }
    uint qbytes = _159;
    uint groups = p.cols / 64u;
    ulong param = row;
    uint param_1 = qbytes + (g * 2u);
    float scale = bf16_at(param, param_1);
    ulong param_2 = row;
    uint param_3 = (qbytes + (groups * 2u)) + (g * 2u);
    float bias0 = bf16_at(param_2, param_3);
    float4 _194;
    if (true)
    {
        _194 = float4(scale, scale, bias0, bias0);
    }
    else
    {
        _194 = float4(scale, bias0, 0.0, 0.0);
    }
    k.s = _194;
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

static inline __attribute__((always_inline))
float chunk_dot(thread const Chunk& k, thread const ulong& xrow, thread const uint& col0)
{
    float2 t = float2(0.0);
    float4 sa = float4(0.0);
    float4 sb = float4(0.0);
    float4 param_3;
    float4 param_4;
    float4 param_6;
    float4 param_7;
    for (uint i = 0u; i < 4u; i++)
    {
        ulong param = xrow;
        uint param_1 = col0;
        uint param_2 = i;
        load_x(param, param_1, param_2, param_3, param_4);
        float4 xa = param_3;
        float4 xb = param_4;
        sa += xa;
        sb += xb;
        uint param_5 = k.q[i];
        nibbles(param_5, param_6, param_7);
        float4 fa = param_6;
        float4 fb = param_7;
        t += float2(dot(fa, xa), dot(fb, xb));
    }
    float sxa = dot(sa, float4(1.0));
    float sxb = dot(sb, float4(1.0));
    float4 sc = k.s;
    return ((((16.0 * sc.x) * (t.x - sxa)) + (sc.z * sxa)) + ((16.0 * sc.y) * (t.y - sxb))) + (sc.w * sxb);
}

kernel void splash_moe_pair_down_mlx4(constant P& p [[buffer(0)]], uint3 gl_LocalInvocationID [[thread_position_in_threadgroup]], uint3 gl_WorkGroupID [[threadgroup_position_in_grid]])
{
    threadgroup uint src_e[65];
    threadgroup uint src_h[65];
    threadgroup float src_w[65];
    threadgroup float partial[1032];
    threadgroup float wg_red[256];
    threadgroup uint wg_red_u[256];
    uint tid = gl_LocalInvocationID.x;
    uint wg = gl_WorkGroupSize.x;
    uint lanes = wg / GROUPS;
    uint grp = tid / lanes;
    uint lane = tid % lanes;
    uint t = gl_WorkGroupID.x;
    uint rg0 = (gl_WorkGroupID.y * GROUPS) * ROWS;
    uint r0 = rg0 + (grp * ROWS);
    if (rg0 >= p.rows)
    {
        return;
    }
    uint k = p.top_k;
    uint sources = k + uint(p.score != 0ul);
    if (tid == 0u)
    {
        device Ints* ids = reinterpret_cast<device Ints*>(p.ids);
        for (uint j = 0u; j < k; j++)
        {
            uint e = uint(ids->v[(t * k) + j]);
            uint i = j;
            for (;;)
            {
                bool _498 = i > 0u;
                bool _512;
                if (_498)
                {
                    _512 = src_e[i - 1u] > e;
                }
                else
                {
                    _512 = _498;
                }
                if (_512)
                {
                    src_e[i] = src_e[i - 1u];
                    src_h[i] = src_h[i - 1u];
                    i--;
                    continue;
                }
                else
                {
                    break;
                }
            }
            src_e[i] = e;
            src_h[i] = (t * k) + j;
        }
        for (uint j_1 = 0u; j_1 < k; j_1++)
        {
            src_w[j_1] = (reinterpret_cast<device Floats*>(p.weights))->v[src_h[j_1]];
        }
        if (sources > k)
        {
            src_e[k] = p.order_at;
            src_h[k] = (p.n * k) + t;
            float param = (reinterpret_cast<device Floats*>(p.score))->v[t];
            src_w[k] = sigmoid(param);
        }
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    const device Addrs* table = reinterpret_cast<device Addrs*>(p.w);
    spvUnsafeArray<float, 8> acc;
    for (uint r = 0u; r < 8u; r++)
    {
        acc[r] = 0.0;
    }
    uint _629;
    if (r0 < p.rows)
    {
        _629 = n_chunks(p);
    }
    else
    {
        _629 = 0u;
    }
    uint chunks = _629;
    spvUnsafeArray<Chunk, 8> kc;
    for (uint batch = sources, s0 = 0u; s0 < sources; s0 += batch)
    {
        uint s1 = min(sources, (s0 + batch));
        for (uint it = lane; it < ((s1 - s0) * chunks); it += lanes)
        {
            uint s = s0 + (it / chunks);
            uint c = it % chunks;
            uint param_1 = c;
            uint col0 = chunk_col(param_1);
            ulong base = table->v[(3u * src_e[s]) + 2u];
            float ws = src_w[s];
            for (uint r_1 = 0u; r_1 < 8u; r_1++)
            {
                if (r_1 < ROWS)
                {
                    ulong param_2 = base + (ulong(min((r0 + r_1), (p.rows - 1u))) * ulong(p.row_bytes));
                    uint param_3 = c;
                    kc[r_1] = load_chunk(param_2, param_3, p);
                }
            }
            ulong xrow = p.x + (ulong(src_h[s] * p.x_stride) * 4ul);
            for (uint r_2 = 0u; r_2 < 8u; r_2++)
            {
                if (r_2 >= ROWS)
                {
                    break;
                }
                Chunk param_4 = kc[r_2];
                ulong param_5 = xrow;
                uint param_6 = col0;
                acc[r_2] += (ws * chunk_dot(param_4, param_5, param_6));
            }
        }
    }
    for (uint r_3 = 0u; r_3 < 8u; r_3++)
    {
        if (r_3 < ROWS)
        {
            partial[(r_3 * 129u) + tid] = acc[r_3];
        }
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    for (uint o = tid; o < _818; o += wg)
    {
        uint g = o / ROWS;
        uint r_4 = o % ROWS;
        uint row = (rg0 + (g * ROWS)) + r_4;
        if (row >= p.rows)
        {
            continue;
        }
        float v = 0.0;
        for (uint i_1 = 0u; i_1 < lanes; i_1++)
        {
            v += partial[((r_4 * 129u) + (g * lanes)) + i_1];
        }
        (reinterpret_cast<device Floats*>(p.y))->v[(t * p.y_stride) + row] = v;
    }
}

