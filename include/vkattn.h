/*
 * vkattn.h - multi-head attention as Vulkan compute shaders.
 *
 * This header is the reference manual. It needs only <vulkan/vulkan_core.h>.
 * It is in parts, included below in order: this file (conventions, the
 * runtime: results, devices, the context, buffers, tensors, timers), then
 * vkattn/ops.h (convert, linear, attention, the MHA layer), vkattn/kv_cache.h
 * (the KV cache, attention over it, the layer's steps, frame budgets),
 * vkattn/tuning.h and vkattn/reference.h (the CPU reference). Include this
 * file only. Longer guides: docs/ (architecture, threading, tuning).
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
 * Threading (docs/threading.md has the whole story)
 * ---------------------------------------------------------------------------
 * No global state: contexts never interfere. Recording (vkattn_cmd_*) may
 * happen from several threads at once on one context, into different
 * command buffers; what recording creates on first use is guarded inside the
 * context, and what it reads (buffers, tensors, weights) must not change
 * meanwhile. Externally synchronized, one thread at a time: the context's
 * own command buffer and every submit-and-wait function (they submit to the
 * context's queue - for a borrowed context, the host's), each KV cache, a
 * layer's own scratch, and creating or destroying a context's objects. The
 * CPU reference (vkattn_ref_*) is reentrant.
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
#define VKATTN_RESULT_LIST(X)                                                       \
    X(SUCCESS, 0, "success")                                                        \
    X(ERROR_INVALID_ARGUMENT, -1, "an argument is invalid")                         \
    X(ERROR_OUT_OF_HOST_MEMORY, -2, "out of host memory")                           \
    X(ERROR_OUT_OF_DEVICE_MEMORY, -3, "out of device memory")                       \
    X(ERROR_NO_DEVICE, -4, "no Vulkan device is available")                         \
    X(ERROR_DEVICE_NOT_FOUND, -5, "no Vulkan device matches the requested one")     \
    X(ERROR_UNSUPPORTED, -6, "the device lacks a required capability")              \
    X(ERROR_LAYER_NOT_PRESENT, -7, "the Khronos validation layer is not installed") \
    X(ERROR_VULKAN, -8, "a Vulkan call failed")                                     \
    X(ERROR_DEVICE_LOST, -9, "the Vulkan device was lost")                          \
    X(ERROR_OUT_OF_RANGE, -10, "an offset or size lies outside its buffer")         \
    X(ERROR_SHAPE_MISMATCH, -11, "tensor shapes do not agree")                      \
    X(ERROR_UNSUPPORTED_DTYPE, -12, "the data type is not supported here")          \
    X(ERROR_IO, -13, "a file could not be read or written")                         \
    X(ERROR_BAD_FORMAT, -14, "a file's contents are malformed")                     \
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
/* One cooperative-matrix shape: C (M x N) += A (M x K) * B (K x N). */
typedef struct vkattn_coopmat_shape {
    uint32_t m, n, k;
} vkattn_coopmat_shape;
#define VKATTN_MAX_COOPMAT_SHAPES 8

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
    bool subgroup_shuffle;      /* VK_SUBGROUP_FEATURE_SHUFFLE_BIT in compute */
    bool subgroup_arithmetic;   /* VK_SUBGROUP_FEATURE_ARITHMETIC_BIT in compute */
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
     * shuffles). Both paths compute the same results. A context's copy
     * (vkattn_context_device_info) says what its self-test and flags left
     * on, storage_16bit and f16_path included (vkattn/selftest.h). */
    bool texel_inputs;
    bool subgroup_kernels;
    /* false when vkattn cannot run on the device; `unsupported_reason` says why. */
    bool supported;
    char unsupported_reason[128];
    /* The driver: VkDriverId and VkPhysicalDeviceProperties.driverVersion
     * (its own encoding; Mesa's is VK_MAKE_VERSION). */
    uint32_t driver_id;
    uint32_t driver_version;
    /* Cooperative matrices (VK_KHR_cooperative_matrix): the f16 x f16 -> f32
     * shapes of subgroup scope the device offers, and the one the coopmat
     * kernel family is specialized for (16x16x16 where offered, else the
     * largest; zeros when the family cannot run here). The family needs the
     * extension and its feature, vulkanMemoryModel, maintenance4,
     * shaderFloat16, 16-bit storage, Vulkan 1.3, and a vkattn built with those kernels
     * (VKATTN_HAVE_COOPMAT at build time); `coopmat_why` says which is
     * missing ("" when none). `coopmat_kernels`: the family runs the ops it
     * implements (GEMMs, attention, and KV-cache attention whose rows per KV
     * head fill a matrix; docs/kernels.md) - the default
     * on GPUs that offer it, never on CPU drivers (their emulation is slower
     * than their scalar kernels) unless VKATTN_CONTEXT_COOPMAT_KERNELS. */
    uint32_t coopmat_shape_count;
    vkattn_coopmat_shape coopmat_shapes[VKATTN_MAX_COOPMAT_SHAPES];
    vkattn_coopmat_shape coopmat_shape;
    bool coopmat_kernels;
    char coopmat_why[128];
} vkattn_device_info;

