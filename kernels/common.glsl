// common.glsl — what every Splash kernel shares: buffer references, the weight formats, workgroup reductions.
//
// Buffers are passed as 64-bit device addresses in push constants (GL_EXT_buffer_reference): no descriptor sets,
// no per-binding size limit (lavapipe caps a binding at 128 MiB), any byte offset the host computes. SPIRV-Cross
// turns each reference into a `device T*` for Metal.
//
// Rules for translatability (shared/reference/gpu-toolchain.md): shared arrays have literal sizes; no clustered
// reductions; no float atomics; results must not depend on the subgroup size (lavapipe runs 2..64 in the tests).
#extension GL_EXT_buffer_reference : require
#extension GL_EXT_shader_explicit_arithmetic_types_int64 : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#extension GL_EXT_control_flow_attributes : require

layout(buffer_reference, std430, buffer_reference_align = 4) buffer Floats { float v[]; };
layout(buffer_reference, std430, buffer_reference_align = 4) buffer Ints { int v[]; };
layout(buffer_reference, std430, buffer_reference_align = 4) buffer Uints { uint v[]; };
layout(buffer_reference, std430, buffer_reference_align = 16) readonly buffer Uvec4s { uvec4 v[]; };
layout(buffer_reference, std430, buffer_reference_align = 16) readonly buffer Vec4s { vec4 v[]; };
layout(buffer_reference, std430, buffer_reference_align = 8) readonly buffer Addrs { uint64_t v[]; };
// whole-vector stores (scalar stores from lanes that each own a run of elements would touch a line per lane)
layout(buffer_reference, std430, buffer_reference_align = 16) writeonly buffer Vec4Out { vec4 v[]; };
layout(buffer_reference, std430, buffer_reference_align = 16) writeonly buffer Uvec4Out { uvec4 v[]; };
layout(buffer_reference, std430, buffer_reference_align = 8) writeonly buffer Vec2Out { vec2 v[]; };

// Weight types: the values of sp_mtype (native/core/quant.h).
#define W_F32 0
#define W_BF16 1
#define W_F16 2
#define W_Q8 3
#define W_Q4 4
#define W_MLX4 5
#define W_MLX8 6
#define QK 32
#define QK_MLX 64

float bf16_lo(uint w) { return uintBitsToFloat(w << 16); }
float bf16_hi(uint w) { return uintBitsToFloat(w & 0xffff0000u); }
float f16_at(uint w, uint half_index) { return unpackHalf2x16(half_index == 0u ? w : w >> 16).x; }
// The two f16 values at byte offset `byte` (2-aligned) of the row at `row`.
vec2 f16x2_at(uint64_t row, uint byte) {
    Uints u = Uints(row);
    if ((byte & 2u) == 0u) return unpackHalf2x16(u.v[byte >> 2]);
    return vec2(unpackHalf2x16(u.v[byte >> 2]).y, unpackHalf2x16(u.v[(byte >> 2) + 1u]).x);
}

// The bf16 value at byte offset `byte` (2-aligned) of the row at `row`.
float bf16_at(uint64_t row, uint byte) {
    uint w = Uints(row).v[byte >> 2];
    return (byte & 2u) == 0u ? bf16_lo(w) : bf16_hi(w);
}

// Weight `col` of the row at `row` (a device address) of a matrix of `cols` columns in type `wt`, dequantized.
// The slow general path (tile loads, embedding rows); the GEMV kernels decode 16 bytes at a time instead.
float weight_at(uint wt, uint64_t row, uint col, uint cols) {
    Uints u = Uints(row);
    if (wt == W_F32) return uintBitsToFloat(u.v[col]);
    if (wt == W_BF16 || wt == W_F16) {
        uint w = u.v[col >> 1];
        return wt == W_BF16 ? ((col & 1u) == 0u ? bf16_lo(w) : bf16_hi(w)) : f16_at(w, col & 1u);
    }
    if (wt == W_MLX4 || wt == W_MLX8) {  // quants (element k: MLX4 nibble k % 8 of word k / 8), bf16 scales[nb], biases[nb]
        uint nb = cols / QK_MLX, g = col / QK_MLX, qbytes = wt == W_MLX4 ? cols / 2u : cols;
        uint q = wt == W_MLX4 ? bitfieldExtract(u.v[col >> 3], int((col & 7u) * 4u), 4)
                              : bitfieldExtract(u.v[col >> 2], int((col & 3u) * 8u), 8);
        return float(q) * bf16_at(row, qbytes + g * 2u) + bf16_at(row, qbytes + nb * 2u + g * 2u);
    }
    uint nb = (cols + QK - 1) / QK, g = col / QK, j = col % QK;
    if (wt == W_Q8) {  // int8 q[nb·32], f16 d[nb]
        int q = bitfieldExtract(int(u.v[col >> 2]), int((col & 3u) * 8u), 8);
        uint dbyte = nb * QK + g * 2u;
        return float(q) * f16_at(u.v[dbyte >> 2], (dbyte >> 1) & 1u);
    }
    // Q4: chunk p = g / 2 holds group 2p in low nibbles, 2p+1 in high nibbles; then f16 d[nb], f16 m[nb]
    uint qbytes = (nb + 1u) / 2u * QK, byte_index = (g / 2u) * QK + j;
    uint q = bitfieldExtract(u.v[byte_index >> 2], int((byte_index & 3u) * 8u + (g & 1u) * 4u), 4);
    uint db = qbytes + g * 2u, mb = qbytes + nb * 2u + g * 2u;
    return float(q) * f16_at(u.v[db >> 2], (db >> 1) & 1u) + f16_at(u.v[mb >> 2], (mb >> 1) & 1u);
}

// A sum over the whole workgroup, the same value in every invocation. Subgroup sums first, then one slot per
// subgroup in shared memory: 256 slots cover any subgroup size for workgroups of up to 256 invocations.
shared float wg_red[256];
float workgroup_sum(float v) {
    v = subgroupAdd(v);
    if (subgroupElect()) wg_red[gl_SubgroupID] = v;
    barrier();
    float s = 0.0;
    for (uint i = 0u; i < gl_NumSubgroups; i++) s += wg_red[i];
    barrier();
    return s;
}
float workgroup_max(float v) {
    v = subgroupMax(v);
    if (subgroupElect()) wg_red[gl_SubgroupID] = v;
    barrier();
    float s = wg_red[0];
    for (uint i = 1u; i < gl_NumSubgroups; i++) s = max(s, wg_red[i]);
    barrier();
    return s;
}

// The flat workgroup index of a 2-D grid (x up to 65535, then y): tall dispatches split this way.
uint flat_group() { return gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x; }

float sigmoid(float x) { return 1.0 / (1.0 + exp(-x)); }
float silu(float x) { return x / (1.0 + exp(-x)); }

// The smallest value over the workgroup (ties and argmin reductions), the same in every invocation.
shared uint wg_red_u[256];
uint workgroup_min_uint(uint v) {
    v = subgroupMin(v);
    if (subgroupElect()) wg_red_u[gl_SubgroupID] = v;
    barrier();
    uint s = wg_red_u[0];
    for (uint i = 1u; i < gl_NumSubgroups; i++) s = min(s, wg_red_u[i]);
    barrier();
    return s;
}
