/* Device limits as the ops use them: which kernel families may run, and
 * workgroup and grid sizes within maxComputeWorkGroup*. Inline: they only
 * read the context's capability record. */
#ifndef VKA_LIMITS_H
#define VKA_LIMITS_H

#include "core/context.h"
#include "spec/size_math.h"

/* Whether the subgroup kernel families (which are specialized for
 * info.subgroup_size and shuffle across it) may run at all: shuffles and
 * arithmetic, not disabled by the context's flags nor by the self-test
 * (core/selftest.c), and a subgroup size the
 * pipeline can pin (subgroup size control) or that cannot vary (CPU
 * drivers). Tuners choose among them only then. */
static inline bool vka_subgroup_families_allowed(const vkattn_context *ctx)
{
    return ctx->info.subgroup_shuffle && ctx->info.subgroup_arithmetic &&
           !(ctx->flags & VKATTN_CONTEXT_NO_SUBGROUP_KERNELS) && !ctx->subgroup_families_off &&
           (ctx->info.subgroup_size_control || ctx->info.type == VKATTN_DEVICE_TYPE_CPU);
}

/* Whether the coopmat family (cooperative matrices) may run: the device
 * offers it, its self-test check passed, the flags allow it, and 16-bit
 * storage is on (its f16 variants read float16_t). Tuners may try it then;
 * the built-in choice takes it where ctx->info.coopmat_kernels. */
static inline bool vka_coopmat_allowed(const vkattn_context *ctx)
{
    return ctx->coopmat_works && ctx->info.storage_16bit &&
           !(ctx->flags & VKATTN_CONTEXT_NO_COOPMAT_KERNELS);
}

/* The largest 1D workgroup the device allows. */
static inline uint32_t vka_max_workgroup(const vkattn_context *ctx)
{
    uint32_t max = ctx->info.max_workgroup_invocations;
    return ctx->info.max_workgroup_size[0] < max ? ctx->info.max_workgroup_size[0] : max;
}

/* The subgroup size, 1 where the device reports none. */
static inline uint32_t vka_subgroup_size(const vkattn_context *ctx)
{
    return ctx->info.subgroup_size ? ctx->info.subgroup_size : 1;
}

/* A 1D workgroup size near `wanted` that the device allows, a multiple of
 * the subgroup size where possible. */
static inline uint32_t vka_workgroup_size(const vkattn_context *ctx, uint32_t wanted)
{
    uint32_t max = vka_max_workgroup(ctx);
    uint32_t wg = wanted < max ? wanted : max;
    uint32_t sg = vka_subgroup_size(ctx);
    return wg >= sg ? wg / sg * sg : wg;
}

/* Spreads `groups` workgroups over x and y within maxComputeWorkGroupCount
 * (kernels use linear_invocation() from tensor_io.glsl). Extra groups in the
 * last row must exit on their own bounds check. */
static inline void vka_grid_2d(const vkattn_context *ctx, uint64_t groups, uint32_t *gx,
                               uint32_t *gy)
{
    uint64_t max_x = ctx->info.max_workgroup_count[0];
    *gx = (uint32_t)(groups < max_x ? groups : max_x);
    *gy = *gx ? (uint32_t)vka_div_up64(groups, *gx) : 0;
}

#endif
