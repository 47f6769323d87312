/* mlx.h — MLX affine-quantized checkpoints (what mlx-lm's convert writes, and mlx-community publishes).
 *
 * config.json carries a `quantization` block (mlx-lm also copies it to `quantization_config`):
 *   {"group_size": 64, "bits": 4, "mode": "affine", "<module path>": {"group_size": 64, "bits": 8}, ...}
 * The per-module entries are mlx-lm's quant_predicate decisions (Qwen3.5 MoE: the router `mlp.gate` and
 * `shared_expert_gate` at 8 bits); `false` marks a module left in floats. A quantized module `P` is three tensors:
 *   P.weight  U32  [..., rows, cols·bits/32]   the quants, packed low bits first (mlx.core.quantize)
 *   P.scales  BF16 [..., rows, cols/group]
 *   P.biases  BF16 [..., rows, cols/group]      w = q·scale + bias
 * They become one MLX4/MLX8 sp_matrix (core/quant.h) whose rows interleave the three: a copy of the checkpoint's bits,
 * nothing requantized. Only group 64 and bits 4/8 are supported (mlx-lm's default group; the Qwen3.5 repos use it).
 */
#ifndef SP_MLX_H
#define SP_MLX_H

#include "core/checkpoint.h"
#include "core/quant.h"
#include "core/threadpool.h"

typedef struct sp_mlx_quant {
    const sp_json *block; /* the config's quantization block, NULL when the checkpoint is not quantized */
    int32_t bits;         /* the default for modules the block does not name */
} sp_mlx_quant;

/* Reads the quantization block of config.json's root (`quantization`, else `quantization_config` when it has
 * `bits`). No block: out->block = NULL. A mode other than affine, a group size other than 64 or bits other than
 * 4/8 (default or any module's) are SPLASH_ERR_UNSUPPORTED naming the key. */
splash_status sp_mlx_quant_parse(const sp_json *root, const char *dir, sp_mlx_quant *out);

/* The bits module `path` (e.g. "language_model.model.layers.0.mlp.gate") is stored with, or 0 when it is stored as
 * floats. mlx-lm's load rule: the block's entry for the path when there is one, else the default bits when
 * `path.scales` exists. */
int32_t sp_mlx_module_bits(const sp_mlx_quant *q, const sp_checkpoint *ck, const char *path);

/* The MLX4/MLX8 matrix of quantized module `path` whose logical weight shape is shape[ndim] (PyTorch order; the
 * leading dims are flattened into rows, as sp_matrix_from_tensor does). The three tensors must have the shapes
 * above for `bits` (SPLASH_ERR_FORMAT naming tensor and file otherwise). Rows are written into a new 64-byte-aligned
 * buffer returned in *owned (free() it after the matrix's last use); `pool` may be NULL. */
splash_status sp_mlx_matrix(sp_threadpool *pool, const sp_checkpoint *ck, const char *path, int32_t bits, int32_t ndim,
                            const int64_t *shape, sp_matrix *m, void **owned);

#endif
