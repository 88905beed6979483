/* Shared cases of the quantized-cache tests (test_kv_quant.c: q8_0 and
 * q4_0; test_kv_quant_formats.c: q4_1, q5_0, q5_1, iq4_nl): attention over a
 * cache the append quantized, against the reference on the reference
 * quantizer's values; the append's bytes against the reference
 * quantizer's; the MHA layer's steps over such a cache. */
#ifndef VKATTN_TEST_KV_QUANT_UTIL_H
#define VKATTN_TEST_KV_QUANT_UTIL_H

#include "test_kv_util.h"

typedef struct quant_case {
    uint32_t Hq, Hkv, D;
    vkattn_dtype cdt, src, qdt; /* cache, what appends give it, q and out */
    uint32_t block_size;        /* 0: contiguous */
    uint32_t capacity;
    uint32_t batch;
    uint32_t seqs[MAX_SEQ];
    uint32_t prior[MAX_SEQ];
    uint32_t T;
    uint32_t splits;
    bool merged;
} quant_case;

/* One case on one policy's context: the tolerance of q's dtype against the
 * reference on the quantized values; against the unquantized ones within
 * `bound` (reported). */
void quant_case_run(test_gpu *g, const quant_case *c, uint32_t policy, uint64_t seed, double bound);

/* The append's bytes of `n` caches of dtypes[i] at head dims 64 and 96
 * equal vkattn_ref_quantize's, on every third policy. */
void quant_bytes_check(test_policy_suite *s, const vkattn_dtype *dtypes, int n);

/* The layer's steps over a cache of dtype `dt` (block size `block_size`, 0
 * contiguous; 4 heads of `head_dim`) against vkattn_ref_mha with
 * kv_cache_dtype `dt` within `tol`, on every third policy. */
void quant_layer_steps_check(test_policy_suite *s, vkattn_dtype dt, uint32_t block_size,
                             uint32_t head_dim, double tol);

#endif
