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
struct Uvec2s;
struct Vec4s;
struct Ints;
struct Floats;

constant uint HD_tmp [[function_constant(1)]];
constant uint HD = is_function_constant_defined(HD_tmp) ? HD_tmp : 128u;
constant uint _82 = (HD + 31u);
constant uint _84 = (_82 / 32u);
constant uint _86 = (_84 * 34u);
constant uint _91 = (HD * 2u);
constant uint _93 = (HD * 4u);

struct Uints
{
    uint v[1];
};

constant uint _188 = (HD + 31u);
constant uint _189 = (_188 / 32u);
constant uint _190 = (_189 * 32u);
constant uint KV_TYPE_tmp [[function_constant(2)]];
constant uint KV_TYPE = is_function_constant_defined(KV_TYPE_tmp) ? KV_TYPE_tmp : 0u;
constant bool _231 = (KV_TYPE == 2u);
constant bool _240 = (KV_TYPE == 1u);

struct Uvec2s
{
    uint2 v[1];
};

struct Vec4s
{
    float4 v[1];
};

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

constant uint _328 = (HD / 4u);
constant uint _332 = (HD / 4u);
constant uint _472 = (HD / 4u);
constant uint _473 = (8u * _472);
constant uint _477 = (HD / 4u);
constant uint _481 = (HD / 4u);

struct Ints
{
    int v[1];
};

constant uint _762 = (HD / 4u);
constant uint _773 = (HD / 4u);
constant uint _838 = (HD / 4u);
constant uint _1160 = (HD / 4u);
constant uint _1168 = (HD / 4u);

struct Floats
{
    float v[1];
};

constant uint _1427 = (HD + 2u);
constant uint _1465 = (HD + 2u);
constant uint _1479 = (HD + 2u);
constant uint _1496_tmp [[function_constant(0)]];
constant uint _1496 = is_function_constant_defined(_1496_tmp) ? _1496_tmp : 1u;
constant uint3 gl_WorkGroupSize [[maybe_unused]] = uint3(_1496, 1u, 1u);

static inline __attribute__((always_inline))
uint kv_row_bytes(thread const uint& type)
{
    uint _77;
    if (type == 2u)
    {
        _77 = _86;
    }
    else
    {
        _77 = (type == 1u) ? _91 : _93;
    }
    return _77;
}

static inline __attribute__((always_inline))
ulong row_offset(thread const uint& page, thread const uint& pos, thread const uint& g, constant P& p)
{
    uint param = KV_TYPE;
    return (ulong(page) * ulong(p.page_stride)) + (ulong((g * p.page_tokens) + (pos % p.page_tokens)) * ulong(kv_row_bytes(param)));
}

static inline __attribute__((always_inline))
uint kv_word(thread const ulong& a)
{
    device Uints* u = reinterpret_cast<device Uints*>(a & 18446744073709551612ul);
    uint _143;
    if ((a & 2ul) == 0ul)
    {
        _143 = u->v[0];
    }
    else
    {
        _143 = (u->v[0] >> uint(16)) | (u->v[1] << uint(16));
    }
    return _143;
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
    float _106;
    if (e == 0u)
    {
        _106 = float(h) * 5.9604644775390625e-08;
    }
    else
    {
        _106 = as_type<float>(((e + 112u) << uint(23)) | ((h & 1023u) << uint(13)));
    }
    return _106;
}

