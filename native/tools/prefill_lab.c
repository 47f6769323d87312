/* prefill_lab.c — lab harness for long-prompt prefill through the public API (splash_step), as the engine runs it:
 * chunks of max_step_tokens on pages of 64 tokens, logits for the last position only.
 *
 *   build/tools/prefill_lab [--model DIR] [--threads N] [--chunk T] [--quant q8|q4] [--check] T...
 *       default: models/splash-tiny, every core, 512-token chunks, T = 8192
 *
 * For each prompt length T (deterministic pseudo-random tokens): wall seconds, process CPU seconds (user + sys,
 * all threads) and tokens/s over each, and the load average before and after (the development machine is shared).
 * --check also prefills the same prompt in chunks of 64 + 1 + the rest and compares the last position's logits
 * bit for bit: the kernels must give the same bits whatever the chunking (the prefix cache relies on it). */
#include "splash.h"

#include <stdbool.h>
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

/* Prefills tokens[0..n) in chunks (sizes from `chunks`, the last repeated), logits of the last position → out. */
static int prefill(splash_model *m, splash_cache *c, const int32_t *tokens, int32_t n, const int32_t *chunks,
                   int n_chunks, const int32_t *pages, int32_t n_pages, float *out) {
    int32_t past = 0;
    for (int i = 0; past < n; i++) {
        int32_t t = chunks[i < n_chunks ? i : n_chunks - 1];
        if (t > n - past) t = n - past;
        bool last = past + t == n;
        splash_seq q = {.slot = 0, .n_past = past, .n_tokens = t, .n_logits = last ? 1 : 0, .tokens = tokens + past,
                        .pages = pages, .n_pages = n_pages, .logits = last ? out : NULL};
        if (splash_step(m, c, &q, 1)) {
            fprintf(stderr, "step at %d: %s\n", past, splash_last_error());
            return 1;
        }
        past += t;
    }
    return 0;
}

int main(int argc, char **argv) {
    const char *dir = "models/splash-tiny";
    int32_t threads = 0, chunk = 512, quant = SPLASH_QUANT_NONE, lengths[16], n_lengths = 0;
    bool check = false;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--model") && i + 1 < argc) dir = argv[++i];
        else if (!strcmp(argv[i], "--threads") && i + 1 < argc) threads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--chunk") && i + 1 < argc) chunk = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--quant") && i + 1 < argc) {
            i++;
            quant = !strcmp(argv[i], "q8") ? SPLASH_QUANT_Q8 : !strcmp(argv[i], "q4") ? SPLASH_QUANT_Q4 : SPLASH_QUANT_NONE;
        } else if (!strcmp(argv[i], "--check")) check = true;
        else if (n_lengths < 16 && atoi(argv[i]) > 0) lengths[n_lengths++] = atoi(argv[i]);
        else {
            fprintf(stderr, "usage: prefill_lab [--model DIR] [--threads N] [--chunk T] [--quant q8|q4] [--check] T...\n");
            return 2;
        }
    }
    if (!n_lengths) lengths[n_lengths++] = 8192;
    int32_t longest = 0;
    for (int i = 0; i < n_lengths; i++) longest = lengths[i] > longest ? lengths[i] : longest;

    int32_t kind_quant[SPLASH_N_TENSOR_KINDS]; /* every matrix at the level but the f32 vision tower's */
    for (int32_t k = 0; k < SPLASH_N_TENSOR_KINDS; k++) kind_quant[k] = k == SPLASH_KIND_VISION ? SPLASH_QUANT_NONE : quant;
    splash_load_options o = {.struct_size = sizeof o, .quant = kind_quant, .n_threads = threads, .max_step_tokens = chunk,
                             .backend = SPLASH_BACKEND_CPU};
    splash_model *m;
    double l0 = clock_s(CLOCK_MONOTONIC);
    if (splash_model_load(dir, &o, &m)) {
        fprintf(stderr, "%s\n", splash_last_error());
        return 1;
    }
    splash_model_info info = {.struct_size = sizeof info};
    splash_model_get_info(m, &info);
    printf("%s: %d layers (%d full attention), %d threads, chunks of %d, loaded in %.2f s\n", dir, info.n_layers,
           info.n_full_attention_layers, info.n_threads, chunk, clock_s(CLOCK_MONOTONIC) - l0);
    enum { PAGE = 64 };
    int32_t n_pages = (longest + PAGE - 1) / PAGE, *pages = malloc(sizeof(int32_t) * (size_t)n_pages);
    int32_t *tokens = malloc(sizeof(int32_t) * (size_t)longest);
    float *a = malloc(sizeof(float) * (size_t)info.vocab_size), *b = malloc(sizeof(float) * (size_t)info.vocab_size);
    for (int32_t p = 0; p < n_pages; p++) pages[p] = p;
    uint64_t s = 1;
    for (int32_t i = 0; i < longest; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        tokens[i] = (int32_t)((s >> 33) % (uint64_t)info.vocab_size);
    }
    splash_cache *c;
    if (splash_cache_create(m, PAGE, n_pages, 1, &c)) {
        fprintf(stderr, "%s\n", splash_last_error());
        return 1;
    }
    int failed = 0;
    for (int i = 0; i < n_lengths; i++) {
        int32_t T = lengths[i];
        double load0 = load_average(), t0 = clock_s(CLOCK_MONOTONIC), c0 = clock_s(CLOCK_PROCESS_CPUTIME_ID);
        if (prefill(m, c, tokens, T, &chunk, 1, pages, n_pages, a)) return 1;
        double wall = clock_s(CLOCK_MONOTONIC) - t0, cpu = clock_s(CLOCK_PROCESS_CPUTIME_ID) - c0;
        printf("T %6d: wall %7.2f s (%7.0f tok/s)  cpu %7.2f s (%7.0f tok/s per core-second)  load %.1f → %.1f\n", T,
               wall, T / wall, cpu, T / cpu, load0, load_average());
        if (check) {
            int32_t odd[] = {64, 1, chunk};
            if (prefill(m, c, tokens, T, odd, 3, pages, n_pages, b)) return 1;
            bool same = !memcmp(a, b, sizeof(float) * (size_t)info.vocab_size);
            printf("         chunks %d vs 64+1+%d…: last logits %s\n", chunk, chunk, same ? "bit-identical" : "DIFFER");
            failed |= !same;
        }
    }
    printf("{\"lab\":\"prefill\",\"model\":\"%s\",\"threads\":%d,\"chunk\":%d}\n", dir, info.n_threads, chunk);
    splash_cache_free(c);
    splash_model_free(m);
    free(pages), free(tokens), free(a), free(b);
    return failed;
}
