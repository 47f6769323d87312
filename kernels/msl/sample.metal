#pragma clang diagnostic ignored "-Wmissing-prototypes"
#pragma clang diagnostic ignored "-Wmissing-braces"
#pragma clang diagnostic ignored "-Wunused-variable"

#include <metal_stdlib>
#include <simd/simd.h>
#include <metal_atomic>

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

template<typename T>
[[clang::optnone]] T spvFMul(T l, T r)
{
    return fma(l, r, T(0));
}

template<typename T, int Cols, int Rows>
[[clang::optnone]] vec<T, Cols> spvFMulVectorMatrix(vec<T, Rows> v, matrix<T, Cols, Rows> m)
{
    vec<T, Cols> res = vec<T, Cols>(0);
    for (uint i = Rows; i > 0; --i)
    {
        vec<T, Cols> tmp(0);
        for (uint j = 0; j < Cols; ++j)
        {
            tmp[j] = m[j][i - 1];
        }
        res = fma(tmp, vec<T, Cols>(v[i - 1]), res);
    }
    return res;
}

template<typename T, int Cols, int Rows>
[[clang::optnone]] vec<T, Rows> spvFMulMatrixVector(matrix<T, Cols, Rows> m, vec<T, Cols> v)
{
    vec<T, Rows> res = vec<T, Rows>(0);
    for (uint i = Cols; i > 0; --i)
    {
        res = fma(m[i - 1], vec<T, Rows>(v[i - 1]), res);
    }
    return res;
}

template<typename T, int LCols, int LRows, int RCols, int RRows>
[[clang::optnone]] matrix<T, RCols, LRows> spvFMulMatrixMatrix(matrix<T, LCols, LRows> l, matrix<T, RCols, RRows> r)
{
    matrix<T, RCols, LRows> res;
    for (uint i = 0; i < RCols; i++)
    {
        vec<T, RCols> tmp(0);
        for (uint j = 0; j < LCols; j++)
        {
            tmp = fma(vec<T, RCols>(r[i][j]), l[j], tmp);
        }
        res[i] = tmp;
    }
    return res;
}

template<typename T>
[[clang::optnone]] T spvFAdd(T l, T r)
{
    return fma(T(1), l, r);
}

template<typename T>
[[clang::optnone]] T spvFSub(T l, T r)
{
    return fma(T(-1), r, l);
}

struct Uints;
struct Floats;
struct Addrs;

struct Uints
{
    uint v[1];
};

struct Floats
{
    float v[1];
};

constant uint _455_tmp [[function_constant(0)]];
constant uint _455 = is_function_constant_defined(_455_tmp) ? _455_tmp : 1u;
constant uint3 gl_WorkGroupSize [[maybe_unused]] = uint3(_455, 1u, 1u);

struct P
{
    ulong rows;
    ulong out_;
    ulong masks;
    ulong params;
    uint n;
    uint vocab;
};

struct Addrs
{
    ulong v[1];
};

static inline __attribute__((always_inline))
uint flat_group(thread uint3& gl_WorkGroupID, thread uint3& gl_NumWorkGroups)
{
    return gl_WorkGroupID.x + (gl_WorkGroupID.y * gl_NumWorkGroups.x);
}

static inline __attribute__((always_inline))
bool bit_set(thread const ulong& mask, thread const uint& t)
{
    bool _201 = mask == 0ul;
    bool _222;
    if (!_201)
    {
        _222 = (((reinterpret_cast<device Uints*>(mask))->v[t >> uint(5)] >> (t & 31u)) & 1u) != 0u;
    }
    else
    {
        _222 = _201;
    }
    return _222;
}

static inline __attribute__((always_inline))
bool may(thread const uint& t, thread ulong& allowed, thread ulong& tokens)
{
    ulong param = allowed;
    uint param_1 = t;
    bool _231 = bit_set(param, param_1);
    bool _240;
    if (_231)
    {
        ulong param_2 = tokens;
        uint param_3 = t;
        _240 = bit_set(param_2, param_3);
    }
    else
    {
        _240 = _231;
    }
    return _240;
}

