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
struct Vec4s;
struct Uvec4s;
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

struct Vec4s
{
    float4 v[1];
};

constant uint CHECK_tmp [[function_constant(2)]];
constant uint CHECK = is_function_constant_defined(CHECK_tmp) ? CHECK_tmp : 1u;
constant bool _165 = (CHECK == 0u);

struct Uvec4s
{
    uint4 v[1];
};

constant uint _488_tmp [[function_constant(0)]];
constant uint _488 = is_function_constant_defined(_488_tmp) ? _488_tmp : 1u;
constant uint3 gl_WorkGroupSize [[maybe_unused]] = uint3(_488, 1u, 1u);
constant uint ROWS_tmp [[function_constant(1)]];
constant uint ROWS = is_function_constant_defined(ROWS_tmp) ? ROWS_tmp : 2u;

struct Floats
{
    float v[1];
};

static inline __attribute__((always_inline))
uint flat_group(thread uint3& gl_WorkGroupID, thread uint3& gl_NumWorkGroups)
{
    return gl_WorkGroupID.x + (gl_WorkGroupID.y * gl_NumWorkGroups.x);
}

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
    float4 _175;
    for (uint k = 0u; k < 8u; k++)
    {
        uint col = (col0 + (4u * k)) + ((k >= 4u) ? 16u : 0u);
        bool _173;
        if (!_165)
        {
            _173 = col < p.cols;
        }
        else
        {
            _173 = _165;
        }
        if (_173)
        {
            _175 = xv->v[col >> uint(2)];
        }
        else
        {
            _175 = float4(0.0);
        }
        xs[k] = _175;
    }
}

