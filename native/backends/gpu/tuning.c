/* tuning.c — launch parameters per matrix shape: the tables kernels/generate.ts compiles in from models/<id>/vulkan.json
 * (measured on Vulkan GPUs; a backend whose GPUs they do not describe leaves g->measured off and gets the defaults),
 * overridden by a file the backend's environment variable names (same schema; vulkan_lab writes one for the GEMV,
 * vulkan_prefill_lab for the cooperative-matrix GEMM), so a measurement can be used in the run that made it before it
 * is committed. */
#include "gpu.h"

#include "core/error.h"
#include "core/json.h"
#include "core/quant.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int mtype_named(const char *name) {
    int t = 0;
    while (t < SP_MAT_TYPE_COUNT && (!name || strcmp(name, sp_mtype_name((sp_mtype)t)))) t++;
    return t;
}

/* The index in sp_gpu_coop_tiles of a tuning file's tile object, or -1. */
static int coop_tile_of(const sp_json *o) {
    int64_t v[5];
    static const char *const keys[5] = {"bm", "bn", "bk", "wm", "wn"};
    for (int i = 0; i < 5; i++)
        if (!sp_json_int(sp_json_get(o, keys[i]), &v[i])) return -1;
    for (int i = 0; i < SP_GPU_COOP_TILE_COUNT; i++) {
        const sp_gpu_coop_tile *c = &sp_gpu_coop_tiles[i];
        if (c->bm == v[0] && c->bn == v[1] && c->bk == v[2] && c->wm == v[3] && c->wn == v[4]) return i;
    }
    return -1;
}

splash_status sp_gpu_tuning_load(sp_gpu *g, const char *env) {
    const char *path = getenv(env);
    if (!path || !*path) return SPLASH_OK;
    FILE *f = fopen(path, "rb");
    if (!f) return SP_FAIL(SPLASH_ERR_IO, "%s=%s: cannot open", env, path);
    char *text = malloc(1 << 20);
    size_t len = text ? fread(text, 1, (1 << 20) - 1, f) : 0;
    fclose(f);
    sp_json_doc doc = {0};
    splash_status st = text ? sp_json_parse(&doc, text, len) : SP_FAIL(SPLASH_ERR_OUT_OF_MEMORY, "out of memory");
    if (st) {
        free(text);
        return SP_FAIL(st, "%s=%s: %s", env, path, splash_last_error());
    }
    const sp_json *root = sp_json_root(&doc);
    int64_t x, a, b, c, d, groups;
    if (sp_json_int(sp_json_get(root, "attentionWorkgroups"), &x) && x > 0) g->attention_workgroups = (uint32_t)x;
    if (sp_json_int(sp_json_get(root, "prefillChunk"), &x) && x >= SP_GPU_PREFILL_CHUNK_MIN && x <= SP_GPU_PREFILL_CHUNK_MAX) g->step_tokens = (int32_t)x;
    const sp_json *gemv = sp_json_get(root, "gemv");
    for (const sp_json *e = sp_json_first(gemv); e && g->n_gemv < SP_GPU_MAX_TUNINGS; e = sp_json_next(gemv, e)) {
        int t = mtype_named(sp_json_string(sp_json_get(e, "type")));
        int64_t batch = 1;
        groups = 1;
        sp_json_int(sp_json_get(e, "batch"), &batch);
        sp_json_int(sp_json_get(e, "groups"), &groups);
        int bucket = 0;
        while (bucket < SP_GPU_GEMV_BATCHES && sp_gpu_gemv_batch[bucket] != batch) bucket++;
        if (t == SP_MAT_TYPE_COUNT || bucket == SP_GPU_GEMV_BATCHES || !sp_json_int(sp_json_get(e, "rows"), &a) ||
            !sp_json_int(sp_json_get(e, "cols"), &b) || !sp_json_int(sp_json_get(e, "workgroup"), &c) ||
            !sp_json_int(sp_json_get(e, "rowsPerGroup"), &d) || (c != 32 && c != 64 && c != 128) || d < 1 || groups < 1 ||
            groups > 16 || (groups & (groups - 1)) ||
            !sp_gpu_gemv_launch_ok(&(sp_gpu_mm_launch){.workgroup = (uint32_t)c, .groups = (uint32_t)groups, .rows = (uint32_t)d},
                                   sp_gpu_gemv_max_rows(bucket, 1)))
            continue;
        g->gemv[g->n_gemv++] = (sp_gpu_gemv_tuning){t, a, b, (int)batch, (int)c, (int)groups, (int)d};
    }
    const sp_json *coop = sp_json_get(root, "gemmCoopmat");
    for (const sp_json *e = sp_json_first(coop); e && g->n_gemm_coop < SP_GPU_MAX_TUNINGS; e = sp_json_next(coop, e)) {
        int t = mtype_named(sp_json_string(sp_json_get(e, "type"))), tile = coop_tile_of(sp_json_get(e, "tile"));
        if (t == SP_MAT_TYPE_COUNT || tile < 0 || !sp_json_int(sp_json_get(e, "rows"), &a) || !sp_json_int(sp_json_get(e, "cols"), &b))
            continue; /* a tile this build did not compile: the defaults */
        g->gemm_coop[g->n_gemm_coop++] = (sp_gpu_gemm_tuning){t, a, b, tile};
    }
    sp_json_free(&doc);
    free(text);
    return SPLASH_OK;
}

