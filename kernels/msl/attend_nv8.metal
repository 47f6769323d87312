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
constant uint _77 = (HD + 31u);
constant uint _79 = (_77 / 32u);
constant uint _81 = (_79 * 34u);
constant uint _86 = (HD * 2u);
constant uint _88 = (HD * 4u);

struct Uints
{
    uint v[1];
};

constant uint _183 = (HD + 31u);
constant uint _184 = (_183 / 32u);
constant uint _185 = (_184 * 32u);
constant uint KV_TYPE_tmp [[function_constant(2)]];
constant uint KV_TYPE = is_function_constant_defined(KV_TYPE_tmp) ? KV_TYPE_tmp : 0u;
constant bool _226 = (KV_TYPE == 2u);
constant bool _235 = (KV_TYPE == 1u);

struct Uvec2s
{
    uint2 v[1];
};

struct Vec4s
{
    float4 v[1];
};

constant uint _298 = (HD / 4u);
constant uint _302 = (HD / 4u);

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

constant uint _468 = (HD / 4u);
constant uint _469 = (8u * _468);
constant uint _473 = (HD / 4u);
constant uint _477 = (HD / 4u);

struct Ints
{
    int v[1];
};

constant uint _752 = (HD / 4u);
constant uint _763 = (HD / 4u);
constant uint _834 = (HD / 4u);
constant uint _1083 = (HD / 4u);
constant uint _1091 = (HD / 4u);

struct Floats
{
    float v[1];
};

constant uint _1354 = (HD + 2u);
constant uint _1392 = (HD + 2u);
constant uint _1406 = (HD + 2u);
constant uint _1423_tmp [[function_constant(0)]];
constant uint _1423 = is_function_constant_defined(_1423_tmp) ? _1423_tmp : 1u;
constant uint3 gl_WorkGroupSize [[maybe_unused]] = uint3(_1423, 1u, 1u);

constant spvUnsafeArray<float, 4> _814 = spvUnsafeArray<float, 4>({ 0.0, 0.0, 0.0, 0.0 });

static inline __attribute__((always_inline))
uint kv_row_bytes(thread const uint& type)
{
    uint _72;
    if (type == 2u)
    {
        _72 = _81;
    }
    else
    {
        _72 = (type == 1u) ? _86 : _88;
    }
    return _72;
}

static inline __attribute__((always_inline))
uint kv_word(thread const ulong& a)
{
    device Uints* u = reinterpret_cast<device Uints*>(a & 18446744073709551612ul);
    uint _138;
    if ((a & 2ul) == 0ul)
    {
        _138 = u->v[0];
    }
    else
    {
        _138 = (u->v[0] >> uint(16)) | (u->v[1] << uint(16));
    }
    return _138;
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
    float _101;
    if (e == 0u)
    {
        _101 = float(h) * 5.9604644775390625e-08;
    }
    else
    {
        _101 = as_type<float>(((e + 112u) << uint(23)) | ((h & 1023u) << uint(13)));
    }
    return _101;
}

static inline __attribute__((always_inline))
float q8_scale(thread const ulong& row, thread const uint& j)
{
    ulong a = row + ulong(_185 + (2u * j));
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
    if (_226)
    {
        ulong param = row;
        uint param_1 = c;
        return q8_kv4(param, param_1);
    }
    if (_235)
    {
        uint2 h = (reinterpret_cast<device Uvec2s*>(row))->v[c];
        return float4(float2(as_type<half2>(h.x)), float2(as_type<half2>(h.y)));
    }
    return (reinterpret_cast<device Vec4s*>(row))->v[c];
}

