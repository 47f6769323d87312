/* memory.c — Vulkan buffers for the GPU op layer: each with its own memory (the op layer sub-allocates weights), a
 * device address, and a mapping when the memory is host-visible. */
#include "vk.h"

#include "core/error.h"

#include <string.h>

splash_status sp_vk_buffer(sp_gpu *g, uint64_t bytes, sp_gpu_memory mem, sp_gpu_buffer *b) {
    sp_vk *vk = sp_vk_of(g);
    sp_vk_api *a = &vk->api;
    uint32_t type = mem == SP_GPU_DEVICE ? vk->mem_device : mem == SP_GPU_UPLOAD ? vk->mem_upload : vk->mem_readback;
    memset(b, 0, sizeof *b);
    VkBufferCreateInfo bi = {.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO, .size = bytes,
                             .usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT |
                                      VK_BUFFER_USAGE_TRANSFER_DST_BIT | VK_BUFFER_USAGE_SHADER_DEVICE_ADDRESS_BIT |
                                      VK_BUFFER_USAGE_INDIRECT_BUFFER_BIT,
                             .sharingMode = VK_SHARING_MODE_EXCLUSIVE};
    VkBuffer buffer;
    VkResult r = a->vkCreateBuffer(vk->device, &bi, NULL, &buffer);
    if (r != VK_SUCCESS) return sp_vk_check(r, "vkCreateBuffer");
    b->handle = (void *)buffer;
    VkMemoryRequirements req;
    a->vkGetBufferMemoryRequirements(vk->device, buffer, &req);
    if (!(req.memoryTypeBits & (1u << type))) {
        sp_vk_release(g, b);
        return SP_FAIL(SPLASH_ERR_UNSUPPORTED, "vulkan: no buffer of %s in its memory type", vk->props.deviceName);
    }
    VkMemoryAllocateFlagsInfo flags = {.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_FLAGS_INFO,
                                       .flags = VK_MEMORY_ALLOCATE_DEVICE_ADDRESS_BIT};
    VkMemoryAllocateInfo ai = {.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO, .pNext = &flags,
                               .allocationSize = req.size, .memoryTypeIndex = type};
    VkDeviceMemory memory;
    if ((r = a->vkAllocateMemory(vk->device, &ai, NULL, &memory)) != VK_SUCCESS) {
        sp_vk_release(g, b);
        return r == VK_ERROR_OUT_OF_DEVICE_MEMORY || r == VK_ERROR_OUT_OF_HOST_MEMORY
                   ? SP_FAIL(SPLASH_ERR_OUT_OF_MEMORY, "vulkan: out of device memory for %llu bytes", (unsigned long long)bytes)
                   : sp_vk_check(r, "vkAllocateMemory");
    }
    b->memory = (void *)memory;
    if ((r = a->vkBindBufferMemory(vk->device, buffer, memory, 0)) != VK_SUCCESS) {
        sp_vk_release(g, b);
        return sp_vk_check(r, "vkBindBufferMemory");
    }
    VkBufferDeviceAddressInfo di = {.sType = VK_STRUCTURE_TYPE_BUFFER_DEVICE_ADDRESS_INFO, .buffer = buffer};
    b->addr = a->vkGetBufferDeviceAddress(vk->device, &di);
    b->size = bytes;
    if (mem != SP_GPU_DEVICE) { /* device memory is never mapped: the host reaches it through the op layer's copies */
        void *map;
        if ((r = a->vkMapMemory(vk->device, memory, 0, VK_WHOLE_SIZE, 0, &map)) != VK_SUCCESS) {
            sp_vk_release(g, b);
            return sp_vk_check(r, "vkMapMemory");
        }
        b->host = map;
    }
    return SPLASH_OK;
}

void sp_vk_release(sp_gpu *g, sp_gpu_buffer *b) {
    sp_vk *vk = sp_vk_of(g);
    sp_vk_api *a = &vk->api;
    if (b->host) a->vkUnmapMemory(vk->device, (VkDeviceMemory)b->memory);
    if (b->handle) a->vkDestroyBuffer(vk->device, (VkBuffer)b->handle, NULL);
    if (b->memory) a->vkFreeMemory(vk->device, (VkDeviceMemory)b->memory, NULL);
    memset(b, 0, sizeof *b);
}
