/* Device buffers: created (with memory of the context's chosen type,
 * mapped where host-visible) or wrapped around the host's VkBuffer. */
#include "core/buffer.h"

#include "core/descriptors.h"
#include "core/host.h"
#include "core/memory.h"
#include "spec/size_math.h"

#include <string.h>

vkattn_result vka_buffer_make(vkattn_context *ctx, uint64_t size, VkBufferUsageFlags usage,
                              uint32_t type_hint, VkBuffer *buffer, VkDeviceMemory *memory,
                              bool *host_visible)
{
    VkBufferCreateInfo bci = {
        .sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO,
        .size = size,
        .usage = usage,
        .sharingMode = VK_SHARING_MODE_EXCLUSIVE,
    };
    VkResult vr = ctx->vk.vkCreateBuffer(ctx->device, &bci, ctx->vk_allocator, buffer);
    if (vr != VK_SUCCESS)
        return vka_fail_vk(ctx, vr, "vkCreateBuffer");
    VkMemoryRequirements req;
    ctx->vk.vkGetBufferMemoryRequirements(ctx->device, *buffer, &req);
    uint32_t type = type_hint;
    if (!(req.memoryTypeBits & (1u << type)))
        type = vka_find_memory_type(&ctx->memory, req.memoryTypeBits,
                                    ctx->memory.memoryTypes[type_hint].propertyFlags, 0);
    if (type == UINT32_MAX) {
        ctx->vk.vkDestroyBuffer(ctx->device, *buffer, ctx->vk_allocator);
        *buffer = VK_NULL_HANDLE;
        return vka_fail(ctx, VKATTN_ERROR_UNSUPPORTED, "no memory type fits a buffer of %llu bytes",
                        (unsigned long long)size);
    }
    VkMemoryAllocateInfo mai = {
        .sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO,
        .allocationSize = req.size,
        .memoryTypeIndex = type,
    };
    vr = ctx->vk.vkAllocateMemory(ctx->device, &mai, ctx->vk_allocator, memory);
    if (vr == VK_SUCCESS)
        vr = ctx->vk.vkBindBufferMemory(ctx->device, *buffer, *memory, 0);
    if (vr != VK_SUCCESS) {
        ctx->vk.vkDestroyBuffer(ctx->device, *buffer, ctx->vk_allocator);
        if (*memory)
            ctx->vk.vkFreeMemory(ctx->device, *memory, ctx->vk_allocator);
        *buffer = VK_NULL_HANDLE;
        *memory = VK_NULL_HANDLE;
        return vka_fail_vk(ctx, vr, "allocating buffer memory");
    }
    *host_visible =
        ctx->memory.memoryTypes[type].propertyFlags & VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT;
    return VKATTN_SUCCESS;
}

vkattn_result vkattn_buffer_create(vkattn_context *ctx, const vkattn_buffer_desc *desc,
                                   vkattn_buffer **out)
{
    if (!ctx)
        return VKATTN_ERROR_INVALID_ARGUMENT;
    if (!out)
        return vka_fail(ctx, VKATTN_ERROR_INVALID_ARGUMENT, "vkattn_buffer_create: out is NULL");
    *out = NULL;
    if (!desc)
        return vka_fail(ctx, VKATTN_ERROR_INVALID_ARGUMENT, "vkattn_buffer_create: desc is NULL");
    if (desc->size == 0)
        return vka_fail(ctx, VKATTN_ERROR_INVALID_ARGUMENT,
                        "desc->size is 0: buffers need at least 1 byte");
    if (desc->size > ctx->info.max_allocation_size)
        return vka_fail(ctx, VKATTN_ERROR_OUT_OF_RANGE,
                        "desc->size %llu exceeds the device's maxMemoryAllocationSize %llu",
                        (unsigned long long)desc->size,
                        (unsigned long long)ctx->info.max_allocation_size);
    vkattn_buffer *b = vka_alloc(ctx, sizeof *b);
    if (!b)
        return vka_fail(ctx, VKATTN_ERROR_OUT_OF_HOST_MEMORY, "out of host memory");
    b->ctx = ctx;
    b->size = desc->size;
    b->vk_size = vka_align_up(desc->size, 16);
    b->owned = true;
    b->texel_ok = true;
    b->transfer_ok = true;
    VkBufferUsageFlags usage =
        VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_UNIFORM_TEXEL_BUFFER_BIT |
        VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT | desc->extra_usage;
    bool host_visible = false;
    vkattn_result r = vka_buffer_make(ctx, b->vk_size, usage, ctx->buffer_memory_type, &b->buffer,
                                      &b->memory, &host_visible);
    if (r == VKATTN_SUCCESS && host_visible && ctx->buffers_mapped) {
        VkResult vr = ctx->vk.vkMapMemory(ctx->device, b->memory, 0, VK_WHOLE_SIZE, 0, &b->map);
        if (vr != VK_SUCCESS)
            r = vka_fail_vk(ctx, vr, "vkMapMemory");
    }
    if (r != VKATTN_SUCCESS) {
        vkattn_buffer_destroy(b);
        return r;
    }
    *out = b;
    return VKATTN_SUCCESS;
}

