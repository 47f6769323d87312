/* ttft_lab.c — time to the first token of a prompt whose prefix the prefix cache holds, against the same prompt
 * computed whole, on a real checkpoint and any backend, without Bun (the H200 has none):
 *
 *   build/tools/ttft_lab --model DIR [--backend vulkan|cpu] [--prefix N] [--suffix N] [--reps N] [--kv f32|f16|int8]
 *
 * It does what the engine does for each (src/engine/scheduler.ts, cache-manager.ts), with the engine's defaults:
 *
 *   miss   a prompt of prefix + suffix tokens from position 0, in steps of at most 512 tokens cut at 64-token
 *          blocks, the GDN state saved (a slot copy) at every 4,096th position and where the prefix ends (the cache's
 *          snapshot points), the last step sampling
 *   hit    a new sequence sharing the first `prefix` tokens (a multiple of 64): the page table names the cached
 *          pages, the GDN snapshot taken at `prefix` is copied into the sequence's slot, and only the suffix is
 *          computed, sampling after it
 *
 * each timed from its first call to the sampled token, best of --reps after a warm-up; the prompts are fresh
 * pseudo-random ids every repetition. Prints both and their ratio; the last line is JSON. What the HTTP path adds on
 * top (request parsing, the template, the scheduler, the stream) is measured by scripts/bench/ttft-prefix.py. */
#include "splash.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { PAGE = 64, STEP = 512, SNAPSHOT = 4096 };

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void die(const char *what) {
    fprintf(stderr, "ttft_lab: %s: %s\n", what, splash_last_error());
    exit(1);
}

static const splash_sampling GREEDY = {.top_p = 1, .repetition_penalty = 1};

/* Computes tokens [from, to) of a sequence in steps as the engine cuts them (at blocks, at most STEP tokens, at every
 * SNAPSHOT-th position and at `snap_at`, where the engine's snapshots fall); the last step samples. Slot `snap` gets a
 * copy of the GDN state at each of those points (the engine keeps them for later hits; the last one is `snap_at`'s
 * when it is the furthest). Returns the sampled token. */
static int32_t prefill(splash_model *m, splash_cache *c, int32_t slot, int32_t snap, int32_t snap_at, const int32_t *tokens,
                    const int32_t *pages, int32_t n_pages, int32_t from, int32_t to) {
    int32_t token = -1;
    for (int32_t at = from; at < to;) {
        int32_t end = at + STEP < to ? (at + STEP) / PAGE * PAGE : to;
        int32_t next_snap = (at / SNAPSHOT + 1) * SNAPSHOT;
        if (next_snap < end) end = next_snap;
        if (at < snap_at && snap_at < end) end = snap_at;
        splash_seq s = {.slot = slot, .n_past = at, .n_tokens = end - at, .tokens = tokens + at, .pages = pages, .n_pages = n_pages,
                        .sample = end == to, .sampling = GREEDY};
        if (splash_step(m, c, &s, 1)) die("splash_step");
        token = s.token;
        if (snap >= 0 && (end % SNAPSHOT == 0 || end == snap_at) && splash_cache_copy_slot(c, slot, snap)) die("snapshot");
        at = end;
    }
    return token;
}

