/* packed_api.c — the public functions of splash_pack.h over core/packed. */
#include "splash_pack.h"

#include "core/cpu.h"
#include "core/error.h"
#include "core/packed.h"

SPLASH_API splash_status splash_pack_write(const char *src_dir, const char *out_path, const char *tensors_json,
                                           const char *meta_json, int32_t n_threads) {
    if (!src_dir || !out_path || !tensors_json || !meta_json || n_threads < 0 || n_threads > 1024)
        return SP_FAIL(SPLASH_ERR_INVALID_ARGUMENT, "splash_pack_write: a NULL argument or n_threads %d out of 0..1024", n_threads);
    sp_cpu cpu;
    sp_cpu_detect(&cpu);
    sp_threadpool *pool;
    splash_status st = sp_threadpool_create(n_threads ? n_threads : cpu.n_cores, &pool);
    if (st) return st;
    st = sp_packed_write(pool, src_dir, out_path, tensors_json, meta_json);
    sp_threadpool_free(pool);
    return st;
}

SPLASH_API splash_status splash_pack_verify(const char *path) {
    if (!path) return SP_FAIL(SPLASH_ERR_INVALID_ARGUMENT, "splash_pack_verify: path is NULL");
    return sp_packed_verify(path);
}
