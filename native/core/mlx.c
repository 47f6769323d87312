#include "mlx.h"

#include "error.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* group_size, bits and mode of one settings object (the block itself or a module's entry). */
static splash_status check_settings(const sp_json *o, const char *dir, const char *where, int32_t *bits) {
    int64_t g = 0, b = 0;
    const char *mode = sp_json_string(sp_json_get(o, "mode"));
    if (mode && strcmp(mode, "affine"))
        return SP_FAIL(SPLASH_ERR_UNSUPPORTED, "%s/config.json: quantization%s mode \"%s\" is not supported (affine is)", dir,
                       where, mode);
    if (!sp_json_int(sp_json_get(o, "group_size"), &g) || !sp_json_int(sp_json_get(o, "bits"), &b))
        return SP_FAIL(SPLASH_ERR_FORMAT, "%s/config.json: quantization%s needs integer group_size and bits", dir, where);
    if (g != SP_QK_MLX)
        return SP_FAIL(SPLASH_ERR_UNSUPPORTED, "%s/config.json: quantization%s group_size %lld is not supported (64 is)", dir,
                       where, (long long)g);
    if (b != 4 && b != 8)
        return SP_FAIL(SPLASH_ERR_UNSUPPORTED, "%s/config.json: quantization%s bits %lld is not supported (4 and 8 are)", dir,
                       where, (long long)b);
    *bits = (int32_t)b;
    return SPLASH_OK;
}

splash_status sp_mlx_quant_parse(const sp_json *root, const char *dir, sp_mlx_quant *out) {
    *out = (sp_mlx_quant){0};
    const sp_json *q = sp_json_get(root, "quantization");
    if (!q && sp_json_get(sp_json_get(root, "quantization_config"), "bits")) q = sp_json_get(root, "quantization_config");
    if (!q) return SPLASH_OK;
    if (q->type != SP_JSON_OBJECT) return SP_FAIL(SPLASH_ERR_FORMAT, "%s/config.json: quantization is not an object", dir);
    splash_status st = check_settings(q, dir, "", &out->bits);
    for (const sp_json *e = sp_json_first(q); e && !st; e = sp_json_next(q, e)) {
        if (e->type != SP_JSON_OBJECT) continue; /* group_size, bits, mode; `false` for a module left in floats */
        char where[300];
        snprintf(where, sizeof where, ".%s", e->key);
        int32_t bits;
        st = check_settings(e, dir, where, &bits);
    }
    if (!st) out->block = q;
    return st;
}

int32_t sp_mlx_module_bits(const sp_mlx_quant *q, const sp_checkpoint *ck, const char *path) {
    if (!q->block) return 0;
    const sp_json *e = sp_json_get(q->block, path);
    int64_t b;
    if (e) return e->type == SP_JSON_OBJECT && sp_json_int(sp_json_get(e, "bits"), &b) ? (int32_t)b : 0;
    char name[512];
    snprintf(name, sizeof name, "%s.scales", path);
    return sp_checkpoint_find(ck, name) ? q->bits : 0;
}

typedef struct repack_job {
    const uint8_t *w;
    const uint16_t *scales, *biases;
    int64_t qbytes, nb, row_bytes;
    uint8_t *dst;
} repack_job;

static void repack_rows(void *ctx, int64_t r0, int64_t r1, int thread) {
    const repack_job *j = ctx;
    for (int64_t r = r0; r < r1; r++) {
        uint8_t *row = j->dst + r * j->row_bytes;
        memcpy(row, j->w + r * j->qbytes, (size_t)j->qbytes);
        memcpy(row + j->qbytes, j->scales + r * j->nb, (size_t)j->nb * 2);
        memcpy(row + j->qbytes + j->nb * 2, j->biases + r * j->nb, (size_t)j->nb * 2);
    }
}

splash_status sp_mlx_matrix(sp_threadpool *pool, const sp_checkpoint *ck, const char *path, int32_t bits, int32_t ndim,
                            const int64_t *shape, sp_matrix *m, void **owned) {
    *owned = NULL;
    memset(m, 0, sizeof *m);
    int64_t cols = shape[ndim - 1], rows = 1, packed[SP_MAX_DIMS], groups[SP_MAX_DIMS];
    for (int32_t i = 0; i < ndim - 1; i++) rows *= shape[i];
    if (cols % SP_QK_MLX || (bits != 4 && bits != 8))
        return SP_FAIL(SPLASH_ERR_UNSUPPORTED, "%s/%s: %d-bit groups of 64 over %lld columns are not supported",
                       sp_checkpoint_dir(ck), path, bits, (long long)cols);
    memcpy(packed, shape, sizeof(int64_t) * (size_t)ndim);
    memcpy(groups, shape, sizeof(int64_t) * (size_t)ndim);
    packed[ndim - 1] = cols * bits / 32;
    groups[ndim - 1] = cols / SP_QK_MLX;
    char name[512];
    const sp_tensor *w, *scales, *biases;
    splash_status st;
    snprintf(name, sizeof name, "%s.weight", path);
    if ((st = sp_checkpoint_require(ck, name, SP_DTYPE_BIT(SP_DTYPE_U32), ndim, packed, &w))) return st;
    snprintf(name, sizeof name, "%s.scales", path);
    if ((st = sp_checkpoint_require(ck, name, SP_DTYPE_BIT(SP_DTYPE_BF16), ndim, groups, &scales))) return st;
    snprintf(name, sizeof name, "%s.biases", path);
    if ((st = sp_checkpoint_require(ck, name, SP_DTYPE_BIT(SP_DTYPE_BF16), ndim, groups, &biases))) return st;
    m->type = bits == 4 ? SP_MAT_MLX4 : SP_MAT_MLX8;
    m->rows = rows;
    m->cols = cols;
    m->row_bytes = sp_mtype_row_bytes(m->type, cols);
    size_t bytes = ((size_t)(rows * m->row_bytes) + 63) & ~(size_t)63;
    uint8_t *dst = aligned_alloc(64, bytes ? bytes : 64);
    if (!dst) return SP_FAIL(SPLASH_ERR_OUT_OF_MEMORY, "%s: cannot allocate %zu bytes for %s weights", path, bytes, sp_mtype_name(m->type));
    repack_job job = {w->data, scales->data, biases->data, cols * bits / 8, cols / SP_QK_MLX, m->row_bytes, dst};
    sp_parallel_for(pool, rows, repack_rows, &job);
    m->data = dst;
    *owned = dst;
    return SPLASH_OK;
}
