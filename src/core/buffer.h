/* Buffers (buffer.c): what the runtime knows of each vkattn_buffer. */
#ifndef VKA_BUFFER_H
#define VKA_BUFFER_H

#include "core/context.h"

struct vkattn_buffer {
    vkattn_context *ctx;
    VkBuffer buffer;
    VkDeviceMemory memory;
    uint64_t size;    /* as requested */
    uint64_t vk_size; /* size of the VkBuffer: rounded up to whole 16-byte words
                         so a 32-bit access to the last partial word stays inside */
    void *map;        /* non-NULL when host-visible (always coherent memory) */
    bool owned;       /* false: the host's VkBuffer (vkattn_buffer_wrap), not destroyed */
    bool texel_ok;    /* created with uniform-texel-buffer usage */
    bool transfer_ok; /* created with transfer src and dst usage */
};

/* A VkBuffer of `size` bytes with memory of `type_hint` (or a compatible
 * type); `*host_visible` tells whether that memory can be mapped. */
vkattn_result vka_buffer_make(vkattn_context *ctx, uint64_t size, VkBufferUsageFlags usage,
                              uint32_t type_hint, VkBuffer *buffer, VkDeviceMemory *memory,
                              bool *host_visible);

#endif
