/* One SPIR-V module embedded in vkattn-bench (its limit kernels, generated
 * into the build directory by bench/CMakeLists.txt): words and byte size. */
#ifndef BENCH_SPIRV_TYPE_H
#define BENCH_SPIRV_TYPE_H

#include <stddef.h>
#include <stdint.h>

typedef struct bench_spirv {
    const uint32_t *code;
    size_t size;
} bench_spirv;

#endif
