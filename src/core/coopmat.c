/* Cooperative-matrix capabilities of a device (core/coopmat.h). */
#include "core/coopmat.h"

#include <stdio.h>
#include <string.h>

vkattn_coopmat_shape vka_coopmat_choose(const vkattn_coopmat_shape *shapes, uint32_t count)
{
    vkattn_coopmat_shape best = {0, 0, 0};
    for (uint32_t i = 0; i < count; i++) {
        const vkattn_coopmat_shape *s = &shapes[i];
        if (s->m == 16 && s->n == 16 && s->k == 16)
            return *s;
        uint64_t size = (uint64_t)s->m * s->n * s->k,
                 best_size = (uint64_t)best.m * best.n * best.k;
        if (size > best_size ||
            (size == best_size && (s->m > best.m || (s->m == best.m && s->n > best.n))))
            best = *s;
    }
    return best;
}

void vka_coopmat_query(const vka_vk_table *vk, VkPhysicalDevice pd, bool has_ext, bool memory_model,
                       vkattn_device_info *info)
{
    info->coopmat_shape_count = 0;
    memset(&info->coopmat_shape, 0, sizeof info->coopmat_shape);
    info->coopmat_kernels = false;
    if (has_ext && vk->vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR) {
        VkCooperativeMatrixPropertiesKHR props[64];
        uint32_t n = 0;
        vk->vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR(pd, &n, NULL);
        if (n > 64)
            n = 64;
        for (uint32_t i = 0; i < n; i++)
            props[i] = (VkCooperativeMatrixPropertiesKHR){
                .sType = VK_STRUCTURE_TYPE_COOPERATIVE_MATRIX_PROPERTIES_KHR};
        if (n && vk->vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR(pd, &n, props) >= 0) {
            for (uint32_t i = 0; i < n && info->coopmat_shape_count < VKATTN_MAX_COOPMAT_SHAPES;
                 i++) {
                const VkCooperativeMatrixPropertiesKHR *p = &props[i];
                if (p->scope != VK_SCOPE_SUBGROUP_KHR ||
                    p->AType != VK_COMPONENT_TYPE_FLOAT16_KHR ||
                    p->BType != VK_COMPONENT_TYPE_FLOAT16_KHR ||
                    p->CType != VK_COMPONENT_TYPE_FLOAT32_KHR ||
                    p->ResultType != VK_COMPONENT_TYPE_FLOAT32_KHR || p->saturatingAccumulation)
                    continue;
                info->coopmat_shapes[info->coopmat_shape_count++] =
                    (vkattn_coopmat_shape){p->MSize, p->NSize, p->KSize};
            }
        }
    }
    const char *why = "";
    if (!VKATTN_HAVE_COOPMAT)
        why = "this vkattn was built without the coopmat kernels (its glslang could not "
              "compile GL_KHR_cooperative_matrix)";
    else if (!has_ext)
        why = "the device has no VK_KHR_cooperative_matrix";
    else if (!info->coopmat_shape_count)
        why = "the device offers no f16 x f16 -> f32 shape of subgroup scope";
    else if (info->api_version < VK_API_VERSION_1_3)
        why = "the coopmat kernels need Vulkan 1.3";
    else if (!memory_model)
        why = "the device has no vulkanMemoryModel";
    else if (!info->fp16_arithmetic)
        why = "the device has no shaderFloat16";
    else if (!info->storage_16bit)
        why = "the device has no 16-bit storage (storageBuffer16BitAccess)";
    snprintf(info->coopmat_why, sizeof info->coopmat_why, "%s", why);
    if (!why[0])
        info->coopmat_shape = vka_coopmat_choose(info->coopmat_shapes, info->coopmat_shape_count);
}
