#version 460
// matmul_tiled.comp — y = x · Wᵀ for many rows of x (prefill, large batches): a shared-memory tiled GEMM.
//
//   y[j][r] = Σ_c W[r][c] · x[j][c]        j < n, r < rows
// A workgroup computes a BM × BN tile of y (BM weight rows × BN x rows), stepping over the columns BK at a time:
// it decodes the weight tile to f32 and loads the x tile into shared memory, then each invocation accumulates a
// TM × TN block from shared memory. Tile sizes are defines (literal shared sizes, so the kernel translates to Metal);
// the generator picks them per model shape. Each weight tile is read once per BN rows of x.
// Defines: WT, BM, BN, BK, TM, TN with (BM/TM)·(BN/TN) = workgroup size (spec constant 0, set to that product),
// TM a multiple of 4, BN a multiple of 4.
// Caller guarantees: cols % 4 == 0, x rows 16-byte aligned.
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
#include "decode8.glsl"

layout(local_size_x_id = 0) in;

#ifndef BM
#define BM 64
#define BN 64
#define BK 32
#define TM 4
#define TN 4
#endif
#define THREADS ((BM / TM) * (BN / TN))

layout(push_constant) uniform P {
    uint64_t w;       // row 0 of W
    uint64_t x;       // x [n][x_stride]
    uint64_t y;       // y [n][y_stride]
    uint row_bytes, rows, cols, n, x_stride, y_stride;
} p;

shared vec4 Ws[BK][BM / 4];  // Ws[k][m] = W[m0 + m][k0 + k]
shared vec4 Xs[BK][BN / 4];  // Xs[k][j] = x[n0 + j][k0 + k]

void main() {
    uint tid = gl_LocalInvocationID.x;
    uint m0 = gl_WorkGroupID.x * BM, n0 = gl_WorkGroupID.y * BN;
    uint tm = tid % (BM / TM), tn = tid / (BM / TM);
    float acc[TM][TN];
    [[unroll]] for (uint i = 0u; i < TM; i++)
        [[unroll]] for (uint j = 0u; j < TN; j++) acc[i][j] = 0.0;

    for (uint k0 = 0u; k0 < p.cols; k0 += BK) {
        // weight tile: BM rows × BK columns, 8 per load
        for (uint t = tid; t < BM * BK / 8u; t += THREADS) {
            uint m = t / (BK / 8u), kk = (t % (BK / 8u)) * 8u;
            float w[8];
            if (m0 + m < p.rows && k0 + kk < p.cols) decode8(p.w + uint64_t(m0 + m) * p.row_bytes, k0 + kk, p.cols, w);
            else for (uint i = 0u; i < 8u; i++) w[i] = 0.0;
            for (uint i = 0u; i < 8u; i++) Ws[kk + i][m >> 2][m & 3u] = w[i];
        }
        // x tile: BN rows × BK columns, 4 per load
        for (uint t = tid; t < BN * BK / 4u; t += THREADS) {
            uint j = t / (BK / 4u), kk = (t % (BK / 4u)) * 4u;
            vec4 v = vec4(0.0);
            if (n0 + j < p.n && k0 + kk < p.cols) v = Vec4s(p.x + uint64_t((n0 + j) * p.x_stride + k0 + kk) * 4ul).v[0];
            for (uint i = 0u; i < 4u; i++) Xs[kk + i][j >> 2][j & 3u] = v[i];
        }
        barrier();
        [[unroll]] for (uint k = 0u; k < BK; k++) {
            float a[TM], b[TN];
            [[unroll]] for (uint i = 0u; i < TM; i += 4u) {
                vec4 v = Ws[k][(tm * TM + i) >> 2];
                a[i] = v.x; a[i + 1u] = v.y; a[i + 2u] = v.z; a[i + 3u] = v.w;
            }
            [[unroll]] for (uint j = 0u; j < TN; j++) b[j] = Xs[k][(tn * TN + j) >> 2][(tn * TN + j) & 3u];
            [[unroll]] for (uint i = 0u; i < TM; i++)
                [[unroll]] for (uint j = 0u; j < TN; j++) acc[i][j] += a[i] * b[j];
        }
        barrier();
    }
    Floats y = Floats(p.y);
    [[unroll]] for (uint i = 0u; i < TM; i++)
        [[unroll]] for (uint j = 0u; j < TN; j++) {
            uint r = m0 + tm * TM + i, c = n0 + tn * TN + j;
            if (r < p.rows && c < p.n) y.v[c * p.y_stride + r] = acc[i][j];
        }
}
