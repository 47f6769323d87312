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
struct Floats;

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
constant bool _170 = (CHECK == 0u);
constant uint _248_tmp [[function_constant(0)]];
constant uint _248 = is_function_constant_defined(_248_tmp) ? _248_tmp : 1u;
constant uint3 gl_WorkGroupSize [[maybe_unused]] = uint3(_248, 1u, 1u);
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
    return (p.cols + 7u) / 8u;
}

static inline __attribute__((always_inline))
uint chunk_col(thread const uint& c)
{
    return c * 8u;
}

static inline __attribute__((always_inline))
void load_x(thread const ulong& xrow, thread const uint& col0, thread spvUnsafeArray<float4, 2>& xs, constant P& p)
{
    const device Vec4s* xv = reinterpret_cast<device Vec4s*>(xrow);
    float4 _180;
    for (uint k = 0u; k < 2u; k++)
    {
        uint col = col0 + (4u * k);
        bool _178;
        if (!_170)
        {
            _178 = col < p.cols;
        }
        else
        {
            _178 = _170;
        }
        if (_178)
        {
            _180 = xv->v[col >> uint(2)];
        }
        else
        {
            _180 = float4(0.0);
        }
        xs[k] = _180;
    }
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
void decode(thread const ulong& row, thread const uint& c, thread spvUnsafeArray<float, 8>& wv)
{
    uint4 q = (reinterpret_cast<device Uvec4s*>(row))->v[c];
    for (uint i = 0u; i < 4u; i++)
    {
        uint param = q[i];
        wv[2u * i] = bf16_lo(param);
        uint param_1 = q[i];
        wv[(2u * i) + 1u] = bf16_hi(param_1);
    }
}

static inline __attribute__((always_inline))
float chunk_dot(spvUnsafeArray<float, 8> wv, spvUnsafeArray<float4, 2> xs)
{
    float s = 0.0;
    for (uint k = 0u; k < 2u; k++)
    {
        spvUnsafeArray<float, 8> indexable;
        indexable = wv;
        spvUnsafeArray<float, 8> indexable_1;
        indexable_1 = wv;
        spvUnsafeArray<float, 8> indexable_2;
        indexable_2 = wv;
        spvUnsafeArray<float, 8> indexable_3;
        indexable_3 = wv;
        spvUnsafeArray<float4, 2> indexable_4;
        indexable_4 = xs;
        s += dot(float4(indexable[4u * k], indexable_1[(4u * k) + 1u], indexable_2[(4u * k) + 2u], indexable_3[(4u * k) + 3u]), indexable_4[k]);
    }
    return s;
}

kernel void splash_matmul_bf16(constant P& p [[buffer(0)]], uint3 gl_WorkGroupID [[threadgroup_position_in_grid]], uint3 gl_NumWorkGroups [[threadgroups_per_grid]], uint3 gl_LocalInvocationID [[thread_position_in_threadgroup]], uint gl_SubgroupID [[simdgroup_index_in_threadgroup]], uint gl_NumSubgroups [[simdgroups_per_threadgroup]])
{
    threadgroup float partial[4][64];
    threadgroup float wg_red[256];
    threadgroup uint wg_red_u[256];
    uint tid = gl_LocalInvocationID.x;
    uint wg = gl_WorkGroupSize.x;
    uint r0 = flat_group(gl_WorkGroupID, gl_NumWorkGroups) * ROWS;
    uint n = p.n;
    spvUnsafeArray<ulong, 1> wbase;
    wbase[0] = p.w;
    spvUnsafeArray<ulong, 1> xrows;
    for (uint j = 0u; j < 1u; j++)
    {
        xrows[j] = p.x + (ulong(j * p.x_stride) * 4ul);
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
    spvUnsafeArray<float4, 2> param_3;
    spvUnsafeArray<float, 8> param_6;
    for (uint c = tid; c < chunks; c += wg)
    {
        uint param = c;
        uint col0 = chunk_col(param);
        ulong param_1 = xrows[0];
        uint param_2 = col0;
        load_x(param_1, param_2, param_3, p);
        spvUnsafeArray<float4, 2> xs;
        xs = param_3;
        for (uint m = 0u; m < 1u; m++)
        {
            for (uint r_1 = 0u; r_1 < 4u; r_1++)
            {
                bool _367 = r_1 >= ROWS;
                bool _377;
                if (!_367)
                {
                    _377 = (r0 + r_1) >= p.rows;
                }
                else
                {
                    _377 = _367;
                }
                if (_377)
                {
                    break;
                }
                ulong param_4 = wbase[m] + (ulong(r0 + r_1) * ulong(p.row_bytes));
                uint param_5 = c;
                decode(param_4, param_5, param_6);
                spvUnsafeArray<float, 8> wv;
                wv = param_6;
                for (uint j_2 = 0u; j_2 < 1u; j_2++)
                {
                    if (j_2 >= n)
                    {
                        break;
                    }
                    uint _418 = (m * 4u) + r_1;
                    acc[_418][j_2] += chunk_dot(wv, xs);
                }
            }
        }
    }
    for (uint r_2 = 0u; r_2 < 4u; r_2++)
    {
        for (uint j_3 = 0u; j_3 < 1u; j_3++)
        {
            float s = simd_sum(acc[r_2][j_3]);
            bool _458 = simd_is_first();
            if (_458)
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
        (reinterpret_cast<device Floats*>(p.y))->v[((j_4 * p.y_stride) + r0) + r_3] = s_1[0];
    }
}

