/* vulkan_attention_lab.c — the attention op alone on a GPU backend (kv_write not timed): decode and verify blocks on a
 * model's attention heads over a KV cache of each row type, as µs per call and as the fraction of the measured read
 * bandwidth its K and V bytes would take.
 *
 *   build/tools/vulkan_attention_lab [--heads 24/4/256] [--past 1024,8192,32768] [--rows 1,8] [--kv f32,f16,int8]
 *                                 [--workgroups 256,...] [--page 64] [--calls 50] [--reps 3]
 *
 * --heads: query heads / kv heads / head dim (the Qwen3.8-27B's; the Qwen3.6-35B-A3B's are 16/2/256). --workgroups:
 * the split decode's target workgroup counts to time (default: the device's, as the op takes it). One sequence, pages
 * of --page tokens in order, keys and values random. Each timing is --calls calls recorded back to back (each waits
 * for the one before: they write the same output, as a decode's layers do) and run, best of --reps; the first run
 * of each shape warms the clocks and is not counted. bandwidth % = (the K and V bytes read once) / read bandwidth /
 * time per call. */
#include "backends/gpu/gpu.h"
#include "backends/vulkan/vulkan.h"
#include "core/error.h"
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

static void die(const char *what) {
    fprintf(stderr, "vulkan_attention_lab: %s: %s\n", what, splash_last_error());
    exit(1);
}

/* A comma-separated list of positive integers into out (at most max); returns the count. */
static int int_list(const char *s, int *out, int max) {
    int n = 0;
    char *copy = strdup(s);
    for (char *t = strtok(copy, ","); t && n < max; t = strtok(NULL, ","))
        if (atoi(t) > 0) out[n++] = atoi(t);
    free(copy);
    return n;
}

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static float uniform(void) {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (float)(rng >> 40) * (2.0f / 16777216.0f) - 1.0f;
}

