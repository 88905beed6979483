/* The reference of packed ragged batches: one ordinary reference call per
 * sequence, over views of the packed host tensors (spec/varlen.h). */
#include "ref/ref.h"

#include "spec/error_text.h"
#include "spec/varlen.h"

#include <stdlib.h>
#include <string.h>

static void slice(vkattn_host_tensor *t, uint32_t dim, int64_t start, int64_t count)
{
    t->data = (char *)t->data + vka_varlen_slice(t->dtype, t->shape, t->strides, dim, start, count);
}

/* Sequence i's call over the whole call's resolved (k and v dequantized)
 * tensors, and its head-mask row. */
static void sequence_args(const vkattn_ref_attention_args *args,
                          const vka_ref_attention_plan *whole, const vkattn_host_tensor *head_mask,
                          uint32_t i, vkattn_ref_attention_args *sub)
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
    if (whole->lse.data) {
        sub->lse = whole->lse;
        slice(&sub->lse, 2, s.q0, s.nq);
    }
    sub->head_mask = *head_mask;
    if (head_mask->data && head_mask->rank == 2) {
        if (head_mask->shape[0] > 1)
            sub->head_mask.data = (float *)head_mask->data + (int64_t)i * head_mask->strides[0];
        sub->head_mask.rank = 1;
        sub->head_mask.shape[0] = head_mask->shape[1];
        sub->head_mask.strides[0] = head_mask->strides[1];
    }
}

static vkattn_result check_whole(const vkattn_ref_attention_args *args,
                                 vka_ref_attention_plan *whole, vkattn_host_tensor *head_mask,
                                 char *error, size_t error_size)
{
    VKA_TRY(vka_varlen_refuse_unpacked(args->mask.data, args->key_padding.data, args->weights.data,
                                       "args->", "causal, window and the other modifiers", error,
                                       error_size));
    vkattn_ref_attention_args all = *args;
    all.head_mask = (vkattn_host_tensor){0};
    all.sequences = 0;
    VKA_TRY(vka_ref_attention_prepare(&all, "args->", whole, error, error_size));
    VKA_TRY(vka_varlen_dims_check(&whole->dims, "args->", error, error_size));
    VKA_TRY(vka_varlen_offsets_check(
        args->sequences, args->q_offsets, args->k_offsets,
        (vka_varlen_totals){whole->dims.q_len, whole->dims.kv_len, NULL, NULL}, "args->", error,
        error_size));
    *head_mask = (vkattn_host_tensor){0};
    VKA_TRY(vka_head_mask_check(vka_host_shape_view(&args->head_mask), args->sequences,
                                whole->dims.num_heads, "args->head_mask", error, error_size));
    if (args->head_mask.data)
        VKA_TRY(vka_host_tensor_resolve(&args->head_mask, "args->head_mask", false, head_mask,
                                        error, error_size));
    return VKATTN_SUCCESS;
}

vkattn_result vka_ref_attention_packed(const vkattn_ref_attention_args *args, char *error,
                                       size_t error_size)
{
    vka_ref_attention_plan whole;
    vkattn_host_tensor head_mask;
    VKA_TRY(check_whole(args, &whole, &head_mask, error, error_size));
    float *kf = NULL, *vf = NULL;
    vka_ref_attention_plan *plans = calloc(args->sequences, sizeof *plans);
    double *scratch = NULL;
    vkattn_result r = plans ? VKATTN_SUCCESS : VKATTN_ERROR_OUT_OF_HOST_MEMORY;
    if (!plans)
        vka_error_format(error, error_size, "out of host memory for %u sequences' plans",
                         args->sequences);
    if (r == VKATTN_SUCCESS)
        r = vka_ref_dequantized(&whole.k, "k", &kf, error, error_size);
    if (r == VKATTN_SUCCESS)
        r = vka_ref_dequantized(&whole.v, "v", &vf, error, error_size);
    size_t most = 0;
    for (uint32_t i = 0; r == VKATTN_SUCCESS && i < args->sequences; i++) {
        if (args->q_offsets[i + 1] == args->q_offsets[i])
            continue;
        vkattn_ref_attention_args sub;
        sequence_args(args, &whole, &head_mask, i, &sub);
        char why[512];
        r = vka_ref_attention_prepare(&sub, "args->", &plans[i], why, sizeof why);
        plans[i].dropout_batch = i; /* the mask's b is the sequence */
        if (r != VKATTN_SUCCESS) {
            vka_varlen_seq s = vka_varlen_sequence(args->q_offsets, args->k_offsets, i);
            vka_error_format(error, error_size,
                             "sequence %u (queries from token %lld, keys from %lld): %s", i,
                             (long long)s.q0, (long long)s.k0, why);
        }
        if (plans[i].scratch_doubles > most)
            most = plans[i].scratch_doubles;
    }
    if (r == VKATTN_SUCCESS) {
        scratch = vka_ref_scratch(most, error, error_size);
        r = scratch ? VKATTN_SUCCESS : VKATTN_ERROR_OUT_OF_HOST_MEMORY;
    }
    for (uint32_t i = 0; r == VKATTN_SUCCESS && i < args->sequences; i++)
        if (args->q_offsets[i + 1] != args->q_offsets[i])
            vka_ref_attention_run(&plans[i], scratch);
    free(scratch), free(plans), free(kf), free(vf);
    return r;
}
