/* vulkan_bench.c — the GPU benchmark (scripts/bench/gpu-h200.sh runs it on the H200), without Bun.
 *
 *   build/tools/vulkan_bench [--shape 27b|35b|tiny|tiny-moe] [--quant q4|bf16|q8] [--layers N] [--dir DIR]
 *                            [--context 1024,32768] [--chunk 1024[,2048,...]] [--steps 8] [--json FILE] [--profile]
 *                            [--kv-type f32|f16] [--attention-workgroups N,N,...] [--count]
 *
 * --chunk: the prompt tokens of a prefill step; several (up to 4) measure prefill at each, and the line after them names
 * the one a 32K-token prompt finishes fastest with (the "prefillChunk" of models/<id>/vulkan.json, the engine's step
 * size on a measured GPU; the decode rows do not depend on it).
 * --count: only the dispatches and barriers of one decode step at the short context, of 1, 4 and 16 streams (no
 * timing; they do not depend on the device, so lavapipe gives the H200's), per layer kind (--layers N with N < 4: GDN
 * layers only).
 * --profile: afterwards, the model loaded once more and batch-1 decode steps at the short context with
 * SPLASH_VULKAN_PROFILE=1 (per-op GPU times of the load's copies and of those steps, no prefill, on stderr).
 * --kv-type: the KV cache's element type (default f32). --attention-workgroups: afterwards, batch-1 decode at the long
 * context once more for each count of workgroups a split decode attention aims for (the "attentionWorkgroups" of
 * models/<id>/vulkan.json), on the same loaded model.
 *
 * Measures the whole Qwen3.8-27B (64 layers) or Qwen3.6-35B-A3B (40 layers) — every layer, nothing extrapolated —
 * on weights of the real shapes: prefill tokens/s of a `chunk`-token chunk at 0 and at (long context − chunk)
 * positions, batch-1 decode tokens/s at 1K and 32K context, total decode tokens/s of 4 and 16 streams at 1K, and
 * the dispatches and barriers one decode step records. Each row is printed beside llama.cpp's CUDA build on the same
 * H200 (the peer numbers below) and the roofline. --layers N measures the first N layers only (smoke runs).
 *
 * Weights. A checkpoint of the real model is 17–70 GB, too much to generate on the host in a device lease, so the
 * benchmark writes a sparse one: the large projection matrices (experts, attention, MLP, lm_head) are holes of the
 * file, read back as zeros, and everything that steers the computation — the embedding, norms, router gates, conv
 * and decay parameters — is random, so hidden states differ per token and routing spreads over the experts as with
 * real weights. The kernels read every byte of every matrix whatever its value (no kernel branches on weights), so a
 * zero matrix costs what a random one does. The loader quantizes and uploads all of it like any checkpoint.
 * Positions before the measured chunk hold zeros in the KV cache: attention reads them all the same, so the cost at a
 * context does not depend on having prefilled it.
 *
 * Roofline fraction = (bytes a decode step must read ÷ measured read bandwidth) ÷ measured step time; the bandwidth
 * is the device's (kernels/stream.comp), measured in the same process. Prints a table and, with --json, writes every
 * raw figure. */
#include "api/model.h"
#include "backends/gpu/gpu.h"
#include "backends/vulkan/vulkan.h"
#include "core/threadpool.h"
#include "splash.h"

#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

typedef struct shape {
    const char *name, *model;
    bool moe;
    int32_t vocab, hidden, heads, kv_heads, head_dim, k_heads, v_heads, k_dim, v_dim, inter, experts, top_k, moe_inter,
        shared_inter, layers; /* layers: the real model's */
} shape;

static const shape SHAPES[] = {
    {"27b", "Qwen3.8-27B", false, 248320, 5120, 24, 4, 256, 16, 48, 128, 128, 17408, 0, 0, 0, 0, 64},
    {"35b", "Qwen3.6-35B-A3B", true, 248320, 2048, 16, 2, 256, 16, 32, 128, 128, 0, 256, 8, 512, 512, 40},
    /* small shapes with the same structure, for trying the whole benchmark on lavapipe */
    {"tiny", "tiny dense", false, 4096, 256, 4, 2, 64, 2, 4, 32, 32, 512, 0, 0, 0, 0, 8},
    {"tiny-moe", "tiny MoE", true, 4096, 256, 4, 1, 64, 2, 4, 32, 32, 0, 16, 4, 64, 64, 8},
};

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void die(const char *what) {
    fprintf(stderr, "vulkan_bench: %s: %s\n", what, splash_last_error());
    exit(1);
}

