/*
 * vkattn.h - multi-head attention as Vulkan compute shaders.
 *
 * This header is the reference manual. It needs only <vulkan/vulkan_core.h>.
 *
 * ---------------------------------------------------------------------------
 * Conventions
 * ---------------------------------------------------------------------------
 * - Every function that can fail returns a vkattn_result: 0 (VKATTN_SUCCESS)
 *   on success, a negative code otherwise. The detail ("desc->device 7: only
 *   2 Vulkan devices") goes to the context's last-error string and to its
 *   logger. Bad input never aborts.
 * - vkattn_x_create(ctx, desc, &out): on failure *out is NULL.
 *   vkattn_x_destroy(NULL) is a no-op.
 * - In every desc struct, zero means "default"; each field's comment says what
 *   the default is. Initialise descs with `= {0}` and set what you need.
 * - Shapes and strides are in elements, never bytes. Offsets are in bytes.
 *
 * ---------------------------------------------------------------------------
 * Ownership
 * ---------------------------------------------------------------------------
 * - What vkattn creates it destroys. Vulkan objects borrowed from the host
 *   (vkattn_vulkan_borrow) are never destroyed by vkattn and must outlive the
 *   context.
 * - Buffers and timers belong to the context that created them and must be
 *   destroyed before it.
 *
 * ---------------------------------------------------------------------------
 * Threading
 * ---------------------------------------------------------------------------
 * - There is no global state: different contexts may be used from different
 *   threads at the same time without any locking.
 * - Recording (every vkattn_cmd_* function) may happen from several threads
 *   at once on one context, into different command buffers: what recording
 *   creates on first use (pipelines, descriptor sets, texel views) is
 *   guarded by a lock inside the context. Objects read while recording
 *   (buffers, tensors, a layer's weights) must not be changed meanwhile.
 * - Externally synchronized (one thread at a time, like a VkQueue): the
 *   context's own command buffer (vkattn_commands_*, and every
 *   submit-and-wait function: vkattn_attention, vkattn_mha_forward,
 *   buffer uploads and downloads through staging, vkattn_mha_set_weights,
 *   the tuner), each KV cache (steps change its lengths), and the layer's
 *   own scratch (use per-thread scratch with vkattn_cmd_mha_forward).
 *   Submit-and-wait functions submit to the context's queue - for a borrowed
 *   context the host's queue, which the host must not use from another
 *   thread at the same moment.
 * - Creating and destroying objects of one context: one thread at a time.
 * - vkattn_context_last_error is per context: with several threads failing
 *   at once it holds one of their messages; the logger gets every message,
 *   on the thread that failed (validation messages: on the thread that made
 *   the Vulkan call).
 * - The CPU reference (vkattn_ref_*) is reentrant; its temporaries come
 *   from malloc (it has no context, hence no allocator).
 *
 * ---------------------------------------------------------------------------
 * Synchronization contract of vkattn_cmd_* (record) functions
 * ---------------------------------------------------------------------------
 * A vkattn_cmd_* function only records into the VkCommandBuffer it is given
 * (which must be in the recording state, outside a render pass, from a queue
 * family with compute support). It records the dispatches of the operation
 * and the barriers *between* its own dispatches, nothing before the first or
 * after the last one. Therefore:
 *   before: every write to an input tensor (transfer, host or shader write)
 *           must be made visible to VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT with
 *           VK_ACCESS_SHADER_READ_BIT, and earlier reads/writes of the output
 *           range must be ordered before VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT
 *           / VK_ACCESS_SHADER_WRITE_BIT (write-after-read/write hazards);
 *   after:  outputs are written by VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT with
 *           VK_ACCESS_SHADER_WRITE_BIT; a consumer must wait on that stage
 *           and access (a transfer, a host read after a fence, a shader).
 * The equivalent synchronization2 values are
 * VK_PIPELINE_STAGE_2_COMPUTE_SHADER_BIT with VK_ACCESS_2_SHADER_STORAGE_READ_BIT
 * / VK_ACCESS_2_UNIFORM_READ_BIT (texel-buffer reads) and
 * VK_ACCESS_2_SHADER_STORAGE_WRITE_BIT.
 * The functions without "cmd" submit their own command buffer and wait for
 * it; they take care of all synchronization themselves.
 */
#ifndef VKATTN_H
#define VKATTN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <vulkan/vulkan_core.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------- version */

#define VKATTN_VERSION_MAJOR 0
#define VKATTN_VERSION_MINOR 1
#define VKATTN_VERSION_PATCH 0
/* (major << 16) | (minor << 8) | patch */
#define VKATTN_VERSION \
    ((VKATTN_VERSION_MAJOR << 16) | (VKATTN_VERSION_MINOR << 8) | VKATTN_VERSION_PATCH)

#if defined(VKATTN_SHARED) && defined(_WIN32)
#ifdef VKATTN_BUILDING
#define VKATTN_API __declspec(dllexport)
#else
#define VKATTN_API __declspec(dllimport)
#endif
#elif defined(VKATTN_SHARED) && defined(VKATTN_BUILDING)
#define VKATTN_API __attribute__((visibility("default")))
#else
#define VKATTN_API
#endif

/* The version of the library linked at run time, VKATTN_VERSION's encoding. */
VKATTN_API uint32_t vkattn_version(void);
/* "major.minor.patch" of the library linked at run time. */
VKATTN_API const char *vkattn_version_string(void);

/* ---------------------------------------------------------------- results */

/* X(name, value, message). One entry per kind of failure; the context's
 * last-error string names the parameter and the values involved. */
#define VKATTN_RESULT_LIST(X)                                                              \
    X(SUCCESS, 0, "success")                                                               \
    X(ERROR_INVALID_ARGUMENT, -1, "an argument is invalid")                                \
    X(ERROR_OUT_OF_HOST_MEMORY, -2, "out of host memory")                                  \
    X(ERROR_OUT_OF_DEVICE_MEMORY, -3, "out of device memory")                              \
    X(ERROR_NO_DEVICE, -4, "no Vulkan device is available")                                \
    X(ERROR_DEVICE_NOT_FOUND, -5, "no Vulkan device matches the requested one")            \
    X(ERROR_UNSUPPORTED, -6, "the device lacks a required capability")                     \
    X(ERROR_LAYER_NOT_PRESENT, -7, "the Khronos validation layer is not installed")        \
    X(ERROR_VULKAN, -8, "a Vulkan call failed")                                            \
    X(ERROR_DEVICE_LOST, -9, "the Vulkan device was lost")                                 \
    X(ERROR_OUT_OF_RANGE, -10, "an offset or size lies outside its buffer")                \
    X(ERROR_SHAPE_MISMATCH, -11, "tensor shapes do not agree")                             \
    X(ERROR_UNSUPPORTED_DTYPE, -12, "the data type is not supported here")                 \
    X(ERROR_IO, -13, "a file could not be read or written")                                \
    X(ERROR_BAD_FORMAT, -14, "a file's contents are malformed")                            \
    X(ERROR_CACHE_FULL, -15, "the KV cache's block pool has no free block left")

