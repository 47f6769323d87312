/* matmul_lab — the lab harness for the CPU matmul kernels (STYLE.md §2).
 *
 * Versions: one kernel set per ISA (matmul.h): scalar (reference), avx2, avxvnni, avx512 (x86-64), neon (arm64 +
 * dotprod), each with f32, bf16, f16, q8 and q4 weights. This program
 *   1. checks every available ISA × type against the scalar reference at odd shapes and at the real shapes of
 *      Qwen3.8-27B (hidden 5120; GDN qkv 10240, z 6144; MLP 17408; the 248320-row head at small cols);
 *   2. measures this machine's memory read bandwidth (core/bandwidth.h: all threads streaming over 1 GiB, best of 5);
 *   3. measures each GEMV (n = 1, best ISA) over 17408 x 5120 matrices rotated through >= 512 MiB, so nothing is
 *      served from cache, as GB/s of weights read and as a fraction of the bandwidth measured right before it;
 *   4. measures GEMM throughput for n = 1, 4, 16, 64 on one 17408 x 5120 matrix: time per call, GFLOP/s, and
 *      n·t(1)/t(n), the speedup of n sequences over one at a time (n = 1 and n timed alternately);
 *   5. measures quantizing a bf16 tensor at load (q8, q4): the scalar reference vs sp_matrix_from_tensor.
 * --shape ROWS COLS N,N,... instead measures every ISA × type on one matrix of that shape (small ones stay in cache:
 * the kernels' own rate, as prefill of a small model sees it): best CPU time per call of many, GMAC/s and GB/s of
 * weights; with --cold, on copies rotated through >= 256 MiB, so the weights come from DRAM as decode reads them;
 * --isa NAME measures that ISA's kernels only. --peak measures one core's int8 and f32 multiply-add peak (AVX-512).
 * Every time is the best single call (or pass) of several, so a shared machine's interruptions drop out. Each figure
 * is also given from CPU time (process CPU seconds / threads, "cpu" columns): what the kernels achieve while they
 * hold the cores, which is the honest figure on a machine shared with other work (the load average and the CPU
 * share this process got are printed too). It prints tables and, last, one JSON line with every figure.
 *
 *   bun scripts/build/native.ts && build/tools/matmul_lab [--threads N] [--check-only | --no-check | --quantize-only] [--quick]
 *   build/tools/matmul_lab --threads 1 --shape 1024 256 1,4,64,512
 *   --quick: smaller working sets and fewer repetitions (a smoke run, not a measurement).
 * Record figures in BENCHMARKS.md with the exact command.
 */
#include "backends/cpu/matmul.h"
#include "core/bandwidth.h"
#include "core/quant.h"
#include "core/threadpool.h"

