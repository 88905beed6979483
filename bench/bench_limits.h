/* The limit kernels of vkattn-bench: what the device can do at best, measured
 * in the same process as the cases so that drift hits both.
 *   FMA:  fp32 fused multiply-adds (bench/shaders/limit_fma.comp), GFLOP/s;
 *   read: a streaming read of one buffer through every binding the device
 *         offers (bench/shaders/limit_read.comp), GB/s.
 * They are raw Vulkan objects made through the context's handles
 * (vkattn_context_vulkan_handles) from SPIR-V embedded in the bench; nothing
 * of the library beyond its public API is used. Failures end the program
 * with a message: this is a benchmark, not a library. */
#ifndef BENCH_LIMITS_H
#define BENCH_LIMITS_H

#include "vkattn.h"

#include <stddef.h>

typedef enum bench_read_binding {
    BENCH_READ_STORAGE_F32,   /* storage buffer, vec4 of f32 */
    BENCH_READ_STORAGE_F16,   /* storage buffer, f16vec4 (16-bit storage) or packed uvec2 */
    BENCH_READ_TEXEL_RGBA32F, /* uniform texel buffer, rgba32f view */
    BENCH_READ_TEXEL_RGBA16F, /* uniform texel buffer, rgba16f view */
    BENCH_READ_BINDINGS
} bench_read_binding;

typedef struct bench_limits bench_limits;

/* Makes the kernels, a read buffer of `read_bytes` and calibrates the FMA
 * kernel's size so that one run lasts long enough to time (and warms
 * everything up). `timer` must have at least one interval. */
bench_limits *bench_limits_create(vkattn_context *ctx, vkattn_timer *timer, uint64_t read_bytes);
void bench_limits_destroy(bench_limits *l);

/* One timed run: GFLOP/s of the FMA kernel; GB/s of a read binding. */
double bench_limits_fma(bench_limits *l);
double bench_limits_read(bench_limits *l, bench_read_binding binding);

/* Whether the device offers the binding (format support, 16-bit storage). */
bool bench_limits_has_read(const bench_limits *l, bench_read_binding binding);
/* JSON-friendly name of a binding on this device ("storage_f16vec4" or
 * "storage_f16_packed" for BENCH_READ_STORAGE_F16). */
const char *bench_limits_read_name(const bench_limits *l, bench_read_binding binding);
/* The access pattern chosen for a binding: "lane_runs x1024" (each lane its
 * own run of 1024 elements) or "coalesced x64" (adjacent lanes). */
void bench_limits_read_config(const bench_limits *l, bench_read_binding binding, char *text,
                              size_t size);
uint64_t bench_limits_read_bytes(const bench_limits *l);

#endif
