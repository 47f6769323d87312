/* metal_host_test.c — the Metal backend's ops against the CPU backend's (the reference), by normalized MSE with the
 * helpers vulkan_ops_test.c uses (backend_test.h), on odd shapes that reach every kernel variant and code path:
 * padded and unpadded weight rows, GEMV and both GEMM tiles, split-key decode attention, indirect MoE dispatches,
 * device and host sampling.
 *
 *   build/tests/metal_host_test           every check
 *   build/tests/metal_host_test --probe   only whether the backend comes up on this machine (exit 0) or not
 *
 * On macOS it runs the real backend (device.m) on the Mac's GPU. On Linux it runs the same portable code — the GPU op
 * layer as Metal configures it (unified memory: host views instead of staging copies, one command buffer per sync,
 * no submission barriers, the default launch parameters) and backend.c's checks of each pipeline and dispatch
 * against the translated kernels' interfaces — over the Vulkan backend's device: the device layer below hands each
 * sp_mtl_* call to the Vulkan device's, which runs the SPIR-V the MSL was translated from. What it cannot check on
 * Linux: device.m itself and Apple's compiler. */
#include "backends/backend.h"
#include "backends/cpu/ops.h"
#include "backends/metal/metal.h"
#include "backends/metal/mtl.h"
#include "backend_test.h"
#include "check.h"
#include "core/error.h"
#include "core/quant.h"
#include "core/threadpool.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static sp_threadpool *pool;

#ifndef __APPLE__
/* ---- the device layer over the Vulkan backend's device (Linux) ---- */
#include "backends/vulkan/vulkan.h"

#include <stdio.h>

static sp_backend vulkan;
static splash_status vulkan_status;

/* The Vulkan backend's op layer: its device calls do what device.m's would, on the same SPIR-V. */
static sp_gpu *vk(void) { return sp_gpu_of(&vulkan); }

splash_status sp_mtl_open(sp_mtl *m) {
    splash_status st = sp_vulkan_backend_create(&vulkan, pool, sp_threadpool_size(pool), &vulkan_status, true);
    if (st) return st;
    snprintf(m->info.name, sizeof m->info.name, "%.100s (Vulkan)", sp_vulkan_device_name(&vulkan));
    m->info.unified_memory = 1;
    m->info.max_buffer = vk()->max_buffer;
    m->info.page_size = 4096;
    m->objc = &vulkan;
    return SPLASH_OK;
}

void sp_mtl_close(sp_mtl *m) {
    sp_vulkan_backend_destroy(&vulkan);
    m->objc = NULL;
}

splash_status sp_mtl_buffer(sp_gpu *g, uint64_t bytes, sp_gpu_memory mem, sp_gpu_buffer *b) {
    splash_status st = vk()->dev->buffer(vk(), bytes, SP_GPU_UPLOAD, b); /* host-visible, coherent, device address */
    if (!st) memset(b->host, 0, (size_t)bytes);                          /* Metal's new buffers are zero-filled */
    return st;
}

splash_status sp_mtl_wrap(sp_gpu *g, const void *data, uint64_t bytes, sp_gpu_buffer *b, uint64_t *offset) {
    return SPLASH_ERR_UNSUPPORTED; /* no file pages are wrapped here: uploads take the copy path */
}

void sp_mtl_release(sp_gpu *g, sp_gpu_buffer *b) { vk()->dev->release(vk(), b); }
void *sp_mtl_pipeline(sp_gpu *g, sp_gpu_kernel_id k, const uint32_t spec[4], uint32_t *max_threads) {
    return vk()->dev->pipeline(vk(), k, spec, max_threads);
}
void sp_mtl_release_pipeline(sp_gpu *g, void *pipeline) { vk()->dev->release_pipeline(vk(), pipeline); }
splash_status sp_mtl_dispatch(sp_gpu *g, const sp_gpu_launch *l) { return vk()->dev->dispatch(vk(), l); }
splash_status sp_mtl_finish(sp_gpu *g) { return vk()->dev->finish(vk()); }
#endif

/* ---- the checks ---- */

