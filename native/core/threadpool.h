/* threadpool.h — persistent worker threads for data-parallel loops.
 *
 * Decode issues hundreds of small parallel ops per token, so dispatch must cost microseconds: workers spin for a
 * short while after each job (SP_THREADPOOL_SPIN_US) and only then block on a condition variable.
 *
 * Partitioning is static and deterministic: with T threads, thread t always gets the range
 *   [t·(n/T) + min(t, n%T), (t+1)·(n/T) + min(t+1, n%T))
 * of [0, n), whatever the timing. A function that writes only its own range, or reduces into per-thread slots
 * that the caller then combines in thread order, gives the same bits on every run.
 *
 * The pool also carries the CPU features detected at creation (sp_threadpool_cpu) so kernels can pick an ISA per
 * call without detecting again.
 */
#ifndef SP_THREADPOOL_H
#define SP_THREADPOOL_H

#include "core/cpu.h"
#include "splash.h"

#include <stdint.h>

#define SP_THREADPOOL_SPIN_US 200

typedef struct sp_threadpool sp_threadpool;

/* fn(ctx, begin, end, thread): process items [begin, end) as thread `thread` (0 = the calling thread). */
typedef void (*sp_parallel_fn)(void *ctx, int64_t begin, int64_t end, int thread);

/* Starts a pool of n_threads threads in total, counting the caller (n_threads - 1 workers). n_threads <= 0 means one
 * per online core. */
splash_status sp_threadpool_create(int n_threads, sp_threadpool **out);
/* Stops and joins the workers. NULL is fine. */
void sp_threadpool_free(sp_threadpool *pool);
/* Threads in the pool including the caller; 1 for NULL. */
int sp_threadpool_size(const sp_threadpool *pool);
/* CPU features detected when the pool was made (pool must not be NULL). */
const sp_cpu *sp_threadpool_cpu(const sp_threadpool *pool);

/* Runs fn over [0, n) split as above and returns when every range is done. Thread t's range may be empty; fn is
 * not called for empty ranges. A NULL pool runs fn(ctx, 0, n, 0) on the caller. Not reentrant: fn must not call
 * sp_parallel_for, and one pool serves one calling thread at a time. */
void sp_parallel_for(sp_threadpool *pool, int64_t n, sp_parallel_fn fn, void *ctx);

/* The range of thread t of T over n items, as sp_parallel_for splits it. */
static inline void sp_parallel_range(int64_t n, int t, int T, int64_t *begin, int64_t *end) {
    int64_t q = n / T, r = n % T;
    *begin = t * q + (t < r ? t : r);
    *end = (t + 1) * q + (t + 1 < r ? t + 1 : r);
}

#endif