/* ---- the random checkpoint ---- */

typedef struct tensor {
    char name[128];
    int64_t shape[3];
    int ndim;
    float lo, hi; /* uniform draw */
} tensor;

static int add(tensor *t, int n, float lo, float hi, const char *fmt, int layer, int ndim, int64_t a, int64_t b, int64_t c) {
    tensor *x = &t[n];
    snprintf(x->name, sizeof x->name, fmt, layer);
    x->ndim = ndim, x->shape[0] = a, x->shape[1] = b, x->shape[2] = c, x->lo = lo, x->hi = hi;
    return n + 1;
}

/* Every tensor of a text-only checkpoint with `layers` layers; projections ~ U(±√3/√fan_in) keep activations O(1). */
static int tensors(const shape *s, int layers, tensor *t) {
    int n = 0;
    float e = 1.7f;
#define U(fan) (-1.7f / sqrtf((float)(fan))), (1.7f / sqrtf((float)(fan)))
    int64_t H = s->hidden, conv = 2 * (int64_t)s->k_heads * s->k_dim + (int64_t)s->v_heads * s->v_dim, vd = (int64_t)s->v_heads * s->v_dim;
    n = add(t, n, -e, e, "model.embed_tokens.weight", 0, 2, s->vocab, H, 0);
    n = add(t, n, -0.2f, 0.2f, "model.norm.weight", 0, 1, H, 0, 0);
    n = add(t, n, U(H), "lm_head.weight", 0, 2, s->vocab, H, 0);
    for (int l = 0; l < layers; l++) {
        n = add(t, n, -0.2f, 0.2f, "model.layers.%d.input_layernorm.weight", l, 1, H, 0, 0);
        n = add(t, n, -0.2f, 0.2f, "model.layers.%d.post_attention_layernorm.weight", l, 1, H, 0, 0);
        if (l % 4 == 3) {
            int64_t q = (int64_t)s->heads * s->head_dim;
            n = add(t, n, U(H), "model.layers.%d.self_attn.q_proj.weight", l, 2, 2 * q, H, 0);
            n = add(t, n, U(H), "model.layers.%d.self_attn.k_proj.weight", l, 2, (int64_t)s->kv_heads * s->head_dim, H, 0);
            n = add(t, n, U(H), "model.layers.%d.self_attn.v_proj.weight", l, 2, (int64_t)s->kv_heads * s->head_dim, H, 0);
            n = add(t, n, U(q), "model.layers.%d.self_attn.o_proj.weight", l, 2, H, q, 0);
            n = add(t, n, -0.2f, 0.2f, "model.layers.%d.self_attn.q_norm.weight", l, 1, s->head_dim, 0, 0);
            n = add(t, n, -0.2f, 0.2f, "model.layers.%d.self_attn.k_norm.weight", l, 1, s->head_dim, 0, 0);
        } else {
            n = add(t, n, U(H), "model.layers.%d.linear_attn.in_proj_qkv.weight", l, 2, conv, H, 0);
            n = add(t, n, U(H), "model.layers.%d.linear_attn.in_proj_z.weight", l, 2, vd, H, 0);
            n = add(t, n, U(H), "model.layers.%d.linear_attn.in_proj_b.weight", l, 2, s->v_heads, H, 0);
            n = add(t, n, U(H), "model.layers.%d.linear_attn.in_proj_a.weight", l, 2, s->v_heads, H, 0);
            n = add(t, n, -0.8f, 0.8f, "model.layers.%d.linear_attn.conv1d.weight", l, 3, conv, 1, 4);
            n = add(t, n, -3.0f, 1.6f, "model.layers.%d.linear_attn.A_log", l, 1, s->v_heads, 0, 0);
            n = add(t, n, -2.0f, 0.5f, "model.layers.%d.linear_attn.dt_bias", l, 1, s->v_heads, 0, 0);
            n = add(t, n, 0.6f, 1.4f, "model.layers.%d.linear_attn.norm.weight", l, 1, s->v_dim, 0, 0);
            n = add(t, n, U(vd), "model.layers.%d.linear_attn.out_proj.weight", l, 2, H, vd, 0);
        }
        if (s->moe) {
            n = add(t, n, U(H), "model.layers.%d.mlp.gate.weight", l, 2, s->experts, H, 0);
            n = add(t, n, U(H), "model.layers.%d.mlp.experts.gate_up_proj", l, 3, s->experts, 2 * (int64_t)s->moe_inter, H);
            n = add(t, n, U(s->moe_inter), "model.layers.%d.mlp.experts.down_proj", l, 3, s->experts, H, s->moe_inter);
            n = add(t, n, U(H), "model.layers.%d.mlp.shared_expert.gate_proj.weight", l, 2, s->shared_inter, H, 0);
            n = add(t, n, U(H), "model.layers.%d.mlp.shared_expert.up_proj.weight", l, 2, s->shared_inter, H, 0);
            n = add(t, n, U(s->shared_inter), "model.layers.%d.mlp.shared_expert.down_proj.weight", l, 2, H, s->shared_inter, 0);
            n = add(t, n, U(H), "model.layers.%d.mlp.shared_expert_gate.weight", l, 2, 1, H, 0);
        } else {
            n = add(t, n, U(H), "model.layers.%d.mlp.gate_proj.weight", l, 2, s->inter, H, 0);
            n = add(t, n, U(H), "model.layers.%d.mlp.up_proj.weight", l, 2, s->inter, H, 0);
            n = add(t, n, U(s->inter), "model.layers.%d.mlp.down_proj.weight", l, 2, H, s->inter, 0);
        }
    }
#undef U
    return n;
}

