/* The score modifiers of attention (sliding window, softcap, sinks, ALiBi,
 * causal alignment), its LSE output and dropout, checked without a context: the CPU
 * reference, vkattn_attention and vkattn_kv_attention accept and refuse the
 * same arguments with the same messages. */
#ifndef VKA_SCORE_MODS_H
#define VKA_SCORE_MODS_H

#include "spec/attention_shapes.h"
#include "vkattn.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* What a call asks for (the args' fields; tensors as shape views). */
typedef struct vka_score_mods_args {
    vkattn_causal_align causal_align;
    uint32_t window;
    float softcap;
    float alibi_max_bias;
    vka_shape_view sinks, alibi_slopes, lse;
    float dropout_p; /* 0: none */
    uint64_t dropout_seed;
} vka_score_mods_args;

/* What the kernels and the reference apply. */
typedef struct vka_score_mods {
    bool top_left;        /* queries at i (else i + Tk - Tq) */
    uint32_t window;      /* 0: none */
    float softcap;        /* 0: none */
    bool sinks;           /* a sinks tensor [Hq] is read */
    bool alibi;           /* slopes from the tensor or from alibi_max_bias */
    bool alibi_slopes;    /* ... from the tensor */
    float alibi_max_bias; /* > 0 when alibi && !alibi_slopes */
    bool lse;             /* an LSE output [B, Hq, Tq] is written */
    /* Dropout (see "attention semantics"): a probability is kept when
     * vkattn_dropout_bits(dropout_seed, b, h, i, j) >= dropout_threshold,
     * and then scaled by 1 / (1 - dropout_p): dropout_scale holds that as a
     * float for the kernels (the reference computes it in double). */
    bool dropout; /* dropout_p > 0 */
    float dropout_p;
    uint32_t dropout_threshold; /* vkattn_dropout_threshold(dropout_p) */
    float dropout_scale;
    uint64_t dropout_seed;
} vka_score_mods;

/* Checks `in` for a call of `dims` (from vka_attention_check); `prefix`
 * starts every name ("args->"). `kv_path`: attention over a KV cache, where
 * top-left alignment has no meaning and dropout (training) neither: both
 * refused. Fills `out` (may be NULL) on
 * success. Codes: VKATTN_ERROR_INVALID_ARGUMENT (values, ranks),
 * VKATTN_ERROR_SHAPE_MISMATCH, VKATTN_ERROR_UNSUPPORTED_DTYPE. */
vkattn_result vka_score_mods_check(const vka_score_mods_args *in, const vka_attention_dims *dims,
                                   const char *prefix, bool kv_path, vka_score_mods *out,
                                   char *error, size_t error_size);

/* The standard ALiBi slope of head h of num_heads for max_bias B (see
 * "attention semantics"), in double. */
double vka_alibi_slope(uint32_t num_heads, double max_bias, uint32_t h);

#endif
