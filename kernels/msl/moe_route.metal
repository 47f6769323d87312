#pragma clang diagnostic ignored "-Wmissing-prototypes"

#include <metal_stdlib>
#include <simd/simd.h>

using namespace metal;

struct Floats;
struct Ints;

struct Floats
{
    float v[1];
};

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

constant uint _397_tmp [[function_constant(0)]];
constant uint _397 = is_function_constant_defined(_397_tmp) ? _397_tmp : 1u;
constant uint3 gl_WorkGroupSize [[maybe_unused]] = uint3(_397, 1u, 1u);

static inline __attribute__((always_inline))
uint flat_group(thread uint3& gl_WorkGroupID, thread uint3& gl_NumWorkGroups)
{
    return gl_WorkGroupID.x + (gl_WorkGroupID.y * gl_NumWorkGroups.x);
}

static inline __attribute__((always_inline))
float workgroup_max(thread float& v, threadgroup float (&wg_red)[256], thread uint& gl_SubgroupID, thread uint& gl_NumSubgroups)
{
    v = simd_max(v);
    bool _76 = simd_is_first();
    if (_76)
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
float workgroup_sum(thread float& v, threadgroup float (&wg_red)[256], thread uint& gl_SubgroupID, thread uint& gl_NumSubgroups)
{
    v = simd_sum(v);
    bool _34 = simd_is_first();
    if (_34)
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
void route_token(thread const ulong& logits, thread const uint& E, thread const uint& k, thread const bool& weights, threadgroup float (&wg_red)[256], thread uint& gl_SubgroupID, thread uint& gl_NumSubgroups, thread uint3& gl_LocalInvocationID, threadgroup float (&route_l)[1024], threadgroup uint (&route_id)[64], threadgroup float (&route_w)[64])
{
    uint tid = gl_LocalInvocationID.x;
    uint wg = 1u;
    device Floats* l = reinterpret_cast<device Floats*>(logits);
    float mx = as_type<float>(0xff800000u /* -inf */);
    for (uint e = tid; e < E; e += wg)
    {
        route_l[e] = l->v[e];
        mx = fast::max(mx, route_l[e]);
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    for (uint e_1 = tid; e_1 < E; e_1 += wg)
    {
        float v = route_l[e_1];
        uint rank = 0u;
        for (uint f = 0u; (f < E) && (rank < k); f++)
        {
            float u = route_l[f];
            bool _197 = u > v;
            bool _208;
            if (!_197)
            {
                _208 = (u == v) && (f < e_1);
            }
            else
            {
                _208 = _197;
            }
            rank += uint(_208);
        }
        if (rank < k)
        {
            route_id[rank] = e_1;
        }
    }
    if (!weights)
    {
        threadgroup_barrier(mem_flags::mem_threadgroup);
        return;
    }
    float param = mx;
    float _237 = workgroup_max(param, wg_red, gl_SubgroupID, gl_NumSubgroups);
    mx = _237;
    float sum = 0.0;
    for (uint e_2 = tid; e_2 < E; e_2 += wg)
    {
        sum += exp(route_l[e_2] - mx);
    }
    float param_1 = sum;
    float _262 = workgroup_sum(param_1, wg_red, gl_SubgroupID, gl_NumSubgroups);
    sum = _262;
    if (tid == 0u)
    {
        float s = 0.0;
        for (uint j = 0u; j < k; j++)
        {
            route_w[j] = exp(route_l[route_id[j]] - mx) / sum;
            s += route_w[j];
        }
        for (uint j_1 = 0u; j_1 < k; j_1++)
        {
            route_w[j_1] /= s;
        }
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
}

kernel void splash_moe_route(constant P& p [[buffer(0)]], uint gl_SubgroupID [[simdgroup_index_in_threadgroup]], uint gl_NumSubgroups [[simdgroups_per_threadgroup]], uint3 gl_WorkGroupID [[threadgroup_position_in_grid]], uint3 gl_NumWorkGroups [[threadgroups_per_grid]], uint3 gl_LocalInvocationID [[thread_position_in_threadgroup]])
{
    threadgroup float wg_red[256];
    threadgroup float route_l[1024];
    threadgroup uint route_id[64];
    threadgroup float route_w[64];
    threadgroup uint wg_red_u[256];
    uint t = flat_group(gl_WorkGroupID, gl_NumWorkGroups);
    if (t >= p.n)
    {
        return;
    }
    ulong param = p.src + (ulong(t * p.n_experts) * 4ul);
    uint param_1 = p.n_experts;
    uint param_2 = p.top_k;
    bool param_3 = true;
    route_token(param, param_1, param_2, param_3, wg_red, gl_SubgroupID, gl_NumSubgroups, gl_LocalInvocationID, route_l, route_id, route_w);
    for (uint j = gl_LocalInvocationID.x; j < p.top_k; j += gl_WorkGroupSize.x)
    {
        (reinterpret_cast<device Ints*>(p.ids))->v[(t * p.top_k) + j] = int(route_id[j]);
        (reinterpret_cast<device Floats*>(p.w))->v[(t * p.top_k) + j] = route_w[j];
    }
}