static int64_t numel(const tensor *t) {
    int64_t n = 1;
    for (int i = 0; i < t->ndim; i++) n *= t->shape[i];
    return n;
}

static void write_config(const shape *s, const char *dir, int layers) {
    char path[8192];
    snprintf(path, sizeof path, "%s/config.json", dir);
    FILE *f = fopen(path, "w");
    if (!f) die(path);
    fprintf(f, "{\"model_type\": \"%s\", \"vocab_size\": %d, \"hidden_size\": %d, \"num_hidden_layers\": %d, "
               "\"full_attention_interval\": 4, \"num_attention_heads\": %d, \"num_key_value_heads\": %d, \"head_dim\": %d, "
               "\"linear_num_key_heads\": %d, \"linear_num_value_heads\": %d, \"linear_key_head_dim\": %d, "
               "\"linear_value_head_dim\": %d, \"linear_conv_kernel_dim\": 4, \"rms_norm_eps\": 1e-6, "
               "\"rope_parameters\": {\"rope_theta\": 10000000.0, \"partial_rotary_factor\": 0.25}, \"tie_word_embeddings\": false",
            s->moe ? "qwen3_5_moe" : "qwen3_5", s->vocab, s->hidden, layers, s->heads, s->kv_heads, s->head_dim, s->k_heads,
            s->v_heads, s->k_dim, s->v_dim);
    if (s->moe)
        fprintf(f, ", \"num_experts\": %d, \"num_experts_per_tok\": %d, \"moe_intermediate_size\": %d, "
                   "\"shared_expert_intermediate_size\": %d}\n", s->experts, s->top_k, s->moe_inter, s->shared_inter);
    else fprintf(f, ", \"intermediate_size\": %d}\n", s->inter);
    fclose(f);
}

typedef struct fill_job {
    uint16_t *buf;
    float lo, hi;
    uint64_t seed;
} fill_job;

static void fill(void *ctx, int64_t b, int64_t e, int thread) {
    const fill_job *j = ctx;
    uint64_t x = j->seed ^ (uint64_t)(b + 1) * 0x9E3779B97F4A7C15ull;
    for (int64_t i = b; i < e; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        float f = j->lo + (j->hi - j->lo) * (float)((x >> 40) * 0x1.0p-24);
        uint32_t u;
        memcpy(&u, &f, 4);
        j->buf[i] = (uint16_t)((u + 0x8000) >> 16);
    }
}

/* Whether tensor t gets random values; the rest are holes (zeros): the large matrices, except the embedding, which
 * makes each token's hidden state its own. */
static bool random_tensor(const tensor *t) {
    return numel(t) < (1 << 24) || strstr(t->name, "embed_tokens");
}