typedef enum vkattn_result {
#define VKATTN_RESULT_ENUM_(name, value, message) VKATTN_##name = value,
    VKATTN_RESULT_LIST(VKATTN_RESULT_ENUM_)
#undef VKATTN_RESULT_ENUM_
} vkattn_result;

/* "VKATTN_ERROR_INVALID_ARGUMENT"; "VKATTN_UNKNOWN_RESULT" for values not in the list. */
VKATTN_API const char *vkattn_result_name(vkattn_result result);
/* "an argument is invalid"; "unknown result" for values not in the list. */
VKATTN_API const char *vkattn_result_message(vkattn_result result);

/* ------------------------------------------------------- host allocation */

/* Host memory allocator. Every host allocation of a context goes through it
 * (Vulkan's own host allocations go through VkAllocationCallbacks when the
 * host borrows its device with them). `allocate` returns memory aligned to
 * `alignment` (a power of two, at most 64) or NULL; `free` accepts NULL. */
typedef struct vkattn_allocator {
    void *(*allocate)(void *user, size_t size, size_t alignment);
    void (*free)(void *user, void *memory);
    void *user;
} vkattn_allocator;

/* ---------------------------------------------------------------- logging */

typedef enum vkattn_log_level {
    VKATTN_LOG_DEBUG = 0,
    VKATTN_LOG_INFO = 1,
    VKATTN_LOG_WARNING = 2,
    VKATTN_LOG_ERROR = 3,
} vkattn_log_level;

/* Receives every error message (the same text as the last-error string),
 * validation-layer messages when validation is on, and informational notes. */
typedef void (*vkattn_log_fn)(void *user, vkattn_log_level level, const char *message);

/* ---------------------------------------------------------------- devices */

typedef enum vkattn_device_type {
    VKATTN_DEVICE_TYPE_OTHER = 0,
    VKATTN_DEVICE_TYPE_INTEGRATED_GPU = 1,
    VKATTN_DEVICE_TYPE_DISCRETE_GPU = 2,
    VKATTN_DEVICE_TYPE_VIRTUAL_GPU = 3,
    VKATTN_DEVICE_TYPE_CPU = 4,
} vkattn_device_type;

/* How f16 tensors are read and written by the kernels on a device. The bytes in
 * memory are identical either way (IEEE binary16, little endian, packed). */
typedef enum vkattn_f16_path {
    /* 16-bit storage (storageBuffer16BitAccess): loads and stores of float16_t. */
    VKATTN_F16_NATIVE = 0,
    /* No 16-bit storage: pairs of halves in 32-bit words, converted with
     * unpackHalf2x16 / packHalf2x16 (available on every Vulkan device). */
    VKATTN_F16_PACKED = 1,
} vkattn_f16_path;

/* Capabilities of one physical device, read once. */
typedef struct vkattn_device_info {
    uint32_t index; /* position in vkEnumeratePhysicalDevices */
    char name[VK_MAX_PHYSICAL_DEVICE_NAME_SIZE];
    char driver_name[VK_MAX_DRIVER_NAME_SIZE];
    char driver_info[VK_MAX_DRIVER_INFO_SIZE];
    vkattn_device_type type;
    uint32_t vendor_id, device_id;
    uint32_t api_version; /* VK_MAKE_API_VERSION encoding */
    /* Subgroups: size seen by compute shaders and the supported range
     * (min == max unless subgroup size control is available). */
    uint32_t subgroup_size, subgroup_size_min, subgroup_size_max;
    bool subgroup_shuffle;    /* VK_SUBGROUP_FEATURE_SHUFFLE_BIT in compute */
    bool subgroup_arithmetic; /* VK_SUBGROUP_FEATURE_ARITHMETIC_BIT in compute */
    bool subgroup_size_control; /* requiredSubgroupSize + computeFullSubgroups */
    uint32_t max_shared_memory; /* maxComputeSharedMemorySize, bytes */
    uint32_t max_workgroup_invocations;
    uint32_t max_workgroup_size[3];
    uint32_t max_workgroup_count[3];
    bool fp16_arithmetic; /* shaderFloat16 */
    bool storage_16bit;   /* storageBuffer16BitAccess */
    vkattn_f16_path f16_path;
    uint64_t max_storage_buffer_range; /* bytes one storage-buffer binding may cover */
    uint64_t max_texel_buffer_elements;
    uint64_t min_storage_buffer_offset_alignment;
    uint64_t min_texel_buffer_offset_alignment;
    uint64_t max_allocation_size; /* maxMemoryAllocationSize */
    uint64_t device_local_bytes;  /* size of the largest device-local heap */
    bool unified_memory;          /* a device-local memory type is also host-visible */
    bool timestamps;              /* the compute queue can write timestamps */
    float timestamp_period_ns;
    uint32_t push_constant_bytes; /* maxPushConstantsSize */
    /* Kernel choice for this device: inputs read through uniform texel
     * buffers (vectorised gathers on CPU drivers, the texture cache on GPUs)
     * rather than storage buffers; and the subgroup kernels (operands shared
     * between invocations with subgroupShuffle, no shared memory: fastest on
     * CPU drivers) rather than shared-memory tiles (GPUs, and devices without
     * shuffles). Both paths compute the same results. */
    bool texel_inputs;
    bool subgroup_kernels;
    /* false when vkattn cannot run on the device; `unsupported_reason` says why. */
    bool supported;
    char unsupported_reason[128];
} vkattn_device_info;

/* Lists the Vulkan devices of the system's loader. `infos` may be NULL to
 * count only; otherwise up to `capacity` entries are written. `*count` gets the
 * number of devices, `*chosen` (may be NULL) the index the automatic choice
 * would take with `device` (same syntax as vkattn_context_desc.device; NULL
 * for automatic), or UINT32_MAX when none would. With no Vulkan driver at all
 * returns VKATTN_ERROR_NO_DEVICE. `log` (may be NULL) receives error detail. */
VKATTN_API vkattn_result vkattn_list_devices(const char *device, vkattn_device_info *infos,
                                             uint32_t capacity, uint32_t *count,
                                             uint32_t *chosen, vkattn_log_fn log,
                                             void *log_user);

/* "discrete GPU", "CPU", ... */
VKATTN_API const char *vkattn_device_type_name(vkattn_device_type type);

/* ---------------------------------------------------------------- context */

typedef struct vkattn_context vkattn_context;

