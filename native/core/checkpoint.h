/* checkpoint.h — a checkpoint directory: config.json plus every tensor of its safetensors files, memory-mapped.
 *
 * Which files: `model.splash` (a Splash packed file, core/packed.h: tensors come with their kernel layout), else
 * `model.safetensors.index.json` and the shards its weight_map names (the map must match the shards'
 * headers exactly: every tensor listed, in the file it is listed under, nothing extra); else `model.safetensors`;
 * else every `*.safetensors` in the directory in name order (a drafter directory). config.json is optional (a
 * drafter may not have one) but must be valid JSON when present. Tensor names must be unique across files.
 *
 * Every file is a plain name in the directory whose target, after symlinks, is inside the directory or a Hugging
 * Face cache blob (<cache>/models--org--name/blobs/<hash>, where hub snapshots link): an index or a link from
 * wherever the model came from never makes the loader open another file of the machine.
 *
 * Opening also samples every float tensor's values (and every packed row's scales) and refuses a NaN or an infinity
 * naming the tensor: a few pages per tensor, so damaged weights fail the load instead of answering nothing.
 *
 * Tensors are zero-copy views of the read-only maps (see safetensors.h) and stay valid until sp_checkpoint_close.
 * Lookups by name are O(1) and allocate nothing.
 *
 *   sp_checkpoint *ck;
 *   if (sp_checkpoint_open(dir, &ck)) return ...;
 *   const sp_tensor *w;
 *   if (sp_checkpoint_require(ck, "lm_head.weight", SP_DTYPES_FLOAT, 2, (int64_t[]){vocab, hidden}, &w)) ...;
 *   sp_checkpoint_close(ck);
 */
#ifndef SP_CHECKPOINT_H
#define SP_CHECKPOINT_H

#include "core/json.h"
#include "core/safetensors.h"

typedef struct sp_checkpoint sp_checkpoint;

/* Opens `dir`. Errors: SPLASH_ERR_IO (missing dir/file, unreadable), SPLASH_ERR_FORMAT (bad JSON, bad header,
 * truncated data, index and shards disagree, duplicate names, a file outside the directory, a non-finite value),
 * SPLASH_ERR_UNSUPPORTED (dtype, rank); the message names the file and, where there is one, the tensor. */
splash_status sp_checkpoint_open(const char *dir, sp_checkpoint **out);
/* The same checks without the value samples: reads headers, never tensor data (a listing, a download's check). */
splash_status sp_checkpoint_open_headers(const char *dir, sp_checkpoint **out);
void sp_checkpoint_close(sp_checkpoint *ck);
/* A checkpoint that has config.json (the text given) and no files, to learn what a load reads without any weights:
 * every sp_checkpoint_require on it succeeds and declares the tensor it asks for (BF16, the shape asked, data reading
 * as zeros), which sp_checkpoint_count/_tensor then list in order. sp_checkpoint_find finds what was declared, and
 * the names `present` lists (NULL-terminated, kept by the caller; "*suffix" matches any name ending so): what a
 * loader looks for to tell layouts apart before it requires. `label` stands for the directory in messages. */
splash_status sp_checkpoint_declare(const char *label, const char *config_json, const char *const *present,
                                    sp_checkpoint **out);

/* What a loader took tensor t of a declared checkpoint as (`use`: its caller's code; the loaders note SPLASH_KIND_*), for
 * the listing of what a load reads; sp_checkpoint_use(ck, i) says it for the i-th tensor (-1: never noted, or a
 * directory's checkpoint, where noting does nothing). */
void sp_checkpoint_note_use(const sp_checkpoint *ck, const sp_tensor *t, int32_t use);
int32_t sp_checkpoint_use(const sp_checkpoint *ck, size_t i);

/* The weight files, in the order their tensors are: name relative to the directory (as the index names it), size. */
size_t sp_checkpoint_file_count(const sp_checkpoint *ck);
const char *sp_checkpoint_file_name(const sp_checkpoint *ck, size_t i);
uint64_t sp_checkpoint_file_bytes(const sp_checkpoint *ck, size_t i);

/* The directory as given. */
const char *sp_checkpoint_dir(const sp_checkpoint *ck);
/* Root of config.json, or NULL when the directory has none. */
const sp_json *sp_checkpoint_config(const sp_checkpoint *ck);

/* Tensor by exact name, or NULL. */
const sp_tensor *sp_checkpoint_find(const sp_checkpoint *ck, const char *name);
/* All tensors, file by file in data order: for (size_t i = 0; i < sp_checkpoint_count(ck); i++) ..._tensor(ck, i) */
size_t sp_checkpoint_count(const sp_checkpoint *ck);
const sp_tensor *sp_checkpoint_tensor(const sp_checkpoint *ck, size_t i);

/* The tensor `name`, checked: its dtype is in `dtypes` (SP_DTYPE_BIT mask; SP_DTYPES_ANY accepts any), it has
 * `ndim` dims and each dim equals shape[i] (-1 = any). Fails with SPLASH_ERR_FORMAT and a message such as
 *   "tensor model.norm.weight in /m/model-00001.safetensors: expected shape [5120] got [4096]"
 * (a missing tensor names the directory). `shape` may be NULL when ndim is -1 (any rank). */
splash_status sp_checkpoint_require(const sp_checkpoint *ck, const char *name, uint32_t dtypes, int32_t ndim,
                                    const int64_t *shape, const sp_tensor **out);

#endif
