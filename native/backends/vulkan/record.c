/* record.c — pipelines, command recording with hazard-driven barriers, submission, and per-op timestamps.
 *
 * A step's ops record into a command buffer that is submitted every SP_VK_SUBMIT_EVERY commands, so the device
 * works through the first layers while the host records the rest; a sync (any read back to the host) submits the
 * rest and waits. Consecutive dispatches that touch disjoint memory (q, k and v projections of one input) run
 * without a barrier between them; a barrier comes before the first command that reads what an earlier one wrote
 * or writes what an earlier one touched. SPLASH_VULKAN_BARRIERS=all puts one before every command instead.
 * SPLASH_VULKAN_PROFILE=1 times every command with timestamps and prints a per-op table when the backend is
 * destroyed (2: after every sync as well). */
#include "vk.h"

#include "core/error.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { QUERIES_PER_CMD = SP_VK_SUBMIT_EVERY + 8 };

void sp_vk_grid(uint64_t n, uint32_t groups[3]) {
    if (n == 0) n = 1;
    groups[0] = n <= 65535 ? (uint32_t)n : 65535;
    groups[1] = (uint32_t)((n + groups[0] - 1) / groups[0]);
    groups[2] = 1;
}

splash_status sp_vk_record_init(sp_vk *vk) {
    sp_vk_api *a = &vk->api;
    VkResult r;
    for (int i = 0; i < SP_VK_KERNEL_COUNT; i++) {
        VkShaderModuleCreateInfo mi = {.sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO,
                                       .codeSize = sp_vk_kernels[i].words * 4, .pCode = sp_vk_kernels[i].code};
        if ((r = a->vkCreateShaderModule(vk->device, &mi, NULL, &vk->modules[i])) != VK_SUCCESS)
            return sp_vk_fail(vk, r, "vkCreateShaderModule");
    }
    VkPushConstantRange pc = {.stageFlags = VK_SHADER_STAGE_COMPUTE_BIT, .size = SP_VK_PUSH_BYTES};
    VkPipelineLayoutCreateInfo li = {.sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO, .pushConstantRangeCount = 1,
                                     .pPushConstantRanges = &pc};
    if ((r = a->vkCreatePipelineLayout(vk->device, &li, NULL, &vk->layout)) != VK_SUCCESS)
        return sp_vk_fail(vk, r, "vkCreatePipelineLayout");
    VkCommandPoolCreateInfo ci = {.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO,
                                  .flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT, .queueFamilyIndex = vk->queue_family};
    if ((r = a->vkCreateCommandPool(vk->device, &ci, NULL, &vk->pool)) != VK_SUCCESS) return sp_vk_fail(vk, r, "vkCreateCommandPool");
    for (int i = 0; i < SP_VK_CMD_BUFFERS; i++) {
        VkCommandBufferAllocateInfo ai = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO, .commandPool = vk->pool,
                                          .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY, .commandBufferCount = 1};
        VkFenceCreateInfo fi = {.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
        if ((r = a->vkAllocateCommandBuffers(vk->device, &ai, &vk->cmds[i].cb)) != VK_SUCCESS ||
            (r = a->vkCreateFence(vk->device, &fi, NULL, &vk->cmds[i].fence)) != VK_SUCCESS)
            return sp_vk_fail(vk, r, "command buffers");
    }
    vk->cur = -1;
    const char *b = getenv("SPLASH_VULKAN_BARRIERS");
    vk->barrier_all = b && !strcmp(b, "all");
    const char *prof = getenv("SPLASH_VULKAN_PROFILE");
    vk->profile = prof ? atoi(prof) : 0;
    if (vk->profile && vk->props.limits.timestampComputeAndGraphics) {
        VkQueryPoolCreateInfo qi = {.sType = VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO, .queryType = VK_QUERY_TYPE_TIMESTAMP,
                                    .queryCount = SP_VK_CMD_BUFFERS * QUERIES_PER_CMD};
        if ((r = a->vkCreateQueryPool(vk->device, &qi, NULL, &vk->queries)) != VK_SUCCESS) vk->profile = 0;
    } else vk->profile = 0;
    return SPLASH_OK;
}

