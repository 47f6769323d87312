/* device.c — loading libvulkan at run time, choosing a device, creating it.
 *
 * libvulkan is opened with dlopen so libsplash (and dist/splash) runs on machines without it; the Vulkan backend
 * exists only where a loader and a suitable device are found. What a device needs: Vulkan 1.2 with
 * bufferDeviceAddress and shaderInt64 (kernels address memory by 64-bit device addresses), subgroup arithmetic in
 * compute shaders, a compute queue. Which device: SPLASH_VULKAN_DEVICE=<index> picks one; otherwise the first
 * discrete GPU, then integrated, then virtual. CPU implementations (Mesa's lavapipe) are never picked automatically:
 * they emulate a GPU slowly and are for tests, which ask for them (allow_cpu). */
#include "vk.h"

#include "core/error.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

splash_status sp_vk_check(VkResult r, const char *what) {
    if (r == VK_SUCCESS) return SPLASH_OK;
    splash_status st = r == VK_ERROR_OUT_OF_DEVICE_MEMORY || r == VK_ERROR_OUT_OF_HOST_MEMORY ? SPLASH_ERR_OUT_OF_MEMORY
                                                                                             : SPLASH_ERR_INTERNAL;
    return SP_FAIL(st, "vulkan: %s failed (VkResult %d)", what, (int)r);
}

static splash_status load_library(sp_vk_api *a) {
    const char *names[] = {"libvulkan.so.1", "libvulkan.so", "libvulkan.1.dylib", "libMoltenVK.dylib"};
    for (size_t i = 0; i < sizeof names / sizeof names[0] && !a->lib; i++) a->lib = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
    if (!a->lib) return SP_FAIL(SPLASH_ERR_UNSUPPORTED, "vulkan: no Vulkan loader (libvulkan.so.1) on this machine");
    a->vkGetInstanceProcAddr = (PFN_vkGetInstanceProcAddr)dlsym(a->lib, "vkGetInstanceProcAddr");
    if (!a->vkGetInstanceProcAddr) return SP_FAIL(SPLASH_ERR_UNSUPPORTED, "vulkan: the loader has no vkGetInstanceProcAddr");
    a->vkCreateInstance = (PFN_vkCreateInstance)a->vkGetInstanceProcAddr(NULL, "vkCreateInstance");
    a->vkEnumerateInstanceVersion = (PFN_vkEnumerateInstanceVersion)a->vkGetInstanceProcAddr(NULL, "vkEnumerateInstanceVersion");
    if (!a->vkCreateInstance) return SP_FAIL(SPLASH_ERR_UNSUPPORTED, "vulkan: the loader has no vkCreateInstance");
    return SPLASH_OK;
}

/* Why device d cannot run the kernels, or NULL when it can. */
static const char *unsuitable(sp_vk *vk, VkPhysicalDevice d, uint32_t *family) {
    sp_vk_api *a = &vk->api;
    VkPhysicalDeviceProperties p;
    a->vkGetPhysicalDeviceProperties(d, &p);
    if (p.apiVersion < VK_API_VERSION_1_2) return "Vulkan < 1.2";
    VkPhysicalDeviceVulkan12Features f12 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES};
    VkPhysicalDeviceFeatures2 f = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2, .pNext = &f12};
    a->vkGetPhysicalDeviceFeatures2(d, &f);
    if (!f12.bufferDeviceAddress) return "no bufferDeviceAddress";
    if (!f.features.shaderInt64) return "no shaderInt64";
    VkPhysicalDeviceSubgroupProperties sg = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES};
    VkPhysicalDeviceProperties2 p2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2, .pNext = &sg};
    a->vkGetPhysicalDeviceProperties2(d, &p2);
    if (!(sg.supportedStages & VK_SHADER_STAGE_COMPUTE_BIT) ||
        (sg.supportedOperations & (VK_SUBGROUP_FEATURE_BASIC_BIT | VK_SUBGROUP_FEATURE_ARITHMETIC_BIT)) !=
            (VK_SUBGROUP_FEATURE_BASIC_BIT | VK_SUBGROUP_FEATURE_ARITHMETIC_BIT))
        return "no subgroup arithmetic in compute shaders";
    if (p.limits.maxComputeSharedMemorySize < 32768) return "less than 32 KiB of shared memory";
    uint32_t n = 0;
    a->vkGetPhysicalDeviceQueueFamilyProperties(d, &n, NULL);
    VkQueueFamilyProperties q[16];
    n = n > 16 ? 16 : n;
    a->vkGetPhysicalDeviceQueueFamilyProperties(d, &n, q);
    /* a family without graphics where there is one (NVIDIA's asynchronous compute queues), else any with compute */
    int found = -1;
    for (uint32_t i = 0; i < n; i++)
        if ((q[i].queueFlags & VK_QUEUE_COMPUTE_BIT) &&
            (found < 0 || ((q[found].queueFlags & VK_QUEUE_GRAPHICS_BIT) && !(q[i].queueFlags & VK_QUEUE_GRAPHICS_BIT))))
            found = (int)i;
    if (found < 0) return "no compute queue";
    *family = (uint32_t)found;
    return NULL;
}

