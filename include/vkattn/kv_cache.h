/* vkattn/kv_cache.h - part of vkattn.h: the KV cache, attention over it, the MHA layer's steps and frame budgets.
 * Include <vkattn.h>, which includes every part in order. */
#ifndef VKATTN_KV_CACHE_H
#define VKATTN_KV_CACHE_H

#ifndef VKATTN_H
#error "include <vkattn.h>, not its parts"
#endif

/* ---------------------------------------------------------------- KV cache
 *
 * The keys and values of one layer for up to `max_sequences` sequences, each
 * with its own length (ragged batches). One API, two layouts:
 *  - contiguous (block_size 0): K and V are [max_sequences, Hkv,
 *    capacity, Dk] and [.., Dv], sequence s owning row s;
 *  - paged (block_size > 0): K and V are pools of num_blocks blocks of
 *    [Hkv, block_size, Dk] and [.., Dv]; every sequence has a block table, takes blocks
 *    from the pool as it grows and gives them back when truncated, so
 *    sequences of very different lengths share the memory.
 * Sequences are numbered 0 .. max_sequences-1; all start empty. The cache
 * also holds the scratch of split-KV decoding (partial results of up to
 * VKATTN_KV_MAX_SPLIT_ROWS splits x new tokens per query head and sequence),
 * which is why it knows the number of query heads.
 *
 * Appending happens when a step is recorded (vkattn_cmd_mha_step,
 * vkattn_cmd_kv_cache_append): the cache's lengths and block tables advance
 * on the host at that moment and the recorded commands carry the positions
 * they need. So steps on one cache must be executed in the order they were
 * recorded, on one queue, and a recorded step must be submitted (or the
 * sequence truncated back). A call that fails leaves the cache unchanged.
 * Threading: externally synchronized, like the context it belongs to. */
typedef struct vkattn_kv_cache vkattn_kv_cache;

/* Split-KV decoding: kv_splits x new tokens per step is at most this. */
#define VKATTN_KV_MAX_SPLIT_ROWS 64

typedef struct vkattn_kv_cache_desc {
    uint32_t num_kv_heads; /* Hkv, required */
    uint32_t num_heads;    /* Hq of the queries that attend to it; 0: num_kv_heads */
    /* Dk, the head dim of K (and of the queries), required: 1 to 576. A
     * quantized cache keeps rows of whole 32-value blocks: a head dim that is
     * not a multiple of 32 (Phi-2's 80) is padded with zeros to one (80: 3
     * blocks; memory counts the padding; the kernels never read the padded
     * values). In q8_0, q4_0, q5_0 and iq4_nl, whose blocks share 32-bit
     * words, rows of an odd number of blocks are written through
     * device-scope atomics, which a borrowed device with vulkanMemoryModel
     * enabled must allow: vulkanMemoryModelDeviceScope. A float cache keeps
     * a size that is not a multiple of 8 zero-padded to one (memory counts
     * the padding); such sizes take the slower paths of "attention
     * semantics" (include/vkattn/ops.h), as do those above 256. */
    uint32_t head_dim;
    /* Dv, the head dim of V (and of the output); 0: head_dim. Same rules.
     * DeepSeek's MLA: 192 and 128 (K with its rotary part), or 576 and 512
     * with one KV head (the absorbed form). */
    uint32_t v_head_dim;
    /* f32 (default), f16, bf16, or quantized: q8_0, q4_0, q4_1, q5_0, q5_1
     * or iq4_nl, ggml's blocks of 32 values along Dh (layouts:
     * vkattn_dtype), quantized as ggml's reference quantizers do. A quantized cache is
     * filled by vkattn_cmd_kv_cache_append, which quantizes f32, f16 or
     * bf16 K/V as it writes them (exactly as vkattn_ref_quantize, on devices
     * whose f32 division is correctly rounded, as CPU drivers' is; others
     * may put a value lying within an f32 rounding of a step boundary one
     * step away), and read by vkattn_cmd_kv_attention, whose kernels
     * dequantize the blocks they read: no dequantized copy exists. Decode
     * steps (T <= 16) read the blocks through 16-byte texel views where the
     * device has them, its subgroups have 8 lanes or more, and K and V
     * share a head dim of 32, 64, 128 or 256 (any block_size); the rest
     * read 32-bit words. The MHA layer's steps take
     * any cache dtype under any layer dtype (an f32 layer keeping an f16,
     * bf16 or quantized cache, say): where it differs from the layer's,
     * their projection writes K and V to the step's scratch and the same
     * append as vkattn_cmd_kv_cache_append converts (rounding to nearest
     * even) or quantizes them into the cache. */
    vkattn_dtype dtype;
    uint32_t max_sequences; /* required */
    uint32_t capacity;      /* the most tokens one sequence can hold, required */
    uint32_t block_size;    /* 0: contiguous; else tokens per block (paged) */
    /* paged pool; 0: enough for every sequence at capacity, or with a
     * window, for steps of up to block_size tokens: ceil((window - 1 +
     * 2 block_size) / block_size) + 1 blocks per sequence (at most its
     * capacity's) */
    uint32_t num_blocks;
    /* A sliding-window layer's cache (0: keep everything; paged only: a
     * contiguous cache with a window is refused, VKATTN_ERROR_INVALID_ARGUMENT):
     * after each append of T tokens to a sequence of L (steps and
     * vkattn_cmd_kv_cache_append), the blocks holding only tokens older than
     * the window of its first new token (before L - window + 1) go back to
     * the pool, so a sequence holds about window + T tokens of blocks, not
     * its history. Attention over it needs a window of 1..this (else
     * VKATTN_ERROR_INVALID_ARGUMENT), and its queries must be the ones of
     * the last append (or fewer): a call whose windows reach tokens already
     * given back fails with VKATTN_ERROR_OUT_OF_RANGE, as does a truncate to
     * a length whose next token's window was given back. Lengths still count
     * every token. */
    uint32_t window;
} vkattn_kv_cache_desc;

