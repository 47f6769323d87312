#pragma clang diagnostic ignored "-Wmissing-prototypes"

#include <metal_stdlib>
#include <simd/simd.h>

using namespace metal;

// Implementation of the unsigned GLSL findMSB() function
template<typename T>
inline T spvFindUMSB(T x)
{
    return select(clz(T(0)) - (clz(x) + T(1)), T(-1), x == T(0));
}

struct Floats;
struct Ints;
struct Uints;

struct Floats
{
    float v[1];
};

constant uint HD_tmp [[function_constant(1)]];
constant uint HD = is_function_constant_defined(HD_tmp) ? HD_tmp : 128u;
constant uint _91 = (HD + 31u);
constant uint _93 = (_91 / 32u);
constant uint _95 = (_93 * 34u);
constant uint _99 = (HD * 2u);
constant uint _101 = (HD * 4u);

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

struct Uints
{
    uint v[1];
};

constant uint _532 = (HD + 31u);
constant uint _533 = (_532 / 32u);
constant uint _534 = (_533 * 34u);
constant uint _586 = (HD + 31u);
constant uint _587 = (_586 / 32u);
constant uint _594 = (HD + 31u);
constant uint _595 = (_594 / 32u);
constant uint _599 = (HD + 31u);
constant uint _600 = (_599 / 32u);
constant uint _738 = (HD + 31u);
constant uint _739 = (_738 / 32u);
constant uint _740 = (_739 * 32u);
constant uint _761 = (HD + 31u);
constant uint _762 = (_761 / 32u);
constant uint _780 = (HD + 31u);
constant uint _781 = (_780 / 32u);
constant uint _782 = (_781 * 32u);
constant uint _785 = (HD + 31u);
constant uint _786 = (_785 / 32u);
constant uint _836_tmp [[function_constant(0)]];
constant uint _836 = is_function_constant_defined(_836_tmp) ? _836_tmp : 1u;
constant uint3 gl_WorkGroupSize [[maybe_unused]] = uint3(_836, 1u, 1u);
constant uint _861 = (HD / 2u);
constant uint _869 = (HD / 2u);
constant uint _873 = (HD / 2u);
constant uint _880 = (HD / 2u);

static inline __attribute__((always_inline))
uint flat_group(thread uint3& gl_WorkGroupID, thread uint3& gl_NumWorkGroups)
{
    return gl_WorkGroupID.x + (gl_WorkGroupID.y * gl_NumWorkGroups.x);
}

static inline __attribute__((always_inline))
bool q8_written(thread const uint& lp, thread const uint& r, constant P& p)
{
    return (((lp * p.page_tokens) + (r % p.page_tokens)) - p.n_past) < p.n;
}

static inline __attribute__((always_inline))
device Floats* q8_source(thread const ulong& src, thread const uint& lp, thread const uint& r, constant P& p)
{
    uint P_1 = p.page_tokens;
    return reinterpret_cast<device Floats*>(src + (ulong((((((lp * P_1) + (r % P_1)) - p.n_past) * p.kv_heads) + (r / P_1)) * HD) * 4ul));
}

static inline __attribute__((always_inline))
float f16_exact(thread const uint& h)
{
    uint e = h >> uint(10);
    float _113;
    if (e == 0u)
    {
        _113 = float(h) * 5.9604644775390625e-08;
    }
    else
    {
        _113 = as_type<float>(((e + 112u) << uint(23)) | ((h & 1023u) << uint(13)));
    }
    return _113;
}

static inline __attribute__((always_inline))
bool q8_rounds_up(thread const float& amax, thread const uint& lo)
{
    uint param = lo;
    uint param_1 = lo + 1u;
    float t = 127.0 * (0.5 * (f16_exact(param) + f16_exact(param_1)));
    bool _234 = amax > t;
    bool _247;
    if (!_234)
    {
        bool _240 = amax == t;
        bool _246;
        if (_240)
        {
            _246 = (lo & 1u) == 1u;
        }
        else
        {
            _246 = _240;
        }
        _247 = _246;
    }
    else
    {
        _247 = _234;
    }
    return _247;
}

static inline __attribute__((always_inline))
uint q8_d_bits(thread const float& amax)
{
    float a = amax / 127.0;
    uint _257;
    if (a < 6.103515625e-05)
    {
        _257 = uint(a * 16777216.0);
    }
    else
    {
        _257 = min(((as_type<uint>(a) >> uint(13)) - 114688u), 31744u);
    }
    uint h = _257;
    bool _274 = h < 31744u;
    bool _282;
    if (_274)
    {
        float param = amax;
        uint param_1 = h;
        _282 = q8_rounds_up(param, param_1);
    }
    else
    {
        _282 = _274;
    }
    if (_282)
    {
        h++;
    }
    bool _289 = h > 0u;
    bool _299;
    if (_289)
    {
        float param_2 = amax;
        uint param_3 = h - 1u;
        _299 = !q8_rounds_up(param_2, param_3);
    }
    else
    {
        _299 = _289;
    }
    if (_299)
    {
        h--;
    }
    return h;
}

