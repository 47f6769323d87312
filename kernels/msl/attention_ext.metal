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
struct Ints;
struct Uvec2s;
struct Vec4s;
struct Floats;

constant uint HD_tmp [[function_constant(1)]];
constant uint HD = is_function_constant_defined(HD_tmp) ? HD_tmp : 128u;
constant uint _93 = (HD + 31u);
constant uint _95 = (_93 / 32u);
constant uint _97 = (_95 * 34u);
constant uint _101 = (HD * 2u);
constant uint _103 = (HD * 4u);

struct Uints
{
    uint v[1];
};

constant uint _198 = (HD + 31u);
constant uint _199 = (_198 / 32u);
constant uint _200 = (_199 * 32u);

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
    uint kv_type;
};

struct Ints
{
    int v[1];
};

struct Uvec2s
{
    uint2 v[1];
};

struct Vec4s
{
    float4 v[1];
};

struct Floats
{
    float v[1];
};

constant uint _611 = (HD / 4u);
constant uint _723 = (HD / 4u);
constant uint _951_tmp [[function_constant(0)]];
constant uint _951 = is_function_constant_defined(_951_tmp) ? _951_tmp : 1u;
constant uint3 gl_WorkGroupSize [[maybe_unused]] = uint3(_951, 1u, 1u);

static inline __attribute__((always_inline))
uint flat_group(thread uint3& gl_WorkGroupID, thread uint3& gl_NumWorkGroups)
{
    return gl_WorkGroupID.x + (gl_WorkGroupID.y * gl_NumWorkGroups.x);
}

static inline __attribute__((always_inline))
uint kv_row_bytes(thread const uint& type)
{
    uint _88;
    if (type == 2u)
    {
        _88 = _97;
    }
    else
    {
        _88 = (type == 1u) ? _101 : _103;
    }
    return _88;
}

static inline __attribute__((always_inline))
ulong key_row(thread const bool& value, thread const uint& t, thread const uint& p0, thread const uint& np, thread const uint& b0, thread const uint& g, constant P& p)
{
    if (t < np)
    {
        uint pos = p0 + t;
        uint page = uint((reinterpret_cast<device Ints*>(p.pages))->v[pos / p.page_tokens]);
        ulong _302;
        if (value)
        {
            _302 = p.v;
        }
        else
        {
            _302 = p.k;
        }
        uint param = p.kv_type;
        return (_302 + (ulong(page) * ulong(p.page_stride))) + (ulong((g * p.page_tokens) + (pos % p.page_tokens)) * ulong(kv_row_bytes(param)));
    }
    uint r = b0 + (t - np);
    ulong _347;
    if (value)
    {
        _347 = p.v_blk;
    }
    else
    {
        _347 = p.k_blk;
    }
    return _347 + (ulong(((r * p.kv_heads) + g) * HD) * 4ul);
}

static inline __attribute__((always_inline))
uint kv_word(thread const ulong& a)
{
    device Uints* u = reinterpret_cast<device Uints*>(a & 18446744073709551612ul);
    uint _153;
    if ((a & 2ul) == 0ul)
    {
        _153 = u->v[0];
    }
    else
    {
        _153 = (u->v[0] >> uint(16)) | (u->v[1] << uint(16));
    }
    return _153;
}

static inline __attribute__((always_inline))
float4 s8x4(thread const uint& w)
{
    return float4(int4(int(w << uint(24)), int(w << uint(16)), int(w << uint(8)), int(w)) >> int4(24));
}

static inline __attribute__((always_inline))
float f16_exact(thread const uint& h)
{
    uint e = h >> uint(10);
    float _116;
    if (e == 0u)
    {
        _116 = float(h) * 5.9604644775390625e-08;
    }
    else
    {
        _116 = as_type<float>(((e + 112u) << uint(23)) | ((h & 1023u) << uint(13)));
    }
    return _116;
}

static inline __attribute__((always_inline))
float q8_scale(thread const ulong& row, thread const uint& j)
{
    ulong a = row + ulong(_200 + (2u * j));
    uint param = ((reinterpret_cast<device Uints*>(a & 18446744073709551612ul))->v[0] >> ((uint(a) & 2u) * 8u)) & 65535u;
    return f16_exact(param);
}

