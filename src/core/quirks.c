/* The driver-quirk table (quirks.h). Each entry is a driver bug found with a
 * small independent shader (the reproducer), and what vkattn switches off
 * to step around it. docs/drivers.md lists them with their measurements. */
#include "core/quirks.h"

#include <stdlib.h>
#include <string.h>

static const vka_quirk table[] = {
    {
        .id = "lavapipe-26.1-avx512-texel",
        .driver = VK_DRIVER_ID_MESA_LLVMPIPE,
        .version_min = VK_MAKE_VERSION(26, 1, 0),
        .version_end = VK_MAKE_VERSION(26, 2, 0),
        .cpu = VKA_CPU_AVX512,
        .turns_off = 1u << VKATTN_FEATURE_TEXEL_INPUTS,
        .why = "Mesa 26.1's llvmpipe JIT stores texel-fetch results with 64-byte AVX-512 "
               "stores into 32-byte slots: texel fetches crash, or read wrong values in lanes "
               "8-15 at width 512 (fixed in 26.2)",
        .reproducer = "texelFetch(tb, int(gl_LocalInvocationIndex)) in a 64-invocation "
                      "compute shader on an AVX-512 host (vkattn selftest --no-quirks); "
                      "GALLIUM_OVERRIDE_CPU_CAPS=avx avoids it",
    },
};

/* GALLIUM_OVERRIDE_CPU_CAPS values Mesa knows, all below AVX-512 (others,
 * "avx2" among them, leave the detected features alone). */
static const char *const below_avx512[] = {"nosse", "sse",    "sse2", "sse3",
                                           "ssse3", "sse4.1", "avx"};

uint32_t vka_host_cpu(void)
{
    uint32_t cpu = 0;
#if (defined(__x86_64__) || defined(__i386__)) && defined(__GNUC__)
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f"))
        cpu |= VKA_CPU_AVX512;
#endif
    /* the drivers' own setting, not vkattn's: it decides what llvmpipe's
     * JIT emits, and so whether its AVX-512 bugs can happen */
    const char *override = getenv("GALLIUM_OVERRIDE_CPU_CAPS");
    for (size_t i = 0; override && i < sizeof below_avx512 / sizeof below_avx512[0]; i++)
        if (strcmp(override, below_avx512[i]) == 0)
            cpu &= ~(uint32_t)VKA_CPU_AVX512;
    return cpu;
}

uint32_t vka_quirks_matching(const vka_quirk_target *t, const vka_quirk **out, uint32_t capacity)
{
    uint32_t n = 0;
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++) {
        const vka_quirk *q = &table[i];
        if (q->driver == t->driver && t->driver_version >= q->version_min &&
            t->driver_version < q->version_end && (t->cpu & q->cpu) == q->cpu) {
            if (n < capacity)
                out[n] = q;
            n++;
        }
    }
    return n;
}
