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

struct Floats
{
    float v[1];
};

constant uint _263_tmp [[function_constant(0)]];
constant uint _263 = is_function_constant_defined(_263_tmp) ? _263_tmp : 1u;
constant uint3 gl_WorkGroupSize [[maybe_unused]] = uint3(_263, 1u, 1u);

static inline __attribute__((always_inline))
uint flat_group(thread uint3& gl_WorkGroupID, thread uint3& gl_NumWorkGroups)
{
    return gl_WorkGroupID.x + (gl_WorkGroupID.y * gl_NumWorkGroups.x);
}

static inline __attribute__((always_inline))
float sigmoid(thread const float& x)
{
    return 1.0 / (1.0 + exp(-x));
}

kernel void splash_moe_combine(constant P& p [[buffer(0)]], uint3 gl_WorkGroupID [[threadgroup_position_in_grid]], uint3 gl_NumWorkGroups [[threadgroups_per_grid]], uint3 gl_LocalInvocationID [[thread_position_in_threadgroup]])
{
    threadgroup uint slot_order[64];
    threadgroup float wg_red[256];
    threadgroup uint wg_red_u[256];
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
                bool _96 = i > 0u;
                bool _127;
                if (_96)
                {
                    _127 = ids->v[(t * p.top_k) + slot_order[i - 1u]] > ids->v[(t * p.top_k) + j];
                }
                else
                {
                    _127 = _96;
                }
                if (_127)
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
    float _168;
    if (p.shared_y != 0ul)
    {
        float param = (reinterpret_cast<device Floats*>(p.shared_gate))->v[t];
        _168 = sigmoid(param);
    }
    else
    {
        _168 = 0.0;
    }
    float gate = _168;
    for (uint c = tid; c < p.d; c += gl_WorkGroupSize.x)
    {
        float acc = 0.0;
        for (uint j_1 = 0u; j_1 < p.top_k; j_1++)
        {
            uint q = (t * p.top_k) + slot_order[j_1];
            acc += (yo->v[(q * p.d) + c] * w->v[q]);
        }
        if (p.shared_y != 0ul)
        {
            acc += (gate * (reinterpret_cast<device Floats*>(p.shared_y))->v[(t * p.d) + c]);
        }
        y->v[(t * p.d) + c] = acc;
    }
}

