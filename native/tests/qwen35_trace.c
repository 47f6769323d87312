/* qwen35_trace.c — runs a prompt through a checkpoint and writes every traced intermediate, to find the first
 * layer that diverges from a reference:
 *
 *   build/debug/tests/qwen35_trace MODEL_DIR 1,2,3 OUT_DIR     writes OUT_DIR/<name>.<layer>.f32 (f32 LE, rows × cols)
 *                                                              and prints one line per file
 * Names (layer −1 = outside the stack): embed, attn_q, attn_k, gdn_core, mixer_out, ffn_out, layer_out, final_norm,
 * logits. The trace hook is compiled out of release builds (NDEBUG): use the debug build of this program. */
#include "api/model.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void dump(void *ctx, const char *name, int32_t layer, const float *x, int64_t rows, int64_t cols) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s.%d.f32", (const char *)ctx, name, layer);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(x, sizeof(float), (size_t)(rows * cols), f) != (size_t)(rows * cols)) {
        fprintf(stderr, "cannot write %s\n", path);
        exit(1);
    }
    fclose(f);
    printf("%s %d %lld %lld\n", name, layer, (long long)rows, (long long)cols);
}

int main(int argc, char **argv) {
#ifdef NDEBUG
    fprintf(stderr, "the trace hook is compiled out of release builds: run build/debug/tests/qwen35_trace\n");
    return 2;
#endif
    if (argc != 4) {
        fprintf(stderr, "usage: qwen35_trace MODEL_DIR TOKENS(1,2,3) OUT_DIR\n");
        return 2;
    }
    int32_t n = 1;
    for (const char *p = argv[2]; *p; p++) n += *p == ',';
    if (n > 16 * 1024) {
        fprintf(stderr, "at most 16384 tokens\n");
        return 2;
    }
    int32_t *tokens = malloc(sizeof(int32_t) * (size_t)n), pages[1024];
    char *s = argv[2];
    for (int32_t i = 0; i < n; i++) tokens[i] = (int32_t)strtol(s, &s, 10), s += *s == ',';
    for (int32_t i = 0; i < 1024; i++) pages[i] = i;
    splash_load_options o = {sizeof o, NULL, 0, n, SPLASH_BACKEND_CPU, 0, NULL}; /* the trace reads host memory */
    splash_model *m = NULL;
    splash_cache *c = NULL;
    splash_status st = splash_model_load(argv[1], &o, &m);
    if (!st) st = splash_cache_create(m, 16, 1024, 1, &c);
    if (!st) {
        sp_qwen35_set_trace(m->arch, dump, argv[3]);
        splash_seq q = {.slot = 0, .n_tokens = n, .n_logits = n, .tokens = tokens, .pages = pages, .n_pages = 1024};
        st = splash_step(m, c, &q, 1);
    }
    if (st) fprintf(stderr, "%s\n", splash_last_error());
    splash_cache_free(c);
    splash_model_free(m);
    free(tokens);
    return st ? 1 : 0;
}
