/* vkattn/tuning.h - part of vkattn.h: the tuners.
 * Include <vkattn.h>, which includes every part in order. */
#ifndef VKATTN_TUNING_H
#define VKATTN_TUNING_H

#ifndef VKATTN_H
#error "include <vkattn.h>, not its parts"
#endif

/* ------------------------------------------------------------------ tuning
 *
 * Every op picks its kernel configuration (kernel family, input binding,
 * tile shape, split count) from the device's limits. The tuner confirms or
 * overrides that choice by measurement: it times the op's candidate
 * configurations for one shape class on this device and stores the fastest
 * in the context's tuning data, which later calls of that class use. Save
 * the data (vkattn_context_save_tuning) and load it next time
 * (desc.tuning_path) to tune once per device. Synchronous; seconds on CPU
 * drivers, where every candidate compiles a pipeline. Shape classes bucket
 * the sizes (linear rows by powers of two: 1, 2, 3..4, 5..8, ...; columns
 * and K by <= 256, 1024, 4096, 16384; attention lengths by <= 1, 16, 64,
 * 256, 1024; KV-cache decoding: cache length by <= 256, 1024, 4096, 16384,
 * new tokens by 1, 2, <= 4, <= 8, <= 16), so one tuning serves nearby
 * shapes. */
/* Every tuner is vkattn_<op>_tune(<what the op's call takes>, args) with an
 * args struct of the shapes to tune for (zero dtypes are f32); none of them
 * needs buffers of yours.
 *
 * Progress: every args struct ends with an optional callback (NULL: none)
 * and its user pointer. It is called synchronously, on the caller's thread,
 * from inside the tuner: once before each candidate is timed (candidate 1..
 * count, done false, best_ms the fastest median so far or 0), and once when
 * an op's measurement ends (candidate == count, done true, best_ms the
 * winner's). A layer tuner (vkattn_mha_tune, vkattn_mha_step_tune) measures
 * several ops in turn; each reports under its own op name and shape. The
 * strings live only during the call. The callback must not call vkattn on
 * the same context; it cannot stop the tuner. */
typedef struct vkattn_tune_progress {
    const char *op;    /* "linear", "attention" or "kv_attention" */
    const char *shape; /* the measured shape, e.g. "m=512 n=3072 k=1024 f32/f32" */
    uint32_t candidate, count;
    bool done;
    float best_ms;
} vkattn_tune_progress;
typedef void (*vkattn_tune_progress_fn)(const vkattn_tune_progress *progress, void *user);

/* y [m, n] = x [m, k] W^T: x and y in x_dtype, W in w_dtype. */
typedef struct vkattn_linear_tune_args {
    uint32_t m, n, k;
    vkattn_dtype x_dtype, w_dtype;
    vkattn_tune_progress_fn progress; /* optional (see above) */
    void *progress_user;
} vkattn_linear_tune_args;
VKATTN_API vkattn_result vkattn_linear_tune(vkattn_context *ctx,
                                            const vkattn_linear_tune_args *args);

/* q [batch, num_heads, q_len, head_dim] over k [batch, num_kv_heads,
 * kv_len, head_dim] and v [.., v_head_dim], causal or not; q and out in
 * q_dtype, k and v in kv_dtype. */
typedef struct vkattn_attention_tune_args {
    uint32_t batch, num_heads, num_kv_heads, q_len, kv_len, head_dim;
    bool causal;
    vkattn_dtype q_dtype, kv_dtype;
    vkattn_tune_progress_fn progress; /* optional */
    void *progress_user;
    uint32_t v_head_dim; /* of v and out; 0: head_dim */
} vkattn_attention_tune_args;
VKATTN_API vkattn_result vkattn_attention_tune(vkattn_context *ctx,
                                               const vkattn_attention_tune_args *args);

/* Decode steps over a cache like `cache` (its heads, head dim, dtype and
 * layout): `batch` sequences of `length` tokens, `new_tokens` queries each
 * (1..16, the split-KV path; length >= new_tokens). Times the power-of-two
 * split counts the step can take (at most 8 of them), with q and out in the
 * cache's dtype, and stores the fastest, which kv_splits 0 then uses for
 * that shape class and q dtype (steps whose q dtype differs from the cache's
 * keep the built-in choice). Uses a scratch cache of its own; `cache` is not
 * changed. */
typedef struct vkattn_kv_attention_tune_args {
    vkattn_kv_cache *cache;
    uint32_t batch, new_tokens, length;
    vkattn_tune_progress_fn progress; /* optional */
    void *progress_user;
} vkattn_kv_attention_tune_args;
VKATTN_API vkattn_result vkattn_kv_attention_tune(vkattn_context *ctx,
                                                  const vkattn_kv_attention_tune_args *args);

/* Everything a layer's forward pass with these sizes runs (its GEMMs and
 * attention, causal and not). q_len == kv_len is taken as self-attention
 * (the packed QKV projection of a layer with kv_dim == embed_dim); tune a
 * cross-attention of equal lengths with vkattn_linear_tune for its Q and KV
 * projections. batch x q_len and batch x kv_len must fit 32 bits. */
typedef struct vkattn_mha_tune_args {
    uint32_t batch, q_len, kv_len;
    vkattn_tune_progress_fn progress; /* optional: each op it measures reports */
    void *progress_user;
} vkattn_mha_tune_args;
VKATTN_API vkattn_result vkattn_mha_tune(vkattn_mha *mha, const vkattn_mha_tune_args *args);

/* Everything a step of the layer over `cache` (vkattn_cmd_mha_step) with
 * these sizes runs: `batch` sequences, `new_tokens` each, ending at `length`
 * tokens - the packed QKV projection (appending to a cache takes the plain
 * GEMM's winner), the attention over the cache (its split count, as
 * vkattn_kv_attention_tune, for steps of 1..16 new tokens: longer steps
 * have no tuned choice) and the output projection. Tune decoding with
 * new_tokens 1 and a typical length (cache lengths bucket as for
 * vkattn_kv_attention_tune), a chunked prefill with its chunk size. `cache`
 * must suit the layer as for a step; it is not changed. batch x new_tokens
 * must fit 32 bits. */
typedef vkattn_kv_attention_tune_args vkattn_mha_step_tune_args; /* the same shapes */
VKATTN_API vkattn_result vkattn_mha_step_tune(vkattn_mha *mha,
                                              const vkattn_mha_step_tune_args *args);

#endif /* VKATTN_TUNING_H */