static inline __attribute__((always_inline))
float2 x_sums(spvUnsafeArray<float4, 8> xs)
{
    float4 a = float4(0.0);
    float4 b = float4(0.0);
    for (uint i = 0u; i < 4u; i++)
    {
        spvUnsafeArray<float4, 8> indexable;
        indexable = xs;
        a += indexable[i];
        spvUnsafeArray<float4, 8> indexable_1;
        indexable_1 = xs;
        b += indexable_1[4u + i];
    }
    return float2(((a.x + a.y) + a.z) + a.w, ((b.x + b.y) + b.z) + b.w);
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
float quant_dot(thread const ulong& row, thread const uint& c, spvUnsafeArray<float4, 8> xs, thread const float2& sx, constant P& p)
{
    uint4 q = (reinterpret_cast<device Uvec4s*>(row))->v[c];
    uint nb = ((p.cols + 32u) - 1u) / 32u;
    uint pair = c >> uint(1);
    uint qbytes = ((nb + 1u) / 2u) * 32u;
    ulong param = row;
    uint param_1 = qbytes + (pair * 4u);
    float2 d = f16x2_at(param, param_1);
    ulong param_2 = row;
    uint param_3 = (qbytes + (nb * 2u)) + (pair * 4u);
    float2 m = f16x2_at(param_2, param_3);
    float fa = 0.0;
    float fb = 0.0;
    uint _254;
    uint _270;
    uint _284;
    uint _299;
    uint _321;
    uint _335;
    uint _349;
    uint _362;
    for (uint i = 0u; i < 4u; i++)
    {
        uint w = q[i];
        if (true)
        {
            _254 = w << uint(19);
        }
        else
        {
            _254 = w >> uint(-19);
        }
        if (true)
        {
            _270 = w << uint(11);
        }
        else
        {
            _270 = w >> uint(-11);
        }
        if (true)
        {
            _284 = w << uint(3);
        }
        else
        {
            _284 = w >> uint(-3);
        }
        if (false)
        {
            _299 = w << uint(-5);
        }
        else
        {
            _299 = w >> uint(5);
        }
        spvUnsafeArray<float4, 8> indexable;
        indexable = xs;
        fa += dot(float4(as_type<float>((_254 & 7864320u) | 1065353216u), as_type<float>((_270 & 7864320u) | 1065353216u), as_type<float>((_284 & 7864320u) | 1065353216u), as_type<float>((_299 & 7864320u) | 1065353216u)), indexable[i]);
        if (true)
        {
            _321 = w << uint(15);
        }
        else
        {
            _321 = w >> uint(-15);
        }
        if (true)
        {
            _335 = w << uint(7);
        }
        else
        {
            _335 = w >> uint(-7);
        }
        if (false)
        {
            _349 = w << uint(-1);
        }
        else
        {
            _349 = w >> uint(1);
        }
        if (false)
        {
            _362 = w << uint(-9);
        }
        else
        {
            _362 = w >> uint(9);
        }
        spvUnsafeArray<float4, 8> indexable_1;
        indexable_1 = xs;
        fb += dot(float4(as_type<float>((_321 & 7864320u) | 1065353216u), as_type<float>((_335 & 7864320u) | 1065353216u), as_type<float>((_349 & 7864320u) | 1065353216u), as_type<float>((_362 & 7864320u) | 1065353216u)), indexable_1[4u + i]);
    }
    float s = ((16.0 * d.x) * (fa - sx.x)) + (m.x * sx.x);
    float _408;
    if (((2u * pair) + 1u) < nb)
    {
        _408 = (s + ((16.0 * d.y) * (fb - sx.y))) + (m.y * sx.y);
    }
    else
    {
        _408 = s;
    }
    return _408;
}

kernel void splash_matmul4_q4(constant P& p [[buffer(0)]], uint3 gl_WorkGroupID [[threadgroup_position_in_grid]], uint3 gl_NumWorkGroups [[threadgroups_per_grid]], uint3 gl_LocalInvocationID [[thread_position_in_threadgroup]], uint gl_SubgroupID [[simdgroup_index_in_threadgroup]], uint gl_NumSubgroups [[simdgroups_per_threadgroup]])
{
    threadgroup float partial[16][64];
    threadgroup float wg_red[256];
    threadgroup uint wg_red_u[256];
    uint tid = gl_LocalInvocationID.x;
    uint wg = gl_WorkGroupSize.x;
    uint r0 = flat_group(gl_WorkGroupID, gl_NumWorkGroups) * ROWS;
    uint n = p.n;
    spvUnsafeArray<ulong, 1> wbase;
    wbase[0] = p.w;
    spvUnsafeArray<ulong, 4> xrows;
    for (uint j = 0u; j < 4u; j++)
    {
        xrows[j] = p.x + (ulong(j * p.x_stride) * 4ul);
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
    spvUnsafeArray<float4, 8> param_3;
    for (uint c = tid; c < chunks; c += wg)
    {
        uint param = c;
        uint col0 = chunk_col(param);
        for (uint m = 0u; m < 1u; m++)
        {
            for (uint r_1 = 0u; r_1 < 4u; r_1++)
            {
                bool _598 = r_1 >= ROWS;
                bool _608;
                if (!_598)
                {
                    _608 = (r0 + r_1) >= p.rows;
                }
                else
                {
                    _608 = _598;
                }
                if (_608)
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
                    spvUnsafeArray<float4, 8> xs;
                    xs = param_3;
                    float2 sx = x_sums(xs);
                    uint _642 = (m * 4u) + r_1;
                    ulong param_4 = wbase[m] + (ulong(r0 + r_1) * ulong(p.row_bytes));
                    uint param_5 = c;
                    float2 param_6 = sx;
                    acc[_642][j_2] += quant_dot(param_4, param_5, xs, param_6, p);
                }
            }
        }
    }
    for (uint r_2 = 0u; r_2 < 4u; r_2++)
    {
        for (uint j_3 = 0u; j_3 < 4u; j_3++)
        {
            float s = simd_sum(acc[r_2][j_3]);
            bool _699 = simd_is_first();
            if (_699)
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
        (reinterpret_cast<device Floats*>(p.y))->v[((j_4 * p.y_stride) + r0) + r_3] = s_1[0];
    }
}

