/* vulkan_coopmat_lab.c — the lab harness of the cooperative-matrix GEMM (STYLE.md §2): what bounds a KHR
 * cooperative-matrix GEMM on this device, stage by stage, with the probes of native/tools/vulkan_coopmat_lab.comp and the
 * product kernel itself (kernels/matmul_coopmat.comp), each compiled to SPIR-V beforehand by
 * scripts/bench/coopmat-lab.sh, which also writes the list of variants this program reads.
 *
 *   vulkan_coopmat_lab LIST [--m 12288] [--n 1024] [--k 5120] [--reps 10]
 *
 * LIST: one variant a line, `name file.spv mode threads bm bn bk fm fn ty wt` (mode 0 PEAK, 1 SHMEM, 2 STAGED, 3 the
 * product kernel; bm bn bk its workgroup tile and step; fm fn ty the PEAK probe's accumulators per subgroup and types; wt the
 * product kernel's weight type, f16, bf16 or q4). Mode 4 is the flash attention kernel (kernels/flash_attention_coopmat.comp)
 * on the 27B's attention (24/4 heads, a chunk of --n rows): bm its query vectors per workgroup, bn the positions before
 * the chunk, bk the head dim, ty the KV rows' type (SPLASH_KV_*: 0 f32, 1 f16, 2 int8); TFLOP/s over the causal
 * product (4 · head_dim multiply-adds per query head and visible key), error on sampled rows against the exact
 * attention over the stored rows. Prints the device's cooperative-matrix shapes, then per variant the
 * driver's statistics of the pipeline (registers, spills: VK_KHR_pipeline_executable_properties where the driver
 * has it), its time and TFLOP/s, and for the GEMMs the relative error on sampled outputs against the exact product
 * of the f16 operands (PEAK and SHMEM compute what no one needs: no check). The device is made here (not through
 * libsplash's backend) so that int8 products and the pipeline statistics can be asked for. */
#include "core/quant.h"

#define VK_NO_PROTOTYPES
#include <vulkan/vulkan.h>

#include "backends/vulkan/coopmat_khr.h"

#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* libvulkan is opened at run time, as libsplash does (no link-time dependency): every entry point through
 * vkGetInstanceProcAddr, device ones through the loader's trampolines. */
#define VK_FUNCS(X)                                                                                                 \
    X(vkEnumeratePhysicalDevices) X(vkGetPhysicalDeviceProperties) X(vkEnumerateDeviceExtensionProperties)          \
    X(vkGetPhysicalDeviceQueueFamilyProperties) X(vkGetPhysicalDeviceFeatures2) X(vkCreateDevice) X(vkGetDeviceQueue) \
    X(vkGetPhysicalDeviceMemoryProperties) X(vkCreateCommandPool) X(vkCreatePipelineLayout) X(vkCreateQueryPool)     \
    X(vkCreateBuffer) X(vkGetBufferMemoryRequirements) X(vkAllocateMemory) X(vkBindBufferMemory)                     \
    X(vkGetBufferDeviceAddress) X(vkMapMemory) X(vkAllocateCommandBuffers) X(vkBeginCommandBuffer)                   \
    X(vkCmdPipelineBarrier) X(vkEndCommandBuffer) X(vkQueueSubmit) X(vkQueueWaitIdle) X(vkFreeCommandBuffers)        \
    X(vkCmdCopyBuffer) X(vkDestroyBuffer) X(vkFreeMemory) X(vkCreateShaderModule) X(vkCreateComputePipelines)        \
    X(vkDestroyShaderModule) X(vkGetDeviceProcAddr) X(vkCmdResetQueryPool) X(vkCmdBindPipeline) X(vkCmdPushConstants) \
    X(vkCmdWriteTimestamp) X(vkCmdDispatch) X(vkGetQueryPoolResults) X(vkDestroyPipeline)
#define VK_DECLARE(f) static PFN_##f f;
VK_FUNCS(VK_DECLARE)
static PFN_vkGetInstanceProcAddr vkGetInstanceProcAddr;