/* What a cache needs, before creating it: bytes of K and V per token of one
 * layer (Hkv * the bytes of a row of Dk and of Dv values: each rounded up
 * to a multiple of 8 times the dtype size, or D / 32 blocks of 34 (q8_0), 24
 * (q5_1), 22 (q5_0), 20 (q4_1) or 18 (q4_0, iq4_nl) bytes) and the device memory it would allocate. */
VKATTN_API vkattn_result vkattn_kv_cache_memory(const vkattn_kv_cache_desc *desc,
                                                uint64_t *bytes_per_token, uint64_t *total_bytes,
                                                char *error, size_t error_size);
VKATTN_API vkattn_result vkattn_kv_cache_create(vkattn_context *ctx,
                                                const vkattn_kv_cache_desc *desc,
                                                vkattn_kv_cache **out);
VKATTN_API void vkattn_kv_cache_destroy(vkattn_kv_cache *cache);
/* The resolved configuration (num_blocks filled in). */
VKATTN_API const vkattn_kv_cache_desc *vkattn_kv_cache_config(const vkattn_kv_cache *cache);
/* Tokens held by a sequence. */
VKATTN_API vkattn_result vkattn_kv_cache_length(const vkattn_kv_cache *cache, uint32_t sequence,
                                                uint32_t *length);
/* Forgets the tokens of a sequence from `length` on (0: reset), giving
 * whole blocks back to the pool. The caller must make sure no pending GPU
 * work still reads them. */
VKATTN_API vkattn_result vkattn_kv_cache_truncate(vkattn_kv_cache *cache, uint32_t sequence,
                                                  uint32_t length);
/* Blocks left in the pool (paged), or 0 for a contiguous cache. */
VKATTN_API uint32_t vkattn_kv_cache_free_blocks(const vkattn_kv_cache *cache);

/* Appends T new keys and values per sequence, from tensors of your own:
 * k [B, Hkv, T, Dk] and v [B, Hkv, T, Dv] (B = batch), f32, f16 or bf16
 * (each its own), converted to a float cache's dtype (rounding to nearest
 * even) or quantized as they are written, last
 * dimension contiguous, the same T (with a head dim that is not a multiple
 * of 4, strides and offsets are free; else multiples of 4 elements). (The
 * MHA layer's steps append without this copy into a cache of the layer's
 * float dtype whose rows need no padding: their projection writes into it
 * directly; into any other, through the same append from their scratch.) */
typedef struct vkattn_kv_append_args {
    vkattn_kv_cache *cache;
    uint32_t batch;
    const uint32_t *sequences; /* [batch], distinct */
    vkattn_tensor k, v;
    /* A ragged prefill in one call (NULL: T tokens for every sequence):
     * host int32 [batch + 1] offsets, starting at 0, never decreasing;
     * k [1, Hkv, sum T, Dk] and v [1, Hkv, sum T, Dv] hold the sequences'
     * new tokens one after the other, sequences[b]'s at [offsets[b],
     * offsets[b + 1]) (a sequence may get none). The whole call is checked first
     * (ids, capacity, free blocks, each sequence's view); then each
     * sequence's tokens are appended as a step of their own. */
    const int32_t *offsets;
} vkattn_kv_append_args;

