/* Cooperative matrices (VK_KHR_cooperative_matrix): what a device offers
 * the coopmat kernel family, and the shape its kernels are specialized for
 * (vkattn_device_info.coopmat_*). */
#ifndef VKA_COOPMAT_H
#define VKA_COOPMAT_H

#include "vkattn.h"
#include "core/vk_table.h"

/* Fills info's coopmat fields for device `pd`: the f16 x f16 -> f32 shapes
 * of subgroup scope, the chosen one, and coopmat_why when the family
 * cannot run (extension, features, Vulkan 1.3, or the build). `has_ext`:
 * the device lists VK_KHR_cooperative_matrix. */
void vka_coopmat_query(const vka_vk_table *vk, VkPhysicalDevice pd, bool has_ext, bool memory_model,
                       vkattn_device_info *info);

/* The shape the kernels use among `shapes`: 16x16x16 where offered, else
 * the largest M*N*K (ties: the larger M, then N). {0,0,0} when none. */
vkattn_coopmat_shape vka_coopmat_choose(const vkattn_coopmat_shape *shapes, uint32_t count);

/* Whether the family can run on the device the record describes. */
static inline bool vka_coopmat_offered(const vkattn_device_info *info)
{
    return info->coopmat_shape.m != 0;
}

#endif