/* Writes <dir>/model.safetensors (bf16, sparse) with `layers` layers unless a file of the right size is there. */
static void write_checkpoint(const shape *s, const char *dir, int layers, sp_threadpool *pool) {
    static tensor t[4096];
    int n = tensors(s, layers, t);
    char *json = malloc(1 << 20), path[8192], tmp[8300];
    int len = snprintf(json, 1 << 20, "{");
    uint64_t off = 0;
    for (int i = 0; i < n; i++) {
        uint64_t bytes = 2 * (uint64_t)numel(&t[i]);
        len += snprintf(json + len, (size_t)(1 << 20) - (size_t)len, "%s\"%s\":{\"dtype\":\"BF16\",\"shape\":[%lld", i ? "," : "",
                        t[i].name, (long long)t[i].shape[0]);
        for (int d = 1; d < t[i].ndim; d++) len += snprintf(json + len, (size_t)(1 << 20) - (size_t)len, ",%lld", (long long)t[i].shape[d]);
        len += snprintf(json + len, (size_t)(1 << 20) - (size_t)len, "],\"data_offsets\":[%llu,%llu]}", (unsigned long long)off,
                        (unsigned long long)(off + bytes));
        off += bytes;
    }
    len += snprintf(json + len, (size_t)(1 << 20) - (size_t)len, "}");
    while ((8 + len) % 8) json[len++] = ' ';
    uint64_t total = 8 + (uint64_t)len + off;
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    struct stat st;
    if (!stat(path, &st) && (uint64_t)st.st_size == total) {
        free(json);
        return;
    }
    double t0 = now();
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "wb");
    if (!f) die(tmp);
    uint64_t hl = (uint64_t)len, written = 0;
    fwrite(&hl, 8, 1, f);
    fwrite(json, 1, (size_t)len, f);
    enum { CHUNK = 64 << 20 };
    uint16_t *buf = malloc(sizeof(uint16_t) * CHUNK);
    for (int i = 0; i < n; i++) {
        if (!random_tensor(&t[i])) {
            if (fseeko(f, (off_t)(2 * numel(&t[i])), SEEK_CUR)) die("seeking in the checkpoint");
            continue;
        }
        for (int64_t left = numel(&t[i]), k = 0; left > 0; k++) {
            int64_t m = left < CHUNK ? left : CHUNK;
            fill_job j = {buf, t[i].lo, t[i].hi, (uint64_t)i * 1000003 + (uint64_t)k};
            sp_parallel_for(pool, m, fill, &j);
            if (fwrite(buf, 2, (size_t)m, f) != (size_t)m) die("writing the checkpoint (disk full?)");
            left -= m;
            written += 2 * (uint64_t)m;
        }
    }
    if (fflush(f) || ftruncate(fileno(f), (off_t)total) || fclose(f) || rename(tmp, path)) die("closing the checkpoint");
    free(buf);
    free(json);
    fprintf(stderr, "wrote %s: %.1f GB (%.1f GB random, the rest holes) in %.1f s\n", path, (double)total / 1e9,
            (double)written / 1e9, now() - t0);
}

/* ---- measurements ---- */

typedef struct figures {
    int layers;
    double load_s;
    double prefill[4][2]; /* per --chunk: seconds for one chunk at position 0 and at long − chunk */
    double decode[2];    /* seconds per batch-1 step at the two contexts */
    double streams[2];   /* seconds per step of 4 and of 16 sequences at the short context */
    double weight_bytes, kv_bytes_per_token, state_bytes; /* per decoded token, from splash_model_info */
    uint64_t dispatches[3], barriers[3]; /* recorded by one decode step of 1, 4 and 16 streams */
    double split_decode[8];        /* seconds per batch-1 step at the long context, per --attention-workgroups value */
} figures;

/* The same rows for llama.cpp's CUDA build on one H200 (random weights of the real shapes, every matrix Q4_0, 4.5
 * bits/weight; llama-bench -ngl 99 -fa 1 -p 1024 -n 128 -d 0,1024,31744 -r 3 and llama-batched-bench -ngl 99 -fa on
 * -c 20480 -npp 1024 -ntg 128 -npl 1,4,16, v0.5.0, 2026-12-01), and the goals set against them; 0 = not measured. */
typedef struct peer {
    const char *shape, *quant;
    double llama[4]; /* decode 1K, 32K, 4 streams, 16 streams (tokens/s) */
    double goal[4];
} peer;

static const peer PEERS[] = {
    {"27b", "q4", {101.6, 92.0, 284.9, 509.8}, {190, 130, 600, 1500}},
    {"35b", "q4", {260.0, 243.3, 655.4, 1096}, {400, 320, 0, 1500}},
    {"27b", "bf16", {59.6, 57.4, 0, 0}, {72, 0, 0, 0}},
};

typedef struct bench {
    const shape *s;
    int quant;
    int contexts[2], steps;
    int chunks[4], n_chunks, chunk; /* chunk: the largest (the model's step size, the pages' room) */
    bool profile;
    bool decode_only; /* batch-1 decode at the short context only (the profile's pass) */
    bool count;       /* one decode step of 1, 4 and 16 streams, for their dispatches and barriers */
    int32_t kv_type;
    uint32_t attention_workgroups[8];
    int n_attention_workgroups;
} bench;

