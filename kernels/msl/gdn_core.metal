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

struct Floats;

constant uint _91_tmp [[function_constant(0)]];
constant uint _91 = is_function_constant_defined(_91_tmp) ? _91_tmp : 1u;
constant uint3 gl_WorkGroupSize [[maybe_unused]] = uint3(_91, 1u, 1u);
constant uint DV_tmp [[function_constant(2)]];
constant uint DV = is_function_constant_defined(DV_tmp) ? DV_tmp : 128u;
constant uint DK_tmp [[function_constant(1)]];
constant uint DK = is_function_constant_defined(DK_tmp) ? DK_tmp : 128u;
constant uint _111 = (DK + 4u);
constant uint _112 = (_111 - 1u);
constant uint _113 = (_112 / 4u);

struct P
{
    ulong o;
    ulong qkv;
    ulong a;
    ulong b;
    ulong S;
    ulong A;
    ulong dt_bias;
    ulong z;
    ulong conv_w;
    ulong tail;
    ulong norm_w;
    uint n;
    uint k_heads;
    uint v_heads;
    uint kernel0;
    float eps;
};

struct Floats
{
    float v[1];
};

constant uint _234 = (2u * DK);
constant uint _235 = (_234 + DV);
constant uint _249 = (2u * DK);
constant uint _269 = (2u * DK);
constant uint _423 = (2u * DK);
constant uint _435 = (2u * DK);
constant uint NORM_WG_tmp [[function_constant(3)]];
constant uint NORM_WG = is_function_constant_defined(NORM_WG_tmp) ? NORM_WG_tmp : 64u;
constant uint _854 = (2u * DK);

static inline __attribute__((always_inline))
float silu(thread const float& x)
{
    return x / (1.0 + exp(-x));
}