static inline __attribute__((always_inline))
void stage_load(thread spvUnsafeArray<float4, 8>& x, thread const ulong& base, thread const uint& g, thread const uint& key_end, thread const uint& c0, thread const uint& t, thread const uint& b, thread uint3& gl_LocalInvocationID, threadgroup uint (&pg)[2][64], constant P& p)
{
    uint param = KV_TYPE;
    uint rb = kv_row_bytes(param);
    for (uint u = 0u; u < 8u; u++)
    {
        uint e = (u * 128u) + gl_LocalInvocationID.x;
        uint j = e / _298;
        uint c = e % _302;
        uint key = (c0 + (t * 16u)) + j;
        x[u] = float4(0.0);
        if ((j < 16u) && (key < key_end))
        {
            ulong row = (base + (ulong(pg[b][(t * 16u) + j]) * ulong(p.page_stride))) + (ulong((g * p.page_tokens) + (key % p.page_tokens)) * ulong(rb));
            ulong param_1 = row;
            uint param_2 = c;
            x[u] = kv4(param_1, param_2);
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
    threadgroup uint pg[2][64];
    threadgroup float4 Qs[8][65];
    threadgroup float mrun[8];
    threadgroup float lsum[8];
    threadgroup float4 Ts[16][65];
    threadgroup float S[8][64];
    threadgroup float red[128];
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
    for (uint t = tid; t < _469; t += 128u)
    {
        uint v = t / _473;
        uint c = t % _477;
        uint row = row0 + (v / p.hb);
        uint h = h0 + (v % p.hb);
        float4 x = float4(0.0);
        bool _500 = v < (p.hb * p.rt);
        bool _507;
        if (_500)
        {
            _507 = row < p.n;
        }
        else
        {
            _507 = _500;
        }
        if (_507 && (h < h_end))
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
    bool _563 = tid < 64u;
    bool _571;
    if (_563)
    {
        _571 = (key_begin + tid) < key_end;
    }
    else
    {
        _571 = _563;
    }
    if (_571)
    {
        pg[0][tid] = uint((reinterpret_cast<device Ints*>(p.pages))->v[(key_begin + tid) / p.page_tokens]);
    }
    uint sj = tid % 16u;
    uint sv = tid / 16u;
    uint srow = row0 + (sv / p.hb);
    bool _614 = sv < (p.hb * p.rt);
    bool _621;
    if (_614)
    {
        _621 = srow < p.n;
    }
    else
    {
        _621 = _614;
    }
    bool _632;
    if (_621)
    {
        _632 = (h0 + (sv % p.hb)) < h_end;
    }
    else
    {
        _632 = _621;
    }
    bool svalid = _632;
    uint _635;
    if (svalid)
    {
        _635 = min(key_end, ((p.n_past + srow) + 1u));
    }
    else
    {
        _635 = 0u;
    }
    uint skey_end = _635;
    spvUnsafeArray<float2, 8> acc;
    for (uint v_1 = 0u; v_1 < 8u; v_1++)
    {
        acc[v_1] = float2(0.0);
    }
    bool owns_dims = (2u * tid) < HD;
    threadgroup_barrier(mem_flags::mem_threadgroup);
    ulong param_1 = p.k;
    uint param_2 = g;
    uint param_3 = key_end;
    uint param_4 = key_begin;
    uint param_5 = 0u;
    uint param_6 = 0u;
    spvUnsafeArray<float4, 8> param;
    stage_load(param, param_1, param_2, param_3, param_4, param_5, param_6, gl_LocalInvocationID, pg, p);
    spvUnsafeArray<float4, 8> x_1;
    x_1 = param;
    spvUnsafeArray<float4, 8> param_7;
    spvUnsafeArray<float4, 8> param_14;
    float _866;
    float _964;
    float _995;
    spvUnsafeArray<float4, 8> param_21;
    spvUnsafeArray<float4, 8> param_28;
    float2 _1167;
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
                uint j = e / _752;
                if (j < 16u)
                {
                    Ts[j][e % _763] = x_1[u];
                }
            }
            threadgroup_barrier(mem_flags::mem_threadgroup);
            if ((t_1 + 1u) < nt)
            {
                ulong param_8 = p.k;
                uint param_9 = g;
                uint param_10 = key_end;
                uint param_11 = c0;
                uint param_12 = t_1 + 1u;
                uint param_13 = b;
                stage_load(param_7, param_8, param_9, param_10, param_11, param_12, param_13, gl_LocalInvocationID, pg, p);
                x_1 = param_7;
            }
            else
            {
                ulong param_15 = p.v;
                uint param_16 = g;
                uint param_17 = key_end;
                uint param_18 = c0;
                uint param_19 = 0u;
                uint param_20 = b;
                stage_load(param_14, param_15, param_16, param_17, param_18, param_19, param_20, gl_LocalInvocationID, pg, p);
                x_1 = param_14;
            }
            spvUnsafeArray<float, 4> s = spvUnsafeArray<float, 4>({ 0.0, 0.0, 0.0, 0.0 });
            uint key = (c0 + (t_1 * 16u)) + sj;
            if (key < skey_end)
            {
                for (uint c_1 = 0u; c_1 < _834; c_1++)
                {
                    uint _838 = c_1 & 3u;
                    s[_838] += dot(Qs[sv][c_1], Ts[sj][c_1]);
                }
            }
            if (key < skey_end)
            {
                _866 = (s[0] + s[1]) + (s[2] + s[3]);
            }
            else
            {
                _866 = as_type<float>(0xff800000u /* -inf */);
            }
            S[sv][(t_1 * 16u) + sj] = _866;
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
        red[tid] = mx;
        if (tid < 64u)
        {
            pg[b ^ 1u][tid] = next_page;
        }
        threadgroup_barrier(mem_flags::mem_threadgroup);
        float M = mrun[v_2];
        for (uint i_1 = 0u; i_1 < 16u; i_1++)
        {
            M = fast::max(M, red[(v_2 * 16u) + i_1]);
        }
        float l = 0.0;
        for (uint i_2 = part; i_2 < len; i_2 += 16u)
        {
            if (M == as_type<float>(0xff800000u /* -inf */))
            {
                _964 = 0.0;
            }
            else
            {
                _964 = exp(S[v_2][i_2] - M);
            }
            float e_1 = _964;
            S[v_2][i_2] = e_1;
            l += e_1;
        }
        threadgroup_barrier(mem_flags::mem_threadgroup);
        red[tid] = l;
        threadgroup_barrier(mem_flags::mem_threadgroup);
        if (part == 0u)
        {
            if (M == as_type<float>(0xff800000u /* -inf */))
            {
                _995 = 1.0;
            }
            else
            {
                _995 = exp(mrun[v_2] - M);
            }
            float c_2 = _995;
            float sum = 0.0;
            for (uint i_3 = 0u; i_3 < 16u; i_3++)
            {
                sum += red[(v_2 * 16u) + i_3];
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
                uint e_2 = (u_1 * 128u) + tid;
                uint j_1 = e_2 / _1083;
                if (j_1 < 16u)
                {
                    Ts[j_1][e_2 % _1091] = x_1[u_1];
                }
            }
            threadgroup_barrier(mem_flags::mem_threadgroup);
            if ((t_2 + 1u) < nt)
            {
                ulong param_22 = p.v;
                uint param_23 = g;
                uint param_24 = key_end;
                uint param_25 = c0;
                uint param_26 = t_2 + 1u;
                uint param_27 = b;
                stage_load(param_21, param_22, param_23, param_24, param_25, param_26, param_27, gl_LocalInvocationID, pg, p);
                x_1 = param_21;
            }
            else
            {
                if ((c0 + 64u) < key_end)
                {
                    ulong param_29 = p.k;
                    uint param_30 = g;
                    uint param_31 = key_end;
                    uint param_32 = c0 + 64u;
                    uint param_33 = 0u;
                    uint param_34 = b ^ 1u;
                    stage_load(param_28, param_29, param_30, param_31, param_32, param_33, param_34, gl_LocalInvocationID, pg, p);
                    x_1 = param_28;
                }
            }
            if (owns_dims)
            {
                for (uint j_2 = 0u; j_2 < 16u; j_2++)
                {
                    float4 y4 = Ts[j_2][tid >> uint(1)];
                    if ((tid & 1u) == 0u)
                    {
                        _1167 = y4.xy;
                    }
                    else
                    {
                        _1167 = y4.zw;
                    }
                    float2 y = _1167;
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
        bool _1236 = v_5 >= (p.hb * p.rt);
        bool _1244;
        if (!_1236)
        {
            _1244 = row_1 >= p.n;
        }
        else
        {
            _1244 = _1236;
        }
        if (_1244 || (h_1 >= h_end))
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
                    float param_35 = gate->v[0];
                    float param_36 = gate->v[1];
                    y_1 = float2(y_1.x * sigmoid(param_35), y_1.y * sigmoid(param_36));
                }
                o->v[0] = y_1.x;
                o->v[1] = y_1.y;
            }
            else
            {
                device Floats* part_1 = reinterpret_cast<device Floats*>(p.part + (ulong((((base * p.n_splits) + split) * _1354) + (2u * tid)) * 4ul));
                part_1->v[0] = acc[v_5].x;
                part_1->v[1] = acc[v_5].y;
            }
        }
        if ((p.n_splits > 1u) && (tid == 0u))
        {
            device Floats* part_2 = reinterpret_cast<device Floats*>(p.part);
            part_2->v[(((base * p.n_splits) + split) * _1392) + HD] = mrun[v_5];
            part_2->v[((((base * p.n_splits) + split) * _1406) + HD) + 1u] = lsum[v_5];
        }
    }
}

