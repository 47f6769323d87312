/* inventory.c — splash_inventory_*: the tensors a checkpoint of a given config.json holds, learnt by running the real
 * loaders over a declared checkpoint (core/checkpoint.h), so the list and its shapes have one home: the loading code. */
#include "splash.h"

#include "arch/dflash.h"
#include "arch/draft.h"
#include "arch/mtp.h"
#include "arch/qwen3_5.h"
#include "arch/qwen3_5_vision.h"
#include "backends/backend.h"
#include "core/checkpoint.h"
#include "core/error.h"
#include "core/quant.h"
#include "core/threadpool.h"

#include <stdlib.h>
#include <string.h>

_Static_assert(SPLASH_MAX_DIMS == SP_MAX_DIMS, "splash.h's SPLASH_MAX_DIMS is the safetensors rank limit");

struct splash_inventory {
    int64_t n;
    char **names;
    int32_t *parts, *kinds, *ndims;
    int64_t (*shapes)[SPLASH_MAX_DIMS];
    uint64_t (*bytes)[SPLASH_N_WEIGHT_TYPES];
    uint64_t kv[3], slot, drafter_kv[3], drafter_slot; /* splash_inventory_state's, by SPLASH_KV_* */
};

void splash_inventory_free(splash_inventory *inv) {
    if (!inv) return;
    for (int64_t i = 0; i < inv->n; i++) free(inv->names[i]);
    free(inv->names), free(inv->parts), free(inv->kinds), free(inv->ndims), free(inv->shapes), free(inv->bytes);
    free(inv);
}

/* Bytes of tensor t stored as `type`: rows of its last dimension, as core/quant.h lays them out. A row MLX cannot
 * group (not a multiple of its 64) stays as floats, as mlx-lm's quantize leaves such a layer. */
static uint64_t bytes_as(const sp_tensor *t, sp_mtype type) {
    int64_t cols = t->ndim ? t->shape[t->ndim - 1] : 1, rows = cols ? sp_tensor_numel(t) / cols : 0;
    int64_t row = sp_mtype_row_bytes(type, cols);
    return (uint64_t)rows * (uint64_t)(row ? row : sp_mtype_row_bytes(SP_MAT_BF16, cols));
}

/* Appends tensors [from, to) of ck, all of `part`. */
static splash_status collect(splash_inventory *inv, const sp_checkpoint *ck, size_t from, size_t to, int32_t part) {
    int64_t n = inv->n + (int64_t)(to - from);
    char **names = realloc(inv->names, sizeof *names * (size_t)n);
    if (names) inv->names = names;
    int32_t *parts = realloc(inv->parts, sizeof *parts * (size_t)n);
    if (parts) inv->parts = parts;
    int32_t *kinds = realloc(inv->kinds, sizeof *kinds * (size_t)n);
    if (kinds) inv->kinds = kinds;
    int32_t *ndims = realloc(inv->ndims, sizeof *ndims * (size_t)n);
    if (ndims) inv->ndims = ndims;
    int64_t(*shapes)[SPLASH_MAX_DIMS] = realloc(inv->shapes, sizeof *shapes * (size_t)n);
    if (shapes) inv->shapes = shapes;
    uint64_t(*bytes)[SPLASH_N_WEIGHT_TYPES] = realloc(inv->bytes, sizeof *bytes * (size_t)n);
    if (bytes) inv->bytes = bytes;
    if (!names || !parts || !kinds || !ndims || !shapes || !bytes) return SP_FAIL(SPLASH_ERR_OUT_OF_MEMORY, "out of memory");
    static const sp_mtype TYPES[SPLASH_N_WEIGHT_TYPES] = {
        [SPLASH_WEIGHT_BF16] = SP_MAT_BF16, [SPLASH_WEIGHT_Q8] = SP_MAT_Q8,     [SPLASH_WEIGHT_Q4] = SP_MAT_Q4,
        [SPLASH_WEIGHT_MLX4] = SP_MAT_MLX4, [SPLASH_WEIGHT_MLX8] = SP_MAT_MLX8,
    };
    for (size_t i = from; i < to; i++, inv->n++) {
        const sp_tensor *t = sp_checkpoint_tensor(ck, i);
        if (!(inv->names[inv->n] = strdup(t->name))) return SP_FAIL(SPLASH_ERR_OUT_OF_MEMORY, "out of memory");
        inv->parts[inv->n] = part;
        if ((inv->kinds[inv->n] = sp_checkpoint_use(ck, i)) < 0)
            return SP_FAIL(SPLASH_ERR_INTERNAL, "tensor %s: its loader did not say what it took it as", t->name);
        inv->ndims[inv->n] = t->ndim;
        memset(inv->shapes[inv->n], 0, sizeof inv->shapes[inv->n]);
        memcpy(inv->shapes[inv->n], t->shape, sizeof(int64_t) * (size_t)t->ndim);
        for (int w = 0; w < SPLASH_N_WEIGHT_TYPES; w++) inv->bytes[inv->n][w] = bytes_as(t, TYPES[w]);
    }
    return SPLASH_OK;
}

