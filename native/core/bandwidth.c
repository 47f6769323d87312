/* bandwidth.c — sp_memory_bandwidth (the method is in bandwidth.h). */
#include "bandwidth.h"

#include "core/error.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

static double clock_s(clockid_t id) {
    struct timespec t;
    clock_gettime(id, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

typedef struct stream_job {
    const uint64_t *buf;
    bool avx2;
    uint64_t sums[256]; /* results are kept so the reads are not optimized away */
} stream_job;

/* Lines [begin, end) as four streams, one per quarter of the range (the scalar form of sp_stream_read_avx2). */
static uint64_t stream_read_scalar(const uint64_t *p, int64_t begin, int64_t end) {
    int64_t q = (end - begin) / 4 * 8; /* words per quarter */
    const uint64_t *s0 = p + begin * 8, *s1 = s0 + q, *s2 = s1 + q, *s3 = s2 + q;
    uint64_t a = 0, b = 0, c = 0, d = 0;
    for (int64_t i = 0; i < q; i++) a += s0[i], b += s1[i], c += s2[i], d += s3[i];
    return a ^ b ^ c ^ d;
}

static void stream_read(void *ctx, int64_t begin, int64_t end, int thread) {
    stream_job *j = ctx;
#if defined(__x86_64__)
    if (j->avx2) {
        j->sums[thread & 255] += sp_stream_read_avx2(j->buf, begin, end);
        return;
    }
#endif
    j->sums[thread & 255] += stream_read_scalar(j->buf, begin, end);
}

splash_status sp_memory_bandwidth(sp_threadpool *pool, uint64_t bytes, int reps, sp_bandwidth *out) {
    if (!out || bytes < 64 || reps < 1)
        return SP_FAIL(SPLASH_ERR_INVALID_ARGUMENT, "memory bandwidth: bytes ≥ 64, reps ≥ 1, an output");
    bytes &= ~(uint64_t)63;
    stream_job *j = calloc(1, sizeof *j);
    uint64_t *buf = aligned_alloc(64, (size_t)bytes);
    if (!j || !buf) {
        free(j), free(buf);
        return SP_FAIL(SPLASH_ERR_OUT_OF_MEMORY, "out of memory for %llu bytes", (unsigned long long)bytes);
    }
    memset(buf, 1, (size_t)bytes);
    j->buf = buf;
    j->avx2 = pool && sp_threadpool_cpu(pool)->avx2;
    double wall = 1e30, cpu = 1e30, threads = (double)sp_threadpool_size(pool);
    for (int r = 0; r < reps; r++) {
        double t0 = clock_s(CLOCK_MONOTONIC), c0 = clock_s(CLOCK_PROCESS_CPUTIME_ID);
        sp_parallel_for(pool, (int64_t)(bytes / 64), stream_read, j); /* one item = one 64-byte line */
        double w = clock_s(CLOCK_MONOTONIC) - t0, c = (clock_s(CLOCK_PROCESS_CPUTIME_ID) - c0) / threads;
        wall = w < wall ? w : wall;
        cpu = c < cpu ? c : cpu;
    }
    *out = (sp_bandwidth){(double)bytes / wall / 1e9, (double)bytes / cpu / 1e9};
    free(buf), free(j);
    return SPLASH_OK;
}
