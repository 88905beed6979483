/* Internal declarations shared by the library's source files. Nothing here is
 * exported (the library is built with hidden visibility). */
#ifndef VKA_INTERNAL_H
#define VKA_INTERNAL_H

#include "vkattn.h"
#include "core/spirv.h"
#include "core/vk_table.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <threads.h>

#if defined(__GNUC__)
#define VKA_PRINTF(fmt_index, args_index) \
    __attribute__((format(printf, fmt_index, args_index)))
#else
#define VKA_PRINTF(fmt_index, args_index)
#endif

#define VKA_ERROR_MAX 1024

typedef struct vka_pipeline vka_pipeline;
typedef struct vka_descriptor_cache vka_descriptor_cache;
typedef struct vka_pipeline_registry vka_pipeline_registry;
struct vka_tuning_table;

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
    mtx_t lock;
    bool lock_ready;

    vkattn_device_info info;
    VkPhysicalDeviceMemoryProperties memory;
    uint32_t buffer_memory_type;  /* memory type of vkattn buffers */
    uint32_t staging_memory_type; /* host-visible type for staging */
    bool buffers_mapped;          /* buffers are host-visible and mapped */
    uint64_t timestamp_mask;      /* valid bits of timestamps */

    VkPipelineCache pipeline_cache;
    vka_pipeline_registry *pipelines;
    vka_descriptor_cache *descriptors;
    struct vka_tuning_table *tuning; /* tuning.c */

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

    char last_error[VKA_ERROR_MAX];
};

/* ---- errors and logging (context.c) */

/* Formats the message into the last-error string, sends it to the logger and
 * returns `code`. Use as `return vka_fail(ctx, VKA_ERROR_..., "...")`. */
vkattn_result vka_fail(vkattn_context *ctx, vkattn_result code, const char *fmt, ...)
    VKA_PRINTF(3, 4);
/* Maps a VkResult to a vkattn_result and records "<what> failed: VK_ERROR_..". */
vkattn_result vka_fail_vk(vkattn_context *ctx, VkResult vr, const char *what);
void vka_log(vkattn_context *ctx, vkattn_log_level level, const char *fmt, ...)
    VKA_PRINTF(3, 4);
/* The context's lock (see struct vkattn_context); recursive, as failures
 * inside locked regions record their message through it. */
void vka_lock(vkattn_context *ctx);
void vka_unlock(vkattn_context *ctx);
const char *vka_vk_result_name(VkResult vr);

/* ---- host memory (context.c) */

void *vka_alloc(vkattn_context *ctx, size_t size); /* zeroed */
void vka_free(vkattn_context *ctx, void *p);
/* The whole of a file, at most max_size bytes, into *data (from
 * vka_alloc, to vka_free; an empty file gives a 1-byte buffer and
 * *size 0). MISSING: it does not open; UNREADABLE: it opens but is not a
 * readable file (a directory), is larger, or memory ran out. *data is NULL
 * unless OK. */
typedef enum vka_file_read { VKA_FILE_OK, VKA_FILE_MISSING, VKA_FILE_UNREADABLE } vka_file_read;
vka_file_read vka_read_file(vkattn_context *ctx, const char *path, size_t max_size, void **data,
                                  size_t *size);
/* Writes `size` bytes to `path` through `path`.tmp renamed into place (no
 * half-written file, the temporary removed on failure). false: not written. */
bool vka_write_file(const char *path, const void *data, size_t size);
extern const vkattn_allocator vka_default_allocator;

/* ---- devices (device.c) */

/* Reads a physical device's capabilities into `info`. */
void vka_device_query(const vka_vk_table *vk, VkPhysicalDevice pd, uint32_t index,
                         vkattn_device_info *info);
/* Picks a device by the selector syntax of vkattn_context_desc.device.
 * Returns the index or UINT32_MAX, with the reason in `why`. */
uint32_t vka_device_choose(const vkattn_device_info *infos, uint32_t count,
                              const char *selector, char *why, size_t why_size);
/* A queue family with compute support (prefers one that also has timestamps). */
uint32_t vka_device_compute_family(const vka_vk_table *vk, VkPhysicalDevice pd,
                                      bool compute_only, uint32_t *timestamp_bits);

/* ---- instance and validation (instance.c) */

