/* Sanitizer builds only: LeakSanitizer reports the Vulkan drivers' and
 * layers' own leftovers, but the loader unloads those libraries before it
 * looks, so it cannot name them and tests/lsan.supp cannot suppress them.
 * Loading them once more with RTLD_NODELETE keeps them mapped and nameable.
 * vkattn's own leaks stay visible. Used by the tests and the CLI's main(). */
#ifndef VKATTN_SANITIZER_PIN_H
#define VKATTN_SANITIZER_PIN_H

#if defined(__SANITIZE_ADDRESS__)
#include <dlfcn.h>

static inline void vkattn_pin_vulkan_libraries(void)
{
    static const char *const libs[] = {
        "libvulkan_lvp.so",
        "/usr/lib/chromium/libvk_swiftshader.so",
        "libVkLayer_khronos_validation.so",
        "libVkLayer_MESA_device_select.so",
    };
    for (size_t i = 0; i < sizeof libs / sizeof libs[0]; i++)
        dlopen(libs[i], RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
}
#else
static inline void vkattn_pin_vulkan_libraries(void) {}
#endif

#endif
