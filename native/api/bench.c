/* bench.c — measurements that benchmark programs (`splash bench …`) take in the same run as their figures. */
#include "core/error.h"
#include "core/threadpool.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

static double seconds(clockid_t clock) {
    struct timespec t;
    clock_gettime(clock, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

typedef struct stream_job {
    const uint64_t *buf;
    uint64_t sums[256];
} stream_job;

/* One item is one 64-byte line; four independent chains so the adds vectorize and loads stay in flight. The same
 * method as native-core's lab harness (native/tools/matmul_lab.c), so the two ratios are comparable. */
static void stream_read(void *ctx, int64_t begin, int64_t end, int thread) {
    stream_job *j = ctx;
    const uint64_t *p = j->buf;
    uint64_t a = 0, b = 0, c = 0, d = 0;
    for (int64_t i = begin * 8; i < end * 8; i += 8) {
        a += p[i] + p[i + 4];
        b += p[i + 1] + p[i + 5];
        c += p[i + 2] + p[i + 6];
        d += p[i + 3] + p[i + 7];
    }
    j->sums[thread & 255] += a ^ b ^ c ^ d;
}

splash_status splash_bench_memory_bandwidth(int32_t n_threads, uint64_t bytes, int32_t reps, double *gbs,
                                            double *cpu_gbs) {
    if (!gbs || !cpu_gbs || bytes < 64 || reps < 1)
        return SP_FAIL(SPLASH_ERR_INVALID_ARGUMENT, "splash_bench_memory_bandwidth: bytes ≥ 64, reps ≥ 1, outputs not NULL");
    sp_threadpool *pool;
    splash_status st = sp_threadpool_create(n_threads, &pool);
    if (st) return st;
    bytes &= ~(uint64_t)63;
    stream_job *j = calloc(1, sizeof *j);
    uint64_t *buf = aligned_alloc(64, (size_t)bytes);
    if (!j || !buf) {
        free(j), free(buf), sp_threadpool_free(pool);
        return SP_FAIL(SPLASH_ERR_OUT_OF_MEMORY, "out of memory for %llu bytes", (unsigned long long)bytes);
    }
    memset(buf, 1, (size_t)bytes);
    j->buf = buf;
    double best = 0, best_cpu = 0, threads = (double)sp_threadpool_size(pool);
    for (int32_t r = 0; r < reps; r++) {
        double t0 = seconds(CLOCK_MONOTONIC), c0 = seconds(CLOCK_PROCESS_CPUTIME_ID);
        sp_parallel_for(pool, (int64_t)(bytes / 64), stream_read, j);
        double g = (double)bytes / (seconds(CLOCK_MONOTONIC) - t0) / 1e9;
        double gc = (double)bytes / ((seconds(CLOCK_PROCESS_CPUTIME_ID) - c0) / threads) / 1e9;
        best = g > best ? g : best;
        best_cpu = gc > best_cpu ? gc : best_cpu;
    }
    *gbs = best;
    *cpu_gbs = best_cpu;
    free(buf), free(j), sp_threadpool_free(pool);
    return SPLASH_OK;
}