static int type_rank(VkPhysicalDeviceType t) {
    switch (t) {
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU: return 4;
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU: return 3;
    case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU: return 2;
    case VK_PHYSICAL_DEVICE_TYPE_CPU: return 1;
    default: return 0;
    }
}

static splash_status pick_device(sp_vk *vk, bool allow_cpu) {
    sp_vk_api *a = &vk->api;
    VkPhysicalDevice devs[16];
    uint32_t n = 16;
    VkResult r = a->vkEnumeratePhysicalDevices(vk->instance, &n, devs);
    if (r != VK_SUCCESS && r != VK_INCOMPLETE) return SP_FAIL(SPLASH_ERR_UNSUPPORTED, "vulkan: cannot list devices (%d)", (int)r);
    const char *want = getenv("SPLASH_VULKAN_DEVICE");
    int best = -1, best_rank = 0;
    char why[512] = "";
    for (uint32_t i = 0; i < n; i++) {
        VkPhysicalDeviceProperties p;
        a->vkGetPhysicalDeviceProperties(devs[i], &p);
        uint32_t family = 0;
        const char *bad = unsuitable(vk, devs[i], &family);
        bool cpu = p.deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU;
        if (!bad && cpu && !allow_cpu && !want) bad = "a CPU implementation (used only when asked for)";
        if (want && (uint32_t)atoi(want) != i) bad = "not SPLASH_VULKAN_DEVICE";
        if (bad) {
            size_t len = strlen(why);
            snprintf(why + len, sizeof why - len, "%s#%u %s: %s", len ? "; " : "", i, p.deviceName, bad);
            continue;
        }
        if (type_rank(p.deviceType) > best_rank) best = (int)i, best_rank = type_rank(p.deviceType), vk->queue_family = family;
    }
    if (best < 0)
        return SP_FAIL(SPLASH_ERR_UNSUPPORTED, "vulkan: no usable device%s%s%s", n ? " (" : " found", n ? why : "", n ? ")" : "");
    vk->phys = devs[best];
    a->vkGetPhysicalDeviceProperties(vk->phys, &vk->props);
    VkPhysicalDeviceMaintenance4Properties m4 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MAINTENANCE_4_PROPERTIES};
    VkPhysicalDeviceSubgroupProperties sg = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES};
    VkPhysicalDeviceProperties2 p2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2, .pNext = &sg};
    if (vk->props.apiVersion >= VK_API_VERSION_1_3) sg.pNext = &m4;
    a->vkGetPhysicalDeviceProperties2(vk->phys, &p2);
    vk->subgroup_size = sg.subgroupSize;
    vk->max_buffer = m4.maxBufferSize ? m4.maxBufferSize : (1ull << 31);
    return SPLASH_OK;
}

