/* loader.c — config.json numbers and checkpoint weights as every architecture's load reads them (loader.h). */
#include "arch/loader.h"

#include "core/error.h"
#include "core/quant.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

splash_status sp_config_int(const sp_json *o, const char *dir, const char *where, const char *key, int64_t lo,
                            int64_t dflt, int32_t *out) {
    const sp_json *v = sp_json_get(o, key);
    const char *dot = where ? "." : "";
    int64_t x = dflt;
    if ((v || dflt < lo) && !sp_json_int(v, &x))
        return SP_FAIL(SPLASH_ERR_FORMAT, "%s/config.json: %s%s%s: expected an integer", dir, where ? where : "", dot, key);
    if (x < lo || x > INT32_MAX)
        return SP_FAIL(SPLASH_ERR_FORMAT, "%s/config.json: %s%s%s = %lld is out of range", dir, where ? where : "", dot, key,
                       (long long)x);
    *out = (int32_t)x;
    return SPLASH_OK;
}

double sp_config_number(const sp_json *v, double dflt) {
    double x;
    return sp_json_double(v, &x) ? x : dflt;
}

float sp_config_rope(const sp_json *config, const char *key, double dflt) {
    double x;
    if (sp_json_double(sp_json_get(sp_json_get(config, "rope_parameters"), key), &x)) return (float)x;
    return (float)sp_config_number(sp_json_get(config, key), dflt);
}

splash_status sp_weights_alloc(sp_weights *w, const sp_checkpoint *ck, int64_t n_vectors) {
    w->vectors = malloc(sizeof(float) * (size_t)(n_vectors > 0 ? n_vectors : 1));
    w->owned = calloc(sp_checkpoint_count(ck) + 1, sizeof(void *));
    w->n_vectors = n_vectors;
    if (!w->vectors || !w->owned)
        return SP_FAIL(SPLASH_ERR_OUT_OF_MEMORY, "out of memory for %lld weight vector floats", (long long)n_vectors);
    return SPLASH_OK;
}

void sp_weights_free(sp_weights *w) {
    for (int64_t i = 0; i < w->n_owned; i++) free(w->owned[i]);
    free(w->owned);
    free(w->vectors);
    *w = (sp_weights){0};
}

splash_status sp_weights_upload(const sp_backend *be, const sp_weights *w, const float **dev) {
    *dev = be->upload(be, w->vectors, 1, sizeof(float) * (uint64_t)w->n_vectors);
    if (!*dev)
        return SP_FAIL(SPLASH_ERR_OUT_OF_MEMORY, "no device memory for %lld weight vector floats (%s)", (long long)w->n_vectors,
                       splash_last_error());
    return SPLASH_OK;
}

const char *sp_load_name(sp_loader *L, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(L->name, sizeof L->name, fmt, ap);
    va_end(ap);
    return L->name;
}

splash_status sp_load_keep(sp_loader *L, const char *name, sp_matrix *m, void *owned) {
    if (L->upload) {
        const void *dev = L->upload->upload(L->upload, m->data, m->rows, m->row_bytes);
        free(owned);
        owned = NULL;
        if (!dev) return SP_FAIL(SPLASH_ERR_OUT_OF_MEMORY, "no device memory for tensor %s (%s)", name, splash_last_error());
        m->data = dev;
    }
    if (owned) L->w->owned[L->w->n_owned++] = owned;
    L->w->bytes += (uint64_t)m->rows * (uint64_t)m->row_bytes;
    return SPLASH_OK;
}

splash_status sp_load_tensor(sp_loader *L, const sp_tensor *t, int32_t kind, sp_matrix *out) {
    void *owned = NULL;
    if (kind < 0 || kind >= SPLASH_N_TENSOR_KINDS)
        return SP_FAIL(SPLASH_ERR_INTERNAL, "tensor %s: kind %d is no SPLASH_KIND_*", t->name, kind);
    sp_quant q = L->quant ? (sp_quant)L->quant[kind] : SP_QUANT_NONE;
    sp_checkpoint_note_use(L->ck, t, kind);
    splash_status st = sp_matrix_from_tensor(L->pool, t, q, out, &owned);
    return st ? st : sp_load_keep(L, t->name, out, owned);
}

