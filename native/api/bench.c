/* bench.c — measurements that benchmark programs (`splash bench …`) take in the same run as their figures. */
#include "core/bandwidth.h"
#include "core/error.h"

splash_status splash_bench_memory_bandwidth(int32_t n_threads, uint64_t bytes, int32_t reps, double *gbs,
                                            double *cpu_gbs) {
    if (!gbs || !cpu_gbs || bytes < 64 || reps < 1)
        return SP_FAIL(SPLASH_ERR_INVALID_ARGUMENT, "splash_bench_memory_bandwidth: bytes ≥ 64, reps ≥ 1, outputs not NULL");
    sp_threadpool *pool;
    splash_status st = sp_threadpool_create(n_threads, &pool);
    if (st) return st;
    sp_bandwidth bw;
    st = sp_memory_bandwidth(pool, bytes, reps, &bw);
    sp_threadpool_free(pool);
    if (!st) *gbs = bw.gbs, *cpu_gbs = bw.cpu_gbs;
    return st;
}
