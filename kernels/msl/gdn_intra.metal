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

struct P
{
    ulong o;
    ulong qkv;
    ulong a;
    ulong b;
    ulong S;
    ulong A;
    ulong dt_bias;
    uint n;
    uint k_heads;
    uint v_heads;
    ulong work;
};

constant uint DK_tmp [[function_constant(1)]];
constant uint DK = is_function_constant_defined(DK_tmp) ? DK_tmp : 128u;
constant uint DV_tmp [[function_constant(2)]];
constant uint DV = is_function_constant_defined(DV_tmp) ? DV_tmp : 128u;

struct Floats
{
    float v[1];
};

constant uint OFF_U = (192u * DK);
constant uint _123 = (64u * DV);
constant uint OFF_AQK = (OFF_U + _123);
constant uint OFF_EL = (OFF_AQK + 4096u);
constant uint BLOCK = (OFF_EL + 4u);
constant ulong _129 = ulong(BLOCK);
constant uint _708 = (DK + DV);
constant uint _834 = (64u * DK);
constant uint OFF_QG = (64u * DK);
constant uint OFF_KD = (128u * DK);
constant uint _925_tmp [[function_constant(0)]];
constant uint _925 = is_function_constant_defined(_925_tmp) ? _925_tmp : 1u;
constant uint3 gl_WorkGroupSize [[maybe_unused]] = uint3(_925, 1u, 1u);

static inline __attribute__((always_inline))
float sigmoid(thread const float& x)
{
    return 1.0 / (1.0 + exp(-x));
}