static void test_matmul(sp_mtype t, int64_t rows, int64_t cols, int64_t n) {
    weights w = make_weights(t, rows, cols);
    float *x = randoms(n * cols, -1, 1), *want = malloc(sizeof(float) * (size_t)(n * rows));
    float *dx = to_gpu(x, 4 * (uint64_t)(n * cols)), *dy = to_gpu(NULL, 4 * (uint64_t)(n * rows));
    gpu.matmul(&gpu, dy, &w.dev, dx, n);
    float *got = from_gpu(dy, n * rows);
    cpu.matmul(&cpu, want, &w.host, x, n);
    char what[160];
    snprintf(what, sizeof what, "matmul %s %lldx%lld n=%lld (row %lld bytes%s)", sp_mtype_name(t), (long long)rows,
             (long long)cols, (long long)n, (long long)w.host.row_bytes, w.host.row_bytes % 16 ? ", padded" : "");
    if (sp_gpu_of(&gpu)->simdgroup_gemm && n > SP_GPU_GEMV_MAX_N && t != SP_MAT_F32)
        snprintf(what + strlen(what), sizeof what - strlen(what), " (simdgroup matrices)");
    /* the CPU rounds x to int8 per group for quantized weights; the kernels multiply f32 x (vulkan_ops_test.c); the
     * GEMM on simdgroup matrices rounds x and the weights to f16 (relative error ≤ 2⁻¹¹ each: NMSE about 1e-7 on these
     * inputs), as the cooperative-matrix GEMM does on Vulkan */
    bool simdgroup = sp_gpu_of(&gpu)->simdgroup_gemm && n > SP_GPU_GEMV_MAX_N && t != SP_MAT_F32;
    expect(what, nmse(got, want, n * rows), t >= SP_MAT_Q8 ? 2e-4 : simdgroup ? 1e-5 : 1e-10);
    gpu.free(&gpu, dx), gpu.free(&gpu, dy);
    free(x), free(want), free(got), free(w.bytes);
}

/* clear and write touch the shared memory from the host; read waits for the GPU */
static void test_clear(int64_t N) {
    float *y = randoms(N, -2, 2), *dy = to_gpu(y, 4 * (uint64_t)N);
    gpu.clear(&gpu, dy, 4 * (uint64_t)N);
    float *got = from_gpu(dy, N);
    double sum = 0;
    for (int64_t i = 0; i < N; i++) sum += fabs(got[i]);
    CHECK(sum == 0, "clear zeroes backend memory");
    gpu.free(&gpu, dy);
    free(y), free(got);
}

static void test_norms_rope_embed(void) {
    enum { N = 5, D = 300 };
    float *x = randoms(N * D, -3, 3), *z = randoms(N * D, -4, 4), *w = randoms(D, 0.5f, 1.5f), *want = malloc(4 * N * D);
    float *dx = to_gpu(x, 4 * N * D), *dz = to_gpu(z, 4 * N * D), *dy = to_gpu(NULL, 4 * N * D);
    const float *dw = gpu.upload(&gpu, w, 1, 4 * D); /* 1200 bytes: a padded single row, as the norm vectors are */
    gpu.rmsnorm(&gpu, dy, dx, dw, N, D, 1e-6f);
    cpu.rmsnorm(&cpu, want, x, w, N, D, 1e-6f);
    float *got = from_gpu(dy, N * D);
    expect("rmsnorm 5x300 (weights uploaded)", nmse(got, want, N * D), 1e-12);
    free(got);
    gpu.rmsnorm_gated(&gpu, dx, dx, dz, dw, N, D, 1e-6f);
    cpu.rmsnorm_gated(&cpu, want, x, z, w, N, D, 1e-6f);
    got = from_gpu(dx, N * D);
    expect("rmsnorm_gated 5x300 (in place)", nmse(got, want, N * D), 1e-12);
    free(got);
    for (int mrope = 0; mrope < 2; mrope++) {
        enum { T = 3, H = 4, HD = 64, ROT = 16 };
        float *q = randoms(T * H * HD, -2, 2), inv[ROT / 2];
        for (int i = 0; i < ROT / 2; i++) inv[i] = 1.0f / powf(1e7f, (float)(2 * i) / (float)ROT);
        int32_t pos[3 * T], section[3] = {3, 3, 2};
        for (int i = 0; i < 3 * T; i++) pos[i] = (int32_t)uniform(0, 40000);
        float *dq = to_gpu(q, 4 * T * H * HD), *dinv = to_gpu(inv, sizeof inv);
        int32_t *dpos = to_gpu(pos, sizeof pos);
        gpu.rope(&gpu, dq, T, H, HD, ROT, dpos, mrope ? section : NULL, dinv);
        cpu.rope(&cpu, q, T, H, HD, ROT, pos, mrope ? section : NULL, inv);
        got = from_gpu(dq, T * H * HD);
        expect(mrope ? "rope (mrope)" : "rope", nmse(got, q, T * H * HD), 1e-11);
        gpu.free(&gpu, dq), gpu.free(&gpu, dinv), gpu.free(&gpu, dpos);
        free(q), free(got);
    }
    int32_t tok[7] = {0, 299, 5, 5, 123, 7, 250};
    int32_t *dtok = to_gpu(tok, sizeof tok);
    for (int mlx = 0; mlx < 2; mlx++) { /* a bf16 table, and an MLX4 one dequantized in the kernel (maybe by an FMA) */
        int64_t E = mlx ? 128 : 64;
        weights t = make_weights(mlx ? SP_MAT_MLX4 : SP_MAT_BF16, 300, E);
        float *de = to_gpu(NULL, 4 * 7 * (uint64_t)E);
        gpu.embed(&gpu, de, &t.dev, dtok, 7);
        cpu.embed(&cpu, want, &t.host, tok, 7);
        got = from_gpu(de, 7 * E);
        expect(mlx ? "embed mlx4 300x128, 7 tokens" : "embed bf16 300x64, 7 tokens", nmse(got, want, 7 * E), mlx ? 1e-12 : 0);
        gpu.free(&gpu, de);
        free(got), free(t.bytes);
    }
    gpu.free(&gpu, dtok), gpu.free(&gpu, dx), gpu.free(&gpu, dz), gpu.free(&gpu, dy);
    free(x), free(z), free(w), free(want);
}

