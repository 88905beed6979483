/* vka_pipeline_cache_header_matches (src/core/pipeline_cache.c): the
 * fuzzer's bytes are a pipeline cache file. The function must read only
 * within them and accept exactly the files whose header is well formed and
 * names this device, as computed here independently from the Vulkan spec's
 * VkPipelineCacheHeaderVersionOne: five fields, least significant byte
 * first whatever the host's byte order,
 *     0  uint32 headerSize     (at least 32, and within the data)
 *     4  uint32 headerVersion  (VK_PIPELINE_CACHE_HEADER_VERSION_ONE = 1)
 *     8  uint32 vendorID
 *    12  uint32 deviceID
 *    16  uint8  pipelineCacheUUID[16]                                      */
#include "fuzz_util.h"

#include "core/pipeline_cache.h"

#include <stdlib.h>
#include <string.h>

static const VkPhysicalDeviceProperties device = {
    .vendorID = 0x10de,
    .deviceID = 0x2330,
    .driverVersion = 0x87654321,
    .pipelineCacheUUID = {0xa5, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x09, 0x0a, 0x0b,
                          0x0c, 0x0d, 0x0e, 0x5a},
};

static uint32_t le32(const uint8_t *b)
{
    return (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
}

static int expected(const uint8_t *b, size_t size)
{
    if (size < 32)
        return 0;
    uint32_t header_size = le32(b);
    return header_size >= 32 && header_size <= size && le32(b + 4) == 1 &&
           le32(b + 8) == device.vendorID && le32(b + 12) == device.deviceID &&
           memcmp(b + 16, device.pipelineCacheUUID, 16) == 0;
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* an exact-size copy, so ASan reports any read past the end */
    uint8_t *copy = malloc(size ? size : 1);
    if (!copy)
        fuzz_fail("out of memory");
    memcpy(copy, data, size);
    int want = expected(copy, size);
    int got = vka_pipeline_cache_header_matches(&device, size ? copy : NULL, size);
    if (got != want)
        fuzz_fail("header of %zu bytes: accepted %d, the spec says %d", size, got, want);
    /* every shorter prefix too: the size, not the bytes, bounds the read */
    for (size_t n = size < 40 ? 0 : size - 8; n < size; n++)
        if (vka_pipeline_cache_header_matches(&device, copy, n) != expected(copy, n))
            fuzz_fail("prefix of %zu bytes: accepted %d, the spec says %d", n,
                      vka_pipeline_cache_header_matches(&device, copy, n), expected(copy, n));
    if (vka_pipeline_cache_header_matches(&device, NULL, size))
        fuzz_fail("NULL data accepted");
    free(copy);
    return 0;
}
