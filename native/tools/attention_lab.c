/* attention_lab.c — lab harness for the attention op (native/backends/cpu/attention*.c).
 *
 *   build/tools/attention_lab [--threads N] [--quick]
 *
 * Forms: "reference" (attention.c: one item per (query row, kv head), plain C) and "tiled" (attention_tile.h: a
 * block of query rows × a kv head per item, which the op runs in sixteen lanes on AVX-512 machines, in eight on
 * AVX2 ones, with the same bits).
 * 1. check: the op against the reference, bit for bit, over every chunking (whole, 1, 7, 64 rows) at head shapes
 *    4/2×64, 24/4×256, 3/1×16, pages of 64 and 16;
 * 2. time the op (best of 2) on the embedded model's heads (4 q / 2 kv × 64: a whole prompt prefilled in 512-row
 *    chunks, as the engine does) and the Qwen3.8-27B's (24 q / 4 kv × 256: one 512-row chunk after 8192 positions,
 *    one decode row after 32768), over an f32, an f16 and an int8 cache (backends/backend.h): wall ms, process CPU
 *    ms (all threads), GFLOP/s over CPU time (2 · (q·k + p·v)
 *    multiply-adds). The reference is not timed: built without FMA flags its fmaf is a library call. The load average
 *    is printed: the machine is shared. */