/* The official layout's names that the loaders look for before they require (qwen3_5_load.c's sanitize(), the
 * experts, the MTP and vision loads): the language model under model.language_model. in a multimodal checkpoint,
 * MoE experts fused as the hub stores them, mtp.* when the config has MTP layers, the tower with a vision_config. */
static void official_layout(const char *json, const char **present) {
    sp_json_doc doc;
    int n = 0;
    present[n++] = "*mlp.experts.gate_up_proj";
    if (sp_json_parse(&doc, json, strlen(json)) == SPLASH_OK) {
        const sp_json *root = sp_json_root(&doc), *tc = sp_json_get(root, "text_config");
        int64_t mtp = 0;
        if (tc) present[n++] = "model.language_model.embed_tokens.weight";
        if (sp_json_int(sp_json_get(tc ? tc : root, "mtp_num_hidden_layers"), &mtp) && mtp > 0) present[n++] = "mtp.fc.weight";
        if (sp_json_get(root, "vision_config")) present[n++] = "model.visual.patch_embed.proj.weight";
        sp_json_free(&doc);
    }
    present[n] = NULL;
}

static splash_status describe(splash_inventory *inv, sp_backend *be, sp_threadpool *pool, const char *config_json,
                              int32_t drafter_kind, const char *drafter_config_json) {
    const char *present[5];
    official_layout(config_json, present);
    sp_checkpoint *ck;
    splash_status st = sp_checkpoint_declare("(the config given)", config_json, present, &ck);
    sp_qwen35 *m = NULL;
    if (!st) st = sp_qwen35_load(ck, be, NULL, 1, &m); /* m owns ck */
    if (st) return st;
    sp_draft_target t;
    sp_qwen35_draft_target(m, &t);
    sp_drafter *d = NULL;
    sp_qwen35_vision *v = NULL;
    for (int32_t kv = SPLASH_KV_F32; kv <= SPLASH_KV_INT8; kv++) inv->kv[kv] = sp_qwen35_page_bytes(m, 1, kv);
    inv->slot = sp_qwen35_slot_bytes(m);
    if (drafter_kind == SPLASH_DRAFT_NONE) {
        size_t n_text = sp_checkpoint_count(ck), n_mtp = n_text;
        if (sp_checkpoint_find(ck, "mtp.fc.weight") && !(st = sp_mtp_load(&t, NULL, 1, 1, &d))) n_mtp = sp_checkpoint_count(ck);
        if (!st) st = sp_qwen35_vision_load(ck, pool, 1, &v);
        if (!st) st = collect(inv, ck, 0, n_text, SPLASH_PART_TEXT);
        if (!st) st = collect(inv, ck, n_text, n_mtp, SPLASH_PART_MTP);
        if (!st) st = collect(inv, ck, n_mtp, sp_checkpoint_count(ck), SPLASH_PART_VISION);
    } else {
        sp_checkpoint *dck;
        st = sp_checkpoint_declare("(the drafter config given)", drafter_config_json, NULL, &dck);
        if (!st) st = (drafter_kind == SPLASH_DRAFT_DFLASH2 ? sp_dflash2_load : sp_dflash_load)(&t, dck, 0, 1, &d); /* d owns dck */
        if (!st) st = collect(inv, dck, 0, sp_checkpoint_count(dck), SPLASH_PART_DRAFTER);
    }
    for (int32_t kv = SPLASH_KV_F32; d && kv <= SPLASH_KV_INT8; kv++) inv->drafter_kv[kv] = d->ops->page_bytes(d, 1, kv);
    if (d) inv->drafter_slot = d->ops->slot_bytes(d);
    if (d) d->ops->free(d);
    sp_qwen35_vision_free(v);
    sp_qwen35_free(m);
    return st;
}

