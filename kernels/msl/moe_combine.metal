#pragma clang diagnostic ignored "-Wmissing-prototypes"

#include <metal_stdlib>
#include <simd/simd.h>

using namespace metal;

struct Ints;
struct Floats;

struct P
{
    ulong ids;
    ulong w;
    ulong src;
    ulong dst;
    ulong plan;
    uint n;
    uint n_experts;
    uint top_k;
    uint d;
    uint down_blocks;
    uint max_tiles;
    uint tile;
};

struct Ints
{
    int v[1];
};

struct Floats
{
    float v[1];
};

constant uint _211_tmp [[function_constant(0)]];
constant uint _211 = is_function_constant_defined(_211_tmp) ? _211_tmp : 1u;
constant uint3 gl_WorkGroupSize [[maybe_unused]] = uint3(_211, 1u, 1u);

static inline __attribute__((always_inline))
uint flat_group(thread uint3& gl_WorkGroupID, thread uint3& gl_NumWorkGroups)
{
    return gl_WorkGroupID.x + (gl_WorkGroupID.y * gl_NumWorkGroups.x);
}

kernel void splash_moe_combine(constant P& p [[buffer(0)]], uint3 gl_WorkGroupID [[threadgroup_position_in_grid]], uint3 gl_NumWorkGroups [[threadgroups_per_grid]], uint3 gl_LocalInvocationID [[thread_position_in_threadgroup]])
{
    threadgroup uint slot_order[64];
    threadgroup float wg_red[256];
    threadgroup uint wg_red_u[256];
    threadgroup float route_l[1024];
    threadgroup uint route_id[64];
    threadgroup float route_w[64];
    uint t = flat_group(gl_WorkGroupID, gl_NumWorkGroups);
    uint tid = gl_LocalInvocationID.x;
    if (t >= p.n)
    {
        return;
    }
    device Ints* ids = reinterpret_cast<device Ints*>(p.ids);
    if (tid == 0u)
    {
        for (uint j = 0u; j < p.top_k; j++)
        {
            uint i = j;
            for (;;)
            {
                bool _82 = i > 0u;
                bool _113;
                if (_82)
                {
                    _113 = ids->v[(t * p.top_k) + slot_order[i - 1u]] > ids->v[(t * p.top_k) + j];
                }
                else
                {
                    _113 = _82;
                }
                if (_113)
                {
                    slot_order[i] = slot_order[i - 1u];
                    i--;
                    continue;
                }
                else
                {
                    break;
                }
            }
            slot_order[i] = j;
        }
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    device Floats* w = reinterpret_cast<device Floats*>(p.w);
    device Floats* yo = reinterpret_cast<device Floats*>(p.src);
    device Floats* y = reinterpret_cast<device Floats*>(p.dst);
    for (uint c = tid; c < p.d; c += gl_WorkGroupSize.x)
    {
        float acc = 0.0;
        for (uint j_1 = 0u; j_1 < p.top_k; j_1++)
        {
            uint q = (t * p.top_k) + slot_order[j_1];
            acc += (yo->v[(q * p.d) + c] * w->v[q]);
        }
        y->v[(t * p.d) + c] = acc;
    }
}

