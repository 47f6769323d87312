/* record.c — pipelines, command buffers, barriers, submissions and per-op timestamps for the GPU op layer, which
 * decides when each happens (backends/gpu/record.c).
 *
 * Up to SP_VK_CMD_BUFFERS command buffers are in flight: the op layer submits one every SP_GPU_SUBMIT_EVERY commands,
 * so the device works through the first layers while the host records the rest, and finish submits the rest and
 * waits for all. A barrier is one memory barrier over compute, transfer and indirect reads.
 * SPLASH_VULKAN_PROFILE=1 times every command with timestamps and prints a per-op table when the backend is
 * destroyed (2: after every finish as well), then the driver's statistics of every pipeline made (registers, spills).
 * */
#include "vk.h"

#include "core/error.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

splash_status sp_vk_record_init(sp_vk *vk) {
    sp_vk_api *a = &vk->api;
    VkResult r;
    for (int i = 0; i < SP_GPU_KERNEL_COUNT; i++) {
        if (!sp_vk_kernels[i].code) continue; /* a kernel written for Metal alone (kernels/generate.ts metalOnly) */
        VkShaderModuleCreateInfo mi = {.sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO,
                                       .codeSize = sp_vk_kernels[i].words * 4, .pCode = sp_vk_kernels[i].code};
        if ((r = a->vkCreateShaderModule(vk->device, &mi, NULL, &vk->modules[i])) != VK_SUCCESS)
            return sp_vk_check(r, "vkCreateShaderModule");
    }
    VkPushConstantRange pc = {.stageFlags = VK_SHADER_STAGE_COMPUTE_BIT, .size = SP_VK_PUSH_BYTES};
    VkPipelineLayoutCreateInfo li = {.sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO, .pushConstantRangeCount = 1,
                                     .pPushConstantRanges = &pc};
    if ((r = a->vkCreatePipelineLayout(vk->device, &li, NULL, &vk->layout)) != VK_SUCCESS)
        return sp_vk_check(r, "vkCreatePipelineLayout");
    VkCommandPoolCreateInfo ci = {.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO,
                                  .flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT, .queueFamilyIndex = vk->queue_family};
    if ((r = a->vkCreateCommandPool(vk->device, &ci, NULL, &vk->pool)) != VK_SUCCESS) return sp_vk_check(r, "vkCreateCommandPool");
    for (int i = 0; i < SP_VK_CMD_BUFFERS; i++) {
        VkCommandBufferAllocateInfo ai = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO, .commandPool = vk->pool,
                                          .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY, .commandBufferCount = 1};
        VkFenceCreateInfo fi = {.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
        if ((r = a->vkAllocateCommandBuffers(vk->device, &ai, &vk->cmds[i].cb)) != VK_SUCCESS ||
            (r = a->vkCreateFence(vk->device, &fi, NULL, &vk->cmds[i].fence)) != VK_SUCCESS)
            return sp_vk_check(r, "command buffers");
    }
    vk->cur = -1;
    const char *prof = getenv("SPLASH_VULKAN_PROFILE");
    vk->profile = prof ? atoi(prof) : 0;
    if (vk->profile && vk->props.limits.timestampComputeAndGraphics) {
        VkQueryPoolCreateInfo qi = {.sType = VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO, .queryType = VK_QUERY_TYPE_TIMESTAMP,
                                    .queryCount = SP_VK_CMD_BUFFERS * SP_VK_QUERIES_PER_CMD};
        if ((r = a->vkCreateQueryPool(vk->device, &qi, NULL, &vk->queries)) != VK_SUCCESS) vk->profile = 0;
    } else vk->profile = 0;
    return SPLASH_OK;
}

static void print_profile(sp_vk *vk, const sp_gpu *g) {
    double total = 0;
    for (int32_t i = 0; i < vk->n_prof; i++) total += vk->prof[i].ns;
    /* largest first */
    for (int32_t i = 1; i < vk->n_prof; i++)
        for (int32_t j = i; j > 0 && vk->prof[j].ns > vk->prof[j - 1].ns; j--) {
            sp_vk_profile_row t = vk->prof[j];
            vk->prof[j] = vk->prof[j - 1];
            vk->prof[j - 1] = t;
        }
    fprintf(stderr, "splash vulkan profile (%s): %.3f ms in %llu submits, %llu barriers\n", vk->props.deviceName,
            total / 1e6, (unsigned long long)g->n_submits, (unsigned long long)g->n_barriers);
    fprintf(stderr, "  %-22s %10s %12s %10s %6s\n", "op", "count", "total ms", "mean us", "share");
    for (int32_t i = 0; i < vk->n_prof; i++)
        fprintf(stderr, "  %-22s %10llu %12.3f %10.2f %5.1f%%\n", vk->prof[i].name, (unsigned long long)vk->prof[i].count,
                vk->prof[i].ns / 1e6, vk->prof[i].ns / 1e3 / (double)vk->prof[i].count, 100 * vk->prof[i].ns / (total > 0 ? total : 1));
    if (vk->stats_text)
        fprintf(stderr, "splash vulkan pipelines (kernel, spec constants: the driver's statistics):\n%s", vk->stats_text);
}

