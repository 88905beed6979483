/* Packed ragged batches: the offsets' rules and the per-sequence views. */
#include "spec/varlen.h"

#include "spec/error_text.h"

vkattn_result vka_varlen_check(const int32_t *offsets, uint32_t sequences, int64_t total,
                               const char *name, const char *total_name, char *error,
                               size_t error_size)
{
    if (!offsets) {
        vka_error_format(error, error_size,
                         "%s is NULL: packed sequences need %u + 1 start offsets", name, sequences);
        return VKATTN_ERROR_INVALID_ARGUMENT;
    }
    if (offsets[0] != 0) {
        vka_error_format(error, error_size, "%s[0] is %d: the first sequence starts at token 0",
                         name, offsets[0]);
        return VKATTN_ERROR_INVALID_ARGUMENT;
    }
    for (uint32_t i = 1; i <= sequences; i++)
        if (offsets[i] < offsets[i - 1]) {
            vka_error_format(error, error_size,
                             "%s[%u] is %d, less than %s[%u] (%d): offsets must not decrease", name,
                             i, offsets[i], name, i - 1, offsets[i - 1]);
            return VKATTN_ERROR_INVALID_ARGUMENT;
        }
    if ((int64_t)offsets[sequences] != total) {
        vka_error_format(error, error_size,
                         "%s[%u] (the end of the last sequence) is %d but %s is %lld: the "
                         "sequences must cover the packed tokens exactly",
                         name, sequences, offsets[sequences], total_name, (long long)total);
        return VKATTN_ERROR_INVALID_ARGUMENT;
    }
    return VKATTN_SUCCESS;
}

uint64_t vka_varlen_slice(vkattn_dtype dtype, int64_t *shape, const int64_t *strides, uint32_t dim,
                          int64_t start, int64_t count)
{
    shape[dim] = count;
    return vkattn_dtype_row_bytes(dtype, (uint64_t)start * (uint64_t)strides[dim]);
}

vkattn_result vka_varlen_dims_check(const vka_attention_dims *d, const char *prefix, char *error,
                                    size_t error_size)
{
    if (!prefix)
        prefix = "";
    if (d->q_broadcast || d->batch != 1) {
        vka_error_format(error, error_size,
                         "%sq.shape is not [1, Hq, sum Tq, Dk]: packed sequences (%ssequences > "
                         "0) lie one after the other along the token axis of one batch row",
                         prefix, prefix);
        return VKATTN_ERROR_SHAPE_MISMATCH;
    }
    return VKATTN_SUCCESS;
}

vkattn_result vka_varlen_offsets_check(uint32_t sequences, const int32_t *q_offsets,
                                       const int32_t *k_offsets, vka_varlen_totals totals,
                                       const char *prefix, char *error, size_t error_size)
{
    if (!prefix)
        prefix = "";
    char qn[64], kn[64], qt[96], kt[96];
    vka_error_format(qn, sizeof qn, "%sq_offsets", prefix);
    vka_error_format(kn, sizeof kn, "%s%s", prefix, k_offsets ? "k_offsets" : "q_offsets");
    vka_error_format(qt, sizeof qt, "%s%s", prefix,
                     totals.q_name ? totals.q_name : "q.shape[2] (sum Tq)");
    vka_error_format(kt, sizeof kt, "%s%s", prefix,
                     totals.k_name ? totals.k_name : "k.shape[2] (sum Tk)");
    VKA_TRY(vka_varlen_check(q_offsets, sequences, totals.q, qn, qt, error, error_size));
    const int32_t *ko = k_offsets ? k_offsets : q_offsets;
    VKA_TRY(vka_varlen_check(ko, sequences, totals.k, kn, kt, error, error_size));
    for (uint32_t i = 0; i < sequences; i++) {
        vka_varlen_seq q = vka_varlen_sequence(q_offsets, k_offsets, i);
        if (q.nq > 0 && q.nk == 0) {
            vka_error_format(error, error_size,
                             "sequence %u has %lld queries but no keys (%s[%u] = %s[%u] = %d)", i,
                             (long long)q.nq, kn, i, kn, i + 1, ko[i]);
            return VKATTN_ERROR_INVALID_ARGUMENT;
        }
    }
    return VKATTN_SUCCESS;
}

vka_varlen_seq vka_varlen_sequence(const int32_t *q_offsets, const int32_t *k_offsets, uint32_t i)
{
    const int32_t *ko = k_offsets ? k_offsets : q_offsets;
    vka_varlen_seq s = {q_offsets[i], (int64_t)q_offsets[i + 1] - q_offsets[i], ko[i],
                        (int64_t)ko[i + 1] - ko[i]};
    return s;
}

vkattn_result vka_varlen_refuse_unpacked(bool mask, bool key_padding, bool weights,
                                         const char *prefix, const char *per_sequence, char *error,
                                         size_t error_size)
{
    const char *name = mask ? "mask" : key_padding ? "key_padding" : weights ? "weights" : NULL;
    if (!name)
        return VKATTN_SUCCESS;
    if (!prefix)
        prefix = "";
    vka_error_format(error, error_size,
                     "%s%s is given with %ssequences > 0: packed sequences take no %s (its shape "
                     "has no packed form; %s apply per sequence)",
                     prefix, name, prefix, name, per_sequence);
    return VKATTN_ERROR_UNSUPPORTED;
}

vkattn_result vka_varlen_same_offsets(uint32_t sequences, const int32_t *q_offsets,
                                      const int32_t *k_offsets, const char *prefix, char *error,
                                      size_t error_size)
{
    if (!prefix)
        prefix = "";
    for (uint32_t i = 0; k_offsets && i <= sequences; i++)
        if (k_offsets[i] != q_offsets[i]) {
            vka_error_format(error, error_size,
                             "%sk_offsets[%u] is %d but %sq_offsets[%u] is %d: in self-attention "
                             "(%skv NULL) the keys are the queries' tokens",
                             prefix, i, k_offsets[i], prefix, i, q_offsets[i], prefix);
            return VKATTN_ERROR_INVALID_ARGUMENT;
        }
    return VKATTN_SUCCESS;
}
