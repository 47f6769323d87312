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
struct Uvec4s;
struct Vec4s;
struct Vec2s;
struct Floats;

constant uint HD_tmp [[function_constant(1)]];
constant uint HD = is_function_constant_defined(HD_tmp) ? HD_tmp : 128u;
constant uint _84 = (HD + 31u);
constant uint _86 = (_84 / 32u);
constant uint _88 = (_86 * 34u);
constant uint _93 = (HD * 2u);
constant uint _95 = (HD * 4u);

struct Uints
{
    uint v[1];
};

constant uint _190 = (HD + 31u);
constant uint _191 = (_190 / 32u);
constant uint _192 = (_191 * 32u);

struct P
{
    ulong dst;
    ulong src;
    ulong k;
    ulong v;
    ulong pages;
    ulong part;
    uint n_past;
    uint n;
    uint heads;
    uint kv_heads;
    uint page_tokens;
    uint page_stride;
    uint split_len;
    uint n_splits;
    uint hb;
    uint rt;
    float scale;
    uint kv_type;
    ulong src2;
};

struct Ints
{
    int v[1];
};

struct Uvec4s
{
    uint4 v[1];
};

struct Vec4s
{
    float4 v[1];
};

struct Vec2s
{
    float2 v[1];
};

constant uint _530 = (HD / 4u);
constant uint _531 = (16u * _530);
constant uint _535 = (HD / 4u);
constant uint _539 = (HD / 4u);
constant uint _695 = (HD / 8u);

struct Floats
{
    float v[1];
};

constant uint _1183 = (HD + 2u);
constant uint _1221 = (HD + 2u);
constant uint _1235 = (HD + 2u);
constant uint _1252_tmp [[function_constant(0)]];
constant uint _1252 = is_function_constant_defined(_1252_tmp) ? _1252_tmp : 1u;
constant uint3 gl_WorkGroupSize [[maybe_unused]] = uint3(_1252, 1u, 1u);

constant spvUnsafeArray<float, 4> _672 = spvUnsafeArray<float, 4>({ 0.0, 0.0, 0.0, 0.0 });

static inline __attribute__((always_inline))
uint kv_row_bytes(thread const uint& type)
{
    uint _79;
    if (type == 2u)
    {
        _79 = _88;
    }
    else
    {
        _79 = (type == 1u) ? _93 : _95;
    }
    return _79;
}

static inline __attribute__((always_inline))
ulong kv_row(thread const ulong& base, thread const uint& pos, thread const uint& g, constant P& p)
{
    uint page = uint((reinterpret_cast<device Ints*>(p.pages))->v[pos / p.page_tokens]);
    uint param = p.kv_type;
    return (base + (ulong(page) * ulong(p.page_stride))) + (ulong((g * p.page_tokens) + (pos % p.page_tokens)) * ulong(kv_row_bytes(param)));
}

static inline __attribute__((always_inline))
uint kv_word(thread const ulong& a)
{
    device Uints* u = reinterpret_cast<device Uints*>(a & 18446744073709551612ul);
    uint _145;
    if ((a & 2ul) == 0ul)
    {
        _145 = u->v[0];
    }
    else
    {
        _145 = (u->v[0] >> uint(16)) | (u->v[1] << uint(16));
    }
    return _145;
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
    float _108;
    if (e == 0u)
    {
        _108 = float(h) * 5.9604644775390625e-08;
    }
    else
    {
        _108 = as_type<float>(((e + 112u) << uint(23)) | ((h & 1023u) << uint(13)));
    }
    return _108;
}