/* n new rows after n_past cached ones for one sequence whose pages are scattered (every other page, reversed). */
static void test_attention(int32_t Hq, int32_t Hkv, int32_t hd, int32_t n_past, int64_t n, int32_t P) {
    int32_t total = n_past + (int32_t)n, n_pages = (total + P - 1) / P, cache_pages = 2 * n_pages + 1;
    int64_t page_floats = 2 * (int64_t)Hkv * P * hd;
    int32_t *pages = malloc(sizeof(int32_t) * (size_t)n_pages);
    for (int32_t i = 0; i < n_pages; i++) pages[i] = cache_pages - 1 - 2 * i;
    float *kv = randoms(page_floats * cache_pages, -1, 1);
    float *q = randoms(n * Hq * hd, -1, 1), *k = randoms(n * Hkv * hd, -1, 1), *v = randoms(n * Hkv * hd, -1, 1);
    float *dkv = to_gpu(kv, 4 * (uint64_t)(page_floats * cache_pages));
    float *dq = to_gpu(q, 4 * (uint64_t)(n * Hq * hd)), *dk = to_gpu(k, 4 * (uint64_t)(n * Hkv * hd));
    float *dv = to_gpu(v, 4 * (uint64_t)(n * Hkv * hd)), *dout = to_gpu(NULL, 4 * (uint64_t)(n * Hq * hd));
    sp_kv_view hv = {kv, kv + page_floats / 2, 4 * page_floats, pages, P, SPLASH_KV_F32},
               dvw = {dkv, dkv + page_floats / 2, 4 * page_floats, pages, P, SPLASH_KV_F32};
    float *want = malloc(4 * (size_t)(n * Hq * hd));
    gpu.kv_write(&gpu, &dvw, dk, dv, n_past, n, Hkv, hd);
    gpu.attention(&gpu, dout, dq, NULL, &(sp_attn_seq){dvw, 0, n_past, (int32_t)n}, 1, Hq, Hkv, hd, 1.0f / sqrtf((float)hd));
    float *got = from_gpu(dout, n * Hq * hd);
    cpu.kv_write(&cpu, &hv, k, v, n_past, n, Hkv, hd);
    cpu.attention(&cpu, want, q, NULL, &(sp_attn_seq){hv, 0, n_past, (int32_t)n}, 1, Hq, Hkv, hd, 1.0f / sqrtf((float)hd));
    char what[160];
    snprintf(what, sizeof what, "attention %d/%d heads x %d, %d past + %lld new", Hq, Hkv, hd, n_past, (long long)n);
    expect(what, nmse(got, want, n * Hq * hd), 1e-10);
    float *kv_got = from_gpu(dkv, page_floats * cache_pages);
    expect("kv_write into scattered pages", nmse(kv_got, kv, page_floats * cache_pages), 0);
    gpu.free(&gpu, dkv), gpu.free(&gpu, dq), gpu.free(&gpu, dk), gpu.free(&gpu, dv), gpu.free(&gpu, dout);
    free(pages), free(kv), free(q), free(k), free(v), free(want), free(got), free(kv_got);
}