splash_status sp_load_matrix_nd(sp_loader *L, const char *name, int32_t ndim, const int64_t *shape, int32_t kind,
                                sp_matrix *out) {
    const sp_tensor *t;
    splash_status st = sp_checkpoint_require(L->ck, name, SP_DTYPES_FLOAT, ndim, shape, &t);
    return st ? st : sp_load_tensor(L, t, kind, out);
}

splash_status sp_load_matrix(sp_loader *L, const char *name, int64_t rows, int64_t cols, int32_t kind, sp_matrix *out) {
    return sp_load_matrix_nd(L, name, 2, (int64_t[]){rows, cols}, kind, out);
}

splash_status sp_load_floats(sp_loader *L, int64_t n, float **out) {
    sp_weights *w = L->w;
    if (n < 0 || w->used + n > w->n_vectors)
        return SP_FAIL(SPLASH_ERR_INTERNAL, "the vector block holds %lld floats, %lld more asked after %lld",
                       (long long)w->n_vectors, (long long)n, (long long)w->used);
    *out = w->vectors + w->used;
    w->used += n;
    w->bytes += sizeof(float) * (uint64_t)n;
    return SPLASH_OK;
}

splash_status sp_load_vector(sp_loader *L, const char *name, int32_t kind, int64_t n, int32_t ndim, const int64_t *shape,
                             float add, const float **out) {
    const sp_tensor *t;
    sp_matrix v;
    void *owned = NULL;
    float *dst = NULL;
    splash_status st = sp_checkpoint_require(L->ck, name, SP_DTYPES_FLOAT, ndim, shape, &t);
    if (!st) sp_checkpoint_note_use(L->ck, t, kind);
    if (!st) st = sp_matrix_from_tensor(NULL, t, SP_QUANT_NONE, &v, &owned); /* as stored: nothing is copied */
    if (!st) st = sp_load_floats(L, n, &dst);
    if (st) return st;
    for (int64_t r = 0; r < v.rows; r++) sp_matrix_row_f32(&v, r, dst + r * v.cols);
    for (int64_t i = 0; i < n; i++) dst[i] += add;
    *out = dst;
    return SPLASH_OK;
}

splash_status sp_load_experts(sp_loader *L, const char *prefix, int32_t E, int32_t top_k, int64_t H, int64_t Im,
                              sp_matrix *views, sp_moe_experts *out) {
    *out = (sp_moe_experts){.gate = views, .up = views + E, .down = views + 2 * E, .n_experts = E, .top_k = top_k, .hidden = H, .inter = Im};
    const int32_t kind = SPLASH_KIND_MOE_EXPERTS;
    splash_status st;
    if (sp_checkpoint_find(L->ck, sp_load_name(L, "%sgate_up_proj", prefix))) {
        sp_matrix gate_up, down;
        if ((st = sp_load_matrix_nd(L, L->name, 3, (int64_t[]){E, 2 * Im, H}, kind, &gate_up)) ||
            (st = sp_load_matrix_nd(L, sp_load_name(L, "%sdown_proj", prefix), 3, (int64_t[]){E, H, Im}, kind, &down)))
            return st;
        for (int32_t e = 0; e < E; e++) {
            views[e] = sp_matrix_rows(&gate_up, e * 2 * Im, Im);
            views[E + e] = sp_matrix_rows(&gate_up, e * 2 * Im + Im, Im);
            views[2 * E + e] = sp_matrix_rows(&down, e * H, H);
        }
        return SPLASH_OK;
    }
    for (int32_t e = 0; e < E; e++)
        if ((st = sp_load_matrix(L, sp_load_name(L, "%s%d.gate_proj.weight", prefix, e), Im, H, kind, &views[e])) ||
            (st = sp_load_matrix(L, sp_load_name(L, "%s%d.up_proj.weight", prefix, e), Im, H, kind, &views[E + e])) ||
            (st = sp_load_matrix(L, sp_load_name(L, "%s%d.down_proj.weight", prefix, e), H, Im, kind, &views[2 * E + e])))
            return st;
    return SPLASH_OK;
}
