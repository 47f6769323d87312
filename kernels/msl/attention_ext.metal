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

struct Ints;
struct Vec4s;
struct Floats;

struct P
{
    ulong dst;
    ulong q;
    ulong k;
    ulong v;
    ulong pages;
    ulong k_blk;
    ulong v_blk;
    uint n_rows;
    uint heads;
    uint kv_heads;
    uint page_tokens;
    uint page_stride;
    uint q_pos0;
    uint page_lo;
    uint page_hi;
    uint page_causal;
    uint window;
    uint blk_causal;
    float scale;
};

struct Ints
{
    int v[1];
};

constant uint HD_tmp [[function_constant(1)]];
constant uint HD = is_function_constant_defined(HD_tmp) ? HD_tmp : 128u;
constant uint _301 = (HD / 4u);

struct Vec4s
{
    float4 v[1];
};

constant uint _411 = (HD / 4u);

struct Floats
{
    float v[1];
};

constant uint _627_tmp [[function_constant(0)]];
constant uint _627 = is_function_constant_defined(_627_tmp) ? _627_tmp : 1u;
constant uint3 gl_WorkGroupSize [[maybe_unused]] = uint3(_627, 1u, 1u);

static inline __attribute__((always_inline))
uint flat_group(thread uint3& gl_WorkGroupID, thread uint3& gl_NumWorkGroups)
{
    return gl_WorkGroupID.x + (gl_WorkGroupID.y * gl_NumWorkGroups.x);
}

static inline __attribute__((always_inline))
ulong key_row(thread const bool& value, thread const uint& t, thread const uint& p0, thread const uint& np, thread const uint& b0, thread const uint& g, constant P& p)
{
    if (t < np)
    {
        uint pos = p0 + t;
        uint page = uint((reinterpret_cast<device Ints*>(p.pages))->v[pos / p.page_tokens]);
        ulong _76;
        if (value)
        {
            _76 = p.v;
        }
        else
        {
            _76 = p.k;
        }
        return _76 + (((ulong(page) * ulong(p.page_stride)) + ulong(((g * p.page_tokens) + (pos % p.page_tokens)) * HD)) * 4ul);
    }
    uint r = b0 + (t - np);
    ulong _118;
    if (value)
    {
        _118 = p.v_blk;
    }
    else
    {
        _118 = p.k_blk;
    }
    return _118 + (ulong(((r * p.kv_heads) + g) * HD) * 4ul);
}