#include <math.h>
#include <stdbool.h>
#if defined(__x86_64__)
#include <immintrin.h>
#endif
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static uint64_t rng = 1;
static uint64_t next_u64(void) {
    uint64_t z = (rng += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
/* Roughly Gaussian (sum of four uniforms, unit variance): cheap enough for 100M weights. */
static float gauss(void) {
    uint64_t r = next_u64();
    float s = 0;
    for (int i = 0; i < 4; i++) s += (float)((r >> (16 * i)) & 0xffff) * (1.0f / 65536);
    return (s - 2.0f) * 1.7320508f;
}

static void *xalloc(size_t n) {
    void *p = aligned_alloc(64, (n + 63) & ~(size_t)63);
    if (!p) {
        fprintf(stderr, "matmul_lab: cannot allocate %zu bytes\n", n);
        exit(2);
    }
    return p;
}

static const sp_mtype types[] = {SP_MAT_F32, SP_MAT_BF16, SP_MAT_F16, SP_MAT_Q8, SP_MAT_Q4};
enum { N_TYPES = 5 };

/* A rows x cols matrix of type t from Gaussian weights (quantized through the real quantizer). */
static sp_matrix make_matrix(sp_threadpool *pool, sp_mtype t, int64_t rows, int64_t cols) {
    float *w = xalloc((size_t)(rows * cols) * 4);
    for (int64_t i = 0; i < rows * cols; i++) w[i] = gauss() * 0.02f;
    sp_tensor tensor = {.name = "lab", .dtype = SP_DTYPE_F32, .ndim = 2, .shape = {rows, cols}, .data = w,
                        .nbytes = (uint64_t)(rows * cols) * 4, .file = "lab"};
    sp_matrix m;
    void *owned = NULL;
    if (t == SP_MAT_Q8 || t == SP_MAT_Q4) {
        if (sp_matrix_from_tensor(pool, &tensor, t == SP_MAT_Q8 ? SP_QUANT_Q8 : SP_QUANT_Q4, &m, &owned) != SPLASH_OK) exit(2);
        free(w);
        return m;
    }
    m = (sp_matrix){t, rows, cols, NULL, sp_mtype_row_bytes(t, cols)};
    uint8_t *d = xalloc((size_t)(rows * m.row_bytes));
    for (int64_t i = 0; i < rows * cols; i++) {
        if (t == SP_MAT_F32) ((float *)d)[i] = w[i];
        else if (t == SP_MAT_BF16) ((uint16_t *)d)[i] = sp_f32_to_bf16(w[i]);
        else ((uint16_t *)d)[i] = sp_f32_to_f16(w[i]);
    }
    free(w);
    m.data = d;
    return m;
}

/* ---- 1. checks against the scalar reference -------------------------------------------------------------------- */

static int check_all(sp_threadpool *pool, const sp_cpu *cpu, bool quick) {
    static const int64_t shapes[][3] = {
        {3, 17, 1},     {7, 45, 3},    {33, 96, 5},    {130, 1000, 9},                    /* odd */
        {10240, 5120, 1}, {6144, 5120, 2}, {48, 5120, 4}, {5120, 6144, 1}, {17408, 5120, 1}, /* Qwen3.8-27B */
        {5120, 17408, 3}, {248320, 64, 1}, {248320, 128, 2},
    };
    int failures = 0;
    printf("check against the scalar reference (max |y - y_ref| / rms(y_ref)):\n");
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        int64_t rows = shapes[s][0], cols = shapes[s][1], n = shapes[s][2];
        if (quick && rows * cols > 1000000) continue;
        float *x = xalloc((size_t)(n * cols) * 4), *ref = xalloc((size_t)(n * rows) * 4), *y = xalloc((size_t)(n * rows) * 4);
        for (int64_t i = 0; i < n * cols; i++) x[i] = gauss();
        printf("  %6lld x %-6lld n=%lld ", (long long)rows, (long long)cols, (long long)n);
        for (int ti = 0; ti < N_TYPES; ti++) {
            sp_matrix W = make_matrix(pool, types[ti], rows, cols);
            sp_matmul_isa(pool, SP_ISA_SCALAR, ref, &W, x, n);
            double rms = 0;
            for (int64_t i = 0; i < n * rows; i++) rms += (double)ref[i] * ref[i];
            rms = sqrt(rms / (double)(n * rows)) + 1e-30;
            for (int isa = 1; isa < SP_ISA_COUNT; isa++) {
                if (!sp_isa_supported((sp_isa)isa, cpu)) continue;
                if (sp_matmul_isa(pool, (sp_isa)isa, y, &W, x, n) != SPLASH_OK) {
                    failures++;
                    continue;
                }
                double worst = 0;
                for (int64_t i = 0; i < n * rows; i++) worst = fmax(worst, fabs((double)y[i] - ref[i]) / rms);
                bool ok = worst <= 1e-4;
                failures += !ok;
                printf(" %s/%s %.0e%s", sp_isa_name((sp_isa)isa), sp_mtype_name(types[ti]), worst, ok ? "" : " FAIL");
            }
            free((void *)W.data);
        }
        printf("\n");
        free(x), free(ref), free(y);
    }
    return failures;
}

/* ---- 2. memory read bandwidth ----------------------------------------------------------------------------------- */

/* Best wall time and best CPU time (process CPU seconds over threads) of a repeated measurement. */
typedef struct timing {
    double wall, cpu;
} timing;

static double process_cpu(void) {
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static void keep_best(timing *b, double wall0, double cpu0, int threads) {
    b->wall = fmin(b->wall, now() - wall0);
    b->cpu = fmin(b->cpu, (process_cpu() - cpu0) / threads);
}

/* The one measurement of core/bandwidth.h, shared with `splash bench decode`. */
static timing measure_bandwidth(sp_threadpool *pool, size_t bytes, int reps) {
    sp_bandwidth bw;
    if (sp_memory_bandwidth(pool, bytes, reps, &bw) != SPLASH_OK) exit(2);
    return (timing){bw.gbs, bw.cpu_gbs}; /* GB/s */
}

/* ---- 3 and 4. GEMV bandwidth and GEMM throughput ------------------------------------------------------------------ */

/* Best single call of y = x·Wᵀ over `count` different matrices in turn, `reps` passes. */
static timing best_call(sp_threadpool *pool, const sp_matrix *mats, int count, const float *x, float *y, int64_t n, int reps) {
    timing best = {1e30, 1e30};
    sp_matmul(pool, y, &mats[0], x, n);
    for (int r = 0; r < reps; r++)
        for (int i = 0; i < count; i++) {
            double w0 = now(), c0 = process_cpu();
            sp_matmul(pool, y, &mats[i], x, n);
            keep_best(&best, w0, c0, sp_threadpool_size(pool));
        }
    return best;
}

/* ---- 5. quantizing at load ---------------------------------------------------------------------------------------
 * A rows x cols bf16 tensor (as checkpoints store weights) to Q8 and Q4: the scalar reference row by row on one
 * thread, and sp_matrix_from_tensor as loading runs it (the best ISA's row quantizer, all threads). Figures: GB/s of
 * bf16 input over wall time and per core-second of CPU time. */
typedef struct quant_timing {
    double ref_cpu, load_wall, load_cpu; /* GB/s */
} quant_timing;

static quant_timing measure_quantize(sp_threadpool *pool, sp_quant q, int64_t rows, int64_t cols) {
    uint16_t *w = xalloc((size_t)(rows * cols) * 2);
    for (int64_t i = 0; i < rows * cols; i++) w[i] = sp_f32_to_bf16(gauss() * 0.02f);
    sp_tensor t = {.name = "lab", .dtype = SP_DTYPE_BF16, .ndim = 2, .shape = {rows, cols}, .data = w,
                   .nbytes = (uint64_t)(rows * cols) * 2, .file = "lab"};
    double bytes = (double)(rows * cols) * 2;
    sp_mtype mt = q == SP_QUANT_Q8 ? SP_MAT_Q8 : SP_MAT_Q4;
    sp_matrix src = {SP_MAT_BF16, rows, cols, w, cols * 2};
    float *tmp = xalloc((size_t)cols * 4);
    uint8_t *row = xalloc((size_t)sp_mtype_row_bytes(mt, cols));
    quant_timing r = {0, 0, 0};
    for (int rep = 0; rep < 2; rep++) {
        double c0 = process_cpu();
        for (int64_t i = 0; i < rows; i++) {
            sp_matrix_row_f32(&src, i, tmp);
            if (mt == SP_MAT_Q8) sp_quantize_row_q8(tmp, cols, row);
            else sp_quantize_row_q4(tmp, cols, row);
        }
        r.ref_cpu = fmax(r.ref_cpu, bytes / (process_cpu() - c0) / 1e9);
        sp_matrix m;
        void *owned = NULL;
        double w0 = now();
        c0 = process_cpu();
        if (sp_matrix_from_tensor(pool, &t, q, &m, &owned) != SPLASH_OK) exit(2);
        r.load_wall = fmax(r.load_wall, bytes / (now() - w0) / 1e9);
        r.load_cpu = fmax(r.load_cpu, bytes / (process_cpu() - c0) / 1e9);
        free(owned);
    }
    free(w), free(tmp), free(row);
    return r;
}

/* ---- --shape: every ISA × type at one shape ------------------------------------------------------------------------ */

static void measure_shape(sp_threadpool *pool, const sp_cpu *cpu, int64_t rows, int64_t cols, const int64_t *ns, int n_ns,
                          bool cold, const char *only) {
    int64_t nmax = 0;
    for (int k = 0; k < n_ns; k++) nmax = ns[k] > nmax ? ns[k] : nmax;
    float *x = xalloc((size_t)(nmax * cols) * 4), *y = xalloc((size_t)(nmax * rows) * 4);
    for (int64_t i = 0; i < nmax * cols; i++) x[i] = gauss();
    printf("%lld x %lld, %d threads, %s: best CPU time per call (us), GMAC/s and GB/s of weights per core\n",
           (long long)rows, (long long)cols, sp_threadpool_size(pool),
           cold ? "copies rotated through >= 256 MiB (weights from DRAM)" : "one matrix (weights from cache)");
    for (int ti = 0; ti < N_TYPES; ti++) {
        sp_matrix base = make_matrix(pool, types[ti], rows, cols);
        size_t one = (size_t)(rows * base.row_bytes);
        int count = cold ? (int)((256ull << 20) / one) + 1 : 1;
        uint8_t *all = xalloc(one * (size_t)count);
        sp_matrix *mats = malloc((size_t)count * sizeof *mats);
        for (int i = 0; i < count; i++) {
            memcpy(all + one * (size_t)i, base.data, one);
            mats[i] = base;
            mats[i].data = all + one * (size_t)i;
        }
        free((void *)base.data);
        for (int isa = 0; isa < SP_ISA_COUNT; isa++) {
            if (!sp_isa_supported((sp_isa)isa, cpu) || (cold && isa == SP_ISA_SCALAR)) continue;
            if (only && strcmp(only, sp_isa_name((sp_isa)isa)) != 0) continue;
            printf("  %-5s %-7s", sp_mtype_name(types[ti]), sp_isa_name((sp_isa)isa));
            for (int k = 0; k < n_ns; k++) {
                /* enough calls for ~20 ms of work at 50 GMAC/s, at least 20 */
                double macs = (double)(rows * cols * ns[k]);
                int reps = (int)fmax(20, fmin(20000, 1e9 / macs));
                double best = 1e30;
                for (int r = 0; r < reps; r++) {
                    double c0 = process_cpu();
                    sp_matmul_isa(pool, (sp_isa)isa, y, &mats[r % count], x, ns[k]);
                    best = fmin(best, (process_cpu() - c0) / sp_threadpool_size(pool));
                }
                printf(" | n=%-4lld %9.1f us %6.1f %6.1f", (long long)ns[k], best * 1e6, macs / best / 1e9, (double)one / best / 1e9);
            }
            printf("\n");
        }
        free(all), free(mats);
    }
    free(x), free(y);
}

/* ---- --peak: the core's arithmetic peak ----------------------------------------------------------------------------
 * Twelve independent accumulator chains of one instruction, long enough that loop overhead vanishes: vpdpbusd on 512
 * bits (64 int8 multiply-adds each; what the Q8/Q4 kernels run on AVX-512 VNNI) and vfmadd on 512 bits (16 f32
 * multiply-adds). Best of 5 over CPU time, one thread: the figure a kernel's rate is a fraction of. */
#if defined(__x86_64__)
#define R12(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11)
__attribute__((target("avx512f,avx512bw,avx512vnni"))) static double peak_int8_avx512(long n) {
    __m512i w = _mm512_set1_epi8(3), x = _mm512_set1_epi8(5);
#define DECL_I(i) __m512i a##i = _mm512_set1_epi32(i);
#define STEP_I(i) a##i = _mm512_dpbusd_epi32(a##i, w, x);
#define SUM_I(i) s += _mm512_reduce_add_epi32(a##i);
    R12(DECL_I)
    double c0 = process_cpu();
    for (long k = 0; k < n; k++) {
        R12(STEP_I)
        __asm__ volatile("" : "+v"(a0), "+v"(a6)); /* keeps the loop */
    }
    double t = process_cpu() - c0;
    int s = 0;
    R12(SUM_I)
    return s == 1 ? 0 : 12.0 * 64 * (double)n / t;
}
__attribute__((target("avx512f,fma"))) static double peak_f32_avx512(long n) {
    __m512 w = _mm512_set1_ps(1.0001f), x = _mm512_set1_ps(0.9999f);
#define DECL_F(i) __m512 f##i = _mm512_set1_ps((float)i);
#define STEP_F(i) f##i = _mm512_fmadd_ps(f##i, w, x);
#define SUM_F(i) s += _mm512_reduce_add_ps(f##i);
    R12(DECL_F)
    double c0 = process_cpu();
    for (long k = 0; k < n; k++) {
        R12(STEP_F)
        __asm__ volatile("" : "+v"(f0), "+v"(f6));
    }
    double t = process_cpu() - c0;
    float s = 0;
    R12(SUM_F)
    return s == 1 ? 0 : 12.0 * 16 * (double)n / t;
}
#endif

static void measure_peak(const sp_cpu *cpu) {
#if defined(__x86_64__)
    if (!sp_cpu_avx512(cpu)) {
        printf("peak: measured for AVX-512 VNNI only; this CPU has none\n");
        return;
    }
    double i8 = 0, f32 = 0;
    for (int r = 0; r < 5; r++) i8 = fmax(i8, peak_int8_avx512(20000000)), f32 = fmax(f32, peak_f32_avx512(20000000));
    printf("peak, one core, CPU time: int8 %.0f GMAC/s (vpdpbusd zmm), f32 %.0f GMAC/s (vfmadd zmm)\n", i8 / 1e9, f32 / 1e9);
    printf("{\"lab\":\"matmul-peak\",\"int8_gmacs\":%.1f,\"f32_gmacs\":%.1f}\n", i8 / 1e9, f32 / 1e9);
#else
    (void)cpu;
    printf("peak: measured on x86-64 only\n");
#endif
}

/* Process CPU time over wall time since the last call: the share of `threads` cores this process actually got. */
static double cpu_share(int threads) {
    static double wall0, cpu0;
    double cpu = process_cpu(), wall = now();
    double share = wall0 > 0 ? (cpu - cpu0) / (wall - wall0) / threads : 0;
    wall0 = wall, cpu0 = cpu;
    return share;
}

int main(int argc, char **argv) {
    int threads = 0, n_ns = 0;
    int64_t shape[2] = {0, 0}, shape_ns[16];
    bool check_only = false, no_check = false, quick = false, quantize_only = false, cold = false, peak = false;
    const char *only = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--threads") == 0 && i + 1 < argc) threads = atoi(argv[++i]);
        else if (strcmp(argv[i], "--shape") == 0 && i + 3 < argc) {
            shape[0] = atoll(argv[++i]), shape[1] = atoll(argv[++i]);
            for (char *p = argv[++i]; *p && n_ns < 16; p += *p == ',') shape_ns[n_ns++] = strtoll(p, &p, 10);
        }
        else if (strcmp(argv[i], "--cold") == 0) cold = true;
        else if (strcmp(argv[i], "--peak") == 0) peak = true;
        else if (strcmp(argv[i], "--isa") == 0 && i + 1 < argc) only = argv[++i];
        else if (strcmp(argv[i], "--check-only") == 0) check_only = true;
        else if (strcmp(argv[i], "--no-check") == 0) no_check = true;
        else if (strcmp(argv[i], "--quick") == 0) quick = true;
        else if (strcmp(argv[i], "--quantize-only") == 0) quantize_only = no_check = true;
        else {
            fprintf(stderr, "usage: %s [--threads N] [--check-only | --no-check | --quantize-only | --shape ROWS COLS N,N,... [--cold] [--isa NAME] | --peak] "
                            "[--quick]\n", argv[0]);
            return 2;
        }
    }
    sp_threadpool *pool;
    if (sp_threadpool_create(threads, &pool) != SPLASH_OK) return 2;
    const sp_cpu *cpu = sp_threadpool_cpu(pool);
    sp_isa isa = sp_isa_best(cpu);
    printf("matmul_lab: %d threads, cpu features \"%s\", best ISA %s\n", sp_threadpool_size(pool), splash_cpu_features(),
           sp_isa_name(isa));
    if (peak) {
        measure_peak(cpu);
        sp_threadpool_free(pool);
        return 0;
    }
    if (shape[0] > 0 && shape[1] > 0 && n_ns > 0) {
        measure_shape(pool, cpu, shape[0], shape[1], shape_ns, n_ns, cold, only);
        sp_threadpool_free(pool);
        return 0;
    }
    int failures = no_check ? 0 : check_all(pool, cpu, quick);
    if (!no_check) printf("checks: %s\n", failures ? "FAILED" : "all within 1e-4");
    if (check_only || failures) {
        sp_threadpool_free(pool);
        return failures ? 1 : 0;
    }

    double load[3] = {0};
    if (getloadavg(load, 1) < 0) load[0] = -1;
    int T = sp_threadpool_size(pool);
    if (quantize_only) {
        for (int q = 0; q < 2; q++) {
            quant_timing r = measure_quantize(pool, q ? SP_QUANT_Q4 : SP_QUANT_Q8, 17408, 5120);
            printf("quantize %s, 17408 x 5120 bf16, GB/s of input: scalar reference %.2f per core-second | at load (%d "
                   "threads) %.2f wall, %.2f per core-second\n", q ? "q4" : "q8", r.ref_cpu, T, r.load_wall, r.load_cpu);
        }
        if (getloadavg(load + 1, 1) < 0) load[1] = -1;
        printf("load average %.2f → %.2f\n", load[0], load[1]);
        sp_threadpool_free(pool);
        return 0;
    }
    cpu_share(T);
    size_t stream_bytes = quick ? (256u << 20) : (1u << 30);
    int bw_reps = quick ? 2 : 5;
    timing bw = measure_bandwidth(pool, stream_bytes, bw_reps);
    printf("\nmemory read bandwidth: %.1f GB/s, cpu %.1f GB/s (%d threads streaming %zu MiB, best of %d); load average %.2f\n",
           bw.wall, bw.cpu, T, stream_bytes >> 20, bw_reps, load[0]);

    const int64_t rows = 17408, cols = 5120;
    float *x = xalloc((size_t)(64 * cols) * 4), *y = xalloc((size_t)(64 * rows) * 4);
    for (int64_t i = 0; i < 64 * cols; i++) x[i] = gauss();
    timing gemv[N_TYPES], gemv_bw[N_TYPES]; /* GB/s */
    printf("\nGEMV (n = 1, %s), %lld x %lld matrices rotated through >= %d MiB, best call; bw = bandwidth measured "
           "just before:\n", sp_isa_name(isa), (long long)rows, (long long)cols, quick ? 128 : 512);
    printf("  %-5s %8s %8s %8s %7s   %8s %8s %7s\n", "type", "ms/call", "GB/s", "bw", "of bw", "cpu GB/s", "cpu bw", "of bw");
    for (int ti = 0; ti < N_TYPES; ti++) {
        sp_mtype t = types[ti];
        size_t one = (size_t)(rows * sp_mtype_row_bytes(t, cols));
        int count = (int)(((quick ? 128ull : 512ull) << 20) / one) + 1;
        /* One matrix, then copies of its bytes: same values, distinct memory. */
        sp_matrix base = make_matrix(pool, t, rows, cols);
        uint8_t *all = xalloc(one * (size_t)count);
        sp_matrix *mats = malloc((size_t)count * sizeof *mats);
        for (int i = 0; i < count; i++) {
            memcpy(all + one * (size_t)i, base.data, one);
            mats[i] = base;
            mats[i].data = all + one * (size_t)i;
        }
        free((void *)base.data);
        gemv_bw[ti] = measure_bandwidth(pool, stream_bytes, bw_reps);
        timing tt = best_call(pool, mats, count, x, y, 1, quick ? 2 : 5);
        gemv[ti] = (timing){(double)one / tt.wall / 1e9, (double)one / tt.cpu / 1e9};
        bw.wall = fmax(bw.wall, gemv_bw[ti].wall);
        bw.cpu = fmax(bw.cpu, gemv_bw[ti].cpu);
        printf("  %-5s %8.2f %8.1f %8.1f %6.0f%%   %8.1f %8.1f %6.0f%%\n", sp_mtype_name(t), tt.wall * 1e3, gemv[ti].wall,
               gemv_bw[ti].wall, 100 * gemv[ti].wall / gemv_bw[ti].wall, gemv[ti].cpu, gemv_bw[ti].cpu,
               100 * gemv[ti].cpu / gemv_bw[ti].cpu);
        free(all);
        free(mats);
    }

    static const int64_t ns[] = {1, 4, 16, 64};
    timing gemm[N_TYPES][4], speedup[N_TYPES][4];
    printf("\nGEMM (%s) on one %lld x %lld matrix, n = 1 and n timed alternately: ms per call, GFLOP/s, and the\n"
           "speedup n*t(1)/t(n) of n sequences over one at a time (wall | cpu):\n",
           sp_isa_name(isa), (long long)rows, (long long)cols);
    printf("  %-5s", "type");
    for (int k = 0; k < 4; k++) printf(" | n=%-2lld %7s %6s %11s", (long long)ns[k], "ms", "GF/s", "speedup");
    printf("\n");
    for (int ti = 0; ti < N_TYPES; ti++) {
        sp_matrix W = make_matrix(pool, types[ti], rows, cols);
        printf("  %-5s", sp_mtype_name(types[ti]));
        timing t1 = {1e30, 1e30};
        for (int k = 0; k < 4; k++) {
            timing t = {1e30, 1e30};
            for (int rep = 0; rep < (quick ? 2 : 5); rep++) {
                timing a = best_call(pool, &W, 1, x, y, 1, 1), b = best_call(pool, &W, 1, x, y, ns[k], 1);
                t1 = (timing){fmin(t1.wall, a.wall), fmin(t1.cpu, a.cpu)};
                t = (timing){fmin(t.wall, b.wall), fmin(t.cpu, b.cpu)};
            }
            if (k == 0) t = t1 = (timing){fmin(t.wall, t1.wall), fmin(t.cpu, t1.cpu)};
            gemm[ti][k] = t;
            speedup[ti][k] = (timing){(double)ns[k] * t1.wall / t.wall, (double)ns[k] * t1.cpu / t.cpu};
            printf(" | %7.2f %6.1f %5.2f|%5.2f", t.wall * 1e3, 2.0 * (double)(rows * cols * ns[k]) / t.wall / 1e9,
                   speedup[ti][k].wall, speedup[ti][k].cpu);
        }
        printf("\n");
        free((void *)W.data);
    }
    quant_timing qt[2];
    printf("\nquantizing a %lld x %lld bf16 tensor at load, GB/s of bf16 input: scalar reference (one thread, per "
           "core-second) | sp_matrix_from_tensor (%d threads: wall, per core-second)\n", (long long)rows, (long long)cols, T);
    for (int q = 0; q < 2; q++) {
        qt[q] = measure_quantize(pool, q ? SP_QUANT_Q4 : SP_QUANT_Q8, rows, cols);
        printf("  %s   %6.2f | %6.2f %6.2f\n", q ? "q4" : "q8", qt[q].ref_cpu, qt[q].load_wall, qt[q].load_cpu);
    }
    double share = cpu_share(T);
    if (getloadavg(load + 1, 1) < 0) load[1] = -1;
    printf("\nthis process got %.0f%% of %d cores over the measurements; load average %.2f at the end\n", 100 * share, T,
           load[1]);

    printf("\n{\"lab\":\"matmul\",\"isa\":\"%s\",\"threads\":%d,\"cpu_share\":%.2f,\"load_start\":%.2f,\"load_end\":%.2f,"
           "\"bandwidth_gbs\":%.2f,\"bandwidth_cpu_gbs\":%.2f",
           sp_isa_name(isa), T, share, load[0], load[1], bw.wall, bw.cpu);
    for (int ti = 0; ti < N_TYPES; ti++) {
        const char *name = sp_mtype_name(types[ti]);
        printf(",\"gemv_%s_gbs\":%.2f,\"gemv_%s_fraction\":%.3f,\"gemv_%s_cpu_gbs\":%.2f,\"gemv_%s_cpu_fraction\":%.3f", name,
               gemv[ti].wall, name, gemv[ti].wall / gemv_bw[ti].wall, name, gemv[ti].cpu, name, gemv[ti].cpu / gemv_bw[ti].cpu);
        for (int k = 0; k < 4; k++)
            printf(",\"gemm_%s_n%lld_ms\":%.3f,\"gemm_%s_n%lld_speedup\":%.2f,\"gemm_%s_n%lld_cpu_speedup\":%.2f", name,
                   (long long)ns[k], gemm[ti][k].wall * 1e3, name, (long long)ns[k], speedup[ti][k].wall, name,
                   (long long)ns[k], speedup[ti][k].cpu);
    }
    for (int q = 0; q < 2; q++)
        printf(",\"quantize_%s_ref_cpu_gbs\":%.2f,\"quantize_%s_load_gbs\":%.2f,\"quantize_%s_load_cpu_gbs\":%.2f", q ? "q4" : "q8",
               qt[q].ref_cpu, q ? "q4" : "q8", qt[q].load_wall, q ? "q4" : "q8", qt[q].load_cpu);
    printf("}\n");
    free(x);
    free(y);
    sp_threadpool_free(pool);
    return 0;
}