#define CHECK(x)                                                                                                    \
    do {                                                                                                            \
        VkResult r_ = (x);                                                                                          \
        if (r_ != VK_SUCCESS) {                                                                                     \
            fprintf(stderr, "%s:%d: %s failed (%d)\n", __FILE__, __LINE__, #x, (int)r_);                            \
            exit(1);                                                                                                \
        }                                                                                                           \
    } while (0)

static VkDevice dev;
static VkPhysicalDevice phys;
static VkQueue queue;
static uint32_t mem_dev, mem_host;
static VkCommandPool pool;
static VkPipelineLayout layout;
static VkQueryPool queries;
static double tick_ns;
static bool have_stats;

typedef struct buf {
    VkBuffer b;
    VkDeviceMemory m;
    VkDeviceAddress addr;
    void *host;
    uint64_t size;
} buf;

static buf make_buf(uint64_t size, bool host) {
    buf o = {.size = size};
    VkBufferCreateInfo bi = {.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO, .size = size,
                             .usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT |
                                      VK_BUFFER_USAGE_TRANSFER_DST_BIT | VK_BUFFER_USAGE_SHADER_DEVICE_ADDRESS_BIT};
    CHECK(vkCreateBuffer(dev, &bi, NULL, &o.b));
    VkMemoryRequirements req;
    vkGetBufferMemoryRequirements(dev, o.b, &req);
    VkMemoryAllocateFlagsInfo fl = {.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_FLAGS_INFO, .flags = VK_MEMORY_ALLOCATE_DEVICE_ADDRESS_BIT};
    VkMemoryAllocateInfo ai = {.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO, .pNext = &fl, .allocationSize = req.size,
                               .memoryTypeIndex = host ? mem_host : mem_dev};
    CHECK(vkAllocateMemory(dev, &ai, NULL, &o.m));
    CHECK(vkBindBufferMemory(dev, o.b, o.m, 0));
    VkBufferDeviceAddressInfo di = {.sType = VK_STRUCTURE_TYPE_BUFFER_DEVICE_ADDRESS_INFO, .buffer = o.b};
    o.addr = vkGetBufferDeviceAddress(dev, &di);
    if (host) CHECK(vkMapMemory(dev, o.m, 0, VK_WHOLE_SIZE, 0, &o.host));
    return o;
}

static VkCommandBuffer begin(void) {
    VkCommandBufferAllocateInfo ai = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO, .commandPool = pool,
                                      .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY, .commandBufferCount = 1};
    VkCommandBuffer cb;
    CHECK(vkAllocateCommandBuffers(dev, &ai, &cb));
    VkCommandBufferBeginInfo bi = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO, .flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT};
    CHECK(vkBeginCommandBuffer(cb, &bi));
    return cb;
}

static void barrier(VkCommandBuffer cb) {
    VkMemoryBarrier mb = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER, .srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT,
                          .dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_READ_BIT};
    vkCmdPipelineBarrier(cb, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT,
                         VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT, 0, 1, &mb, 0, NULL, 0, NULL);
}

static void end_wait(VkCommandBuffer cb) {
    CHECK(vkEndCommandBuffer(cb));
    VkSubmitInfo si = {.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO, .commandBufferCount = 1, .pCommandBuffers = &cb};
    CHECK(vkQueueSubmit(queue, 1, &si, VK_NULL_HANDLE));
    CHECK(vkQueueWaitIdle(queue));
    vkFreeCommandBuffers(dev, pool, 1, &cb);
}

/* host ↔ device copies through a staging buffer */
static void upload(buf *dst, const void *src, uint64_t bytes) {
    buf s = make_buf(bytes, true);
    memcpy(s.host, src, bytes);
    VkCommandBuffer cb = begin();
    VkBufferCopy c = {.size = bytes};
    vkCmdCopyBuffer(cb, s.b, dst->b, 1, &c);
    end_wait(cb);
    vkDestroyBuffer(dev, s.b, NULL), vkFreeMemory(dev, s.m, NULL);
}
static void download(void *dst, buf *src, uint64_t bytes) {
    buf s = make_buf(bytes, true);
    VkCommandBuffer cb = begin();
    VkBufferCopy c = {.size = bytes};
    vkCmdCopyBuffer(cb, src->b, s.b, 1, &c);
    end_wait(cb);
    memcpy(dst, s.host, bytes);
    vkDestroyBuffer(dev, s.b, NULL), vkFreeMemory(dev, s.m, NULL);
}

static const char *ctype(uint32_t t) {
    static const char *n[] = {"f16", "f32", "f64", "s8", "s16", "s32", "s64", "u8", "u16", "u32", "u64"};
    if (t < 11) return n[t];
    if (t == 1000141000) return "bf16";
    return t == 1000491002 ? "e4m3" : t == 1000491003 ? "e5m2" : "?";
}

