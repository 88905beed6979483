/* What the runtime knows of a compute kernel and of what is bound to it:
 * the types shared by pipelines, descriptor sets and recording. */
#ifndef VKA_KERNEL_H
#define VKA_KERNEL_H

#include "vkattn.h"
#include "core/spirv.h"

/* How a kernel binding is read. */
typedef enum vka_binding_kind {
    VKA_BINDING_STORAGE = 0, /* storage buffer */
    VKA_BINDING_TEXEL = 1,   /* uniform texel buffer (VkBufferView) */
} vka_binding_kind;

#define VKA_MAX_BINDINGS 12
#define VKA_MAX_SPEC 19

/* One SPIR-V variant and its interface, as compiled from shaders/. */
typedef struct vka_kernel {
    const char *name;
    const vka_spirv *spirv;
    uint32_t binding_count;
    vka_binding_kind bindings[VKA_MAX_BINDINGS];
    uint32_t push_size; /* bytes of push constants */
    /* The kernel relies on gl_SubgroupSize == vkattn_device_info.subgroup_size
     * and on full subgroups (its workgroup size is a multiple of it): where the
     * device has subgroup size control, the pipeline requires exactly that. */
    bool full_subgroups;
} vka_kernel;

/* A bound range of a buffer. For texel bindings `format` is the view format
 * and offset/range must respect the device's texel-buffer limits. */
typedef struct vka_binding {
    const vkattn_buffer *buffer;
    uint64_t offset;
    uint64_t range;
    VkFormat format; /* VKA_BINDING_TEXEL only */
} vka_binding;

#endif
