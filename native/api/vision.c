/* vision.c — splash_vision_*: the checkpoint's vision tower (arch/qwen3_5_vision.c) behind the ABI, with every
 * argument checked before the tower runs. */
#include "model.h"

#include "arch/qwen3_5_vision.h"
#include "core/error.h"

splash_status splash_vision_get_info(const splash_model *m, splash_vision_info *info) {
    if (!m || !info) return SP_FAIL(SPLASH_ERR_INVALID_ARGUMENT, "splash_vision_get_info: NULL argument");
    if (info->struct_size < sizeof *info)
        return SP_FAIL(SPLASH_ERR_INVALID_ARGUMENT, "splash_vision_info.struct_size %u < %zu: rebuild the binding",
                       info->struct_size, sizeof *info);
    if (!m->vision) return SP_FAIL(SPLASH_ERR_UNSUPPORTED, "this checkpoint has no vision tower (no vision_config)");
    sp_qwen35_vision_info(m->vision, info);
    return SPLASH_OK;
}

/* Patches per image the tower accepts: 2^20 is a 16384 × 16384 image at patch 16, past any processor's max_pixels. */
enum { MAX_PATCHES = 1 << 20 };

splash_status splash_vision_encode(splash_model *m, const float *pixels, int32_t grid_t, int32_t grid_h, int32_t grid_w,
                                   float *out) {
    if (!m || !pixels || !out) return SP_FAIL(SPLASH_ERR_INVALID_ARGUMENT, "splash_vision_encode: NULL argument");
    if (!m->vision) return SP_FAIL(SPLASH_ERR_UNSUPPORTED, "this checkpoint has no vision tower (no vision_config)");
    splash_vision_info info = {.struct_size = sizeof info};
    sp_qwen35_vision_info(m->vision, &info);
    int32_t k = info.spatial_merge_size;
    if (grid_t < 1 || grid_h < 1 || grid_w < 1 || grid_h % k || grid_w % k)
        return SP_FAIL(SPLASH_ERR_INVALID_ARGUMENT, "splash_vision_encode: grid %d × %d × %d: expected t ≥ 1 and h, w "
                       "positive multiples of spatial_merge_size %d", grid_t, grid_h, grid_w, k);
    if ((int64_t)grid_t * grid_h * grid_w > MAX_PATCHES)
        return SP_FAIL(SPLASH_ERR_INVALID_ARGUMENT, "splash_vision_encode: %lld patches, more than %d",
                       (long long)grid_t * grid_h * grid_w, MAX_PATCHES);
    pthread_mutex_lock(&m->lock);
    splash_status st = sp_qwen35_vision_encode(m->vision, pixels, grid_t, grid_h, grid_w, NULL, out);
    pthread_mutex_unlock(&m->lock);
    return st;
}