enum {
    /* Enable VK_LAYER_KHRONOS_validation with synchronization validation on the
     * context's own instance (standalone contexts), or attach a messenger to
     * the borrowed instance (which must have VK_EXT_debug_utils enabled).
     * Messages go to the logger and are counted
     * (vkattn_context_validation_counts). */
    VKATTN_CONTEXT_VALIDATION = 1u << 0,
    /* Test-only: moves data through a staging buffer even when device
     * memory is host-visible, so that path (discrete GPUs) runs on every
     * machine. Results are the same either way. */
    VKATTN_CONTEXT_TEST_FORCE_STAGING = 1u << 1,
    /* Kernel variants are chosen per device (see vkattn_device_info and
     * `vkattn info`); these two take choices away - for tests of the other
     * paths (the suite runs all four combinations), or to work around a
     * driver problem. Results match within the stated tolerances. */
    /* Never read inputs through uniform texel buffers (storage buffers only). */
    VKATTN_CONTEXT_NO_TEXEL_BUFFERS = 1u << 2,
    /* Never use the subgroup-shuffle kernels (shared-memory tiles instead). */
    VKATTN_CONTEXT_NO_SUBGROUP_KERNELS = 1u << 3,
    /* Standalone contexts: use a compute-only queue family (async compute,
     * beside a graphics queue) when the device has one; else any compute
     * family. Borrowed contexts use the queue the host names. */
    VKATTN_CONTEXT_ASYNC_COMPUTE = 1u << 4,
};

/* The host's Vulkan objects, borrowed: never destroyed by vkattn; they must
 * outlive the context. The device must be Vulkan 1.2 or newer. */
typedef struct vkattn_vulkan_borrow {
    VkInstance instance;
    VkPhysicalDevice physical_device;
    VkDevice device;
    uint32_t queue_family_index; /* must support compute */
    uint32_t queue_index;
    /* Required: every Vulkan entry point is loaded through it. */
    PFN_vkGetInstanceProcAddr get_instance_proc_addr;
    /* Optional: default is get_instance_proc_addr(instance, "vkGetDeviceProcAddr"). */
    PFN_vkGetDeviceProcAddr get_device_proc_addr;
    /* Optional: passed to every Vulkan create/destroy call vkattn makes. */
    const VkAllocationCallbacks *allocation_callbacks;
    /* Optional: the VkPhysicalDeviceFeatures2 chain the device was created with.
     * vkattn only uses features it finds enabled here (16-bit storage, ...);
     * NULL means none of the optional ones. Read during create only. */
    const VkPhysicalDeviceFeatures2 *enabled_features;
} vkattn_vulkan_borrow;

typedef struct vkattn_context_desc {
    /* Which device a standalone context uses. NULL: automatic (discrete >
     * integrated > virtual > CPU, then 16-bit storage, then larger subgroups).
     * "N" (decimal): the device at index N of vkattn_list_devices. Anything
     * else: the first device whose name contains it, case-insensitively.
     * Ignored when `borrow` is set. The CLI maps VKATTN_DEVICE onto it. */
    const char *device;
    /* VKATTN_CONTEXT_* flags; 0: none. */
    uint32_t flags;
    /* Logger; NULL: messages are only kept in the last-error string. */
    vkattn_log_fn log;
    void *log_user;
    /* Host allocator; NULL: malloc/free. Copied; must stay valid. */
    const vkattn_allocator *allocator;
    /* Non-NULL: borrow the host's instance and device instead of creating them. */
    const vkattn_vulkan_borrow *borrow;
    /* Standalone contexts: VkAllocationCallbacks for every Vulkan create and
     * destroy call (instance and device included). NULL: the driver's. For
     * borrowed contexts see vkattn_vulkan_borrow.allocation_callbacks. */
    const VkAllocationCallbacks *vulkan_allocator;
    /* Initial pipeline cache: a file (missing file: start empty; one that
     * cannot be read - a directory, over 256 MiB - starts empty with a
     * warning) or bytes (as from vkattn_context_pipeline_cache_data). Data
     * from another device or driver is ignored with an info message.
     * NULL/0: start empty. */
    const char *pipeline_cache_path;
    const void *pipeline_cache_data;
    size_t pipeline_cache_size;
    /* Initial tuning data (which kernel configuration won per op and shape
     * class on this device, see the tuners vkattn_<op>_tune): a file (missing: start
     * empty; unreadable or over 16 MiB: empty, with a warning) or bytes (as
     * from vkattn_context_tuning_data). Data of another device or driver is
     * ignored. NULL/0: none (built-in heuristics). Tuning data starts with
     * the line VKATTN_TUNING_MAGIC followed by its format version. */
    const char *tuning_path;
    const void *tuning_data;
    size_t tuning_size;
} vkattn_context_desc;

/* Creates a context. `desc` may be NULL (all defaults). */
VKATTN_API vkattn_result vkattn_context_create(const vkattn_context_desc *desc,
                                               vkattn_context **out);
/* Waits for the context's own submissions, destroys what it created. */
VKATTN_API void vkattn_context_destroy(vkattn_context *ctx);

/* The last error message of this context ("" if none yet). Valid until the
 * next call into the context. */
VKATTN_API const char *vkattn_context_last_error(const vkattn_context *ctx);
/* Capabilities of the context's device. */
VKATTN_API const vkattn_device_info *vkattn_context_device_info(const vkattn_context *ctx);

typedef struct vkattn_vulkan_handles {
    VkInstance instance;
    VkPhysicalDevice physical_device;
    VkDevice device;
    VkQueue queue;
    uint32_t queue_family_index;
    PFN_vkGetInstanceProcAddr get_instance_proc_addr;
    PFN_vkGetDeviceProcAddr get_device_proc_addr;
} vkattn_vulkan_handles;

/* The Vulkan objects the context uses (its own or the borrowed ones). Useful
 * for recording vkattn_cmd_* into command buffers of your own. */
VKATTN_API void vkattn_context_vulkan_handles(const vkattn_context *ctx,
                                              vkattn_vulkan_handles *out);

/* Validation-layer messages seen since the context was created (both stay 0
 * without VKATTN_CONTEXT_VALIDATION). */
VKATTN_API void vkattn_context_validation_counts(const vkattn_context *ctx, uint32_t *errors,
                                                 uint32_t *warnings);

/* The pipeline cache as bytes: call with data NULL to get the size, then
 * again with a buffer of that size. */
VKATTN_API vkattn_result vkattn_context_pipeline_cache_data(vkattn_context *ctx, void *data,
                                                            size_t *size);
/* Writes the pipeline cache to `path` (atomically: a temporary file renamed). */
VKATTN_API vkattn_result vkattn_context_save_pipeline_cache(vkattn_context *ctx,
                                                            const char *path);
/* How tuning data (a file or bytes) begins: this, the format version, a
 * newline; tools can tell a tuning file from other files by it. */
#define VKATTN_TUNING_MAGIC "vkattn-tuning "
/* The tuning data as bytes (text), like vkattn_context_pipeline_cache_data,
 * and written to a file (atomically). Ship it beside the pipeline cache. */