static void print_profile(sp_vk *vk) {
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
            total / 1e6, (unsigned long long)vk->n_submits, (unsigned long long)vk->n_barriers);
    fprintf(stderr, "  %-22s %10s %12s %10s %6s\n", "op", "count", "total ms", "mean us", "share");
    for (int32_t i = 0; i < vk->n_prof; i++)
        fprintf(stderr, "  %-22s %10llu %12.3f %10.2f %5.1f%%\n", vk->prof[i].name, (unsigned long long)vk->prof[i].count,
                vk->prof[i].ns / 1e6, vk->prof[i].ns / 1e3 / (double)vk->prof[i].count, 100 * vk->prof[i].ns / (total > 0 ? total : 1));
}

static void collect(sp_vk *vk, sp_vk_cmd *c) {
    if (!vk->profile || c->n_queries < 2) return;
    uint64_t t[QUERIES_PER_CMD];
    int32_t base = (int32_t)(c - vk->cmds) * QUERIES_PER_CMD;
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
    if (r != VK_SUCCESS) return sp_vk_fail(vk, r, "vkWaitForFences");
    collect(vk, c);
    return SPLASH_OK;
}

static void stamp(sp_vk *vk, sp_vk_cmd *c, const char *name) {
    if (!vk->profile || c->n_queries >= QUERIES_PER_CMD) return;
    c->names[c->n_queries] = name;
    vk->api.vkCmdWriteTimestamp(c->cb, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, vk->queries,
                                (uint32_t)((c - vk->cmds) * QUERIES_PER_CMD + c->n_queries));
    c->n_queries++;
}

static sp_vk_cmd *open_cmd(sp_vk *vk) {
    if (vk->cur >= 0) return &vk->cmds[vk->cur];
    sp_vk_cmd *c = &vk->cmds[vk->next];
    if (wait_cmd(vk, c)) return NULL;
    sp_vk_api *a = &vk->api;
    VkResult r;
    VkCommandBufferBeginInfo bi = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
                                   .flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT};
    if ((r = a->vkResetCommandBuffer(c->cb, 0)) != VK_SUCCESS || (r = a->vkBeginCommandBuffer(c->cb, &bi)) != VK_SUCCESS) {
        sp_vk_fail(vk, r, "vkBeginCommandBuffer");
        return NULL;
    }
    vk->cur = vk->next;
    vk->next = (vk->next + 1) % SP_VK_CMD_BUFFERS;
    vk->n_dispatches = 0;
    vk->bound = VK_NULL_HANDLE;
    /* the first command waits for everything submitted before (earlier command buffers on this queue) */
    vk->n_reads = vk->n_writes = 0;
    vk->fresh = true;
    c->n_queries = 0;
    if (vk->profile) {
        a->vkCmdResetQueryPool(c->cb, vk->queries, (uint32_t)(vk->cur * QUERIES_PER_CMD), QUERIES_PER_CMD);
        stamp(vk, c, "start");
    }
    return c;
}

static void barrier(sp_vk *vk, sp_vk_cmd *c) {
    VkMemoryBarrier mb = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
                          .srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT,
                          .dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_READ_BIT |
                                           VK_ACCESS_TRANSFER_WRITE_BIT | VK_ACCESS_INDIRECT_COMMAND_READ_BIT};
    vk->api.vkCmdPipelineBarrier(c->cb, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT,
                                 VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT |
                                     VK_PIPELINE_STAGE_DRAW_INDIRECT_BIT,
                                 0, 1, &mb, 0, NULL, 0, NULL);
    vk->n_reads = vk->n_writes = 0;
    vk->fresh = false;
    vk->n_barriers++;
}

static bool overlaps(sp_vk_range x, const sp_vk_range *list, int32_t n) {
    if (x.lo >= x.hi) return false;
    for (int32_t i = 0; i < n; i++)
        if (list[i].lo < x.hi && x.lo < list[i].hi) return true;
    return false;
}