static const splash_sampling GREEDY = {.top_p = 1, .repetition_penalty = 1};

/* One step over n sequences, each with n_tokens from position n_past (slots 0..n−1, pages laid out per slot). */
static double step(splash_model *m, splash_cache *c, int n, int n_past, int n_tokens, int pages_per_seq, int32_t *pages,
                   int32_t *tokens) {
    splash_seq seqs[16];
    for (int i = 0; i < n; i++) {
        for (int p = 0; p < pages_per_seq; p++) pages[i * pages_per_seq + p] = i * pages_per_seq + p;
        seqs[i] = (splash_seq){.slot = i, .n_past = n_past, .n_tokens = n_tokens, .tokens = tokens + (size_t)i * (size_t)n_tokens,
                               .pages = pages + i * pages_per_seq, .n_pages = pages_per_seq, .sample = 1, .sampling = GREEDY};
    }
    double t0 = now();
    if (splash_step(m, c, seqs, n)) die("splash_step");
    return now() - t0;
}

static figures measure(const bench *b, const char *dir, int layers) {
    figures f = {.layers = layers};
    enum { PAGE = 64 };
    int32_t kind_quant[SPLASH_N_TENSOR_KINDS]; /* every matrix at the level but the f32 vision tower's */
    for (int32_t k = 0; k < SPLASH_N_TENSOR_KINDS; k++) kind_quant[k] = k == SPLASH_KIND_VISION ? SPLASH_QUANT_NONE : b->quant;
    splash_load_options o = {sizeof o, kind_quant, 0, b->chunk, SPLASH_BACKEND_VULKAN, 0, NULL};
    double t0 = now();
    splash_model *m;
    if (splash_model_load(dir, &o, &m)) die(dir);
    f.load_s = now() - t0;
    if (splash_model_set_kv_type(m, b->kv_type)) die("splash_model_set_kv_type");
    splash_model_info info = {.struct_size = sizeof info};
    splash_model_get_info(m, &info);
    f.weight_bytes = (double)info.decode_bytes_per_token;
    f.kv_bytes_per_token = (double)info.kv_bytes_per_token;
    f.state_bytes = (double)info.state_bytes;
    int long_ctx = b->contexts[1], pages_per_seq = (long_ctx + b->chunk + PAGE - 1) / PAGE;
    splash_cache *c;
    if (splash_cache_create(m, PAGE, 16 * pages_per_seq, 16, &c)) die("splash_cache_create");
    int32_t *pages = malloc(sizeof(int32_t) * 16 * (size_t)pages_per_seq), *tokens = malloc(sizeof(int32_t) * 16 * (size_t)b->chunk);
    for (int i = 0; i < 16 * b->chunk; i++) tokens[i] = (int32_t)((i * 7919u + 13u) % (uint32_t)info.vocab_size);
    /* prefill: per chunk size, a chunk at position 0 and one ending at the long context, after a warm-up */
    for (int i = 0; i < b->n_chunks && !b->decode_only && !b->count; i++) {
        int n = b->chunks[i];
        step(m, c, 1, 0, n, pages_per_seq, pages, tokens);
        for (int k = 0; k < 2; k++) f.prefill[i][k] = step(m, c, 1, k ? long_ctx - n : 0, n, pages_per_seq, pages, tokens);
    }
    /* batch-1 decode at both contexts, then 4 and 16 streams at the short one: best step after a warm-up */
    const sp_gpu *gpu = sp_gpu_of(&m->be);
    int streams[2] = {4, 16};
    for (int k = 0; k < (b->decode_only ? 1 : 4); k++) {
        if (b->count && k == 1) continue; /* the long context records what the short one does */
        int n = k < 2 ? 1 : streams[k - 2], ctx = k == 1 ? long_ctx : b->contexts[0], at = k == 0 ? 0 : k - 1;
        double best = 1e30;
        step(m, c, n, ctx - 1, 1, pages_per_seq, pages, tokens);
        for (int r = 0; r < b->steps; r++) {
            uint64_t d0 = gpu->n_commands, b0 = gpu->n_barriers;
            best = fmin(best, step(m, c, n, ctx + r, 1, pages_per_seq, pages, tokens));
            if (k != 1) f.dispatches[at] = gpu->n_commands - d0, f.barriers[at] = gpu->n_barriers - b0;
        }
        if (k < 2) f.decode[k] = best;
        else f.streams[k - 2] = best;
    }
    sp_gpu *g = sp_gpu_of(&m->be);
    uint32_t measured_workgroups = g->attention_workgroups;
    for (int a = 0; a < b->n_attention_workgroups; a++) {
        g->attention_workgroups = b->attention_workgroups[a];
        double best = 1e30;
        step(m, c, 1, long_ctx - 1, 1, pages_per_seq, pages, tokens);
        for (int r = 0; r < b->steps; r++) best = fmin(best, step(m, c, 1, long_ctx + r, 1, pages_per_seq, pages, tokens));
        f.split_decode[a] = best;
    }
    g->attention_workgroups = measured_workgroups;
    free(pages);
    free(tokens);
    splash_cache_free(c);
    splash_model_free(m); /* with SPLASH_VULKAN_PROFILE set, prints the per-op table here */
    return f;
}

