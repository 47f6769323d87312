/* vulkan_moe_cases.h — vulkan_ops_test's cases of the routed experts of a prefill chunk (more tokens than a GEMV
 * takes): on the matrix units where the device has cooperative matrices (matmul_coopmat.comp MOE: x, the dequantized
 * weights and h rounded to f16, so unquantized weights to 1e-5 as the dense coop GEMM), else on the GEMV tiles (to
 * 1e-10); each report line says which ran. Included by vulkan_ops_test.c only, after backend_test.h. */
#ifndef SP_VULKAN_MOE_CASES_H
#define SP_VULKAN_MOE_CASES_H

#include "backend_test.h"
#include "backends/gpu/gpu.h"

static void test_moe_chunk(sp_mtype t, int32_t E, int32_t k, int64_t H, int64_t I, int64_t n) {
    sp_matrix m = {.type = t, .rows = I, .cols = H};
    sp_moe_experts shape = {&m, &m, &m, E, k, H, I};
    bool coop = sp_gpu_moe_coop(sp_gpu_of(&gpu), &shape, n);
    test_moe_path(t, E, k, H, I, n, coop ? 1e-5 : 1e-10, coop ? " (f16 matrix units)" : " (GEMV tiles)");
}

/* Both paths forced on the same routing, the matrix units against the GEMV tiles (which compute in f32 from the same
 * dequantized weights: 1e-5 for every type), where the device has them: few tokens too (tiles of 1 to 5 pairs). */
static void test_moe_paths(sp_mtype t, int32_t E, int32_t k, int64_t H, int64_t I, int64_t n) {
    const char *why = sp_gpu_of(&gpu)->no_coopmat;
    if (why) {
        printf("skip    moe_experts %s on the matrix units against the GEMV tiles, %lld tokens: %s\n", sp_mtype_name(t), (long long)n, why);
        return;
    }
    float *logits = randoms(n * E, -3, 3), *x = randoms(n * H, -1, 1);
    float *dlog = to_gpu(logits, 4 * (uint64_t)(n * E)), *dw = to_gpu(NULL, 4 * (uint64_t)(n * k)), *dx = to_gpu(x, 4 * (uint64_t)(n * H));
    int32_t *dids = to_gpu(NULL, 4 * (uint64_t)(n * k));
    gpu.moe_route(&gpu, dids, dw, dlog, n, E, k);
    weights gu = make_weights(t, (int64_t)E * 2 * I, H), dn = make_weights(t, (int64_t)E * H, I);
    sp_matrix v[3 * E];
    for (int32_t e = 0; e < E; e++)
        v[e] = sp_matrix_rows(&gu.dev, e * 2 * I, I), v[E + e] = sp_matrix_rows(&gu.dev, e * 2 * I + I, I),
        v[2 * E + e] = sp_matrix_rows(&dn.dev, e * H, H);
    sp_moe_experts ex = {v, v + E, v + 2 * E, E, k, H, I};
    float *dscratch = to_gpu(NULL, 4 * (uint64_t)sp_moe_scratch_floats(n, k, H, I)), *dy[2];
    for (int c = 0; c < 2; c++) {
        dy[c] = to_gpu(NULL, 4 * (uint64_t)(n * H));
        sp_gpu_moe_experts_launch(&gpu, dy[c], dx, dids, dw, n, &ex, dscratch, NULL, NULL, &(bool){c == 1});
    }
    float *want = from_gpu(dy[0], n * H), *got = from_gpu(dy[1], n * H);
    char what[160];
    snprintf(what, sizeof what, "moe_experts %s %d experts top %d, H %lld I %lld, %lld tokens: matrix units vs GEMV tiles",
             sp_mtype_name(t), E, k, (long long)H, (long long)I, (long long)n);
    expect(what, nmse(got, want, n * H), 1e-5);
    gpu.free(&gpu, dlog), gpu.free(&gpu, dw), gpu.free(&gpu, dx), gpu.free(&gpu, dids), gpu.free(&gpu, dscratch);
    gpu.free(&gpu, dy[0]), gpu.free(&gpu, dy[1]);
    free(logits), free(x), free(want), free(got), free(gu.bytes), free(dn.bytes);
}

/* odd shapes: experts of more pairs than a tile and of a partial tile, rows short of a workgroup's, a partial q4
 * group in the columns (H 136, and I 96 for down), whole tiles (H 256, I 128: whole row blocks and 64-column steps); every
 * weight type the matrix units take, and f32 (never on them) */
static void test_moe_chunks(bool quick) {
    test_moe_paths(SP_MAT_Q4, 8, 3, 64, 32, 1);
    test_moe_paths(SP_MAT_BF16, 8, 3, 136, 96, 5);
    test_moe_paths(SP_MAT_Q4, 16, 4, 256, 128, 300);
    test_moe_chunk(SP_MAT_Q4, 8, 3, 64, 32, 100);
    test_moe_chunk(SP_MAT_Q4, 16, 4, 256, 128, 70);
    test_moe_chunk(SP_MAT_BF16, 8, 3, 128, 96, 40);
    test_moe_chunk(SP_MAT_F32, 8, 3, 64, 32, 17);
    if (quick) return;
    for (int t = SP_MAT_BF16; t <= SP_MAT_MLX8; t++) {
        test_moe_chunk((sp_mtype)t, 8, 3, t >= SP_MAT_MLX4 ? 192 : 136, t >= SP_MAT_MLX4 ? 128 : 96, 50);
        test_moe_chunk((sp_mtype)t, 16, 4, 256, 128, 70);
    }
    /* the real shape (Qwen3.6-35B-A3B: hidden 2048, experts of 512, top 8) with fewer experts (test weights): 64 pairs
     * per expert in a chunk of 256 tokens, 128 in one of 1024 */
    test_moe_chunk(SP_MAT_Q4, 32, 8, 2048, 512, 256);
    test_moe_paths(SP_MAT_Q4, 64, 8, 2048, 512, 1024);
}

#endif
