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
struct Vec4s;

constant uint DV_tmp [[function_constant(2)]];
constant uint DV = is_function_constant_defined(DV_tmp) ? DV_tmp : 128u;

struct Floats
{
    float v[1];
};

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
constant uint OFF_U = (192u * DK);
constant uint _145 = (64u * DV);
constant uint OFF_AQK = (OFF_U + _145);
constant uint OFF_EL = (OFF_AQK + 4096u);
constant uint BLOCK = (OFF_EL + 4u);
constant ulong _151 = ulong(BLOCK);

struct Vec4s
{
    float4 v[1];
};

constant uint OFF_QG = (64u * DK);
constant uint OFF_KD = (128u * DK);
constant uint _496_tmp [[function_constant(0)]];
constant uint _496 = is_function_constant_defined(_496_tmp) ? _496_tmp : 1u;
constant uint3 gl_WorkGroupSize [[maybe_unused]] = uint3(_496, 1u, 1u);

kernel void splash_gdn_inter(constant P& p [[buffer(0)]], uint3 gl_LocalInvocationID [[thread_position_in_threadgroup]], uint3 gl_WorkGroupID [[threadgroup_position_in_grid]])
{
    threadgroup float Ss[128][16];
    threadgroup float vp[64][16];
    threadgroup float wg_red[256];
    threadgroup uint wg_red_u[256];
    uint tid = gl_LocalInvocationID.x;
    uint h = gl_WorkGroupID.x;
    uint col = tid % 16u;
    uint r = tid / 16u;
    uint j = (gl_WorkGroupID.y * 16u) + col;
    bool live = j < DV;
    device Floats* S = reinterpret_cast<device Floats*>(p.S + (ulong((h * DK) * DV) * 4ul));
    float _82;
    for (uint x = r; x < DK; x += 16u)
    {
        if (live)
        {
            _82 = S->v[(x * DV) + j];
        }
        else
        {
            _82 = 0.0;
        }
        Ss[x][col] = _82;
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    uint chunks = ((p.n + 64u) - 1u) / 64u;
    spvUnsafeArray<float, 4> sw;
    spvUnsafeArray<float, 4> qs;
    float _285;
    for (uint ch = 0u; ch < chunks; ch++)
    {
        uint t0 = ch * 64u;
        uint c = min(64u, (p.n - t0));
        ulong base = p.work + ((ulong((ch * p.v_heads) + h) * _151) * 4ul);
        device Floats* blk = reinterpret_cast<device Floats*>(base);
        const device Vec4s* blk4 = reinterpret_cast<device Vec4s*>(base);
        for (uint m = 0u; m < 4u; m++)
        {
            sw[m] = 0.0;
            qs[m] = 0.0;
        }
        for (uint x_1 = 0u; x_1 < DK; x_1 += 4u)
        {
            float4 s = float4(Ss[x_1][col], Ss[x_1 + 1u][col], Ss[x_1 + 2u][col], Ss[x_1 + 3u][col]);
            for (uint m_1 = 0u; m_1 < 4u; m_1++)
            {
                uint i = r + (16u * m_1);
                sw[m_1] += dot(blk4->v[((i * DK) + x_1) / 4u], s);
                qs[m_1] += dot(blk4->v[((OFF_QG + (i * DK)) + x_1) / 4u], s);
            }
        }
        for (uint m_2 = 0u; m_2 < 4u; m_2++)
        {
            uint i_1 = r + (16u * m_2);
            if (live)
            {
                _285 = blk->v[(OFF_U + (i_1 * DV)) + j];
            }
            else
            {
                _285 = 0.0;
            }
            vp[i_1][col] = _285 - sw[m_2];
        }
        threadgroup_barrier(mem_flags::mem_threadgroup);
        for (uint m_3 = 0u; m_3 < 4u; m_3++)
        {
            uint i_2 = r + (16u * m_3);
            if ((i_2 < c) && live)
            {
                float o = qs[m_3];
                for (uint l = 0u; l <= i_2; l++)
                {
                    o += (blk->v[(OFF_AQK + (i_2 * 64u)) + l] * vp[l][col]);
                }
                (reinterpret_cast<device Floats*>(p.o))->v[((((t0 + i_2) * p.v_heads) + h) * DV) + j] = o;
            }
        }
        float el = blk->v[OFF_EL];
        uint _379 = 4u * r;
        for (uint x_2 = _379; x_2 < DK; x_2 += 64u)
        {
            float4 s_1 = float4(Ss[x_2][col], Ss[x_2 + 1u][col], Ss[x_2 + 2u][col], Ss[x_2 + 3u][col]) * el;
            for (uint i_3 = 0u; i_3 < c; i_3++)
            {
                s_1 += (blk4->v[((OFF_KD + (i_3 * DK)) + x_2) / 4u] * vp[i_3][col]);
            }
            Ss[x_2][col] = s_1.x;
            Ss[x_2 + 1u][col] = s_1.y;
            Ss[x_2 + 2u][col] = s_1.z;
            Ss[x_2 + 3u][col] = s_1.w;
        }
        threadgroup_barrier(mem_flags::mem_threadgroup);
    }
    for (uint x_3 = r; x_3 < DK; x_3 += 16u)
    {
        if (live)
        {
            S->v[(x_3 * DV) + j] = Ss[x_3][col];
        }
    }
}

