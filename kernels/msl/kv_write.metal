#pragma clang diagnostic ignored "-Wmissing-prototypes"

#include <metal_stdlib>
#include <simd/simd.h>

using namespace metal;

struct Ints;
struct Uints;
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
    uint kv_type;
    ulong src2;
};

struct Ints
{
    int v[1];
};

constant uint HD_tmp [[function_constant(1)]];
constant uint HD = is_function_constant_defined(HD_tmp) ? HD_tmp : 128u;
constant uint _77 = (HD * 2u);
constant uint _79 = (HD * 4u);

struct Uints
{
    uint v[1];
};

struct Floats
{
    float v[1];
};

constant uint _144_tmp [[function_constant(0)]];
constant uint _144 = is_function_constant_defined(_144_tmp) ? _144_tmp : 1u;
constant uint3 gl_WorkGroupSize [[maybe_unused]] = uint3(_144, 1u, 1u);
constant uint _160 = (HD / 2u);
constant uint _168 = (HD / 2u);
constant uint _172 = (HD / 2u);
constant uint _179 = (HD / 2u);

static inline __attribute__((always_inline))
uint flat_group(thread uint3& gl_WorkGroupID, thread uint3& gl_NumWorkGroups)
{
    return gl_WorkGroupID.x + (gl_WorkGroupID.y * gl_NumWorkGroups.x);
}

static inline __attribute__((always_inline))
ulong kv_row(thread const ulong& base, thread const uint& pos, thread const uint& g, constant P& p)
{
    uint page = uint((reinterpret_cast<device Ints*>(p.pages))->v[pos / p.page_tokens]);
    uint row_bytes = (p.kv_type == 1u) ? _77 : _79;
    return (base + (ulong(page) * ulong(p.page_stride))) + (ulong((g * p.page_tokens) + (pos % p.page_tokens)) * ulong(row_bytes));
}

static inline __attribute__((always_inline))
void kv_put(thread const ulong& row, thread const uint& c, thread const float2& x, constant P& p)
{
    if (p.kv_type == 1u)
    {
        (reinterpret_cast<device Uints*>(row))->v[c] = as_type<uint>(half2(x));
    }
    else
    {
        (reinterpret_cast<device Floats*>(row))->v[2u * c] = x.x;
        (reinterpret_cast<device Floats*>(row))->v[(2u * c) + 1u] = x.y;
    }
}

kernel void splash_kv_write(constant P& p [[buffer(0)]], uint3 gl_WorkGroupID [[threadgroup_position_in_grid]], uint3 gl_NumWorkGroups [[threadgroups_per_grid]], uint3 gl_LocalInvocationID [[thread_position_in_threadgroup]])
{
    threadgroup float wg_red[256];
    threadgroup uint wg_red_u[256];
    uint i = (flat_group(gl_WorkGroupID, gl_NumWorkGroups) * gl_WorkGroupSize.x) + gl_LocalInvocationID.x;
    if (i >= ((p.n * p.kv_heads) * _160))
    {
        return;
    }
    uint c = i % _168;
    uint g = (i / _172) % p.kv_heads;
    uint row = i / (_179 * p.kv_heads);
    device Floats* k = reinterpret_cast<device Floats*>(p.src);
    device Floats* v = reinterpret_cast<device Floats*>(p.src2);
    ulong param = p.k;
    uint param_1 = p.n_past + row;
    uint param_2 = g;
    ulong param_3 = kv_row(param, param_1, param_2, p);
    uint param_4 = c;
    float2 param_5 = float2(k->v[2u * i], k->v[(2u * i) + 1u]);
    kv_put(param_3, param_4, param_5, p);
    ulong param_6 = p.v;
    uint param_7 = p.n_past + row;
    uint param_8 = g;
    ulong param_9 = kv_row(param_6, param_7, param_8, p);
    uint param_10 = c;
    float2 param_11 = float2(v->v[2u * i], v->v[(2u * i) + 1u]);
    kv_put(param_9, param_10, param_11, p);
}