static void open_device(void) {
    void *lib = dlopen("libvulkan.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib || !(vkGetInstanceProcAddr = (PFN_vkGetInstanceProcAddr)dlsym(lib, "vkGetInstanceProcAddr"))) {
        fprintf(stderr, "no Vulkan loader (libvulkan.so.1)\n");
        exit(1);
    }
    PFN_vkCreateInstance vkCreateInstance = (PFN_vkCreateInstance)vkGetInstanceProcAddr(NULL, "vkCreateInstance");
    VkApplicationInfo app = {.sType = VK_STRUCTURE_TYPE_APPLICATION_INFO, .pApplicationName = "vulkan_coopmat_lab", .apiVersion = VK_API_VERSION_1_3};
    VkInstanceCreateInfo ici = {.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO, .pApplicationInfo = &app};
    VkInstance inst;
    CHECK(vkCreateInstance(&ici, NULL, &inst));
#define VK_LOAD(f)                                                                                                  \
    if (!(f = (PFN_##f)vkGetInstanceProcAddr(inst, #f))) {                                                          \
        fprintf(stderr, "the loader has no " #f "\n");                                                             \
        exit(1);                                                                                                    \
    }
    VK_FUNCS(VK_LOAD)
#undef VK_LOAD
    uint32_t n = 8;
    VkPhysicalDevice devs[8];
    vkEnumeratePhysicalDevices(inst, &n, devs);
    int pick = -1;
    for (uint32_t i = 0; i < n && pick < 0; i++) {
        VkPhysicalDeviceProperties p;
        vkGetPhysicalDeviceProperties(devs[i], &p);
        if (p.deviceType == VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU) pick = (int)i;
    }
    phys = devs[pick < 0 ? 0 : pick];
    VkPhysicalDeviceProperties props;
    vkGetPhysicalDeviceProperties(phys, &props);
    tick_ns = props.limits.timestampPeriod;
    printf("device: %s, driver %u.%u, shared memory per workgroup %u bytes\n", props.deviceName, props.driverVersion >> 22,
           (props.driverVersion >> 14) & 0xff, props.limits.maxComputeSharedMemorySize);

    uint32_t ne = 0;
    vkEnumerateDeviceExtensionProperties(phys, NULL, &ne, NULL);
    VkExtensionProperties *ext = calloc(ne, sizeof *ext);
    vkEnumerateDeviceExtensionProperties(phys, NULL, &ne, ext);
    bool coop = false, stats = false;
    for (uint32_t i = 0; i < ne; i++) {
        if (!strcmp(ext[i].extensionName, "VK_KHR_cooperative_matrix")) coop = true;
        if (!strcmp(ext[i].extensionName, "VK_KHR_pipeline_executable_properties")) stats = true;
        if (strstr(ext[i].extensionName, "cooperative_matrix")) printf("extension: %s\n", ext[i].extensionName);
    }
    free(ext);
    if (coop) {
        PFN_vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR f =
            (PFN_vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR)vkGetInstanceProcAddr(inst, "vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR");
        uint32_t np = 0;
        f(phys, &np, NULL);
        VkCooperativeMatrixPropertiesKHR *cp = calloc(np, sizeof *cp);
        for (uint32_t i = 0; i < np; i++) cp[i].sType = VK_STRUCTURE_TYPE_COOPERATIVE_MATRIX_PROPERTIES_KHR;
        f(phys, &np, cp);
        printf("cooperative matrix shapes (M x N x K: A B -> C result, scope):\n");
        for (uint32_t i = 0; i < np; i++)
            printf("  %ux%ux%u: %s %s -> %s %s%s, scope %u\n", cp[i].MSize, cp[i].NSize, cp[i].KSize, ctype(cp[i].AType), ctype(cp[i].BType),
                   ctype(cp[i].CType), ctype(cp[i].ResultType), cp[i].saturatingAccumulation ? " saturating" : "", cp[i].scope);
        free(cp);
    } else printf("no VK_KHR_cooperative_matrix: only the harness runs\n");

    uint32_t nq = 8;
    VkQueueFamilyProperties qf[8];
    vkGetPhysicalDeviceQueueFamilyProperties(phys, &nq, qf);
    uint32_t fam = 0;
    while (fam < nq && !(qf[fam].queueFlags & VK_QUEUE_COMPUTE_BIT)) fam++;

    VkPhysicalDeviceCooperativeMatrixFeaturesKHR cm = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_KHR,
                                                       .cooperativeMatrix = VK_TRUE};
    VkPhysicalDevicePipelineExecutablePropertiesFeaturesKHR pe = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PIPELINE_EXECUTABLE_PROPERTIES_FEATURES_KHR, .pNext = coop ? &cm : NULL,
        .pipelineExecutableInfo = VK_TRUE};
    VkPhysicalDeviceVulkan12Features have12 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES};
    VkPhysicalDeviceFeatures2 have = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2, .pNext = &have12};
    vkGetPhysicalDeviceFeatures2(phys, &have);
    VkPhysicalDeviceVulkan12Features f12 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES,
                                            .pNext = stats ? (void *)&pe : coop ? (void *)&cm : NULL, .bufferDeviceAddress = VK_TRUE,
                                            .shaderFloat16 = have12.shaderFloat16, .shaderInt8 = have12.shaderInt8,
                                            .vulkanMemoryModel = have12.vulkanMemoryModel};
    VkPhysicalDeviceFeatures2 f = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2, .pNext = &f12, .features = {.shaderInt64 = VK_TRUE}};
    const char *names[2];
    uint32_t nn = 0;
    if (coop) names[nn++] = "VK_KHR_cooperative_matrix";
    if (stats) names[nn++] = "VK_KHR_pipeline_executable_properties";
    float prio = 1;
    VkDeviceQueueCreateInfo qci = {.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO, .queueFamilyIndex = fam, .queueCount = 1,
                                   .pQueuePriorities = &prio};
    VkDeviceCreateInfo dci = {.sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO, .pNext = &f, .queueCreateInfoCount = 1,
                              .pQueueCreateInfos = &qci, .enabledExtensionCount = nn, .ppEnabledExtensionNames = names};
    CHECK(vkCreateDevice(phys, &dci, NULL, &dev));
    have_stats = stats;
    vkGetDeviceQueue(dev, fam, 0, &queue);
    VkPhysicalDeviceMemoryProperties mp;
    vkGetPhysicalDeviceMemoryProperties(phys, &mp);
    mem_dev = mem_host = UINT32_MAX;
    for (uint32_t i = 0; i < mp.memoryTypeCount; i++) {
        VkMemoryPropertyFlags fl = mp.memoryTypes[i].propertyFlags;
        if (mem_dev == UINT32_MAX && (fl & VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT)) mem_dev = i;
        if (mem_host == UINT32_MAX && (fl & VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT) && (fl & VK_MEMORY_PROPERTY_HOST_COHERENT_BIT)) mem_host = i;
    }
    if (mem_dev == UINT32_MAX) mem_dev = mem_host;
    VkCommandPoolCreateInfo pci = {.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO, .queueFamilyIndex = fam};
    CHECK(vkCreateCommandPool(dev, &pci, NULL, &pool));
    VkPushConstantRange pc = {.stageFlags = VK_SHADER_STAGE_COMPUTE_BIT, .size = 128};
    VkPipelineLayoutCreateInfo li = {.sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO, .pushConstantRangeCount = 1, .pPushConstantRanges = &pc};
    CHECK(vkCreatePipelineLayout(dev, &li, NULL, &layout));
    VkQueryPoolCreateInfo qi = {.sType = VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO, .queryType = VK_QUERY_TYPE_TIMESTAMP, .queryCount = 2};
    CHECK(vkCreateQueryPool(dev, &qi, NULL, &queries));
}