void vkattn_buffer_destroy(vkattn_buffer *b)
{
    if (!b)
        return;
    vkattn_context *ctx = b->ctx;
    if (b->buffer) {
        vka_descriptors_forget_buffer(ctx, b->buffer);
        if (b->owned)
            ctx->vk.vkDestroyBuffer(ctx->device, b->buffer, ctx->vk_allocator);
    }
    if (b->memory)
        ctx->vk.vkFreeMemory(ctx->device, b->memory, ctx->vk_allocator); /* unmaps too */
    vka_free(ctx, b);
}

uint64_t vkattn_buffer_size(const vkattn_buffer *b) { return b ? b->size : 0; }
VkBuffer vkattn_buffer_vk(const vkattn_buffer *b) { return b ? b->buffer : VK_NULL_HANDLE; }

vkattn_result vkattn_buffer_wrap(vkattn_context *ctx, const vkattn_buffer_wrap_desc *desc,
                                 vkattn_buffer **out)
{
    if (!ctx)
        return VKATTN_ERROR_INVALID_ARGUMENT;
    if (!out || !desc)
        return vka_fail(ctx, VKATTN_ERROR_INVALID_ARGUMENT, "vkattn_buffer_wrap: %s is NULL",
                        !out ? "out" : "desc");
    *out = NULL;
    if (!desc->buffer)
        return vka_fail(ctx, VKATTN_ERROR_INVALID_ARGUMENT, "desc->buffer is VK_NULL_HANDLE");
    if (desc->size == 0 || desc->size % 4)
        return vka_fail(ctx, VKATTN_ERROR_INVALID_ARGUMENT,
                        "desc->size %llu: a wrapped buffer's size must be a positive multiple of 4 "
                        "(kernels access 32-bit words)",
                        (unsigned long long)desc->size);
    if (!(desc->usage & VK_BUFFER_USAGE_STORAGE_BUFFER_BIT))
        return vka_fail(ctx, VKATTN_ERROR_INVALID_ARGUMENT,
                        "desc->usage 0x%x lacks VK_BUFFER_USAGE_STORAGE_BUFFER_BIT", desc->usage);
    vkattn_buffer *b = vka_alloc(ctx, sizeof *b);
    if (!b)
        return vka_fail(ctx, VKATTN_ERROR_OUT_OF_HOST_MEMORY, "out of host memory");
    b->ctx = ctx;
    b->buffer = desc->buffer;
    b->size = b->vk_size = desc->size;
    b->map = desc->mapped;
    b->owned = false;
    b->texel_ok = desc->usage & VK_BUFFER_USAGE_UNIFORM_TEXEL_BUFFER_BIT;
    b->transfer_ok = (desc->usage & VK_BUFFER_USAGE_TRANSFER_SRC_BIT) &&
                     (desc->usage & VK_BUFFER_USAGE_TRANSFER_DST_BIT);
    *out = b;
    return VKATTN_SUCCESS;
}
