/* vk.h — the Vulkan backend's internals, shared by its files (the rest of libsplash sees only vulkan.h).
 *
 * The backend is the GPU op layer (backends/gpu/gpu.h: memory model, execution model, every op) over the device this
 * directory implements: buffers with device addresses (VK_KHR_buffer_device_address, core in Vulkan 1.2; device-local
 * memory is never mapped, so the op layer stages host data through UPLOAD buffers and copies), pipelines by
 * specialization constants, command buffers with a memory barrier wherever the op layer asks for one, submissions
 * with fences, and timestamps for profiles.
 */
#ifndef SP_VK_H
#define SP_VK_H

#define VK_NO_PROTOTYPES
#include <vulkan/vulkan.h>

#include "backends/gpu/gpu.h"
#include "vulkan_kernels.h"

#include <stdbool.h>
#include <stdint.h>

#include "coopmat_khr.h"

/* ---- the functions we load from libvulkan (dlopen at run time: no link-time dependency) ---- */
#define SP_VK_INSTANCE_FUNCS(X)                                                                                     \
    X(vkDestroyInstance) X(vkEnumeratePhysicalDevices) X(vkGetPhysicalDeviceProperties)                             \
    X(vkGetPhysicalDeviceProperties2) X(vkGetPhysicalDeviceFeatures2) X(vkGetPhysicalDeviceQueueFamilyProperties)   \
    X(vkGetPhysicalDeviceMemoryProperties) X(vkCreateDevice) X(vkGetDeviceProcAddr) X(vkEnumerateDeviceExtensionProperties)
#define SP_VK_DEVICE_FUNCS(X)                                                                                       \
    X(vkDestroyDevice) X(vkGetDeviceQueue) X(vkDeviceWaitIdle) X(vkAllocateMemory) X(vkFreeMemory) X(vkMapMemory)   \
    X(vkUnmapMemory) X(vkCreateBuffer) X(vkDestroyBuffer) X(vkGetBufferMemoryRequirements) X(vkBindBufferMemory)    \
    X(vkGetBufferDeviceAddress) X(vkCreateShaderModule) X(vkDestroyShaderModule) X(vkCreatePipelineLayout)          \
    X(vkDestroyPipelineLayout) X(vkCreateComputePipelines) X(vkDestroyPipeline) X(vkCreateCommandPool)              \
    X(vkDestroyCommandPool) X(vkAllocateCommandBuffers) X(vkResetCommandBuffer) X(vkBeginCommandBuffer)             \
    X(vkEndCommandBuffer) X(vkQueueSubmit) X(vkCreateFence) X(vkDestroyFence) X(vkWaitForFences) X(vkResetFences)   \
    X(vkCmdBindPipeline) X(vkCmdPushConstants) X(vkCmdDispatch) X(vkCmdDispatchIndirect) X(vkCmdPipelineBarrier)    \
    X(vkCmdCopyBuffer) X(vkCmdFillBuffer) X(vkCreateQueryPool) X(vkDestroyQueryPool) X(vkCmdResetQueryPool)         \
    X(vkCmdWriteTimestamp) X(vkGetQueryPoolResults)

typedef struct sp_vk_api {
    void *lib;
    PFN_vkGetInstanceProcAddr vkGetInstanceProcAddr;
    PFN_vkCreateInstance vkCreateInstance;
    PFN_vkEnumerateInstanceVersion vkEnumerateInstanceVersion;
#define SP_VK_DECLARE(f) PFN_##f f;
    SP_VK_INSTANCE_FUNCS(SP_VK_DECLARE)
    SP_VK_DEVICE_FUNCS(SP_VK_DECLARE)
#undef SP_VK_DECLARE
} sp_vk_api;

enum {
    SP_VK_CMD_BUFFERS = 4,      /* in flight at once */
    SP_VK_PUSH_BYTES = 128,     /* the push-constant size every device guarantees */
    SP_VK_QUERIES_PER_CMD = SP_GPU_SUBMIT_EVERY + 8,
};