static uint32_t *read_spv(const char *path, size_t *bytes) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    *bytes = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    uint32_t *w = malloc(*bytes);
    if (fread(w, 1, *bytes, f) != *bytes) *bytes = 0;
    fclose(f);
    return w;
}

/* The pipeline of `path` with `threads` invocations per workgroup; its driver statistics printed. NULL on failure. */
static VkPipeline pipeline(const char *path, uint32_t threads, uint32_t spec1, char *stats, size_t stats_len) {
    size_t bytes = 0;
    uint32_t *code = read_spv(path, &bytes);
    stats[0] = 0;
    if (!code || !bytes) {
        snprintf(stats, stats_len, "cannot read %s", path);
        return VK_NULL_HANDLE;
    }
    VkShaderModuleCreateInfo mi = {.sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO, .codeSize = bytes, .pCode = code};
    VkShaderModule mod;
    VkResult r = vkCreateShaderModule(dev, &mi, NULL, &mod);
    free(code);
    if (r != VK_SUCCESS) {
        snprintf(stats, stats_len, "vkCreateShaderModule %d", (int)r);
        return VK_NULL_HANDLE;
    }
    /* spec constant 0: the workgroup size; 1: the flash kernel's KV type (ignored by kernels without it) */
    uint32_t spec[2] = {threads, spec1};
    VkSpecializationMapEntry e[2] = {{.constantID = 0, .offset = 0, .size = 4}, {.constantID = 1, .offset = 4, .size = 4}};
    VkSpecializationInfo si = {.mapEntryCount = 2, .pMapEntries = e, .dataSize = 8, .pData = spec};
    VkComputePipelineCreateInfo ci = {
        .sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO,
        .flags = have_stats ? VK_PIPELINE_CREATE_CAPTURE_STATISTICS_BIT_KHR : 0,
        .stage = {.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO, .stage = VK_SHADER_STAGE_COMPUTE_BIT, .module = mod,
                  .pName = "main", .pSpecializationInfo = &si},
        .layout = layout};
    VkPipeline p;
    r = vkCreateComputePipelines(dev, VK_NULL_HANDLE, 1, &ci, NULL, &p);
    vkDestroyShaderModule(dev, mod, NULL);
    if (r != VK_SUCCESS) {
        snprintf(stats, stats_len, "vkCreateComputePipelines %d", (int)r);
        return VK_NULL_HANDLE;
    }
    if (have_stats) {
        PFN_vkGetPipelineExecutableStatisticsKHR gs = (PFN_vkGetPipelineExecutableStatisticsKHR)vkGetDeviceProcAddr(dev, "vkGetPipelineExecutableStatisticsKHR");
        VkPipelineExecutableInfoKHR ei = {.sType = VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_INFO_KHR, .pipeline = p, .executableIndex = 0};
        uint32_t ns = 0;
        if (gs && gs(dev, &ei, &ns, NULL) == VK_SUCCESS && ns) {
            VkPipelineExecutableStatisticKHR *st = calloc(ns, sizeof *st);
            for (uint32_t i = 0; i < ns; i++) st[i].sType = VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_STATISTIC_KHR;
            gs(dev, &ei, &ns, st);
            size_t len = 0;
            for (uint32_t i = 0; i < ns && len < stats_len; i++) {
                char v[32];
                switch (st[i].format) {
                case VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_BOOL32_KHR: snprintf(v, sizeof v, "%u", st[i].value.b32); break;
                case VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_INT64_KHR: snprintf(v, sizeof v, "%lld", (long long)st[i].value.i64); break;
                case VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_UINT64_KHR: snprintf(v, sizeof v, "%llu", (unsigned long long)st[i].value.u64); break;
                default: snprintf(v, sizeof v, "%g", st[i].value.f64);
                }
                len += (size_t)snprintf(stats + len, stats_len - len, "%s%s=%s", i ? ", " : "", st[i].name, v);
            }
            free(st);
        }
    }
    return p;
}