int32_t sp_gpu_step_tokens(const sp_backend *be, int64_t hidden, int32_t layers) {
    const sp_gpu *g = sp_gpu_of(be);
    if (g->step_tokens) return g->step_tokens;
    for (int i = 0; g->measured && i < sp_gpu_step_tuning_count; i++)
        if (sp_gpu_step_tunings[i].hidden == hidden && sp_gpu_step_tunings[i].layers == layers) return sp_gpu_step_tunings[i].tokens;
    return 0;
}

static bool same_shape(int type, int64_t rows, int64_t cols, const sp_matrix *W) {
    return type == (int)W->type && rows == W->rows && cols == W->cols;
}

int sp_gpu_gemv_bucket(int64_t n) {
    int b = 0;
    while (b + 1 < SP_GPU_GEMV_BATCHES && n > sp_gpu_gemv_batch[b]) b++;
    return b;
}

int sp_gpu_gemv_max_rows(int bucket, int mats) {
    static const int rows[SP_GPU_GEMV_BATCHES] = {8, 4, 2}; /* matmul.comp MAX_ROWS · MATS: accumulators per invocation */
    int r = rows[bucket] / mats;
    return r < 1 ? 1 : r;
}

static sp_gpu_mm_launch launch_of(const sp_gpu_gemv_tuning *t) {
    return (sp_gpu_mm_launch){.workgroup = (uint32_t)t->workgroup, .groups = (uint32_t)t->groups, .rows = (uint32_t)t->rows_per_group};
}

sp_gpu_mm_launch sp_gpu_gemv_params(const sp_gpu *g, const sp_matrix *W, int bucket) {
    const int *d = sp_gpu_default_gemv[bucket];
    sp_gpu_mm_launch l = {.workgroup = (uint32_t)d[0], .groups = (uint32_t)d[1], .rows = (uint32_t)d[2]};
    int batch = sp_gpu_gemv_batch[bucket];
    for (int i = 0; g->measured && i < sp_gpu_gemv_tuning_count; i++)
        if (sp_gpu_gemv_tunings[i].batch == batch && same_shape(sp_gpu_gemv_tunings[i].type, sp_gpu_gemv_tunings[i].rows,
                                                                sp_gpu_gemv_tunings[i].cols, W))
            l = launch_of(&sp_gpu_gemv_tunings[i]);
    for (int i = 0; i < g->n_gemv; i++)
        if (g->gemv[i].batch == batch && same_shape(g->gemv[i].type, g->gemv[i].rows, g->gemv[i].cols, W)) l = launch_of(&g->gemv[i]);
    return l;
}

/* Measured for this shape if tuned, else the narrow tile up to 16 rows (index 1 of sp_gpu_tiles, kernels/generate.ts'
 * DEFAULT_TILES) and the square one above. */
int sp_gpu_gemm_tile(const sp_gpu *g, const sp_matrix *W, int64_t n) {
    for (int i = 0; g->measured && i < sp_gpu_gemm_tuning_count; i++) {
        const sp_gpu_gemm_tuning *t = &sp_gpu_gemm_tunings[i];
        if (same_shape(t->type, t->rows, t->cols, W) && t->tile >= 0) return t->tile;
    }
    return n <= 16 ? 1 : 0;
}

/* The tuning file's tile for this shape, else the measured one, else the largest tile that n rows fill: 128 rows of x
 * per workgroup from 128 up (prefill chunks), 64 below, and 64 weight rows per workgroup for matrices of few rows, which would otherwise leave
 * most of the GPU idle (the index order of kernels/generate.ts' DEFAULT_COOP_TILES). From 512 rows of x the 128 × 128
 * tile steps 64 columns at a time: on the H200 that was the fastest tile on every large matrix of the 27B, bf16 and
 * q4, in chunks of 1024 rows (shorter chunks were not measured, so they keep 32 columns a step). */
int sp_gpu_gemm_coop_tile(const sp_gpu *g, const sp_matrix *W, int64_t n) {
    for (int i = 0; i < g->n_gemm_coop; i++)
        if (same_shape(g->gemm_coop[i].type, g->gemm_coop[i].rows, g->gemm_coop[i].cols, W)) return g->gemm_coop[i].tile;
    for (int i = 0; g->measured && i < sp_gpu_gemm_coop_tuning_count; i++) {
        const sp_gpu_gemm_tuning *t = &sp_gpu_gemm_coop_tunings[i];
        if (same_shape(t->type, t->rows, t->cols, W) && t->tile >= 0) return t->tile;
    }
    if (W->rows < 1024) return 3;
    return n >= 512 ? 4 : n >= 128 ? 0 : 2;
}