typedef struct sp_vk_cmd {
    VkCommandBuffer cb;
    VkFence fence;
    bool pending;            /* submitted, fence not yet waited */
    int32_t n_queries;       /* profiling: timestamps written */
    const char *names[SP_VK_QUERIES_PER_CMD]; /* profiling: the op each timestamp closes */
} sp_vk_cmd;

typedef struct sp_vk_profile_row {
    const char *name;
    uint64_t count;
    double ns;
} sp_vk_profile_row;

typedef struct sp_vk {
    sp_vk_api api;
    VkInstance instance;
    VkPhysicalDevice phys;
    VkPhysicalDeviceProperties props;
    VkDevice device;
    VkQueue queue;
    uint32_t queue_family;
    uint32_t mem_device, mem_upload, mem_readback; /* memory type indices */
    uint64_t max_buffer;                           /* largest VkBuffer */
    uint32_t subgroup_size;
    const char *no_coopmat;  /* why the cooperative-matrix kernels cannot run here, or NULL when they run */
    const char *no_int_dot;  /* why the integer-dot GEMV cannot run here, or NULL when it runs */

    /* pipelines */
    VkShaderModule modules[SP_GPU_KERNEL_COUNT];
    VkPipelineLayout layout;

    /* recording */
    VkCommandPool pool;
    sp_vk_cmd cmds[SP_VK_CMD_BUFFERS];
    int32_t cur;             /* command buffer being recorded, −1 = none */
    int32_t next;
    VkPipeline bound;
    bool indirect_stale;          /* a barrier since the last one that reached the indirect-argument stage */

    /* profiling (SPLASH_VULKAN_PROFILE=1: table at exit; 2: also after every finish), with the driver's statistics of
     * each pipeline made (registers, spills) where it has VK_KHR_pipeline_executable_properties */
    int profile;
    PFN_vkGetPipelineExecutableStatisticsKHR pipeline_stats;
    char *stats_text;      /* one line per pipeline */
    size_t stats_len, stats_cap;
    VkQueryPool queries;
    double timestamp_ns;
    sp_vk_profile_row prof[64];
    int32_t n_prof;
} sp_vk;

/* The device behind a backend made by sp_vulkan_backend_create. */
static inline sp_vk *sp_vk_of(const sp_gpu *g) { return (sp_vk *)g->device; }

/* ---- device.c ---- */
/* Loads libvulkan and creates instance and device on the chosen GPU (see vulkan.h for the choice). */
splash_status sp_vk_open(sp_vk *vk, bool allow_cpu);
void sp_vk_close(sp_vk *vk);
/* SPLASH_OK for VK_SUCCESS, else a failure naming `what` (out of memory as SPLASH_ERR_OUT_OF_MEMORY). */
splash_status sp_vk_check(VkResult r, const char *what);

/* ---- memory.c: the sp_gpu_device buffer calls ---- */
splash_status sp_vk_buffer(sp_gpu *g, uint64_t bytes, sp_gpu_memory mem, sp_gpu_buffer *b);
void sp_vk_release(sp_gpu *g, sp_gpu_buffer *b);

/* ---- record.c: the sp_gpu_device pipeline and command calls ---- */
splash_status sp_vk_record_init(sp_vk *vk);
/* After the op layer released its pipelines; prints the profile when one was taken. */
void sp_vk_record_free(sp_vk *vk, const sp_gpu *g);
void *sp_vk_pipeline(sp_gpu *g, sp_gpu_kernel_id k, const uint32_t spec[4], uint32_t *max_threads);
void sp_vk_release_pipeline(sp_gpu *g, void *pipeline);
splash_status sp_vk_dispatch(sp_gpu *g, const sp_gpu_launch *l);
splash_status sp_vk_copy(sp_gpu *g, const sp_gpu_buffer *src, uint64_t src_offset, const sp_gpu_buffer *dst,
                         uint64_t dst_offset, uint64_t bytes, bool barrier);
splash_status sp_vk_fill(sp_gpu *g, const sp_gpu_buffer *dst, uint64_t offset, uint64_t bytes, bool barrier);
splash_status sp_vk_submit(sp_gpu *g);
splash_status sp_vk_finish(sp_gpu *g);

#endif