VKATTN_API vkattn_result vkattn_cmd_kv_cache_append(vkattn_context *ctx, VkCommandBuffer cmd,
                                                    const vkattn_kv_append_args *args);

/* Attention of T queries per sequence over everything the cache holds for
 * that sequence (L keys), causal and bottom-right aligned: query i sees key
 * j iff j <= i + L - T (with T = L every query sees the whole prefix before
 * it). q [B, Hq, T, Dk] and out [B, Hq, T, Dv] (strides free, last one 1;
 * out may be given merged as [B, T, Hq*Dv] through its strides), Hq a
 * multiple of the cache's Hkv; q/out f32, f16 or bf16. Sequences must not be
 * empty. Head dims that are multiples of 8 need q's and out's strides and
 * offsets on 4 elements; others are read and written one element at a
 * time (free strides), and out then cannot be bf16 or f16 on a device
 * without 16-bit storage (pairs in 32-bit words; VKATTN_ERROR_UNSUPPORTED).
 * Few queries (T <= 16) take the split-KV decoding path: the key range is
 * split across workgroups and the partial results are combined in a second
 * pass; kv_splits 0 chooses the count from the device and the lengths, a
 * fixed count makes results bit-identical from run to run. */
typedef struct vkattn_kv_attention_args {
    vkattn_kv_cache *cache;
    uint32_t batch;
    const uint32_t *sequences; /* [batch] */
    vkattn_tensor q, out;
    float scale;        /* 0: 1/sqrt(Dk) */
    uint32_t kv_splits; /* 0: automatic */
    /* Score modifiers as in vkattn_attention_args (bottom-right only: query
     * i of the T sits at L - T + i). The window skips the tiles (and the
     * split-KV work) before it. */
    uint32_t window;
    float softcap;
    vkattn_tensor sinks;        /* optional: f32 [Hq] */
    vkattn_tensor alibi_slopes; /* optional: f32 [Hq] */
    float alibi_max_bias;
    vkattn_tensor lse; /* optional output: f32 [B, Hq, T] */
    /* Optional (buffer NULL) additive mask, f32 or f16: rank 3 [B, T, K]
     * (row b for sequences[b]) or rank 2 [T, K] (the same for every
     * sequence), K at least the longest length L of the call's sequences.
     * Query i of batch row b adds mask[b, i, j] to its score of key j, for
     * j < L_b (columns from L_b on are never read), as vkattn_attention's
     * mask: score = softcap(scale q.k) + mask + alibi. -inf hides a key; the
     * mask never un-hides what causality or the window hide; a row with
     * nothing visible gives zeros (and lse -inf), never NaN. Strides are
     * free, in elements (0 broadcasts; the last one need not be 1), the
     * offset any multiple of the element size; it is read as 32-bit words
     * (no 16-bit storage needed): strides below 2^31 and a span of at most
     * half of min(maxStorageBufferRange, 2 GiB) (else
     * VKATTN_ERROR_UNSUPPORTED); it must not overlap out or lse. A wrong
     * rank is VKATTN_ERROR_INVALID_ARGUMENT, a wrong dtype
     * VKATTN_ERROR_UNSUPPORTED_DTYPE, a B, T or K that does not fit the call
     * VKATTN_ERROR_SHAPE_MISMATCH, each before anything is recorded.
     * Read by every kernel of the path (split-KV included); without it the
     * kernels compile no mask code. Use: tree-style speculative decoding -
     * T draft tokens of a tree appended at once, each seeing the prefix and
     * its ancestors (the causal order of the T plus -inf on the columns
     * L - T + k of its non-ancestors k). */
    vkattn_tensor mask;
    /* Packed queries (NULL: T for every sequence): host int32 [batch + 1]
     * offsets as vkattn_kv_append_args takes them; q [1, Hq, sum T, Dk],
     * out [1, Hq, sum T, Dv] and lse [1, Hq, sum T] hold sequences[b]'s
     * queries at [q_offsets[b], q_offsets[b + 1]), the last of its L keys
     * (bottom-right, as above: a ragged prefill appended with offsets, then
     * attended). Every sequence is checked before anything is recorded,
     * then attended as a call of its own; no mask. */
    const int32_t *q_offsets;
} vkattn_kv_attention_args;