static void collect(sp_vk *vk, sp_vk_cmd *c) {
    if (!vk->profile || c->n_queries < 2) return;
    uint64_t t[SP_VK_QUERIES_PER_CMD];
    int32_t base = (int32_t)(c - vk->cmds) * SP_VK_QUERIES_PER_CMD;
    if (vk->api.vkGetQueryPoolResults(vk->device, vk->queries, (uint32_t)base, (uint32_t)c->n_queries, sizeof t, t,
                                      sizeof t[0], VK_QUERY_RESULT_64_BIT | VK_QUERY_RESULT_WAIT_BIT) != VK_SUCCESS)
        return;
    for (int32_t i = 1; i < c->n_queries; i++) {
        const char *name = c->names[i];
        int32_t k = 0;
        while (k < vk->n_prof && strcmp(vk->prof[k].name, name)) k++;
        if (k == vk->n_prof) {
            if (k == 64) continue;
            vk->prof[vk->n_prof++] = (sp_vk_profile_row){name, 0, 0};
        }
        vk->prof[k].count++;
        vk->prof[k].ns += (double)(t[i] - t[i - 1]) * vk->timestamp_ns;
    }
}

static splash_status wait_cmd(sp_vk *vk, sp_vk_cmd *c) {
    if (!c->pending) return SPLASH_OK;
    VkResult r = vk->api.vkWaitForFences(vk->device, 1, &c->fence, VK_TRUE, UINT64_MAX);
    c->pending = false;
    if (r != VK_SUCCESS) return sp_vk_check(r, "vkWaitForFences");
    collect(vk, c);
    return SPLASH_OK;
}

static void stamp(sp_vk *vk, sp_vk_cmd *c, const char *name) {
    if (!vk->profile || c->n_queries >= SP_VK_QUERIES_PER_CMD) return;
    c->names[c->n_queries] = name;
    vk->api.vkCmdWriteTimestamp(c->cb, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, vk->queries,
                                (uint32_t)((c - vk->cmds) * SP_VK_QUERIES_PER_CMD + c->n_queries));
    c->n_queries++;
}

/* The command buffer being recorded (begun now when none is), after a barrier if asked; NULL on failure.
 * A barrier waits for every earlier command and makes its writes visible to compute and transfer commands; it reaches
 * the indirect-argument stage only before an indirect dispatch (on NVIDIA that stage makes a barrier markedly
 * slower), and an indirect dispatch after a barrier that did not reach it gets one that does. */
static sp_vk_cmd *open_cmd(sp_vk *vk, bool barrier, bool indirect) {
    sp_vk_api *a = &vk->api;
    if (vk->cur < 0) {
        sp_vk_cmd *c = &vk->cmds[vk->next];
        if (wait_cmd(vk, c)) return NULL;
        VkResult r;
        VkCommandBufferBeginInfo bi = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
                                       .flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT};
        if ((r = a->vkResetCommandBuffer(c->cb, 0)) != VK_SUCCESS || (r = a->vkBeginCommandBuffer(c->cb, &bi)) != VK_SUCCESS) {
            sp_vk_check(r, "vkBeginCommandBuffer");
            return NULL;
        }
        vk->cur = vk->next;
        vk->next = (vk->next + 1) % SP_VK_CMD_BUFFERS;
        vk->bound = VK_NULL_HANDLE;
        c->n_queries = 0;
        if (vk->profile) {
            a->vkCmdResetQueryPool(c->cb, vk->queries, (uint32_t)(vk->cur * SP_VK_QUERIES_PER_CMD), SP_VK_QUERIES_PER_CMD);
            stamp(vk, c, "start");
        }
    }
    sp_vk_cmd *c = &vk->cmds[vk->cur];
    if (indirect && vk->indirect_stale) barrier = true;
    if (barrier) {
        VkMemoryBarrier mb = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
                              .srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT,
                              .dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_READ_BIT |
                                               VK_ACCESS_TRANSFER_WRITE_BIT | (indirect ? VK_ACCESS_INDIRECT_COMMAND_READ_BIT : 0)};
        a->vkCmdPipelineBarrier(c->cb, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT,
                                VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT |
                                    (indirect ? VK_PIPELINE_STAGE_DRAW_INDIRECT_BIT : 0),
                                0, 1, &mb, 0, NULL, 0, NULL);
        vk->indirect_stale = !indirect;
    }
    return c;
}

