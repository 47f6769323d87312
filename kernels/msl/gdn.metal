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

constant uint _80_tmp [[function_constant(0)]];
constant uint _80 = is_function_constant_defined(_80_tmp) ? _80_tmp : 1u;
constant uint3 gl_WorkGroupSize [[maybe_unused]] = uint3(_80, 1u, 1u);
constant uint DK_tmp [[function_constant(1)]];
constant uint DK = is_function_constant_defined(DK_tmp) ? DK_tmp : 128u;
constant uint _100 = (DK + 4u);
constant uint _101 = (_100 - 1u);
constant uint _102 = (_101 / 4u);

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
};

constant uint DV_tmp [[function_constant(2)]];
constant uint DV = is_function_constant_defined(DV_tmp) ? DV_tmp : 128u;

struct Floats
{
    float v[1];
};

static inline __attribute__((always_inline))
float workgroup_sum(thread float& v, threadgroup float (&wg_red)[256], thread uint& gl_SubgroupID, thread uint& gl_NumSubgroups)
{
    v = simd_sum(v);
    bool _20 = simd_is_first();
    if (_20)
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

kernel void splash_gdn(constant P& p [[buffer(0)]], uint gl_SubgroupID [[simdgroup_index_in_threadgroup]], uint gl_NumSubgroups [[simdgroups_per_threadgroup]], uint3 gl_LocalInvocationID [[thread_position_in_threadgroup]], uint3 gl_WorkGroupID [[threadgroup_position_in_grid]])
{
    threadgroup float wg_red[256];
    threadgroup float qs[512];
    threadgroup float ks[512];
    threadgroup float red[4][32];
    threadgroup uint wg_red_u[256];
    uint tid = gl_LocalInvocationID.x;
    uint h = gl_WorkGroupID.x;
    uint wg = gl_WorkGroupSize.x;
    uint col = tid % 32u;
    uint part = tid / 32u;
    uint j = (gl_WorkGroupID.y * 32u) + col;
    uint rows = _102;
    uint i0 = part * rows;
    uint ratio = p.v_heads / p.k_heads;
    uint kh = h / ratio;
    uint key_dim = p.k_heads * DK;
    uint width = (2u * key_dim) + (p.v_heads * DV);
    bool live = j < DV;
    device Floats* S = reinterpret_cast<device Floats*>(p.S + (ulong((h * DK) * DV) * 4ul));
    spvUnsafeArray<float, 128> s;
    float _184;
    for (uint r = 0u; r < 128u; r++)
    {
        if (r >= rows)
        {
            break;
        }
        bool _183;
        if (live)
        {
            _183 = (i0 + r) < DK;
        }
        else
        {
            _183 = live;
        }
        if (_183)
        {
            _184 = S->v[((i0 + r) * DV) + j];
        }
        else
        {
            _184 = 0.0;
        }
        s[r] = _184;
    }
    float A = (reinterpret_cast<device Floats*>(p.A))->v[h];
    float dt = (reinterpret_cast<device Floats*>(p.dt_bias))->v[h];
    uint sum_wg = min(wg, 128u);
    float _347;
    float _361;
    for (uint t = 0u; t < p.n; t++)
    {
        device Floats* row = reinterpret_cast<device Floats*>(p.qkv + (ulong(t * width) * 4ul));
        float sq = 0.0;
        float sk = 0.0;
        for (uint i = tid; i < DK; i += sum_wg)
        {
            float q = row->v[(kh * DK) + i];
            float k = row->v[(key_dim + (kh * DK)) + i];
            qs[i] = q;
            ks[i] = k;
            sq += (q * q);
            sk += (k * k);
        }
        float param = sq;
        float _299 = workgroup_sum(param, wg_red, gl_SubgroupID, gl_NumSubgroups);
        float rq = rsqrt(_299 + 9.9999999747524270787835121154785e-07) * rsqrt(float(DK));
        float param_1 = sk;
        float _309 = workgroup_sum(param_1, wg_red, gl_SubgroupID, gl_NumSubgroups);
        float rk = rsqrt(_309 + 9.9999999747524270787835121154785e-07);
        float param_2 = (reinterpret_cast<device Floats*>(p.b))->v[(t * p.v_heads) + h];
        float beta = sigmoid(param_2);
        float x = (reinterpret_cast<device Floats*>(p.a))->v[(t * p.v_heads) + h] + dt;
        if (x > 20.0)
        {
            _347 = x;
        }
        else
        {
            _347 = log(1.0 + exp(x));
        }
        float decay = exp(A * _347);
        if (live)
        {
            _361 = row->v[((2u * key_dim) + (h * DV)) + j];
        }
        else
        {
            _361 = 0.0;
        }
        float v = _361;
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
        if ((part == 0u) && live)
        {
            float sum = 0.0;
            for (uint q_2 = 0u; q_2 < 4u; q_2++)
            {
                sum += red[q_2][col];
            }
            (reinterpret_cast<device Floats*>(p.o))->v[(((t * p.v_heads) + h) * DV) + j] = sum;
        }
        threadgroup_barrier(mem_flags::mem_threadgroup);
    }
    for (uint r_3 = 0u; r_3 < 128u; r_3++)
    {
        if (r_3 >= rows)
        {
            break;
        }
        bool _562;
        if (live)
        {
            _562 = (i0 + r_3) < DK;
        }
        else
        {
            _562 = live;
        }
        if (_562)
        {
            S->v[((i0 + r_3) * DV) + j] = s[r_3];
        }
    }
}

