/* The context object: the state every part of the runtime reads (Vulkan
 * handles and function table, device capabilities, memory types) and the
 * subsystems hanging off it. Lifecycle: context.c; host services (memory,
 * messages, the lock): host.c. Nothing here is exported (the library is
 * built with hidden visibility). */
#ifndef VKA_CONTEXT_H
#define VKA_CONTEXT_H

#include "vkattn.h"
#include "core/vk_table.h"

#include <pthread.h>
#include <stdatomic.h>

#define VKA_ERROR_MAX 1024

typedef struct vka_descriptor_cache vka_descriptor_cache;
typedef struct vka_pipeline_registry vka_pipeline_registry;
typedef struct vka_tuning_table vka_tuning_table;
typedef struct vka_const_buffers vka_const_buffers;
struct vka_self_test;

struct vkattn_context {
    vkattn_allocator allocator;
    vkattn_log_fn log;
    void *log_user;
    uint32_t flags;

    vka_vk_table vk;
    bool borrowed;
    VkInstance instance;
    VkPhysicalDevice physical_device;
    VkDevice device;
    VkQueue queue;
    uint32_t queue_family;
    const VkAllocationCallbacks *vk_allocator; /* NULL unless the host gave one */
    VkDebugUtilsMessengerEXT messenger;
    /* Validation callbacks may come from any thread that makes a Vulkan call. */
    atomic_uint validation_errors;
    atomic_uint validation_warnings;
    /* Guards what recording creates lazily and shares (pipelines, descriptor
     * sets, texel views, the dummy buffer) and the last-error string, so
     * several threads may record with one context at the same time. */
    pthread_mutex_t lock; /* pthreads, not C11 mtx_t: ThreadSanitizer sees it */
    bool lock_ready;

    vkattn_device_info info;
    /* The start-up self-test and quirks (core/selftest.c): what the device
     * offers, what was checked, what the context uses. */
    struct vka_self_test *self_test;
    /* The self-test or a quirk found the subgroup contract broken: no
     * subgroup kernel may run, not even one a tuner would try. */
    bool subgroup_families_off;
    bool coopmat_works; /* the coopmat family is offered and passed its check */
    /* atomics of device scope are allowed: the memory model is off, or on
     * with vulkanMemoryModelDeviceScope */
    bool device_scope_atomics;
    VkPhysicalDeviceMemoryProperties memory;
    uint32_t buffer_memory_type;  /* memory type of vkattn buffers */
    uint32_t staging_memory_type; /* host-visible type for staging */
    bool buffers_mapped;          /* buffers are host-visible and mapped */
    uint64_t timestamp_mask;      /* valid bits of timestamps */

    VkPipelineCache pipeline_cache;
    vka_pipeline_registry *pipelines;
    vka_descriptor_cache *descriptors;
    vka_tuning_table *tuning;

    /* The convenience command buffer (vkattn_commands_begin/submit). */
    VkCommandPool command_pool;
    VkCommandBuffer command_buffer;
    VkFence fence;
    bool recording;

    /* Staging buffer for devices whose memory the host cannot map. */
    VkBuffer staging;
    VkDeviceMemory staging_memory;
    void *staging_map;
    uint64_t staging_size;

    /* A small buffer bound where a kernel's optional input is absent. */
    vkattn_buffer *dummy;
    /* Read-only tables made on first use (core/const_buffers.c). */
    vka_const_buffers *const_buffers;

    char last_error[VKA_ERROR_MAX];
};

#endif
