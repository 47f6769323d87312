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

#ifdef __cplusplus
}
#endif

#endif /* SPLASH_H */
