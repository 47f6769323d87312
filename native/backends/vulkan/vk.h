/* vk.h — the Vulkan backend's internals, shared by its files (the rest of libsplash sees only vulkan.h).
 *
 * Memory model. Ops take pointers (backends/backend.h), so every byte the backend owns has an address in a range of
 * this process's virtual address space that is reserved and never mapped (PROT_NONE): a host access is a crash,
 * not silent garbage. A sorted table of chunks maps such a pointer to the device address kernels read
 * (VK_KHR_buffer_device_address, core in Vulkan 1.2) and to the VkBuffer and offset copies use. Weight rows are
 * padded on the device to 16 bytes for vector loads; their chunk remembers both row sizes.
 *
 * Execution model. An op records a dispatch into the open command buffer; nothing runs until a command buffer is
 * submitted, which happens every SUBMIT_EVERY dispatches (so the GPU starts while the host records the rest of a
 * step) and at a sync: a read back to the host (logits, sampled tokens). Barriers come only where a dispatch reads
 * or writes memory that an earlier dispatch since the last barrier wrote (or, for writes, read): each op declares
 * its ranges. Small host data a kernel needs (page tables, row lists) is staged through a ring: memcpy into mapped
 * memory, copy to device memory inside the command stream, valid until the next full sync.
 */
#ifndef SP_VK_H
#define SP_VK_H

#define VK_NO_PROTOTYPES
#include <vulkan/vulkan.h>

#include "backends/backend.h"
#include "vulkan_kernels.h"

#include <stdbool.h>
#include <stdint.h>

/* ---- the functions we load from libvulkan (dlopen at run time: no link-time dependency) ---- */
#define SP_VK_INSTANCE_FUNCS(X)                                                                                     \
    X(vkDestroyInstance) X(vkEnumeratePhysicalDevices) X(vkGetPhysicalDeviceProperties)                             \
    X(vkGetPhysicalDeviceProperties2) X(vkGetPhysicalDeviceFeatures2) X(vkGetPhysicalDeviceQueueFamilyProperties)   \
    X(vkGetPhysicalDeviceMemoryProperties) X(vkCreateDevice) X(vkGetDeviceProcAddr)
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
    SP_VK_SUBMIT_EVERY = 96,    /* dispatches per command buffer before it is submitted */
    SP_VK_MAX_RANGES = 48,      /* hazard ranges remembered between barriers */
    SP_VK_PUSH_BYTES = 128,     /* the push-constant size every device guarantees */
    SP_VK_MAX_PIPELINES = 256,
    SP_VK_STAGE_CACHE = 64,
    SP_VK_MAX_EXPERT_TABLES = 1024,
    SP_VK_MAX_TUNINGS = 256,
};

/* A device address range [lo, hi) an op reads or writes. */
typedef struct sp_vk_range {
    VkDeviceAddress lo, hi;
} sp_vk_range;

/* A run of fake addresses backed by device memory. */
typedef struct sp_vk_chunk {
    uintptr_t fake;          /* first fake address */
    uint64_t size;           /* fake bytes (host layout) */
    VkBuffer buffer;         /* where the bytes live: buffer + offset */
    uint64_t offset;
    VkDeviceAddress addr;    /* device address of the first byte */
    int64_t host_row, dev_row; /* padded weight rows (row r at fake + r·host_row, device addr + r·dev_row); 0 = linear */
    VkDeviceMemory own_memory; /* dedicated allocations own these (freed with the chunk); sub-allocated weights don't */
    VkBuffer own_buffer;
} sp_vk_chunk;

/* One device buffer with its memory, address and (for host-visible ones) mapping. */
typedef struct sp_vk_buffer {
    VkBuffer buffer;
    VkDeviceMemory memory;
    VkDeviceAddress addr;
    uint64_t size;
    void *map;
} sp_vk_buffer;

/* Host data staged at ring offset `offset` (valid until the ring is reset by a sync). */
typedef struct sp_vk_staged {
    const void *host;
    uint64_t bytes, offset;
} sp_vk_staged;