/* Emits a barrier when the command about to be recorded conflicts with one since the last barrier. */
static void order(sp_vk *vk, sp_vk_cmd *c, const sp_vk_range *reads, int32_t nr, const sp_vk_range *writes, int32_t nw) {
    bool need = vk->fresh || vk->barrier_all || vk->n_reads + nr > SP_VK_MAX_RANGES || vk->n_writes + nw > SP_VK_MAX_RANGES;
    for (int32_t i = 0; i < nr && !need; i++) need = overlaps(reads[i], vk->writes, vk->n_writes);
    for (int32_t i = 0; i < nw && !need; i++)
        need = overlaps(writes[i], vk->writes, vk->n_writes) || overlaps(writes[i], vk->reads, vk->n_reads);
    if (need) barrier(vk, c);
    for (int32_t i = 0; i < nr; i++)
        if (reads[i].lo < reads[i].hi) vk->reads[vk->n_reads++] = reads[i];
    for (int32_t i = 0; i < nw; i++)
        if (writes[i].lo < writes[i].hi) vk->writes[vk->n_writes++] = writes[i];
}

static splash_status submit(sp_vk *vk) {
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
    if ((r = a->vkEndCommandBuffer(c->cb)) != VK_SUCCESS) return sp_vk_fail(vk, r, "vkEndCommandBuffer");
    if ((r = a->vkResetFences(vk->device, 1, &c->fence)) != VK_SUCCESS) return sp_vk_fail(vk, r, "vkResetFences");
    VkSubmitInfo si = {.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO, .commandBufferCount = 1, .pCommandBuffers = &c->cb};
    if ((r = a->vkQueueSubmit(vk->queue, 1, &si, c->fence)) != VK_SUCCESS) return sp_vk_fail(vk, r, "vkQueueSubmit");
    c->pending = true;
    vk->n_submits++;
    return SPLASH_OK;
}

/* After a command: profile it and submit when the command buffer is full. */
static void recorded(sp_vk *vk, sp_vk_cmd *c, const char *name) {
    stamp(vk, c, name);
    if (++vk->n_dispatches >= SP_VK_SUBMIT_EVERY) submit(vk);
}

splash_status sp_vk_sync(sp_vk *vk) {
    splash_status st = submit(vk);
    for (int i = 0; i < SP_VK_CMD_BUFFERS; i++) {
        splash_status w = wait_cmd(vk, &vk->cmds[i]);
        if (!st) st = w;
    }
    vk->ring_used = 0;
    vk->n_stage_cache = 0;
    if (vk->profile >= 2 && vk->n_prof) print_profile(vk);
    return st ? st : *vk->status;
}

VkPipeline sp_vk_pipeline_get(sp_vk *vk, sp_vk_kernel_id k, const uint32_t spec[4]) {
    for (int32_t i = 0; i < vk->n_pipelines; i++)
        if (vk->pipelines[i].kernel == k && !memcmp(vk->pipelines[i].spec, spec, sizeof vk->pipelines[i].spec))
            return vk->pipelines[i].pipeline;
    if (vk->n_pipelines == SP_VK_MAX_PIPELINES) {
        sp_vk_fail(vk, VK_ERROR_TOO_MANY_OBJECTS, "pipeline cache full");
        return VK_NULL_HANDLE;
    }
    /* spec constant i = spec[i] (ids a kernel does not declare are ignored) */
    VkSpecializationMapEntry entries[4];
    for (uint32_t i = 0; i < 4; i++) entries[i] = (VkSpecializationMapEntry){.constantID = i, .offset = 4 * i, .size = 4};
    VkSpecializationInfo si = {.mapEntryCount = 4, .pMapEntries = entries, .dataSize = 16, .pData = spec};
    VkComputePipelineCreateInfo ci = {
        .sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO,
        .stage = {.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO, .stage = VK_SHADER_STAGE_COMPUTE_BIT,
                  .module = vk->modules[k], .pName = "main", .pSpecializationInfo = &si},
        .layout = vk->layout};
    VkPipeline p;
    VkResult r = vk->api.vkCreateComputePipelines(vk->device, VK_NULL_HANDLE, 1, &ci, NULL, &p);
    if (r != VK_SUCCESS) {
        sp_vk_fail(vk, r, sp_vk_kernels[k].name);
        return VK_NULL_HANDLE;
    }
    sp_vk_pipeline *e = &vk->pipelines[vk->n_pipelines++];
    e->kernel = k;
    memcpy(e->spec, spec, sizeof e->spec);
    e->pipeline = p;
    return p;
}

