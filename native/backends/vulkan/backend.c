/* backend.c — the Vulkan backend: the GPU op layer (backends/gpu/) over this directory's device. */
#include "vulkan.h"

#include "vk.h"

#include "core/error.h"

#include <stdlib.h>
#include <string.h>

static const sp_gpu_device VULKAN = {
    .buffer = sp_vk_buffer,
    .release = sp_vk_release,
    .pipeline = sp_vk_pipeline,
    .release_pipeline = sp_vk_release_pipeline,
    .dispatch = sp_vk_dispatch,
    .copy = sp_vk_copy,
    .fill = sp_vk_fill,
    .submit = sp_vk_submit,
    .finish = sp_vk_finish,
};

splash_status sp_vulkan_backend_create(sp_backend *be, sp_threadpool *pool, int n_threads, splash_status *status,
                                       bool allow_cpu) {
    sp_gpu *g = calloc(1, sizeof *g);
    sp_vk *vk = calloc(1, sizeof *vk);
    if (!g || !vk) {
        free(g), free(vk);
        return SP_FAIL(SPLASH_ERR_OUT_OF_MEMORY, "out of memory");
    }
    vk->cur = -1; /* no command buffer open */
    const char *b = getenv("SPLASH_VULKAN_BARRIERS");
    *g = (sp_gpu){.dev = &VULKAN, .device = vk, .name = "vulkan", .device_name = vk->props.deviceName,
                  .submission_barrier = true, .measured = true, .barrier_all = b && !strcmp(b, "all")};
    *be = (sp_backend){.name = "vulkan", .impl = g};
    splash_status st = sp_vk_open(vk, allow_cpu);
    g->max_buffer = vk->max_buffer;
    g->no_coopmat = st ? "" : vk->no_coopmat;
    g->no_int_dot = st ? "" : vk->no_int_dot;
    if (!st) st = sp_vk_record_init(vk);
    if (!st) st = sp_gpu_init(be, g, pool, n_threads, status);
    if (!st) st = sp_gpu_tuning_load(g, "SPLASH_VULKAN_TUNING");
    if (st) sp_vulkan_backend_destroy(be);
    return st;
}

void sp_vulkan_backend_destroy(sp_backend *be) {
    sp_gpu *g = sp_gpu_of(be);
    if (!g) return;
    sp_vk *vk = sp_vk_of(g);
    if (vk->device) {
        sp_gpu_release(g);
        sp_vk_record_free(vk, g);
    }
    sp_vk_close(vk);
    free(vk);
    free(g);
    be->impl = NULL;
}

const char *sp_vulkan_device_name(const sp_backend *be) { return sp_vk_of(sp_gpu_of(be))->props.deviceName; }
uint32_t sp_vulkan_subgroup_size(const sp_backend *be) { return sp_vk_of(sp_gpu_of(be))->subgroup_size; }