VKATTN_API vkattn_result vkattn_context_tuning_data(vkattn_context *ctx, void *data, size_t *size);
VKATTN_API vkattn_result vkattn_context_save_tuning(vkattn_context *ctx, const char *path);
/* Number of pipelines created so far (each kernel variant x constants once). */
VKATTN_API uint32_t vkattn_context_pipeline_count(const vkattn_context *ctx);

/* Convenience command buffer of the context for standalone use: begin returns
 * a command buffer in the recording state; submit ends it, submits it to the
 * context's queue and waits for completion. Not for borrowed contexts that
 * record into their own command buffers (but allowed there too). */
VKATTN_API vkattn_result vkattn_commands_begin(vkattn_context *ctx, VkCommandBuffer *cmd);
VKATTN_API vkattn_result vkattn_commands_submit(vkattn_context *ctx);
/* Ends the recording without submitting (after an error while recording). */
VKATTN_API void vkattn_commands_discard(vkattn_context *ctx);

/* ---------------------------------------------------------------- buffers */

typedef struct vkattn_buffer vkattn_buffer;

typedef struct vkattn_buffer_desc {
    uint64_t size; /* bytes, > 0 */
    /* Extra VkBufferUsageFlags on top of storage, uniform texel and transfer
     * src/dst (always set); 0: none. */
    VkBufferUsageFlags extra_usage;
} vkattn_buffer_desc;

/* A device-local buffer. Its size may exceed the device's storage-buffer
 * binding range (ops bind windows of it), but not maxMemoryAllocationSize. */
VKATTN_API vkattn_result vkattn_buffer_create(vkattn_context *ctx, const vkattn_buffer_desc *desc,
                                              vkattn_buffer **out);
/* The caller must make sure no submitted work still uses the buffer. */
VKATTN_API void vkattn_buffer_destroy(vkattn_buffer *buffer);
VKATTN_API uint64_t vkattn_buffer_size(const vkattn_buffer *buffer);
VKATTN_API VkBuffer vkattn_buffer_vk(const vkattn_buffer *buffer);

/* A vkattn_buffer over the host's own VkBuffer, without a copy: tensors on it
 * are read and written in place. The VkBuffer (and its memory) stays the
 * host's: vkattn_buffer_destroy only forgets it, and it must outlive the
 * vkattn_buffer. Its usage must include STORAGE_BUFFER; with
 * UNIFORM_TEXEL_BUFFER kernels may read it through texel views (faster on
 * CPU drivers), without they use storage reads. Upload/download work through
 * `mapped` (host-coherent memory) or else need TRANSFER_SRC and _DST usage. */
typedef struct vkattn_buffer_wrap_desc {
    VkBuffer buffer;
    uint64_t size;            /* bytes from offset 0 vkattn may use: a multiple of 4 */
    VkBufferUsageFlags usage; /* the usage the buffer was created with */
    void *mapped;             /* optional: host pointer to its coherent memory */
} vkattn_buffer_wrap_desc;

VKATTN_API vkattn_result vkattn_buffer_wrap(vkattn_context *ctx, const vkattn_buffer_wrap_desc *desc,
                                            vkattn_buffer **out);

/* Copy host bytes into [offset, offset + size) of the buffer, and back.
 * Synchronous: when they return the copy is complete. Any offset and size
 * are allowed. The caller must make sure no submitted GPU work is using the
 * range at the same time. */
VKATTN_API vkattn_result vkattn_buffer_upload(vkattn_buffer *buffer, uint64_t offset,
                                              const void *data, uint64_t size);
VKATTN_API vkattn_result vkattn_buffer_download(vkattn_buffer *buffer, uint64_t offset,
                                                void *data, uint64_t size);

/* ---------------------------------------------------------------- tensors */

typedef enum vkattn_dtype {
    VKATTN_DTYPE_F32 = 0,
    VKATTN_DTYPE_F16 = 1, /* IEEE binary16 */
    VKATTN_DTYPE_U8 = 2,  /* masks (key padding): 0 or 1 */
} vkattn_dtype;

#define VKATTN_MAX_RANK 4

/* A tensor is a view of a buffer: no memory of its own, a plain value.
 * Element (i0, .., i{rank-1}) lives at byte
 *     offset + (i0*strides[0] + .. + i{rank-1}*strides[rank-1]) * dtype_size.
 * Strides are in elements and non-negative; 0 strides everywhere mean
 * "contiguous, row-major" (resolved by the op). A stride of 0 in one
 * dimension with others set broadcasts that dimension. `offset` must be a
 * multiple of the element size. */
typedef struct vkattn_tensor {
    vkattn_buffer *buffer;
    uint64_t offset;
    vkattn_dtype dtype;
    uint32_t rank;
    int64_t shape[VKATTN_MAX_RANK];
    int64_t strides[VKATTN_MAX_RANK];
} vkattn_tensor;

/* A contiguous row-major tensor over `buffer` at `offset`. */
VKATTN_API vkattn_tensor vkattn_tensor_make(vkattn_buffer *buffer, uint64_t offset,
                                            vkattn_dtype dtype, uint32_t rank,
                                            const int64_t *shape);
/* Bytes per element of a dtype (0 for unknown values). */
VKATTN_API size_t vkattn_dtype_size(vkattn_dtype dtype);
/* "f32", "f16", "u8"; NULL for unknown values. */
VKATTN_API const char *vkattn_dtype_name(vkattn_dtype dtype);
/* Number of elements (product of the shape). */
VKATTN_API int64_t vkattn_tensor_numel(const vkattn_tensor *t);

/* IEEE binary16 <-> binary32 with round-to-nearest-even, on the host. */
VKATTN_API uint16_t vkattn_f32_to_f16(float value);
VKATTN_API float vkattn_f16_to_f32(uint16_t value);

/* ---------------------------------------------------------------- convert */

/* dst = scale * src, element-wise over contiguous tensors with the same number
 * of elements, converting between f32 and f16 (either direction, or the same
 * dtype). Rounds to nearest even when storing f16. scale 0 means 1. Tensors
 * larger than the device's binding range are processed in windows. */
typedef struct vkattn_convert_args {
    vkattn_tensor src;
    vkattn_tensor dst;
    float scale;
} vkattn_convert_args;

VKATTN_API vkattn_result vkattn_cmd_convert(vkattn_context *ctx, VkCommandBuffer cmd,
                                            const vkattn_convert_args *args);
/* Submit-and-wait form of vkattn_cmd_convert. */
VKATTN_API vkattn_result vkattn_convert(vkattn_context *ctx, const vkattn_convert_args *args);

