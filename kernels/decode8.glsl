// decode8.glsl — eight weights of a row of a matrix in the weight type WT (a define: W_F32 … W_MLX8, common.glsl),
// dequantized to f32: the tile loads of the GEMMs (matmul_tiled.comp, matmul_coopmat.comp) share it. In two halves
// for kernels that load a tile's bytes before they need its values (load8, then unpack8): the words that hold eight
// weights, and the weights from those words. Needs common.glsl included first.

#if WT != W_F32
// The words holding weights col0 … col0 + 7 (col0 a multiple of 8, col0 + 8 ≤ cols) of the row at `row`: the packed
// values in .xy (4-bit types in .x alone; bf16/f16 all four), then the word of each group scale (and min, bias).
uvec4 load8(uint64_t row, uint col0, uint cols) {
    Uints u = Uints(row);
#if WT == W_BF16 || WT == W_F16
    return Uvec4s(row + uint64_t(col0) * 2ul).v[0];
#elif WT == W_Q8
    uint nb = (cols + QK - 1u) / QK, db = nb * QK + (col0 / QK) * 2u;
    return uvec4(u.v[col0 >> 2], u.v[(col0 >> 2) + 1u], u.v[db >> 2], 0u);
#elif WT == W_MLX4 || WT == W_MLX8
    uint groups = cols / QK_MLX, g = col0 / QK_MLX, qbytes = WT == W_MLX4 ? cols / 2u : cols;
    uint sb = qbytes + g * 2u, bb = qbytes + groups * 2u + g * 2u;
#if WT == W_MLX4
    return uvec4(u.v[col0 >> 3], 0u, u.v[sb >> 2], u.v[bb >> 2]);
#else
    return uvec4(u.v[col0 >> 2], u.v[(col0 >> 2) + 1u], u.v[sb >> 2], u.v[bb >> 2]);
#endif
#else
    uint nb = (cols + QK - 1u) / QK, g = col0 / QK, qbytes = (nb + 1u) / 2u * QK;
    uint byte0 = (g >> 1) * QK + (col0 % QK), db = qbytes + g * 2u, mb = qbytes + nb * 2u + g * 2u;
    return uvec4(u.v[byte0 >> 2], u.v[(byte0 >> 2) + 1u], u.v[db >> 2], u.v[mb >> 2]);
#endif
}

// The eight weights load8 read for column col0.
void unpack8(uvec4 r, uint col0, uint cols, out float w[8]) {
#if WT == W_BF16
    [[unroll]] for (uint i = 0u; i < 4u; i++) {
        w[2u * i] = bf16_lo(r[i]);
        w[2u * i + 1u] = bf16_hi(r[i]);
    }
#elif WT == W_F16
    [[unroll]] for (uint i = 0u; i < 4u; i++) {
        vec2 h = unpackHalf2x16(r[i]);
        w[2u * i] = h.x;
        w[2u * i + 1u] = h.y;
    }
#elif WT == W_Q8
    uint nb = (cols + QK - 1u) / QK, db = nb * QK + (col0 / QK) * 2u;
    float d = f16_at(r.z, (db >> 1) & 1u) * 127.0;
    [[unroll]] for (uint i = 0u; i < 2u; i++) {
        vec4 s = unpackSnorm4x8(r[i]) * d;
        w[4u * i] = s.x;
        w[4u * i + 1u] = s.y;
        w[4u * i + 2u] = s.z;
        w[4u * i + 3u] = s.w;
    }
#elif WT == W_MLX4 || WT == W_MLX8
    uint groups = cols / QK_MLX, g = col0 / QK_MLX, qbytes = WT == W_MLX4 ? cols / 2u : cols;
    uint sb = qbytes + g * 2u, bb = qbytes + groups * 2u + g * 2u;
    float s = ((sb & 2u) == 0u ? bf16_lo(r.z) : bf16_hi(r.z)) * 255.0, b = (bb & 2u) == 0u ? bf16_lo(r.w) : bf16_hi(r.w);
#if WT == W_MLX4
    // eight nibbles, element k at bits 4k
    vec4 even = unpackUnorm4x8(r.x & 0x0f0f0f0fu) * s + b, odd = unpackUnorm4x8((r.x >> 4) & 0x0f0f0f0fu) * s + b;
    [[unroll]] for (uint i = 0u; i < 4u; i++) {
        w[2u * i] = even[i];
        w[2u * i + 1u] = odd[i];
    }
#else
    [[unroll]] for (uint i = 0u; i < 2u; i++) {
        vec4 t = unpackUnorm4x8(r[i]) * s + b;
        w[4u * i] = t.x;
        w[4u * i + 1u] = t.y;
        w[4u * i + 2u] = t.z;
        w[4u * i + 3u] = t.w;
    }
#endif
#else
    uint nb = (cols + QK - 1u) / QK, g = col0 / QK, qbytes = (nb + 1u) / 2u * QK;
    uint db = qbytes + g * 2u, mb = qbytes + nb * 2u + g * 2u;
    float d = f16_at(r.z, (db >> 1) & 1u) * 255.0, m = f16_at(r.w, (mb >> 1) & 1u);
    [[unroll]] for (uint i = 0u; i < 2u; i++) {
        vec4 s = unpackUnorm4x8((r[i] >> ((g & 1u) * 4u)) & 0x0f0f0f0fu) * d + m;
        w[4u * i] = s.x;
        w[4u * i + 1u] = s.y;
        w[4u * i + 2u] = s.z;
        w[4u * i + 3u] = s.w;
    }
#endif
}
#endif

// Eight weights of row `row` from column col0 (a multiple of 8), zero past cols.
void decode8(uint64_t row, uint col0, uint cols, out float w[8]) {
    if (col0 + 8u <= cols) {
#if WT == W_F32
        Uints u = Uints(row);
        for (uint i = 0u; i < 8u; i++) w[i] = uintBitsToFloat(u.v[col0 + i]);
#else
        unpack8(load8(row, col0, cols), col0, cols, w);
#endif
    } else {
        for (uint i = 0u; i < 8u; i++) w[i] = col0 + i < cols ? weight_at(WT, row, col0 + i, cols) : 0.0;
    }
}
