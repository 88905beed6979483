/* Shared scaffolding of the KV-cache attention tests (test_kv_attention.c,
 * test_kv_attention_errors.c): a cache with its host mirror, appends
 * prepared on the host, q/out tensors, the per-sequence CPU reference. */
#ifndef VKATTN_TEST_KV_UTIL_H
#define VKATTN_TEST_KV_UTIL_H

#include "test_policy.h"
#include "test_util.h"

#define MAX_SEQ 8
#define F32 VKATTN_DTYPE_F32
#define F16 VKATTN_DTYPE_F16
#define BF16 VKATTN_DTYPE_BF16

/* A cache and its host mirror. */
typedef struct kv_host {
    vkattn_kv_cache *cache;
    vkattn_kv_cache_desc d;
    /* [max_sequences][Hkv][capacity][Dk] and [..][Dv], values as stored (rounded) */
    float *k, *v;
    uint32_t len[MAX_SEQ];
    /* a quantized cache: the dtype appends give it (set after create; 0:
     * f32), and the values before quantization (k, v hold them quantized
     * and dequantized by the reference, as the kernels read them) */
    vkattn_dtype src;
    float *k0, *v0;
} kv_host;

/* Whether `dt` is a quantized dtype (q8_0, q4_0, q4_1, q5_0, q5_1, iq4_nl). */
bool kv_quantized(vkattn_dtype dt);

void kv_host_create(test_gpu *g, const vkattn_kv_cache_desc *d, kv_host *h);
void kv_host_destroy(kv_host *h);

/* A device buffer holding `n` values in `dt` (odd sizes with room behind:
 * lavapipe compiles extra variants for power-of-two buffers). */
vkattn_buffer *kv_buffer_of(vkattn_context *ctx, const float *vals, size_t n, vkattn_dtype dt);

/* An append prepared on the host: T random tokens for each of `seqs`,
 * already in the host mirror (lengths advanced), and its input buffers
 * (buffers cannot be uploaded while the context's command buffer records). */
typedef struct pending_append {
    uint32_t seqs[MAX_SEQ];
    vkattn_buffer *k, *v;
    vkattn_kv_append_args a;
} pending_append;

void prepare_append(vkattn_context *ctx, kv_host *h, uint32_t batch, const uint32_t *seqs,
                    uint32_t T, test_rng *rng, pending_append *p);
void pending_free(pending_append *p);
/* Prepares, records, submits; checks the cache's lengths afterwards. */
void kv_append(vkattn_context *ctx, kv_host *h, uint32_t batch, const uint32_t *seqs, uint32_t T,
               test_rng *rng);

/* The reference: q [B, Hq, T, Dk] (host, contiguous) over each sequence's
 * whole mirror, causal with Tq = T, Tk = its length; want [B, Hq, T, Dv]. */
void kv_reference(const kv_host *h, uint32_t batch, const uint32_t *seqs, uint32_t Hq, uint32_t T,
                  float scale, float *q, float *want);

/* q and out of one attention call on the device. out is [B, Hq, T, DV], or
 * the MHA layer's merged [B, T, Hq*DV] through strides; it starts as NaN. */
typedef struct att_io {
    uint32_t batch, Hq, T, D, DV;
    vkattn_dtype dt;
    bool merged;
    float *q; /* host [B, Hq, T, D], rounded to dt */
    vkattn_buffer *qb, *ob;
    vkattn_tensor qt, ot;
} att_io;

void att_io_create(vkattn_context *ctx, att_io *io, uint32_t batch, uint32_t Hq, uint32_t T,
                   uint32_t D, vkattn_dtype dt, bool merged, test_rng *rng);
/* ... with q's head dim D and out's DV */
void att_io_create2(vkattn_context *ctx, att_io *io, uint32_t batch, uint32_t Hq, uint32_t T,
                    uint32_t D, uint32_t DV, vkattn_dtype dt, bool merged, test_rng *rng);
/* The output in [B, Hq, T, DV] order. */
void att_io_result(vkattn_context *ctx, const att_io *io, float *got);
void att_io_destroy(att_io *io);
vkattn_kv_attention_args att_args(kv_host *h, const att_io *io, const uint32_t *seqs, float scale,
                                  uint32_t splits);

/* Tests of test_kv_attention_errors.c (a test_policy_suite in *state). */
void test_kv_errors(void **state);

#endif
