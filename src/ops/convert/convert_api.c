/* vkattn_convert: dst = scale * src with f32/f16/bf16 conversion - the entry
 * points and the checks (recording: convert_record.c). */
#include "ops/convert/convert_internal.h"
#include "core/host.h"
#include "core/submit.h"
#include "core/tensor.h"
#include "spec/dtype.h"
#include "spec/error_text.h"

#include <math.h>

static vkattn_result check_dtype(vkattn_context *ctx, const vkattn_tensor *t, const char *what)
{
    if (t->dtype != VKATTN_DTYPE_BF16)
        VKA_TRY(vka_tensor_check_float(ctx, t, what, "vkattn_convert"));
    if (!vka_tensor_is_contiguous(t))
        return vka_fail(ctx, VKATTN_ERROR_INVALID_ARGUMENT,
                        "%s is not contiguous: vkattn_convert takes contiguous tensors", what);
    return VKATTN_SUCCESS;
}

/* A checked call. */
typedef struct convert_call {
    vkattn_tensor src, dst;
    float scale;
} convert_call;

static vkattn_result check_call(vkattn_context *ctx, const void *args_in, void *call)
{
    const vkattn_convert_args *args = args_in;
    convert_call *c = call;
    VKA_TRY(vka_tensor_resolve(ctx, &args->src, "args->src", &c->src));
    VKA_TRY(vka_tensor_resolve(ctx, &args->dst, "args->dst", &c->dst));
    VKA_TRY(check_dtype(ctx, &c->src, "args->src"));
    VKA_TRY(check_dtype(ctx, &c->dst, "args->dst"));
    int64_t n = vkattn_tensor_numel(&c->src);
    if (n != vkattn_tensor_numel(&c->dst))
        return vka_fail(ctx, VKATTN_ERROR_SHAPE_MISMATCH,
                        "args->src has %lld elements but args->dst has %lld", (long long)n,
                        (long long)vkattn_tensor_numel(&c->dst));
    /* in place is fine (each element is read before it is written); a
     * partial overlap is not */
    bool same = c->src.buffer == c->dst.buffer && c->src.offset == c->dst.offset &&
                c->src.dtype == c->dst.dtype;
    uint64_t a0, a1, b0, b1;
    vka_tensor_bytes(&c->src, &a0, &a1);
    vka_tensor_bytes(&c->dst, &b0, &b1);
    if (c->src.buffer == c->dst.buffer && !same && a0 < b1 && b0 < a1)
        return vka_fail(ctx, VKATTN_ERROR_INVALID_ARGUMENT,
                        "args->src and args->dst overlap without being the same range");
    if (!isfinite(args->scale))
        return vka_fail(ctx, VKATTN_ERROR_INVALID_ARGUMENT,
                        "args->scale is %g: it must be finite (0 means 1)", (double)args->scale);
    c->scale = args->scale == 0.0f ? 1.0f : args->scale;
    return VKATTN_SUCCESS;
}

static vkattn_result record_call(vkattn_context *ctx, VkCommandBuffer cmd, const void *job)
{
    const convert_call *c = job;
    return vka_convert_record(ctx, cmd, &c->src, &c->dst, c->scale);
}

/* vkattn_cmd_convert and vkattn_convert */
VKA_OP_ENTRY_POINTS(convert, vkattn_convert_args, convert_call, check_call, record_call)
