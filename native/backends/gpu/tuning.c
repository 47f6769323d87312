/* tuning.c — launch parameters per matrix shape: the tables kernels/generate.ts compiles in from models/<id>/vulkan.json
 * (measured on Vulkan GPUs; a backend whose GPUs they do not describe leaves g->measured off and gets the defaults),
 * overridden by a file the backend's environment variable names (same schema; vulkan_lab writes one), so a
 * measurement can be used in the run that made it before it is committed. */
#include "gpu.h"

#include "core/error.h"
#include "core/json.h"
#include "core/quant.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
    int64_t x, a, b, c, d;
    if (sp_json_int(sp_json_get(root, "attentionWorkgroups"), &x) && x > 0) g->attention_workgroups = (uint32_t)x;
    const sp_json *gemv = sp_json_get(root, "gemv");
    for (const sp_json *e = sp_json_first(gemv); e && g->n_gemv < SP_GPU_MAX_TUNINGS; e = sp_json_next(gemv, e)) {
        const char *type = sp_json_string(sp_json_get(e, "type"));
        int t = 0;
        while (t < SP_MAT_TYPE_COUNT && (!type || strcmp(type, sp_mtype_name((sp_mtype)t)))) t++;
        if (t == SP_MAT_TYPE_COUNT || !sp_json_int(sp_json_get(e, "rows"), &a) || !sp_json_int(sp_json_get(e, "cols"), &b) ||
            !sp_json_int(sp_json_get(e, "workgroup"), &c) || !sp_json_int(sp_json_get(e, "rowsPerWorkgroup"), &d) ||
            (c != 32 && c != 64 && c != 128) || d < 1 || d > 4)
            continue;
        g->gemv[g->n_gemv++] = (sp_gpu_gemv_tuning){t, a, b, (int)c, (int)d};
    }
    sp_json_free(&doc);
    free(text);
    return SPLASH_OK;
}

static bool same_shape(int type, int64_t rows, int64_t cols, const sp_matrix *W) {
    return type == (int)W->type && rows == W->rows && cols == W->cols;
}

void sp_gpu_gemv_params(const sp_gpu *g, const sp_matrix *W, uint32_t *wg, uint32_t *rows) {
    *wg = SP_GPU_DEFAULT_GEMV_WORKGROUP;
    *rows = SP_GPU_DEFAULT_GEMV_ROWS;
    for (int i = 0; g->measured && i < sp_gpu_gemv_tuning_count; i++) {
        const sp_gpu_gemv_tuning *t = &sp_gpu_gemv_tunings[i];
        if (same_shape(t->type, t->rows, t->cols, W)) *wg = (uint32_t)t->workgroup, *rows = (uint32_t)t->rows_per_workgroup;
    }
    for (int i = 0; i < g->n_gemv; i++) {
        const sp_gpu_gemv_tuning *t = &g->gemv[i];
        if (same_shape(t->type, t->rows, t->cols, W)) *wg = (uint32_t)t->workgroup, *rows = (uint32_t)t->rows_per_workgroup;
    }
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

/* Measured for this shape if tuned, else the largest tile that n rows fill: 128 rows of x per workgroup from 128 up
 * (prefill chunks), 64 below, and 64 weight rows per workgroup for matrices of few rows, which would otherwise leave
 * most of the GPU idle (the index order of kernels/generate.ts' DEFAULT_COOP_TILES). */
int sp_gpu_gemm_coop_tile(const sp_gpu *g, const sp_matrix *W, int64_t n) {
    for (int i = 0; g->measured && i < sp_gpu_gemm_coop_tuning_count; i++) {
        const sp_gpu_gemm_tuning *t = &sp_gpu_gemm_coop_tunings[i];
        if (same_shape(t->type, t->rows, t->cols, W) && t->tile >= 0) return t->tile;
    }
    if (W->rows < 1024) return 3;
    return n >= 128 ? 0 : 2;
}