static inline __attribute__((always_inline))
float workgroup_max(thread float& v, threadgroup float (&wg_red)[256], thread uint& gl_SubgroupID, thread uint& gl_NumSubgroups)
{
    v = simd_max(v);
    bool _121 = simd_is_first();
    if (_121)
    {
        wg_red[gl_SubgroupID] = v;
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    float s = wg_red[0];
    for (uint i = 1u; i < gl_NumSubgroups; i++)
    {
        s = fast::max(s, wg_red[i]);
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    return s;
}

static inline __attribute__((always_inline))
uint workgroup_min_uint(thread uint& v, thread uint& gl_SubgroupID, thread uint& gl_NumSubgroups, threadgroup uint (&wg_red_u)[256])
{
    v = simd_min(v);
    bool _167 = simd_is_first();
    if (_167)
    {
        wg_red_u[gl_SubgroupID] = v;
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    uint s = wg_red_u[0];
    for (uint i = 1u; i < gl_NumSubgroups; i++)
    {
        s = min(s, wg_red_u[i]);
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    return s;
}

static inline __attribute__((always_inline))
float workgroup_sum(thread float& v, threadgroup float (&wg_red)[256], thread uint& gl_SubgroupID, thread uint& gl_NumSubgroups)
{
    v = simd_sum(v);
    bool _80 = simd_is_first();
    if (_80)
    {
        wg_red[gl_SubgroupID] = v;
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    float s = 0.0;
    for (uint i = 0u; i < gl_NumSubgroups; i++)
    {
        s += wg_red[i];
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    return s;
}

static inline __attribute__((always_inline))
float sample_exp(thread const float& in_)
{
    float x = (in_ > (-87.0)) ? in_ : (-87.0);
    float n = rint(spvFMul(x, 1.44269502162933349609375));
    float a = spvFMul(n, 0.693359375);
    float r = spvFSub(x, a);
    float b = spvFMul(n, 0.00021219444170128554105758666992188);
    r = spvFAdd(r, b);
    float q = 0.00019875691214110702276229858398438;
    float t = spvFMul(q, r);
    q = spvFAdd(t, 0.00139819993637502193450927734375);
    t = spvFMul(q, r);
    q = spvFAdd(t, 0.008333452045917510986328125);
    t = spvFMul(q, r);
    q = spvFAdd(t, 0.0416657961905002593994140625);
    t = spvFMul(q, r);
    q = spvFAdd(t, 0.1666666567325592041015625);
    t = spvFMul(q, r);
    q = spvFAdd(t, 0.5);
    t = spvFMul(q, r);
    t = spvFMul(t, r);
    float y = spvFAdd(t, r);
    y = spvFAdd(y, 1.0);
    float e = as_type<float>(uint(int(n) + 127) << uint(23));
    float w = spvFMul(y, e);
    return (in_ >= (-87.0)) ? w : 0.0;
}

static inline __attribute__((always_inline))
uint key_of(thread const uint& t, thread ulong& allowed, thread ulong& tokens, device Floats* thread & z, thread float& mx, thread float& inv_t)
{
    uint param = t;
    if (!may(param, allowed, tokens))
    {
        return 0u;
    }
    float x = spvFMul(spvFSub(z->v[t], mx), inv_t);
    float param_1 = x;
    float w = sample_exp(param_1);
    uint _367;
    if (w >= as_type<float>(696254464u))
    {
        _367 = as_type<uint>(w);
    }
    else
    {
        _367 = 0u;
    }
    return _367;
}

static inline __attribute__((always_inline))
ulong workgroup_sum64(thread const ulong& v, thread uint3& gl_LocalInvocationID, threadgroup ulong (&red64)[256])
{
    uint tid = gl_LocalInvocationID.x;
    red64[tid] = v;
    threadgroup_barrier(mem_flags::mem_threadgroup);
    for (uint s = 128u; s > 0u; s = s >> uint(1))
    {
        if (tid < s)
        {
            red64[tid] += red64[tid + s];
        }
        threadgroup_barrier(mem_flags::mem_threadgroup);
    }
    ulong r = red64[0];
    threadgroup_barrier(mem_flags::mem_threadgroup);
    return r;
}

static inline __attribute__((always_inline))
bool kept(thread const uint& key, thread const uint& t, thread uint& th, thread uint& cut, thread uint& floor_key)
{
    bool _388 = (key != 0u) && (key >= floor_key);
    bool _405;
    if (_388)
    {
        bool _393 = key > th;
        bool _404;
        if (!_393)
        {
            _404 = (key == th) && (t <= cut);
        }
        else
        {
            _404 = _393;
        }
        _405 = _404;
    }
    else
    {
        _405 = _388;
    }
    return _405;
}

static inline __attribute__((always_inline))
ulong mass_of(thread const uint& key)
{
    return ulong(as_type<float>(key) * 17592186044416.0);
}

static inline __attribute__((always_inline))
uint radix_select(thread const bool& by_mass, thread const ulong& need, thread ulong& above, thread uint& th, thread uint& cut, thread uint& floor_key, thread ulong& allowed, thread ulong& tokens, device Floats* thread & z, thread float& mx, thread float& inv_t, thread uint3& gl_LocalInvocationID, threadgroup ulong (&red64)[256], threadgroup uint (&hist_n)[1024], threadgroup uint (&hist_lo)[1024], threadgroup uint (&hist_hi)[1024], constant P& p, threadgroup uint (&sel_digit)[1], threadgroup ulong (&sel_acc)[1])
{
    uint tid = gl_LocalInvocationID.x;
    uint wg = gl_WorkGroupSize.x;
    uint prefix = 0u;
    ulong acc = 0ul;
    uint _497;
    spvUnsafeArray<ulong, 4> u;
    ulong _615;
    ulong _670;
    for (int shift = 20; shift >= 0; shift -= 10)
    {
        for (uint d = tid; d < 1024u; d += wg)
        {
            hist_n[d] = 0u;
            hist_lo[d] = 0u;
            hist_hi[d] = 0u;
        }
        threadgroup_barrier(mem_flags::mem_threadgroup);
        if (shift == 20)
        {
            _497 = 0u;
        }
        else
        {
            _497 = 4294967295u << uint(shift + 10);
        }
        uint high = _497;
        for (uint t = tid; t < p.vocab; t += wg)
        {
            uint param = t;
            uint key = key_of(param, allowed, tokens, z, mx, inv_t);
            uint param_1 = key;
            uint param_2 = t;
            bool _531 = !kept(param_1, param_2, th, cut, floor_key);
            bool _540;
            if (!_531)
            {
                _540 = (key & high) != prefix;
            }
            else
            {
                _540 = _531;
            }
            if (_540)
            {
                continue;
            }
            uint d_1 = (key >> uint(shift)) & 1023u;
            if (!by_mass)
            {
                uint _557 = atomic_fetch_add_explicit((threadgroup atomic_uint*)&hist_n[d_1], 1u, memory_order_relaxed);
                continue;
            }
            uint param_3 = key;
            ulong m = mass_of(param_3);
            uint lo = uint(m);
            uint _570 = atomic_fetch_add_explicit((threadgroup atomic_uint*)&hist_lo[d_1], lo, memory_order_relaxed);
            uint old = _570;
            uint hi = uint(m >> ulong(32)) + uint((old + lo) < old);
            if (hi != 0u)
            {
                uint _590 = atomic_fetch_add_explicit((threadgroup atomic_uint*)&hist_hi[d_1], hi, memory_order_relaxed);
            }
        }
        threadgroup_barrier(mem_flags::mem_threadgroup);
        ulong own = 0ul;
        for (uint i = 0u; i < 4u; i++)
        {
            uint d_2 = (1023u - (4u * tid)) - i;
            if (by_mass)
            {
                _615 = (ulong(hist_hi[d_2]) << ulong(32)) | ulong(hist_lo[d_2]);
            }
            else
            {
                _615 = ulong(hist_n[d_2]);
            }
            u[i] = _615;
            own += u[i];
        }
        red64[tid] = own;
        if (tid == 0u)
        {
            sel_digit[0] = 0u;
            sel_acc[0] = acc;
        }
        threadgroup_barrier(mem_flags::mem_threadgroup);
        for (uint off = 1u; off < 256u; off = off << uint(1))
        {
            if (tid >= off)
            {
                _670 = red64[tid - off];
            }
            else
            {
                _670 = 0ul;
            }
            ulong add = _670;
            threadgroup_barrier(mem_flags::mem_threadgroup);
            red64[tid] += add;
            threadgroup_barrier(mem_flags::mem_threadgroup);
        }
        ulong before = (acc + red64[tid]) - own;
        bool _698 = before < need;
        bool _706;
        if (_698)
        {
            _706 = need <= (before + own);
        }
        else
        {
            _706 = _698;
        }
        if (_706)
        {
            for (uint i_1 = 0u; i_1 < 4u; i_1++)
            {
                if ((before + u[i_1]) >= need)
                {
                    sel_digit[0] = (1023u - (4u * tid)) - i_1;
                    sel_acc[0] = before;
                    break;
                }
                before += u[i_1];
            }
        }
        threadgroup_barrier(mem_flags::mem_threadgroup);
        prefix |= (sel_digit[0] << uint(shift));
        acc = sel_acc[0];
        threadgroup_barrier(mem_flags::mem_threadgroup);
    }
    above = acc;
    return prefix;
}

static inline __attribute__((always_inline))
uint stretch_begin(thread uint3& gl_LocalInvocationID, constant P& p)
{
    return min((gl_LocalInvocationID.x * (((p.vocab + gl_WorkGroupSize.x) - 1u) / gl_WorkGroupSize.x)), p.vocab);
}

static inline __attribute__((always_inline))
uint stretch_end(thread uint3& gl_LocalInvocationID, constant P& p)
{
    return min((stretch_begin(gl_LocalInvocationID, p) + (((p.vocab + gl_WorkGroupSize.x) - 1u) / gl_WorkGroupSize.x)), p.vocab);
}

static inline __attribute__((always_inline))
void keep_prefix(thread const uint& theta, thread const uint& m, thread uint& th, thread uint& cut, thread uint& floor_key, thread ulong& allowed, thread ulong& tokens, device Floats* thread & z, thread float& mx, thread float& inv_t, thread uint3& gl_LocalInvocationID, threadgroup ulong (&red64)[256], constant P& p, threadgroup uint (&found)[1])
{
    uint tid = gl_LocalInvocationID.x;
    uint b = stretch_begin(gl_LocalInvocationID, p);
    uint e = stretch_end(gl_LocalInvocationID, p);
    uint c = 0u;
    for (uint t = b; t < e; t++)
    {
        uint param = t;
        bool _808 = key_of(param, allowed, tokens, z, mx, inv_t) == theta;
        bool _816;
        if (_808)
        {
            uint param_1 = theta;
            uint param_2 = t;
            _816 = kept(param_1, param_2, th, cut, floor_key);
        }
        else
        {
            _816 = _808;
        }
        if (_816)
        {
            c++;
        }
    }
    red64[tid] = ulong(c);
    if (tid == 0u)
    {
        found[0] = 4294967295u;
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    uint before = 0u;
    for (uint i = 0u; i < tid; i++)
    {
        before += uint(red64[i]);
    }
    bool _853 = before < m;
    bool _861;
    if (_853)
    {
        _861 = m <= (before + c);
    }
    else
    {
        _861 = _853;
    }
    if (_861)
    {
        for (uint t_1 = b; t_1 < e; t_1++)
        {
            uint param_3 = t_1;
            bool _878 = key_of(param_3, allowed, tokens, z, mx, inv_t) == theta;
            bool _886;
            if (_878)
            {
                uint param_4 = theta;
                uint param_5 = t_1;
                _886 = kept(param_4, param_5, th, cut, floor_key);
            }
            else
            {
                _886 = _878;
            }
            bool _893;
            if (_886)
            {
                uint _889 = before;
                uint _890 = _889 + uint(1);
                before = _890;
                _893 = _890 == m;
            }
            else
            {
                _893 = _886;
            }
            if (_893)
            {
                found[0] = t_1;
                break;
            }
        }
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    th = theta;
    cut = found[0];
    threadgroup_barrier(mem_flags::mem_threadgroup);
}

kernel void splash_sample(constant P& p [[buffer(0)]], uint gl_SubgroupID [[simdgroup_index_in_threadgroup]], uint gl_NumSubgroups [[simdgroups_per_threadgroup]], uint3 gl_WorkGroupID [[threadgroup_position_in_grid]], uint3 gl_NumWorkGroups [[threadgroups_per_grid]], uint3 gl_LocalInvocationID [[thread_position_in_threadgroup]])
{
    threadgroup float wg_red[256];
    threadgroup uint wg_red_u[256];
    threadgroup ulong red64[256];
    threadgroup uint hist_n[1024];
    threadgroup uint hist_lo[1024];
    threadgroup uint hist_hi[1024];
    threadgroup uint sel_digit[1];
    threadgroup ulong sel_acc[1];
    threadgroup uint found[1];
    threadgroup uint drawn[1];
    uint th = 0u;
    uint cut = 4294967295u;
    uint floor_key = 0u;
    uint j = flat_group(gl_WorkGroupID, gl_NumWorkGroups);
    uint tid = gl_LocalInvocationID.x;
    uint wg = gl_WorkGroupSize.x;
    ulong allowed;
    ulong tokens;
    device Floats* z;
    float mx;
    float inv_t;
    if (j >= p.n)
    {
        return;
    }
    z = reinterpret_cast<device Floats*>((reinterpret_cast<device Addrs*>(p.rows))->v[j]);
    allowed = (reinterpret_cast<device Addrs*>(p.masks))->v[2u * j];
    tokens = (reinterpret_cast<device Addrs*>(p.masks))->v[(2u * j) + 1u];
    device Uints* prm = reinterpret_cast<device Uints*>(p.params + (32ul * ulong(j)));
    inv_t = as_type<float>(prm->v[0]);
    uint top_k = prm->v[1];
    uint fraction = prm->v[2];
    uint top_p_on = prm->v[3];
    uint min_p = prm->v[4];
    ulong u53 = (ulong(prm->v[6]) << ulong(32)) | ulong(prm->v[5]);
    uint probe = prm->v[7];
    float best = as_type<float>(0xff800000u /* -inf */);
    uint arg = 4294967295u;
    for (uint t = tid; t < p.vocab; t += wg)
    {
        uint param = t;
        bool _1011 = may(param, allowed, tokens);
        bool _1026;
        if (_1011)
        {
            bool _1015 = arg == 4294967295u;
            bool _1025;
            if (!_1015)
            {
                _1025 = z->v[t] > best;
            }
            else
            {
                _1025 = _1015;
            }
            _1026 = _1025;
        }
        else
        {
            _1026 = _1011;
        }
        if (_1026)
        {
            best = z->v[t];
            arg = t;
        }
    }
    float param_1 = best;
    float _1039 = workgroup_max(param_1, wg_red, gl_SubgroupID, gl_NumSubgroups);
    mx = _1039;
    uint param_2 = (best == mx) ? arg : 4294967295u;
    uint _1047 = workgroup_min_uint(param_2, gl_SubgroupID, gl_NumSubgroups, wg_red_u);
    uint token = _1047;
    float s = 0.0;
    for (uint t_1 = tid; t_1 < p.vocab; t_1 += wg)
    {
        uint param_3 = t_1;
        if (may(param_3, allowed, tokens))
        {
            s += exp(z->v[t_1] - mx);
        }
    }
    float param_4 = s;
    float _1080 = workgroup_sum(param_4, wg_red, gl_SubgroupID, gl_NumSubgroups);
    float lse = log(_1080);
    ulong probe_mass = ulong(probe == token);
    ulong kept_mass = 1ul;
    if ((inv_t > 0.0) && (token != 4294967295u))
    {
        ulong above;
        if (top_k > 0u)
        {
            uint c = 0u;
            for (uint t_2 = tid; t_2 < p.vocab; t_2 += wg)
            {
                uint param_5 = t_2;
                if (key_of(param_5, allowed, tokens, z, mx, inv_t) != 0u)
                {
                    c++;
                }
            }
            ulong param_6 = ulong(c);
            ulong _1128 = workgroup_sum64(param_6, gl_LocalInvocationID, red64);
            if (ulong(top_k) < _1128)
            {
                bool param_7 = false;
                ulong param_8 = ulong(top_k);
                ulong param_9;
                uint _1140 = radix_select(param_7, param_8, param_9, th, cut, floor_key, allowed, tokens, z, mx, inv_t, gl_LocalInvocationID, red64, hist_n, hist_lo, hist_hi, p, sel_digit, sel_acc);
                above = param_9;
                uint theta = _1140;
                uint param_10 = theta;
                uint param_11 = top_k - uint(above);
                keep_prefix(param_10, param_11, th, cut, floor_key, allowed, tokens, z, mx, inv_t, gl_LocalInvocationID, red64, p, found);
            }
        }
        if (top_p_on != 0u)
        {
            ulong total = 0ul;
            for (uint t_3 = tid; t_3 < p.vocab; t_3 += wg)
            {
                uint param_12 = t_3;
                uint key = key_of(param_12, allowed, tokens, z, mx, inv_t);
                uint param_13 = key;
                uint param_14 = t_3;
                if (kept(param_13, param_14, th, cut, floor_key))
                {
                    uint param_15 = key;
                    total += mass_of(param_15);
                }
            }
            ulong param_16 = total;
            ulong _1187 = workgroup_sum64(param_16, gl_LocalInvocationID, red64);
            total = _1187;
            ulong need = ((total >> ulong(32)) * ulong(fraction)) + ((((total & 4294967295ul) * ulong(fraction)) + 4294967295ul) >> ulong(32));
            need = max(need, 1ul);
            bool param_17 = true;
            ulong param_18 = need;
            ulong param_19;
            uint _1211 = radix_select(param_17, param_18, param_19, th, cut, floor_key, allowed, tokens, z, mx, inv_t, gl_LocalInvocationID, red64, hist_n, hist_lo, hist_hi, p, sel_digit, sel_acc);
            above = param_19;
            uint theta_1 = _1211;
            uint param_20 = theta_1;
            ulong m = mass_of(param_20);
            uint param_21 = theta_1;
            uint param_22 = uint((((need - above) + m) - 1ul) / m);
            keep_prefix(param_21, param_22, th, cut, floor_key, allowed, tokens, z, mx, inv_t, gl_LocalInvocationID, red64, p, found);
        }
        floor_key = min_p;
        uint b = stretch_begin(gl_LocalInvocationID, p);
        uint e = stretch_end(gl_LocalInvocationID, p);
        ulong own = 0ul;
        for (uint t_4 = b; t_4 < e; t_4++)
        {
            uint param_23 = t_4;
            uint key_1 = key_of(param_23, allowed, tokens, z, mx, inv_t);
            uint param_24 = key_1;
            uint param_25 = t_4;
            if (kept(param_24, param_25, th, cut, floor_key))
            {
                uint param_26 = key_1;
                own += mass_of(param_26);
            }
        }
        red64[tid] = own;
        if (tid == 0u)
        {
            drawn[0] = 4294967295u;
        }
        threadgroup_barrier(mem_flags::mem_threadgroup);
        ulong base = 0ul;
        ulong total_1 = 0ul;
        for (uint i = 0u; i < wg; i++)
        {
            if (i < tid)
            {
                base += red64[i];
            }
            total_1 += red64[i];
        }
        ulong lo32 = 4294967295ul;
        ulong al = u53 & lo32;
        ulong ah = u53 >> ulong(32);
        ulong bl = total_1 & lo32;
        ulong bh = total_1 >> ulong(32);
        ulong p0 = al * bl;
        ulong p1 = al * bh;
        ulong p2 = ah * bl;
        ulong p3 = ah * bh;
        ulong mid = ((p0 >> ulong(32)) + (p1 & lo32)) + (p2 & lo32);
        ulong hi = ((p3 + (p1 >> ulong(32))) + (p2 >> ulong(32))) + (mid >> ulong(32));
        ulong lo = (mid << ulong(32)) | (p0 & lo32);
        ulong point = (hi << ulong(11)) | (lo >> ulong(53));
        ulong cum = base;
        bool _1373 = base <= point;
        bool _1381;
        if (_1373)
        {
            _1381 = point < (base + own);
        }
        else
        {
            _1381 = _1373;
        }
        if (_1381)
        {
            for (uint t_5 = b; t_5 < e; t_5++)
            {
                uint param_27 = t_5;
                uint key_2 = key_of(param_27, allowed, tokens, z, mx, inv_t);
                uint param_28 = key_2;
                uint param_29 = t_5;
                if (kept(param_28, param_29, th, cut, floor_key))
                {
                    uint param_30 = key_2;
                    cum += mass_of(param_30);
                    if (point < cum)
                    {
                        drawn[0] = t_5;
                        break;
                    }
                }
            }
        }
        threadgroup_barrier(mem_flags::mem_threadgroup);
        token = drawn[0];
        uint _1427;
        if (probe < p.vocab)
        {
            uint param_31 = probe;
            _1427 = key_of(param_31, allowed, tokens, z, mx, inv_t);
        }
        else
        {
            _1427 = 0u;
        }
        uint key_3 = _1427;
        uint param_32 = key_3;
        uint param_33 = probe;
        ulong _1440;
        if (kept(param_32, param_33, th, cut, floor_key))
        {
            uint param_34 = key_3;
            _1440 = mass_of(param_34);
        }
        else
        {
            _1440 = 0ul;
        }
        probe_mass = _1440;
        kept_mass = total_1;
    }
    if (tid == 0u)
    {
        device Uints* o = reinterpret_cast<device Uints*>(p.out_ + (32ul * ulong(j)));
        o->v[0] = token;
        float _1467;
        if (token != 4294967295u)
        {
            _1467 = (z->v[token] - mx) - lse;
        }
        else
        {
            _1467 = 0.0;
        }
        o->v[1] = as_type<uint>(_1467);
        bool _1486 = probe < p.vocab;
        bool _1492;
        if (_1486)
        {
            uint param_35 = probe;
            _1492 = may(param_35, allowed, tokens);
        }
        else
        {
            _1492 = _1486;
        }
        float _1493;
        if (_1492)
        {
            _1493 = (z->v[probe] - mx) - lse;
        }
        else
        {
            _1493 = as_type<float>(0xff800000u /* -inf */);
        }
        o->v[2] = as_type<uint>(_1493);
        o->v[3] = uint(probe_mass);
        o->v[4] = uint(probe_mass >> ulong(32));
        o->v[5] = uint(kept_mass);
        o->v[6] = uint(kept_mass >> ulong(32));
        o->v[7] = 0u;
    }
}

