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
struct Floats;
struct Uvec4s;
struct Vec4s;
struct Ints;
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

struct Floats
{
    float v[1];
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

constant uint _580_tmp [[function_constant(0)]];
constant uint _580 = is_function_constant_defined(_580_tmp) ? _580_tmp : 1u;
constant uint3 gl_WorkGroupSize [[maybe_unused]] = uint3(_580, 1u, 1u);
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

constant uint _1127 = (GROUPS * ROWS);
constant uint CHECK_tmp [[function_constant(2)]];
constant uint CHECK = is_function_constant_defined(CHECK_tmp) ? CHECK_tmp : 1u;

static inline __attribute__((always_inline))
float workgroup_max(thread float& v, threadgroup float (&wg_red)[256], thread uint& gl_SubgroupID, thread uint& gl_NumSubgroups)
{
    v = simd_max(v);
    bool _159 = simd_is_first();
    if (_159)
    {
        wg_red[gl_SubgroupID] = v;
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    float s = wg_red[0];
    for (uint i = 1u; i < gl_NumSubgroups; i++)
    {
        s = fast::max(s, wg_red[i]);
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    return s;
}

static inline __attribute__((always_inline))
float workgroup_sum(thread float& v, threadgroup float (&wg_red)[256], thread uint& gl_SubgroupID, thread uint& gl_NumSubgroups)
{
    v = simd_sum(v);
    bool _120 = simd_is_first();
    if (_120)
    {
        wg_red[gl_SubgroupID] = v;
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    float s = 0.0;
    for (uint i = 0u; i < gl_NumSubgroups; i++)
    {
        s += wg_red[i];
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    return s;
}

static inline __attribute__((always_inline))
void route_token(thread const ulong& logits, thread const uint& E, thread const uint& k, thread const bool& weights, threadgroup float (&wg_red)[256], thread uint& gl_SubgroupID, thread uint& gl_NumSubgroups, thread uint3& gl_LocalInvocationID, threadgroup float (&route_l)[1024], threadgroup uint (&route_id)[64], threadgroup float (&route_w)[64])
{
    uint tid = gl_LocalInvocationID.x;
    uint wg = 1u;
    device Floats* l = reinterpret_cast<device Floats*>(logits);
    float mx = as_type<float>(0xff800000u /* -inf */);
    for (uint e = tid; e < E; e += wg)
    {
        route_l[e] = l->v[e];
        mx = fast::max(mx, route_l[e]);
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    for (uint e_1 = tid; e_1 < E; e_1 += wg)
    {
        float v = route_l[e_1];
        uint rank = 0u;
        for (uint f = 0u; (f < E) && (rank < k); f++)
        {
            float u = route_l[f];
            bool _276 = u > v;
            bool _287;
            if (!_276)
            {
                _287 = (u == v) && (f < e_1);
            }
            else
            {
                _287 = _276;
            }
            rank += uint(_287);
        }
        if (rank < k)
        {
            route_id[rank] = e_1;
        }
    }
    if (!weights)
    {
        threadgroup_barrier(mem_flags::mem_threadgroup);
        return;
    }
    float param = mx;
    float _316 = workgroup_max(param, wg_red, gl_SubgroupID, gl_NumSubgroups);
    mx = _316;
    float sum = 0.0;
    for (uint e_2 = tid; e_2 < E; e_2 += wg)
    {
        sum += exp(route_l[e_2] - mx);
    }
    float param_1 = sum;
    float _341 = workgroup_sum(param_1, wg_red, gl_SubgroupID, gl_NumSubgroups);
    sum = _341;
    if (tid == 0u)
    {
        float s = 0.0;
        for (uint j = 0u; j < k; j++)
        {
            route_w[j] = exp(route_l[route_id[j]] - mx) / sum;
            s += route_w[j];
        }
        for (uint j_1 = 0u; j_1 < k; j_1++)
        {
            route_w[j_1] /= s;
        }
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
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
    float _104;
    if ((byte & 2u) == 0u)
    {
        uint param = w;
        _104 = bf16_lo(param);
    }
    else
    {
        uint param_1 = w;
        _104 = bf16_hi(param_1);
    }
    return _104;
}

static inline __attribute__((always_inline))
Chunk load_chunk(thread const ulong& row, thread const uint& c, constant P& p)
{
    Chunk k;
    k.q = (reinterpret_cast<device Uvec4s*>(row))->v[c];
    k.s = float4(0.0);
    uint g = (c * 32u) / 64u;
    uint _433;
    if (true)
    {
        _433 = p.cols / 2u;
    }
    else
    {
        _433 = p.cols;
    }
    uint qbytes = _433;
    uint groups = p.cols / 64u;
    ulong param = row;
    uint param_1 = qbytes + (g * 2u);
    float scale = bf16_at(param, param_1);
    ulong param_2 = row;
    uint param_3 = (qbytes + (groups * 2u)) + (g * 2u);
    float bias0 = bf16_at(param_2, param_3);
    float4 _468;
    if (true)
    {
        _468 = float4(scale, scale, bias0, bias0);
    }
    else
    {
        _468 = float4(scale, bias0, 0.0, 0.0);
    }
    k.s = _468;
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
float silu(thread const float& x)
{
    return x / (1.0 + exp(-x));
}

kernel void splash_moe_pair_gate_up_mlx4(constant P& p [[buffer(0)]], uint gl_SubgroupID [[simdgroup_index_in_threadgroup]], uint gl_NumSubgroups [[simdgroups_per_threadgroup]], uint3 gl_LocalInvocationID [[thread_position_in_threadgroup]], uint3 gl_WorkGroupID [[threadgroup_position_in_grid]])
{
    threadgroup float wg_red[256];
    threadgroup float route_l[1024];
    threadgroup uint route_id[64];
    threadgroup float route_w[64];
    threadgroup float partial[1032];
    threadgroup uint wg_red_u[256];
    uint tid = gl_LocalInvocationID.x;
    uint wg = gl_WorkGroupSize.x;
    uint lanes = wg / GROUPS;
    uint grp = tid / lanes;
    uint lane = tid % lanes;
    uint pair = gl_WorkGroupID.x;
    uint routed = p.n * p.top_k;
    uint e = p.order_at;
    uint t = pair - routed;
    if (pair < routed)
    {
        bool first = gl_WorkGroupID.y == 0u;
        t = pair / p.top_k;
        ulong param = p.plan + (ulong(t * p.order_at) * 4ul);
        uint param_1 = p.order_at;
        uint param_2 = p.top_k;
        bool param_3 = first;
        route_token(param, param_1, param_2, param_3, wg_red, gl_SubgroupID, gl_NumSubgroups, gl_LocalInvocationID, route_l, route_id, route_w);
        e = route_id[pair % p.top_k];
        if (first && (tid == 0u))
        {
            (reinterpret_cast<device Ints*>(p.ids))->v[pair] = int(e);
            (reinterpret_cast<device Floats*>(p.weights))->v[pair] = route_w[pair % p.top_k];
        }
    }
    spvUnsafeArray<uint, 1> pairs;
    pairs[0] = pair;
    uint n = 1u;
    uint rg0 = (gl_WorkGroupID.y * GROUPS) * ROWS;
    uint r0 = rg0 + (grp * ROWS);
    const device Addrs* table = reinterpret_cast<device Addrs*>(p.w);
    spvUnsafeArray<ulong, 2> wbase;
    wbase[0] = table->v[3u * e];
    wbase[1] = table->v[(3u * e) + 1u];
    spvUnsafeArray<ulong, 1> xrows;
    xrows[0] = p.x + (ulong(t * p.x_stride) * 4ul);
    if (rg0 >= p.rows)
    {
        return;
    }
    spvUnsafeArray<ulong, 8> rowaddr;
    for (uint m = 0u; m < 2u; m++)
    {
        for (uint r = 0u; r < 4u; r++)
        {
            rowaddr[(m * 4u) + r] = wbase[m] + (ulong(min((r0 + r), (p.rows - 1u))) * ulong(p.row_bytes));
        }
    }
    spvUnsafeArray<spvUnsafeArray<float, 1>, 8> acc;
    for (uint s = 0u; s < 8u; s++)
    {
        for (uint j = 0u; j < 1u; j++)
        {
            acc[s][j] = 0.0;
        }
    }
    uint _829;
    if (r0 < p.rows)
    {
        _829 = n_chunks(p);
    }
    else
    {
        _829 = 0u;
    }
    uint chunks = _829;
    spvUnsafeArray<Chunk, 8> k;
    spvUnsafeArray<float2, 8> t_1;
    float4 param_10;
    float4 param_11;
    float4 param_13;
    float4 param_14;
    for (uint c = lane; c < chunks; c += lanes)
    {
        uint param_4 = c;
        uint col0 = chunk_col(param_4);
        for (uint m_1 = 0u; m_1 < 2u; m_1++)
        {
            for (uint r_1 = 0u; r_1 < 4u; r_1++)
            {
                if (r_1 < ROWS)
                {
                    ulong param_5 = rowaddr[(m_1 * 4u) + r_1];
                    uint param_6 = c;
                    k[(m_1 * 4u) + r_1] = load_chunk(param_5, param_6, p);
                }
            }
        }
        for (uint s_1 = 0u; s_1 < 8u; s_1++)
        {
            t_1[s_1] = float2(0.0);
        }
        float4 sa = float4(0.0);
        float4 sb = float4(0.0);
        for (uint i = 0u; i < 4u; i++)
        {
            ulong param_7 = xrows[0];
            uint param_8 = col0;
            uint param_9 = i;
            load_x(param_7, param_8, param_9, param_10, param_11);
            float4 xa = param_10;
            float4 xb = param_11;
            sa += xa;
            sb += xb;
            for (uint m_2 = 0u; m_2 < 2u; m_2++)
            {
                for (uint r_2 = 0u; r_2 < 4u; r_2++)
                {
                    if (r_2 >= ROWS)
                    {
                        break;
                    }
                    uint s_2 = (m_2 * 4u) + r_2;
                    uint param_12 = k[s_2].q[i];
                    nibbles(param_12, param_13, param_14);
                    float4 fa = param_13;
                    float4 fb = param_14;
                    t_1[s_2] += float2(dot(fa, xa), dot(fb, xb));
                }
            }
        }
        float sxa = dot(sa, float4(1.0));
        float sxb = dot(sb, float4(1.0));
        for (uint m_3 = 0u; m_3 < 2u; m_3++)
        {
            for (uint r_3 = 0u; r_3 < 4u; r_3++)
            {
                if (r_3 >= ROWS)
                {
                    break;
                }
                uint s_3 = (m_3 * 4u) + r_3;
                float4 sc = k[s_3].s;
                acc[s_3][0] += (((((16.0 * sc.x) * (t_1[s_3].x - sxa)) + (sc.z * sxa)) + ((16.0 * sc.y) * (t_1[s_3].y - sxb))) + (sc.w * sxb));
            }
        }
    }
    for (uint s_4 = 0u; s_4 < 8u; s_4++)
    {
        for (uint j_1 = 0u; j_1 < 1u; j_1++)
        {
            if (((s_4 % 4u) >= ROWS) || (j_1 >= n))
            {
                break;
            }
            partial[(((s_4 * 1u) + j_1) * 129u) + tid] = acc[s_4][j_1];
        }
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    spvUnsafeArray<float, 2> v;
    for (uint o = tid; o < (_1127 * n); o += wg)
    {
        uint g = o / (ROWS * n);
        uint r_4 = (o / n) % ROWS;
        uint j_2 = o % n;
        uint row = (rg0 + (g * ROWS)) + r_4;
        if (row >= p.rows)
        {
            continue;
        }
        for (uint m_4 = 0u; m_4 < 2u; m_4++)
        {
            v[m_4] = 0.0;
            uint at = (((((m_4 * 4u) + r_4) * 1u) + j_2) * 129u) + (g * lanes);
            for (uint i_1 = 0u; i_1 < lanes; i_1++)
            {
                v[m_4] += partial[at + i_1];
            }
        }
        float param_15 = v[0];
        (reinterpret_cast<device Floats*>(p.y))->v[(pairs[j_2] * p.rows) + row] = silu(param_15) * v[1];
    }
}