splash_status sp_vk_submit(sp_gpu *g) {
    sp_vk *vk = sp_vk_of(g);
    if (vk->cur < 0) return SPLASH_OK;
    sp_vk_cmd *c = &vk->cmds[vk->cur];
    sp_vk_api *a = &vk->api;
    /* results read back by the host after the fence are visible to it */
    VkMemoryBarrier mb = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
                          .srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT,
                          .dstAccessMask = VK_ACCESS_HOST_READ_BIT};
    a->vkCmdPipelineBarrier(c->cb, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT,
                            VK_PIPELINE_STAGE_HOST_BIT, 0, 1, &mb, 0, NULL, 0, NULL);
    vk->cur = -1;
    VkResult r;
    if ((r = a->vkEndCommandBuffer(c->cb)) != VK_SUCCESS) return sp_vk_check(r, "vkEndCommandBuffer");
    if ((r = a->vkResetFences(vk->device, 1, &c->fence)) != VK_SUCCESS) return sp_vk_check(r, "vkResetFences");
    VkSubmitInfo si = {.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO, .commandBufferCount = 1, .pCommandBuffers = &c->cb};
    if ((r = a->vkQueueSubmit(vk->queue, 1, &si, c->fence)) != VK_SUCCESS) return sp_vk_check(r, "vkQueueSubmit");
    c->pending = true;
    return SPLASH_OK;
}

splash_status sp_vk_finish(sp_gpu *g) {
    sp_vk *vk = sp_vk_of(g);
    splash_status st = sp_vk_submit(g);
    for (int i = 0; i < SP_VK_CMD_BUFFERS; i++) {
        splash_status w = wait_cmd(vk, &vk->cmds[i]);
        if (!st) st = w;
    }
    if (vk->profile >= 2 && vk->n_prof) print_profile(vk, g);
    return st;
}

/* The driver's statistics of pipeline p (kernel k, spec constants), a line of vk->stats_text for the profile. */
static void keep_stats(sp_vk *vk, VkPipeline p, sp_gpu_kernel_id k, const uint32_t spec[4]) {
    VkPipelineExecutableInfoKHR ei = {.sType = VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_INFO_KHR, .pipeline = p};
    VkPipelineExecutableStatisticKHR st[16];
    uint32_t n = 16;
    for (uint32_t i = 0; i < n; i++) st[i] = (VkPipelineExecutableStatisticKHR){.sType = VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_STATISTIC_KHR};
    VkResult r = vk->pipeline_stats(vk->device, &ei, &n, st);
    if (r != VK_SUCCESS && r != VK_INCOMPLETE) return;
    char line[512];
    int len = snprintf(line, sizeof line, "  %-28s %4u %u %u %u:", sp_gpu_kernel_names[k], spec[0], spec[1], spec[2], spec[3]);
    for (uint32_t i = 0; i < n && len < (int)sizeof line; i++) {
        unsigned long long v = st[i].format == VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_BOOL32_KHR ? st[i].value.b32
                               : st[i].format == VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_FLOAT64_KHR ? (unsigned long long)st[i].value.f64
                                                                                                     : st[i].value.u64;
        len += snprintf(line + len, sizeof line - (size_t)len, " %s=%llu", st[i].name, v);
    }
    if (len >= (int)sizeof line) len = (int)sizeof line - 1;
    if (vk->stats_len + (size_t)len + 2 > vk->stats_cap) {
        size_t cap = (vk->stats_cap + (size_t)len + 2) * 2;
        char *t = realloc(vk->stats_text, cap);
        if (!t) return;
        vk->stats_text = t, vk->stats_cap = cap;
    }
    memcpy(vk->stats_text + vk->stats_len, line, (size_t)len);
    vk->stats_len += (size_t)len;
    vk->stats_text[vk->stats_len++] = '\n';
    vk->stats_text[vk->stats_len] = 0;
}

