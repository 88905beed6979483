/* One embedded SPIR-V module (generated into the build directory). */
#ifndef VKA_SPIRV_H
#define VKA_SPIRV_H

#include <stddef.h>
#include <stdint.h>

typedef struct vka_spirv {
    const uint32_t *code;
    size_t size; /* bytes */
} vka_spirv;

#endif