/* Whether the chosen device lists the extension. */
static bool has_extension(sp_vk *vk, const char *name) {
    uint32_t n = 0;
    if (vk->api.vkEnumerateDeviceExtensionProperties(vk->phys, NULL, &n, NULL) != VK_SUCCESS || !n) return false;
    VkExtensionProperties *ext = malloc(sizeof *ext * n);
    bool found = false;
    if (ext && vk->api.vkEnumerateDeviceExtensionProperties(vk->phys, NULL, &n, ext) == VK_SUCCESS)
        for (uint32_t i = 0; i < n && !found; i++) found = !strcmp(ext[i].extensionName, name);
    free(ext);
    return found;
}

/* Why the cooperative-matrix kernels (kernels/matmul_coopmat.comp) cannot run on the chosen device, or NULL when they
 * can: they need VK_KHR_cooperative_matrix with 16×16×16 f16 products accumulated in f32 by subgroups of 32
 * invocations (the size the kernels are written for), f16 arithmetic, the Vulkan memory model the extension's SPIR-V
 * declares, and 48 KiB of shared memory. SPLASH_VULKAN_COOPMAT=0 turns them off (the tiled kernels run instead). */
static const char *coopmat_unsupported(sp_vk *vk) {
    sp_vk_api *a = &vk->api;
    const char *env = getenv("SPLASH_VULKAN_COOPMAT");
    if (env && !strcmp(env, "0")) return "off (SPLASH_VULKAN_COOPMAT=0)";
    if (!has_extension(vk, VK_KHR_COOPERATIVE_MATRIX_EXTENSION_NAME)) return "no VK_KHR_cooperative_matrix";
    VkPhysicalDeviceCooperativeMatrixFeaturesKHR cm = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_KHR};
    VkPhysicalDeviceVulkan12Features f12 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES, .pNext = &cm};
    VkPhysicalDeviceFeatures2 f = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2, .pNext = &f12};
    a->vkGetPhysicalDeviceFeatures2(vk->phys, &f);
    if (!cm.cooperativeMatrix) return "cooperativeMatrix feature off";
    if (!f12.shaderFloat16 || !f12.vulkanMemoryModel) return "no shaderFloat16 or vulkanMemoryModel";
    if (vk->subgroup_size != 32) return "subgroups are not 32 invocations";
    if (vk->props.limits.maxComputeSharedMemorySize < 49152) return "less than 48 KiB of shared memory";
    PFN_vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR props =
        (PFN_vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR)a->vkGetInstanceProcAddr(vk->instance,
                                                                                         "vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR");
    uint32_t n = 0;
    if (!props || props(vk->phys, &n, NULL) != VK_SUCCESS || !n) return "no cooperative matrix properties";
    VkCooperativeMatrixPropertiesKHR *p = calloc(n, sizeof *p);
    bool found = false;
    if (p) {
        for (uint32_t i = 0; i < n; i++) p[i].sType = VK_STRUCTURE_TYPE_COOPERATIVE_MATRIX_PROPERTIES_KHR;
        if (props(vk->phys, &n, p) == VK_SUCCESS)
            for (uint32_t i = 0; i < n && !found; i++)
                found = p[i].MSize == 16 && p[i].NSize == 16 && p[i].KSize == 16 && p[i].AType == VK_COMPONENT_TYPE_FLOAT16_KHR &&
                        p[i].BType == VK_COMPONENT_TYPE_FLOAT16_KHR && p[i].CType == VK_COMPONENT_TYPE_FLOAT32_KHR &&
                        p[i].ResultType == VK_COMPONENT_TYPE_FLOAT32_KHR && p[i].scope == VK_SCOPE_SUBGROUP_KHR;
    }
    free(p);
    return found ? NULL : "no 16x16x16 f16 -> f32 subgroup product";
}

/* Why the integer-dot GEMV (matmul.comp DOT, SPV_KHR_integer_dot_product) cannot run on the chosen device, or NULL
 * when it can: it needs Vulkan 1.3's shaderIntegerDotProduct. SPLASH_VULKAN_INT_DOT=0 turns it off (the float GEMV runs
 * instead). */
