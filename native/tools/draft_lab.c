/* draft_lab.c — what speculative decoding costs on a GPU, on the target's real shapes at full depth, without Bun:
 *
 *   build/tools/draft_lab --target DIR [--draft-shape 27b|tiny] [--quant q4|q8|bf16] [--context N] [--reps N]
 *
 * DIR is a target checkpoint (vulkan_bench writes the sparse Qwen3.8-27B one: --dir of vulkan_bench, then
 * <dir>/27b-64l). The lab writes a DFlash drafter of the z-lab Qwen3.5-27B-DFlash shape beside it (5 layers, 32/8 heads
 * × 128, intermediate 17408, block 16, taps at layers 1, 16, 31, 46, 61) as a sparse checkpoint — every matrix a file
 * hole, read as zeros: the kernels read every byte whatever its value — attaches it, and times, best of --reps after a
 * warm-up, each sequence at --context positions (the positions before hold zeros, as in vulkan_bench):
 *
 *   decode       one sequence, one row (splash_step): the unit every figure below is divided by
 *   verify 8     one sequence's block of 8 rows (anchor + 7 drafts): the target's pass, the acceptance and the
 *                drafter's ingest of the accepted rows
 *   cycle 8      the same step also drafting the next 8 tokens (a DFlash block): one speculative cycle, one call;
 *                "draft 8" is its difference to verify 8
 *   4 × decode   four sequences, one row each
 *   4 × verify 8 four sequences' blocks of 8 rows in one step
 *   4 × cycle 8  the same step also drafting 8 for each
 *
 * and prints the ratios the speedup model reads (DFlash paper Eq. 1: L = (T_draft + T_verify) / τ per token against
 * T_decode), with the predicted speedup at acceptance lengths τ = 3.4 and 5.5. --draft-shape tiny: a drafter of
 * vulkan_bench's tiny shape, to try the lab on lavapipe. */
#include "splash.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

typedef struct draft_shape {
    const char *name;
    int32_t layers, heads, kv_heads, head_dim, inter, block, taps[5], mask;
} draft_shape;

static const draft_shape SHAPES[] = {
    {"27b", 5, 32, 8, 128, 17408, 16, {1, 16, 31, 46, 61}, 248070},
    {"tiny", 2, 4, 2, 64, 512, 16, {1, 3, 5, 6, 7}, 4000},
};

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void die(const char *what) {
    fprintf(stderr, "draft_lab: %s: %s\n", what, splash_last_error());
    exit(1);
}

/* The drafter's config.json and a sparse model.safetensors (bf16 zeros) for a target of hidden size H. */
static void write_drafter(const draft_shape *d, int64_t H, const char *dir) {
    char path[8192];
    mkdir(dir, 0755);
    snprintf(path, sizeof path, "%s/config.json", dir);
    FILE *f = fopen(path, "w");
    if (!f) die(path);
    fprintf(f, "{\"architectures\": [\"DFlashDraftModel\"], \"model_type\": \"qwen3\", \"hidden_size\": %lld, "
               "\"num_hidden_layers\": %d, \"num_attention_heads\": %d, \"num_key_value_heads\": %d, \"head_dim\": %d, "
               "\"intermediate_size\": %d, \"rms_norm_eps\": 1e-6, \"rope_theta\": 10000000.0, \"block_size\": %d, "
               "\"dflash_config\": {\"mask_token_id\": %d, \"target_layer_ids\": [%d, %d, %d, %d, %d]}}\n",
            (long long)H, d->layers, d->heads, d->kv_heads, d->head_dim, d->inter, d->block, d->mask, d->taps[0], d->taps[1],
            d->taps[2], d->taps[3], d->taps[4]);
    fclose(f);
    /* tensors: name, rows, cols (cols 0: a vector) */
    struct { char name[96]; int64_t rows, cols; } t[16 * 12 + 3];
    int n = 0;
    int64_t q = (int64_t)d->heads * d->head_dim, kv = (int64_t)d->kv_heads * d->head_dim;
#define T(r, c, ...) (snprintf(t[n].name, sizeof t[n].name, __VA_ARGS__), t[n].rows = (r), t[n].cols = (c), n++)
    T(H, 5 * H, "fc.weight");
    T(H, 0, "hidden_norm.weight");
    T(H, 0, "norm.weight");
    for (int l = 0; l < d->layers; l++) {
        T(H, 0, "layers.%d.input_layernorm.weight", l);
        T(H, 0, "layers.%d.post_attention_layernorm.weight", l);
        T(q, H, "layers.%d.self_attn.q_proj.weight", l);
        T(kv, H, "layers.%d.self_attn.k_proj.weight", l);
        T(kv, H, "layers.%d.self_attn.v_proj.weight", l);
        T(H, q, "layers.%d.self_attn.o_proj.weight", l);
        T(d->head_dim, 0, "layers.%d.self_attn.q_norm.weight", l);
        T(d->head_dim, 0, "layers.%d.self_attn.k_norm.weight", l);
        T(d->inter, H, "layers.%d.mlp.gate_proj.weight", l);
        T(d->inter, H, "layers.%d.mlp.up_proj.weight", l);
        T(H, d->inter, "layers.%d.mlp.down_proj.weight", l);
    }
#undef T
    char *json = malloc(1 << 16);
    int len = snprintf(json, 1 << 16, "{");
    uint64_t off = 0;
    for (int i = 0; i < n; i++) {
        uint64_t bytes = 2 * (uint64_t)t[i].rows * (uint64_t)(t[i].cols ? t[i].cols : 1);
        len += t[i].cols ? snprintf(json + len, (size_t)(1 << 16) - (size_t)len, "%s\"%s\":{\"dtype\":\"BF16\",\"shape\":[%lld,%lld],"
                                    "\"data_offsets\":[%llu,%llu]}", i ? "," : "", t[i].name, (long long)t[i].rows,
                                    (long long)t[i].cols, (unsigned long long)off, (unsigned long long)(off + bytes))
                         : snprintf(json + len, (size_t)(1 << 16) - (size_t)len, "%s\"%s\":{\"dtype\":\"BF16\",\"shape\":[%lld],"
                                    "\"data_offsets\":[%llu,%llu]}", i ? "," : "", t[i].name, (long long)t[i].rows,
                                    (unsigned long long)off, (unsigned long long)(off + bytes));
        off += bytes;
    }
    len += snprintf(json + len, (size_t)(1 << 16) - (size_t)len, "}");
    while (len % 8) json[len++] = ' ';
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    f = fopen(path, "wb");
    if (!f) die(path);
    uint64_t hl = (uint64_t)len;
    fwrite(&hl, 8, 1, f);
    fwrite(json, 1, (size_t)len, f);
    if (fflush(f) || ftruncate(fileno(f), (off_t)(8 + hl + off)) || fclose(f)) die("writing the drafter");
    free(json);
}