int main(int argc, char **argv) {
    int Hq = 24, Hkv = 4, hd = 256, page = 64, calls = 50, reps = 3;
    int past[8] = {1024, 8192, 32768}, n_past = 3, rows[8] = {1, 8}, n_rows = 2, wgs[8], n_wgs = 0;
    int types[3] = {SPLASH_KV_F32, SPLASH_KV_F16, SPLASH_KV_INT8}, n_types = 3;
    for (int i = 1; i + 1 < argc; i += 2) {
        const char *a = argv[i], *v = argv[i + 1];
        if (!strcmp(a, "--heads") && sscanf(v, "%d/%d/%d", &Hq, &Hkv, &hd) == 3) continue;
        if (!strcmp(a, "--past")) n_past = int_list(v, past, 8);
        else if (!strcmp(a, "--rows")) n_rows = int_list(v, rows, 8);
        else if (!strcmp(a, "--workgroups")) n_wgs = int_list(v, wgs, 8);
        else if (!strcmp(a, "--page")) page = atoi(v);
        else if (!strcmp(a, "--calls")) calls = atoi(v);
        else if (!strcmp(a, "--reps")) reps = atoi(v);
        else if (!strcmp(a, "--kv")) {
            n_types = 0;
            char *copy = strdup(v);
            for (char *t = strtok(copy, ","); t && n_types < 3; t = strtok(NULL, ","))
                types[n_types++] = !strcmp(t, "f16") ? SPLASH_KV_F16 : !strcmp(t, "int8") ? SPLASH_KV_INT8 : SPLASH_KV_F32;
            free(copy);
        } else {
            fprintf(stderr, "vulkan_attention_lab: unknown option %s (see the file's header)\n", a);
            return 2;
        }
    }
    if (Hq < 1 || Hkv < 1 || Hq % Hkv || hd < 8 || page < 1 || calls < 1 || reps < 1 || !n_past || !n_rows) {
        fprintf(stderr, "vulkan_attention_lab: bad shape or counts\n");
        return 2;
    }
    sp_threadpool *pool;
    if (sp_threadpool_create(0, &pool)) return 1;
    sp_backend be;
    splash_status st = SPLASH_OK;
    if (sp_vulkan_backend_create(&be, pool, sp_threadpool_size(pool), &st, true)) die("Vulkan backend");
    sp_gpu *g = sp_gpu_of(&be);
    bool small = strstr(g->device_name, "llvmpipe") != NULL;
    double gbs;
    if (sp_gpu_read_bandwidth(&be, small ? (64ull << 20) : (4ull << 30), small ? 2 : 8, 3, &gbs)) die("bandwidth");
    if (!n_wgs) wgs[n_wgs++] = (int)g->attention_workgroups;
    printf("vulkan_attention_lab: %s, read bandwidth %.0f GB/s; heads %d/%d x %d, pages of %d, %d calls per run, best of %d\n",
           g->device_name, gbs, Hq, Hkv, hd, page, calls, reps);
    printf("  %-5s %6s %4s %5s %10s %10s %7s\n", "kv", "past", "rows", "wgs", "us/call", "KV MB", "bw %");

    int max_rows = 0, max_past = 0;
    for (int i = 0; i < n_rows; i++) max_rows = rows[i] > max_rows ? rows[i] : max_rows;
    for (int i = 0; i < n_past; i++) max_past = past[i] > max_past ? past[i] : max_past;
    int64_t total = (int64_t)max_past + max_rows, n_pages = (total + page - 1) / page;
    int32_t *pages = malloc(sizeof(int32_t) * (size_t)n_pages);
    for (int64_t i = 0; i < n_pages; i++) pages[i] = (int32_t)i;
    /* random K/V rows written CHUNK positions at a time; q and the gate for the most rows */
    enum { CHUNK = 512 };
    int64_t kv_vals = (int64_t)CHUNK * Hkv * hd, q_vals = (int64_t)max_rows * Hq * hd;
    float *host = malloc(sizeof(float) * (size_t)(kv_vals > q_vals ? kv_vals : q_vals));
    for (int64_t i = 0; i < kv_vals; i++) host[i] = uniform();
    float *dkv_rows = be.alloc(&be, 4 * (uint64_t)kv_vals);
    be.write(&be, dkv_rows, host, 4 * (uint64_t)kv_vals);
    for (int64_t i = 0; i < q_vals; i++) host[i] = uniform();
    float *dq = be.alloc(&be, 4 * (uint64_t)q_vals), *dgate = be.alloc(&be, 4 * (uint64_t)q_vals);
    float *dout = be.alloc(&be, 4 * (uint64_t)q_vals);
    if (!dkv_rows || !dq || !dgate || !dout) die("alloc");
    be.write(&be, dq, host, 4 * (uint64_t)q_vals);
    be.write(&be, dgate, host, 4 * (uint64_t)q_vals);

    for (int ti = 0; ti < n_types; ti++) {
        int32_t type = types[ti];
        const char *tname = type == SPLASH_KV_F16 ? "f16" : type == SPLASH_KV_INT8 ? "int8" : "f32";
        int64_t row_bytes = sp_kv_row_bytes(type, hd), half = (int64_t)Hkv * page * row_bytes;
        /* one layer's pages: K rows then V rows (a page of the real cache holds every layer; the stride is what differs) */
        uint8_t *kv = be.alloc(&be, (uint64_t)(2 * half * n_pages));
        if (!kv) die("KV cache");
        sp_kv_view view = {kv, kv + half, 2 * half, pages, page, type};
        for (int64_t p0 = 0; p0 < total; p0 += CHUNK) {
            int64_t n = total - p0 < CHUNK ? total - p0 : CHUNK;
            be.kv_write(&be, &view, dkv_rows, dkv_rows, (int32_t)p0, n, Hkv, hd);
        }
        if (sp_gpu_finish(&be)) die("kv_write");
        for (int pi = 0; pi < n_past; pi++)
            for (int ri = 0; ri < n_rows; ri++)
                for (int wi = 0; wi < n_wgs; wi++) {
                    g->attention_workgroups = (uint32_t)wgs[wi];
                    double best = 1e30;
                    for (int r = 0; r <= reps; r++) {
                        double t0 = now();
                        for (int c = 0; c < calls; c++)
                            be.attention(&be, dout, dq, dgate, &(sp_attn_seq){view, 0, past[pi], (int32_t)(rows[ri])}, 1, Hq, Hkv, hd, 0.0625f);
                        if (sp_gpu_finish(&be)) die("attention");
                        double us = (now() - t0) * 1e6 / calls;
                        if (r && us < best) best = us;
                    }
                    double bytes = 2.0 * (double)(past[pi] + rows[ri]) * Hkv * (double)row_bytes;
                    printf("  %-5s %6d %4d %5d %10.1f %10.2f %6.1f%%\n", tname, past[pi], rows[ri], wgs[wi], best, bytes / 1e6,
                           100 * bytes / (gbs * 1e3) / best);
                    fflush(stdout);
                }
        be.free(&be, kv);
    }
    be.free(&be, dkv_rows), be.free(&be, dq), be.free(&be, dgate), be.free(&be, dout);
    free(pages), free(host);
    sp_vulkan_backend_destroy(&be);
    sp_threadpool_free(pool);
    return 0;
}