/* Lists the Vulkan devices of the system's loader. `infos` may be NULL to
 * count only; otherwise up to `capacity` entries are written. `*count` gets the
 * number of devices, `*chosen` (may be NULL) the index the automatic choice
 * would take with `device` (same syntax as vkattn_context_desc.device; NULL
 * for automatic), or UINT32_MAX when none would. With no Vulkan driver at all
 * returns VKATTN_ERROR_NO_DEVICE. `log` (may be NULL) receives error detail. */
VKATTN_API vkattn_result vkattn_list_devices(const char *device, vkattn_device_info *infos,
                                             uint32_t capacity, uint32_t *count, uint32_t *chosen,
                                             vkattn_log_fn log, void *log_user);

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
     * `vkattn info`) and checked by the start-up self-test
     * (vkattn/selftest.h); these two take choices away - for tests of the
     * other paths (the suite runs all four combinations), or to work around
     * a driver problem. Results match within the stated tolerances. */
    /* Never read inputs through uniform texel buffers (storage buffers only). */
    VKATTN_CONTEXT_NO_TEXEL_BUFFERS = 1u << 2,
    /* Never use the subgroup-shuffle kernels (shared-memory tiles instead). */
    VKATTN_CONTEXT_NO_SUBGROUP_KERNELS = 1u << 3,
    /* Standalone contexts: use a compute-only queue family (async compute,
     * beside a graphics queue) when the device has one; else any compute
     * family. Borrowed contexts use the queue the host names. */
    VKATTN_CONTEXT_ASYNC_COMPUTE = 1u << 4,
    /* Skip the start-up self-test (vkattn/selftest.h): the kernel choice
     * stands as the device's properties say (quirks still apply). */
    VKATTN_CONTEXT_NO_SELF_TEST = 1u << 5,
    /* Ignore the driver-quirk table (vkattn/selftest.h): nothing is
     * switched off for a known driver bug (and it may crash). */
    VKATTN_CONTEXT_NO_QUIRKS = 1u << 6,
    /* Use the subgroup-shuffle kernels wherever the device offers them
     * (shuffles, subgroup arithmetic, and a subgroup size that can be pinned
     * or cannot vary), GPUs included, whose default is the shared-memory
     * tiles. Creation fails with VKATTN_ERROR_UNSUPPORTED, naming the failed
     * check or quirk, when they do not work; likewise
     * VKATTN_CONTEXT_NO_SUBGROUP_KERNELS when the shared-memory family does
     * not. Not with VKATTN_CONTEXT_NO_SUBGROUP_KERNELS. */
    VKATTN_CONTEXT_SUBGROUP_KERNELS = 1u << 7,
    /* Test-only: the self-test's subgroup.add_one and texel.rgba32f checks
     * fail whatever the device computed, so that the fallbacks (the
     * shared-memory family, storage-buffer inputs) run on every machine. */
    VKATTN_CONTEXT_TEST_FAIL_CHECKS = 1u << 8,
    /* With VKATTN_CONTEXT_VALIDATION, standalone contexts: the layer's
     * GPU-assisted validation too, which instruments the shaders and
     * reports out-of-bounds storage-buffer and texel-buffer accesses (as
     * validation messages). Several times slower; for test runs. */
    VKATTN_CONTEXT_VALIDATION_GPU_ASSISTED = 1u << 9,
    /* Use the cooperative-matrix kernels (vkattn_device_info.coopmat_*) for
     * every op they implement, on any device that offers them (CPU drivers
     * included, where they are slow: for tests); the other ops keep their
     * usual family. Creation fails with VKATTN_ERROR_UNSUPPORTED, naming
     * what is missing or the failed check, where they cannot run. */
    VKATTN_CONTEXT_COOPMAT_KERNELS = 1u << 10,
    /* Never use the cooperative-matrix kernels. Not with
     * VKATTN_CONTEXT_COOPMAT_KERNELS. */
    VKATTN_CONTEXT_NO_COOPMAT_KERNELS = 1u << 11,
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
    /* Standalone contexts: the Vulkan loader's entry point every Vulkan
     * function is loaded through. NULL: the vkGetInstanceProcAddr vkattn
     * links. For hosts that load Vulkan themselves (volk, dlopen) or wrap it.
     * Borrowed contexts take vkattn_vulkan_borrow.get_instance_proc_addr. */
    PFN_vkGetInstanceProcAddr get_instance_proc_addr;
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
VKATTN_API vkattn_result vkattn_context_save_pipeline_cache(vkattn_context *ctx, const char *path);
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

