/* cpu_ops_lab.c — lab harness for the CPU ops outside matmul, on the Qwen3.8-27B shapes (GDN 16 key / 48 value heads
 * of 128; vocabulary 248,320):
 *
 *   build/tests/cpu_ops_lab [T...]     default T = 1 64 256
 *
 * 1. one GDN token of one head: the scalar kernel vs AVX2 and AVX-512 (when the CPU has them), max difference;
 * 2. GDN prefill of T tokens through all 48 heads: token loop (the path the arch file uses) vs the chunked form,
 *    µs per token and the max difference of their outputs, best of 3 runs each;
 * 3. sampling one 248,320-logit row (one thread): greedy, temperature + top_p, and the recommended Qwen settings
 *    (T 1, top_k 20, top_p 0.95, presence 1.5), wall and CPU ms, best of 20.
 * Every figure is also given over CPU time, since the development machine is shared. */
#include "backends/backend.h"
#include "backends/cpu/ops.h"
#include "core/threadpool.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static double cpu_now(void) {
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static float *randoms(int64_t n, float lo, float hi, uint64_t *s) {
    float *x = malloc(sizeof(float) * (size_t)n);
    for (int64_t i = 0; i < n; i++) {
        *s = *s * 6364136223846793005ull + 1442695040888963407ull;
        x[i] = lo + (hi - lo) * (float)((*s >> 40) * 0x1.0p-24);
    }
    return x;
}