static const splash_sampling GREEDY = {.top_p = 1, .repetition_penalty = 1};

typedef struct lab {
    splash_model *m;
    splash_cache *c;
    int32_t *pages, pages_per_seq, context;
    int32_t tokens[4][16];
} lab;

/* n sequences (slots 0 … n − 1) of `rows` rows at the context (a plain step when rows = 1, else verify blocks of
 * rows − 1 drafts), each drafting n_next tokens after its sampled one in the same call. */
static double step(lab *L, int n, int rows, int n_next) {
    splash_seq seqs[4];
    splash_speculate v[4];
    int32_t next[4][16];
    for (int i = 0; i < n; i++) {
        v[i] = (splash_speculate){.n_draft = rows - 1, .n_proposed = rows - 1, .n_next = n_next, .next = next[i]};
        seqs[i] = (splash_seq){.slot = i, .n_past = L->context, .n_tokens = rows, .tokens = L->tokens[i],
                               .pages = L->pages + i * L->pages_per_seq, .n_pages = L->pages_per_seq, .sample = 1, .sampling = GREEDY,
                               .speculate = rows > 1 || n_next > 0 ? &v[i] : NULL};
    }
    double t0 = now();
    if (splash_step(L->m, L->c, seqs, n)) die("step");
    return now() - t0;
}