static void test_gdn(void) {
    enum { C = 100, K = 4, T = 7 };
    float *x = randoms(T * C, -2, 2), *cw = randoms(C * K, -1, 1), *tail = randoms((K - 1) * C, -2, 2), *want = malloc(4 * T * C);
    float *dx = to_gpu(x, 4 * T * C), *dcw = to_gpu(cw, 4 * C * K), *dtail = to_gpu(tail, 4 * (K - 1) * C), *dy = to_gpu(NULL, 4 * T * C);
    gpu.conv_silu(&gpu, dy, dx, 2, C, dcw, K, dtail); /* two calls: the tail carries over */
    gpu.conv_silu(&gpu, dy + 2 * C, dx + 2 * C, T - 2, C, dcw, K, dtail);
    cpu.conv_silu(&cpu, want, x, 2, C, cw, K, tail);
    cpu.conv_silu(&cpu, want + 2 * C, x + 2 * C, T - 2, C, cw, K, tail);
    float *got = from_gpu(dy, T * C), *got_tail = from_gpu(dtail, (K - 1) * C);
    expect("conv_silu 100 channels, K=4, 2 + 5 rows", nmse(got, want, T * C), 1e-12);
    expect("conv_silu tail", nmse(got_tail, tail, (K - 1) * C), 0);
    gpu.free(&gpu, dx), gpu.free(&gpu, dcw), gpu.free(&gpu, dtail), gpu.free(&gpu, dy);
    free(x), free(cw), free(tail), free(want), free(got), free(got_tail);

    enum { Hk = 2, Hv = 6, DK = 32, DV = 16, N = 20 };
    int64_t W = 2 * Hk * DK + Hv * DV, state = Hv * DK * DV;
    float *qkv = randoms(N * W, -1, 1), *a = randoms(N * Hv, -6, 3), *b = randoms(N * Hv, -4, 4);
    float *A = randoms(Hv, -8, -0.01f), *dt = randoms(Hv, -1, 1), *S = randoms(state, -0.1f, 0.1f), *out = malloc(4 * N * Hv * DV);
    float *dqkv = to_gpu(qkv, 4 * (uint64_t)(N * W)), *da = to_gpu(a, 4 * N * Hv), *db = to_gpu(b, 4 * N * Hv);
    float *dA = to_gpu(A, 4 * Hv), *ddt = to_gpu(dt, 4 * Hv), *dS = to_gpu(S, 4 * (uint64_t)state), *dout = to_gpu(NULL, 4 * N * Hv * DV);
    sp_gdn_shape hs = {Hk, Hv, DK, DV, A, dt}, ds = {Hk, Hv, DK, DV, dA, ddt};
    gpu.gdn_recurrent(&gpu, dout, dqkv, da, db, &ds, dS, N);
    cpu.gdn_recurrent(&cpu, out, qkv, a, b, &hs, S, N);
    float *g2 = from_gpu(dout, N * Hv * DV), *gS = from_gpu(dS, state);
    expect("gdn 2/6 heads, dk 32 dv 16, 20 tokens", nmse(g2, out, N * Hv * DV), 1e-10);
    expect("gdn state", nmse(gS, S, state), 1e-9);
    gpu.free(&gpu, dqkv), gpu.free(&gpu, da), gpu.free(&gpu, db), gpu.free(&gpu, dA), gpu.free(&gpu, ddt), gpu.free(&gpu, dS);
    gpu.free(&gpu, dout);
    free(qkv), free(a), free(b), free(A), free(dt), free(S), free(out), free(g2), free(gS);
}

/* Routing on the device, then the grouped experts: moe_plan writes the threadgroup counts that the gate/up and down
 * dispatches read indirectly. */

/* Barriers come only between dispatches that touch the same memory: two projections of one input run together,
 * the op reading both of their outputs waits for them. */
static void test_barriers(void) {
    enum { R = 64, C = 64 };
    weights a = make_weights(SP_MAT_F32, R, C), b = make_weights(SP_MAT_F32, R, C);
    float *x = randoms(C, -1, 1);
    float *dx = to_gpu(x, 4 * C), *ya = to_gpu(NULL, 4 * R), *yb = to_gpu(NULL, 4 * R);
    sp_gpu *g = sp_gpu_of(&gpu);
    sp_gpu_sync(g);
    uint64_t b0 = g->n_barriers;
    gpu.matmul(&gpu, ya, &a.dev, dx, 1);
    gpu.matmul(&gpu, yb, &b.dev, dx, 1);
    uint64_t b1 = g->n_barriers;
    gpu.add(&gpu, ya, yb, R);
    uint64_t b2 = g->n_barriers;
    gpu.add(&gpu, ya, yb, R);
    uint64_t b3 = g->n_barriers;
    CHECK(b1 == b0 && b2 == b1 + 1 && b3 == b2 + 1 && !gpu_status,
          "barriers: none between independent projections, one before each dependent add (%llu, %llu, %llu)",
          (unsigned long long)(b1 - b0), (unsigned long long)(b2 - b1), (unsigned long long)(b3 - b2));
    float *got = from_gpu(ya, R), *wa = malloc(4 * R), *wb = malloc(4 * R);
    cpu.matmul(&cpu, wa, &a.host, x, 1);
    cpu.matmul(&cpu, wb, &b.host, x, 1);
    for (int i = 0; i < R; i++) wa[i] += 2 * wb[i];
    expect("projections, then the adds that read them", nmse(got, wa, R), 1e-10);
    gpu.free(&gpu, dx), gpu.free(&gpu, ya), gpu.free(&gpu, yb);
    free(x), free(got), free(wa), free(wb), free(a.bytes), free(b.bytes);
}

