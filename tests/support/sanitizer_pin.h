/* Sanitizer builds only: LeakSanitizer reports the Vulkan drivers' and
 * layers' own leftovers, but the loader unloads those libraries before it
 * looks, so it cannot name them and tests/lsan.supp cannot suppress them.
 * Loading them once more with RTLD_NODELETE keeps them mapped and nameable.
 * ThreadSanitizer needs the same for tests/tsan.supp (suppressions by
 * library name). vkattn's own leaks and races stay visible. Used by the
 * tests and the CLI's main(). gcc defines __SANITIZE_ADDRESS__ and
 * __SANITIZE_THREAD__; clang 14 only answers __has_feature. */
#ifndef VKATTN_SANITIZER_PIN_H
#define VKATTN_SANITIZER_PIN_H

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define VKATTN_SANITIZER_PIN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define VKATTN_SANITIZER_PIN 1
#endif
#endif

#ifdef VKATTN_SANITIZER_PIN
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