int main(int argc, char **argv) {
    const char *target = NULL, *shape_name = "27b", *quant_name = "q4";
    int context = 1024, reps = 5;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : "";
        if (!strcmp(a, "--target")) target = v, i++;
        else if (!strcmp(a, "--draft-shape")) shape_name = v, i++;
        else if (!strcmp(a, "--quant")) quant_name = v, i++;
        else if (!strcmp(a, "--context")) context = atoi(v), i++;
        else if (!strcmp(a, "--reps")) reps = atoi(v), i++;
        else {
            fprintf(stderr, "usage: draft_lab --target DIR [--draft-shape 27b|tiny] [--quant q4|q8|bf16] [--context N] [--reps N]\n");
            return 2;
        }
    }
    const draft_shape *ds = NULL;
    for (size_t i = 0; i < sizeof SHAPES / sizeof SHAPES[0]; i++)
        if (!strcmp(SHAPES[i].name, shape_name)) ds = &SHAPES[i];
    int quant = !strcmp(quant_name, "q4") ? SPLASH_QUANT_Q4 : !strcmp(quant_name, "q8") ? SPLASH_QUANT_Q8 : SPLASH_QUANT_NONE;
    if (!target || !ds || (quant == SPLASH_QUANT_NONE && strcmp(quant_name, "bf16")) || context < 16 || reps < 1) {
        fprintf(stderr, "draft_lab: --target DIR is required; --draft-shape 27b|tiny, --quant q4|q8|bf16, --context >= 16\n");
        return 2;
    }

    double t0 = now();
    int32_t kind_quant[SPLASH_N_TENSOR_KINDS]; /* every matrix at the level but the f32 vision tower's */
    for (int32_t k = 0; k < SPLASH_N_TENSOR_KINDS; k++) kind_quant[k] = k == SPLASH_KIND_VISION ? SPLASH_QUANT_NONE : quant;
    splash_load_options o = {sizeof o, kind_quant, 0, 64, SPLASH_BACKEND_VULKAN, 0, NULL};
    lab L = {.context = context};
    if (splash_model_load(target, &o, &L.m)) die(target);
    splash_model_info info = {.struct_size = sizeof info};
    splash_model_get_info(L.m, &info);
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/dflash-%s", target, ds->name);
    write_drafter(ds, info.hidden_size, dir);
    splash_drafter_options d = {sizeof d, SPLASH_DRAFT_DFLASH, dir, 0, 4};
    if (splash_model_attach_drafter(L.m, &d)) die("attach the drafter");
    double load_s = now() - t0;
    enum { PAGE = 64 };
    L.pages_per_seq = (context + 16 + PAGE - 1) / PAGE;
    if (splash_cache_create(L.m, PAGE, 4 * L.pages_per_seq, 4, &L.c)) die("splash_cache_create");
    L.pages = malloc(sizeof(int32_t) * 4 * (size_t)L.pages_per_seq);
    for (int i = 0; i < 4 * L.pages_per_seq; i++) L.pages[i] = i;
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 16; j++) L.tokens[i][j] = (int32_t)((i * 7919 + j * 104729 + 13) % info.vocab_size);

    /* the GPU sat idle while the host wrote and loaded the checkpoints, and its clocks take a few hundred ms to come
     * back: steps for half a second first, or the first figure reads slow (on the H200 one decode row read 37.7 ms
     * while four rows, timed later, took 16.6) */
    for (double t0 = now(); now() - t0 < 0.5;) step(&L, 1, 1, 0);
    /* each figure: the best of reps rounds after a warm-up round, every round taking each figure in turn — timed one
     * figure after another, the first still read 2-4x slow on the H200 after that warm-up (20.99 and 37.69 ms for a
     * decode row whose step vulkan_bench timed at 10.26) */
    enum { N = 6 };
    double best[N];
    const char *names[N] = {"decode (1 row)", "verify 8 rows", "verify 8 + draft 8", "4 x decode", "4 x verify 8 rows", "4 x (verify 8 + draft 8)"};
    for (int k = 0; k < N; k++) best[k] = 1e30;
    for (int r = 0; r <= reps; r++)
        for (int k = 0; k < N; k++) {
            int n = k < 3 ? 1 : 4, rows = k % 3 ? 8 : 1, n_next = k % 3 == 2 ? 8 : 0;
            double s = step(&L, n, rows, n_next);
            if (r > 0) best[k] = fmin(best[k], s);
        }
    double draft1 = best[2] - best[1], draft4 = best[5] - best[4];
    printf("\ndraft_lab: %d-layer target (hidden %d, vocab %d) %s, DFlash drafter %s (%d layers, block %d), on Vulkan; "
           "context %d; load and attach %.1f s; best of %d\n", info.n_layers, info.hidden_size, info.vocab_size, quant_name,
           ds->name, ds->layers, ds->block, context, load_s, reps);
    for (int k = 0; k < N; k++) printf("  %-26s %9.2f ms  %6.2fx one decode step\n", names[k], best[k] * 1e3, best[k] / best[0]);
    printf("  %-26s %9.2f ms  %6.2fx one decode step\n", "draft 8 (cycle - verify)", draft1 * 1e3, draft1 / best[0]);
    printf("  %-26s %9.2f ms  %6.2fx one decode step\n", "4 x draft 8", draft4 * 1e3, draft4 / best[0]);
    /* per cycle (one call: verify, then draft the next block) τ tokens come out where plain decoding emits one per step */
    for (int k = 0; k < 2; k++) {
        double tau = k ? 5.5 : 3.4;
        printf("  predicted speedup at tau = %.1f: %.2fx (1 stream: tau x decode / cycle 8); 4 streams: %.2fx\n", tau,
               tau * best[0] / best[2], tau * best[3] / best[5]);
    }
    printf("{\"lab\":\"draft\",\"layers\":%d,\"quant\":\"%s\",\"context\":%d,\"decode_ms\":%.3f,\"verify8_ms\":%.3f,\"draft8_ms\":%.3f,"
           "\"decode4_ms\":%.3f,\"verify4x8_ms\":%.3f,\"draft4x8_ms\":%.3f}\n", info.n_layers, quant_name, context, best[0] * 1e3,
           best[1] * 1e3, draft1 * 1e3, best[3] * 1e3, best[4] * 1e3, draft4 * 1e3);
    splash_cache_free(L.c);
    splash_model_free(L.m);
    free(L.pages);
    return 0;
}
