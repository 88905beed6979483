/* Packed ragged batches ("varlen", as FlashAttention's varlen API takes
 * them): sequences concatenated along one token axis, each sequence's
 * tokens [offsets[i], offsets[i + 1]). The rules both vkattn_attention and
 * the reference check, and the per-sequence view of a packed tensor they
 * both run each sequence on. Context-free. */
#ifndef VKA_VARLEN_H
#define VKA_VARLEN_H

#include "spec/attention_shapes.h"
#include "vkattn.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* `offsets` [sequences + 1]: not NULL, offsets[0] 0, nondecreasing, the
 * last `total` (the packed tensor's token count, named `total_name`).
 * Messages name `name` and the offending element. */
vkattn_result vka_varlen_check(const int32_t *offsets, uint32_t sequences, int64_t total,
                               const char *name, const char *total_name, char *error,
                               size_t error_size);

/* A packed call's sizes (`d`, checked by vka_attention_check): one batch
 * row and q of rank 4. Names start with `prefix`. */
vkattn_result vka_varlen_dims_check(const vka_attention_dims *d, const char *prefix, char *error,
                                    size_t error_size);

/* mask, key_padding and weights have no packed form: the first of them
 * given is refused (VKATTN_ERROR_UNSUPPORTED) naming `prefix`<name> and
 * saying what applies per sequence instead (`per_sequence`). */
vkattn_result vka_varlen_refuse_unpacked(bool mask, bool key_padding, bool weights,
                                         const char *prefix, const char *per_sequence, char *error,
                                         size_t error_size);

/* A packed layer call without a keys' input: `k_offsets`, when given, must
 * equal `q_offsets` (the keys are the queries' tokens). */
vkattn_result vka_varlen_same_offsets(uint32_t sequences, const int32_t *q_offsets,
                                      const int32_t *k_offsets, const char *prefix, char *error,
                                      size_t error_size);

/* Both offset arrays of a packed call (`k_offsets` NULL: q_offsets for the
 * keys too) against the packed token counts, and that no sequence has
 * queries but no keys. The counts are named `q_total_name` and
 * `k_total_name` (NULL: attention's q.shape[2] and k.shape[2]). */
typedef struct vka_varlen_totals {
    int64_t q, k;
    const char *q_name, *k_name;
} vka_varlen_totals;
vkattn_result vka_varlen_offsets_check(uint32_t sequences, const int32_t *q_offsets,
                                       const int32_t *k_offsets, vka_varlen_totals totals,
                                       const char *prefix, char *error, size_t error_size);

/* Sequence i's queries [q0, q0 + nq) and keys [k0, k0 + nk). */
typedef struct vka_varlen_seq {
    int64_t q0, nq, k0, nk;
} vka_varlen_seq;
vka_varlen_seq vka_varlen_sequence(const int32_t *q_offsets, const int32_t *k_offsets, uint32_t i);

/* Tokens [start, start + count) along dimension `dim` of a tensor with
 * `shape` and resolved (element) `strides`: shape[dim] becomes count; the
 * returned value is how many bytes after the tensor the view starts
 * (quantized dtypes: strides count values in whole blocks). */
uint64_t vka_varlen_slice(vkattn_dtype dtype, int64_t *shape, const int64_t *strides, uint32_t dim,
                          int64_t start, int64_t count);

#endif
