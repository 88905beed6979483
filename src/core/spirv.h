/* One embedded SPIR-V module (generated into the build directory). */
#ifndef VKATTN_SPIRV_H
#define VKATTN_SPIRV_H

#include <stddef.h>
#include <stdint.h>

typedef struct vkattn_spirv {
    const uint32_t *code;
    size_t size; /* bytes */
} vkattn_spirv;

#endif
