#pragma clang diagnostic ignored "-Wunused-variable"

#include <metal_stdlib>
#include <simd/simd.h>
#include <metal_atomic>

using namespace metal;

struct Ints;

constant uint _17_tmp [[function_constant(0)]];
constant uint _17 = is_function_constant_defined(_17_tmp) ? _17_tmp : 1u;
constant uint3 gl_WorkGroupSize [[maybe_unused]] = uint3(_17, 1u, 1u);

struct P
{
    ulong ids;
    ulong w;
    ulong src;
    ulong dst;
    ulong plan;
    ulong shared_y;
    ulong shared_gate;
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

kernel void splash_moe_plan(constant P& p [[buffer(0)]], uint3 gl_LocalInvocationID [[thread_position_in_threadgroup]])
{
    threadgroup int count[1024];
    threadgroup int offs[1024];
    threadgroup float wg_red[256];
    threadgroup uint wg_red_u[256];
    uint tid = gl_LocalInvocationID.x;
    uint wg = gl_WorkGroupSize.x;
    uint pairs = p.n * p.top_k;
    device Ints* ids = reinterpret_cast<device Ints*>(p.ids);
    device Ints* plan = reinterpret_cast<device Ints*>(p.plan);
    uint order_at = 8u + (3u * p.max_tiles);
    for (uint e = tid; e < p.n_experts; e += wg)
    {
        count[e] = 0;
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    for (uint q = tid; q < pairs; q += wg)
    {
        int _100 = atomic_fetch_add_explicit((threadgroup atomic_int*)&count[ids->v[q]], 1, memory_order_relaxed);
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    if (tid == 0u)
    {
        int at = 0;
        int tiles = 0;
        for (uint e_1 = 0u; e_1 < p.n_experts; e_1++)
        {
            offs[e_1] = at;
            for (int s = 0; s < count[e_1]; s += int(p.tile))
            {
                plan->v[8 + (3 * tiles)] = int(e_1);
                plan->v[(8 + (3 * tiles)) + 1] = at + s;
                plan->v[(8 + (3 * tiles)) + 2] = min(int(p.tile), (count[e_1] - s));
                tiles++;
            }
            at += count[e_1];
            count[e_1] = 0;
        }
        plan->v[0] = tiles;
        plan->v[1] = int(p.d);
        plan->v[2] = 1;
        plan->v[3] = tiles;
        plan->v[4] = int(p.down_blocks);
        plan->v[5] = 1;
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    for (uint q_1 = tid; q_1 < pairs; q_1 += wg)
    {
        int e_2 = ids->v[q_1];
        int _227 = atomic_fetch_add_explicit((threadgroup atomic_int*)&count[e_2], 1, memory_order_relaxed);
        int slot = _227;
        plan->v[order_at + uint(offs[e_2] + slot)] = int(q_1);
    }
}