static inline __attribute__((always_inline))
float workgroup_sum(thread float& v, threadgroup float (&wg_red)[256], thread uint& gl_SubgroupID, thread uint& gl_NumSubgroups)
{
    v = simd_sum(v);
    bool _23 = simd_is_first();
    if (_23)
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
float sigmoid(thread const float& x)
{
    return 1.0 / (1.0 + exp(-x));
}

kernel void splash_gdn_core(constant P& p [[buffer(0)]], uint gl_SubgroupID [[simdgroup_index_in_threadgroup]], uint gl_NumSubgroups [[simdgroups_per_threadgroup]], uint3 gl_LocalInvocationID [[thread_position_in_threadgroup]], uint3 gl_WorkGroupID [[threadgroup_position_in_grid]])
{
    threadgroup float wg_red[256];
    threadgroup float qs[512];
    threadgroup float ks[512];
    threadgroup float vs[256];
    threadgroup float red[4][256];
    threadgroup float os[256];
    threadgroup uint wg_red_u[256];
    uint tid = gl_LocalInvocationID.x;
    uint h = gl_WorkGroupID.x;
    uint wg = gl_WorkGroupSize.x;
    uint col = tid % DV;
    uint part = tid / DV;
    uint j = (gl_WorkGroupID.y * DV) + col;
    uint rows = _113;
    uint i0 = part * rows;
    uint ratio = p.v_heads / p.k_heads;
    uint kh = h / ratio;
    uint key_dim = p.k_heads * DK;
    uint width = (2u * key_dim) + (p.v_heads * DV);
    bool live = j < DV;
    device Floats* S = reinterpret_cast<device Floats*>(p.S + (ulong((h * DK) * DV) * 4ul));
    spvUnsafeArray<float, 128> s;
    float _194;
    for (uint r = 0u; r < 128u; r++)
    {
        if (r >= rows)
        {
            break;
        }
        bool _193;
        if (live)
        {
            _193 = (i0 + r) < DK;
        }
        else
        {
            _193 = live;
        }
        if (_193)
        {
            _194 = S->v[((i0 + r) * DV) + j];
        }
        else
        {
            _194 = 0.0;
        }
        s[r] = _194;
    }
    float A = (reinterpret_cast<device Floats*>(p.A))->v[h];
    float dt = (reinterpret_cast<device Floats*>(p.dt_bias))->v[h];
    uint sum_wg = min(wg, 128u);
    bool conv = tid < _235;
    uint _240;
    if (tid < DK)
    {
        _240 = (kh * DK) + tid;
    }
    else
    {
        uint _251;
        if (tid < _249)
        {
            _251 = ((key_dim + (kh * DK)) + tid) - DK;
        }
        else
        {
            _251 = (((2u * key_dim) + (h * DV)) + tid) - _269;
        }
        _240 = _251;
    }
    uint ch = _240;
    uint K = p.kernel0;
    spvUnsafeArray<float, 16> wk;
    spvUnsafeArray<float, 16> win;
    if (conv)
    {
        for (uint i = 0u; i < K; i++)
        {
            wk[i] = (reinterpret_cast<device Floats*>(p.conv_w))->v[(ch * K) + i];
        }
        for (uint i_1 = 0u; (i_1 + 1u) < K; i_1++)
        {
            win[i_1] = (reinterpret_cast<device Floats*>(p.tail))->v[(i_1 * width) + ch];
        }
    }
    float _524;
    for (uint t = 0u; t < p.n; t++)
    {
        device Floats* row = reinterpret_cast<device Floats*>(p.qkv + (ulong(t * width) * 4ul));
        float sq = 0.0;
        float sk = 0.0;
        if (conv)
        {
            win[K - 1u] = row->v[ch];
            float acc = 0.0;
            for (uint i_2 = 0u; i_2 < K; i_2++)
            {
                acc += (wk[i_2] * win[i_2]);
            }
            float param = acc;
            float y = silu(param);
            for (uint i_3 = 0u; (i_3 + 1u) < K; i_3++)
            {
                win[i_3] = win[i_3 + 1u];
            }
            if (tid < DK)
            {
                qs[tid] = y;
            }
            else
            {
                if (tid < _423)
                {
                    ks[tid - DK] = y;
                }
                else
                {
                    vs[tid - _435] = y;
                }
            }
        }
        threadgroup_barrier(mem_flags::mem_threadgroup);
        for (uint i_4 = tid; (tid < sum_wg) && (i_4 < DK); i_4 += sum_wg)
        {
            float q = qs[i_4];
            float k = ks[i_4];
            sq += (q * q);
            sk += (k * k);
        }
        float param_1 = sq;
        float _476 = workgroup_sum(param_1, wg_red, gl_SubgroupID, gl_NumSubgroups);
        float rq = rsqrt(_476 + 9.9999999747524270787835121154785e-07) * rsqrt(float(DK));
        float param_2 = sk;
        float _486 = workgroup_sum(param_2, wg_red, gl_SubgroupID, gl_NumSubgroups);
        float rk = rsqrt(_486 + 9.9999999747524270787835121154785e-07);
        float param_3 = (reinterpret_cast<device Floats*>(p.b))->v[(t * p.v_heads) + h];
        float beta = sigmoid(param_3);
        float x = (reinterpret_cast<device Floats*>(p.a))->v[(t * p.v_heads) + h] + dt;
        if (x > 20.0)
        {
            _524 = x;
        }
        else
        {
            _524 = log(1.0 + exp(x));
        }
        float decay = exp(A * _524);
        float v = vs[col];
        float mem = 0.0;
        for (uint r_1 = 0u; r_1 < 128u; r_1++)
        {
            if (r_1 >= rows)
            {
                break;
            }
            s[r_1] *= decay;
            if ((i0 + r_1) < DK)
            {
                mem += (s[r_1] * ks[i0 + r_1]);
            }
        }
        red[part][col] = mem * rk;
        threadgroup_barrier(mem_flags::mem_threadgroup);
        mem = 0.0;
        for (uint q_1 = 0u; q_1 < 4u; q_1++)
        {
            mem += red[q_1][col];
        }
        float delta = (v - mem) * beta;
        threadgroup_barrier(mem_flags::mem_threadgroup);
        float o = 0.0;
        for (uint r_2 = 0u; r_2 < 128u; r_2++)
        {
            if (r_2 >= rows)
            {
                break;
            }
            if ((i0 + r_2) < DK)
            {
                s[r_2] += ((ks[i0 + r_2] * rk) * delta);
                o += (s[r_2] * qs[i0 + r_2]);
            }
        }
        red[part][col] = o * rq;
        threadgroup_barrier(mem_flags::mem_threadgroup);
        if (part == 0u)
        {
            float sum = 0.0;
            for (uint q_2 = 0u; q_2 < 4u; q_2++)
            {
                sum += red[q_2][col];
            }
            os[col] = sum;
        }
        threadgroup_barrier(mem_flags::mem_threadgroup);
        device Floats* orow = reinterpret_cast<device Floats*>(p.o + (ulong(((t * p.v_heads) + h) * DV) * 4ul));
        if (p.z != 0ul)
        {
            uint _714 = min(NORM_WG, wg);
            float ss = 0.0;
            for (uint nw = _714, i_5 = tid; (tid < nw) && (i_5 < DV); i_5 += nw)
            {
                ss += (os[i_5] * os[i_5]);
            }
            float param_4 = ss;
            float _744 = workgroup_sum(param_4, wg_red, gl_SubgroupID, gl_NumSubgroups);
            float r_3 = rsqrt((_744 / float(DV)) + p.eps);
            if (tid < DV)
            {
                device Floats* z = reinterpret_cast<device Floats*>(p.z + (ulong(((t * p.v_heads) + h) * DV) * 4ul));
                float param_5 = z->v[tid];
                float y_1 = ((reinterpret_cast<device Floats*>(p.norm_w))->v[tid] * (os[tid] * r_3)) * silu(param_5);
                orow->v[tid] = y_1;
            }
        }
        else
        {
            if (tid < DV)
            {
                orow->v[tid] = os[tid];
            }
        }
    }
    for (uint r_4 = 0u; r_4 < 128u; r_4++)
    {
        if (r_4 >= rows)
        {
            break;
        }
        bool _830;
        if (live)
        {
            _830 = (i0 + r_4) < DK;
        }
        else
        {
            _830 = live;
        }
        if (_830)
        {
            S->v[((i0 + r_4) * DV) + j] = s[r_4];
        }
    }
    device Floats* tail = reinterpret_cast<device Floats*>(p.tail);
    bool _859;
    if (conv)
    {
        _859 = (tid >= _854) || (ratio == 1u);
    }
    else
    {
        _859 = conv;
    }
    if (_859)
    {
        for (uint i_6 = 0u; (i_6 + 1u) < K; i_6++)
        {
            tail->v[(i_6 * width) + ch] = win[i_6];
        }
    }
}