int main(int argc, char **argv) {
    enum { Hk = 16, Hv = 48, D = 128 };
    sp_threadpool *pool;
    if (sp_threadpool_create(0, &pool)) return 1;
    splash_status status = SPLASH_OK;
    sp_backend be;
    sp_cpu_backend_init(&be, pool, sp_threadpool_size(pool), &status);
    uint64_t seed = 1;

    /* 1. one head, one token, 2000 times */
    float *S1 = randoms(D * D, -0.1f, 0.1f, &seed), *S2 = malloc(sizeof(float) * D * D), o1[D], o2[D];
    float *q = randoms(D, -0.1f, 0.1f, &seed), *k = randoms(D, -0.1f, 0.1f, &seed), *v = randoms(D, -1, 1, &seed);
    memcpy(S2, S1, sizeof(float) * D * D);
    double t0 = cpu_now();
    for (int r = 0; r < 2000; r++) sp_gdn_token_scalar(S1, q, k, v, 0.99f, 0.5f, o1, D, D);
    double scalar = (cpu_now() - t0) / 2000;
    printf("one head, one token (128×128 state), cpu time: scalar %.2f µs", scalar * 1e6);
#if defined(__x86_64__)
    if (sp_threadpool_cpu(pool)->avx2 && sp_threadpool_cpu(pool)->fma) {
        t0 = cpu_now();
        for (int r = 0; r < 2000; r++) sp_gdn_token_avx2(S2, q, k, v, 0.99f, 0.5f, o2, D, D);
        double avx2 = (cpu_now() - t0) / 2000, md = 0;
        for (int j = 0; j < D; j++) md = fmax(md, fabs(o1[j] - o2[j]));
        printf(", avx2 %.2f µs (%.1f×), max |Δo| %.2g", avx2 * 1e6, scalar / avx2, md);
    }
    if (sp_cpu_avx512(sp_threadpool_cpu(pool))) {
        t0 = cpu_now();
        for (int r = 0; r < 2000; r++) sp_gdn_token_avx512(S2, q, k, v, 0.99f, 0.5f, o2, D, D);
        printf(", avx512 %.2f µs", (cpu_now() - t0) / 2000 * 1e6);
    }
#endif
    printf("\n");

    /* 2. prefill through 48 heads */
    int64_t W = 2 * Hk * D + Hv * D;
    sp_gdn_shape shape = {Hk, Hv, D, D, randoms(Hv, -8, -0.05f, &seed), randoms(Hv, -2, 0.5f, &seed)};
    int n_sizes = argc > 1 ? argc - 1 : 3;
    for (int si = 0; si < n_sizes; si++) {
        int64_t T = argc > 1 ? atoll(argv[si + 1]) : (int64_t[]){1, 64, 256}[si];
        float *qkv = randoms(T * W, -1, 1, &seed), *a = randoms(T * Hv, -6, 3, &seed), *b = randoms(T * Hv, -4, 4, &seed);
        float *Sa = calloc((size_t)Hv * D * D, sizeof(float)), *Sb = calloc((size_t)Hv * D * D, sizeof(float));
        float *oa = malloc(sizeof(float) * (size_t)(T * Hv * D)), *ob = malloc(sizeof(float) * (size_t)(T * Hv * D));
        double best_r = 1e9, best_c = 1e9, cpu_r = 1e9, cpu_c = 1e9, md = 0, threads = sp_threadpool_size(pool);
        for (int rep = 0; rep < 3; rep++) {
            memset(Sa, 0, sizeof(float) * Hv * D * D);
            memset(Sb, 0, sizeof(float) * Hv * D * D);
            t0 = now();
            double c0 = cpu_now();
            be.gdn_recurrent(&be, oa, qkv, a, b, &shape, Sa, T);
            double t1 = now(), c1 = cpu_now();
            sp_cpu_gdn_chunked(&be, ob, qkv, a, b, &shape, Sb, T);
            double t2 = now(), c2 = cpu_now();
            best_r = fmin(best_r, t1 - t0), best_c = fmin(best_c, t2 - t1);
            cpu_r = fmin(cpu_r, (c1 - c0) / threads), cpu_c = fmin(cpu_c, (c2 - c1) / threads);
        }
        for (int64_t i = 0; i < T * Hv * D; i++) md = fmax(md, fabs(oa[i] - ob[i]));
        printf("T = %4lld, %d threads: token loop %8.1f µs/token (cpu %7.1f), chunked %8.1f µs/token (cpu %7.1f), "
               "max |Δ| %.2g\n",
               (long long)T, sp_threadpool_size(pool), best_r / (double)T * 1e6, cpu_r / (double)T * 1e6,
               best_c / (double)T * 1e6, cpu_c / (double)T * 1e6, md);
        free(qkv), free(a), free(b), free(Sa), free(Sb), free(oa), free(ob);
    }

    /* 3. sampling */
    int32_t V = 248320;
    float *logits = randoms(V, -10, 10, &seed);
    for (int32_t t = 0; t < V; t += 4099) logits[t] += 8; /* a few likely tokens, as a language model has */
    sp_threadpool *one;
    if (sp_threadpool_create(1, &one)) return 1;
    sp_backend be1;
    sp_cpu_backend_init(&be1, one, 1, &status);
    uint64_t per = sp_sample_scratch_bytes(V);
    void *scratch = malloc(per);
    int32_t pen[256], top_ids[5];
    float top_lp[5];
    for (int i = 0; i < 256; i++) pen[i] = i * 97;
    struct { const char *name; splash_sampling s; } cases[] = {
        {"greedy, top 5 logprobs", {.top_p = 1, .repetition_penalty = 1}},
        {"T 0.7, top_p 0.9", {.temperature = 0.7f, .top_p = 0.9f, .repetition_penalty = 1, .seed = 1}},
        {"T 1, top_k 20, top_p 0.95, presence 1.5", {.temperature = 1.0f, .top_p = 0.95f, .top_k = 20, .presence_penalty = 1.5f, .repetition_penalty = 1, .seed = 2}},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        double best = 1e9, best_cpu = 1e9;
        for (int r = 0; r < 20; r++) {
            sp_sample_job j = {logits, &cases[c].s, pen, 256, NULL, (uint64_t)r, 5, top_ids, top_lp, 0, 0, NULL, 0, NULL, 0, 0, 0};
            double w0 = now(), c0 = cpu_now();
            be1.sample(&be1, &j, 1, V, scratch, per);
            best = fmin(best, now() - w0), best_cpu = fmin(best_cpu, cpu_now() - c0);
        }
        printf("sample, vocabulary %d, %-40s %6.2f ms (cpu %.2f ms)\n", V, cases[c].name, best * 1e3, best_cpu * 1e3);
    }
    free(logits), free(scratch);
    sp_threadpool_free(one);
    sp_threadpool_free(pool);
    return 0;
}
