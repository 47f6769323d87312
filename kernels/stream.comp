#version 460
// stream.comp — the memory bandwidth probe of the lab and the benchmarks: every invocation reads 16-byte words in a
// grid-stride loop and folds them, so the reads cannot be elided; a workgroup writes its fold only in the
// impossible case that it equals `never`. Spec constant 0: workgroup size.
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(local_size_x_id = 0) in;

layout(push_constant) uniform P {
    uint64_t src, dst;
    uint words;   // 16-byte words
    uint never;
} p;

void main() {
    uint stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
    uvec4 acc = uvec4(0u);
    Uvec4s src = Uvec4s(p.src);
    for (uint i = gl_GlobalInvocationID.x; i < p.words; i += stride) acc ^= src.v[i];
    uint fold = subgroupXor(acc.x ^ acc.y ^ acc.z ^ acc.w);
    if (fold == p.never && subgroupElect()) Uints(p.dst).v[gl_WorkGroupID.x] = fold;
}
