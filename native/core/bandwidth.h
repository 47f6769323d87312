/* bandwidth.h — this machine's memory read bandwidth, measured one way for every figure compared with it (the matmul
 * lab's GEMV fractions, `splash bench decode`'s fraction of bandwidth, anything else that asks).
 *
 * Method: all of the pool's threads read a `bytes` buffer (1 GiB is the figure's size: far past any cache), each its
 * share as four concurrent streams with 256-bit loads where AVX2 exists (one sequential stream per core reaches only
 * about half of what the memory system gives: the GEMV reads four rows at a time the same way); best of `reps` passes.
 * Two figures: over wall time, and over the process's CPU time ÷ threads — what the threads get while they hold the
 * cores, the honest figure on a machine shared with other work. */
#ifndef SP_BANDWIDTH_H
#define SP_BANDWIDTH_H

#include "core/threadpool.h"

typedef struct sp_bandwidth {
    double gbs;     /* GB/s over wall time */
    double cpu_gbs; /* GB/s over CPU time ÷ threads */
} sp_bandwidth;

/* bytes ≥ 64 (rounded down to 64), reps ≥ 1; the buffer is allocated, touched and freed here. */
splash_status sp_memory_bandwidth(sp_threadpool *pool, uint64_t bytes, int reps, sp_bandwidth *out);

/* One thread's share, lines [begin, end) of 64 bytes, as four streams (bandwidth_avx2.c); returns a checksum. */
uint64_t sp_stream_read_avx2(const uint64_t *p, int64_t begin, int64_t end);

#endif