typedef struct push {
    uint64_t a, b, c;
    uint32_t iters, m, n, k;
} push;
typedef struct push_product {  /* kernels/matmul_coopmat.comp's */
    uint64_t w, x, y;
    uint32_t row_bytes, rows, cols, n, x_stride, y_stride;
} push_product;

typedef struct push_attention { /* kernels/flash_attention_coopmat.comp's (attention.comp's) */
    uint64_t dst, src, k, v, pages, part;
    uint32_t n_past, n, heads, kv_heads, page_tokens, page_stride, split_len, n_splits, hb, rt;
    float scale;
    uint32_t kv_type;
    uint64_t src2;
} push_attention;

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* Seconds per launch: warm-up submissions of `reps` launches for at least WARM_S (the host's work before a variant
 * leaves the GPU idle, and its clocks take a few hundred ms to come back up), then `reps` launches with a barrier
 * between each, timed by timestamps. */
#define WARM_S 0.5
static double run(VkPipeline p, const void *pc, uint32_t pc_bytes, uint32_t gx, uint32_t gy, int reps) {
    double t0 = now();
    for (int pass = 0; pass < 2; pass++) {
        VkCommandBuffer cb = begin();
        vkCmdResetQueryPool(cb, queries, 0, 2);
        vkCmdBindPipeline(cb, VK_PIPELINE_BIND_POINT_COMPUTE, p);
        vkCmdPushConstants(cb, layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, pc_bytes, pc);
        vkCmdWriteTimestamp(cb, VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT, queries, 0);
        for (int r = 0; r < reps; r++) {
            vkCmdDispatch(cb, gx, gy, 1);
            barrier(cb);
        }
        vkCmdWriteTimestamp(cb, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, queries, 1);
        end_wait(cb);
        if (!pass && now() - t0 < WARM_S) pass--;  /* warm up again */
        else if (pass) {
            uint64_t t[2];
            CHECK(vkGetQueryPoolResults(dev, queries, 0, 2, sizeof t, t, 8, VK_QUERY_RESULT_64_BIT | VK_QUERY_RESULT_WAIT_BIT));
            return (double)(t[1] - t[0]) * tick_ns * 1e-9 / reps;
        }
    }
    return 0;
}

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static float uni(void) {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (float)((rng >> 40) * 0x1.0p-24) * 2 - 1;
}

