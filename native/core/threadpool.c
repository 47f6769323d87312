#include "threadpool.h"

#include "error.h"

#include <assert.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#if defined(__x86_64__)
#include <immintrin.h>
#define cpu_relax() _mm_pause()
#elif defined(__aarch64__)
#define cpu_relax() __asm__ __volatile__("yield")
#else
#define cpu_relax() ((void)0)
#endif

typedef struct worker {
    sp_threadpool *pool;
    int index;
    pthread_t thread;
} worker;

struct sp_threadpool {
    int n; /* threads including the caller */
    sp_cpu cpu;
    worker *workers; /* n - 1 */

    /* The current job: written by the caller before `generation` is bumped (release), read by workers after they
     * see the new generation (acquire). */
    sp_parallel_fn fn;
    void *ctx;
    int64_t items;
    _Atomic uint64_t generation;
    _Atomic int pending;  /* workers that have not finished the current job */
    _Atomic int sleeping; /* workers blocked (or about to block) on `wake` */
    _Atomic bool stop;
    _Atomic bool busy;    /* a job is in flight: catches reentrant or concurrent use in debug builds */
    pthread_mutex_t mu;
    pthread_cond_t wake;
};

static uint64_t now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

static void run_range(sp_threadpool *p, int t) {
    int64_t begin, end;
    sp_parallel_range(p->items, t, p->n, &begin, &end);
    if (begin < end) p->fn(p->ctx, begin, end, t);
}

/* Waits for a generation other than `seen`: spins for SP_THREADPOOL_SPIN_US, then blocks. */
static uint64_t wait_job(sp_threadpool *p, uint64_t seen) {
    uint64_t g, start = 0;
    for (unsigned i = 0;; i++) {
        if ((g = atomic_load_explicit(&p->generation, memory_order_acquire)) != seen) return g;
        if (atomic_load_explicit(&p->stop, memory_order_relaxed)) return seen;
        cpu_relax();
        if ((i & 63) == 63) {
            uint64_t t = now_ns();
            if (!start) start = t;
            else if (t - start > SP_THREADPOOL_SPIN_US * 1000ull) break;
            /* On a loaded machine a spinning worker would hold a core that the caller or another worker needs for
             * the current job; yielding costs a fraction of a microsecond when nobody else is runnable. */
            sched_yield();
        }
    }
    pthread_mutex_lock(&p->mu);
    /* sleeping++ before re-reading the generation, both seq_cst: a caller that bumps the generation after our read
     * sees sleeping > 0 and broadcasts under the mutex, which it can only take once we are waiting. */
    atomic_fetch_add(&p->sleeping, 1);
    while ((g = atomic_load(&p->generation)) == seen && !atomic_load(&p->stop)) pthread_cond_wait(&p->wake, &p->mu);
    atomic_fetch_sub(&p->sleeping, 1);
    pthread_mutex_unlock(&p->mu);
    return g;
}

static void *worker_main(void *arg) {
    worker *w = arg;
    sp_threadpool *p = w->pool;
    uint64_t seen = 0;
    for (;;) {
        seen = wait_job(p, seen);
        if (atomic_load_explicit(&p->stop, memory_order_acquire)) return NULL;
        run_range(p, w->index);
        atomic_fetch_sub_explicit(&p->pending, 1, memory_order_release);
    }
}

splash_status sp_threadpool_create(int n_threads, sp_threadpool **out) {
    *out = NULL;
    sp_threadpool *p = calloc(1, sizeof *p);
    if (!p) return SP_FAIL(SPLASH_ERR_OUT_OF_MEMORY, "thread pool: out of memory");
    sp_cpu_detect(&p->cpu);
    p->n = n_threads > 0 ? n_threads : p->cpu.n_cores;
    if (p->n > 1024) p->n = 1024;
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->wake, NULL);
    p->workers = calloc((size_t)p->n, sizeof *p->workers);
    if (!p->workers) {
        sp_threadpool_free(p);
        return SP_FAIL(SPLASH_ERR_OUT_OF_MEMORY, "thread pool: out of memory");
    }
    for (int i = 1; i < p->n; i++) {
        worker *w = &p->workers[i - 1];
        w->pool = p;
        w->index = i;
        int e = pthread_create(&w->thread, NULL, worker_main, w);
        if (e != 0) {
            p->n = i; /* the workers started so far are joined by free */
            sp_threadpool_free(p);
            return SP_FAIL(SPLASH_ERR_OUT_OF_MEMORY, "thread pool: cannot start thread %d of %d: %s", i, n_threads,
                           strerror(e));
        }
    }
    *out = p;
    return SPLASH_OK;
}

void sp_threadpool_free(sp_threadpool *p) {
    if (!p) return;
    if (p->workers) {
        pthread_mutex_lock(&p->mu);
        atomic_store(&p->stop, true);
        pthread_cond_broadcast(&p->wake);
        pthread_mutex_unlock(&p->mu);
        for (int i = 1; i < p->n; i++) pthread_join(p->workers[i - 1].thread, NULL);
        free(p->workers);
    }
    pthread_cond_destroy(&p->wake);
    pthread_mutex_destroy(&p->mu);
    free(p);
}

int sp_threadpool_size(const sp_threadpool *p) { return p ? p->n : 1; }
const sp_cpu *sp_threadpool_cpu(const sp_threadpool *p) { return &p->cpu; }

void sp_parallel_for(sp_threadpool *p, int64_t n, sp_parallel_fn fn, void *ctx) {
    if (n <= 0) return;
    if (!p || p->n == 1 || n == 1) {
        fn(ctx, 0, n, 0);
        return;
    }
    bool was_busy = atomic_exchange(&p->busy, true);
    assert(!was_busy && "sp_parallel_for: reentrant or concurrent use of one pool");
    (void)was_busy;
    p->fn = fn;
    p->ctx = ctx;
    p->items = n;
    atomic_store_explicit(&p->pending, p->n - 1, memory_order_relaxed);
    atomic_fetch_add(&p->generation, 1); /* seq_cst: see wait_job */
    if (atomic_load(&p->sleeping) > 0) {
        pthread_mutex_lock(&p->mu);
        pthread_cond_broadcast(&p->wake);
        pthread_mutex_unlock(&p->mu);
    }
    run_range(p, 0);
    /* Workers finish within microseconds of us unless they share our core (a loaded machine): then they can only
     * run once we yield, so spin briefly between yields. */
    for (unsigned i = 1; atomic_load_explicit(&p->pending, memory_order_acquire) > 0; i++) {
        cpu_relax();
        if ((i & 63) == 0) sched_yield();
    }
    atomic_store(&p->busy, false);
}
