/* The MHA layer over packed ragged batches (vkattn_mha_forward_args
 * .sequences): the checks of the packed form, and the RoPE positions that
 * restart with every sequence, written into the scratch as the forward is
 * recorded. The projections are per token and the attention op takes the
 * offsets itself, so nothing else differs from a forward of one batch row. */
#include "ops/mha/mha_internal.h"

#include "core/buffer.h"
#include "spec/error_text.h"
#include "spec/varlen.h"

vkattn_result vka_mha_check_packed(vkattn_mha *m, const vkattn_mha_forward_args *a)
{
    vkattn_context *ctx = m->ctx;
    if (a->x.shape[0] != 1)
        return vka_fail(ctx, VKATTN_ERROR_SHAPE_MISMATCH,
                        "args->x.shape[0] is %lld: packed sequences (args->sequences %u) lie one "
                        "after the other along the token axis of one batch row ([1, sum Tq, Dm])",
                        (long long)a->x.shape[0], a->sequences);
    const vkattn_tensor *keys = a->kv.buffer ? &a->kv : &a->x;
    char error[VKA_ERROR_MAX];
    vka_varlen_totals totals = {a->x.shape[1], keys->shape[1], "x.shape[1] (sum Tq)",
                                a->kv.buffer ? "kv.shape[1] (sum Tk)" : "x.shape[1] (sum Tk)"};
    vkattn_result r = vka_varlen_offsets_check(a->sequences, a->q_offsets, a->k_offsets, totals,
                                               "args->", error, sizeof error);
    if (r != VKATTN_SUCCESS)
        return vka_fail(ctx, r, "%s", error);
    if (!a->kv.buffer && a->k_offsets)
        for (uint32_t i = 0; i <= a->sequences; i++)
            if (a->k_offsets[i] != a->q_offsets[i])
                return vka_fail(ctx, VKATTN_ERROR_INVALID_ARGUMENT,
                                "args->k_offsets[%u] is %d but args->q_offsets[%u] is %d: in "
                                "self-attention (args->kv NULL) the keys are the queries' tokens",
                                i, a->k_offsets[i], i, a->q_offsets[i]);
    const struct {
        const vkattn_tensor *t;
        const char *name;
    } refused[] = {{&a->mask, "mask"}, {&a->key_padding, "key_padding"}, {&a->weights, "weights"}};
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++)
        if (refused[i].t->buffer)
            return vka_fail(ctx, VKATTN_ERROR_UNSUPPORTED,
                            "args->%s is given with args->sequences > 0: packed sequences take "
                            "no %s (its shape has no packed form; causal and the layer's "
                            "modifiers apply per sequence)",
                            refused[i].name, refused[i].name);
    if (vka_mha_appends(&m->d) && a->head_mask.buffer && a->head_mask.rank == 2 &&
        a->head_mask.shape[0] > 1)
        return vka_fail(ctx, VKATTN_ERROR_UNSUPPORTED,
                        "args->head_mask has a row per sequence (%lld) on a layer with appended "
                        "rows (desc->add_bias_kv / add_zero_attn): not supported yet; give one "
                        "row [Hq]",
                        (long long)a->head_mask.shape[0]);
    if (vka_mha_packed_positions_needed(m, a) && a->scratch && !a->scratch->transfer_ok)
        return vka_fail(ctx, VKATTN_ERROR_UNSUPPORTED,
                        "args->scratch was wrapped without transfer usage, which packed "
                        "sequences need on a layer with RoPE (their positions are written into "
                        "it): pass args->positions [1, sum Tq], or a scratch with "
                        "VK_BUFFER_USAGE_TRANSFER_DST_BIT");
    return VKATTN_SUCCESS;
}

bool vka_mha_packed_positions_needed(const vkattn_mha *m, const vkattn_mha_forward_args *a)
{
    return a->sequences && m->d.rope.theta != 0.0f && !a->positions.buffer;
}

vkattn_result vka_mha_record_packed_positions(vkattn_mha *m, VkCommandBuffer cmd,
                                              const vkattn_mha_forward_args *a, vkattn_buffer *sbuf,
                                              uint64_t offset, vkattn_tensor *out)
{
    vkattn_context *ctx = m->ctx;
    const uint64_t words = (uint64_t)a->q_offsets[a->sequences];
    int32_t *data = vka_alloc(ctx, (size_t)words * 4);
    if (!data)
        return vka_fail(ctx, VKATTN_ERROR_OUT_OF_HOST_MEMORY,
                        "out of host memory for %llu packed tokens' positions",
                        (unsigned long long)words);
    for (uint32_t s = 0; s < a->sequences; s++)
        for (int32_t t = a->q_offsets[s]; t < a->q_offsets[s + 1]; t++)
            data[t] = t - a->q_offsets[s];
    /* earlier passes over the scratch -> this update -> the projection */
    VkMemoryBarrier before = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
                              .srcAccessMask =
                                  VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT,
                              .dstAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT};
    ctx->vk.vkCmdPipelineBarrier(cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
                                 VK_PIPELINE_STAGE_TRANSFER_BIT, 0, 1, &before, 0, NULL, 0, NULL);
    /* vkCmdUpdateBuffer takes at most 65536 bytes per call */
    for (uint64_t at = 0; at < words; at += 16384) {
        uint64_t n = vka_min_u64(words - at, 16384);
        ctx->vk.vkCmdUpdateBuffer(cmd, sbuf->buffer, offset + at * 4, n * 4, data + at);
    }
    VkMemoryBarrier after = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
                             .srcAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT,
                             .dstAccessMask = VK_ACCESS_SHADER_READ_BIT};
    ctx->vk.vkCmdPipelineBarrier(cmd, VK_PIPELINE_STAGE_TRANSFER_BIT,
                                 VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, 0, 1, &after, 0, NULL, 0,
                                 NULL);
    vka_free(ctx, data);
    int64_t shape[2] = {1, (int64_t)words};
    *out = vkattn_tensor_make(sbuf, offset, VKATTN_DTYPE_I32, 2, shape);
    return VKATTN_SUCCESS;
}
