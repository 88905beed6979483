/* Packed ragged batches (vkattn_attention_args.sequences): the call is
 * checked as a whole, then as one ordinary call per sequence over views of
 * the packed tensors; each sequence records its own passes, so no padding
 * is ever computed. */
#include "ops/attention/attention_internal.h"

#include "core/record.h"
#include "spec/error_text.h"
#include "spec/varlen.h"

#include <string.h>

static void slice(vkattn_tensor *t, uint32_t dim, int64_t start, int64_t count)
{
    t->offset += vka_varlen_slice(t->dtype, t->shape, t->strides, dim, start, count);
}

/* Sequence i's call: the whole call's resolved tensors cut to its rows. */
static void sequence_args(const vkattn_attention_args *args, const vka_att_problem *whole,
                          const vkattn_tensor *head_mask, uint32_t i, vkattn_attention_args *sub)
{
    vka_varlen_seq s = vka_varlen_sequence(args->q_offsets, args->k_offsets, i);
    *sub = *args;
    sub->sequences = 0;
    sub->q_offsets = sub->k_offsets = NULL;
    sub->q = whole->q, sub->k = whole->k, sub->v = whole->v, sub->out = whole->out;
    slice(&sub->q, 2, s.q0, s.nq);
    slice(&sub->out, 2, s.q0, s.nq);
    slice(&sub->k, 2, s.k0, s.nk);
    slice(&sub->v, 2, s.k0, s.nk);
    if (whole->lse.buffer) {
        sub->lse = whole->lse;
        slice(&sub->lse, 2, s.q0, s.nq);
    }
    sub->head_mask = *head_mask;
    if (head_mask->buffer && head_mask->rank == 2) { /* its row i (or its only row) */
        if (head_mask->shape[0] > 1)
            sub->head_mask.offset += (uint64_t)i * (uint64_t)head_mask->strides[0] * 4u;
        sub->head_mask.rank = 1;
        sub->head_mask.shape[0] = head_mask->shape[1];
        sub->head_mask.strides[0] = head_mask->strides[1];
    }
}

/* The whole call: everything but the head mask as one batch row of
 * sum Tq queries and sum Tk keys (shapes, dtypes, strides, overlaps), the
 * head mask against the sequences, the offsets. */
static vkattn_result check_whole(vkattn_context *ctx, const vkattn_attention_args *args,
                                 vka_att_problem *whole, vkattn_tensor *head_mask)
{
    char error[VKA_ERROR_MAX];
    vkattn_result r = vka_varlen_refuse_unpacked(
        args->mask.buffer, args->key_padding.buffer, args->weights.buffer, "args->",
        "causal, window and the other modifiers", error, sizeof error);
    if (r != VKATTN_SUCCESS)
        return vka_fail(ctx, r, "%s", error);
    vkattn_attention_args all = *args;
    all.head_mask = (vkattn_tensor){0};
    all.sequences = 0;
    VKA_TRY(vka_att_validate(ctx, &all, whole));
    r = vka_varlen_dims_check(&whole->dims, "args->", error, sizeof error);
    if (r == VKATTN_SUCCESS)
        r = vka_varlen_offsets_check(
            args->sequences, args->q_offsets, args->k_offsets,
            (vka_varlen_totals){whole->dims.q_len, whole->dims.kv_len, NULL, NULL}, "args->", error,
            sizeof error);
    if (r != VKATTN_SUCCESS)
        return vka_fail(ctx, r, "%s", error);
    return vka_att_check_head_mask(ctx, &args->head_mask, args->sequences, whole->dims.num_heads,
                                   "args->head_mask", head_mask);
}

/* Sequence i's problem; a refusal names the sequence and its offsets. */
static vkattn_result check_sequence(vkattn_context *ctx, const vkattn_attention_args *args,
                                    const vka_att_problem *whole, const vkattn_tensor *head_mask,
                                    uint32_t i, vka_att_problem *p)
{
    vkattn_attention_args sub;
    sequence_args(args, whole, head_mask, i, &sub);
    vkattn_result r = vka_att_validate(ctx, &sub, p);
    if (r != VKATTN_SUCCESS) {
        char why[VKA_ERROR_MAX];
        memcpy(why, ctx->last_error, sizeof why);
        vka_varlen_seq s = vka_varlen_sequence(args->q_offsets, args->k_offsets, i);
        return vka_fail(ctx, r, "sequence %u (queries from token %lld, keys from %lld): %s", i,
                        (long long)s.q0, (long long)s.k0, why);
    }
    return VKATTN_SUCCESS;
}

vkattn_result vka_att_packed_validate(vkattn_context *ctx, const vkattn_attention_args *args,
                                      vka_att_problem *whole)
{
    vkattn_tensor head_mask;
    VKA_TRY(check_whole(ctx, args, whole, &head_mask));
    for (uint32_t i = 0; i < args->sequences; i++) {
        if (args->q_offsets[i + 1] == args->q_offsets[i])
            continue;
        vka_att_problem p;
        VKA_TRY(check_sequence(ctx, args, whole, &head_mask, i, &p));
    }
    return VKATTN_SUCCESS;
}

vkattn_result vka_att_packed_record(vkattn_context *ctx, VkCommandBuffer cmd,
                                    const vkattn_attention_args *args, const vka_att_problem *whole)
{
    vkattn_tensor head_mask;
    VKA_TRY(vka_att_check_head_mask(ctx, &args->head_mask, args->sequences, whole->dims.num_heads,
                                    "args->head_mask", &head_mask));
    bool recorded = false;
    for (uint32_t i = 0; i < args->sequences; i++) {
        if (args->q_offsets[i + 1] == args->q_offsets[i])
            continue;
        vka_att_problem p;
        VKA_TRY(check_sequence(ctx, args, whole, &head_mask, i, &p));
        /* Neighbouring sequences' bindings may share the aligned bytes
         * around their boundary: each waits for the one before. */
        if (recorded)
            vka_cmd_compute_barrier(ctx, cmd);
        recorded = true;
        VKA_TRY(vka_att_record(ctx, cmd, &p));
    }
    return VKATTN_SUCCESS;
}