static const char *int_dot_unsupported(sp_vk *vk) {
    const char *env = getenv("SPLASH_VULKAN_INT_DOT");
    if (env && !strcmp(env, "0")) return "off (SPLASH_VULKAN_INT_DOT=0)";
    if (vk->props.apiVersion < VK_API_VERSION_1_3) return "the device is older than Vulkan 1.3";
    VkPhysicalDeviceVulkan13Features f13 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_3_FEATURES};
    VkPhysicalDeviceFeatures2 f = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2, .pNext = &f13};
    vk->api.vkGetPhysicalDeviceFeatures2(vk->phys, &f);
    return f13.shaderIntegerDotProduct ? NULL : "no shaderIntegerDotProduct";
}

/* Memory type with all of `need` (and as many of `want` as possible), in the largest heap; UINT32_MAX if none. */
static uint32_t memory_type(const VkPhysicalDeviceMemoryProperties *mp, VkMemoryPropertyFlags need, VkMemoryPropertyFlags want) {
    uint32_t best = UINT32_MAX;
    int best_score = -1;
    for (uint32_t i = 0; i < mp->memoryTypeCount; i++) {
        VkMemoryPropertyFlags f = mp->memoryTypes[i].propertyFlags;
        if ((f & need) != need) continue;
        int score = __builtin_popcount(f & want) * 64 + (int)(mp->memoryHeaps[mp->memoryTypes[i].heapIndex].size >> 34);
        if (score > best_score) best = i, best_score = score;
    }
    return best;
}

splash_status sp_vk_open(sp_vk *vk, bool allow_cpu) {
    sp_vk_api *a = &vk->api;
    splash_status st = load_library(a);
    if (st) return st;
    uint32_t version = VK_API_VERSION_1_0;
    if (a->vkEnumerateInstanceVersion) a->vkEnumerateInstanceVersion(&version);
    if (version < VK_API_VERSION_1_2) return SP_FAIL(SPLASH_ERR_UNSUPPORTED, "vulkan: the loader is older than Vulkan 1.2");
    VkApplicationInfo app = {.sType = VK_STRUCTURE_TYPE_APPLICATION_INFO, .pApplicationName = "splash",
                             .pEngineName = "splash", .apiVersion = VK_API_VERSION_1_3};
    VkInstanceCreateInfo ici = {.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO, .pApplicationInfo = &app};
    VkResult r = a->vkCreateInstance(&ici, NULL, &vk->instance);
    if (r != VK_SUCCESS) return SP_FAIL(SPLASH_ERR_UNSUPPORTED, "vulkan: vkCreateInstance failed (%d)", (int)r);
#define SP_VK_LOAD_INSTANCE(f)                                                                                      \
    if (!(a->f = (PFN_##f)a->vkGetInstanceProcAddr(vk->instance, #f)))                                              \
        return SP_FAIL(SPLASH_ERR_UNSUPPORTED, "vulkan: the loader has no " #f);
    SP_VK_INSTANCE_FUNCS(SP_VK_LOAD_INSTANCE)
#undef SP_VK_LOAD_INSTANCE
    if ((st = pick_device(vk, allow_cpu))) return st;
    vk->no_coopmat = coopmat_unsupported(vk);
    vk->no_int_dot = int_dot_unsupported(vk);

    VkPhysicalDeviceCooperativeMatrixFeaturesKHR cm = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_KHR,
                                                       .cooperativeMatrix = VK_TRUE};
    VkPhysicalDeviceVulkan13Features f13 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_3_FEATURES,
                                            .pNext = vk->no_coopmat ? NULL : &cm, .shaderIntegerDotProduct = VK_TRUE};
    VkPhysicalDeviceVulkan12Features f12 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES,
                                            .pNext = vk->no_int_dot ? (vk->no_coopmat ? NULL : (void *)&cm) : (void *)&f13,
                                            .bufferDeviceAddress = VK_TRUE,
                                            .shaderFloat16 = !vk->no_coopmat, .vulkanMemoryModel = !vk->no_coopmat};
    VkPhysicalDeviceFeatures2 features = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2, .pNext = &f12,
                                          .features = {.shaderInt64 = VK_TRUE}};
    /* the driver's statistics of each pipeline, for profiles */
    const char *prof = getenv("SPLASH_VULKAN_PROFILE");
    bool stats = prof && atoi(prof) > 0 && has_extension(vk, "VK_KHR_pipeline_executable_properties");
    VkPhysicalDevicePipelineExecutablePropertiesFeaturesKHR pe = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PIPELINE_EXECUTABLE_PROPERTIES_FEATURES_KHR, .pipelineExecutableInfo = VK_TRUE};
    if (stats) pe.pNext = features.pNext, features.pNext = &pe;
    const char *extensions[2];
    uint32_t n_ext = 0;
    if (!vk->no_coopmat) extensions[n_ext++] = VK_KHR_COOPERATIVE_MATRIX_EXTENSION_NAME;
    if (stats) extensions[n_ext++] = "VK_KHR_pipeline_executable_properties";
    float prio = 1.0f;
    VkDeviceQueueCreateInfo qci = {.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO, .queueFamilyIndex = vk->queue_family,
                                   .queueCount = 1, .pQueuePriorities = &prio};
    VkDeviceCreateInfo dci = {.sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO, .pNext = &features, .queueCreateInfoCount = 1,
                              .pQueueCreateInfos = &qci, .enabledExtensionCount = n_ext, .ppEnabledExtensionNames = extensions};
    if ((r = a->vkCreateDevice(vk->phys, &dci, NULL, &vk->device)) != VK_SUCCESS)
        return SP_FAIL(SPLASH_ERR_UNSUPPORTED, "vulkan: vkCreateDevice on %s failed (%d)", vk->props.deviceName, (int)r);