/* ------------------------------------------------------ attention semantics
 *
 * Shapes: B batch, Hq query heads, Hkv key/value heads, Tq queries, Tk keys,
 * D head dimension.
 *     q   [B, Hq,  Tq, D]
 *     k   [B, Hkv, Tk, D]
 *     v   [B, Hkv, Tk, D]
 *     out [B, Hq,  Tq, D]
 * Strides are free, so [B, T, H, D] storage is passed as shape [B, H, T, D]
 * with strides {T*H*D, D, H*D, 1} - no copies either way.
 * GQA: Hq % Hkv == 0 and query head h reads key/value head h / (Hq / Hkv):
 * Hkv == Hq is MHA, Hkv == 1 is MQA. K and V are never repeated.
 * D is a multiple of 8 from 8 to 256.
 *
 * score(i, j) = scale * dot(q_i, k_j) + mask(i, j); scale 0 means 1/sqrt(D).
 * out_i = sum_j softmax_j(score(i, .)) v_j over the visible keys j.
 * Masks, all optional and combinable:
 *   causal       key j is visible to query i iff j <= i + (Tk - Tq)
 *                (bottom-right aligned, as a KV cache needs);
 *   mask         additive float mask, rank 2 [Tq, Tk] (same for every batch and
 *                head) or rank 4 [B or 1, Hq or 1, Tq, Tk]; -inf hides a key;
 *   key_padding  [B, Tk] u8: 1 = real token, 0 = padding (hidden).
 * A query row with no visible key (everything hidden or -inf) gives zeros in
 * out and in the weights, never NaN.
 * Attention weights (optional, f32): the softmax probabilities, rank 3
 * [B, Tq, Tk] averaged over the Hq heads, or rank 4 [B, Hq, Tq, Tk] per head.
 *
 * ------------------------------------------------------------- MHA layer
 *
 * Input X [B, Tq, Dm]; keys/values come from C [B, Tk, Dkv] (C = X for
 * self-attention, then Tk = Tq). Weights use the torch.nn.Linear layout
 * [out_features, in_features], y = x W^T + b, so PyTorch weights load as is:
 *     Wq [Hq*Dh, Dm]   Wk, Wv [Hkv*Dh, Dkv]   Wo [Dm, Hq*Dh]
 *     Q = X Wq^T + bq, K = C Wk^T + bk, V = C Wv^T + bv (split into heads:
 *     feature h*Dh + d of a row is head h, dimension d),
 *     O = attention(Q, K, V) merged back to [B, Tq, Hq*Dh],
 *     Y = O Wo^T + bo.
 * A packed Wqkv [(Hq + 2*Hkv)*Dh, Dm] holds the rows of Wq, then Wk, then Wv
 * (torch's in_proj_weight); it needs Dkv == Dm.
 */

typedef struct vkattn_mha_desc {
    uint32_t embed_dim;    /* Dm, required */
    uint32_t num_heads;    /* Hq, required */
    uint32_t num_kv_heads; /* Hkv; 0: num_heads. Must divide num_heads. */
    uint32_t head_dim;     /* Dh; 0: embed_dim / num_heads, which must divide exactly */
    uint32_t kv_dim;       /* Dkv, the width of C; 0: embed_dim */
    bool bias;             /* the four projections have biases */
    vkattn_dtype dtype;    /* device storage of weights and activations: f32 (default) or f16 */
} vkattn_mha_desc;

/* Weights on the host, f32, torch.nn.Linear layout (see above). Give either
 * wq, wk and wv, or wqkv; wo always. Biases (when desc.bias): bq, bk, bv or
 * bqkv, and bo; NULL biases are zeros. */
typedef struct vkattn_mha_weights {
    const float *wq, *wk, *wv; /* [Hq*Dh, Dm], [Hkv*Dh, Dkv], [Hkv*Dh, Dkv] */
    const float *wqkv;         /* [(Hq + 2*Hkv)*Dh, Dm] */
    const float *wo;           /* [Dm, Hq*Dh] */
    const float *bq, *bk, *bv; /* [Hq*Dh], [Hkv*Dh], [Hkv*Dh] */
    const float *bqkv;         /* [(Hq + 2*Hkv)*Dh] */
    const float *bo;           /* [Dm] */
} vkattn_mha_weights;

/* ------------------------------------------------------------------ linear */

/* y = x W^T + b (torch.nn.Linear). x [M, K] or [B, T, K]; w [N, K];
 * b [N] (optional: buffer NULL); y [M, N] or [B, T, N] (x's leading shape).
 * dtypes: x and y f32 or f16 (the same); w and b f32 or f16 (the same);
 * accumulation is fp32. The last dimension of every tensor must be contiguous
 * (stride 1); other strides are free. Offsets: multiples of 16 bytes. */
typedef struct vkattn_linear_args {
    vkattn_tensor x, w, b, y;
} vkattn_linear_args;

VKATTN_API vkattn_result vkattn_cmd_linear(vkattn_context *ctx, VkCommandBuffer cmd,
                                           const vkattn_linear_args *args);
/* Submit-and-wait form. */
VKATTN_API vkattn_result vkattn_linear(vkattn_context *ctx, const vkattn_linear_args *args);

/* --------------------------------------------------------------- attention */

/* Attention on tensors: see "attention semantics" above for shapes, GQA and
 * masks. Tiled (FlashAttention-2): the Tq x Tk score matrix is never stored.
 * q and out share a dtype, k and v share a dtype (f32 or f16 each); mask f32
 * or f16; key_padding u8; weights f32. The last dimension of q, k, v and out
 * must be contiguous (stride 1), their other strides multiples of 4, their
 * offsets multiples of 16 bytes. out must not overlap the inputs. Attention
 * weights, when asked for, come from a separate, slower kernel; without them
 * the fast path runs alone. */
typedef struct vkattn_attention_args {
    vkattn_tensor q, k, v, out;
    vkattn_tensor mask;        /* optional (buffer NULL) */
    vkattn_tensor key_padding; /* optional (buffer NULL) */
    vkattn_tensor weights;     /* optional (buffer NULL) */
    bool causal;
    float scale; /* 0: 1/sqrt(D) */
} vkattn_attention_args;

VKATTN_API vkattn_result vkattn_cmd_attention(vkattn_context *ctx, VkCommandBuffer cmd,
                                              const vkattn_attention_args *args);
/* Submit-and-wait form. */
VKATTN_API vkattn_result vkattn_attention(vkattn_context *ctx, const vkattn_attention_args *args);

/* --------------------------------------------------------------- MHA layer */

/* One attention layer with its weights on the device (see "MHA layer"). The
 * forward pass is 3-4 dispatches: the Q/K/V projection (one packed GEMM for
 * self-attention, whose epilogue writes Q, K and V head-split), attention
 * (whose store merges the heads), and the output projection. */
typedef struct vkattn_mha vkattn_mha;

VKATTN_API vkattn_result vkattn_mha_create(vkattn_context *ctx, const vkattn_mha_desc *desc,
                                           vkattn_mha **out);
