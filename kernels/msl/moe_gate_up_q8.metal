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
struct Uints;
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

struct Uints
{
    uint v[1];
};

struct Vec4s
{
    float4 v[1];
};

constant uint CHECK_tmp [[function_constant(2)]];
constant uint CHECK = is_function_constant_defined(CHECK_tmp) ? CHECK_tmp : 1u;
constant bool _164 = (CHECK == 0u);
constant uint _257_tmp [[function_constant(0)]];
constant uint _257 = is_function_constant_defined(_257_tmp) ? _257_tmp : 1u;
constant uint3 gl_WorkGroupSize [[maybe_unused]] = uint3(_257, 1u, 1u);
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

constant uint _796 = (GROUPS * ROWS);

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
float f16_at(thread const uint& w, thread const uint& half_index)
{
    uint _53;
    if (half_index == 0u)
    {
        _53 = w;
    }
    else
    {
        _53 = w >> uint(16);
    }
    return float2(as_type<half2>(_53)).x;
}

static inline __attribute__((always_inline))
Chunk load_chunk(thread const ulong& row, thread const uint& c, constant P& p)
{
    Chunk k;
    k.q = (reinterpret_cast<device Uvec4s*>(row))->v[c];
    k.s = float4(0.0);
    uint nb = ((p.cols + 32u) - 1u) / 32u;
    uint db = (nb * 32u) + ((c >> uint(1)) * 2u);
    uint param = (reinterpret_cast<device Uints*>(row))->v[db >> uint(2)];
    uint param_1 = (db >> uint(1)) & 1u;
    k.s = float4(f16_at(param, param_1), 0.0, 0.0, 0.0);
    return k;
}

static inline __attribute__((always_inline))
void load_x(thread const ulong& xrow, thread const uint& col0, thread const uint& i, thread float4& a, thread float4& b, constant P& p)
{
    const device Vec4s* xv = reinterpret_cast<device Vec4s*>(xrow);
    uint ca = col0 + (4u * i);
    bool _172;
    if (!_164)
    {
        _172 = ca < p.cols;
    }
    else
    {
        _172 = _164;
    }
    float4 _173;
    if (_172)
    {
        _173 = xv->v[ca >> uint(2)];
    }
    else
    {
        _173 = float4(0.0);
    }
    a = _173;
    b = float4(0.0);
}

static inline __attribute__((always_inline))
float4 bytes4(thread uint& w)
{
    w ^= 2155905152u;
    uint _188;
    if (true)
    {
        _188 = w << uint(15);
    }
    else
    {
        _188 = w >> uint(-15);
    }
    uint _204;
    if (true)
    {
        _204 = w << uint(7);
    }
    else
    {
        _204 = w >> uint(-7);
    }
    uint _219;
    if (false)
    {
        _219 = w << uint(-1);
    }
    else
    {
        _219 = w >> uint(1);
    }
    uint _232;
    if (false)
    {
        _232 = w << uint(-9);
    }
    else
    {
        _232 = w >> uint(9);
    }
    return float4(as_type<float>((_188 & 8355840u) | 1065353216u), as_type<float>((_204 & 8355840u) | 1065353216u), as_type<float>((_219 & 8355840u) | 1065353216u), as_type<float>((_232 & 8355840u) | 1065353216u));
}

static inline __attribute__((always_inline))
float silu(thread const float& x)
{
    return x / (1.0 + exp(-x));
}

kernel void splash_moe_gate_up_q8(constant P& p [[buffer(0)]], uint3 gl_LocalInvocationID [[thread_position_in_threadgroup]], uint3 gl_WorkGroupID [[threadgroup_position_in_grid]])
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
    uint _295;
    if (direct)
    {
        _295 = tile;
    }
    else
    {
        _295 = 3u * tile;
    }
    uint e = uint(plan->v[_295]);
    uint _310;
    if (direct)
    {
        _310 = tile;
    }
    else
    {
        _310 = uint(plan->v[(3u * tile) + 1u]);
    }
    uint start = _310;
    uint _325;
    if (direct)
    {
        _325 = 1u;
    }
    else
    {
        _325 = uint(plan->v[(3u * tile) + 2u]);
    }
    uint n = _325;
    uint rg0 = (gl_WorkGroupID.y * GROUPS) * ROWS;
    uint r0 = rg0 + (grp * ROWS);
    const device Addrs* table = reinterpret_cast<device Addrs*>(p.w);
    spvUnsafeArray<ulong, 2> wbase;
    wbase[0] = table->v[3u * e];
    wbase[1] = table->v[(3u * e) + 1u];
    spvUnsafeArray<uint, 1> pairs;
    uint _388;
    uint _393;
    spvUnsafeArray<ulong, 1> xrows;
    for (uint j = 0u; j < 1u; j++)
    {
        if (j >= n)
        {
            _388 = 0u;
        }
        else
        {
            if (direct)
            {
                _393 = start + j;
            }
            else
            {
                _393 = uint(plan->v[(p.order_at + start) + j]);
            }
            _388 = _393;
        }
        pairs[j] = _388;
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
    uint _522;
    if (r0 < p.rows)
    {
        _522 = n_chunks(p);
    }
    else
    {
        _522 = 0u;
    }
    uint chunks = _522;
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
                    float4 _663 = bytes4(param_8);
                    t[s_2].x += dot(_663, xa);
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
                acc[s_3][0] += (sc.x * ((256.0 * (t[s_3].x - sxa)) - (128.0 * sxa)));
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
    for (uint o = tid; o < (_796 * n); o += wg)
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