VKATTN_API vkattn_result vkattn_buffer_wrap(vkattn_context *ctx,
                                            const vkattn_buffer_wrap_desc *desc,
                                            vkattn_buffer **out);

/* Copy host bytes into [offset, offset + size) of the buffer, and back.
 * Synchronous: when they return the copy is complete. Any offset and size
 * are allowed. The caller must make sure no submitted GPU work is using the
 * range at the same time. */
VKATTN_API vkattn_result vkattn_buffer_upload(vkattn_buffer *buffer, uint64_t offset,
                                              const void *data, uint64_t size);
VKATTN_API vkattn_result vkattn_buffer_download(vkattn_buffer *buffer, uint64_t offset, void *data,
                                                uint64_t size);

/* ---------------------------------------------------------------- tensors */

typedef enum vkattn_dtype {
    VKATTN_DTYPE_F32 = 0,
    VKATTN_DTYPE_F16 = 1,  /* IEEE binary16 */
    VKATTN_DTYPE_U8 = 2,   /* masks (key padding, boolean masks): 0 or nonzero */
    VKATTN_DTYPE_I32 = 3,  /* positions (rotary embeddings) */
    VKATTN_DTYPE_BF16 = 4, /* bfloat16: the top half of an f32 (see vkattn_f32_to_bf16) */
    /* Quantized (KV caches: vkattn_kv_cache_desc.dtype; attention's k and
     * v; linear's w: q8_0), ggml's formats:
     * blocks of 32 consecutive values along the last dimension (a multiple
     * of 32), packed back to back without padding. They have no element
     * size (vkattn_dtype_size gives 0): see vkattn_dtype_row_bytes. */
    /* block_q8_0, 34 bytes: uint16 d (IEEE half, little endian), int8
     * qs[32]; value i = d * qs[i] */
    VKATTN_DTYPE_Q8_0 = 5,
    /* block_q4_0, 18 bytes: uint16 d, uint8 qs[16]; value i (i < 16) =
     * d * ((qs[i] & 0xF) - 8), value i + 16 = d * ((qs[i] >> 4) - 8) */
    VKATTN_DTYPE_Q4_0 = 6,
    /* block_q4_1, 20 bytes: uint16 d, uint16 m (halves), uint8 qs[16];
     * value i = d * (qs[i] & 0xF) + m, value i + 16 = d * (qs[i] >> 4) + m */
    VKATTN_DTYPE_Q4_1 = 7,
    /* block_q5_0, 22 bytes: uint16 d, uint32 qh (little endian), uint8
     * qs[16]; q[i] = (qs[i] & 0xF) | bit i of qh << 4, q[i + 16] =
     * (qs[i] >> 4) | bit i + 16 of qh << 4; value = d * (q - 16) */
    VKATTN_DTYPE_Q5_0 = 8,
    /* block_q5_1, 24 bytes: uint16 d, uint16 m, uint32 qh, uint8 qs[16];
     * q as q5_0's; value = d * q + m */
    VKATTN_DTYPE_Q5_1 = 9,
    /* block_iq4_nl, 18 bytes: uint16 d, uint8 qs[16]; value i = d *
     * T[qs[i] & 0xF], value i + 16 = d * T[qs[i] >> 4], T = {-127, -104,
     * -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113} */
    VKATTN_DTYPE_IQ4_NL = 10,
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

/* A contiguous row-major tensor over `buffer` at `offset` (a shape whose
 * element count does not fit int64_t gets default strides, which the op that
 * takes it refuses by name). */
VKATTN_API vkattn_tensor vkattn_tensor_make(vkattn_buffer *buffer, uint64_t offset,
                                            vkattn_dtype dtype, uint32_t rank,
                                            const int64_t *shape);
/* Bytes per element of a dtype (0 for quantized and unknown values). */
VKATTN_API size_t vkattn_dtype_size(vkattn_dtype dtype);
/* Values per block: 32 for the quantized dtypes, 1 for the others, 0 for
 * unknown values. */
VKATTN_API uint32_t vkattn_dtype_block_size(vkattn_dtype dtype);
/* Bytes of `elements` consecutive values: elements * size, or for a
 * quantized dtype elements / 32 blocks of 34 (q8_0), 18 (q4_0, iq4_nl), 20
 * (q4_1), 22 (q5_0) or 24 (q5_1) bytes; 0
 * when `elements` is not a whole number of blocks, the dtype is unknown or
 * the size does not fit 64 bits. */
VKATTN_API uint64_t vkattn_dtype_row_bytes(vkattn_dtype dtype, uint64_t elements);
/* "f32", "f16", "u8", "i32", "bf16", "q8_0", "q4_0", "q4_1", "q5_0", "q5_1",
 * "iq4_nl"; NULL for unknown values. */
VKATTN_API const char *vkattn_dtype_name(vkattn_dtype dtype);
/* Number of elements (product of the shape); -1 when a dimension is negative
 * or the product does not fit int64_t. */
VKATTN_API int64_t vkattn_tensor_numel(const vkattn_tensor *t);

/* IEEE binary16 <-> binary32 with round-to-nearest-even, on the host. */
VKATTN_API uint16_t vkattn_f32_to_f16(float value);
VKATTN_API float vkattn_f16_to_f32(uint16_t value);
/* bfloat16 (the sign, 8 exponent and 7 fraction bits of an f32) <->
 * binary32, on the host: rounding to nearest even (finite values too large
 * become inf, subnormals are kept), NaN stays a quiet NaN of the same sign.
 * The kernels convert exactly the same way. */
VKATTN_API uint16_t vkattn_f32_to_bf16(float value);
VKATTN_API float vkattn_bf16_to_f32(uint16_t value);

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
VKATTN_API vkattn_result vkattn_cmd_timer_end(vkattn_timer *timer, VkCommandBuffer cmd, uint32_t i);
/* Milliseconds between begin and end of interval `i`; the command buffer must
 * have completed. */
VKATTN_API vkattn_result vkattn_timer_read_ms(vkattn_timer *timer, uint32_t i, double *ms);

/* The rest of the manual, in order: */
#include "vkattn/ops.h"       /* convert, linear, attention, the MHA layer */
#include "vkattn/kv_cache.h"  /* KV cache, attention over it, steps, frame budgets */
#include "vkattn/tuning.h"    /* the tuners */
#include "vkattn/reference.h" /* the CPU reference */
#include "vkattn/selftest.h"  /* the start-up self-test and driver quirks */

#ifdef __cplusplus
}
#endif

#endif /* VKATTN_H */
