/* Linked into programs that are not tests (the embedding example) in
 * sanitizer builds only: pins the Vulkan driver libraries before main() so
 * that LeakSanitizer can name, and tests/lsan.supp suppress, the drivers'
 * own leftovers, without touching the program's source. */
#include "sanitizer_pin.h"

__attribute__((constructor)) static void pin_vulkan_libraries(void)
{
    vkattn_pin_vulkan_libraries();
}