static inline __attribute__((always_inline))
float q8_recip(thread const uint& h)
{
    uint m = h & 1023u;
    uint e = h >> uint(10);
    int _317;
    if (e == 0u)
    {
        _317 = 10 - int(spvFindUMSB(m));
    }
    else
    {
        _317 = 0;
    }
    int s = _317;
    int _328;
    if (e == 0u)
    {
        _328 = (-24) - s;
    }
    else
    {
        _328 = int(e) - 25;
    }
    int ex = _328;
    uint _343;
    if (e == 0u)
    {
        _343 = m << uint(s);
    }
    else
    {
        _343 = m | 1024u;
    }
    uint M = _343;
    ulong num = 17179869184ul;
    uint r = uint(num / ulong(M));
    uint rem = uint(num - (ulong(r) * ulong(M)));
    bool _374 = (2u * rem) > M;
    bool _388;
    if (!_374)
    {
        bool _381 = (2u * rem) == M;
        bool _387;
        if (_381)
        {
            _387 = (r & 1u) == 1u;
        }
        else
        {
            _387 = _381;
        }
        _388 = _387;
    }
    else
    {
        _388 = _374;
    }
    if (_388)
    {
        r++;
    }
    return ldexp(float(r), (-34) - ex);
}

static inline __attribute__((always_inline))
void kv_write_q8(thread uint3& gl_WorkGroupID, thread uint3& gl_NumWorkGroups, constant P& p, thread uint3& gl_LocalInvocationID, threadgroup uint (&q8_d)[16], threadgroup float (&q8_inv)[16])
{
    uint rows = p.n * p.kv_heads;
    uint idx = flat_group(gl_WorkGroupID, gl_NumWorkGroups);
    uint tid = gl_LocalInvocationID.x;
    if (idx >= (2u * rows))
    {
        return;
    }
    uint i = idx % rows;
    uint pos = p.n_past + (i / p.kv_heads);
    uint g = i % p.kv_heads;
    uint P_1 = p.page_tokens;
    uint lp = pos / P_1;
    uint r0 = ((g * P_1) + (pos % P_1)) & 4294967294u;
    bool _511 = r0 != ((g * P_1) + (pos % P_1));
    bool _519;
    if (_511)
    {
        uint param = lp;
        uint param_1 = r0;
        _519 = q8_written(param, param_1, p);
    }
    else
    {
        _519 = _511;
    }
    if (_519)
    {
        return;
    }
    uint nrows = min(2u, ((p.kv_heads * P_1) - r0));
    uint RB = _534;
    ulong _539;
    if (idx < rows)
    {
        _539 = p.k;
    }
    else
    {
        _539 = p.v;
    }
    ulong base = (_539 + (ulong(long((reinterpret_cast<device Ints*>(p.pages))->v[lp])) * ulong(p.page_stride))) + (ulong(r0) * ulong(RB));
    ulong _574;
    if (idx < rows)
    {
        _574 = p.src;
    }
    else
    {
        _574 = p.src2;
    }
    ulong src = _574;
    if (tid < (nrows * _587))
    {
        uint k = tid / _595;
        uint j = tid % _600;
        uint r = r0 + k;
        uint param_2 = lp;
        uint param_3 = r;
        if (q8_written(param_2, param_3, p))
        {
            ulong param_4 = src;
            uint param_5 = lp;
            uint param_6 = r;
            device Floats* x = q8_source(param_4, param_5, param_6, p);
            float amax = 0.0;
            uint _626 = 32u * j;
            for (uint c = _626; c < min(((32u * j) + 32u), HD); c++)
            {
                amax = fast::max(amax, abs(x->v[c]));
            }
            float param_7 = amax;
            uint h = q8_d_bits(param_7);
            q8_d[tid] = h;
            float _668;
            if ((h > 0u) && (h < 31744u))
            {
                uint param_8 = h;
                _668 = q8_recip(param_8);
            }
            else
            {
                _668 = 0.0;
            }
            q8_inv[tid] = _668;
        }
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    uint _822;
    for (uint w = tid; w < ((nrows * RB) / 4u); w += gl_WorkGroupSize.x)
    {
        uint word = 0u;
        uint keep = 0u;
        for (uint b = 0u; b < 4u; b++)
        {
            uint k_1 = ((4u * w) + b) / RB;
            uint o = ((4u * w) + b) % RB;
            uint r_1 = r0 + k_1;
            uint byte = 0u;
            uint param_9 = lp;
            uint param_10 = r_1;
            if (!q8_written(param_9, param_10, p))
            {
                keep |= (255u << (8u * b));
                continue;
            }
            if (o < _740)
            {
                if (o < HD)
                {
                    ulong param_11 = src;
                    uint param_12 = lp;
                    uint param_13 = r_1;
                    float x_1 = q8_source(param_11, param_12, param_13, p)->v[o];
                    byte = uint(int(rint(fast::min(fast::max(x_1 * q8_inv[(k_1 * _762) + (o / 32u)], -127.0), 127.0)))) & 255u;
                }
            }
            else
            {
                uint e = o - _782;
                byte = (q8_d[(k_1 * _786) + (e / 2u)] >> (8u * (e & 1u))) & 255u;
            }
            word |= (byte << (8u * b));
        }
        device Uints* dst = reinterpret_cast<device Uints*>(base + ulong(4u * w));
        if (keep != 4294967295u)
        {
            if (keep == 0u)
            {
                _822 = word;
            }
            else
            {
                _822 = (dst->v[0] & keep) | word;
            }
            dst->v[0] = _822;
        }
    }
}

static inline __attribute__((always_inline))
uint kv_row_bytes(thread const uint& type)
{
    uint _86;
    if (type == 2u)
    {
        _86 = _95;
    }
    else
    {
        _86 = (type == 1u) ? _99 : _101;
    }
    return _86;
}

static inline __attribute__((always_inline))
ulong kv_row(thread const ulong& base, thread const uint& pos, thread const uint& g, constant P& p)
{
    uint page = uint((reinterpret_cast<device Ints*>(p.pages))->v[pos / p.page_tokens]);
    uint param = p.kv_type;
    return (base + (ulong(page) * ulong(p.page_stride))) + (ulong((g * p.page_tokens) + (pos % p.page_tokens)) * ulong(kv_row_bytes(param)));
}

static inline __attribute__((always_inline))
void kv_put(thread const ulong& row, thread const uint& c, thread const float2& x, constant P& p)
{
    if (p.kv_type == 1u)
    {
        (reinterpret_cast<device Uints*>(row))->v[c] = as_type<uint>(half2(x));
    }
    else
    {
        (reinterpret_cast<device Floats*>(row))->v[2u * c] = x.x;
        (reinterpret_cast<device Floats*>(row))->v[(2u * c) + 1u] = x.y;
    }
}

kernel void splash_kv_write(constant P& p [[buffer(0)]], uint3 gl_WorkGroupID [[threadgroup_position_in_grid]], uint3 gl_NumWorkGroups [[threadgroups_per_grid]], uint3 gl_LocalInvocationID [[thread_position_in_threadgroup]])
{
    threadgroup uint q8_d[16];
    threadgroup float q8_inv[16];
    threadgroup float wg_red[256];
    threadgroup uint wg_red_u[256];
    if (p.kv_type == 2u)
    {
        kv_write_q8(gl_WorkGroupID, gl_NumWorkGroups, p, gl_LocalInvocationID, q8_d, q8_inv);
        return;
    }
    uint i = (flat_group(gl_WorkGroupID, gl_NumWorkGroups) * gl_WorkGroupSize.x) + gl_LocalInvocationID.x;
    if (i >= ((p.n * p.kv_heads) * _861))
    {
        return;
    }
    uint c = i % _869;
    uint g = (i / _873) % p.kv_heads;
    uint row = i / (_880 * p.kv_heads);
    device Floats* k = reinterpret_cast<device Floats*>(p.src);
    device Floats* v = reinterpret_cast<device Floats*>(p.src2);
    ulong param = p.k;
    uint param_1 = p.n_past + row;
    uint param_2 = g;
    ulong param_3 = kv_row(param, param_1, param_2, p);
    uint param_4 = c;
    float2 param_5 = float2(k->v[2u * i], k->v[(2u * i) + 1u]);
    kv_put(param_3, param_4, param_5, p);
    ulong param_6 = p.v;
    uint param_7 = p.n_past + row;
    uint param_8 = g;
    ulong param_9 = kv_row(param_6, param_7, param_8, p);
    uint param_10 = c;
    float2 param_11 = float2(v->v[2u * i], v->v[(2u * i) + 1u]);
    kv_put(param_9, param_10, param_11, p);
}