void *sp_vk_pipeline(sp_gpu *g, sp_gpu_kernel_id k, const uint32_t spec[4], uint32_t *max_threads) {
    sp_vk *vk = sp_vk_of(g);
    if (!vk->modules[k]) {
        SP_FAIL(SPLASH_ERR_INTERNAL, "vulkan: kernel %s has no SPIR-V (it is written for Metal)", sp_gpu_kernel_names[k]);
        return NULL;
    }
    /* spec constant i = spec[i] (ids a kernel does not declare are ignored) */
    VkSpecializationMapEntry entries[4];
    for (uint32_t i = 0; i < 4; i++) entries[i] = (VkSpecializationMapEntry){.constantID = i, .offset = 4 * i, .size = 4};
    VkSpecializationInfo si = {.mapEntryCount = 4, .pMapEntries = entries, .dataSize = 16, .pData = spec};
    VkComputePipelineCreateInfo ci = {
        .sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO,
        .flags = vk->pipeline_stats ? VK_PIPELINE_CREATE_CAPTURE_STATISTICS_BIT_KHR : 0,
        .stage = {.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO, .stage = VK_SHADER_STAGE_COMPUTE_BIT,
                  .module = vk->modules[k], .pName = "main", .pSpecializationInfo = &si},
        .layout = vk->layout};
    VkPipeline p;
    VkResult r = vk->api.vkCreateComputePipelines(vk->device, VK_NULL_HANDLE, 1, &ci, NULL, &p);
    if (r != VK_SUCCESS) {
        sp_vk_check(r, "vkCreateComputePipelines");
        return NULL;
    }
    *max_threads = vk->props.limits.maxComputeWorkGroupInvocations;
    if (vk->pipeline_stats) keep_stats(vk, p, k, spec);
    return (void *)p;
}

void sp_vk_release_pipeline(sp_gpu *g, void *pipeline) {
    sp_vk *vk = sp_vk_of(g);
    vk->api.vkDestroyPipeline(vk->device, (VkPipeline)pipeline, NULL);
}

splash_status sp_vk_dispatch(sp_gpu *g, const sp_gpu_launch *l) {
    sp_vk *vk = sp_vk_of(g);
    sp_vk_cmd *c = open_cmd(vk, l->barrier, l->indirect != NULL);
    if (!c) return SPLASH_ERR_INTERNAL;
    sp_vk_api *a = &vk->api;
    VkPipeline p = (VkPipeline)l->pipeline;
    if (p != vk->bound) {
        a->vkCmdBindPipeline(c->cb, VK_PIPELINE_BIND_POINT_COMPUTE, p);
        vk->bound = p;
    }
    a->vkCmdPushConstants(c->cb, vk->layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, l->push_bytes, l->push);
    if (l->indirect) a->vkCmdDispatchIndirect(c->cb, (VkBuffer)l->indirect->handle, l->indirect_offset);
    else a->vkCmdDispatch(c->cb, l->groups[0], l->groups[1], l->groups[2]);
    stamp(vk, c, l->op);
    return SPLASH_OK;
}

splash_status sp_vk_copy(sp_gpu *g, const sp_gpu_buffer *src, uint64_t src_offset, const sp_gpu_buffer *dst,
                         uint64_t dst_offset, uint64_t bytes, bool barrier) {
    sp_vk *vk = sp_vk_of(g);
    sp_vk_cmd *c = open_cmd(vk, barrier, false);
    if (!c) return SPLASH_ERR_INTERNAL;
    VkBufferCopy region = {src_offset, dst_offset, bytes};
    vk->api.vkCmdCopyBuffer(c->cb, (VkBuffer)src->handle, (VkBuffer)dst->handle, 1, &region);
    stamp(vk, c, "copy");
    return SPLASH_OK;
}

splash_status sp_vk_fill(sp_gpu *g, const sp_gpu_buffer *dst, uint64_t offset, uint64_t bytes, bool barrier) {
    sp_vk *vk = sp_vk_of(g);
    sp_vk_cmd *c = open_cmd(vk, barrier, false);
    if (!c) return SPLASH_ERR_INTERNAL;
    vk->api.vkCmdFillBuffer(c->cb, (VkBuffer)dst->handle, offset, bytes, 0);
    stamp(vk, c, "fill");
    return SPLASH_OK;
}

void sp_vk_record_free(sp_vk *vk, const sp_gpu *g) {
    sp_vk_api *a = &vk->api;
    if (vk->profile && vk->n_prof) print_profile(vk, g);
    for (int i = 0; i < SP_VK_CMD_BUFFERS; i++)
        if (vk->cmds[i].fence) a->vkDestroyFence(vk->device, vk->cmds[i].fence, NULL);
    if (vk->pool) a->vkDestroyCommandPool(vk->device, vk->pool, NULL);
    if (vk->layout) a->vkDestroyPipelineLayout(vk->device, vk->layout, NULL);
    for (int i = 0; i < SP_GPU_KERNEL_COUNT; i++)
        if (vk->modules[i]) a->vkDestroyShaderModule(vk->device, vk->modules[i], NULL);
    if (vk->queries) a->vkDestroyQueryPool(vk->device, vk->queries, NULL);
    free(vk->stats_text);
}