void sp_vk_dispatch(sp_vk *vk, const char *name, sp_vk_kernel_id k, const uint32_t spec[4], const void *push,
                    uint32_t push_bytes, const uint32_t groups[3], const sp_vk_range *reads, int32_t n_reads,
                    const sp_vk_range *writes, int32_t n_writes, const void *indirect) {
    if (*vk->status) return;
    VkPipeline p = sp_vk_pipeline_get(vk, k, spec);
    sp_vk_cmd *c = p ? open_cmd(vk) : NULL;
    if (!c) return;
    sp_vk_api *a = &vk->api;
    order(vk, c, reads, n_reads, writes, n_writes);
    if (p != vk->bound) {
        a->vkCmdBindPipeline(c->cb, VK_PIPELINE_BIND_POINT_COMPUTE, p);
        vk->bound = p;
    }
    a->vkCmdPushConstants(c->cb, vk->layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, push_bytes, push);
    if (indirect) {
        const sp_vk_chunk *ch = sp_vk_chunk_of(vk, indirect);
        if (!ch) {
            sp_vk_fail(vk, VK_ERROR_UNKNOWN, "indirect dispatch buffer");
            return;
        }
        a->vkCmdDispatchIndirect(c->cb, ch->buffer, ch->offset + ((uintptr_t)indirect - ch->fake));
    } else {
        a->vkCmdDispatch(c->cb, groups[0], groups[1], groups[2]);
    }
    recorded(vk, c, name);
}

void sp_vk_copy(sp_vk *vk, VkBuffer src, uint64_t src_offset, VkBuffer dst, uint64_t dst_offset, uint64_t bytes,
                sp_vk_range read, sp_vk_range write) {
    if (*vk->status) return;
    sp_vk_cmd *c = open_cmd(vk);
    if (!c) return;
    order(vk, c, &read, 1, &write, 1);
    VkBufferCopy region = {src_offset, dst_offset, bytes};
    vk->api.vkCmdCopyBuffer(c->cb, src, dst, 1, &region);
    recorded(vk, c, "copy");
}

void sp_vk_fill(sp_vk *vk, VkBuffer dst, uint64_t offset, uint64_t bytes, sp_vk_range write) {
    if (*vk->status) return;
    sp_vk_cmd *c = open_cmd(vk);
    if (!c) return;
    order(vk, c, NULL, 0, &write, 1);
    vk->api.vkCmdFillBuffer(c->cb, dst, offset, bytes, 0);
    recorded(vk, c, "fill");
}

void sp_vk_record_free(sp_vk *vk) {
    sp_vk_api *a = &vk->api;
    if (!vk->device) return;
    sp_vk_sync(vk);
    if (vk->profile && vk->n_prof) print_profile(vk);
    for (int i = 0; i < SP_VK_CMD_BUFFERS; i++)
        if (vk->cmds[i].fence) a->vkDestroyFence(vk->device, vk->cmds[i].fence, NULL);
    if (vk->pool) a->vkDestroyCommandPool(vk->device, vk->pool, NULL);
    for (int32_t i = 0; i < vk->n_pipelines; i++) a->vkDestroyPipeline(vk->device, vk->pipelines[i].pipeline, NULL);
    if (vk->layout) a->vkDestroyPipelineLayout(vk->device, vk->layout, NULL);
    for (int i = 0; i < SP_VK_KERNEL_COUNT; i++)
        if (vk->modules[i]) a->vkDestroyShaderModule(vk->device, vk->modules[i], NULL);
    if (vk->queries) a->vkDestroyQueryPool(vk->device, vk->queries, NULL);
}
