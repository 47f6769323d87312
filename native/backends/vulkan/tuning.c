/* tuning.c — launch parameters per matrix shape: the tables kernels/generate.ts compiles in from models/<id>/vulkan.json,
 * overridden by a file named in SPLASH_VULKAN_TUNING (same schema; vulkan_lab writes one), so a measurement can be
 * used in the run that made it before it is committed. */
#include "vk.h"

#include "core/error.h"
#include "core/json.h"
#include "core/quant.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *TYPES[] = {"f32", "bf16", "f16", "q8", "q4"};

static int type_of(const char *name) {
    for (int i = 0; name && i < 5; i++)
        if (!strcmp(name, TYPES[i])) return i;
    return -1;
}

splash_status sp_vk_tuning_load(sp_vk *vk) {
    vk->attention_workgroups = SP_VK_ATTENTION_WORKGROUPS;
    const char *path = getenv("SPLASH_VULKAN_TUNING");
    if (!path || !*path) return SPLASH_OK;
    FILE *f = fopen(path, "rb");
    if (!f) return SP_FAIL(SPLASH_ERR_IO, "SPLASH_VULKAN_TUNING=%s: cannot open", path);
    char *text = malloc(1 << 20);
    size_t len = text ? fread(text, 1, (1 << 20) - 1, f) : 0;
    fclose(f);
    sp_json_doc doc = {0};
    splash_status st = text ? sp_json_parse(&doc, text, len) : SP_FAIL(SPLASH_ERR_OUT_OF_MEMORY, "out of memory");
    if (st) {
        free(text);
        return SP_FAIL(st, "SPLASH_VULKAN_TUNING=%s: %s", path, splash_last_error());
    }
    const sp_json *root = sp_json_root(&doc);
    int64_t x, a, b, c, d;
    if (sp_json_int(sp_json_get(root, "attentionWorkgroups"), &x) && x > 0) vk->attention_workgroups = (uint32_t)x;
    const sp_json *gemv = sp_json_get(root, "gemv");
    for (const sp_json *e = sp_json_first(gemv); e && vk->n_gemv < SP_VK_MAX_TUNINGS; e = sp_json_next(gemv, e)) {
        int t = type_of(sp_json_string(sp_json_get(e, "type")));
        if (t < 0 || !sp_json_int(sp_json_get(e, "rows"), &a) || !sp_json_int(sp_json_get(e, "cols"), &b) ||
            !sp_json_int(sp_json_get(e, "workgroup"), &c) || !sp_json_int(sp_json_get(e, "rowsPerWorkgroup"), &d) ||
            (c != 32 && c != 64 && c != 128) || d < 1 || d > 4)
            continue;
        vk->gemv[vk->n_gemv++] = (sp_vk_gemv_tuning){t, a, b, (int)c, (int)d};
    }
    sp_json_free(&doc);
    free(text);
    return SPLASH_OK;
}

void sp_vk_gemv_params(const sp_vk *vk, const sp_matrix *W, uint32_t *wg, uint32_t *rows) {
    *wg = SP_VK_DEFAULT_GEMV_WORKGROUP;
    *rows = SP_VK_DEFAULT_GEMV_ROWS;
    for (int i = 0; i < sp_vk_gemv_tuning_count; i++) {
        const sp_vk_gemv_tuning *t = &sp_vk_gemv_tunings[i];
        if (t->type == (int)W->type && t->rows == W->rows && t->cols == W->cols) *wg = (uint32_t)t->workgroup, *rows = (uint32_t)t->rows_per_workgroup;
    }
    for (int i = 0; i < vk->n_gemv; i++) {
        const sp_vk_gemv_tuning *t = &vk->gemv[i];
        if (t->type == (int)W->type && t->rows == W->rows && t->cols == W->cols) *wg = (uint32_t)t->workgroup, *rows = (uint32_t)t->rows_per_workgroup;
    }
}
