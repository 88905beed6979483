/* Recording of vkattn_convert (convert.comp): its kernel table and the
 * dispatches over windows that fit the device's bindings. */
#include "ops/convert/convert_internal.h"
#include "core/limits.h"
#include "core/pipeline.h"
#include "core/record.h"
#include "core/windows.h"
#include "spec/error_text.h"
#include "spec/size_math.h"
#include "vka_spirv.h"

#define PAIRS_PER_INVOCATION 4u
#define WORKGROUP 64u

#define CONVERT_KERNEL(v, unused)                                                   \
    {                                                                               \
        .name = "convert_" #v, .spirv = &vka_spirv_convert_##v, .binding_count = 2, \
        .bindings = {VKA_BINDING_STORAGE, VKA_BINDING_STORAGE}, .push_size = 16     \
    }

/* [source storage][destination storage]; pairs with a bf16 in the second */
static const vka_kernel convert_kernels[3][3] = VKA_STORAGE_PAIRS(CONVERT_KERNEL, 0);
static const vka_kernel convert_bf16[4][4] = VKA_STORAGE_PAIRS_BF16(CONVERT_KERNEL, 0);

typedef struct convert_push {
    uint32_t src_offset;
    uint32_t dst_offset;
    uint32_t count;
    float scale;
} convert_push;

vkattn_result vka_convert_record(vkattn_context *ctx, VkCommandBuffer cmd,
                                 const vkattn_tensor *src_in, const vkattn_tensor *dst_in,
                                 float scale)
{
    const vkattn_tensor src = *src_in, dst = *dst_in;
    size_t ss = vkattn_dtype_size(src.dtype), ds = vkattn_dtype_size(dst.dtype);
    int64_t n = vkattn_tensor_numel(&src);
    uint32_t sk = vka_storage_kind(ctx, src.dtype), dk = vka_storage_kind(ctx, dst.dtype);
    const vka_kernel *kernel = sk == VKA_STORAGE_BF16 || dk == VKA_STORAGE_BF16
                                   ? &convert_bf16[sk][dk]
                                   : &convert_kernels[sk][dk];
    uint32_t wg = vka_workgroup_size(ctx, WORKGROUP);
    uint32_t spec[2] = {wg, PAIRS_PER_INVOCATION};
    vka_pipeline *pipeline;
    VKA_TRY(vka_pipeline_get(ctx, kernel, spec, 2, &pipeline));
    vkattn_result r;

    /* Windows small enough for one binding each (and for 32-bit indices). */
    uint64_t align = ctx->info.min_storage_buffer_offset_alignment < 16
                         ? 16
                         : ctx->info.min_storage_buffer_offset_alignment;
    uint64_t max_bytes = vka_min_u64(ctx->info.max_storage_buffer_range, 1ull << 31) - 2 * align;
    uint64_t per_window = vka_align_down(max_bytes / (ss > ds ? ss : ds), 2);
    convert_push push = {.scale = scale};
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