#define SP_VK_LOAD_DEVICE(f)                                                                                        \
    if (!(a->f = (PFN_##f)a->vkGetDeviceProcAddr(vk->device, #f)))                                                  \
        return SP_FAIL(SPLASH_ERR_UNSUPPORTED, "vulkan: the driver has no " #f);
    SP_VK_DEVICE_FUNCS(SP_VK_LOAD_DEVICE)
#undef SP_VK_LOAD_DEVICE
    a->vkGetDeviceQueue(vk->device, vk->queue_family, 0, &vk->queue);
    if (stats)
        vk->pipeline_stats = (PFN_vkGetPipelineExecutableStatisticsKHR)a->vkGetDeviceProcAddr(vk->device, "vkGetPipelineExecutableStatisticsKHR");

    VkPhysicalDeviceMemoryProperties mp;
    a->vkGetPhysicalDeviceMemoryProperties(vk->phys, &mp);
    vk->mem_device = memory_type(&mp, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT, 0);
    if (vk->mem_device == UINT32_MAX) vk->mem_device = memory_type(&mp, 0, 0);
    vk->mem_upload = memory_type(&mp, VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT, 0);
    vk->mem_readback = memory_type(&mp, VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT,
                                   VK_MEMORY_PROPERTY_HOST_CACHED_BIT);
    if (vk->mem_upload == UINT32_MAX || vk->mem_readback == UINT32_MAX)
        return SP_FAIL(SPLASH_ERR_UNSUPPORTED, "vulkan: %s has no host-visible coherent memory", vk->props.deviceName);
    vk->timestamp_ns = vk->props.limits.timestampPeriod;
    return SPLASH_OK;
}

void sp_vk_close(sp_vk *vk) {
    sp_vk_api *a = &vk->api;
    if (vk->device) a->vkDestroyDevice(vk->device, NULL);
    if (vk->instance) a->vkDestroyInstance(vk->instance, NULL);
    if (a->lib) dlclose(a->lib);
    memset(a, 0, sizeof *a);
    vk->device = VK_NULL_HANDLE;
    vk->instance = VK_NULL_HANDLE;
}