VKATTN_API void vkattn_mha_destroy(vkattn_mha *mha);
/* The resolved configuration (defaults filled in). */
VKATTN_API const vkattn_mha_desc *vkattn_mha_config(const vkattn_mha *mha);
/* Uploads the weights (host f32, converted to the layer's dtype).
 * Synchronous; must not run while a recorded forward of this layer is pending. */
VKATTN_API vkattn_result vkattn_mha_set_weights(vkattn_mha *mha, const vkattn_mha_weights *w);

/* x [B, Tq, Dm]; kv [B, Tk, Dkv] for cross-attention (buffer NULL: self-
 * attention, C = x); y [B, Tq, Dm]; all in the layer's dtype, last dimension
 * contiguous. Masks and weights as for vkattn_attention_args (the mask's
 * head dimension is Hq). */
typedef struct vkattn_mha_forward_args {
    vkattn_tensor x;
    vkattn_tensor kv;          /* optional */
    vkattn_tensor y;
    vkattn_tensor mask;        /* optional */
    vkattn_tensor key_padding; /* optional */
    vkattn_tensor weights;     /* optional, f32 */
    bool causal;
    /* Scratch for the intermediate Q, K, V and O (vkattn_mha_scratch_size
     * bytes from scratch_offset, a multiple of 256). NULL: the layer's own
     * scratch, which vkattn_mha_forward grows as needed but
     * vkattn_cmd_mha_forward never reallocates (reserve it first). */
    vkattn_buffer *scratch;
    uint64_t scratch_offset;
} vkattn_mha_forward_args;

/* Bytes of scratch a forward with these sizes needs. */
VKATTN_API vkattn_result vkattn_mha_scratch_size(vkattn_mha *mha, uint32_t batch, uint32_t q_len,
                                                 uint32_t kv_len, uint64_t *bytes);
/* Makes the layer's own scratch large enough for these sizes (synchronous). */
VKATTN_API vkattn_result vkattn_mha_reserve(vkattn_mha *mha, uint32_t batch, uint32_t q_len,
                                            uint32_t kv_len);
/* Records the forward pass. Without args->scratch the layer's own scratch
 * must already be large enough (VKATTN_ERROR_OUT_OF_RANGE otherwise), and two
 * recorded forwards of one layer without caller scratch must not execute at
 * the same time. */
VKATTN_API vkattn_result vkattn_cmd_mha_forward(vkattn_mha *mha, VkCommandBuffer cmd,
                                                const vkattn_mha_forward_args *args);
/* Submit-and-wait form. */
VKATTN_API vkattn_result vkattn_mha_forward(vkattn_mha *mha, const vkattn_mha_forward_args *args);

/* ---------------------------------------------------------------- KV cache
 *
 * The keys and values of one layer for up to `max_sequences` sequences, each
 * with its own length (ragged batches). One API, two layouts:
 *  - contiguous (block_size 0): K and V are each [max_sequences, Hkv,
 *    capacity, Dh], sequence s owning row s;
 *  - paged (block_size > 0): K and V are pools of num_blocks blocks of
 *    [Hkv, block_size, Dh]; every sequence has a block table, takes blocks
 *    from the pool as it grows and gives them back when truncated, so
 *    sequences of very different lengths share the memory.
 * Sequences are numbered 0 .. max_sequences-1; all start empty. The cache
 * also holds the scratch of split-KV decoding (partial results of up to
 * VKATTN_KV_MAX_SPLIT_ROWS splits x new tokens per query head and sequence),
 * which is why it knows the number of query heads.
 *
 * Appending happens when a step is recorded (vkattn_cmd_mha_step,
 * vkattn_cmd_kv_cache_append): the cache's lengths and block tables advance
 * on the host at that moment and the recorded commands carry the positions
 * they need. So steps on one cache must be executed in the order they were
 * recorded, on one queue, and a recorded step must be submitted (or the
 * sequence truncated back). A call that fails leaves the cache unchanged.
 * Threading: externally synchronized, like the context it belongs to. */
typedef struct vkattn_kv_cache vkattn_kv_cache;

/* Split-KV decoding: kv_splits x new tokens per step is at most this. */
#define VKATTN_KV_MAX_SPLIT_ROWS 64

typedef struct vkattn_kv_cache_desc {
    uint32_t num_kv_heads;  /* Hkv, required */
    uint32_t num_heads;     /* Hq of the queries that attend to it; 0: num_kv_heads */
    uint32_t head_dim;      /* Dh, required: a multiple of 8 from 8 to 256 */
    vkattn_dtype dtype;     /* f32 (default) or f16 */
    uint32_t max_sequences; /* required */
    uint32_t capacity;      /* the most tokens one sequence can hold, required */
    uint32_t block_size;    /* 0: contiguous; else tokens per block (paged) */
    uint32_t num_blocks;    /* paged pool; 0: enough for every sequence at capacity */
} vkattn_kv_cache_desc;

/* What a cache needs, before creating it: bytes of K and V per token of one
 * layer (2 * Hkv * Dh * dtype size) and the device memory it would allocate. */
VKATTN_API vkattn_result vkattn_kv_cache_memory(const vkattn_kv_cache_desc *desc,
                                                uint64_t *bytes_per_token, uint64_t *total_bytes,
                                                char *error, size_t error_size);
VKATTN_API vkattn_result vkattn_kv_cache_create(vkattn_context *ctx,
                                                const vkattn_kv_cache_desc *desc,
                                                vkattn_kv_cache **out);
VKATTN_API void vkattn_kv_cache_destroy(vkattn_kv_cache *cache);
/* The resolved configuration (num_blocks filled in). */
VKATTN_API const vkattn_kv_cache_desc *vkattn_kv_cache_config(const vkattn_kv_cache *cache);
/* Tokens held by a sequence. */
VKATTN_API vkattn_result vkattn_kv_cache_length(const vkattn_kv_cache *cache, uint32_t sequence,
                                                uint32_t *length);
/* Forgets the tokens of a sequence from `length` on (0: reset), giving
 * whole blocks back to the pool. The caller must make sure no pending GPU
 * work still reads them. */
VKATTN_API vkattn_result vkattn_kv_cache_truncate(vkattn_kv_cache *cache, uint32_t sequence,
                                                  uint32_t length);
/* Blocks left in the pool (paged), or 0 for a contiguous cache. */
VKATTN_API uint32_t vkattn_kv_cache_free_blocks(const vkattn_kv_cache *cache);

/* Appends T new keys and values per sequence, from tensors of your own:
 * k and v [B, Hkv, T, Dh] (B = batch), in the cache's dtype, last dimension
 * contiguous. (The MHA layer's steps append without this copy: their
 * projection writes into the cache directly.) */
typedef struct vkattn_kv_append_args {
    vkattn_kv_cache *cache;
    uint32_t batch;
    const uint32_t *sequences; /* [batch], distinct */
    vkattn_tensor k, v;
} vkattn_kv_append_args;

