/* Per-context Vulkan function table (volk's VolkDeviceTable idea): every
 * Vulkan call of the library goes through one of these, filled from the
 * host's vkGetInstanceProcAddr when borrowing, so two contexts (or a host that
 * loads Vulkan its own way) never interfere. */
#ifndef VKA_VK_TABLE_H
#define VKA_VK_TABLE_H

#include "core/coopmat_vk.h"

/* Loaded with get_instance_proc_addr(NULL, name). */
#define VKA_VK_GLOBAL_FUNCS(X)            \
    X(vkCreateInstance)                   \
    X(vkEnumerateInstanceLayerProperties) \
    X(vkEnumerateInstanceExtensionProperties)

/* Loaded with get_instance_proc_addr(instance, name). */
#define VKA_VK_INSTANCE_FUNCS(X)                \
    X(vkDestroyInstance)                        \
    X(vkEnumeratePhysicalDevices)               \
    X(vkGetPhysicalDeviceProperties)            \
    X(vkGetPhysicalDeviceProperties2)           \
    X(vkGetPhysicalDeviceFeatures2)             \
    X(vkGetPhysicalDeviceQueueFamilyProperties) \
    X(vkGetPhysicalDeviceMemoryProperties)      \
    X(vkGetPhysicalDeviceFormatProperties)      \
    X(vkEnumerateDeviceExtensionProperties)     \
    X(vkCreateDevice)                           \
    X(vkGetDeviceProcAddr)

/* Optional instance functions (VK_EXT_debug_utils, VK_KHR_cooperative_matrix):
 * may stay NULL. */
#define VKA_VK_INSTANCE_OPTIONAL_FUNCS(X) \
    X(vkCreateDebugUtilsMessengerEXT)     \
    X(vkDestroyDebugUtilsMessengerEXT)    \
    X(vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR)

/* Loaded with get_device_proc_addr(device, name). */
#define VKA_VK_DEVICE_FUNCS(X)        \
    X(vkDestroyDevice)                \
    X(vkGetDeviceQueue)               \
    X(vkDeviceWaitIdle)               \
    X(vkQueueSubmit)                  \
    X(vkQueueWaitIdle)                \
    X(vkCreateBuffer)                 \
    X(vkDestroyBuffer)                \
    X(vkGetBufferMemoryRequirements)  \
    X(vkAllocateMemory)               \
    X(vkFreeMemory)                   \
    X(vkBindBufferMemory)             \
    X(vkMapMemory)                    \
    X(vkUnmapMemory)                  \
    X(vkFlushMappedMemoryRanges)      \
    X(vkInvalidateMappedMemoryRanges) \
    X(vkCreateBufferView)             \
    X(vkDestroyBufferView)            \
    X(vkCreateShaderModule)           \
    X(vkDestroyShaderModule)          \
    X(vkCreatePipelineCache)          \
    X(vkDestroyPipelineCache)         \
    X(vkGetPipelineCacheData)         \
    X(vkCreateComputePipelines)       \
    X(vkDestroyPipeline)              \
    X(vkCreatePipelineLayout)         \
    X(vkDestroyPipelineLayout)        \
    X(vkCreateDescriptorSetLayout)    \
    X(vkDestroyDescriptorSetLayout)   \
    X(vkCreateDescriptorPool)         \
    X(vkDestroyDescriptorPool)        \
    X(vkAllocateDescriptorSets)       \
    X(vkFreeDescriptorSets)           \
    X(vkUpdateDescriptorSets)         \
    X(vkCreateCommandPool)            \
    X(vkDestroyCommandPool)           \
    X(vkAllocateCommandBuffers)       \
    X(vkResetCommandPool)             \
    X(vkBeginCommandBuffer)           \
    X(vkEndCommandBuffer)             \
    X(vkCmdBindPipeline)              \
    X(vkCmdBindDescriptorSets)        \
    X(vkCmdPushConstants)             \
    X(vkCmdDispatch)                  \
    X(vkCmdPipelineBarrier)           \
    X(vkCmdCopyBuffer)                \
    X(vkCmdFillBuffer)                \
    X(vkCmdUpdateBuffer)              \
    X(vkCmdResetQueryPool)            \
    X(vkCmdWriteTimestamp)            \
    X(vkCreateQueryPool)              \
    X(vkDestroyQueryPool)             \
    X(vkGetQueryPoolResults)          \
    X(vkCreateFence)                  \
    X(vkDestroyFence)                 \
    X(vkWaitForFences)                \
    X(vkResetFences)

#define VKA_VK_DECLARE_(name) PFN_##name name;

typedef struct vka_vk_table {
    PFN_vkGetInstanceProcAddr vkGetInstanceProcAddr;
    VKA_VK_GLOBAL_FUNCS(VKA_VK_DECLARE_)
    VKA_VK_INSTANCE_FUNCS(VKA_VK_DECLARE_)
    VKA_VK_INSTANCE_OPTIONAL_FUNCS(VKA_VK_DECLARE_)
    VKA_VK_DEVICE_FUNCS(VKA_VK_DECLARE_)
} vka_vk_table;

/* Each returns the name of the first missing entry point, or NULL when all
 * were found. */
const char *vka_vk_load_global(vka_vk_table *t, PFN_vkGetInstanceProcAddr gipa);
const char *vka_vk_load_instance(vka_vk_table *t, VkInstance instance);
const char *vka_vk_load_device(vka_vk_table *t, VkDevice device, PFN_vkGetDeviceProcAddr gdpa);

#endif
