/* The driver-quirk table (quirks.c): driver bugs a self-test check cannot
 * survive (a crash), each switching features off for a driver, a range of
 * its versions and, where it matters, host CPU features. */
#ifndef VKA_QUIRKS_H
#define VKA_QUIRKS_H

#include "vkattn.h"

/* Host CPU features a quirk may depend on (bits). */
enum { VKA_CPU_AVX512 = 1u << 0 };

typedef struct vka_quirk {
    const char *id;
    VkDriverId driver;
    uint32_t version_min, version_end; /* driverVersion in [min, end) */
    uint32_t cpu;                      /* VKA_CPU_* the host must have; 0: any host */
    uint32_t turns_off;                /* 1 << vkattn_feature */
    const char *why;
    const char *reproducer;
} vka_quirk;

/* What a quirk is matched against. */
typedef struct vka_quirk_target {
    VkDriverId driver;
    uint32_t driver_version;
    uint32_t cpu; /* VKA_CPU_* the driver uses on this host (vka_host_cpu) */
} vka_quirk_target;

/* The VKA_CPU_* features the drivers use here: the host's, less AVX-512
 * when llvmpipe was told to stay below it (GALLIUM_OVERRIDE_CPU_CAPS set to
 * a level under AVX-512, read as Mesa reads it). */
uint32_t vka_host_cpu(void);
/* The quirks of the table that match `t`, up to `capacity` into `out`;
 * returns how many match. */
uint32_t vka_quirks_matching(const vka_quirk_target *t, const vka_quirk **out, uint32_t capacity);

#endif