int main(int argc, char **argv) {
    const char *dir = NULL, *backend_name = "vulkan", *kv_name = "int8";
    int prefix = 8192, suffix = 32, reps = 3;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : "";
        if (!strcmp(a, "--model")) dir = v, i++;
        else if (!strcmp(a, "--backend")) backend_name = v, i++;
        else if (!strcmp(a, "--prefix")) prefix = atoi(v), i++;
        else if (!strcmp(a, "--suffix")) suffix = atoi(v), i++;
        else if (!strcmp(a, "--reps")) reps = atoi(v), i++;
        else if (!strcmp(a, "--kv")) kv_name = v, i++;
        else dir = NULL, i = argc;
    }
    int backend = !strcmp(backend_name, "vulkan") ? SPLASH_BACKEND_VULKAN : !strcmp(backend_name, "cpu") ? SPLASH_BACKEND_CPU : -1;
    int kv = !strcmp(kv_name, "f32") ? SPLASH_KV_F32 : !strcmp(kv_name, "f16") ? SPLASH_KV_F16 : !strcmp(kv_name, "int8") ? SPLASH_KV_INT8 : -1;
    if (!dir || backend < 0 || kv < 0 || prefix < PAGE || prefix % PAGE || suffix < 1 || reps < 1) {
        fprintf(stderr, "usage: ttft_lab --model DIR [--backend vulkan|cpu] [--prefix N (a multiple of %d)] [--suffix N] [--reps N] "
                        "[--kv f32|f16|int8]\n", PAGE);
        return 2;
    }
    splash_load_options o = {sizeof o, NULL, 0, STEP, backend, 0, NULL};
    splash_model *m;
    if (splash_model_load(dir, &o, &m)) die(dir);
    if (splash_model_set_kv_type(m, kv)) die("set the KV type");
    splash_model_info info = {.struct_size = sizeof info};
    splash_model_get_info(m, &info);
    int32_t total = prefix + suffix, per_seq = (total + PAGE - 1) / PAGE;
    splash_cache *c;
    /* slots: 0 the miss, 1 the hit, 2 the snapshot; pages: the miss's table, then the hit's own tail */
    if (splash_cache_create(m, PAGE, 2 * per_seq, 3, &c)) die("splash_cache_create");
    int32_t *miss_pages = malloc(sizeof(int32_t) * (size_t)per_seq), *hit_pages = malloc(sizeof(int32_t) * (size_t)per_seq);
    int32_t *tokens = malloc(sizeof(int32_t) * (size_t)total), *hit_tokens = malloc(sizeof(int32_t) * (size_t)total);
    for (int32_t p = 0; p < per_seq; p++) miss_pages[p] = p, hit_pages[p] = p < prefix / PAGE ? p : per_seq + p;
    double best_miss = INFINITY, best_hit = INFINITY;
    uint64_t rng = 0x9e3779b97f4a7c15ull;
    for (int r = 0; r <= reps; r++) {
        for (int32_t t = 0; t < total; t++) {
            rng = rng * 6364136223846793005ull + 1442695040888963407ull;
            tokens[t] = (int32_t)((rng >> 33) % (uint64_t)(info.vocab_size - 1024));
        }
        memcpy(hit_tokens, tokens, sizeof(int32_t) * (size_t)prefix);
        for (int32_t t = prefix; t < total; t++) hit_tokens[t] = (tokens[t] + 7) % (info.vocab_size - 1024);
        double t0 = now();
        prefill(m, c, 0, 2, prefix, tokens, miss_pages, per_seq, 0, total);
        double miss = now() - t0;
        t0 = now();
        if (splash_cache_copy_slot(c, 2, 1)) die("restore the snapshot");
        int32_t got = prefill(m, c, 1, -1, -1, hit_tokens, hit_pages, per_seq, prefix, total);
        double hit = now() - t0;
        /* the hit must sample what computing its prompt whole samples (slot 0 and its pages are free again) */
        if (r == 0 && prefill(m, c, 0, -1, -1, hit_tokens, miss_pages, per_seq, 0, total) != got) {
            fprintf(stderr, "ttft_lab: the hit sampled %d, its prompt computed whole another token\n", got);
            return 1;
        }
        if (r > 0) best_miss = fmin(best_miss, miss), best_hit = fmin(best_hit, hit);
    }
    printf("ttft_lab: %s on %s, %s KV: %d-token prompt, %d of them cached; best of %d\n", dir, splash_model_backend(m), kv_name,
           total, prefix, reps);
    printf("  miss (the whole prompt)          %9.2f ms\n", best_miss * 1e3);
    printf("  hit (snapshot + %4d tokens)     %9.2f ms\n", suffix, best_hit * 1e3);
    printf("  miss / hit                       %9.1fx\n", best_miss / best_hit);
    printf("{\"lab\":\"ttft\",\"backend\":\"%s\",\"kv\":\"%s\",\"prefix\":%d,\"suffix\":%d,\"miss_ms\":%.3f,\"hit_ms\":%.3f,\"ratio\":%.2f}\n",
           backend_name, kv_name, prefix, suffix, best_miss * 1e3, best_hit * 1e3, best_miss / best_hit);
    splash_cache_free(c);
    splash_model_free(m);
    free(miss_pages), free(hit_pages), free(tokens), free(hit_tokens);
    return 0;
}