static inline __attribute__((always_inline))
float q8_scale(thread const ulong& row, thread const uint& j)
{
    ulong a = row + ulong(_190 + (2u * j));
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
float4 kv4(thread const ulong& row, thread const uint& c)
{
    if (_231)
    {
        ulong param = row;
        uint param_1 = c;
        return q8_kv4(param, param_1);
    }
    if (_240)
    {
        uint2 h = (reinterpret_cast<device Uvec2s*>(row))->v[c];
        return float4(float2(as_type<half2>(h.x)), float2(as_type<half2>(h.y)));
    }
    return (reinterpret_cast<device Vec4s*>(row))->v[c];
}

static inline __attribute__((always_inline))
void stage_load(thread spvUnsafeArray<float4, 8>& x, thread const ulong& base, thread const uint& key_end, thread const uint& c0, thread const uint& t, thread const uint& b, thread uint3& gl_LocalInvocationID, threadgroup ulong (&roff)[2][64])
{
    for (uint u = 0u; u < 8u; u++)
    {
        uint e = (u * 128u) + gl_LocalInvocationID.x;
        uint j = e / _328;
        uint c = e % _332;
        uint key = (c0 + (t * 16u)) + j;
        x[u] = float4(0.0);
        if ((j < 16u) && (key < key_end))
        {
            ulong param = base + roff[b][(t * 16u) + j];
            uint param_1 = c;
            x[u] = kv4(param, param_1);
        }
    }
}

static inline __attribute__((always_inline))
float sigmoid(thread const float& x)
{
    return 1.0 / (1.0 + exp(-x));
}

kernel void splash_attend_nv8(constant P& p [[buffer(0)]], uint3 gl_LocalInvocationID [[thread_position_in_threadgroup]], uint3 gl_WorkGroupID [[threadgroup_position_in_grid]])
{
    threadgroup ulong roff[2][64];
    threadgroup float4 Qs[8][65];
    threadgroup float mrun[8];
    threadgroup float lsum[8];
    threadgroup float4 Ts[16][65];
    threadgroup float S[8][64];
    threadgroup float corr[8];
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
    for (uint t = tid; t < _473; t += 128u)
    {
        uint v = t / _477;
        uint c = t % _481;
        uint row = row0 + (v / p.hb);
        uint h = h0 + (v % p.hb);
        float4 x = float4(0.0);
        bool _504 = v < (p.hb * p.rt);
        bool _511;
        if (_504)
        {
            _511 = row < p.n;
        }
        else
        {
            _511 = _504;
        }
        if (_511 && (h < h_end))
        {
            x = (reinterpret_cast<device Vec4s*>(p.src + (ulong(((row * p.heads) + h) * HD) * 4ul)))->v[c] * p.scale;
        }
        Qs[v][c] = x;
    }
    if (tid < 8u)
    {
        mrun[tid] = as_type<float>(0xff800000u /* -inf */);
        lsum[tid] = 0.0;
    }
    bool _567 = tid < 64u;
    bool _575;
    if (_567)
    {
        _575 = (key_begin + tid) < key_end;
    }
    else
    {
        _575 = _567;
    }
    if (_575)
    {
        uint param = uint((reinterpret_cast<device Ints*>(p.pages))->v[(key_begin + tid) / p.page_tokens]);
        uint param_1 = key_begin + tid;
        uint param_2 = g;
        roff[0][tid] = row_offset(param, param_1, param_2, p);
    }
    uint sj = tid % 16u;
    uint sv = tid / 16u;
    uint srow = row0 + (sv / p.hb);
    bool _626 = sv < (p.hb * p.rt);
    bool _633;
    if (_626)
    {
        _633 = srow < p.n;
    }
    else
    {
        _633 = _626;
    }
    bool _644;
    if (_633)
    {
        _644 = (h0 + (sv % p.hb)) < h_end;
    }
    else
    {
        _644 = _633;
    }
    bool svalid = _644;
    uint _647;
    if (svalid)
    {
        _647 = min(key_end, ((p.n_past + srow) + 1u));
    }
    else
    {
        _647 = 0u;
    }
    uint skey_end = _647;
    spvUnsafeArray<float2, 8> acc;
    for (uint v_1 = 0u; v_1 < 8u; v_1++)
    {
        acc[v_1] = float2(0.0);
    }
    bool owns_dims = (2u * tid) < HD;
    threadgroup_barrier(mem_flags::mem_threadgroup);
    ulong param_4 = p.k;
    uint param_5 = key_end;
    uint param_6 = key_begin;
    uint param_7 = 0u;
    uint param_8 = 0u;
    spvUnsafeArray<float4, 8> param_3;
    stage_load(param_3, param_4, param_5, param_6, param_7, param_8, gl_LocalInvocationID, roff);
    spvUnsafeArray<float4, 8> x_1;
    x_1 = param_3;
    spvUnsafeArray<float4, 8> param_9;
    spvUnsafeArray<float4, 8> param_15;
    float _878;
    float _995;
    float _1059;
    spvUnsafeArray<float4, 8> param_24;
    spvUnsafeArray<float4, 8> param_30;
    float2 _1240;
    for (uint c0 = key_begin, b = 0u; c0 < key_end; c0 += 64u, b ^= 1u)
    {
        uint nt = ((min(64u, (key_end - c0)) + 16u) - 1u) / 16u;
        uint next = (c0 + 64u) + tid;
        uint next_page = 0u;
        if ((tid < 64u) && (next < key_end))
        {
            next_page = uint((reinterpret_cast<device Ints*>(p.pages))->v[next / p.page_tokens]);
        }
        for (uint t_1 = 0u; t_1 < nt; t_1++)
        {
            for (uint u = 0u; u < 8u; u++)
            {
                uint e = (u * 128u) + tid;
                uint j = e / _762;
                if (j < 16u)
                {
                    Ts[j][e % _773] = x_1[u];
                }
            }
            threadgroup_barrier(mem_flags::mem_threadgroup);
            if ((t_1 + 1u) < nt)
            {
                ulong param_10 = p.k;
                uint param_11 = key_end;
                uint param_12 = c0;
                uint param_13 = t_1 + 1u;
                uint param_14 = b;
                stage_load(param_9, param_10, param_11, param_12, param_13, param_14, gl_LocalInvocationID, roff);
                x_1 = param_9;
            }
            else
            {
                ulong param_16 = p.v;
                uint param_17 = key_end;
                uint param_18 = c0;
                uint param_19 = 0u;
                uint param_20 = b;
                stage_load(param_15, param_16, param_17, param_18, param_19, param_20, gl_LocalInvocationID, roff);
                x_1 = param_15;
            }
            float s0 = 0.0;
            float s1 = 0.0;
            uint key = (c0 + (t_1 * 16u)) + sj;
            if (key < skey_end)
            {
                for (uint c_1 = 0u; c_1 < _838; c_1 += 2u)
                {
                    s0 += dot(Qs[sv][c_1], Ts[sj][c_1]);
                    s1 += dot(Qs[sv][c_1 + 1u], Ts[sj][c_1 + 1u]);
                }
            }
            if (key < skey_end)
            {
                _878 = s0 + s1;
            }
            else
            {
                _878 = as_type<float>(0xff800000u /* -inf */);
            }
            S[sv][(t_1 * 16u) + sj] = _878;
            threadgroup_barrier(mem_flags::mem_threadgroup);
        }
        uint v_2 = tid / 16u;
        uint part = tid % 16u;
        uint len = nt * 16u;
        float mx = as_type<float>(0xff800000u /* -inf */);
        for (uint i = part; i < len; i += 16u)
        {
            mx = fast::max(mx, S[v_2][i]);
        }
        ((threadgroup float*)&Ts[(tid / 4u) / 65u][(tid / 4u) % 65u])[tid % 4u] = mx;
        if ((tid < 64u) && (next < key_end))
        {
            uint param_21 = next_page;
            uint param_22 = next;
            uint param_23 = g;
            roff[b ^ 1u][tid] = row_offset(param_21, param_22, param_23, p);
        }
        threadgroup_barrier(mem_flags::mem_threadgroup);
        float M = mrun[v_2];
        for (uint i_1 = 0u; i_1 < 16u; i_1++)
        {
            M = fast::max(M, ((threadgroup float*)&Ts[(((v_2 * 16u) + i_1) / 4u) / 65u][(((v_2 * 16u) + i_1) / 4u) % 65u])[((v_2 * 16u) + i_1) % 4u]);
        }
        for (uint i_2 = part; i_2 < len; i_2 += 16u)
        {
            if (M == as_type<float>(0xff800000u /* -inf */))
            {
                _995 = 0.0;
            }
            else
            {
                _995 = exp(S[v_2][i_2] - M);
            }
            S[v_2][i_2] = _995;
        }
        threadgroup_barrier(mem_flags::mem_threadgroup);
        if (part < 8u)
        {
            float l = 0.0;
            for (uint i_3 = part; i_3 < len; i_3 += 8u)
            {
                l += S[v_2][i_3];
            }
            ((threadgroup float*)&Ts[(((v_2 * 8u) + part) / 4u) / 65u][(((v_2 * 8u) + part) / 4u) % 65u])[((v_2 * 8u) + part) % 4u] = l;
        }
        threadgroup_barrier(mem_flags::mem_threadgroup);
        if (part == 0u)
        {
            if (M == as_type<float>(0xff800000u /* -inf */))
            {
                _1059 = 1.0;
            }
            else
            {
                _1059 = exp(mrun[v_2] - M);
            }
            float c_2 = _1059;
            float sum = 0.0;
            for (uint i_4 = 0u; i_4 < 8u; i_4++)
            {
                sum += ((threadgroup float*)&Ts[(((v_2 * 8u) + i_4) / 4u) / 65u][(((v_2 * 8u) + i_4) / 4u) % 65u])[((v_2 * 8u) + i_4) % 4u];
            }
            corr[v_2] = c_2;
            lsum[v_2] = (lsum[v_2] * c_2) + sum;
            mrun[v_2] = M;
        }
        threadgroup_barrier(mem_flags::mem_threadgroup);
        for (uint v_3 = 0u; v_3 < 8u; v_3++)
        {
            acc[v_3] *= corr[v_3];
        }
        for (uint t_2 = 0u; t_2 < nt; t_2++)
        {
            for (uint u_1 = 0u; u_1 < 8u; u_1++)
            {
                uint e_1 = (u_1 * 128u) + tid;
                uint j_1 = e_1 / _1160;
                if (j_1 < 16u)
                {
                    Ts[j_1][e_1 % _1168] = x_1[u_1];
                }
            }
            threadgroup_barrier(mem_flags::mem_threadgroup);
            if ((t_2 + 1u) < nt)
            {
                ulong param_25 = p.v;
                uint param_26 = key_end;
                uint param_27 = c0;
                uint param_28 = t_2 + 1u;
                uint param_29 = b;
                stage_load(param_24, param_25, param_26, param_27, param_28, param_29, gl_LocalInvocationID, roff);
                x_1 = param_24;
            }
            else
            {
                if ((c0 + 64u) < key_end)
                {
                    ulong param_31 = p.k;
                    uint param_32 = key_end;
                    uint param_33 = c0 + 64u;
                    uint param_34 = 0u;
                    uint param_35 = b ^ 1u;
                    stage_load(param_30, param_31, param_32, param_33, param_34, param_35, gl_LocalInvocationID, roff);
                    x_1 = param_30;
                }
            }
            if (owns_dims)
            {
                for (uint j_2 = 0u; j_2 < 16u; j_2++)
                {
                    float4 y4 = Ts[j_2][tid >> uint(1)];
                    if ((tid & 1u) == 0u)
                    {
                        _1240 = y4.xy;
                    }
                    else
                    {
                        _1240 = y4.zw;
                    }
                    float2 y = _1240;
                    for (uint v_4 = 0u; v_4 < 8u; v_4++)
                    {
                        acc[v_4] += (y * S[v_4][(t_2 * 16u) + j_2]);
                    }
                }
            }
            threadgroup_barrier(mem_flags::mem_threadgroup);
        }
    }
    for (uint v_5 = 0u; v_5 < 8u; v_5++)
    {
        uint row_1 = row0 + (v_5 / p.hb);
        uint h_1 = h0 + (v_5 % p.hb);
        bool _1309 = v_5 >= (p.hb * p.rt);
        bool _1317;
        if (!_1309)
        {
            _1317 = row_1 >= p.n;
        }
        else
        {
            _1317 = _1309;
        }
        if (_1317 || (h_1 >= h_end))
        {
            continue;
        }
        uint base = (row_1 * p.heads) + h_1;
        if (owns_dims)
        {
            if (p.n_splits == 1u)
            {
                device Floats* o = reinterpret_cast<device Floats*>(p.dst + (ulong((base * HD) + (2u * tid)) * 4ul));
                float2 y_1 = float2(acc[v_5].x / lsum[v_5], acc[v_5].y / lsum[v_5]);
                if (p.src2 != 0ul)
                {
                    device Floats* gate = reinterpret_cast<device Floats*>(p.src2 + (ulong((base * HD) + (2u * tid)) * 4ul));
                    float param_36 = gate->v[0];
                    float param_37 = gate->v[1];
                    y_1 = float2(y_1.x * sigmoid(param_36), y_1.y * sigmoid(param_37));
                }
                o->v[0] = y_1.x;
                o->v[1] = y_1.y;
            }
            else
            {
                device Floats* part_1 = reinterpret_cast<device Floats*>(p.part + (ulong((((base * p.n_splits) + split) * _1427) + (2u * tid)) * 4ul));
                part_1->v[0] = acc[v_5].x;
                part_1->v[1] = acc[v_5].y;
            }
        }
        if ((p.n_splits > 1u) && (tid == 0u))
        {
            device Floats* part_2 = reinterpret_cast<device Floats*>(p.part);
            part_2->v[(((base * p.n_splits) + split) * _1465) + HD] = mrun[v_5];
            part_2->v[((((base * p.n_splits) + split) * _1479) + HD) + 1u] = lsum[v_5];
        }
    }
}