kernel void splash_attention_ext(constant P& p [[buffer(0)]], uint3 gl_WorkGroupID [[threadgroup_position_in_grid]], uint3 gl_NumWorkGroups [[threadgroups_per_grid]], uint3 gl_LocalInvocationID [[thread_position_in_threadgroup]])
{
    threadgroup float4 Qs[64];
    threadgroup float stat[3];
    threadgroup float S[32];
    threadgroup float wg_red[256];
    threadgroup uint wg_red_u[256];
    uint tid = gl_LocalInvocationID.x;
    uint i = flat_group(gl_WorkGroupID, gl_NumWorkGroups) / p.heads;
    uint h = flat_group(gl_WorkGroupID, gl_NumWorkGroups) % p.heads;
    uint g = h / (p.heads / p.kv_heads);
    if (i >= p.n_rows)
    {
        return;
    }
    int qpos = int(p.q_pos0 + i);
    int p0 = int(p.page_lo);
    int _195;
    if (p.page_causal != 0u)
    {
        _195 = int(i);
    }
    else
    {
        _195 = 0;
    }
    int p1 = int(p.page_hi) + _195;
    int b0 = 0;
    int _209;
    if (p.k_blk != 0ul)
    {
        int _216;
        if (p.blk_causal != 0u)
        {
            _216 = int(i) + 1;
        }
        else
        {
            _216 = int(p.n_rows);
        }
        _209 = _216;
    }
    else
    {
        _209 = 0;
    }
    int b1 = _209;
    if (p.window > 0u)
    {
        int w = int(p.window);
        p0 = max(p0, ((qpos - w) + 1));
        b0 = max(b0, ((int(i) - w) + 1));
        b1 = min(b1, (int(i) + w));
    }
    p1 = max(p1, p0);
    b0 = max(b0, 0);
    b1 = max(b1, b0);
    uint np = uint(p1 - p0);
    uint len = np + uint(b1 - b0);
    ulong qa = p.q + (ulong(((i * p.heads) + h) * HD) * 4ul);
    for (uint c = tid; c < _301; c += 128u)
    {
        Qs[c] = (reinterpret_cast<device Vec4s*>(qa))->v[c] * p.scale;
    }
    if (tid == 0u)
    {
        stat[0] = as_type<float>(0xff800000u /* -inf */);
        stat[1] = 0.0;
    }
    spvUnsafeArray<float, 2> acc;
    for (uint c_1 = 0u; c_1 < 2u; c_1++)
    {
        acc[c_1] = 0.0;
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    for (uint k0 = 0u; k0 < len; k0 += 32u)
    {
        uint nb = min(32u, (len - k0));
        if (tid < 32u)
        {
            float s = as_type<float>(0xff800000u /* -inf */);
            if (tid < nb)
            {
                bool param = false;
                uint param_1 = k0 + tid;
                uint param_2 = uint(p0);
                uint param_3 = np;
                uint param_4 = uint(b0);
                uint param_5 = g;
                const device Vec4s* kr = reinterpret_cast<device Vec4s*>(key_row(param, param_1, param_2, param_3, param_4, param_5, p));
                s = 0.0;
                for (uint c_2 = 0u; c_2 < _411; c_2++)
                {
                    s += dot(Qs[c_2], kr->v[c_2]);
                }
            }
            S[tid] = s;
        }
        threadgroup_barrier(mem_flags::mem_threadgroup);
        if (tid == 0u)
        {
            float mx = stat[0];
            for (uint j = 0u; j < nb; j++)
            {
                mx = fast::max(mx, S[j]);
            }
            float c_3 = exp(stat[0] - mx);
            float l = stat[1] * c_3;
            for (uint j_1 = 0u; j_1 < nb; j_1++)
            {
                float e = exp(S[j_1] - mx);
                S[j_1] = e;
                l += e;
            }
            stat[2] = c_3;
            stat[1] = l;
            stat[0] = mx;
        }
        threadgroup_barrier(mem_flags::mem_threadgroup);
        for (uint c_4 = 0u; c_4 < 2u; c_4++)
        {
            uint d = tid + (c_4 * 128u);
            if (d >= HD)
            {
                break;
            }
            float a = acc[c_4] * stat[2];
            for (uint j_2 = 0u; j_2 < nb; j_2++)
            {
                bool param_6 = true;
                uint param_7 = k0 + j_2;
                uint param_8 = uint(p0);
                uint param_9 = np;
                uint param_10 = uint(b0);
                uint param_11 = g;
                a += (S[j_2] * (reinterpret_cast<device Floats*>(key_row(param_6, param_7, param_8, param_9, param_10, param_11, p)))->v[d]);
            }
            acc[c_4] = a;
        }
        threadgroup_barrier(mem_flags::mem_threadgroup);
    }
    ulong oa = p.dst + (ulong(((i * p.heads) + h) * HD) * 4ul);
    float _606;
    for (uint c_5 = 0u; c_5 < 2u; c_5++)
    {
        uint d_1 = tid + (c_5 * 128u);
        if (d_1 >= HD)
        {
            break;
        }
        if (stat[1] > 0.0)
        {
            _606 = acc[c_5] / stat[1];
        }
        else
        {
            _606 = 0.0;
        }
        (reinterpret_cast<device Floats*>(oa))->v[d_1] = _606;
    }
}

