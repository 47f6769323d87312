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
constant bool _218 = (CHECK == 0u);
constant uint _307_tmp [[function_constant(0)]];
constant uint _307 = is_function_constant_defined(_307_tmp) ? _307_tmp : 1u;
constant uint3 gl_WorkGroupSize [[maybe_unused]] = uint3(_307, 1u, 1u);
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

constant uint _848 = (GROUPS * ROWS);

struct Floats
{
    float v[1];
};

static inline __attribute__((always_inline))
uint n_chunks(constant P& p)
{
    return ((p.cols + 16u) - 1u) / 16u;
}

static inline __attribute__((always_inline))
uint chunk_col(thread const uint& c)
{
    return c * 16u;
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
Chunk load_chunk(thread const ulong& row, thread const uint& c, constant P& p)
{
    Chunk k;
    k.q = (reinterpret_cast<device Uvec4s*>(row))->v[c];
    k.s = float4(0.0);
    uint g = (c * 16u) / 64u;
    uint _152;
    if (false)
    {
        _152 = p.cols / 2u;
    }
    else
    {
        _152 = p.cols;
    }
    uint qbytes = _152;
    uint groups = p.cols / 64u;
    ulong param = row;
    uint param_1 = qbytes + (g * 2u);
    float scale = bf16_at(param, param_1);
    ulong param_2 = row;
    uint param_3 = (qbytes + (groups * 2u)) + (g * 2u);
    float bias0 = bf16_at(param_2, param_3);
    float4 _187;
    if (false)
    {
        _187 = float4(scale, scale, bias0, bias0);
    }
    else
    {
        _187 = float4(scale, bias0, 0.0, 0.0);
    }
    k.s = _187;
    return k;
}

static inline __attribute__((always_inline))
void load_x(thread const ulong& xrow, thread const uint& col0, thread const uint& i, thread float4& a, thread float4& b, constant P& p)
{
    const device Vec4s* xv = reinterpret_cast<device Vec4s*>(xrow);
    uint ca = col0 + (4u * i);
    bool _226;
    if (!_218)
    {
        _226 = ca < p.cols;
    }
    else
    {
        _226 = _218;
    }
    float4 _227;
    if (_226)
    {
        _227 = xv->v[ca >> uint(2)];
    }
    else
    {
        _227 = float4(0.0);
    }
    a = _227;
    b = float4(0.0);
}

static inline __attribute__((always_inline))
float4 bytes4(thread const uint& w)
{
    uint _239;
    if (true)
    {
        _239 = w << uint(15);
    }
    else
    {
        _239 = w >> uint(-15);
    }
    uint _255;
    if (true)
    {
        _255 = w << uint(7);
    }
    else
    {
        _255 = w >> uint(-7);
    }
    uint _269;
    if (false)
    {
        _269 = w << uint(-1);
    }
    else
    {
        _269 = w >> uint(1);
    }
    uint _282;
    if (false)
    {
        _282 = w << uint(-9);
    }
    else
    {
        _282 = w >> uint(9);
    }
    return float4(as_type<float>((_239 & 8355840u) | 1065353216u), as_type<float>((_255 & 8355840u) | 1065353216u), as_type<float>((_269 & 8355840u) | 1065353216u), as_type<float>((_282 & 8355840u) | 1065353216u));
}

static inline __attribute__((always_inline))
float silu(thread const float& x)
{
    return x / (1.0 + exp(-x));
}

kernel void splash_moe_gate_up_mlx8(constant P& p [[buffer(0)]], uint3 gl_LocalInvocationID [[thread_position_in_threadgroup]], uint3 gl_WorkGroupID [[threadgroup_position_in_grid]])
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
    uint _345;
    if (direct)
    {
        _345 = tile;
    }
    else
    {
        _345 = 3u * tile;
    }
    uint e = uint(plan->v[_345]);
    uint _360;
    if (direct)
    {
        _360 = tile;
    }
    else
    {
        _360 = uint(plan->v[(3u * tile) + 1u]);
    }
    uint start = _360;
    uint _375;
    if (direct)
    {
        _375 = 1u;
    }
    else
    {
        _375 = uint(plan->v[(3u * tile) + 2u]);
    }
    uint n = _375;
    uint rg0 = (gl_WorkGroupID.y * GROUPS) * ROWS;
    uint r0 = rg0 + (grp * ROWS);
    const device Addrs* table = reinterpret_cast<device Addrs*>(p.w);
    spvUnsafeArray<ulong, 2> wbase;
    wbase[0] = table->v[3u * e];
    wbase[1] = table->v[(3u * e) + 1u];
    spvUnsafeArray<uint, 1> pairs;
    uint _438;
    uint _443;
    spvUnsafeArray<ulong, 1> xrows;
    for (uint j = 0u; j < 1u; j++)
    {
        if (j >= n)
        {
            _438 = 0u;
        }
        else
        {
            if (direct)
            {
                _443 = start + j;
            }
            else
            {
                _443 = uint(plan->v[(p.order_at + start) + j]);
            }
            _438 = _443;
        }
        pairs[j] = _438;
        xrows[j] = p.x + (ulong((pairs[j] / p.top_k) * p.cols) * 4ul);
    }
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
        for (uint j_1 = 0u; j_1 < 1u; j_1++)
        {
            acc[s][j_1] = 0.0;
        }
    }
    uint _572;
    if (r0 < p.rows)
    {
        _572 = n_chunks(p);
    }
    else
    {
        _572 = 0u;
    }
    uint chunks = _572;
    spvUnsafeArray<Chunk, 8> k;
    spvUnsafeArray<float2, 8> t;
    float4 param_6;
    float4 param_7;
    for (uint c = lane; c < chunks; c += lanes)
    {
        uint param = c;
        uint col0 = chunk_col(param);
        for (uint m_1 = 0u; m_1 < 2u; m_1++)
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
            load_x(param_3, param_4, param_5, param_6, param_7, p);
            float4 xa = param_6;
            float4 xb = param_7;
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
                    uint param_8 = k[s_2].q[i];
                    t[s_2].x += dot(bytes4(param_8), xa);
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
                acc[s_3][0] += (((256.0 * sc.x) * (t[s_3].x - sxa)) + (sc.y * sxa));
            }
        }
    }
    for (uint s_4 = 0u; s_4 < 8u; s_4++)
    {
        for (uint j_2 = 0u; j_2 < 1u; j_2++)
        {
            if (((s_4 % 4u) >= ROWS) || (j_2 >= n))
            {
                break;
            }
            partial[(((s_4 * 1u) + j_2) * 129u) + tid] = acc[s_4][j_2];
        }
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    spvUnsafeArray<float, 2> v;
    for (uint o = tid; o < (_848 * n); o += wg)
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
        float param_9 = v[0];
        (reinterpret_cast<device Floats*>(p.y))->v[(pairs[j_3] * p.rows) + row] = silu(param_9) * v[1];
    }
}