kernel void splash_gdn_intra(constant P& p [[buffer(0)]], uint3 gl_LocalInvocationID [[thread_position_in_threadgroup]], uint3 gl_WorkGroupID [[threadgroup_position_in_grid]])
{
    threadgroup float ssq[4][64];
    threadgroup float ssk[4][64];
    threadgroup float rq[64];
    threadgroup float rk[64];
    threadgroup float beta[64];
    threadgroup float gam[64];
    threadgroup float smem[4224];
    threadgroup float wg_red[256];
    threadgroup uint wg_red_u[256];
    uint tid = gl_LocalInvocationID.x;
    uint h = gl_WorkGroupID.x;
    uint t0 = gl_WorkGroupID.y * 64u;
    uint c = min(64u, (p.n - t0));
    uint kh = h / (p.v_heads / p.k_heads);
    uint key_dim = p.k_heads * DK;
    uint width = (2u * key_dim) + (p.v_heads * DV);
    uint qoff = kh * DK;
    uint koff = key_dim + (kh * DK);
    uint voff = (2u * key_dim) + (h * DV);
    device Floats* x = reinterpret_cast<device Floats*>(p.qkv + ((ulong(t0) * ulong(width)) * 4ul));
    device Floats* blk = reinterpret_cast<device Floats*>(p.work + ((ulong((gl_WorkGroupID.y * p.v_heads) + h) * _129) * 4ul));
    uint i = tid / 4u;
    uint part = tid % 4u;
    float sq = 0.0;
    float sk = 0.0;
    if (i < c)
    {
        for (uint e = part; e < DK; e += 4u)
        {
            float q = x->v[((i * width) + qoff) + e];
            float k = x->v[((i * width) + koff) + e];
            sq += (q * q);
            sk += (k * k);
        }
    }
    ssq[part][i] = sq;
    ssk[part][i] = sk;
    threadgroup_barrier(mem_flags::mem_threadgroup);
    if (tid < 64u)
    {
        uint i_1 = tid;
        float g = 0.0;
        float bt = 0.0;
        if (i_1 < c)
        {
            float param = (reinterpret_cast<device Floats*>(p.b))->v[((t0 + i_1) * p.v_heads) + h];
            bt = sigmoid(param);
            float xa = (reinterpret_cast<device Floats*>(p.a))->v[((t0 + i_1) * p.v_heads) + h] + (reinterpret_cast<device Floats*>(p.dt_bias))->v[h];
            float _271;
            if (xa > 20.0)
            {
                _271 = xa;
            }
            else
            {
                _271 = log(1.0 + exp(xa));
            }
            g = (reinterpret_cast<device Floats*>(p.A))->v[h] * _271;
        }
        rq[i_1] = rsqrt((((ssq[0][i_1] + ssq[1][i_1]) + ssq[2][i_1]) + ssq[3][i_1]) + 9.9999999747524270787835121154785e-07) * rsqrt(float(DK));
        rk[i_1] = rsqrt((((ssk[0][i_1] + ssk[1][i_1]) + ssk[2][i_1]) + ssk[3][i_1]) + 9.9999999747524270787835121154785e-07);
        beta[i_1] = bt;
        gam[i_1] = g;
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    if (tid == 0u)
    {
        float acc = 0.0;
        for (uint i_2 = 0u; i_2 < 64u; i_2++)
        {
            acc += gam[i_2];
            gam[i_2] = acc;
        }
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    uint ti = tid / 16u;
    uint tj = tid % 16u;
    spvUnsafeArray<spvUnsafeArray<float, 4>, 4> kk;
    spvUnsafeArray<spvUnsafeArray<float, 4>, 4> qk;
    for (uint m = 0u; m < 4u; m++)
    {
        for (uint m2 = 0u; m2 < 4u; m2++)
        {
            kk[m][m2] = 0.0;
            qk[m][m2] = 0.0;
        }
    }
    float _443;
    float _471;
    spvUnsafeArray<float, 4> qi;
    spvUnsafeArray<float, 4> ki;
    spvUnsafeArray<float, 4> kj;
    for (uint e0 = 0u; e0 < DK; e0 += 32u)
    {
        for (uint idx = tid; idx < 2048u; idx += 256u)
        {
            uint i_3 = idx / 32u;
            uint e_1 = idx % 32u;
            bool _425 = i_3 < c;
            bool _432;
            if (_425)
            {
                _432 = (e0 + e_1) < DK;
            }
            else
            {
                _432 = _425;
            }
            bool ok = _432;
            if (ok)
            {
                _443 = x->v[(((i_3 * width) + qoff) + e0) + e_1] * rq[i_3];
            }
            else
            {
                _443 = 0.0;
            }
            smem[(i_3 * 33u) + e_1] = _443;
            if (ok)
            {
                _471 = x->v[(((i_3 * width) + koff) + e0) + e_1] * rk[i_3];
            }
            else
            {
                _471 = 0.0;
            }
            smem[((64u + i_3) * 33u) + e_1] = _471;
        }
        threadgroup_barrier(mem_flags::mem_threadgroup);
        for (uint e_2 = 0u; e_2 < 32u; e_2++)
        {
            for (uint m_1 = 0u; m_1 < 4u; m_1++)
            {
                qi[m_1] = smem[((ti + (16u * m_1)) * 33u) + e_2];
                ki[m_1] = smem[(((64u + ti) + (16u * m_1)) * 33u) + e_2];
                kj[m_1] = smem[(((64u + tj) + (16u * m_1)) * 33u) + e_2];
            }
            for (uint m_2 = 0u; m_2 < 4u; m_2++)
            {
                for (uint m2_1 = 0u; m2_1 <= m_2; m2_1++)
                {
                    kk[m_2][m2_1] += (ki[m_2] * kj[m2_1]);
                    qk[m_2][m2_1] += (qi[m_2] * kj[m2_1]);
                }
            }
        }
        threadgroup_barrier(mem_flags::mem_threadgroup);
    }
    float _634;
    float _659;
    float _684;
    for (uint m_3 = 0u; m_3 < 4u; m_3++)
    {
        for (uint m2_2 = 0u; m2_2 < 4u; m2_2++)
        {
            uint i_4 = ti + (16u * m_3);
            uint j = tj + (16u * m2_2);
            if (j <= i_4)
            {
                _634 = exp(gam[i_4] - gam[j]);
            }
            else
            {
                _634 = 0.0;
            }
            float d = _634;
            if ((j < i_4) && (i_4 < c))
            {
                _659 = (beta[i_4] * kk[m_3][m2_2]) * d;
            }
            else
            {
                _659 = 0.0;
            }
            smem[(i_4 * 65u) + j] = _659;
            if (i_4 < c)
            {
                _684 = qk[m_3][m2_2] * d;
            }
            else
            {
                _684 = 0.0;
            }
            blk->v[(OFF_AQK + (i_4 * 64u)) + j] = _684;
        }
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    uint _715;
    uint _729;
    float _768;
    spvUnsafeArray<float, 64> s;
    for (uint col = tid; col < _708; col += 256u)
    {
        bool isw = col < DK;
        if (isw)
        {
            _715 = koff + col;
        }
        else
        {
            _715 = (voff + col) - DK;
        }
        uint src = _715;
        if (isw)
        {
            _729 = col;
        }
        else
        {
            _729 = (OFF_U + col) - DK;
        }
        uint dst = _729;
        uint stride = isw ? DK : DV;
        for (uint i_5 = 0u; i_5 < 64u; i_5++)
        {
            float r = 0.0;
            if (i_5 < c)
            {
                if (isw)
                {
                    _768 = rk[i_5] * exp(gam[i_5]);
                }
                else
                {
                    _768 = 1.0;
                }
                r = (x->v[(i_5 * width) + src] * beta[i_5]) * _768;
            }
            for (uint j_1 = 0u; j_1 < i_5; j_1++)
            {
                r -= (smem[(i_5 * 65u) + j_1] * s[j_1]);
            }
            s[i_5] = r;
            blk->v[dst + (i_5 * stride)] = r;
        }
    }
    float last = gam[63];
    float _851;
    float _882;
    for (uint idx_1 = tid; idx_1 < _834; idx_1 += 256u)
    {
        uint i_6 = idx_1 / DK;
        uint e_3 = idx_1 % DK;
        bool ok_1 = i_6 < c;
        if (ok_1)
        {
            _851 = (x->v[((i_6 * width) + qoff) + e_3] * rq[i_6]) * exp(gam[i_6]);
        }
        else
        {
            _851 = 0.0;
        }
        blk->v[OFF_QG + idx_1] = _851;
        if (ok_1)
        {
            _882 = (x->v[((i_6 * width) + koff) + e_3] * rk[i_6]) * exp(last - gam[i_6]);
        }
        else
        {
            _882 = 0.0;
        }
        blk->v[OFF_KD + idx_1] = _882;
    }
    if (tid == 0u)
    {
        blk->v[OFF_EL] = exp(last);
    }
}

