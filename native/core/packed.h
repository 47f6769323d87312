/* packed.h — Splash's packed weight file (`model.splash`, written once by `splash import`): every tensor of a
 * checkpoint in the row layout the matmul kernels read (core/quant.h), so loading is a map, never a conversion.
 *
 * Layout (little-endian):
 *   0   char[8] magic "SPLSHPK\0"
 *   8   u32     version (1)
 *   12  u32     flags (0)
 *   16  u64     header_bytes   length of the JSON header at 64
 *   24  u64     data_offset    first tensor byte: 64 + header_bytes rounded up to SP_PACKED_ALIGN
 *   32  u64     file_bytes     the whole file; a shorter file is a cut write and never loads
 *   40  u64     header_xxh64   XXH64 (seed 0) of the JSON header
 *   48  u64     payload_xxh64  XXH64 (seed 0) of bytes [data_offset, file_bytes): checked by sp_packed_verify
 *   56  u64     reserved (0)
 *   64  JSON    {"format": "splash-packed", "version": 1, "meta": {...the importer's: source, recipe, quant...},
 *                "tensors": [{"name", "kind", "type" (sp_mtype name), "dtype" (the source's), "shape" [...],
 *                             "rows", "cols", "row_bytes", "offset", "bytes"}, ...]}
 *   then each tensor at its offset (a multiple of SP_PACKED_ALIGN: 16 KiB pages, Apple's and x86's), zero padding
 *   between; rows = product of the leading dims, cols = the last dim, bytes = rows · row_bytes.
 *
 * Opening (every load) checks magic, version, file length, the header's checksum and every entry (type, shapes,
 * row bytes, alignment, ranges inside the file, no overlap); the payload checksum costs a full read and is left to
 * sp_packed_verify (`splash verify`).
 */
#ifndef SP_PACKED_H
#define SP_PACKED_H

#include "core/safetensors.h"
#include "core/threadpool.h"

#define SP_PACKED_MAGIC "SPLSHPK"
#define SP_PACKED_VERSION 1
#define SP_PACKED_ALIGN 16384
#define SP_PACKED_FILE "model.splash"

/* Maps and checks a packed file; its tensors come out as sp_tensors with a layout (safetensors.h), in `out` as a
 * safetensors file would (sp_safetensors_close frees it). Errors name the file and say what to do:
 * SPLASH_ERR_IO (cannot open), SPLASH_ERR_FORMAT (not a packed file, other version, truncated, bad header). */
splash_status sp_packed_open(const char *path, sp_safetensors *out);

/* sp_packed_open, then the payload's checksum. SPLASH_ERR_FORMAT names the file on a mismatch. */
splash_status sp_packed_verify(const char *path);

/* Writes the packed file of checkpoint directory `src` to `path` (through path.tmp and a rename: a crash leaves no
 * file that loads). `tensors_json` picks the types: {"<name>": {"type": "q8"|"q4", "kind": "<tensor kind>"}, ...};
 * a tensor it does not name, or names without a type, is kept as stored (F32/BF16/F16); `meta_json` (any JSON
 * object) is copied into the header. Only float checkpoints are taken (an MLX one loads directly). `pool` may be
 * NULL. */
splash_status sp_packed_write(sp_threadpool *pool, const char *src, const char *path, const char *tensors_json,
                               const char *meta_json);

/* XXH64 (seed 0): streaming, for the writer and the checker. */
typedef struct sp_xxh64_state {
    uint64_t v[4], total;
    uint8_t buf[32];
    uint32_t n;
} sp_xxh64_state;
void sp_xxh64_init(sp_xxh64_state *h);
void sp_xxh64_update(sp_xxh64_state *h, const void *data, size_t len);
uint64_t sp_xxh64_final(const sp_xxh64_state *h);
uint64_t sp_xxh64(const void *data, size_t len);

#endif