int main(int argc, char **argv) {
    bool probe = argc > 1 && !strcmp(argv[1], "--probe"); /* only say whether the backend comes up */
    if (sp_threadpool_create(0, &pool)) return 1;
    sp_cpu_backend_init(&cpu, pool, sp_threadpool_size(pool), &cpu_status);
    splash_status st = sp_metal_backend_create(&gpu, pool, sp_threadpool_size(pool), &gpu_status);
    if (st) {
        printf("NOT OK  no device for the Metal host: %s\n", splash_last_error());
        return 1;
    }
    printf("device: %s\n", sp_metal_backend_info(&gpu)->name);
    if (probe) {
        sp_metal_backend_destroy(&gpu);
        sp_threadpool_free(pool);
        return 0;
    }
    /* every weight type at an odd shape (rows needing padding), GEMV for 1 and 3 rows, both GEMM tiles */
    for (int t = 0; t <= SP_MAT_Q4; t++) test_matmul((sp_mtype)t, 37, 72, 1); /* the types the kernels read */
    for (int t = SP_MAT_MLX4; t <= SP_MAT_MLX8; t++) test_matmul((sp_mtype)t, 37, 128, 1); /* MLX: groups of 64 */
    test_matmul(SP_MAT_BF16, 70, 128, 3);  /* 256-byte rows: no padding */
    test_matmul(SP_MAT_MLX8, 70, 192, 3);
    test_matmul(SP_MAT_Q4, 67, 168, 12);   /* the narrow GEMM tile */
    test_matmul(SP_MAT_MLX4, 67, 256, 12);
    test_matmul(SP_MAT_F32, 67, 168, 21);  /* the square GEMM tile */
    test_matmul(SP_MAT_MLX8, 67, 256, 21);
    /* the GEMM on simdgroup matrices where the device has them (the tiled one elsewhere), every type it takes: tiles
     * of 64 weight rows × 32 x rows, 32 columns a step, cut at every edge — rows, x rows and columns not multiples of
     * the tile, 260 columns ending inside a group of 8 (the per-weight decoder) and an odd number of q4/q8 groups —
     * and a shape of whole tiles */
    for (int t = SP_MAT_BF16; t <= SP_MAT_Q4; t++) test_matmul((sp_mtype)t, 131, 260, 45);
    for (int t = SP_MAT_MLX4; t <= SP_MAT_MLX8; t++) test_matmul((sp_mtype)t, 95, 320, 33);
    test_matmul(SP_MAT_BF16, 128, 256, 64);
    test_matmul(SP_MAT_Q4, 192, 512, 96);
    test_elementwise(7, 100);
    test_clear(7 * 100);
    test_norms_rope_embed();
    test_attention(4, 1, 32, 0, 13, 16);   /* prefill */
    test_attention(4, 2, 32, 37, 1, 16);   /* decode */
    test_attention(4, 2, 32, 300, 1, 4);   /* decode, keys split over threadgroups */
    test_attention(4, 1, 32, 20, 4, 16);   /* verify block */
    test_gdn();
    /* I: whole groups of 64, as MLX down projections need */
    test_moe(SP_MAT_F32, 8, 3, 128, 64, 1);
    test_moe(SP_MAT_Q8, 8, 3, 128, 64, 9);
    test_moe(SP_MAT_MLX4, 8, 3, 128, 64, 5);
    test_sample(1000);
    test_barriers();
    sp_gpu *g = sp_gpu_of(&gpu);
    printf("%llu dispatches, %llu barriers, %llu command buffers, %d pipelines\n", (unsigned long long)g->n_commands,
           (unsigned long long)g->n_barriers, (unsigned long long)g->n_submits, g->n_pipelines);
    sp_metal_backend_destroy(&gpu);
    sp_threadpool_free(pool);
    return check_done("metal_host_test");
}
