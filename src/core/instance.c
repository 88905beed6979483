/* The standalone context's VkInstance, and validation-layer messages routed
 * to the context's logger and counters. */
#include "core/instance.h"

#include "core/host.h"

#include <string.h>

#define VALIDATION_LAYER "VK_LAYER_KHRONOS_validation"

static VKAPI_ATTR VkBool32 VKAPI_CALL on_message(VkDebugUtilsMessageSeverityFlagBitsEXT severity,
                                                 VkDebugUtilsMessageTypeFlagsEXT types,
                                                 const VkDebugUtilsMessengerCallbackDataEXT *data,
                                                 void *user)
{
    (void)types;
    vkattn_context *ctx = user;
    vkattn_log_level level = VKATTN_LOG_INFO;
    if (severity & VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT) {
        atomic_fetch_add(&ctx->validation_errors, 1);
        level = VKATTN_LOG_ERROR;
    } else if (severity & VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT) {
        atomic_fetch_add(&ctx->validation_warnings, 1);
        level = VKATTN_LOG_WARNING;
    }
    vka_log(ctx, level, "validation: %s", data && data->pMessage ? data->pMessage : "(no text)");
    return VK_FALSE;
}

void vka_fill_messenger_info(vkattn_context *ctx, VkDebugUtilsMessengerCreateInfoEXT *info)
{
    memset(info, 0, sizeof *info);
    info->sType = VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT;
    info->messageSeverity = VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT |
                            VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT;
    info->messageType = VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT |
                        VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT |
                        VK_DEBUG_UTILS_MESSAGE_TYPE_PERFORMANCE_BIT_EXT;
    info->pfnUserCallback = on_message;
    info->pUserData = ctx;
}

vkattn_result vka_messenger_attach(vkattn_context *ctx)
{
    if (!ctx->vk.vkCreateDebugUtilsMessengerEXT || !ctx->vk.vkDestroyDebugUtilsMessengerEXT)
        return vka_fail(ctx, VKATTN_ERROR_LAYER_NOT_PRESENT,
                        "VKATTN_CONTEXT_VALIDATION on a borrowed instance needs "
                        "VK_EXT_debug_utils enabled on that instance");
    VkDebugUtilsMessengerCreateInfoEXT info;
    vka_fill_messenger_info(ctx, &info);
    VkResult vr = ctx->vk.vkCreateDebugUtilsMessengerEXT(ctx->instance, &info, ctx->vk_allocator,
                                                         &ctx->messenger);
    return vr == VK_SUCCESS ? VKATTN_SUCCESS
                            : vka_fail_vk(ctx, vr, "vkCreateDebugUtilsMessengerEXT");
}

static bool has_layer(vkattn_context *ctx, const char *name)
{
    uint32_t n = 0;
    if (ctx->vk.vkEnumerateInstanceLayerProperties(&n, NULL) != VK_SUCCESS || n == 0)
        return false;
    VkLayerProperties *layers = vka_alloc(ctx, n * sizeof *layers);
    if (!layers)
        return false;
    bool found = false;
    if (ctx->vk.vkEnumerateInstanceLayerProperties(&n, layers) == VK_SUCCESS)
        for (uint32_t i = 0; i < n && !found; i++)
            found = strcmp(layers[i].layerName, name) == 0;
    vka_free(ctx, layers);
    return found;
}

vkattn_result vka_instance_create(vkattn_context *ctx, bool validation,
                                  PFN_vkGetInstanceProcAddr gipa)
{
    const char *missing = vka_vk_load_global(&ctx->vk, gipa ? gipa : vkGetInstanceProcAddr);
    if (missing)
        return vka_fail(ctx, VKATTN_ERROR_NO_DEVICE,
                        "the Vulkan loader has no %s (install libvulkan1)", missing);
    if (validation && !has_layer(ctx, VALIDATION_LAYER))
        return vka_fail(ctx, VKATTN_ERROR_LAYER_NOT_PRESENT,
                        "validation requested but %s is not installed (Debian: apt-get "
                        "install vulkan-validationlayers)",
                        VALIDATION_LAYER);

    VkApplicationInfo app = {
        .sType = VK_STRUCTURE_TYPE_APPLICATION_INFO,
        .pApplicationName = "vkattn",
        .pEngineName = "vkattn",
        .engineVersion = VKATTN_VERSION,
        .apiVersion = VK_API_VERSION_1_3,
    };
    const char *layers[] = {VALIDATION_LAYER};
    const char *extensions[] = {VK_EXT_DEBUG_UTILS_EXTENSION_NAME,
                                VK_EXT_VALIDATION_FEATURES_EXTENSION_NAME};
    VkValidationFeatureEnableEXT enables[] = {
        VK_VALIDATION_FEATURE_ENABLE_SYNCHRONIZATION_VALIDATION_EXT,
        VK_VALIDATION_FEATURE_ENABLE_GPU_ASSISTED_EXT};
    bool gpu_assisted = ctx->flags & VKATTN_CONTEXT_VALIDATION_GPU_ASSISTED;
    VkDebugUtilsMessengerCreateInfoEXT messenger;
    vka_fill_messenger_info(ctx, &messenger);
    /* The messenger in the chain also reports what happens inside
     * vkCreateInstance and vkDestroyInstance. */
    VkValidationFeaturesEXT features = {
        .sType = VK_STRUCTURE_TYPE_VALIDATION_FEATURES_EXT,
        .pNext = &messenger,
        .enabledValidationFeatureCount = gpu_assisted ? 2 : 1,
        .pEnabledValidationFeatures = enables,
    };
    VkInstanceCreateInfo ici = {
        .sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO,
        .pNext = validation ? &features : NULL,
        .pApplicationInfo = &app,
        .enabledLayerCount = validation ? 1 : 0,
        .ppEnabledLayerNames = layers,
        .enabledExtensionCount = validation ? 2 : 0,
        .ppEnabledExtensionNames = extensions,
    };
    VkResult vr = ctx->vk.vkCreateInstance(&ici, ctx->vk_allocator, &ctx->instance);
    if (vr == VK_ERROR_INCOMPATIBLE_DRIVER)
        return vka_fail(ctx, VKATTN_ERROR_NO_DEVICE,
                        "no Vulkan device: vkCreateInstance found no compatible driver "
                        "(install mesa-vulkan-drivers for lavapipe, or a GPU driver)");
    if (vr != VK_SUCCESS)
        return vka_fail_vk(ctx, vr, "vkCreateInstance");
    missing = vka_vk_load_instance(&ctx->vk, ctx->instance);
    if (missing)
        return vka_fail(ctx, VKATTN_ERROR_VULKAN, "instance entry point %s not found", missing);
    if (validation)
        return vka_messenger_attach(ctx);
    return VKATTN_SUCCESS;
}
