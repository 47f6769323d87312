#pragma clang diagnostic ignored "-Wmissing-prototypes"

#include <metal_stdlib>
#include <simd/simd.h>

using namespace metal;

struct Ints;
struct Floats;

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
    ulong src2;
};

struct Ints
{
    int v[1];
};

constant uint HD_tmp [[function_constant(1)]];
constant uint HD = is_function_constant_defined(HD_tmp) ? HD_tmp : 128u;
constant uint _89_tmp [[function_constant(0)]];
constant uint _89 = is_function_constant_defined(_89_tmp) ? _89_tmp : 1u;
constant uint3 gl_WorkGroupSize [[maybe_unused]] = uint3(_89, 1u, 1u);

struct Floats
{
    float v[1];
};

static inline __attribute__((always_inline))
uint flat_group(thread uint3& gl_WorkGroupID, thread uint3& gl_NumWorkGroups)
{
    return gl_WorkGroupID.x + (gl_WorkGroupID.y * gl_NumWorkGroups.x);
}

static inline __attribute__((always_inline))
ulong kv_row(thread const ulong& base, thread const uint& pos, thread const uint& g, constant P& p)
{
    uint page = uint((reinterpret_cast<device Ints*>(p.pages))->v[pos / p.page_tokens]);
    return base + (((ulong(page) * ulong(p.page_stride)) + ulong(((g * p.page_tokens) + (pos % p.page_tokens)) * HD)) * 4ul);
}

kernel void splash_kv_write(constant P& p [[buffer(0)]], uint3 gl_WorkGroupID [[threadgroup_position_in_grid]], uint3 gl_NumWorkGroups [[threadgroups_per_grid]], uint3 gl_LocalInvocationID [[thread_position_in_threadgroup]])
{
    threadgroup float wg_red[256];
    threadgroup uint wg_red_u[256];
    uint i = (flat_group(gl_WorkGroupID, gl_NumWorkGroups) * gl_WorkGroupSize.x) + gl_LocalInvocationID.x;
    if (i >= ((p.n * p.kv_heads) * HD))
    {
        return;
    }
    uint d = i % HD;
    uint g = (i / HD) % p.kv_heads;
    uint row = i / (HD * p.kv_heads);
    ulong param = p.k;
    uint param_1 = p.n_past + row;
    uint param_2 = g;
    (reinterpret_cast<device Floats*>(kv_row(param, param_1, param_2, p)))->v[d] = (reinterpret_cast<device Floats*>(p.src))->v[i];
    ulong param_3 = p.v;
    uint param_4 = p.n_past + row;
    uint param_5 = g;
    (reinterpret_cast<device Floats*>(kv_row(param_3, param_4, param_5, p)))->v[d] = (reinterpret_cast<device Floats*>(p.src2))->v[i];
}

