#pragma clang diagnostic ignored "-Wmissing-prototypes"

#include <metal_stdlib>
#include <simd/simd.h>

using namespace metal;

struct Ints;
struct Floats;

struct Ints
{
    int v[1];
};

struct P
{
    ulong q;
    ulong gate;
    ulong qg;
    ulong k;
    ulong q_norm;
    ulong k_norm;
    ulong pos;
    ulong inv_freq;
    uint n;
    uint heads;
    uint kv_heads;
    uint half_rot;
    int section0;
    int section1;
    int section2;
    float eps;
};

constant uint _226_tmp [[function_constant(0)]];
constant uint _226 = is_function_constant_defined(_226_tmp) ? _226_tmp : 1u;
constant uint3 gl_WorkGroupSize [[maybe_unused]] = uint3(_226, 1u, 1u);
constant uint HD_tmp [[function_constant(1)]];
constant uint HD = is_function_constant_defined(HD_tmp) ? HD_tmp : 256u;

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
float workgroup_sum(thread float& v, threadgroup float (&wg_red)[256], thread uint& gl_SubgroupID, thread uint& gl_NumSubgroups)
{
    v = simd_sum(v);
    bool _42 = simd_is_first();
    if (_42)
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
int rope_position(thread const ulong& pos, thread const uint& row, thread const uint& f, thread const int& section0, thread const int& section1, thread const int& section2)
{
    if (((section0 == 0) && (section1 == 0)) && (section2 == 0))
    {
        return (reinterpret_cast<device Ints*>(pos))->v[row];
    }
    uint s = f % 3u;
    int section = (s == 1u) ? section1 : section2;
    bool _131 = s != 0u;
    bool _140;
    if (_131)
    {
        _140 = int(f) < (3 * section);
    }
    else
    {
        _140 = _131;
    }
    return (reinterpret_cast<device Ints*>(pos))->v[(row * 3u) + (_140 ? s : 0u)];
}

static inline __attribute__((always_inline))
float2 rope_pair(thread const float& x1, thread const float& x2, thread const int& at, thread const float& inv_freq)
{
    float ang = float(at) * inv_freq;
    float k = round(ang * 0.15915493667125701904296875);
    float r = fma(-k, 6.28125, ang);
    r = fma(-k, 0.00193530716933310031890869140625, r);
    r = fma(-k, 1.0253131677018245682120323181152e-11, r);
    float c = cos(r);
    float s = sin(r);
    return float2((x1 * c) - (x2 * s), (x2 * c) + (x1 * s));
}

kernel void splash_attention_prep(constant P& p [[buffer(0)]], uint gl_SubgroupID [[simdgroup_index_in_threadgroup]], uint gl_NumSubgroups [[simdgroups_per_threadgroup]], uint3 gl_WorkGroupID [[threadgroup_position_in_grid]], uint3 gl_NumWorkGroups [[threadgroups_per_grid]], uint3 gl_LocalInvocationID [[thread_position_in_threadgroup]])
{
    threadgroup float wg_red[256];
    threadgroup float ys[256];
    threadgroup uint wg_red_u[256];
    uint g = flat_group(gl_WorkGroupID, gl_NumWorkGroups);
    uint per = p.heads + p.kv_heads;
    if (g >= (p.n * per))
    {
        return;
    }
    uint tid = gl_LocalInvocationID.x;
    uint wg = gl_WorkGroupSize.x;
    uint row = g / per;
    uint head = g % per;
    bool query = head < p.heads;
    ulong _245;
    if (query)
    {
        _245 = p.qg + (ulong((((row * p.heads) + head) * 2u) * HD) * 4ul);
    }
    else
    {
        _245 = p.k + (ulong((((row * p.kv_heads) + head) - p.heads) * HD) * 4ul);
    }
    ulong src = _245;
    ulong _284;
    if (query)
    {
        _284 = p.q + (ulong(((row * p.heads) + head) * HD) * 4ul);
    }
    else
    {
        _284 = src;
    }
    ulong dst = _284;
    device Floats* x = reinterpret_cast<device Floats*>(src);
    ulong _311;
    if (query)
    {
        _311 = p.q_norm;
    }
    else
    {
        _311 = p.k_norm;
    }
    device Floats* w = reinterpret_cast<device Floats*>(_311);
    device Floats* y = reinterpret_cast<device Floats*>(dst);
    if (query)
    {
        device Floats* gate = reinterpret_cast<device Floats*>(p.gate + (ulong(((row * p.heads) + head) * HD) * 4ul));
        for (uint j = tid; j < HD; j += wg)
        {
            gate->v[j] = x->v[HD + j];
        }
    }
    float ss = 0.0;
    for (uint j_1 = tid; j_1 < HD; j_1 += wg)
    {
        ss += (x->v[j_1] * x->v[j_1]);
    }
    float param = ss;
    float _391 = workgroup_sum(param, wg_red, gl_SubgroupID, gl_NumSubgroups);
    float r = rsqrt((_391 / float(HD)) + p.eps);
    for (uint j_2 = tid; j_2 < HD; j_2 += wg)
    {
        ys[j_2] = (x->v[j_2] * r) * w->v[j_2];
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    for (uint f = tid; f < p.half_rot; f += wg)
    {
        ulong param_1 = p.pos;
        uint param_2 = row;
        uint param_3 = f;
        int param_4 = p.section0;
        int param_5 = p.section1;
        int param_6 = p.section2;
        int at = rope_position(param_1, param_2, param_3, param_4, param_5, param_6);
        float param_7 = ys[f];
        float param_8 = ys[f + p.half_rot];
        int param_9 = at;
        float param_10 = (reinterpret_cast<device Floats*>(p.inv_freq))->v[f];
        float2 v = rope_pair(param_7, param_8, param_9, param_10);
        y->v[f] = v.x;
        y->v[f + p.half_rot] = v.y;
    }
    uint _506 = (2u * p.half_rot) + tid;
    for (uint j_3 = _506; j_3 < HD; j_3 += wg)
    {
        y->v[j_3] = ys[j_3];
    }
}