vkattn_result vka_instance_create(vkattn_context *ctx, bool validation);
vkattn_result vka_messenger_attach(vkattn_context *ctx);
void vka_fill_messenger_info(vkattn_context *ctx, VkDebugUtilsMessengerCreateInfoEXT *info);

/* ---- submission (submit.c) */

vkattn_result vka_submit_init(vkattn_context *ctx);
void vka_submit_destroy(vkattn_context *ctx);
/* Ends what was recorded since vkattn_commands_begin: submits and waits
 * when `recorded` is VKATTN_SUCCESS, else discards it and returns
 * `recorded` (the submit-and-wait forms of the ops end with this). */
vkattn_result vka_commands_finish(vkattn_context *ctx, vkattn_result recorded);
/* Global barrier: compute-shader writes -> compute-shader reads/writes. */
void vka_cmd_compute_barrier(vkattn_context *ctx, VkCommandBuffer cmd);

/* ---- staging (buffer.c) */

void vka_staging_destroy(vkattn_context *ctx);
uint32_t vka_find_memory_type(const VkPhysicalDeviceMemoryProperties *mp, uint32_t bits,
                                 VkMemoryPropertyFlags required,
                                 VkMemoryPropertyFlags preferred);

struct vkattn_buffer {
    vkattn_context *ctx;
    VkBuffer buffer;
    VkDeviceMemory memory;
    uint64_t size;    /* as requested */
    uint64_t vk_size; /* size of the VkBuffer: rounded up to whole 16-byte words
                         so a 32-bit access to the last partial word stays inside */
    void *map; /* non-NULL when host-visible (always coherent memory) */
    bool owned;     /* false: the host's VkBuffer (vkattn_buffer_wrap), not destroyed */
    bool texel_ok;  /* created with uniform-texel-buffer usage */
    bool transfer_ok; /* created with transfer src and dst usage */
};

/* ---- kernels and pipelines (pipeline.c) */

/* How a kernel binding is read. */
typedef enum vka_binding_kind {
    VKA_BINDING_STORAGE = 0,     /* storage buffer */
    VKA_BINDING_TEXEL = 1,       /* uniform texel buffer (VkBufferView) */
} vka_binding_kind;

#define VKA_MAX_BINDINGS 12
#define VKA_MAX_SPEC 16

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

vkattn_result vka_pipelines_init(vkattn_context *ctx, const vkattn_context_desc *desc);
void vka_pipelines_destroy(vkattn_context *ctx);
/* The pipeline of `kernel` with these specialization constants (ids 0..n-1),
 * created on first use and cached. */
vkattn_result vka_pipeline_get(vkattn_context *ctx, const vka_kernel *kernel,
                                  const uint32_t *spec, uint32_t spec_count,
                                  vka_pipeline **out);
/* Binds pipeline, descriptors (cached by content) and push constants, then
 * records vkCmdDispatch. */
vkattn_result vka_cmd_dispatch(vkattn_context *ctx, VkCommandBuffer cmd,
                                  vka_pipeline *pipeline, const vka_binding *bindings,
                                  const void *push, uint32_t gx, uint32_t gy, uint32_t gz);

/* A storage-buffer binding that covers [offset, offset + bytes) of `buffer`:
 * the binding starts at the aligned address at or below `offset`, and
 * `*first_element` is where `offset` falls in it, in elements of
 * `element_size`. Fails when the window exceeds maxStorageBufferRange (callers
 * split larger work). */
vkattn_result vka_bind_window(vkattn_context *ctx, const vkattn_buffer *buffer, uint64_t offset,
                                 uint64_t bytes, size_t element_size, vka_binding *out,
                                 uint32_t *first_element);

/* Like vka_bind_window, for a uniform texel buffer of `format`
 * (VK_FORMAT_R32G32B32A32_SFLOAT for f32 data, R16G16B16A16_SFLOAT for f16):
 * `*first_element` counts scalar elements from the view's start. Fails with
 * VKATTN_ERROR_UNSUPPORTED when the window exceeds maxTexelBufferElements or
 * `offset` does not fall on a texel (callers then use storage bindings). */
vkattn_result vka_bind_texel_window(vkattn_context *ctx, const vkattn_buffer *buffer,
                                       uint64_t offset, uint64_t bytes, vkattn_dtype dtype,
                                       vka_binding *out, uint32_t *first_element);
/* A binding of the context's small dummy buffer, for an absent optional input
 * (`format` VK_FORMAT_UNDEFINED for a storage binding). */