/* "  123.4  (0.45× llama.cpp; goal 190)" or blanks where there is no peer figure. */
static void beside(double tps, double llama, double goal) {
    if (llama > 0) printf(" %10.1f %6.2fx", llama, tps / llama);
    else printf(" %10s %7s", "", "");
    if (goal > 0) printf(" %8.0f %s", goal, tps >= goal ? "met" : "not met");
    printf("\n");
}

int main(int argc, char **argv) {
    const char *shape_name = "27b", *quant_name = "q4", *dir_root = "/tmp/splash-vulkan-bench", *json = NULL;
    int layers = 0;
    bench b = {.contexts = {1024, 32768}, .chunks = {1024}, .n_chunks = 1, .steps = 8};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : "";
        if (!strcmp(a, "--shape")) shape_name = v, i++;
        else if (!strcmp(a, "--quant")) quant_name = v, i++;
        else if (!strcmp(a, "--dir")) dir_root = v, i++;
        else if (!strcmp(a, "--json")) json = v, i++;
        else if (!strcmp(a, "--layers")) layers = atoi(v), i++;
        else if (!strcmp(a, "--context")) sscanf(v, "%d,%d", &b.contexts[0], &b.contexts[1]), i++;
        else if (!strcmp(a, "--chunk")) {
            b.n_chunks = 0;
            for (char *t = strtok((char *)v, ","); t && b.n_chunks < 4; t = strtok(NULL, ",")) b.chunks[b.n_chunks++] = atoi(t);
            i++;
        }
        else if (!strcmp(a, "--steps")) b.steps = atoi(v), i++;
        else if (!strcmp(a, "--profile")) b.profile = true;
        else if (!strcmp(a, "--count")) b.count = true, b.steps = 1;
        else if (!strcmp(a, "--kv-type")) {
            b.kv_type = !strcmp(v, "f16") ? SPLASH_KV_F16 : !strcmp(v, "int8") ? SPLASH_KV_INT8 : !strcmp(v, "f32") ? SPLASH_KV_F32 : -1, i++;
            if (b.kv_type < 0) {
                fprintf(stderr, "vulkan_bench: --kv-type f32|f16|int8\n");
                return 2;
            }
        } else if (!strcmp(a, "--attention-workgroups")) {
            for (char *t = strtok((char *)v, ","); t && b.n_attention_workgroups < 8; t = strtok(NULL, ","))
                if (atoi(t) > 0) b.attention_workgroups[b.n_attention_workgroups++] = (uint32_t)atoi(t);
            i++;
        } else {
            fprintf(stderr, "usage: vulkan_bench [--shape 27b|35b|tiny|tiny-moe] [--quant q4|q8|bf16] [--layers N] [--dir DIR]\n"
                            "       [--context SHORT,LONG] [--chunk N[,N...]] [--steps N] [--json FILE] [--profile]\n"
                            "       [--kv-type f32|f16|int8] [--attention-workgroups N,N,...] [--count]\n");
            return 2;
        }
    }
    for (size_t i = 0; i < sizeof SHAPES / sizeof SHAPES[0]; i++)
        if (!strcmp(SHAPES[i].name, shape_name)) b.s = &SHAPES[i];
    b.quant = !strcmp(quant_name, "q4") ? SPLASH_QUANT_Q4 : !strcmp(quant_name, "q8") ? SPLASH_QUANT_Q8 : SPLASH_QUANT_NONE;
    if (!b.s || (b.quant == SPLASH_QUANT_NONE && strcmp(quant_name, "bf16"))) {
        fprintf(stderr, "vulkan_bench: unknown shape %s or quant %s\n", shape_name, quant_name);
        return 2;
    }
    if (!layers) layers = b.s->layers;
    b.chunk = 0;
    for (int i = 0; i < b.n_chunks; i++) b.chunk = b.chunks[i] > b.chunk ? b.chunks[i] : b.chunk;
    if (b.n_chunks < 1 || b.chunks[b.n_chunks - 1] < 1 || b.contexts[1] < b.chunk || layers < 1 || layers > b.s->layers || b.steps < 1) {
        fprintf(stderr, "vulkan_bench: chunks >= 1, the long context must hold a chunk, 1 <= --layers <= %d, --steps >= 1\n", b.s->layers);
        return 2;
    }

    /* the device and its bandwidth, in this process */
    sp_threadpool *pool;
    if (sp_threadpool_create(0, &pool)) die("threads");
    sp_backend be;
    splash_status st = SPLASH_OK;
    if (sp_vulkan_backend_create(&be, pool, sp_threadpool_size(pool), &st, true)) die("vulkan");
    double gbs = 0;
    bool small = b.s->hidden < 1024;
    if (!b.count && sp_gpu_read_bandwidth(&be, small ? (64ull << 20) : (4ull << 30), small ? 2 : 8, 3, &gbs)) die("bandwidth");
    char device[256];
    snprintf(device, sizeof device, "%s", be.device); /* the name and the kernel paths it takes */
    sp_vulkan_backend_destroy(&be);

    char dir[2048];
    snprintf(dir, sizeof dir, "%s/%s-%dl", dir_root, b.s->name, layers);
    mkdir(dir_root, 0755);
    mkdir(dir, 0755);
    write_checkpoint(b.s, dir, layers, pool);
    write_config(b.s, dir, layers);
    sp_threadpool_free(pool);

    figures f = measure(&b, dir, layers);
    if (b.count) {
        static const int nstreams3[3] = {1, 4, 16};
        for (int k = 0; k < 3; k++)
            printf("%s (%d of %d layers) %s: one decode step of %d stream%s at %d records %llu dispatches, %llu barriers\n",
                   b.s->model, layers, b.s->layers, quant_name, nstreams3[k], k ? "s" : "", b.contexts[0],
                   (unsigned long long)f.dispatches[k], (unsigned long long)f.barriers[k]);
        return 0;
    }
    if (b.profile) { /* once more with per-op timestamps (they cost time, so not in the figures); table on stderr */
        setenv("SPLASH_VULKAN_PROFILE", "1", 1);
        bench p = b;
        p.steps = 4, p.decode_only = true, p.n_attention_workgroups = 0;
        printf("profile: %d batch-1 decode steps at %d (a warm-up and %d measured)\n", p.steps + 1, b.contexts[0], p.steps);
        measure(&p, dir, layers);
        unsetenv("SPLASH_VULKAN_PROFILE");
    }

    /* bytes a decode step reads: weights once, each stream's KV up to its context, its GDN state in and out */
    double bytes1[2], bytesS[2], bw = gbs * 1e9, wbytes = f.weight_bytes, kv = f.kv_bytes_per_token, state = f.state_bytes;
    for (int k = 0; k < 2; k++) bytes1[k] = wbytes + kv * b.contexts[k] + 2 * state;
    int nstreams[2] = {4, 16};
    for (int k = 0; k < 2; k++) bytesS[k] = wbytes + nstreams[k] * (kv * b.contexts[0] + 2 * state);
    const peer *pe = NULL;
    for (size_t i = 0; i < sizeof PEERS / sizeof PEERS[0]; i++)
        if (!strcmp(PEERS[i].shape, b.s->name) && !strcmp(PEERS[i].quant, quant_name) && layers == b.s->layers) pe = &PEERS[i];
    static const peer none = {0};
    if (!pe) pe = &none;
    static const char *const KV_NAMES[] = {"f32", "f16", "int8"};
    printf("\n%s (%d of %d layers) %s, %s KV, on %s — read bandwidth %.1f GB/s; load %.1f s\n", b.s->model, layers,
           b.s->layers, quant_name, KV_NAMES[b.kv_type], device, gbs, f.load_s);
    printf("  %-36s %10s %9s %9s %10s %7s %8s\n", "", "tokens/s", "GB/token", "roofline", "llama.cpp", "ratio", "goal");
    /* a prompt of the long context prefilled in chunks costs about the mean of a token's cost at 0 and at its end */
    int fastest = 0;
    double prompt_s[4];
    for (int i = 0; i < b.n_chunks; i++) {
        int n = b.chunks[i];
        prompt_s[i] = b.contexts[1] * (f.prefill[i][0] + f.prefill[i][1]) / (2.0 * n);
        if (prompt_s[i] < prompt_s[fastest]) fastest = i;
        printf("  prefill, chunk of %-5d from 0           %10.0f\n", n, n / f.prefill[i][0]);
        printf("  prefill, chunk of %-5d up to %-7d   %10.0f\n", n, b.contexts[1], n / f.prefill[i][1]);
    }
    if (b.n_chunks > 1)
        printf("  a %d-token prompt prefills fastest in chunks of %d: about %.2f s (%.0f tokens/s)\n", b.contexts[1],
               b.chunks[fastest], prompt_s[fastest], b.contexts[1] / prompt_s[fastest]);
    for (int k = 0; k < 2; k++) {
        double tps = 1 / f.decode[k];
        printf("  decode, batch 1 at %-7d            %10.1f %9.2f %8.0f%%", b.contexts[k], tps, bytes1[k] / 1e9,
               100 * bytes1[k] / bw / f.decode[k]);
        beside(tps, pe->llama[k], pe->goal[k]);
    }
    for (int k = 0; k < 2; k++) {
        double tps = nstreams[k] / f.streams[k];
        printf("  decode, %2d streams at %-7d (total) %10.1f %9.2f %8.0f%%", nstreams[k], b.contexts[0], tps,
               bytesS[k] / nstreams[k] / 1e9, 100 * bytesS[k] / bw / f.streams[k]);
        beside(tps, pe->llama[2 + k], pe->goal[2 + k]);
    }
    printf("  one decode step: %llu dispatches, %llu barriers (%.1f and %.1f per layer); 4 / 16 streams: %llu / %llu barriers, cost %.2fx / %.2fx one\n",
           (unsigned long long)f.dispatches[0], (unsigned long long)f.barriers[0], (double)f.dispatches[0] / layers,
           (double)f.barriers[0] / layers, (unsigned long long)f.barriers[1], (unsigned long long)f.barriers[2],
           f.streams[0] / f.decode[0], f.streams[1] / f.decode[0]);
    for (int a = 0; a < b.n_attention_workgroups; a++)
        printf("  decode, batch 1 at %-7d, attention split for %4u workgroups: %8.1f tokens/s, %.0f%% of roofline\n",
               b.contexts[1], b.attention_workgroups[a], 1 / f.split_decode[a], 100 * bytes1[1] / bw / f.split_decode[a]);
    if (json) {
        FILE *j = fopen(json, "a");
        if (!j) die(json);
        fprintf(j, "{\"shape\":\"%s\",\"model\":\"%s\",\"quant\":\"%s\",\"kv_type\":\"%s\",\"device\":\"%s\",\"bandwidth_gbs\":%.1f,\"layers\":%d,"
                   "\"load_s\":%.2f,\"contexts\":[%d,%d],\"prefill\":[",
                b.s->name, b.s->model, quant_name, KV_NAMES[b.kv_type], device, gbs, layers, f.load_s, b.contexts[0], b.contexts[1]);
        for (int i = 0; i < b.n_chunks; i++)
            fprintf(j, "%s{\"chunk\":%d,\"tps\":[%.1f,%.1f]}", i ? "," : "", b.chunks[i], b.chunks[i] / f.prefill[i][0],
                    b.chunks[i] / f.prefill[i][1]);
        fprintf(j, "],\"decode_tps\":[%.2f,%.2f],"
                   "\"streams_tps\":{\"4\":%.2f,\"16\":%.2f},\"decode_roofline\":[%.3f,%.3f],\"bytes_per_token\":[%.0f,%.0f],"
                   "\"weight_bytes\":%.0f,\"kv_bytes_per_token\":%.0f,\"state_bytes\":%.0f,\"dispatches\":[%llu,%llu,%llu],\"barriers\":[%llu,%llu,%llu]}\n",
                1 / f.decode[0], 1 / f.decode[1], 4 / f.streams[0],
                16 / f.streams[1], bytes1[0] / bw / f.decode[0], bytes1[1] / bw / f.decode[1], bytes1[0], bytes1[1], wbytes, kv,
                state, (unsigned long long)f.dispatches[0], (unsigned long long)f.dispatches[1], (unsigned long long)f.dispatches[2],
                (unsigned long long)f.barriers[0], (unsigned long long)f.barriers[1], (unsigned long long)f.barriers[2]);
        fclose(j);
    }
    return 0;
}
