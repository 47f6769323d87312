/* safetensors.h — one safetensors file: dtypes, the tensor record, and a validating header parser.
 *
 * File layout (huggingface/safetensors): u64 little-endian N, then N bytes of JSON header
 *   {"__metadata__": {"k": "v", ...}, "name": {"dtype": "BF16", "shape": [a, b], "data_offsets": [begin, end]}, ...}
 * then the data; offsets are relative to the first byte after the header.
 *
 * Every entry is validated before any tensor is handed out: header length within the file and at most
 * SP_SAFETENSORS_MAX_HEADER, JSON well-formed, dtype known, at most SP_MAX_DIMS non-negative dims, shape x dtype
 * size equal to the byte range, range inside the file, no two non-empty ranges overlapping, names unique.
 * Holes between tensors and trailing bytes are allowed (harmless). Tensor data is zero-copy into the buffer;
 * a tensor whose data is not aligned to its element size (a writer that did not pad) is copied once into an
 * aligned buffer the file owns, so `data` can always be read as its element type.
 */
#ifndef SP_SAFETENSORS_H
#define SP_SAFETENSORS_H

#include "core/json.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SP_MAX_DIMS 8
/* The reference implementation's limit; real headers are well under 1 MB. */
#define SP_SAFETENSORS_MAX_HEADER (100ull << 20)

typedef enum sp_dtype {
    SP_DTYPE_F32,
    SP_DTYPE_F16,
    SP_DTYPE_BF16,
    SP_DTYPE_F64,
    SP_DTYPE_I8,
    SP_DTYPE_U8,
    SP_DTYPE_I16,
    SP_DTYPE_U16,
    SP_DTYPE_I32,
    SP_DTYPE_U32,
    SP_DTYPE_I64,
    SP_DTYPE_U64,
    SP_DTYPE_BOOL,
    SP_DTYPE_F8_E4M3,
    SP_DTYPE_F8_E5M2,
    SP_DTYPE_F8_E8M0,
    SP_DTYPE_COUNT,
} sp_dtype;

/* Sets of dtypes for sp_checkpoint_require: a bit per dtype; 0 accepts any. */
#define SP_DTYPE_BIT(d) (1u << (d))
#define SP_DTYPES_ANY 0u
#define SP_DTYPES_FLOAT (SP_DTYPE_BIT(SP_DTYPE_F32) | SP_DTYPE_BIT(SP_DTYPE_F16) | SP_DTYPE_BIT(SP_DTYPE_BF16))

/* The name as written in headers ("BF16"), and the size of one element in bytes. */
const char *sp_dtype_name(sp_dtype d);
size_t sp_dtype_size(sp_dtype d);

typedef struct sp_tensor {
    const char *name;
    sp_dtype dtype;
    int32_t ndim;
    int64_t shape[SP_MAX_DIMS]; /* PyTorch order: shape[ndim-1] varies fastest */
    const void *data;           /* aligned to sp_dtype_size(dtype); read-only */
    uint64_t nbytes;
    const char *file;           /* path of the file it came from, for messages */
    int32_t layout;             /* 0: elements of dtype as `shape` says. 1 + sp_mtype (core/quant.h): rows of the last
                                   dim already in that matrix type's layout, row_bytes each (a Splash packed file,
                                   core/packed.h); dtype is then the source's */
    int64_t row_bytes;          /* with a layout */
} sp_tensor;

static inline int64_t sp_tensor_numel(const sp_tensor *t) {
    int64_t n = 1;
    for (int32_t i = 0; i < t->ndim; i++) n *= t->shape[i];
    return n;
}

/* Writes "[a, b, c]" into buf (always NUL-terminated); returns buf. For messages. */
char *sp_shape_string(char *buf, size_t size, int32_t ndim, const int64_t *shape);

typedef struct sp_safetensors {
    char *path;
    const uint8_t *buf; /* the whole file (mapped by sp_safetensors_open, or the caller's for _parse) */
    uint64_t size;
    bool mapped;
    sp_json_doc header;
    const sp_json *metadata; /* "__metadata__" object (string values) or NULL */
    sp_tensor *tensors;      /* in data order */
    size_t n_tensors;
    void *aligned_copies;    /* data of tensors that were not aligned in the file */
} sp_safetensors;

/* Validates and indexes a safetensors image held in buf[0..size), which must outlive `out`. `path` names the file
 * in messages. On failure: SPLASH_ERR_FORMAT (malformed, truncated), SPLASH_ERR_UNSUPPORTED (dtype, rank) or
 * SPLASH_ERR_OUT_OF_MEMORY, a message naming the file (and tensor), and nothing left to free. */
splash_status sp_safetensors_parse(const uint8_t *buf, uint64_t size, const char *path, sp_safetensors *out);
/* Maps the file read-only and parses it; SPLASH_ERR_IO when it cannot be opened or mapped. */
splash_status sp_safetensors_open(const char *path, sp_safetensors *out);
/* Frees what _parse or _open made (unmaps a mapped file). Safe on a zeroed struct. */
void sp_safetensors_close(sp_safetensors *f);

#endif
