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

constant uint CHECK_tmp [[function_constant(2)]];
constant uint CHECK = is_function_constant_defined(CHECK_tmp) ? CHECK_tmp : 1u;
constant bool _395 = (CHECK == 0u);
constant bool _416 = (CHECK == 0u);
constant uint _462_tmp [[function_constant(0)]];
constant uint _462 = is_function_constant_defined(_462_tmp) ? _462_tmp : 1u;
constant uint3 gl_WorkGroupSize [[maybe_unused]] = uint3(_462, 1u, 1u);
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

constant uint _968 = (GROUPS * ROWS);

static inline __attribute__((always_inline))
float workgroup_max(thread float& v, threadgroup float (&wg_red)[256], thread uint& gl_SubgroupID, thread uint& gl_NumSubgroups)
{
    v = simd_max(v);
    bool _107 = simd_is_first();
    if (_107)
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
    bool _65 = simd_is_first();
    if (_65)
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
            bool _225 = u > v;
            bool _236;
            if (!_225)
            {
                _236 = (u == v) && (f < e_1);
            }
            else
            {
                _236 = _225;
            }
            rank += uint(_236);
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
    float _265 = workgroup_max(param, wg_red, gl_SubgroupID, gl_NumSubgroups);
    mx = _265;
    float sum = 0.0;
    for (uint e_2 = tid; e_2 < E; e_2 += wg)
    {
        sum += exp(route_l[e_2] - mx);
    }
    float param_1 = sum;
    float _290 = workgroup_sum(param_1, wg_red, gl_SubgroupID, gl_NumSubgroups);
    sum = _290;
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
    bool _403;
    if (!_395)
    {
        _403 = ca < p.cols;
    }
    else
    {
        _403 = _395;
    }
    float4 _404;
    if (_403)
    {
        _404 = xv->v[ca >> uint(2)];
    }
    else
    {
        _404 = float4(0.0);
    }
    a = _404;
    bool _424;
    if (!_416)
    {
        _424 = cb < p.cols;
    }
    else
    {
        _424 = _416;
    }
    float4 _425;
    if (_424)
    {
        _425 = xv->v[cb >> uint(2)];
    }
    else
    {
        _425 = float4(0.0);
    }
    b = _425;
}

static inline __attribute__((always_inline))
float silu(thread const float& x)
{
    return x / (1.0 + exp(-x));
}

kernel void splash_moe_pair_gate_up_f16(constant P& p [[buffer(0)]], uint gl_SubgroupID [[simdgroup_index_in_threadgroup]], uint gl_NumSubgroups [[simdgroups_per_threadgroup]], uint3 gl_LocalInvocationID [[thread_position_in_threadgroup]], uint3 gl_WorkGroupID [[threadgroup_position_in_grid]])
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
    uint _709;
    if (r0 < p.rows)
    {
        _709 = n_chunks(p);
    }
    else
    {
        _709 = 0u;
    }
    uint chunks = _709;
    spvUnsafeArray<Chunk, 8> k;
    spvUnsafeArray<float4, 8> wa;
    spvUnsafeArray<float4, 8> wb;
    float4 param_8;
    float4 param_9;
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
                    k[(m_1 * 4u) + r_1] = load_chunk(param_5, param_6);
                }
            }
        }
        for (uint i = 0u; i < 1u; i++)
        {
            for (uint m_2 = 0u; m_2 < 2u; m_2++)
            {
                for (uint r_2 = 0u; r_2 < 4u; r_2++)
                {
                    if (r_2 >= ROWS)
                    {
                        break;
                    }
                    uint s_1 = (m_2 * 4u) + r_2;
                    float4 sc = k[s_1].s;
                    uint4 param_7 = k[s_1].q;
                    floats(param_7, param_8, param_9);
                    wa[s_1] = param_8;
                    wb[s_1] = param_9;
                }
            }
            for (uint j_1 = 0u; j_1 < 1u; j_1++)
            {
                if (j_1 >= n)
                {
                    break;
                }
                ulong param_10 = xrows[j_1];
                uint param_11 = col0;
                uint param_12 = i;
                load_x(param_10, param_11, param_12, param_13, param_14, p);
                float4 xa = param_13;
                float4 xb = param_14;
                for (uint m_3 = 0u; m_3 < 2u; m_3++)
                {
                    for (uint r_3 = 0u; r_3 < 4u; r_3++)
                    {
                        if (r_3 >= ROWS)
                        {
                            break;
                        }
                        uint s_2 = (m_3 * 4u) + r_3;
                        acc[s_2][j_1] += (dot(wa[s_2], xa) + dot(wb[s_2], xb));
                    }
                }
            }
        }
    }
    for (uint s_3 = 0u; s_3 < 8u; s_3++)
    {
        for (uint j_2 = 0u; j_2 < 1u; j_2++)
        {
            if (((s_3 % 4u) >= ROWS) || (j_2 >= n))
            {
                break;
            }
            partial[(((s_3 * 1u) + j_2) * 129u) + tid] = acc[s_3][j_2];
        }
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    spvUnsafeArray<float, 2> v;
    for (uint o = tid; o < (_968 * n); o += wg)
    {
        uint g = o / (ROWS * n);
        uint r_4 = (o / n) % ROWS;
        uint j_3 = o % n;
        uint row = (rg0 + (g * ROWS)) + r_4;
        if (row >= p.rows)
        {
            continue;
        }
        for (uint m_4 = 0u; m_4 < 2u; m_4++)
        {
            v[m_4] = 0.0;
            uint at = (((((m_4 * 4u) + r_4) * 1u) + j_3) * 129u) + (g * lanes);
            for (uint i_1 = 0u; i_1 < lanes; i_1++)
            {
                v[m_4] += partial[at + i_1];
            }
        }
        float param_15 = v[0];
        (reinterpret_cast<device Floats*>(p.y))->v[(pairs[j_3] * p.rows) + row] = silu(param_15) * v[1];
    }
}