VKATTN_API vkattn_result vkattn_cmd_kv_cache_append(vkattn_context *ctx, VkCommandBuffer cmd,
                                                    const vkattn_kv_append_args *args);

/* Attention of T queries per sequence over everything the cache holds for
 * that sequence (L keys), causal and bottom-right aligned: query i sees key
 * j iff j <= i + L - T (with T = L every query sees the whole prefix before
 * it). q [B, Hq, T, Dh] and out [B, Hq, T, Dh] (strides free, last one 1;
 * out may be given merged as [B, T, Hq*Dh] through its strides), Hq a
 * multiple of the cache's Hkv; q/out f32 or f16. Sequences must not be empty.
 * Few queries (T <= 16) take the split-KV decoding path: the key range is
 * split across workgroups and the partial results are combined in a second
 * pass; kv_splits 0 chooses the count from the device and the lengths, a
 * fixed count makes results bit-identical from run to run. */
typedef struct vkattn_kv_attention_args {
    vkattn_kv_cache *cache;
    uint32_t batch;
    const uint32_t *sequences; /* [batch] */
    vkattn_tensor q, out;
    float scale;        /* 0: 1/sqrt(Dh) */
    uint32_t kv_splits; /* 0: automatic */
} vkattn_kv_attention_args;

VKATTN_API vkattn_result vkattn_cmd_kv_attention(vkattn_context *ctx, VkCommandBuffer cmd,
                                                 const vkattn_kv_attention_args *args);
VKATTN_API vkattn_result vkattn_kv_attention(vkattn_context *ctx,
                                             const vkattn_kv_attention_args *args);

/* One step of an MHA layer over a KV cache, for `batch` sequences at their
 * own positions: the T new tokens x[b] of sequence sequences[b] are
 * projected, their K and V appended to the cache (by the projection itself),
 * their queries attend causally to the sequence's whole cache (see
 * vkattn_kv_attention_args) and y[b] gets the layer's output. A prefill is a
 * step with T = the prompt length (sequences of different prompt lengths:
 * one step each); decoding is steps with T = 1. Prefill then decode steps
 * give the same y as one causal forward over the whole sequence. */
typedef struct vkattn_mha_step_args {
    vkattn_kv_cache *cache; /* Hkv, Dh and dtype must match the layer */
    uint32_t batch;
    const uint32_t *sequences; /* [batch], distinct */
    vkattn_tensor x;           /* [batch, T, Dm] */
    vkattn_tensor y;           /* [batch, T, Dm] */
    /* As in vkattn_kv_attention_args; a step whose T x kv_splits exceeds
     * VKATTN_KV_MAX_SPLIT_ROWS uses VKATTN_KV_MAX_SPLIT_ROWS / T splits. */
    uint32_t kv_splits;
    /* As in vkattn_mha_forward_args (vkattn_mha_step_scratch_size). */
    vkattn_buffer *scratch;
    uint64_t scratch_offset;
} vkattn_mha_step_args;

VKATTN_API vkattn_result vkattn_mha_step_scratch_size(vkattn_mha *mha, uint32_t batch,
                                                      uint32_t new_tokens, uint64_t *bytes);
VKATTN_API vkattn_result vkattn_cmd_mha_step(vkattn_mha *mha, VkCommandBuffer cmd,
                                             const vkattn_mha_step_args *args);
/* Submit-and-wait form (grows the layer's own scratch as needed). */
VKATTN_API vkattn_result vkattn_mha_step(vkattn_mha *mha, const vkattn_mha_step_args *args);

/* ------------------------------------------------------------ frame budget
 *
 * An engine that must not stall a frame can cut a long pass into pieces and
 * record one per frame:
 *  - attention: vkattn_attention_chunk gives the call that computes only
 *    query rows [q_begin, q_end) - views of q, out and the masks and, for a
 *    causal call, K and V cut after the last key those rows see, so the
 *    bottom-right rule of the whole call holds in each piece. The pieces of
 *    a call write exactly what the whole call writes, in any order.
 *  - an MHA prefill: steps over a KV cache (vkattn_cmd_mha_step) with a few
 *    hundred tokens each - a chunked prefill - give the same output as one.
 * The *_flops functions give each piece's work (visible pairs only) to size
 * the pieces by a budget. A decode step's cost grows with the cache (its
 * split-KV workgroups share it) and is one recording. */
VKATTN_API vkattn_result vkattn_attention_chunk(const vkattn_attention_args *args, uint32_t q_begin,
                                                uint32_t q_end, vkattn_attention_args *chunk,
                                                char *error, size_t error_size);
VKATTN_API double vkattn_attention_flops(const vkattn_attention_args *args, uint32_t q_begin,
                                         uint32_t q_end);
/* A step of `batch` sequences, `new_tokens` each, ending at `length` tokens. */
VKATTN_API double vkattn_mha_step_flops(const vkattn_mha *mha, uint32_t batch,
                                        uint32_t new_tokens, uint32_t length);

/* ------------------------------------------------------------------ tuning
 *
 * Every op picks its kernel configuration (kernel family, input binding,
 * tile shape, split count) from the device's limits. The tuner confirms or
 * overrides that choice by measurement: it times the op's candidate
 * configurations for one shape class on this device and stores the fastest
 * in the context's tuning data, which later calls of that class use. Save
 * the data (vkattn_context_save_tuning) and load it next time
 * (desc.tuning_path) to tune once per device. Synchronous; seconds on CPU
 * drivers, where every candidate compiles a pipeline. Shape classes bucket
 * the sizes (linear rows by powers of two: 1, 2, 3..4, 5..8, ...; columns
 * and K by <= 256, 1024, 4096, 16384; attention lengths by <= 1, 16, 64,
 * 256, 1024; KV-cache decoding: cache length by <= 256, 1024, 4096, 16384,
 * new tokens by 1, 2, <= 4, <= 8, <= 16), so one tuning serves nearby
 * shapes. */
/* Every tuner is vkattn_<op>_tune(<what the op's call takes>, args) with an
 * args struct of the shapes to tune for (zero dtypes are f32); none of them
 * needs buffers of yours. */

/* y [m, n] = x [m, k] W^T: x and y in x_dtype, W in w_dtype. */
typedef struct vkattn_linear_tune_args {
    uint32_t m, n, k;
    vkattn_dtype x_dtype, w_dtype;
} vkattn_linear_tune_args;
VKATTN_API vkattn_result vkattn_linear_tune(vkattn_context *ctx,
                                            const vkattn_linear_tune_args *args);

/* q [batch, num_heads, q_len, head_dim] over k, v [batch, num_kv_heads,
 * kv_len, head_dim], causal or not; q and out in q_dtype, k and v in
 * kv_dtype. */
