/* Memory types (memory.c). */
#ifndef VKA_MEMORY_H
#define VKA_MEMORY_H

#include "core/context.h"

/* The first memory type among `bits` with all `required` properties, one
 * with the `preferred` ones too where there is one; UINT32_MAX if none. */
uint32_t vka_find_memory_type(const VkPhysicalDeviceMemoryProperties *mp, uint32_t bits,
                              VkMemoryPropertyFlags required, VkMemoryPropertyFlags preferred);
/* Reads the device's memory properties and picks the memory types of
 * buffers and staging, and whether buffers are host-visible and mapped. */
vkattn_result vka_memory_choose(vkattn_context *ctx);

#endif
