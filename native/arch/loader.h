/* loader.h — what every architecture's load shares (qwen3_5_load.c, mtp.c, dflash.c, qwen3_5_vision.c): numbers from
 * config.json, weights read from a checkpoint into matrices (mapped as stored, quantized at load, or copied to the
 * device) and one block of f32 vectors, and the layout of a forward pass's scratch.
 *
 * It sits in arch/, not core/, because it loads through a backend (its thread pool quantizes, its upload copies to the
 * device), and core/ is below the backends. */
#ifndef SP_ARCH_LOADER_H
#define SP_ARCH_LOADER_H

#include "backends/backend.h"
#include "core/checkpoint.h"

#include <stdbool.h>
#include <stdint.h>

/* ---- config.json ------------------------------------------------------------------------------------------------ */

/* The integer `key` of object o (named `where` in messages, e.g. "text_config"; NULL: the top level), in
 * lo..INT32_MAX; when absent, dflt, unless dflt < lo makes the key required. */
splash_status sp_config_int(const sp_json *o, const char *dir, const char *where, const char *key, int64_t lo,
                            int64_t dflt, int32_t *out);
/* The number v, or dflt when v is absent or not a number. */
double sp_config_number(const sp_json *v, double dflt);
/* A RoPE number from rope_parameters (current HF), else from the config object itself (older configs), else dflt. */
float sp_config_rope(const sp_json *config, const char *key, double dflt);

/* ---- weights ----------------------------------------------------------------------------------------------------- */

/* What a loaded model holds besides the checkpoint's maps: every f32 vector in one block, and the quantized copies. */
typedef struct sp_weights {
    float *vectors;              /* n_vectors floats behind every vector (norms, biases, RoPE frequencies) */
    int64_t n_vectors, used;
    void **owned;                /* quantized copies made at load, at most one per tensor */
    int64_t n_owned;
    uint64_t bytes;              /* held: matrices as stored on the host, and the vectors taken so far */
} sp_weights;

typedef struct sp_loader {
    const sp_checkpoint *ck;
    sp_threadpool *pool;         /* quantizes at load (NULL: single-threaded) */
    const sp_backend *upload;    /* non-NULL: matrices go to this backend's device and the host copies go */
    const int32_t *quant;        /* [SPLASH_N_TENSOR_KINDS] SPLASH_QUANT_* a matrix of each kind is loaded at (NULL:
                                  * every kind as stored) */
    sp_weights *w;
    char name[256];              /* sp_load_name's buffer */
} sp_loader;

/* The vector block copied to a GPU backend's device in one piece (*dev): every pointer into w->vectors then moves to
 * the same offset of the copy (SP_MOVE). */
splash_status sp_weights_upload(const sp_backend *be, const sp_weights *w, const float **dev);
#define SP_MOVE(p, host, dev) ((p) = (p) ? (void *)((dev) + ((p) - (host))) : NULL)

/* Room for n_vectors floats of vectors and a copy of every tensor of ck. */
splash_status sp_weights_alloc(sp_weights *w, const sp_checkpoint *ck, int64_t n_vectors);
void sp_weights_free(sp_weights *w);

/* A tensor name printed into L->name (valid until the next call). */
const char *sp_load_name(sp_loader *L, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Keeps a matrix made from tensor `name`: its device copy when L->upload (the host one is freed), else the host rows,
 * `owned` freed with the weights; counts its bytes. Every sp_mtype uploads alike: rows that are not a multiple of 16
 * bytes (MLX4/MLX8 rows of q + scales + biases) are padded on the device, and a view of some rows (sp_matrix_rows:
 * MoE experts of a 3-D tensor) still addresses them by host row (backends/gpu/memory.c). */
splash_status sp_load_keep(sp_loader *L, const char *name, sp_matrix *m, void *owned);
/* A matrix over tensor t ([rows, cols] after flattening leading dims), of `kind` (SPLASH_KIND_*): the mapped data, or
 * quantized to L->quant[kind]. */
splash_status sp_load_tensor(sp_loader *L, const sp_tensor *t, int32_t kind, sp_matrix *out);
/* The float tensor `name`, which must have shape[ndim], as a matrix (sp_load_tensor). */
splash_status sp_load_matrix_nd(sp_loader *L, const char *name, int32_t ndim, const int64_t *shape, int32_t kind,
                                sp_matrix *out);
splash_status sp_load_matrix(sp_loader *L, const char *name, int64_t rows, int64_t cols, int32_t kind, sp_matrix *out);
/* n floats of the float tensor `name` of `kind` (shape[ndim], any shape holding n) converted to f32 into the vector
 * block, each plus `add` (1 for the zero-centred RMSNorm weights stored as w − 1). */
splash_status sp_load_vector(sp_loader *L, const char *name, int32_t kind, int64_t n, int32_t ndim, const int64_t *shape,
                             float add, const float **out);
/* n floats of the vector block for a vector computed at load (RoPE frequencies). */
splash_status sp_load_floats(sp_loader *L, int64_t n, float **out);
/* Routed experts named `prefix` ("….mlp.experts."): per-expert tensors {e}.{gate,up,down}_proj.weight (HF
 * save_pretrained, the official checkpoints) or fused gate_up_proj [E, 2·Im, H] (gate rows first) and down_proj
 * [E, H, Im]; either way E views each of gate, up and down in views[3E], of kind SPLASH_KIND_MOE_EXPERTS. */
splash_status sp_load_experts(sp_loader *L, const char *prefix, int32_t E, int32_t top_k, int64_t H, int64_t Im,
                              sp_matrix *views, sp_moe_experts *out);

/* ---- scratch ----------------------------------------------------------------------------------------------------- */

/* Buffers laid out one after another, 64-byte aligned, from base (NULL: only measures; every pointer is NULL). A
 * layout function runs twice: once to size the allocation, once over it. */
typedef struct sp_scratch {
    uint8_t *base;
    uint64_t off;                /* bytes taken so far */
} sp_scratch;

static inline void *sp_scratch_take(sp_scratch *s, uint64_t bytes) {
    void *p = s->base ? s->base + s->off : NULL;
    s->off += (bytes + 63) & ~(uint64_t)63;
    return p;
}
#define SP_TAKE(s, ptr, type, count) ((ptr) = (type *)sp_scratch_take((s), (uint64_t)(count) * sizeof(type)))

#endif
