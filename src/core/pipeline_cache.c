/* The context's VkPipelineCache: created from a file or bytes (data of this
 * very device and driver only), and given back as bytes or saved to a file. */
#include "core/pipeline_cache.h"

#include "core/file_io.h"
#include "core/host.h"
#include "core/selftest.h"

#include <string.h>

/* The header's fields are little-endian whatever the host's byte order
 * (VkPipelineCacheHeaderVersionOne in the Vulkan spec). */
static uint32_t le32(const unsigned char *b)
{
    return (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
}

bool vka_pipeline_cache_header_matches(const VkPhysicalDeviceProperties *p, const void *data,
                                       size_t size)
{
    const unsigned char *h = data;
    enum { HEADER_ONE_BYTES = 16 + VK_UUID_SIZE };
    if (!data || size < HEADER_ONE_BYTES)
        return false;
    uint32_t header_size = le32(h);
    return header_size >= HEADER_ONE_BYTES && header_size <= size &&
           le32(h + 4) == VK_PIPELINE_CACHE_HEADER_VERSION_ONE && le32(h + 8) == p->vendorID &&
           le32(h + 12) == p->deviceID && memcmp(h + 16, p->pipelineCacheUUID, VK_UUID_SIZE) == 0;
}

static bool cache_data_matches(vkattn_context *ctx, const void *data, size_t size)
{
    VkPhysicalDeviceProperties p;
    ctx->vk.vkGetPhysicalDeviceProperties(ctx->physical_device, &p);
    return vka_pipeline_cache_header_matches(&p, data, size);
}

/* Larger files are not pipeline caches of this project's few pipelines
 * (tens of MiB at most): refused rather than read (a wrong path naming a
 * model file is not loaded whole first). */
#define PIPELINE_CACHE_MAX_BYTES ((size_t)256 << 20)

vkattn_result vka_pipeline_cache_init(vkattn_context *ctx, const vkattn_context_desc *desc)
{
    const void *initial = desc->pipeline_cache_data;
    size_t initial_size = desc->pipeline_cache_data ? desc->pipeline_cache_size : 0;
    void *from_file = NULL;
    if (!initial && desc->pipeline_cache_path) {
        /* missing (the first run): quietly empty; there but unreadable (a
         * directory, too large): a warning, as for tuning files */
        vka_file_read got = vka_read_file(ctx, desc->pipeline_cache_path, PIPELINE_CACHE_MAX_BYTES,
                                          &from_file, &initial_size);
        if (got != VKA_FILE_OK || !initial_size) {
            vka_free(ctx, from_file);
            from_file = NULL;
            initial_size = 0;
        }
        initial = from_file;
        if (got == VKA_FILE_UNREADABLE)
            vka_log(ctx, VKATTN_LOG_WARNING,
                    "pipeline cache \"%s\" could not be read; starting empty",
                    desc->pipeline_cache_path);
        else if (!from_file)
            vka_log(ctx, VKATTN_LOG_INFO, "pipeline cache \"%s\" not read; starting empty",
                    desc->pipeline_cache_path);
    }
    /* the self-test's result rides at the end of the driver's data */
    if (initial)
        initial_size = vka_self_test_take_trailer(ctx, initial, initial_size);
    if (initial && !cache_data_matches(ctx, initial, initial_size)) {
        vka_log(ctx, VKATTN_LOG_INFO,
                "pipeline cache data (%zu bytes) is from another device or driver; ignored",
                initial_size);
        initial = NULL;
        initial_size = 0;
    }
    VkPipelineCacheCreateInfo ci = {
        .sType = VK_STRUCTURE_TYPE_PIPELINE_CACHE_CREATE_INFO,
        .initialDataSize = initial ? initial_size : 0,
        .pInitialData = initial,
    };
    VkResult vr =
        ctx->vk.vkCreatePipelineCache(ctx->device, &ci, ctx->vk_allocator, &ctx->pipeline_cache);
    vka_free(ctx, from_file);
    if (vr != VK_SUCCESS)
        return vka_fail_vk(ctx, vr, "vkCreatePipelineCache");
    return VKATTN_SUCCESS;
}

void vka_pipeline_cache_destroy(vkattn_context *ctx)
{
    if (ctx->pipeline_cache)
        ctx->vk.vkDestroyPipelineCache(ctx->device, ctx->pipeline_cache, ctx->vk_allocator);
    ctx->pipeline_cache = VK_NULL_HANDLE;
}

vkattn_result vkattn_context_pipeline_cache_data(vkattn_context *ctx, void *data, size_t *size)
{
    if (!ctx)
        return VKATTN_ERROR_INVALID_ARGUMENT;
    if (!size)
        return vka_fail(ctx, VKATTN_ERROR_INVALID_ARGUMENT,
                        "vkattn_context_pipeline_cache_data: size is NULL");
    /* the driver's data, then the self-test's result (core/selftest.h) */
    unsigned char trailer[VKA_SELF_TEST_TRAILER_BYTES];
    size_t extra = vka_self_test_trailer(ctx, trailer);
    size_t driver_size = 0;
    VkResult vr =
        ctx->vk.vkGetPipelineCacheData(ctx->device, ctx->pipeline_cache, &driver_size, NULL);
    if (vr != VK_SUCCESS)
        return vka_fail_vk(ctx, vr, "vkGetPipelineCacheData");
    if (!data) {
        *size = driver_size + extra;
        return VKATTN_SUCCESS;
    }
    if (*size < driver_size + extra)
        return vka_fail(ctx, VKATTN_ERROR_OUT_OF_RANGE,
                        "vkattn_context_pipeline_cache_data: *size %zu is too small for the "
                        "cache's %zu bytes",
                        *size, driver_size + extra);
    vr = ctx->vk.vkGetPipelineCacheData(ctx->device, ctx->pipeline_cache, &driver_size, data);
    if (vr == VK_INCOMPLETE) /* grew since it was measured: another thread made pipelines */
        return vka_fail(ctx, VKATTN_ERROR_OUT_OF_RANGE,
                        "vkattn_context_pipeline_cache_data: the cache grew while it was read");
    if (vr != VK_SUCCESS)
        return vka_fail_vk(ctx, vr, "vkGetPipelineCacheData");
    memcpy((unsigned char *)data + driver_size, trailer, extra);
    *size = driver_size + extra;
    return VKATTN_SUCCESS;
}

vkattn_result vkattn_context_save_pipeline_cache(vkattn_context *ctx, const char *path)
{
    return vka_save_data(ctx, "vkattn_context_save_pipeline_cache", path,
                         vkattn_context_pipeline_cache_data, "pipeline cache");
}
