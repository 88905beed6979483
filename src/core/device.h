/* Physical devices (device.c): capabilities and the automatic choice. */
#ifndef VKA_DEVICE_H
#define VKA_DEVICE_H

#include "core/context.h"

/* Reads a physical device's capabilities into `info`. */
void vka_device_query(const vka_vk_table *vk, VkPhysicalDevice pd, uint32_t index,
                      vkattn_device_info *info);
/* Picks a device by the selector syntax of vkattn_context_desc.device.
 * Returns the index or UINT32_MAX, with the reason in `why`. */
uint32_t vka_device_choose(const vkattn_device_info *infos, uint32_t count, const char *selector,
                           char *why, size_t why_size);
/* A queue family with compute support (prefers one that also has timestamps). */
uint32_t vka_device_compute_family(const vka_vk_table *vk, VkPhysicalDevice pd, bool compute_only,
                                   uint32_t *timestamp_bits);

/* Whether the device lists the extension `name`. */
bool vka_device_has_extension(const vka_vk_table *vk, VkPhysicalDevice pd, const char *name);

/* Every physical device of the context's instance and its capabilities
 * (both arrays from vka_alloc, to vka_free). Checks every VkResult; a list
 * that changes between the count and the fill (VK_INCOMPLETE) is asked
 * again. NO_DEVICE when there is none. */
vkattn_result vka_device_enumerate(vkattn_context *ctx, VkPhysicalDevice **pds,
                                   vkattn_device_info **infos, uint32_t *count);

#endif