static inline __attribute__((always_inline))
float q8_scale(thread const ulong& row, thread const uint& j)
{
    ulong a = row + ulong(_192 + (2u * j));
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
void kv8(thread const ulong& row, thread const uint& c, thread float4& a, thread float4& b, constant P& p)
{
    if (p.kv_type == 2u)
    {
        ulong param = row;
        uint param_1 = 2u * c;
        a = q8_kv4(param, param_1);
        ulong param_2 = row;
        uint param_3 = (2u * c) + 1u;
        b = q8_kv4(param_2, param_3);
    }
    else
    {
        if (p.kv_type == 1u)
        {
            uint4 h = (reinterpret_cast<device Uvec4s*>(row))->v[c];
            a = float4(float2(as_type<half2>(h.x)), float2(as_type<half2>(h.y)));
            b = float4(float2(as_type<half2>(h.z)), float2(as_type<half2>(h.w)));
        }
        else
        {
            a = (reinterpret_cast<device Vec4s*>(row))->v[2u * c];
            b = (reinterpret_cast<device Vec4s*>(row))->v[(2u * c) + 1u];
        }
    }
}

static inline __attribute__((always_inline))
float2 q8_kv2(thread const ulong& row, thread const uint& c)
{
    ulong a = row + ulong(2u * c);
    uint w = (reinterpret_cast<device Uints*>(a & 18446744073709551612ul))->v[0] >> ((uint(a) & 2u) * 8u);
    ulong param = row;
    uint param_1 = c / 16u;
    return float2(int2(int(w << uint(24)), int(w << uint(16))) >> int2(24)) * q8_scale(param, param_1);
}

static inline __attribute__((always_inline))
float2 kv2(thread const ulong& row, thread const uint& c, constant P& p)
{
    if (p.kv_type == 2u)
    {
        ulong param = row;
        uint param_1 = c;
        return q8_kv2(param, param_1);
    }
    if (p.kv_type == 1u)
    {
        return float2(as_type<half2>((reinterpret_cast<device Uints*>(row))->v[c]));
    }
    return (reinterpret_cast<device Vec2s*>(row))->v[c];
}

static inline __attribute__((always_inline))
float sigmoid(thread const float& x)
{
    return 1.0 / (1.0 + exp(-x));
}

kernel void splash_attend(constant P& p [[buffer(0)]], uint3 gl_LocalInvocationID [[thread_position_in_threadgroup]], uint3 gl_WorkGroupID [[threadgroup_position_in_grid]])
{
    threadgroup float4 Qs[16][64];
    threadgroup float mrun[16];
    threadgroup float lsum[16];
    threadgroup float S[16][32];
    threadgroup float corr[16];
    threadgroup float wg_red[256];
    threadgroup uint wg_red_u[256];
    uint tid = gl_LocalInvocationID.x;
    uint G = p.heads / p.kv_heads;
    uint blocks = ((G + p.hb) - 1u) / p.hb;
    uint g = gl_WorkGroupID.x / blocks;
    uint h0 = (g * G) + ((gl_WorkGroupID.x % blocks) * p.hb);
    uint h_end = min((h0 + p.hb), ((g + 1u) * G));
    uint row0 = gl_WorkGroupID.y * p.rt;
    uint split = gl_WorkGroupID.z;
    uint last_row = min((row0 + p.rt), p.n) - 1u;
    uint key_begin = split * p.split_len;
    uint key_end = min((key_begin + p.split_len), ((p.n_past + last_row) + 1u));
    for (uint t = tid; t < _531; t += 128u)
    {
        uint v = t / _535;
        uint c = t % _539;
        uint row = row0 + (v / p.hb);
        uint h = h0 + (v % p.hb);
        float4 x = float4(0.0);
        bool _564 = v < (p.hb * p.rt);
        bool _571;
        if (_564)
        {
            _571 = row < p.n;
        }
        else
        {
            _571 = _564;
        }
        if (_571 && (h < h_end))
        {
            x = (reinterpret_cast<device Vec4s*>(p.src + (ulong(((row * p.heads) + h) * HD) * 4ul)))->v[c] * p.scale;
        }
        Qs[v][c] = x;
    }
    if (tid < 16u)
    {
        mrun[tid] = as_type<float>(0xff800000u /* -inf */);
        lsum[tid] = 0.0;
    }
    spvUnsafeArray<float2, 16> acc;
    for (uint v_1 = 0u; v_1 < 16u; v_1++)
    {
        acc[v_1] = float2(0.0);
    }
    bool owns_dims = (2u * tid) < HD;
    threadgroup_barrier(mem_flags::mem_threadgroup);
    uint j = tid % 32u;
    uint vg = tid / 32u;
    float4 param_5;
    float4 param_6;
    float _819;
    spvUnsafeArray<float2, 8> x_1;
    float2 _973;
    for (uint k0 = key_begin; k0 < key_end; k0 += 32u)
    {
        uint key = k0 + j;
        spvUnsafeArray<float, 4> s = spvUnsafeArray<float, 4>({ 0.0, 0.0, 0.0, 0.0 });
        if (key < key_end)
        {
            ulong param = p.k;
            uint param_1 = key;
            uint param_2 = g;
            ulong kr = kv_row(param, param_1, param_2, p);
            for (uint c_1 = 0u; c_1 < _695; c_1++)
            {
                ulong param_3 = kr;
                uint param_4 = c_1;
                kv8(param_3, param_4, param_5, param_6, p);
                float4 a = param_5;
                float4 b = param_6;
                for (uint i = 0u; i < 4u; i++)
                {
                    s[i] += dot(Qs[(vg * 4u) + i][2u * c_1], a);
                    s[i] += dot(Qs[(vg * 4u) + i][(2u * c_1) + 1u], b);
                }
            }
        }
        for (uint i_1 = 0u; i_1 < 4u; i_1++)
        {
            uint v_2 = (vg * 4u) + i_1;
            uint row_1 = row0 + (v_2 / p.hb);
            bool _774 = key < key_end;
            bool _784;
            if (_774)
            {
                _784 = v_2 < (p.hb * p.rt);
            }
            else
            {
                _784 = _774;
            }
            bool _791;
            if (_784)
            {
                _791 = row_1 < p.n;
            }
            else
            {
                _791 = _784;
            }
            bool _802;
            if (_791)
            {
                _802 = (h0 + (v_2 % p.hb)) < h_end;
            }
            else
            {
                _802 = _791;
            }
            bool _811;
            if (_802)
            {
                _811 = key <= (p.n_past + row_1);
            }
            else
            {
                _811 = _802;
            }
            bool ok = _811;
            if (ok)
            {
                _819 = s[i_1];
            }
            else
            {
                _819 = as_type<float>(0xff800000u /* -inf */);
            }
            S[v_2][j] = _819;
        }
        threadgroup_barrier(mem_flags::mem_threadgroup);
        if (tid < 16u)
        {
            float mx = mrun[tid];
            for (uint i_2 = 0u; i_2 < 32u; i_2++)
            {
                mx = fast::max(mx, S[tid][i_2]);
            }
            float c_2 = 1.0;
            float l = lsum[tid];
            if (mx != as_type<float>(0xff800000u /* -inf */))
            {
                c_2 = exp(mrun[tid] - mx);
                l *= c_2;
                for (uint i_3 = 0u; i_3 < 32u; i_3++)
                {
                    float e = exp(S[tid][i_3] - mx);
                    S[tid][i_3] = e;
                    l += e;
                }
            }
            else
            {
                for (uint i_4 = 0u; i_4 < 32u; i_4++)
                {
                    S[tid][i_4] = 0.0;
                }
            }
            corr[tid] = c_2;
            lsum[tid] = l;
            mrun[tid] = mx;
        }
        threadgroup_barrier(mem_flags::mem_threadgroup);
        for (uint v_3 = 0u; v_3 < 16u; v_3++)
        {
            acc[v_3] *= corr[v_3];
        }
        uint nk = min(32u, (key_end - k0));
        if (owns_dims)
        {
            for (uint i0 = 0u; i0 < nk; i0 += 8u)
            {
                for (uint u = 0u; u < 8u; u++)
                {
                    if ((i0 + u) < nk)
                    {
                        ulong param_7 = p.v;
                        uint param_8 = (k0 + i0) + u;
                        uint param_9 = g;
                        ulong param_10 = kv_row(param_7, param_8, param_9, p);
                        uint param_11 = tid;
                        _973 = kv2(param_10, param_11, p);
                    }
                    else
                    {
                        _973 = float2(0.0);
                    }
                    x_1[u] = _973;
                }
                for (uint u_1 = 0u; u_1 < 8u; u_1++)
                {
                    for (uint v_4 = 0u; v_4 < 16u; v_4++)
                    {
                        acc[v_4] += (x_1[u_1] * S[v_4][i0 + u_1]);
                    }
                }
            }
        }
        threadgroup_barrier(mem_flags::mem_threadgroup);
    }
    for (uint v_5 = 0u; v_5 < 16u; v_5++)
    {
        uint row_2 = row0 + (v_5 / p.hb);
        uint h_1 = h0 + (v_5 % p.hb);
        bool _1065 = v_5 >= (p.hb * p.rt);
        bool _1073;
        if (!_1065)
        {
            _1073 = row_2 >= p.n;
        }
        else
        {
            _1073 = _1065;
        }
        if (_1073 || (h_1 >= h_end))
        {
            continue;
        }
        uint base = (row_2 * p.heads) + h_1;
        if (owns_dims)
        {
            if (p.n_splits == 1u)
            {
                device Floats* o = reinterpret_cast<device Floats*>(p.dst + (ulong((base * HD) + (2u * tid)) * 4ul));
                float2 y = float2(acc[v_5].x / lsum[v_5], acc[v_5].y / lsum[v_5]);
                if (p.src2 != 0ul)
                {
                    device Floats* gate = reinterpret_cast<device Floats*>(p.src2 + (ulong((base * HD) + (2u * tid)) * 4ul));
                    float param_12 = gate->v[0];
                    float param_13 = gate->v[1];
                    y = float2(y.x * sigmoid(param_12), y.y * sigmoid(param_13));
                }
                o->v[0] = y.x;
                o->v[1] = y.y;
            }
            else
            {
                device Floats* part = reinterpret_cast<device Floats*>(p.part + (ulong((((base * p.n_splits) + split) * _1183) + (2u * tid)) * 4ul));
                part->v[0] = acc[v_5].x;
                part->v[1] = acc[v_5].y;
            }
        }
        if ((p.n_splits > 1u) && (tid == 0u))
        {
            device Floats* part_1 = reinterpret_cast<device Floats*>(p.part);
            part_1->v[(((base * p.n_splits) + split) * _1221) + HD] = mrun[v_5];
            part_1->v[((((base * p.n_splits) + split) * _1235) + HD) + 1u] = lsum[v_5];
        }
    }
}

