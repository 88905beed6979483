/* Filling the per-context Vulkan function table (vk_table.h). */
#include "core/vk_table.h"

#include <stddef.h>

const char *vka_vk_load_global(vka_vk_table *t, PFN_vkGetInstanceProcAddr gipa)
{
    t->vkGetInstanceProcAddr = gipa;
#define LOAD_(name)                          \
    t->name = (PFN_##name)gipa(NULL, #name); \
    if (!t->name)                            \
        return #name;
    VKA_VK_GLOBAL_FUNCS(LOAD_)
#undef LOAD_
    return NULL;
}

const char *vka_vk_load_instance(vka_vk_table *t, VkInstance instance)
{
#define LOAD_(name)                                                  \
    t->name = (PFN_##name)t->vkGetInstanceProcAddr(instance, #name); \
    if (!t->name)                                                    \
        return #name;
    VKA_VK_INSTANCE_FUNCS(LOAD_)
#undef LOAD_
#define LOAD_OPTIONAL_(name) t->name = (PFN_##name)t->vkGetInstanceProcAddr(instance, #name);
    VKA_VK_INSTANCE_OPTIONAL_FUNCS(LOAD_OPTIONAL_)
#undef LOAD_OPTIONAL_
    return NULL;
}

const char *vka_vk_load_device(vka_vk_table *t, VkDevice device, PFN_vkGetDeviceProcAddr gdpa)
{
    if (!gdpa)
        gdpa = t->vkGetDeviceProcAddr;
#define LOAD_(name)                            \
    t->name = (PFN_##name)gdpa(device, #name); \
    if (!t->name)                              \
        return #name;
    VKA_VK_DEVICE_FUNCS(LOAD_)
#undef LOAD_
    return NULL;
}