VKATTN_API vkattn_result vkattn_cmd_kv_attention(vkattn_context *ctx, VkCommandBuffer cmd,
                                                 const vkattn_kv_attention_args *args);
VKATTN_API vkattn_result vkattn_kv_attention(vkattn_context *ctx,
                                             const vkattn_kv_attention_args *args);

/* One step of an MHA layer over a KV cache, for `batch` sequences at their
 * own positions: the T new tokens x[b] of sequence sequences[b] are
 * projected, their K and V appended to the cache (by the projection itself),
 * their queries attend causally to the sequence's whole cache (see
 * vkattn_kv_attention_args) and y[b] gets the layer's output. A prefill is a
 * step with T = the prompt length (sequences of different prompt lengths:
 * one step each); decoding is steps with T = 1. Prefill then decode steps
 * give the same y as one causal forward over the whole sequence. */
typedef struct vkattn_mha_step_args {
    /* Hkv and Dh must match the layer; its dtype is free (one of another
     * dtype than the layer's gets K and V staged in the scratch, then
     * converted or quantized into it) */
    vkattn_kv_cache *cache;
    uint32_t batch;
    const uint32_t *sequences; /* [batch], distinct */
    vkattn_tensor x;           /* [batch, T, Dm] */
    vkattn_tensor y;           /* [batch, T, Dm] */
    /* As in vkattn_kv_attention_args; a step whose T x kv_splits exceeds
     * VKATTN_KV_MAX_SPLIT_ROWS uses VKATTN_KV_MAX_SPLIT_ROWS / T splits. */
    uint32_t kv_splits;
    /* As in vkattn_mha_forward_args (vkattn_mha_step_scratch_size). */
    vkattn_buffer *scratch;
    uint64_t scratch_offset;
    /* Optional additive mask of the step's attention, as in
     * vkattn_kv_attention_args (T the step's tokens, K at least the longest
     * sequence's length after the step, which counts the T new tokens). */
    vkattn_tensor mask;
    /* Optional head mask, f32 [Hq] or [batch, Hq], as in
     * vkattn_mha_forward_args (row b: sequences[b]). */
    vkattn_tensor head_mask;
} vkattn_mha_step_args;

/* Scratch bytes of a step of `batch` x `new_tokens`: Q and the merged
 * heads [B, T, Hq*Dh], and K and V [B, Hkv, T, Dh] (used with a cache of
 * another dtype than the layer's; always counted), in the layer's dtype. */
VKATTN_API vkattn_result vkattn_mha_step_scratch_size(vkattn_mha *mha, uint32_t batch,
                                                      uint32_t new_tokens, uint64_t *bytes);
VKATTN_API vkattn_result vkattn_cmd_mha_step(vkattn_mha *mha, VkCommandBuffer cmd,
                                             const vkattn_mha_step_args *args);
/* Submit-and-wait form (grows the layer's own scratch as needed). */
VKATTN_API vkattn_result vkattn_mha_step(vkattn_mha *mha, const vkattn_mha_step_args *args);

/* ------------------------------------------------------------ frame budget
 *
 * An engine that must not stall a frame can cut a long pass into pieces and
 * record one per frame:
 *  - attention: vkattn_attention_chunk gives the call that computes only
 *    query rows [q_begin, q_end) - views of q, out and the masks and, for a
 *    causal call, K and V cut after the last key those rows see, so the
 *    bottom-right rule of the whole call holds in each piece. The pieces of
 *    a call write exactly what the whole call writes, in any order.
 *  - an MHA prefill: steps over a KV cache (vkattn_cmd_mha_step) with a few
 *    hundred tokens each - a chunked prefill - give the same output as one.
 * The *_flops functions give each piece's work (visible pairs only) to size
 * the pieces by a budget. A decode step's cost grows with the cache (its
 * split-KV workgroups share it) and is one recording. */
VKATTN_API vkattn_result vkattn_attention_chunk(const vkattn_attention_args *args, uint32_t q_begin,
                                                uint32_t q_end, vkattn_attention_args *chunk,
                                                char *error, size_t error_size);
VKATTN_API double vkattn_attention_flops(const vkattn_attention_args *args, uint32_t q_begin,
                                         uint32_t q_end);
/* A step of `batch` sequences, `new_tokens` each, ending at `length` tokens. */
VKATTN_API double vkattn_mha_step_flops(const vkattn_mha *mha, uint32_t batch, uint32_t new_tokens,
                                        uint32_t length);

#endif /* VKATTN_KV_CACHE_H */
