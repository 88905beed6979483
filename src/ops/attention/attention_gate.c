/* The head mask (HF's head_mask): a gate per (batch row, head) on the
 * attention output, applied in place by head_gate.comp once attention has
 * written it - by vkattn_attention and by the MHA layer's forward and steps,
 * before the output projection reads the merged heads. (The weights kernel
 * reads the gate itself: attention_record.c.) */
#include "ops/attention/attention_internal.h"
#include "spec/attention_shapes.h"
#include "vka_spirv.h"

#include <stdio.h>

#define GATE_WORKGROUP 64u

#define GATE_KERNEL(s)                                                                         \
    {                                                                                          \
        .name = "head_gate_" #s, .spirv = &vka_spirv_head_gate_##s, .binding_count = 2,        \
        .bindings = {VKA_BINDING_STORAGE, VKA_BINDING_STORAGE}, .push_size = sizeof(gate_push) \
    }

typedef struct gate_push {
    uint32_t x_off, x_sb, x_sh, x_st;
    uint32_t g_off, g_sb, g_sh;
    uint32_t batch, heads, tokens, units;
} gate_push;

static const vka_kernel gate_kernels[4] = {
    [VKA_STORAGE_F32] = GATE_KERNEL(f32),
    [VKA_STORAGE_F16] = GATE_KERNEL(f16),
    [VKA_STORAGE_F16P] = GATE_KERNEL(f16p),
    [VKA_STORAGE_BF16] = GATE_KERNEL(bf16),
};

vkattn_result vka_att_check_head_mask(vkattn_context *ctx, const vkattn_tensor *in, uint32_t batch,
                                      uint32_t heads, const char *name, vkattn_tensor *out)
{
    if (!in->buffer) {
        *out = *in;
        return VKATTN_SUCCESS;
    }
    VKA_TRY(vka_tensor_resolve(ctx, in, name, out));
    vka_shape_view view = {true, out->dtype, out->rank, out->shape};
    char why[VKA_ERROR_MAX];
    vkattn_result r = vka_head_mask_check(view, batch, heads, name, why, sizeof why);
    if (r != VKATTN_SUCCESS)
        return vka_fail(ctx, r, "%s", why);
    const uint32_t rank = out->rank;
    /* the weights kernel steps through heads one float at a time */
    if (heads > 1 && out->strides[rank - 1] != 1)
        return vka_fail(ctx, VKATTN_ERROR_INVALID_ARGUMENT,
                        "%s.strides[%u] is %lld: the heads must be contiguous (stride 1)", name,
                        rank - 1, (long long)out->strides[rank - 1]);
    int64_t last = (int64_t)(heads - 1) + (rank == 2 ? (out->shape[0] - 1) * out->strides[0] : 0);
    if (out->strides[0] > UINT32_MAX || (uint64_t)(last + 1) * 4 > vka_storage_window_limit(ctx))
        return vka_fail(ctx, VKATTN_ERROR_UNSUPPORTED,
                        "%s spans %lld floats, more than one binding of this device holds", name,
                        (long long)(last + 1));
    return VKATTN_SUCCESS;
}

uint32_t vka_att_head_mask_batch_stride(const vkattn_tensor *gate)
{
    return gate->rank == 2 && gate->shape[0] > 1 ? (uint32_t)gate->strides[0] : 0;
}