splash_status splash_inventory_create(const char *config_json, int32_t drafter_kind, const char *drafter_config_json,
                                      splash_inventory **out) {
    if (!out) return SP_FAIL(SPLASH_ERR_INVALID_ARGUMENT, "splash_inventory_create: out is NULL");
    *out = NULL;
    if (!config_json) return SP_FAIL(SPLASH_ERR_INVALID_ARGUMENT, "splash_inventory_create: config_json is NULL");
    if (drafter_kind != SPLASH_DRAFT_NONE && drafter_kind != SPLASH_DRAFT_DFLASH && drafter_kind != SPLASH_DRAFT_DFLASH2)
        return SP_FAIL(SPLASH_ERR_INVALID_ARGUMENT, "drafter kind %d: expected 0 (none: the target), 2 (dflash) or 3 (dflash2)",
                       drafter_kind);
    if (drafter_kind != SPLASH_DRAFT_NONE && !drafter_config_json)
        return SP_FAIL(SPLASH_ERR_INVALID_ARGUMENT, "splash_inventory_create: a DFlash drafter's inventory needs its config");
    splash_inventory *inv = calloc(1, sizeof *inv);
    if (!inv) return SP_FAIL(SPLASH_ERR_OUT_OF_MEMORY, "out of memory");
    /* the loaders run on a one-thread CPU backend: nothing is computed, quantized or copied to a device */
    sp_threadpool *pool = NULL;
    splash_status op_status = SPLASH_OK;
    sp_backend be;
    splash_status st = sp_threadpool_create(1, &pool);
    if (!st) {
        sp_cpu_backend_init(&be, pool, 1, &op_status);
        st = describe(inv, &be, pool, config_json, drafter_kind, drafter_config_json);
    }
    sp_threadpool_free(pool);
    if (st) {
        splash_inventory_free(inv);
        return st;
    }
    *out = inv;
    return SPLASH_OK;
}

int64_t splash_inventory_count(const splash_inventory *inv) { return inv ? inv->n : 0; }

const char *splash_inventory_tensor(const splash_inventory *inv, int64_t i, int32_t *part, int32_t *kind, int32_t *ndim,
                                    int64_t *shape, uint64_t *bytes) {
    if (!inv || i < 0 || i >= inv->n) return NULL;
    if (part) *part = inv->parts[i];
    if (kind) *kind = inv->kinds[i];
    if (ndim) *ndim = inv->ndims[i];
    if (shape) memcpy(shape, inv->shapes[i], sizeof inv->shapes[i]);
    if (bytes) memcpy(bytes, inv->bytes[i], sizeof inv->bytes[i]);
    return inv->names[i];
}

void splash_inventory_state(const splash_inventory *inv, uint64_t *kv_bytes_per_token, uint64_t *slot_bytes,
                            uint64_t *drafter_kv_bytes_per_token, uint64_t *drafter_slot_bytes) {
    if (!inv) return;
    if (kv_bytes_per_token) memcpy(kv_bytes_per_token, inv->kv, sizeof inv->kv);
    if (slot_bytes) *slot_bytes = inv->slot;
    if (drafter_kv_bytes_per_token) memcpy(drafter_kv_bytes_per_token, inv->drafter_kv, sizeof inv->drafter_kv);
    if (drafter_slot_bytes) *drafter_slot_bytes = inv->drafter_slot;
}
