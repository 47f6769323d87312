/* backend.c — the Vulkan backend's op table: device, memory, pipelines and recording come up together here. */
#include "vulkan.h"

#include "vk.h"

#include "core/error.h"

#include <stdlib.h>
#include <time.h>

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
    if (!st) st = sp_vk_tuning_load(vk);
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

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

splash_status sp_vulkan_read_bandwidth(const sp_backend *be, uint64_t bytes, int32_t passes, int32_t reps, double *gbs) {
    sp_vk *vk = sp_vk_of(be);
    enum { GROUPS = 8192, WG = 256 };
    bytes &= ~(uint64_t)15;
    void *src = sp_vk_alloc(be, bytes), *dst = sp_vk_alloc(be, 4 * GROUPS);
    splash_status st = src && dst ? sp_vk_sync(vk) : SP_FAIL(SPLASH_ERR_OUT_OF_MEMORY, "vulkan: %llu bytes for the probe",
                                                                 (unsigned long long)bytes);
    *gbs = 0;
    for (int32_t r = 0; r < reps && !st; r++) {
        struct {
            uint64_t src, dst;
            uint32_t words, never;
        } p = {sp_vk_addr(vk, src), sp_vk_addr(vk, dst), (uint32_t)(bytes / 16), 0x5eed1e55u};
        sp_vk_range rr = {p.src, p.src + bytes}, wr = {p.dst, p.dst + 4 * GROUPS};
        double t0 = now();
        for (int32_t i = 0; i < passes; i++)
            sp_vk_dispatch(vk, "stream", SP_VK_STREAM, (uint32_t[4]){WG, 0, 0, 0}, &p, sizeof p, (uint32_t[3]){GROUPS, 1, 1},
                           &rr, 1, &wr, 1, NULL);
        st = sp_vk_sync(vk);
        double g = (double)bytes * passes / (now() - t0) / 1e9;
        if (g > *gbs) *gbs = g;
    }
    sp_vk_free(be, src);
    sp_vk_free(be, dst);
    return st;
}