/* One dispatch over x [nb, H, T, D] from batch row b0. */
static vkattn_result gate_rows(vkattn_context *ctx, VkCommandBuffer cmd, vka_pipeline *pipeline,
                               const vkattn_tensor *x, const vkattn_tensor *gate, bool quads,
                               uint32_t b0, uint32_t nb, uint32_t wg)
{
    const uint32_t unit = quads ? 4 : 1;
    const size_t es = vkattn_dtype_size(x->dtype);
    const uint64_t h = (uint64_t)x->shape[1], t = (uint64_t)x->shape[2], d = (uint64_t)x->shape[3];
    uint64_t last = (nb - 1) * (uint64_t)x->strides[0] + (h - 1) * (uint64_t)x->strides[1] +
                    (t - 1) * (uint64_t)x->strides[2] + d;
    vka_binding b[2];
    gate_push push = {0};
    VKA_TRY(vka_bind_window(ctx, x->buffer, x->offset + b0 * (uint64_t)x->strides[0] * es,
                            last * es, unit * es, &b[0], &push.x_off));
    const uint32_t g_sb = vka_att_head_mask_batch_stride(gate);
    uint64_t g_last = (uint64_t)(gate->shape[gate->rank - 1] - 1) +
                      (gate->rank == 2 ? (uint64_t)(gate->shape[0] - 1) * gate->strides[0] : 0);
    VKA_TRY(
        vka_bind_window(ctx, gate->buffer, gate->offset, (g_last + 1) * 4, 4, &b[1], &push.g_off));
    push.g_off += b0 * g_sb;
    push.g_sb = g_sb;
    push.g_sh = 1;
    push.x_sb = (uint32_t)(x->strides[0] / unit);
    push.x_sh = (uint32_t)(x->strides[1] / unit);
    push.x_st = (uint32_t)(x->strides[2] / unit);
    push.batch = nb;
    push.heads = (uint32_t)h;
    push.tokens = (uint32_t)t;
    push.units = (uint32_t)(d / unit);
    uint64_t units = (uint64_t)nb * h * t * push.units;
    uint32_t gx, gy;
    vka_grid_2d(ctx, vka_div_up64(units, wg), &gx, &gy);
    if (units > UINT32_MAX || gy > ctx->info.max_workgroup_count[1])
        return vka_fail(ctx, VKATTN_ERROR_OUT_OF_RANGE,
                        "head mask: %llu elements are too many for one dispatch",
                        (unsigned long long)units);
    return vka_cmd_dispatch(ctx, cmd, pipeline, b, &push, gx, gy, 1);
}

vkattn_result vka_att_record_head_gate(vkattn_context *ctx, VkCommandBuffer cmd,
                                       const vkattn_tensor *x, const vkattn_tensor *gate)
{
    const size_t es = vkattn_dtype_size(x->dtype);
    const uint32_t kind = vka_storage_kind(ctx, x->dtype);
    bool quads = x->shape[3] % 4 == 0 && x->offset % (4 * es) == 0;
    for (int i = 0; i < 3; i++)
        quads = quads && (x->shape[i] == 1 || x->strides[i] % 4 == 0);
    if (!quads && (kind == VKA_STORAGE_F16P || kind == VKA_STORAGE_BF16))
        return vka_fail(ctx, VKATTN_ERROR_UNSUPPORTED,
                        "head mask: a %s tensor kept as pairs in 32-bit words needs rows of whole "
                        "quads",
                        vkattn_dtype_name(x->dtype));
    const uint32_t wg = vka_workgroup_size(ctx, GATE_WORKGROUP);
    uint32_t spec[2] = {wg, !quads};
    vka_pipeline *pipeline;
    VKA_TRY(vka_pipeline_get(ctx, &gate_kernels[kind], spec, 2, &pipeline));
    vka_cmd_compute_barrier(ctx, cmd); /* what attention wrote */
    /* all rows at once where one window holds them, else a batch row at a
     * time (attention's own windows are per row and head at most) */
    const uint32_t batch = (uint32_t)x->shape[0];
    vka_box all = {{0},
                   {(uint64_t)x->shape[0], (uint64_t)x->shape[1], (uint64_t)x->shape[2],
                    (uint64_t)x->shape[3]}};
    if (vka_box_fits_storage(ctx, x, &all))
        return gate_rows(ctx, cmd, pipeline, x, gate, quads, 0, batch, wg);
    for (uint32_t b = 0; b < batch; b++)
        VKA_TRY(gate_rows(ctx, cmd, pipeline, x, gate, quads, b, 1, wg));
    return VKATTN_SUCCESS;
}