/* The device table of one MoE layer's expert row-0 addresses, keyed by its gate views and where they point. */
typedef struct sp_vk_expert_table {
    const sp_matrix *key;
    const void *first;       /* key[0].data */
    int32_t n_experts;
    const uint64_t *table;   /* backend memory: [E][gate, up, down] */
    uint32_t gate_stride, down_stride;
} sp_vk_expert_table;

typedef struct sp_vk_pipeline {
    sp_vk_kernel_id kernel;
    uint32_t spec[4];
    VkPipeline pipeline;
} sp_vk_pipeline;

typedef struct sp_vk_cmd {
    VkCommandBuffer cb;
    VkFence fence;
    bool pending;            /* submitted, fence not yet waited */
    int32_t n_queries;       /* profiling: timestamps written */
    const char *names[SP_VK_SUBMIT_EVERY + 8]; /* profiling: the op each timestamp closes */
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

    /* fake address space */
    uint8_t *fake_base;
    uint64_t fake_size, fake_used;
    sp_vk_chunk *chunks;
    int32_t n_chunks, cap_chunks;

    /* weights: sub-allocated from large blocks */
    sp_vk_buffer *blocks;
    int32_t n_blocks;
    uint64_t block_used;     /* bytes used in the last block */

    /* staging: host → device ring (host-visible, plus its device-local twin), device → host readback, uploads */
    sp_vk_buffer ring_host, ring_dev, readback, upload;
    uint64_t ring_used;
    sp_vk_staged stage_cache[SP_VK_STAGE_CACHE]; /* what the ring holds, so a page table staged by one layer serves all */
    int32_t n_stage_cache;

    /* pipelines */
    VkShaderModule modules[SP_VK_KERNEL_COUNT];
    VkPipelineLayout layout;
    sp_vk_pipeline pipelines[SP_VK_MAX_PIPELINES];
    int32_t n_pipelines;

    /* recording */
    VkCommandPool pool;
    sp_vk_cmd cmds[SP_VK_CMD_BUFFERS];
    int32_t cur;             /* command buffer being recorded, −1 = none */
    int32_t next;
    int32_t n_dispatches;    /* in the open command buffer */
    VkPipeline bound;
    sp_vk_range reads[SP_VK_MAX_RANGES], writes[SP_VK_MAX_RANGES];
    int32_t n_reads, n_writes;
    bool fresh;              /* nothing recorded since the command buffer began: the next command needs a barrier */
    bool barrier_all;        /* SPLASH_VULKAN_BARRIERS=all: a barrier before every command (debugging) */
    uint64_t n_barriers, n_submits;

    /* profiling (SPLASH_VULKAN_PROFILE=1: table at exit; 2: also after every sync) */
    int profile;
    VkQueryPool queries;
    double timestamp_ns;
    sp_vk_profile_row prof[64];
    int32_t n_prof;

    /* greedy sampling results */
    sp_vk_buffer stats;
    /* attention split partials (grown on demand) */
    float *part;
    uint64_t part_bytes;
    /* MoE expert address tables, one per expert set */
    sp_vk_expert_table expert_tables[SP_VK_MAX_EXPERT_TABLES];
    int32_t n_expert_tables;

    /* launch parameters read from SPLASH_VULKAN_TUNING (tuning.c) */
    sp_vk_gemv_tuning gemv[SP_VK_MAX_TUNINGS];
    int32_t n_gemv;
    uint32_t attention_workgroups; /* ATTEND workgroups a split decode aims for */

    splash_status *status;   /* the backend's op status (first failure wins) */
} sp_vk;

/* The context behind a backend made by sp_vulkan_backend_create. */
static inline sp_vk *sp_vk_of(const sp_backend *be) { return (sp_vk *)be->impl; }

/* ---- device.c ---- */
/* Loads libvulkan and creates instance and device on the chosen GPU (see vulkan.h for the choice). */
splash_status sp_vk_open(sp_vk *vk, bool allow_cpu);
void sp_vk_close(sp_vk *vk);
/* Records a failure (the first one stays) in *vk->status; returns it. */
splash_status sp_vk_fail(sp_vk *vk, VkResult r, const char *what);

