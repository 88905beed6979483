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
    if (r == VKATTN_SUCCESS && !a->kv.buffer)
        r = vka_varlen_same_offsets(a->sequences, a->q_offsets, a->k_offsets, "args->", error,
                                    sizeof error);
    if (r == VKATTN_SUCCESS)
        r = vka_varlen_refuse_unpacked(a->mask.buffer, a->key_padding.buffer, a->weights.buffer,
                                       "args->", "causal and the layer's modifiers", error,
                                       sizeof error);
    if (r != VKATTN_SUCCESS)
        return vka_fail(ctx, r, "%s", error);
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
    uint32_t *data = vka_alloc(ctx, (size_t)words * 4); /* int32 positions, all >= 0 */
    if (!data)
        return vka_fail(ctx, VKATTN_ERROR_OUT_OF_HOST_MEMORY,
                        "out of host memory for %llu packed tokens' positions",
                        (unsigned long long)words);
    for (uint32_t s = 0; s < a->sequences; s++)
        for (int32_t t = a->q_offsets[s]; t < a->q_offsets[s + 1]; t++)
            data[t] = (uint32_t)(t - a->q_offsets[s]);
    /* earlier passes over the scratch -> this update -> the projection */
    vka_cmd_update_words(ctx, cmd, sbuf->buffer, offset, data, words);
    vka_free(ctx, data);
    int64_t shape[2] = {1, (int64_t)words};
    *out = vkattn_tensor_make(sbuf, offset, VKATTN_DTYPE_I32, 2, shape);
    return VKATTN_SUCCESS;
}
