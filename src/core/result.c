/* Result names and messages, generated from VKATTN_RESULT_LIST; version query. */
#include "core/host.h"

#define VKA_STR_(x) #x
#define VKA_XSTR_(x) VKA_STR_(x)

uint32_t vkattn_version(void) { return VKATTN_VERSION; }

const char *vkattn_version_string(void)
{
    return VKA_XSTR_(VKATTN_VERSION_MAJOR) "." VKA_XSTR_(VKATTN_VERSION_MINOR) "." VKA_XSTR_(
        VKATTN_VERSION_PATCH);
}

const char *vkattn_result_name(vkattn_result result)
{
    switch (result) {
#define NAME_(name, value, message) \
    case VKATTN_##name:             \
        return "VKATTN_" #name;
        VKATTN_RESULT_LIST(NAME_)
#undef NAME_
    }
    return "VKATTN_UNKNOWN_RESULT";
}

const char *vkattn_result_message(vkattn_result result)
{
    switch (result) {
#define MESSAGE_(name, value, message) \
    case VKATTN_##name:                \
        return message;
        VKATTN_RESULT_LIST(MESSAGE_)
#undef MESSAGE_
    }
    return "unknown result";
}

const char *vka_vk_result_name(VkResult vr)
{
    switch (vr) {
#define VK_NAME_(n) \
    case n:         \
        return #n;
        VK_NAME_(VK_SUCCESS)
        VK_NAME_(VK_NOT_READY)
        VK_NAME_(VK_TIMEOUT)
        VK_NAME_(VK_INCOMPLETE)
        VK_NAME_(VK_ERROR_OUT_OF_HOST_MEMORY)
        VK_NAME_(VK_ERROR_OUT_OF_DEVICE_MEMORY)
        VK_NAME_(VK_ERROR_INITIALIZATION_FAILED)
        VK_NAME_(VK_ERROR_DEVICE_LOST)
        VK_NAME_(VK_ERROR_MEMORY_MAP_FAILED)
        VK_NAME_(VK_ERROR_LAYER_NOT_PRESENT)
        VK_NAME_(VK_ERROR_EXTENSION_NOT_PRESENT)
        VK_NAME_(VK_ERROR_FEATURE_NOT_PRESENT)
        VK_NAME_(VK_ERROR_INCOMPATIBLE_DRIVER)
        VK_NAME_(VK_ERROR_TOO_MANY_OBJECTS)
        VK_NAME_(VK_ERROR_FORMAT_NOT_SUPPORTED)
        VK_NAME_(VK_ERROR_FRAGMENTED_POOL)
        VK_NAME_(VK_ERROR_UNKNOWN)
        VK_NAME_(VK_ERROR_OUT_OF_POOL_MEMORY)
        VK_NAME_(VK_ERROR_INVALID_EXTERNAL_HANDLE)
        VK_NAME_(VK_ERROR_FRAGMENTATION)
        VK_NAME_(VK_PIPELINE_COMPILE_REQUIRED)
#undef VK_NAME_
    default:
        return "VkResult(other)";
    }
}
