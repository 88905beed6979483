/* vkattn_convert: dst = scale * src with f32/f16 conversion (convert.comp). */
#include "spec/error_text.h"
#include "core/context.h"
#include "core/host.h"
#include "core/kernel.h"
#include "core/limits.h"
#include "core/pipeline.h"
#include "core/record.h"
#include "core/submit.h"
#include "core/tensor.h"
#include "core/windows.h"
#include "spec/dtype.h"
#include "spec/error_text.h"
#include "spec/size_math.h"
#include "vka_spirv.h"

#define PAIRS_PER_INVOCATION 4u
#define WORKGROUP 64u

#define CONVERT_KERNEL(s, d)                                                            \
    {                                                                                   \
        .name = "convert_" #s "_" #d, .spirv = &vka_spirv_convert_##s##_##d,         \
        .binding_count = 2, .bindings = {VKA_BINDING_STORAGE, VKA_BINDING_STORAGE}, \
        .push_size = 16                                                                 \
    }

/* [source storage][destination storage]; a device uses one f16 path, so the
 * f16 x f16p pairs are never needed. */
static const vka_kernel convert_kernels[3][3] = {
    [VKA_STORAGE_F32] = {[VKA_STORAGE_F32] = CONVERT_KERNEL(f32, f32),
                            [VKA_STORAGE_F16] = CONVERT_KERNEL(f32, f16),
                            [VKA_STORAGE_F16P] = CONVERT_KERNEL(f32, f16p)},
    [VKA_STORAGE_F16] = {[VKA_STORAGE_F32] = CONVERT_KERNEL(f16, f32),
                            [VKA_STORAGE_F16] = CONVERT_KERNEL(f16, f16)},
    [VKA_STORAGE_F16P] = {[VKA_STORAGE_F32] = CONVERT_KERNEL(f16p, f32),
                             [VKA_STORAGE_F16P] = CONVERT_KERNEL(f16p, f16p)},
};

typedef struct convert_push {
    uint32_t src_offset;
    uint32_t dst_offset;
    uint32_t count;
    float scale;
} convert_push;

static vkattn_result check_dtype(vkattn_context *ctx, const vkattn_tensor *t, const char *what)
{
    char b[VKA_DTYPE_TEXT];
    if (!vka_dtype_is_float(t->dtype))
        return vka_fail(ctx, VKATTN_ERROR_UNSUPPORTED_DTYPE,
                           "%s.dtype is %s: vkattn_convert takes f32 or f16", what,
                           vka_dtype_text(t->dtype, b));
    if (!vka_tensor_is_contiguous(t))
        return vka_fail(ctx, VKATTN_ERROR_INVALID_ARGUMENT,
                           "%s is not contiguous: vkattn_convert takes contiguous tensors", what);
    return VKATTN_SUCCESS;
}

vkattn_result vkattn_cmd_convert(vkattn_context *ctx, VkCommandBuffer cmd,
                                 const vkattn_convert_args *args)
{
    if (!ctx)
        return VKATTN_ERROR_INVALID_ARGUMENT;
    if (!cmd || !args)
        return vka_fail(ctx, VKATTN_ERROR_INVALID_ARGUMENT, "vkattn_cmd_convert: %s is NULL",
                           !cmd ? "cmd" : "args");
    vkattn_tensor src, dst;
    vkattn_result r = vka_tensor_resolve(ctx, &args->src, "args->src", &src);
    if (r == VKATTN_SUCCESS)
        r = vka_tensor_resolve(ctx, &args->dst, "args->dst", &dst);
    if (r == VKATTN_SUCCESS)
        r = check_dtype(ctx, &src, "args->src");
    if (r == VKATTN_SUCCESS)
        r = check_dtype(ctx, &dst, "args->dst");
    if (r != VKATTN_SUCCESS)
        return r;
    int64_t n = vkattn_tensor_numel(&src);
    if (n != vkattn_tensor_numel(&dst))
        return vka_fail(ctx, VKATTN_ERROR_SHAPE_MISMATCH,
                           "args->src has %lld elements but args->dst has %lld", (long long)n,
                           (long long)vkattn_tensor_numel(&dst));
    size_t ss = vkattn_dtype_size(src.dtype), ds = vkattn_dtype_size(dst.dtype);
    uint64_t src_end = src.offset + (uint64_t)n * ss, dst_end = dst.offset + (uint64_t)n * ds;
    bool same = src.buffer == dst.buffer && src.offset == dst.offset && ss == ds;
    if (src.buffer == dst.buffer && !same && src.offset < dst_end && dst.offset < src_end)
        return vka_fail(ctx, VKATTN_ERROR_INVALID_ARGUMENT,
                           "args->src and args->dst overlap without being the same range");

    const vka_kernel *kernel =
        &convert_kernels[vka_storage_kind(ctx, src.dtype)][vka_storage_kind(ctx, dst.dtype)];
    uint32_t wg = vka_workgroup_size(ctx, WORKGROUP);
    uint32_t spec[2] = {wg, PAIRS_PER_INVOCATION};
    vka_pipeline *pipeline;
    r = vka_pipeline_get(ctx, kernel, spec, 2, &pipeline);
    if (r != VKATTN_SUCCESS)
        return r;

    /* Windows small enough for one binding each (and for 32-bit indices). */
    uint64_t align = ctx->info.min_storage_buffer_offset_alignment < 16
                         ? 16 : ctx->info.min_storage_buffer_offset_alignment;
    uint64_t max_bytes = vka_min_u64(ctx->info.max_storage_buffer_range, 1ull << 31) - 2 * align;
    uint64_t per_window = vka_align_down(max_bytes / (ss > ds ? ss : ds), 2);
    convert_push push = {.scale = args->scale == 0.0f ? 1.0f : args->scale};
    for (int64_t done = 0; done < n;) {
        uint64_t count = vka_min_u64((uint64_t)(n - done), per_window);
        vka_binding b[2];
        r = vka_bind_window(ctx, src.buffer, src.offset + done * ss, count * ss, ss, &b[0],
                               &push.src_offset);
        if (r == VKATTN_SUCCESS)
            r = vka_bind_window(ctx, dst.buffer, dst.offset + done * ds, count * ds, ds, &b[1],
                                   &push.dst_offset);
        if (r != VKATTN_SUCCESS)
            return r;
        push.count = (uint32_t)count;
        /* pairs of destination elements, counted from the word holding the first */
        uint64_t pairs = (push.dst_offset + count + 1) / 2 - push.dst_offset / 2;
        uint32_t gx, gy;
        vka_grid_2d(ctx, vka_div_up64(pairs, (uint64_t)wg * PAIRS_PER_INVOCATION), &gx, &gy);
        if (done > 0) /* windows may share a packed word at their boundary */
            vka_cmd_compute_barrier(ctx, cmd);
        r = vka_cmd_dispatch(ctx, cmd, pipeline, b, &push, gx, gy, 1);
        if (r != VKATTN_SUCCESS)
            return r;
        done += (int64_t)count;
    }
    return VKATTN_SUCCESS;
}

vkattn_result vkattn_convert(vkattn_context *ctx, const vkattn_convert_args *args)
{
    VkCommandBuffer cmd;
    vkattn_result r = vkattn_commands_begin(ctx, &cmd);
    if (r != VKATTN_SUCCESS)
        return r;
    r = vkattn_cmd_convert(ctx, cmd, args);
    return vka_commands_finish(ctx, r);
}