/* Mode 4: the flash attention kernel on the 27B's heads (24 query, 4 kv, head dim hd) for a chunk of n rows after
 * n_past positions, pages of 64 in order, K and V rows random in ±1 stored in the KV type (0 f32, 1 f16, 2 int8: Q8 rows);
 * q random in ±1. Returns seconds per launch; *err the relative error of 16 sampled (row, head) outputs against the
 * exact attention over the stored (dequantized) rows. */
static double flash(VkPipeline p, uint32_t threads, uint32_t vecs, uint32_t n_past, uint32_t n, uint32_t hd, uint32_t kv_type,
                    int reps, double *err, double *flops) {
    enum { HQ = 24, HKV = 4, PT = 64 };
    uint32_t total = n_past + n, n_pages = (total + PT - 1) / PT;
    sp_mtype mt = kv_type == 1 ? SP_MAT_F16 : kv_type == 2 ? SP_MAT_Q8 : SP_MAT_F32;
    uint64_t rb = (uint64_t)sp_mtype_row_bytes(mt, hd), page_bytes = 2ull * HKV * PT * rb; /* K then V of each page */
    uint8_t *kv = malloc(page_bytes * n_pages);
    float *vals = malloc(4ull * hd);
    for (uint64_t r = 0; r < 2ull * HKV * PT * n_pages; r++) {
        for (uint32_t d = 0; d < hd; d++) vals[d] = uni();
        uint8_t *row = kv + r * rb;
        if (mt == SP_MAT_Q8) sp_quantize_row_q8(vals, hd, row);
        else if (mt == SP_MAT_F16) for (uint32_t d = 0; d < hd; d++) ((uint16_t *)row)[d] = sp_f32_to_f16(vals[d]);
        else memcpy(row, vals, 4ull * hd);
    }
    int32_t *pages = malloc(4ull * n_pages);
    for (uint32_t i = 0; i < n_pages; i++) pages[i] = (int32_t)i;
    float *q = malloc(4ull * n * HQ * hd), *out = malloc(4ull * n * HQ * hd);
    for (uint64_t i = 0; i < (uint64_t)n * HQ * hd; i++) q[i] = uni();
    buf dkv = make_buf(page_bytes * n_pages, false), dp = make_buf(4ull * n_pages, false);
    buf dq = make_buf(4ull * n * HQ * hd, false), dout = make_buf(4ull * n * HQ * hd, false);
    upload(&dkv, kv, page_bytes * n_pages), upload(&dp, pages, 4ull * n_pages), upload(&dq, q, 4ull * n * HQ * hd);
    float scale = 1.0f / sqrtf((float)hd);
    push_attention pc = {.dst = dout.addr, .src = dq.addr, .k = dkv.addr, .v = dkv.addr + HKV * PT * rb, .pages = dp.addr,
                         .n_past = n_past, .n = n, .heads = HQ, .kv_heads = HKV, .page_tokens = PT,
                         .page_stride = (uint32_t)page_bytes, .scale = scale, .kv_type = kv_type};
    uint32_t G = HQ / HKV;
    double sec = run(p, &pc, sizeof pc, HKV, (n * G + vecs - 1) / vecs, reps);
    (void)threads;
    download(out, &dout, 4ull * n * HQ * hd);
    /* the exact attention of sampled (row, head) over the stored rows */
    sp_matrix rows_k = {mt, 1, hd, NULL, rb};
    float *kr = malloc(4ull * hd), *sc = malloc(4ull * total);
    double *acc = malloc(8ull * hd), e = 0, s = 0;
    for (int t = 0; t < 16; t++) {
        uint32_t r = t == 0 ? n - 1 : (uint32_t)((t * 7919u + 13u) % n), h = (uint32_t)((t * 31u + 5u) % HQ), g = h / G;
        uint32_t seen = n_past + r + 1;
        const float *qr = q + ((uint64_t)r * HQ + h) * hd;
        double mx = -1e300;
        for (uint32_t j = 0; j < seen; j++) {
            rows_k.data = kv + (uint64_t)(j / PT) * page_bytes + ((uint64_t)g * PT + j % PT) * rb;
            sp_matrix_row_f32(&rows_k, 0, kr);
            double d = 0;
            for (uint32_t c = 0; c < hd; c++) d += (double)qr[c] * kr[c];
            sc[j] = (float)(d * scale);
            if (sc[j] > mx) mx = sc[j];
        }
        double l = 0;
        for (uint32_t c = 0; c < hd; c++) acc[c] = 0;
        for (uint32_t j = 0; j < seen; j++) {
            double w = exp(sc[j] - mx);
            l += w;
            rows_k.data = kv + (uint64_t)(j / PT) * page_bytes + ((uint64_t)(HKV + g) * PT + j % PT) * rb;
            sp_matrix_row_f32(&rows_k, 0, kr);
            for (uint32_t c = 0; c < hd; c++) acc[c] += w * kr[c];
        }
        for (uint32_t c = 0; c < hd; c++) {
            double d = out[((uint64_t)r * HQ + h) * hd + c] - acc[c] / l;
            e += d * d, s += acc[c] / l * acc[c] / l;
        }
    }
    *err = sqrt(e / s);
    *flops = 4.0 * hd * HQ * ((double)n * n_past + (double)n * (n + 1) / 2);
    vkDestroyBuffer(dev, dkv.b, NULL), vkFreeMemory(dev, dkv.m, NULL), vkDestroyBuffer(dev, dp.b, NULL), vkFreeMemory(dev, dp.m, NULL);
    vkDestroyBuffer(dev, dq.b, NULL), vkFreeMemory(dev, dq.m, NULL), vkDestroyBuffer(dev, dout.b, NULL), vkFreeMemory(dev, dout.m, NULL);
    free(kv), free(vals), free(pages), free(q), free(out), free(kr), free(sc), free(acc);
    return sec;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: vulkan_coopmat_lab LIST [--m M] [--n N] [--k K] [--reps R]\n");
        return 2;
    }
    uint32_t M = 12288, N = 1024, K = 5120;
    int reps = 10;
    for (int i = 2; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--m")) M = (uint32_t)atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--n")) N = (uint32_t)atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--k")) K = (uint32_t)atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--reps")) reps = atoi(argv[i + 1]);
    }
    open_device();

    /* operands: A [M][K] random in ±0.1 as f16 (and as q4, bf16), B [N][K] random in ±1 as f16 */
    uint16_t *A = malloc(2ull * M * K), *Bh = malloc(2ull * N * K);
    float *Af = malloc(4ull * M * K), *Bf = malloc(4ull * N * K);
    for (uint64_t i = 0; i < (uint64_t)M * K; i++) A[i] = sp_f32_to_f16(uni() * 0.1f), Af[i] = sp_f16_to_f32(A[i]);
    for (uint64_t i = 0; i < (uint64_t)N * K; i++) Bh[i] = sp_f32_to_f16(uni()), Bf[i] = sp_f16_to_f32(Bh[i]);
    int64_t q4_bytes = sp_mtype_row_bytes(SP_MAT_Q4, K);
    uint8_t *Aq = malloc((size_t)(q4_bytes * M));
    for (uint32_t r = 0; r < M; r++) sp_quantize_row_q4(Af + (uint64_t)r * K, K, Aq + (uint64_t)r * q4_bytes);
    buf dA = make_buf(2ull * M * K, false), dB = make_buf(2ull * N * K, false), dC = make_buf(4ull * M * N, false);
    buf dQ = make_buf((uint64_t)q4_bytes * M, false), dAb = make_buf(2ull * M * K, false);
    upload(&dA, A, 2ull * M * K), upload(&dB, Bh, 2ull * N * K), upload(&dQ, Aq, (uint64_t)q4_bytes * M);
    uint16_t *Ab = malloc(2ull * M * K);  /* bf16 weights (and their values, for the bf16 product's reference) */
    float *Abf = malloc(4ull * M * K);
    for (uint64_t i = 0; i < (uint64_t)M * K; i++) Ab[i] = sp_f32_to_bf16(Af[i]), Abf[i] = sp_bf16_to_f32(Ab[i]);
    upload(&dAb, Ab, 2ull * M * K);
    float *C = malloc(4ull * M * N), *qrow = malloc(4ull * K);

    FILE *list = fopen(argv[1], "r");
    if (!list) {
        fprintf(stderr, "cannot open %s\n", argv[1]);
        return 1;
    }
    char dir[512];
    snprintf(dir, sizeof dir, "%s", argv[1]);
    char *slash = strrchr(dir, '/');
    if (slash) slash[1] = 0;
    else dir[0] = 0;
    printf("\nGEMM %u x %u x %u (m x n x k; %.1f GFLOP), %d launches each\n", M, N, K, 2.0 * M * N * K / 1e9, reps);
    printf("%-34s %8s %10s %9s %9s  %s\n", "variant", "threads", "us", "TFLOP/s", "rel err", "driver statistics");
    char line[512], stats[1024];
    while (fgets(line, sizeof line, list)) {
        char name[128], file[256], wt[16];
        int mode, threads, bm, bn, bk, fm, fn, ty;
        if (line[0] == '#' || sscanf(line, "%127s %255s %d %d %d %d %d %d %d %d %15s", name, file, &mode, &threads, &bm, &bn, &bk, &fm, &fn, &ty, wt) != 11)
            continue;
        char path[800];
        snprintf(path, sizeof path, "%s%s", dir, file);
        VkPipeline p = pipeline(path, (uint32_t)threads, mode == 4 ? (uint32_t)ty : 0, stats, sizeof stats);
        if (!p) {
            printf("%-34s %8d  FAILED: %s\n", name, threads, stats);
            fflush(stdout);
            continue;
        }
        double sec, flops;
        double err = -1;
        if (mode == 4) {
            sec = flash(p, (uint32_t)threads, (uint32_t)bm, (uint32_t)bn, N, (uint32_t)bk, (uint32_t)ty, reps, &err, &flops);
        } else if (mode == 0) {
            uint32_t groups = 132 * 16, iters = 4096, kk = ty == 2 ? 32 : 16;
            buf out = make_buf(4ull * groups * (threads / 32) * 256, false);
            push pc = {dA.addr, 0, out.addr, iters, 0, 0, 0};
            sec = run(p, &pc, sizeof pc, groups, 1, reps);
            flops = 2.0 * 16 * 16 * kk * fm * fn * (double)iters * groups * (threads / 32);
            vkDestroyBuffer(dev, out.b, NULL), vkFreeMemory(dev, out.m, NULL);
        } else {
            flops = 2.0 * M * N * K;
            if (mode == 3) {
                bool q4 = !strcmp(wt, "q4");
                push_product pc = {q4 ? dQ.addr : !strcmp(wt, "bf16") ? dAb.addr : dA.addr, dB.addr, dC.addr,
                                   q4 ? (uint32_t)q4_bytes : 2 * K, M, K, N, K, M};
                sec = run(p, &pc, sizeof pc, (M + bm - 1) / bm, (N + bn - 1) / bn, reps);
            } else {
                push pc = {dA.addr, dB.addr, dC.addr, 0, M, N, K};
                sec = run(p, &pc, sizeof pc, M / bm, N / bn, reps);
            }
            download(C, &dC, 4ull * M * N);
            /* sampled outputs against the exact product (SHMEM: its first BK columns, k / BK times) */
            double e = 0, s = 0;
            uint32_t span = mode == 1 ? (uint32_t)bk : K;
            for (int t = 0; t < 256; t++) {
                uint32_t r = (uint32_t)((t * 7919u + 13u) % M), j = (uint32_t)((t * 104729u + 7u) % N);
                const float *arow = (mode == 3 && !strcmp(wt, "bf16") ? Abf : Af) + (uint64_t)r * K;
                if (mode == 3 && !strcmp(wt, "q4")) {
                    sp_matrix hm = {SP_MAT_Q4, M, K, Aq, q4_bytes};
                    sp_matrix_row_f32(&hm, r, qrow);
                    for (uint32_t c = 0; c < K; c++) qrow[c] = sp_f16_to_f32(sp_f32_to_f16(qrow[c]));
                    arow = qrow;
                }
                double ref = 0;
                for (uint32_t c = 0; c < span; c++) ref += (double)arow[c] * Bf[(uint64_t)j * K + c];
                if (mode == 1) ref *= K / span;
                double d = C[(uint64_t)j * M + r] - ref;
                e += d * d, s += ref * ref;
            }
            err = sqrt(e / s);
        }
        printf("%-34s %8d %10.1f %9.1f %9.1e  %s\n", name, threads, sec * 1e6, flops / sec / 1e12, err, stats);
        fflush(stdout);
        vkDestroyPipeline(dev, p, NULL);
    }
    fclose(list);
    return 0;
}