static inline __attribute__((always_inline))
float4 q8_kv4(thread const ulong& row, thread const uint& c)
{
    ulong param = row + ulong(4u * c);
    uint param_1 = kv_word(param);
    ulong param_2 = row;
    uint param_3 = c / 8u;
    return s8x4(param_1) * q8_scale(param_2, param_3);
}

static inline __attribute__((always_inline))
float4 row4(thread const ulong& a, thread const uint& t, thread const uint& c)
{
    if (t == 2u)
    {
        ulong param = a;
        uint param_1 = c;
        return q8_kv4(param, param_1);
    }
    if (t == 1u)
    {
        uint2 h = (reinterpret_cast<device Uvec2s*>(a))->v[c];
        return float4(float2(as_type<half2>(h.x)), float2(as_type<half2>(h.y)));
    }
    return (reinterpret_cast<device Vec4s*>(a))->v[c];
}

static inline __attribute__((always_inline))
float q8_kv1(thread const ulong& row, thread const uint& d)
{
    ulong a = row + ulong(d);
    ulong param = row;
    uint param_1 = d / 32u;
    return float(int((reinterpret_cast<device Uints*>(a & 18446744073709551612ul))->v[0] << (24u - ((uint(a) & 3u) * 8u))) >> 24) * q8_scale(param, param_1);
}

static inline __attribute__((always_inline))
float row1(thread const ulong& a, thread const uint& t, thread const uint& d)
{
    if (t == 2u)
    {
        ulong param = a;
        uint param_1 = d;
        return q8_kv1(param, param_1);
    }
    if (t == 1u)
    {
        return float2(as_type<half2>((reinterpret_cast<device Uints*>(a))->v[d >> 1u]))[d & 1u];
    }
    return (reinterpret_cast<device Floats*>(a))->v[d];
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
    int _509;
    if (p.page_causal != 0u)
    {
        _509 = int(i);
    }
    else
    {
        _509 = 0;
    }
    int p1 = int(p.page_hi) + _509;
    int b0 = 0;
    int _522;
    if (p.k_blk != 0ul)
    {
        int _529;
        if (p.blk_causal != 0u)
        {
            _529 = int(i) + 1;
        }
        else
        {
            _529 = int(p.n_rows);
        }
        _522 = _529;
    }
    else
    {
        _522 = 0;
    }
    int b1 = _522;
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
    for (uint c = tid; c < _611; c += 128u)
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
    uint _709;
    uint _869;
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
                ulong kr = key_row(param, param_1, param_2, param_3, param_4, param_5, p);
                if ((k0 + tid) < np)
                {
                    _709 = p.kv_type;
                }
                else
                {
                    _709 = 0u;
                }
                uint t = _709;
                s = 0.0;
                for (uint c_2 = 0u; c_2 < _723; c_2++)
                {
                    ulong param_6 = kr;
                    uint param_7 = t;
                    uint param_8 = c_2;
                    s += dot(Qs[c_2], row4(param_6, param_7, param_8));
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
                bool param_9 = true;
                uint param_10 = k0 + j_2;
                uint param_11 = uint(p0);
                uint param_12 = np;
                uint param_13 = uint(b0);
                uint param_14 = g;
                if ((k0 + j_2) < np)
                {
                    _869 = p.kv_type;
                }
                else
                {
                    _869 = 0u;
                }
                ulong param_15 = key_row(param_9, param_10, param_11, param_12, param_13, param_14, p);
                uint param_16 = _869;
                uint param_17 = d;
                a += (S[j_2] * row1(param_15, param_16, param_17));
            }
            acc[c_4] = a;
        }
        threadgroup_barrier(mem_flags::mem_threadgroup);
    }
    ulong oa = p.dst + (ulong(((i * p.heads) + h) * HD) * 4ul);
    float _930;
    for (uint c_5 = 0u; c_5 < 2u; c_5++)
    {
        uint d_1 = tid + (c_5 * 128u);
        if (d_1 >= HD)
        {
            break;
        }
        if (stat[1] > 0.0)
        {
            _930 = acc[c_5] / stat[1];
        }
        else
        {
            _930 = 0.0;
        }
        (reinterpret_cast<device Floats*>(oa))->v[d_1] = _930;
    }
}

