/* backend.c — the Vulkan backend's op table: device, memory, pipelines and recording come up together here. */
#include "vulkan.h"

#include "vk.h"

#include "core/error.h"

#include <stdlib.h>

splash_status sp_vulkan_backend_create(sp_backend *be, sp_threadpool *pool, int n_threads, splash_status *status,
                                       bool allow_cpu) {
    sp_vk *vk = calloc(1, sizeof *vk);
    if (!vk) return SP_FAIL(SPLASH_ERR_OUT_OF_MEMORY, "out of memory");
    vk->status = status;
    vk->cur = -1; /* no command buffer open */
    *be = (sp_backend){.name = "vulkan", .pool = pool, .n_threads = n_threads, .status = status, .impl = vk};
    splash_status st = sp_vk_open(vk, allow_cpu);
    if (!st) st = sp_vk_memory_init(vk);
    if (!st) st = sp_vk_record_init(vk);
    if (st) {
        sp_vulkan_backend_destroy(be);
        return st;
    }
    sp_vk_ops_install(be);
    return SPLASH_OK;
}

void sp_vulkan_backend_destroy(sp_backend *be) {
    sp_vk *vk = sp_vk_of(be);
    if (!vk) return;
    if (vk->device) {
        sp_vk_record_free(vk);
        sp_vk_memory_free(vk);
    }
    sp_vk_close(vk);
    free(vk);
    be->impl = NULL;
}

const char *sp_vulkan_device_name(const sp_backend *be) { return sp_vk_of(be)->props.deviceName; }
uint32_t sp_vulkan_subgroup_size(const sp_backend *be) { return sp_vk_of(be)->subgroup_size; }

splash_status sp_vulkan_finish(const sp_backend *be) { return sp_vk_sync(sp_vk_of(be)); }
