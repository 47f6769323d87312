/* vulkan_dispatch_lab.c — what one dispatch costs on a GPU backend, apart from its work: chains of small commands that each
 * depend on the one before (a barrier between every two), the same commands independent of each other (no barrier),
 * RMSNorms (one row, with the residual add, 16 rows) and a GEMV of a 5120×5120 q4 matrix (16 MB, what a decode step's smaller projections read) chained and independent.
 * The difference between a chain and its independent twin is what a barrier costs; a decode step is ~650 of them.
 *
 *   build/tools/vulkan_dispatch_lab [--n 2000] [--reps 3]
 *
 * gpu-h200.sh runs it under each setting of the environment that SPLASH_GPU_DISPATCH names, to compare them in one run. */
#include "backends/gpu/gpu.h"
#include "backends/vulkan/vulkan.h"
#include "core/error.h"
#include "core/quant.h"
#include "core/threadpool.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

typedef enum { ADD_CHAIN, ADD_FREE, NORM_CHAIN, ADD_NORM_CHAIN, NORM16_CHAIN, GEMV_CHAIN, GEMV_FREE } lab_case;
static const char *CASE_NAMES[] = {"add 64, chained", "add 64, independent", "rmsnorm 5120, chained",
                                   "add_rmsnorm 5120, chained", "rmsnorm 16 x 5120, chained",
                                   "q4 GEMV 5120x5120, chained", "q4 GEMV 5120x5120, independent"};

typedef struct lab {
    sp_backend be;
    float *x, *y, *w;   /* device: 64 rows of 5120 floats each */
    sp_matrix W;
} lab;

/* n commands of one case, recorded and run; returns µs per command (best of reps). */
static double run_case(lab *L, lab_case c, int n, int reps, uint64_t *barriers) {
    const sp_backend *be = &L->be;
    enum { H = 5120 };
    double best = 1e30;
    for (int r = 0; r <= reps; r++) { /* r = 0 warms the clocks up */
        uint64_t b0 = sp_gpu_of(be)->n_barriers;
        double t0 = now();
        for (int i = 0; i < n; i++) {
            switch (c) {
            case ADD_CHAIN: be->add(be, L->x, L->y, 64); break;
            case ADD_FREE: be->add(be, L->x + (i % 64) * H, L->y, 64); break;
            case NORM_CHAIN: be->rmsnorm(be, (i & 1) ? L->x : L->y, (i & 1) ? L->y : L->x, L->w, 1, H, 1e-6f); break;
            case ADD_NORM_CHAIN: be->add_rmsnorm(be, L->y, L->x, L->y + H, L->w, 1, H, 1e-6f); break;
            case NORM16_CHAIN: be->rmsnorm(be, (i & 1) ? L->x : L->y, (i & 1) ? L->y : L->x, L->w, 16, H, 1e-6f); break;
            case GEMV_CHAIN: be->matmul(be, (i & 1) ? L->x : L->y, &L->W, (i & 1) ? L->y : L->x, 1); break;
            case GEMV_FREE: be->matmul(be, L->x + (i % 64) * H, &L->W, L->y, 1); break;
            }
        }
        if (sp_gpu_finish(be)) {
            fprintf(stderr, "vulkan_dispatch_lab: %s\n", splash_last_error());
            exit(1);
        }
        double us = (now() - t0) * 1e6 / n;
        if (r && us < best) best = us;
        *barriers = sp_gpu_of(be)->n_barriers - b0;
    }
    return best;
}

int main(int argc, char **argv) {
    int n = 2000, reps = 3;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--n")) n = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--reps")) reps = atoi(argv[i + 1]);
    }
    sp_threadpool *pool;
    if (sp_threadpool_create(0, &pool)) return 1;
    lab L;
    splash_status st = SPLASH_OK;
    if (sp_vulkan_backend_create(&L.be, pool, sp_threadpool_size(pool), &st, true)) {
        fprintf(stderr, "vulkan_dispatch_lab: %s\n", splash_last_error());
        return 1;
    }
    enum { H = 5120 };
    const sp_backend *be = &L.be;
    float *host = malloc(sizeof(float) * 64 * H);
    for (int i = 0; i < 64 * H; i++) host[i] = (float)((i * 37 % 101) - 50) / 500.0f;
    L.x = be->alloc(be, sizeof(float) * 64 * H);
    L.y = be->alloc(be, sizeof(float) * 64 * H);
    L.w = be->alloc(be, sizeof(float) * H);
    be->write(be, L.x, host, sizeof(float) * 64 * H);
    be->write(be, L.y, host, sizeof(float) * 64 * H);
    be->write(be, L.w, host, sizeof(float) * H);
    int64_t rb = sp_mtype_row_bytes(SP_MAT_Q4, H);
    uint8_t *q = calloc((size_t)(H * rb), 1);
    for (int64_t i = 0; i < H * rb; i++) q[i] = (uint8_t)(i * 2654435761u >> 24) & 0x3f; /* small finite scales */
    L.W = (sp_matrix){SP_MAT_Q4, H, H, be->upload(be, q, H, rb), rb};
    if (*be->status) {
        fprintf(stderr, "vulkan_dispatch_lab: %s\n", splash_last_error());
        return 1;
    }
    printf("vulkan_dispatch_lab: %s, %d commands per case, best of %d\n", sp_vulkan_device_name(be), n, reps);
    printf("  %-32s %10s %9s\n", "case", "us/command", "barriers");
    for (lab_case c = ADD_CHAIN; c <= GEMV_FREE; c++) {
        uint64_t barriers = 0;
        double us = run_case(&L, c, n, reps, &barriers);
        printf("  %-32s %10.2f %9llu\n", CASE_NAMES[c], us, (unsigned long long)barriers);
    }
    free(host), free(q);
    sp_vulkan_backend_destroy(&L.be);
    sp_threadpool_free(pool);
    return 0;
}