/* ---- memory.c ---- */
splash_status sp_vk_buffer_create(sp_vk *vk, uint64_t size, uint32_t mem_type, sp_vk_buffer *b);
void sp_vk_buffer_destroy(sp_vk *vk, sp_vk_buffer *b);
/* Reserves the fake address space and the staging buffers. */
splash_status sp_vk_memory_init(sp_vk *vk);
void sp_vk_memory_free(sp_vk *vk);
/* The chunk holding fake address p, or NULL. */
const sp_vk_chunk *sp_vk_chunk_of(const sp_vk *vk, const void *p);
/* Device address of fake address p (0 and a recorded failure when p is not the backend's). */
VkDeviceAddress sp_vk_addr(sp_vk *vk, const void *p);
/* [addr(p), addr(p) + bytes) as a hazard range. */
sp_vk_range sp_vk_span(sp_vk *vk, const void *p, uint64_t bytes);
/* Stages `bytes` of host data for the kernels of this command stream; returns its device address (0 on failure). */
VkDeviceAddress sp_vk_stage(sp_vk *vk, const void *host, uint64_t bytes);
void *sp_vk_alloc(const sp_backend *be, uint64_t bytes);
void sp_vk_free(const sp_backend *be, void *p);
const void *sp_vk_upload(const sp_backend *be, const void *data, int64_t rows, int64_t row_bytes);
void sp_vk_write(const sp_backend *be, void *dst, const void *src, uint64_t bytes);
void sp_vk_read(const sp_backend *be, void *dst, const void *src, uint64_t bytes);
void sp_vk_clear(const sp_backend *be, void *dst, uint64_t bytes);

/* ---- record.c ---- */
/* The pipeline for kernel k with spec constants 0..3 = spec[0..3] (0 = workgroup size), made on first use. */
VkPipeline sp_vk_pipeline_get(sp_vk *vk, sp_vk_kernel_id k, const uint32_t spec[4]);
/* Records one dispatch of groups[0..2] workgroups after the barrier its ranges need. indirect: a buffer range holding
 * VkDispatchIndirectCommand instead (groups ignored). */
void sp_vk_dispatch(sp_vk *vk, const char *name, sp_vk_kernel_id k, const uint32_t spec[4], const void *push,
                    uint32_t push_bytes, const uint32_t groups[3], const sp_vk_range *reads, int32_t n_reads,
                    const sp_vk_range *writes, int32_t n_writes, const void *indirect);
/* A transfer in the command stream (copy or fill), ordered like a dispatch. dst/src are chunk-relative. */
void sp_vk_copy(sp_vk *vk, VkBuffer src, uint64_t src_offset, VkBuffer dst, uint64_t dst_offset, uint64_t bytes,
                sp_vk_range read, sp_vk_range write);
void sp_vk_fill(sp_vk *vk, VkBuffer dst, uint64_t offset, uint64_t bytes, sp_vk_range write);
/* Submits what is recorded and waits until the device is idle; the staging ring is free again after it. */
splash_status sp_vk_sync(sp_vk *vk);
splash_status sp_vk_record_init(sp_vk *vk);
void sp_vk_record_free(sp_vk *vk);
/* Splits n workgroups into a 2-D grid (x ≤ 65535). */
void sp_vk_grid(uint64_t n, uint32_t groups[3]);

/* ---- tuning.c ---- */
/* Reads SPLASH_VULKAN_TUNING when set (and sets the defaults either way). */
splash_status sp_vk_tuning_load(sp_vk *vk);
/* GEMV workgroup size and rows per workgroup for W: the file's entry, else the built-in one, else the defaults. */
void sp_vk_gemv_params(const sp_vk *vk, const sp_matrix *W, uint32_t *wg, uint32_t *rows);

/* ---- ops.c ---- */
void sp_vk_ops_install(sp_backend *be);
/* matmul with a chosen launch (the lab measures each): GEMV workgroup size and rows per workgroup (n ≤ 4), or the
 * GEMM tile (index into sp_vk_tiles). NULL: the tuned or default choice, as the op makes it. */
typedef struct sp_vk_mm_launch {
    uint32_t workgroup, rows;
    int tile;
} sp_vk_mm_launch;
void sp_vk_matmul_launch(const sp_backend *be, float *y, const sp_matrix *W, const float *x, int64_t n,
                         const sp_vk_mm_launch *force);

#endif