typedef struct vkattn_attention_tune_args {
    uint32_t batch, num_heads, num_kv_heads, q_len, kv_len, head_dim;
    bool causal;
    vkattn_dtype q_dtype, kv_dtype;
} vkattn_attention_tune_args;
VKATTN_API vkattn_result vkattn_attention_tune(vkattn_context *ctx,
                                               const vkattn_attention_tune_args *args);

/* Decode steps over a cache like `cache` (its heads, head dim, dtype and
 * layout): `batch` sequences of `length` tokens, `new_tokens` queries each
 * (1..16, the split-KV path; length >= new_tokens). Times the power-of-two
 * split counts the step can take (at most 8 of them), with q and out in the
 * cache's dtype, and stores the fastest, which kv_splits 0 then uses for
 * that shape class and q dtype (steps whose q dtype differs from the cache's
 * keep the built-in choice). Uses a scratch cache of its own; `cache` is not
 * changed. */
typedef struct vkattn_kv_attention_tune_args {
    vkattn_kv_cache *cache;
    uint32_t batch, new_tokens, length;
} vkattn_kv_attention_tune_args;
VKATTN_API vkattn_result vkattn_kv_attention_tune(vkattn_context *ctx,
                                                  const vkattn_kv_attention_tune_args *args);

/* Everything a layer's forward pass with these sizes runs (its GEMMs and
 * attention, causal and not). q_len == kv_len is taken as self-attention
 * (the packed QKV projection of a layer with kv_dim == embed_dim); tune a
 * cross-attention of equal lengths with vkattn_linear_tune for its Q and KV
 * projections. batch x q_len and batch x kv_len must fit 32 bits. */
typedef struct vkattn_mha_tune_args {
    uint32_t batch, q_len, kv_len;
} vkattn_mha_tune_args;
VKATTN_API vkattn_result vkattn_mha_tune(vkattn_mha *mha, const vkattn_mha_tune_args *args);

/* Everything a step of the layer over `cache` (vkattn_cmd_mha_step) with
 * these sizes runs: `batch` sequences, `new_tokens` each, ending at `length`
 * tokens - the packed QKV projection (appending to a cache takes the plain
 * GEMM's winner), the attention over the cache (its split count, as
 * vkattn_kv_attention_tune, for steps of 1..16 new tokens: longer steps
 * have no tuned choice) and the output projection. Tune decoding with
 * new_tokens 1 and a typical length (cache lengths bucket as for
 * vkattn_kv_attention_tune), a chunked prefill with its chunk size. `cache`
 * must suit the layer as for a step; it is not changed. batch x new_tokens
 * must fit 32 bits. */
typedef struct vkattn_mha_step_tune_args {
    vkattn_kv_cache *cache;
    uint32_t batch, new_tokens, length;
} vkattn_mha_step_tune_args;
VKATTN_API vkattn_result vkattn_mha_step_tune(vkattn_mha *mha,
                                              const vkattn_mha_step_tune_args *args);

/* ------------------------------------------------------------ CPU reference
 *
 * Plain C implementations of every op with double accumulation and exactly
 * the semantics above. They are what the tests and `vkattn ... --check`
 * compare the GPU against, and are public so users can validate a device.
 * Single-threaded, no Vulkan. Errors: the result code, and the message in
 * `error` (may be NULL) of `error_size` bytes. Outputs are written only on
 * success.
 */

/* A tensor in host memory: like vkattn_tensor, with a pointer instead of a
 * buffer (strides in elements; all 0 means contiguous row-major). Float data
 * may be f32 or f16 (uint16_t bits); masks u8. Inputs are only read. */
typedef struct vkattn_host_tensor {
    void *data;
    vkattn_dtype dtype;
    uint32_t rank;
    int64_t shape[VKATTN_MAX_RANK];
    int64_t strides[VKATTN_MAX_RANK];
} vkattn_host_tensor;

/* A contiguous row-major host tensor. */
VKATTN_API vkattn_host_tensor vkattn_host_tensor_make(void *data, vkattn_dtype dtype,
                                                      uint32_t rank, const int64_t *shape);

/* Attention: see "attention semantics". Optional tensors have data NULL. */
typedef struct vkattn_ref_attention_args {
    vkattn_host_tensor q, k, v, out;
    vkattn_host_tensor mask;        /* optional */
    vkattn_host_tensor key_padding; /* optional */
    vkattn_host_tensor weights;     /* optional, f32 */
    bool causal;
    float scale; /* 0: 1/sqrt(D) */
} vkattn_ref_attention_args;

VKATTN_API vkattn_result vkattn_ref_attention(const vkattn_ref_attention_args *args,
                                              char *error, size_t error_size);

/* y = x W^T + b: x [M, K] or [B, T, K]; w [N, K]; b [N] (optional);
 * y [M, N] or [B, T, N]. */
typedef struct vkattn_ref_linear_args {
    vkattn_host_tensor x, w, b, y;
} vkattn_ref_linear_args;

VKATTN_API vkattn_result vkattn_ref_linear(const vkattn_ref_linear_args *args, char *error,
                                           size_t error_size);

/* A whole MHA layer: see "MHA layer". x [B, Tq, Dm]; kv [B, Tk, Dkv]
 * (optional: data NULL means self-attention); y [B, Tq, Dm]; masks and
 * weights as for attention. All f32. */
typedef struct vkattn_ref_mha_args {
    vkattn_host_tensor x, kv, y;
    vkattn_host_tensor mask;        /* optional */
    vkattn_host_tensor key_padding; /* optional */
    vkattn_host_tensor weights;     /* optional */
    bool causal;
} vkattn_ref_mha_args;

VKATTN_API vkattn_result vkattn_ref_mha(const vkattn_mha_desc *desc,
                                        const vkattn_mha_weights *weights,
                                        const vkattn_ref_mha_args *args, char *error,
                                        size_t error_size);

/* ----------------------------------------------------------------- timers */

/* GPU timestamps around recorded work. A timer holds `intervals` independent
 * intervals. Requires vkattn_device_info.timestamps. */
typedef struct vkattn_timer vkattn_timer;

VKATTN_API vkattn_result vkattn_timer_create(vkattn_context *ctx, uint32_t intervals,
                                             vkattn_timer **out);
VKATTN_API void vkattn_timer_destroy(vkattn_timer *timer);
/* Records a reset of interval `i` and its start timestamp. */
VKATTN_API vkattn_result vkattn_cmd_timer_begin(vkattn_timer *timer, VkCommandBuffer cmd,
                                                uint32_t i);
/* Records the end timestamp of interval `i` (after all earlier commands). */
VKATTN_API vkattn_result vkattn_cmd_timer_end(vkattn_timer *timer, VkCommandBuffer cmd,
                                              uint32_t i);
/* Milliseconds between begin and end of interval `i`; the command buffer must
 * have completed. */
VKATTN_API vkattn_result vkattn_timer_read_ms(vkattn_timer *timer, uint32_t i, double *ms);

#ifdef __cplusplus
}
#endif

#endif /* VKATTN_H */
