/*
 * splash.h — the whole ABI of libsplash.
 *
 * TypeScript calls this library through bun:ffi at the granularity of a scheduler step (ARCHITECTURE.md §2):
 * load a model, create the sequence-state cache, run one mixed batch per step, copy pages and state slots for the
 * prefix cache. Big buffers (weights, logits) stay here unless the caller passes a buffer for them.
 *
 * Conventions
 *  - Every function that can fail returns splash_status; splash_last_error() then holds a message for the calling
 *    thread naming what failed (file, tensor, value) and, where there is one, the fix.
 *  - Structs passed in carry `struct_size` first so the layout can grow; the binding writes sizeof as it knows it.
 *  - Sizes and byte counts are 64-bit. Token ids, positions, page ids and slot ids are int32.
 *  - The library never exits or prints; it never keeps hidden global state beyond the per-thread error message.
 *
 * Bump SPLASH_ABI_VERSION on any change a binding must know about; src/native/ checks it at load.
 */
#ifndef SPLASH_H
#define SPLASH_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(SPLASH_BUILD)
#define SPLASH_API __attribute__((visibility("default")))
#else
#define SPLASH_API
#endif

#define SPLASH_ABI_VERSION 1

typedef enum splash_status {
    SPLASH_OK = 0,
    SPLASH_ERR_INVALID_ARGUMENT = 1, /* the caller passed something wrong */
    SPLASH_ERR_IO = 2,               /* a file could not be opened, read or mapped */
    SPLASH_ERR_FORMAT = 3,           /* a file is malformed: header, JSON, shapes, truncated data */
    SPLASH_ERR_UNSUPPORTED = 4,      /* well-formed but not supported: dtype, architecture, option */
    SPLASH_ERR_OUT_OF_MEMORY = 5,    /* an allocation failed */
    SPLASH_ERR_CAPACITY = 6,         /* a page or slot id out of the cache's range */
    SPLASH_ERR_INTERNAL = 7,         /* a bug: please report */
} splash_status;

/* ---- library ------------------------------------------------------------------------------------------------ */

SPLASH_API int32_t splash_abi_version(void);
SPLASH_API const char *splash_version(void);
/* Message of the last failing call on this thread ("" if none). Valid until the next failing call on this thread. */
SPLASH_API const char *splash_last_error(void);
/* Space-separated CPU features the library detected and uses, e.g. "avx2 fma f16c". */
SPLASH_API const char *splash_cpu_features(void);

/* ---- tokenizer (issue 4, src/tokenizer/) ------------------------------------------------------------------- */
/* The byte-level BPE hot path: pre-tokenizer regex split + merges. Normalization (NFC) and added/special tokens are
 * the caller's: it passes the plain-text segments between them, one call each. One thread at a time per tokenizer. */

typedef struct splash_tokenizer splash_tokenizer;
/* pattern: the Split pre-tokenizer regex (Oniguruma syntax, native/tokenizer/regex.h), NULL or "" for none.
 * Token id i's bytes are token_bytes[token_offsets[i] .. token_offsets[i+1]) (empty = unused id); merges holds
 * n_merges pairs (left id, right id) in rank order. ignore_merges: a piece that is a token is taken whole. */
SPLASH_API splash_status splash_tokenizer_create(const char *pattern, const uint8_t *token_bytes, const uint64_t *token_offsets,
                                                 int32_t n_tokens, const int32_t *merges, int32_t n_merges, int32_t ignore_merges,
                                                 splash_tokenizer **out);
SPLASH_API void splash_tokenizer_free(splash_tokenizer *t);
/* Encodes UTF-8 text (already normalized, no added tokens) into ids; max_ids must be >= n_bytes. */
SPLASH_API splash_status splash_tokenizer_encode(splash_tokenizer *t, const uint8_t *text, int64_t n_bytes, int32_t *ids,
                                                 int64_t max_ids, int64_t *n_ids);

#ifdef __cplusplus
}
#endif

#endif /* SPLASH_H */
