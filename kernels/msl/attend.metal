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
    ulong src2;
};

struct Ints
{
    int v[1];
};

constant uint HD_tmp [[function_constant(1)]];
constant uint HD = is_function_constant_defined(HD_tmp) ? HD_tmp : 128u;
constant uint _171 = (HD / 4u);
constant uint _172 = (16u * _171);
constant uint _177 = (HD / 4u);
constant uint _181 = (HD / 4u);

struct Vec4s
{
    float4 v[1];
};

constant uint _353 = (HD / 4u);

struct Floats
{
    float v[1];
};

constant uint _772 = (HD + 2u);
constant uint _802 = (HD + 2u);
constant uint _816 = (HD + 2u);
constant uint _833_tmp [[function_constant(0)]];
constant uint _833 = is_function_constant_defined(_833_tmp) ? _833_tmp : 1u;
constant uint3 gl_WorkGroupSize [[maybe_unused]] = uint3(_833, 1u, 1u);

constant spvUnsafeArray<float, 4> _328 = spvUnsafeArray<float, 4>({ 0.0, 0.0, 0.0, 0.0 });

static inline __attribute__((always_inline))
ulong kv_row(thread const ulong& base, thread const uint& pos, thread const uint& g, constant P& p)
{
    uint page = uint((reinterpret_cast<device Ints*>(p.pages))->v[pos / p.page_tokens]);
    return base + (((ulong(page) * ulong(p.page_stride)) + ulong(((g * p.page_tokens) + (pos % p.page_tokens)) * HD)) * 4ul);
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
    for (uint t = tid; t < _172; t += 128u)
    {
        uint v = t / _177;
        uint c = t % _181;
        uint row = row0 + (v / p.hb);
        uint h = h0 + (v % p.hb);
        float4 x = float4(0.0);
        bool _208 = v < (p.hb * p.rt);
        bool _215;
        if (_208)
        {
            _215 = row < p.n;
        }
        else
        {
            _215 = _208;
        }
        if (_215 && (h < h_end))
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
    spvUnsafeArray<spvUnsafeArray<float, 2>, 16> acc;
    for (uint v_1 = 0u; v_1 < 16u; v_1++)
    {
        for (uint c_1 = 0u; c_1 < 2u; c_1++)
        {
            acc[v_1][c_1] = 0.0;
        }
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    uint j = tid % 32u;
    uint vg = tid / 32u;
    float _455;
    for (uint k0 = key_begin; k0 < key_end; k0 += 32u)
    {
        uint key = k0 + j;
        spvUnsafeArray<float, 4> s = spvUnsafeArray<float, 4>({ 0.0, 0.0, 0.0, 0.0 });
        if (key < key_end)
        {
            ulong param = p.k;
            uint param_1 = key;
            uint param_2 = g;
            const device Vec4s* kr = reinterpret_cast<device Vec4s*>(kv_row(param, param_1, param_2, p));
            for (uint c_2 = 0u; c_2 < _353; c_2++)
            {
                float4 kv = kr->v[c_2];
                for (uint i = 0u; i < 4u; i++)
                {
                    s[i] += dot(Qs[(vg * 4u) + i][c_2], kv);
                }
            }
        }
        for (uint i_1 = 0u; i_1 < 4u; i_1++)
        {
            uint v_2 = (vg * 4u) + i_1;
            uint row_1 = row0 + (v_2 / p.hb);
            bool _410 = key < key_end;
            bool _420;
            if (_410)
            {
                _420 = v_2 < (p.hb * p.rt);
            }
            else
            {
                _420 = _410;
            }
            bool _427;
            if (_420)
            {
                _427 = row_1 < p.n;
            }
            else
            {
                _427 = _420;
            }
            bool _438;
            if (_427)
            {
                _438 = (h0 + (v_2 % p.hb)) < h_end;
            }
            else
            {
                _438 = _427;
            }
            bool _447;
            if (_438)
            {
                _447 = key <= (p.n_past + row_1);
            }
            else
            {
                _447 = _438;
            }
            bool ok = _447;
            if (ok)
            {
                _455 = s[i_1];
            }
            else
            {
                _455 = as_type<float>(0xff800000u /* -inf */);
            }
            S[v_2][j] = _455;
        }
        threadgroup_barrier(mem_flags::mem_threadgroup);
        if (tid < 16u)
        {
            float mx = mrun[tid];
            for (uint i_2 = 0u; i_2 < 32u; i_2++)
            {
                mx = fast::max(mx, S[tid][i_2]);
            }
            float c_3 = 1.0;
            float l = lsum[tid];
            if (mx != as_type<float>(0xff800000u /* -inf */))
            {
                c_3 = exp(mrun[tid] - mx);
                l *= c_3;
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
            corr[tid] = c_3;
            lsum[tid] = l;
            mrun[tid] = mx;
        }
        threadgroup_barrier(mem_flags::mem_threadgroup);
        for (uint v_3 = 0u; v_3 < 16u; v_3++)
        {
            for (uint c_4 = 0u; c_4 < 2u; c_4++)
            {
                acc[v_3][c_4] *= corr[v_3];
            }
        }
        uint nk = min(32u, (key_end - k0));
        for (uint i_5 = 0u; i_5 < nk; i_5++)
        {
            ulong param_3 = p.v;
            uint param_4 = k0 + i_5;
            uint param_5 = g;
            device Floats* vr = reinterpret_cast<device Floats*>(kv_row(param_3, param_4, param_5, p));
            for (uint c_5 = 0u; c_5 < 2u; c_5++)
            {
                uint d = tid + (c_5 * 128u);
                if (d >= HD)
                {
                    break;
                }
                float x_1 = vr->v[d];
                for (uint v_4 = 0u; v_4 < 16u; v_4++)
                {
                    acc[v_4][c_5] += (S[v_4][i_5] * x_1);
                }
            }
        }
        threadgroup_barrier(mem_flags::mem_threadgroup);
    }
    for (uint v_5 = 0u; v_5 < 16u; v_5++)
    {
        uint row_2 = row0 + (v_5 / p.hb);
        uint h_1 = h0 + (v_5 % p.hb);
        bool _698 = v_5 >= (p.hb * p.rt);
        bool _706;
        if (!_698)
        {
            _706 = row_2 >= p.n;
        }
        else
        {
            _706 = _698;
        }
        if (_706 || (h_1 >= h_end))
        {
            continue;
        }
        uint base = (row_2 * p.heads) + h_1;
        for (uint c_6 = 0u; c_6 < 2u; c_6++)
        {
            uint d_1 = tid + (c_6 * 128u);
            if (d_1 >= HD)
            {
                break;
            }
            if (p.n_splits == 1u)
            {
                (reinterpret_cast<device Floats*>(p.dst))->v[(base * HD) + d_1] = acc[v_5][c_6] / lsum[v_5];
            }
            else
            {
                (reinterpret_cast<device Floats*>(p.part))->v[(((base * p.n_splits) + split) * _772) + d_1] = acc[v_5][c_6];
            }
        }
        if ((p.n_splits > 1u) && (tid == 0u))
        {
            device Floats* part = reinterpret_cast<device Floats*>(p.part);
            part->v[(((base * p.n_splits) + split) * _802) + HD] = mrun[v_5];
            part->v[((((base * p.n_splits) + split) * _816) + HD) + 1u] = lsum[v_5];
        }
    }
}