#include "backends/backend.h"
#include "backends/cpu/ops.h"
#include "core/threadpool.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double clock_s(clockid_t id) {
    struct timespec t;
    clock_gettime(id, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static double load_average(void) {
    double l = -1;
    FILE *f = fopen("/proc/loadavg", "r");
    if (f && fscanf(f, "%lf", &l) != 1) l = -1;
    if (f) fclose(f);
    return l;
}

static uint64_t rng = 7;
static float *randoms(int64_t n, float lo, float hi) {
    float *x = malloc(sizeof(float) * (size_t)n);
    for (int64_t i = 0; i < n; i++) {
        rng = rng * 6364136223846793005ull + 1442695040888963407ull;
        x[i] = lo + (hi - lo) * (float)((rng >> 40) * 0x1.0p-24);
    }
    return x;
}

/* A cache of len positions of one layer (pages of P in order) of KV type `type`, filled with random K and V. */
typedef struct {
    void *mem;
    int32_t *pages;
    sp_kv_view kv;
} lab_cache;

static lab_cache make_cache(const sp_backend *be, int32_t type, int32_t Hkv, int32_t hd, int32_t P, int64_t len) {
    lab_cache c;
    int32_t n_pages = (int32_t)((len + P - 1) / P);
    int64_t stride = sp_kv_layers_bytes(type, 1, Hkv, hd, P);
    c.mem = malloc((size_t)(n_pages * stride));
    c.pages = malloc(sizeof(int32_t) * (size_t)n_pages);
    for (int32_t i = 0; i < n_pages; i++) c.pages[i] = i;
    c.kv = sp_kv_layer_view(c.mem, stride, type, 0, Hkv, hd, P, c.pages);
    float *k = randoms(len * Hkv * hd, -1, 1), *v = randoms(len * Hkv * hd, -1, 1);
    be->kv_write(be, &c.kv, k, v, 0, len, Hkv, hd);
    free(k), free(v);
    return c;
}

static int check(const sp_backend *be) {
    static const int32_t shapes[][6] = {{4, 2, 64, 64, 100, 300}, {24, 4, 256, 16, 33, 80}, {3, 1, 16, 64, 5, 130}};
    int bad = 0;
    for (int s = 0; s < 3; s++) {
        int32_t Hq = shapes[s][0], Hkv = shapes[s][1], hd = shapes[s][2], P = shapes[s][3], past = shapes[s][4], n = shapes[s][5];
        lab_cache c = make_cache(be, SPLASH_KV_F32, Hkv, hd, P, past + n);
        int64_t rows = (int64_t)n * Hq * hd;
        float *q = randoms(rows, -2, 2), *ref = malloc(sizeof(float) * (size_t)rows), *out = malloc(sizeof(float) * (size_t)rows);
        float scale = 1.0f / sqrtf((float)hd);
        sp_cpu_attention_ref(be, &(sp_attn_args){ref, q, &c.kv, n, past, Hq, Hkv, hd, scale});
        int32_t steps[] = {n, 1, 7, 64};
        for (int t = 0; t < 4; t++) {
            for (int32_t i0 = 0; i0 < n; i0 += steps[t]) {
                int32_t m = n - i0 < steps[t] ? n - i0 : steps[t];
                be->attention(be, out + (int64_t)i0 * Hq * hd, q + (int64_t)i0 * Hq * hd, NULL,
                              &(sp_attn_seq){c.kv, 0, past + i0, (int32_t)m}, 1, Hq, Hkv, hd, scale);
            }
            int same = !memcmp(out, ref, sizeof(float) * (size_t)rows);
            printf("check %2d/%d×%-3d pages %2d, n_past %3d, %3d rows in calls of %3d: %s\n", Hq, Hkv, hd, P, past, n,
                   steps[t], same ? "bit-identical to the reference" : "DIFFERS");
            bad |= !same;
        }
        free(q), free(ref), free(out), free(c.mem), free(c.pages);
    }
    return bad;
}

typedef struct {
    float *out, *q;
    const sp_kv_view *kv;
    int32_t past, n, chunk, Hq, Hkv, hd;
} job;

/* Rows [0, n) at positions past.. in calls of `chunk` rows, through the op. */
static void run(const sp_backend *be, const job *j) {
    float scale = 1.0f / sqrtf((float)j->hd);
    for (int32_t i0 = 0; i0 < j->n; i0 += j->chunk) {
        int32_t m = j->n - i0 < j->chunk ? j->n - i0 : j->chunk;
        int64_t off = (int64_t)i0 * j->Hq * j->hd;
        be->attention(be, j->out + off, j->q + off, NULL, &(sp_attn_seq){*j->kv, 0, j->past + i0, (int32_t)m}, 1, j->Hq, j->Hkv, j->hd, scale);
    }
}

/* Best of `reps` runs; prints one line. */
static void measure(const sp_backend *be, const char *what, int32_t type, int32_t Hq, int32_t Hkv, int32_t hd,
                    int32_t past, int32_t n, int32_t chunk, int reps) {
    lab_cache c = make_cache(be, type, Hkv, hd, 64, past + n);
    int64_t rows = (int64_t)n * Hq * hd;
    job j = {malloc(sizeof(float) * (size_t)rows), randoms(rows, -2, 2), &c.kv, past, n, chunk, Hq, Hkv, hd};
    double wall = 1e30, cpu = 1e30, l0 = load_average();
    for (int r = 0; r < reps; r++) {
        double t0 = clock_s(CLOCK_MONOTONIC), c0 = clock_s(CLOCK_PROCESS_CPUTIME_ID);
        run(be, &j);
        double w = clock_s(CLOCK_MONOTONIC) - t0, u = clock_s(CLOCK_PROCESS_CPUTIME_ID) - c0;
        wall = w < wall ? w : wall;
        cpu = u < cpu ? u : cpu;
    }
    double pairs = 0; /* (query, key) pairs per query head */
    for (int64_t i = 0; i < n; i++) pairs += (double)(past + i + 1);
    double flop = 4.0 * pairs * Hq * hd;
    printf("%-40s %9.2f ms wall %9.2f ms cpu %6.1f GFLOP/s per core-second (load %.1f)\n", what, wall * 1e3, cpu * 1e3,
           flop / cpu * 1e-9, (l0 + load_average()) / 2);
    free(j.out), free(j.q), free(c.mem), free(c.pages);
}

int main(int argc, char **argv) {
    int threads = 0;
    bool quick = false;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--threads") && i + 1 < argc) threads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--quick")) quick = true;
        else {
            fprintf(stderr, "usage: attention_lab [--threads N] [--quick]\n");
            return 2;
        }
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    sp_threadpool *pool;
    if (sp_threadpool_create(threads, &pool)) return 1;
    splash_status status = SPLASH_OK;
    sp_backend be;
    sp_cpu_backend_init(&be, pool, sp_threadpool_size(pool), &status);
    const sp_cpu *cpu = sp_threadpool_cpu(pool);
    printf("attention lab: %d threads, tiled form %s\n", sp_threadpool_size(pool),
           sp_cpu_avx512(cpu) ? "AVX-512 (AVX2 where head_dim % 16 != 0)"
           : sp_cpu_avx2(cpu) ? "AVX2+FMA"
                              : "not available on this CPU (the op runs the reference)");
    int bad = check(&be);
    int reps = quick ? 1 : 2;
    int32_t T = quick ? 2048 : 8192;
    static const char *const names[] = {"f32", "f16", "int8"};
    for (int32_t type = SPLASH_KV_F32; type <= SPLASH_KV_INT8; type++) {
        char what[80];
        snprintf(what, sizeof what, "%s: 4/2×64 prompt of %d (512-row chunks)", names[type], T);
        measure(&be, what, type, 4, 2, 64, 0, T, 512, reps);
        snprintf(what, sizeof what, "%s: 24/4×256 512 rows after 8192", names[type]);
        measure(&be, what, type, 24, 4, 256, 8192, 512, 512, reps);
        snprintf(what, sizeof what, "%s: 24/4×256 decode row after 32768", names[type]);
        if (!quick) measure(&be, what, type, 24, 4, 256, 32768, 1, 1, 5);
    }
    sp_threadpool_free(pool);
    return bad;
}
