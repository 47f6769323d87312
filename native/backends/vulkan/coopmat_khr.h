/* coopmat_khr.h — VK_KHR_cooperative_matrix for Vulkan headers older than 1.3.255 (Debian 12's are 1.3.239): the
 * definitions of the registry (vk.xml) that the backend (device.c) and native/tools/vulkan_coopmat_lab.c use. Include after
 * <vulkan/vulkan.h>; with newer headers it adds nothing. */
#ifndef SP_VK_COOPMAT_KHR_H
#define SP_VK_COOPMAT_KHR_H

#ifndef VK_NO_PROTOTYPES
#define VK_NO_PROTOTYPES /* libvulkan is opened at run time */
#endif
#include <vulkan/vulkan.h>

#ifndef VK_KHR_cooperative_matrix
#define VK_KHR_cooperative_matrix 1
#define VK_KHR_COOPERATIVE_MATRIX_EXTENSION_NAME "VK_KHR_cooperative_matrix"
#define VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_KHR ((VkStructureType)1000506000)
#define VK_STRUCTURE_TYPE_COOPERATIVE_MATRIX_PROPERTIES_KHR ((VkStructureType)1000506001)
typedef enum VkComponentTypeKHR { VK_COMPONENT_TYPE_FLOAT16_KHR = 0, VK_COMPONENT_TYPE_FLOAT32_KHR = 1 } VkComponentTypeKHR;
typedef enum VkScopeKHR { VK_SCOPE_SUBGROUP_KHR = 3 } VkScopeKHR;
typedef struct VkCooperativeMatrixPropertiesKHR {
    VkStructureType sType;
    void *pNext;
    uint32_t MSize, NSize, KSize;
    VkComponentTypeKHR AType, BType, CType, ResultType;
    VkBool32 saturatingAccumulation;
    VkScopeKHR scope;
} VkCooperativeMatrixPropertiesKHR;
typedef struct VkPhysicalDeviceCooperativeMatrixFeaturesKHR {
    VkStructureType sType;
    void *pNext;
    VkBool32 cooperativeMatrix, cooperativeMatrixRobustBufferAccess;
} VkPhysicalDeviceCooperativeMatrixFeaturesKHR;
typedef VkResult(VKAPI_PTR *PFN_vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR)(VkPhysicalDevice, uint32_t *,
                                                                                   VkCooperativeMatrixPropertiesKHR *);
#endif

#endif
