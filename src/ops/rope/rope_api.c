/* vkattn_rope: rotary position embeddings on tensors the caller holds - the
 * entry points and the checks (recording: rope_record.c). */
#include "ops/rope/rope_internal.h"
#include "core/host.h"
#include "core/submit.h"
#include "core/tensor.h"
#include "spec/dtype.h"
#include "spec/error_text.h"
#include "spec/rope.h"

#include <string.h>

/* x or out: f32 or f16, rank 4, rows contiguous, 32-bit sizes. */
static vkattn_result check_operand(vkattn_context *ctx, const vkattn_tensor *t, const char *name)
{
    VKA_TRY(vka_tensor_check_float(ctx, t, name, "vkattn_rope"));
    if (t->rank != 4)
        return vka_fail(ctx, VKATTN_ERROR_INVALID_ARGUMENT,
                        "%s.rank is %u: vkattn_rope takes [B, H, T, D] (rank 4)", name, t->rank);
    for (uint32_t i = 0; i < 4; i++)
        if ((uint64_t)t->shape[i] > UINT32_MAX)
            return vka_fail(ctx, VKATTN_ERROR_OUT_OF_RANGE,
                            "%s.shape[%u] is %lld: at most 2^32 - 1", name, i,
                            (long long)t->shape[i]);
    return vka_tensor_check_rows(ctx, t, name, 1, (uint32_t)vkattn_dtype_size(t->dtype));
}

/* out: optional (in place), else x's shape and dtype, and x itself or
 * disjoint from it. */
static vkattn_result check_out(vkattn_context *ctx, const vkattn_rope_args *args, vka_rope_call *c)
{
    if (!args->out.buffer) {
        c->out = c->x;
    } else {
        VKA_TRY(vka_tensor_resolve(ctx, &args->out, "args->out", &c->out));
        VKA_TRY(check_operand(ctx, &c->out, "args->out"));
        if (c->out.dtype != c->x.dtype)
            return vka_fail(ctx, VKATTN_ERROR_SHAPE_MISMATCH,
                            "args->out.dtype %s differs from args->x.dtype %s: out has x's dtype",
                            vkattn_dtype_name(c->out.dtype), vkattn_dtype_name(c->x.dtype));
        for (uint32_t i = 0; i < 4; i++)
            if (c->out.shape[i] != c->x.shape[i])
                return vka_fail(ctx, VKATTN_ERROR_SHAPE_MISMATCH,
                                "args->out.shape[%u] %lld differs from args->x.shape[%u] %lld", i,
                                (long long)c->out.shape[i], i, (long long)c->x.shape[i]);
    }
    c->in_place = c->out.buffer == c->x.buffer && c->out.offset == c->x.offset &&
                  memcmp(c->out.strides, c->x.strides, sizeof c->x.strides) == 0;
    VKA_TRY(vka_tensor_check_output(ctx, &c->out, c->in_place ? "args->x" : "args->out"));
    if (!c->in_place)
        VKA_TRY(vka_tensor_check_disjoint(ctx, &c->out, "args->out", &c->x, "args->x"));
    return VKATTN_SUCCESS;
}

/* positions: int32 [B, T] contiguous, apart from out; or the offset, with
 * offset + T - 1 in range. */
static vkattn_result check_positions(vkattn_context *ctx, const vkattn_rope_args *args,
                                     vka_rope_call *c)
{
    const int64_t B = c->x.shape[0], T = c->x.shape[2];
    memset(&c->positions, 0, sizeof c->positions);
    c->position_offset = args->position_offset;
    if (!args->positions.buffer) {
        if ((int64_t)args->position_offset + T - 1 > VKATTN_ROPE_MAX_POSITION)
            return vka_fail(ctx, VKATTN_ERROR_INVALID_ARGUMENT,
                            "args->position_offset %u + T %lld - 1 exceeds "
                            "VKATTN_ROPE_MAX_POSITION %d",
                            args->position_offset, (long long)T, VKATTN_ROPE_MAX_POSITION);
        return VKATTN_SUCCESS;
    }
    vkattn_tensor p;
    VKA_TRY(vka_tensor_resolve(ctx, &args->positions, "args->positions", &p));
    if (p.dtype != VKATTN_DTYPE_I32) {
        char b[VKA_DTYPE_TEXT];
        return vka_fail(ctx, VKATTN_ERROR_UNSUPPORTED_DTYPE,
                        "args->positions.dtype is %s: positions are int32",
                        vka_dtype_text(p.dtype, b));
    }
    if (p.rank != 2)
        return vka_fail(ctx, VKATTN_ERROR_INVALID_ARGUMENT,
                        "args->positions.rank is %u: positions are rank 2 [B, T]", p.rank);
    if (p.shape[0] != B || p.shape[1] != T)
        return vka_fail(ctx, VKATTN_ERROR_SHAPE_MISMATCH,
                        "args->positions.shape is [%lld, %lld]: it must be [B %lld, T %lld]",
                        (long long)p.shape[0], (long long)p.shape[1], (long long)B, (long long)T);
    if (!vka_tensor_is_contiguous(&p))
        return vka_fail(ctx, VKATTN_ERROR_INVALID_ARGUMENT,
                        "args->positions.strides are {%lld, %lld}: positions must be contiguous "
                        "{%lld, 1}",
                        (long long)p.strides[0], (long long)p.strides[1], (long long)T);
    VKA_TRY(vka_tensor_check_disjoint(ctx, &c->out, c->in_place ? "args->x" : "args->out", &p,
                                      "args->positions"));
    c->positions = p;
    return VKATTN_SUCCESS;
}

static vkattn_result check_call(vkattn_context *ctx, const void *args_in, void *call)
{
    const vkattn_rope_args *args = args_in;
    vka_rope_call *c = call;
    memset(c, 0, sizeof *c);
    VKA_TRY(vka_tensor_resolve(ctx, &args->x, "args->x", &c->x));
    VKA_TRY(check_operand(ctx, &c->x, "args->x"));
    VKA_TRY(check_out(ctx, args, c));
    if (args->rope.theta == 0.0f) /* "no RoPE" only in a layer's desc */
        return vka_fail(ctx, VKATTN_ERROR_INVALID_ARGUMENT,
                        "args->rope.theta is 0: vkattn_rope needs a base (Llama 2: 10000)");
    char error[VKA_ERROR_MAX];
    vkattn_result r = vka_rope_resolve(&args->rope, (uint32_t)c->x.shape[3], "args->rope", &c->rope,
                                       error, sizeof error);
    if (r != VKATTN_SUCCESS)
        return vka_fail(ctx, r, "%s", error);
    return check_positions(ctx, args, c);
}

static vkattn_result record_call(vkattn_context *ctx, VkCommandBuffer cmd, const void *job)
{
    return vka_rope_record(ctx, cmd, job);
}

/* vkattn_cmd_rope and vkattn_rope */
VKA_OP_ENTRY_POINTS(rope, vkattn_rope_args, vka_rope_call, check_call, record_call)
