/* backend.c — a GPU backend's op table over its device (gpu.h): shared state up and down, and the bandwidth probe. */
#include "gpu.h"

#include "core/error.h"

#include <stdio.h>
#include <time.h>

splash_status sp_gpu_init(sp_backend *be, sp_gpu *g, sp_threadpool *pool, int n_threads, splash_status *status) {
    g->status = status;
    g->fresh = g->submission_barrier;
    g->attention_workgroups = g->measured ? SP_GPU_MEASURED_ATTENTION_WORKGROUPS : SP_GPU_DEFAULT_ATTENTION_WORKGROUPS;
    g->int_dot_min_bytes = 64ull << 20;
    const char *gemv = g->no_int_dot ? "float GEMV" : "int8-dot q4/q8 GEMV";
    if (g->no_coopmat)
        snprintf(g->description, sizeof g->description, "%s (%s, tiled f32 GEMM, scalar attention; no cooperative matrix: %s)",
                 g->device_name, gemv, g->no_coopmat);
    else
        snprintf(g->description, sizeof g->description, "%s (%s, cooperative-matrix f16 GEMM and attention)", g->device_name, gemv);
    *be = (sp_backend){.name = g->name, .device = g->description, .pool = pool, .n_threads = n_threads, .status = status, .impl = g,
                       .step_tokens = sp_gpu_step_tokens};
    splash_status st = sp_gpu_memory_init(g);
    if (!st) sp_gpu_ops_install(be);
    return st;
}

void sp_gpu_release(sp_gpu *g) {
    if (g->status) sp_gpu_sync(g);
    sp_gpu_pipelines_free(g);
    sp_gpu_memory_free(g);
}

splash_status sp_gpu_finish(const sp_backend *be) { return sp_gpu_sync(sp_gpu_of(be)); }

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

splash_status sp_gpu_read_bandwidth(const sp_backend *be, uint64_t bytes, int32_t passes, int32_t reps, double *gbs) {
    sp_gpu *g = sp_gpu_of(be);
    enum { GROUPS = 8192, WG = 256 };
    bytes &= ~(uint64_t)15;
    void *src = sp_gpu_alloc(be, bytes), *dst = sp_gpu_alloc(be, 4 * GROUPS);
    splash_status st = src && dst ? sp_gpu_sync(g)
                                  : SP_FAIL(SPLASH_ERR_OUT_OF_MEMORY, "%s: %llu bytes for the probe", g->name, (unsigned long long)bytes);
    *gbs = 0;
    for (int32_t r = 0; r < reps && !st; r++) {
        struct {
            uint64_t src, dst;
            uint32_t words, never;
        } p = {sp_gpu_addr(g, src), sp_gpu_addr(g, dst), (uint32_t)(bytes / 16), 0x5eed1e55u};
        sp_gpu_range rr = {p.src, p.src + bytes}, wr = {p.dst, p.dst + 4 * GROUPS};
        double t0 = now();
        for (int32_t i = 0; i < passes; i++)
            sp_gpu_dispatch(g, "stream", SP_GPU_STREAM, (uint32_t[4]){WG, 0, 0, 0}, &p, sizeof p, (uint32_t[3]){GROUPS, 1, 1},
                            &rr, 1, &wr, 1, NULL);
        st = sp_gpu_sync(g);
        double gb = (double)bytes * passes / (now() - t0) / 1e9;
        if (gb > *gbs) *gbs = gb;
    }
    sp_gpu_free(be, src);
    sp_gpu_free(be, dst);
    return st;
}
