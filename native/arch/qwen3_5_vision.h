/* qwen3_5_vision.h — the Qwen3.5-family vision tower (HF Qwen3_5VisionModel) as native/api/ uses it. */
#ifndef SP_QWEN3_5_VISION_H
#define SP_QWEN3_5_VISION_H

#include "splash.h"

typedef struct sp_threadpool sp_threadpool;
typedef struct sp_qwen35_vision sp_qwen35_vision;

/* Loads the tower of checkpoint ck (config.json vision_config + model.visual.* tensors, kept as stored: views of ck's
 * maps, so ck must outlive the tower) and runs it on a CPU backend over `pool` (not owned). *out stays NULL, with
 * SPLASH_OK, when there is no tower (no vision_config, or no model.visual.patch_embed); a tower with missing or
 * mis-shaped tensors is an error naming the tensor. */
typedef struct sp_checkpoint sp_checkpoint;
splash_status sp_qwen35_vision_load(const sp_checkpoint *ck, sp_threadpool *pool, int n_threads, sp_qwen35_vision **out);
void sp_qwen35_vision_free(sp_qwen35_vision *v);
void sp_qwen35_vision_info(const sp_qwen35_vision *v, splash_vision_info *out);

/* One image (grid_t frames of grid_h × grid_w patches; h and w multiples of spatial_merge_size) through the tower.
 * pixels: [t·h·w][C·T·P·P] as the processor lays them out (merge-window order, each row (channel, temporal, y, x)).
 * blocks: NULL or out [t·h·w][hidden_size], the stream after the last block (before the merger).
 * out: [t·h·w / merge²][out_hidden_size], the rows that replace the image's pad tokens. Checked by the caller. */
splash_status sp_qwen35_vision_encode(sp_qwen35_vision *v, const float *pixels, int32_t grid_t, int32_t grid_h,
                                      int32_t grid_w, float *blocks, float *out);

#endif
