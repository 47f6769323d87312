/* splash_pack.h — writing and checking Splash packed weight files (`model.splash`, native/core/packed.h), the output
 * of `splash import`. Loading one needs nothing from here: splash_model_load maps a directory holding model.splash.
 * Separate from splash.h so the model ABI's version does not move with it; the TypeScript side binds these two
 * functions on their own (src/models/packed.ts). */
#ifndef SPLASH_PACK_H
#define SPLASH_PACK_H

#include "splash.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Writes the packed file of the float checkpoint in `src_dir` to `out_path` (atomically: through out_path.tmp).
 * tensors_json: {"<tensor name>": {"type": "q8"|"q4", "kind": "<kind>"}, ...} (unnamed tensors stay as stored);
 * meta_json: a JSON object copied into the header (source, recipe, quant). n_threads 0 = every core. */
SPLASH_API splash_status splash_pack_write(const char *src_dir, const char *out_path, const char *tensors_json,
                                           const char *meta_json, int32_t n_threads);

/* The full check of a packed file: header and table (as every load does), then the checksum of every weight byte. */
SPLASH_API splash_status splash_pack_verify(const char *path);

#ifdef __cplusplus
}
#endif

#endif