vkattn_result vka_bind_dummy(vkattn_context *ctx, VkFormat format, vka_binding *out);

/* How a dtype is stored for the kernels on this device (the variant to pick). */
enum { VKA_STORAGE_F32 = 0, VKA_STORAGE_F16 = 1, VKA_STORAGE_F16P = 2 };
uint32_t vka_storage_kind(const vkattn_context *ctx, vkattn_dtype dtype);

/* ---- descriptor cache (descriptors.c) */

vkattn_result vka_descriptors_init(vkattn_context *ctx);
void vka_descriptors_destroy(vkattn_context *ctx);
/* A descriptor set holding exactly these bindings for `layout`. Sets are
 * written once and never changed, so one set serves any number of command
 * buffers; they live until a buffer they reference is destroyed. */
vkattn_result vka_descriptor_set_get(vkattn_context *ctx, VkDescriptorSetLayout layout,
                                        const vka_kernel *kernel,
                                        const vka_binding *bindings, VkDescriptorSet *out);
/* Drops every cached set and view that references `buffer`. */
void vka_descriptors_forget_buffer(vkattn_context *ctx, VkBuffer buffer);

/* ---- tensors (tensor.c) */

/* Resolves default strides and checks the tensor against its buffer.
 * `what` names the argument in messages ("args->src"). */
vkattn_result vka_tensor_resolve(vkattn_context *ctx, const vkattn_tensor *t,
                                    const char *what, vkattn_tensor *out);
bool vka_tensor_is_contiguous(const vkattn_tensor *t);

/* ---- small helpers */

static inline uint64_t vka_align_down(uint64_t v, uint64_t a) { return v - v % a; }
static inline uint64_t vka_align_up(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }
static inline uint64_t vka_min_u64(uint64_t a, uint64_t b) { return a < b ? a : b; }
static inline uint32_t vka_div_up(uint32_t a, uint32_t b) { return (a + b - 1) / b; }
static inline uint64_t vka_div_up64(uint64_t a, uint64_t b) { return (a + b - 1) / b; }

/* Whether the subgroup kernel families (which are specialized for
 * info.subgroup_size and shuffle across it) may run at all: shuffles and
 * arithmetic, not disabled by the context's flags, and a subgroup size the
 * pipeline can pin (subgroup size control) or that cannot vary (CPU
 * drivers). Tuners choose among them only then. */
static inline bool vka_subgroup_families_allowed(const vkattn_context *ctx)
{
    return ctx->info.subgroup_shuffle && ctx->info.subgroup_arithmetic &&
           !(ctx->flags & VKATTN_CONTEXT_NO_SUBGROUP_KERNELS) &&
           (ctx->info.subgroup_size_control || ctx->info.type == VKATTN_DEVICE_TYPE_CPU);
}

/* The largest 1D workgroup the device allows. */
static inline uint32_t vka_max_workgroup(const vkattn_context *ctx)
{
    uint32_t max = ctx->info.max_workgroup_invocations;
    return ctx->info.max_workgroup_size[0] < max ? ctx->info.max_workgroup_size[0] : max;
}

/* The subgroup size, 1 where the device reports none. */
static inline uint32_t vka_subgroup_size(const vkattn_context *ctx)
{
    return ctx->info.subgroup_size ? ctx->info.subgroup_size : 1;
}

/* A 1D workgroup size near `wanted` that the device allows, a multiple of
 * the subgroup size where possible. */
static inline uint32_t vka_workgroup_size(const vkattn_context *ctx, uint32_t wanted)
{
    uint32_t max = vka_max_workgroup(ctx);
    uint32_t wg = wanted < max ? wanted : max;
    uint32_t sg = vka_subgroup_size(ctx);
    return wg >= sg ? wg / sg * sg : wg;
}

/* Spreads `groups` workgroups over x and y within maxComputeWorkGroupCount
 * (kernels use linear_invocation() from tensor_io.glsl). Extra groups in the
 * last row must exit on their own bounds check. */
static inline void vka_grid_2d(const vkattn_context *ctx, uint64_t groups, uint32_t *gx,
                                  uint32_t *gy)
{
    uint64_t max_x = ctx->info.max_workgroup_count[0];
    *gx = (uint32_t)(groups < max_x ? groups : max_x);
    *gy = *gx ? (uint32_t)vka_div_up64(groups, *gx) : 0;
}

#endif
