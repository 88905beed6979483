/* What the KV cache gives the ops above it (the linear op's projection
 * appends into its pools; the MHA layer's steps run attention over it).
 *
 * The cache: its pools, the host-side lengths and block tables, and the
 * per-step metadata the kernels read. Both layouts are the same thing to
 * the kernels: K and V are pools of blocks [num_blocks, Hkv, block_size,
 * k_row] and [.., v_row] (the head dims Dk and Dv, padded), and token t of the sequence in batch row b lives in block
 * table[b][t / block_size] at row t % block_size. A contiguous cache is one
 * block of `capacity` tokens per sequence with table[b] = {sequence id}.
 *
 * Step metadata (uint32 words), written into the cache's metadata buffer by
 * vkCmdUpdateBuffer when a step is recorded, so it travels with the command
 * buffer in order:
 *     start[b]   b < batch          tokens the sequence held before the step
 *     length[b]  at batch + b       tokens after the step (start + new)
 *     table[b][i] at 2*batch + b*table_width + i   block of tokens
 *                                   [i*block_size, (i+1)*block_size)
 *
 * Attention over the cache: two kernel families (kv_attention_sg.comp:
 * subgroup shuffles, CPU drivers; kv_attention_sm.comp: shared-memory
 * tiles; kv_decode_sg.comp for few rows through texel views), K/V read
 * through texel buffers or storage buffers, and two paths: few queries
 * (T <= 16) split each sequence's keys across workgroups and merge the
 * partial results in a second pass (kv_attention_combine.comp); more
 * queries (prefill) run one pass, row tiles over the visible keys. */
#ifndef VKA_KVCACHE_H
#define VKA_KVCACHE_H

#include "core/context.h"
#include "core/kernel.h"
#include "core/pipeline.h"
#include "spec/dtype.h"
#include "spec/score_mods.h"

struct vkattn_kv_cache {
    vkattn_context *ctx;
    vkattn_kv_cache_desc d; /* resolved: block_size and num_blocks filled in */
    bool paged;
    uint32_t table_width; /* blocks a sequence can hold: ceil(capacity / block_size) */
    /* elements of a token row of K / of V: the head dims, zero-padded to a
     * multiple of 8 (the kernels read pools by quads; appends write the
     * zeros) unless quantized */
    uint32_t k_row, v_row;
    uint64_t k_block_bytes, v_block_bytes; /* bytes of one block of K / of V */
    /* bytes of the pools: num_blocks blocks, and for a quantized cache the
     * rest of the last word and one word more, which the word readers may
     * read past the last block (never used) */
    uint64_t k_pool_bytes, v_pool_bytes;
    vkattn_buffer *k, *v; /* the pools */
    vkattn_buffer *meta;  /* step metadata */
    /* split-KV partial results: [max_sequences][num_heads][VKATTN_KV_MAX_SPLIT_ROWS]
     * rows of Dv + 2 floats (unnormalised output, running max, running sum) */
    vkattn_buffer *split_scratch;
    uint32_t *lengths;     /* [max_sequences] */
    uint32_t *tables;      /* [max_sequences][table_width]; UINT32_MAX: no block */
    uint32_t *free_blocks; /* stack of free block ids (paged) */
    uint32_t free_count;
};

/* ---- steps (kvcache_step.c) */

/* A step checked against the cache but not applied yet. */
typedef struct vka_kv_step {
    vkattn_kv_cache *cache;
    uint32_t batch;
    const uint32_t *sequences;
    uint32_t new_tokens; /* T: 0 for attention over what is there */
    uint32_t max_length; /* the longest sequence after the step */
    uint32_t blocks_needed;
} vka_kv_step;

/* Checks a step of `new_tokens` per sequence (ids in range and distinct; room
 * within capacity; enough free blocks; with new_tokens 0, no empty
 * sequence). `what` prefixes messages ("args->"). Changes nothing. */
vkattn_result vka_kv_step_check(vkattn_kv_cache *cache, uint32_t batch, const uint32_t *sequences,
                                uint32_t new_tokens, const char *what, vka_kv_step *step);

/* Applies a checked step to the host state (lengths, blocks) and records the
 * metadata upload with its barriers: earlier compute reads of the metadata
 * -> transfer write -> compute reads. `*meta` is the binding kernels read. */
vkattn_result vka_kv_step_record(const vka_kv_step *step, VkCommandBuffer cmd, vka_binding *meta);

/* A windowed cache (desc.window W): once a step that appended T > 0 tokens
 * is wholly recorded, gives back the blocks of its sequences that hold only
 * tokens older than the window of the step's first new token (position
 * len - T: tokens before len - T - W + 1), which no later step can read:
 * the step's own attention needs exactly from there on. Called after the
 * step's commands are recorded, so a step that fails and is rolled back
 * (vkattn_kv_cache_truncate) has released nothing. No-op otherwise. */
void vka_kv_step_release(const vka_kv_step *step);

/* The first key that attention with window `window` (0: none) of `tokens`
 * queries reads from a sequence of `length` tokens. */
static inline uint32_t vka_kv_first_key(uint32_t length, uint32_t tokens, uint32_t window)
{
    uint64_t need = (uint64_t)tokens + window - 1;
    return window && length > need ? length - (uint32_t)need : 0;
}

/* The dtype of what a cache of `dtype` is filled from and read with by
 * default (the tuners' operands): its own, or f32 for a quantized cache. */
static inline vkattn_dtype vka_kv_activation_dtype(vkattn_dtype dtype)
{
    return vka_dtype_is_quantized(dtype) ? VKATTN_DTYPE_F32 : dtype;
}

/* An append of K and V into a cache's pools (kvcache_append.c), in two
 * parts around the recording of the step's metadata: prepare (bindings,
 * kernels, grids: all that can fail on the arguments) before it, dispatch
 * (with the metadata's binding) after. vka_kv_append_check checks k and v
 * ([B, Hkv, T, Dk] and [.., Dv] in the cache's dtype, or a float dtype for
 * a quantized cache, T fitting 32 bits) naming them as given. The MHA
 * layer's steps use it for the caches their projection cannot write into
 * (quantized; head dims that are not multiples of 8), whose K and V it
 * projects to scratch. */
/* The append kernels' push constants (kv_append.comp: per pool row `units`
 * quads or pairs of elements, offsets and strides in quads or elements;
 * kv_append_quant.comp: `units` pairs of blocks, offsets and strides in
 * elements). */
typedef struct vka_kv_append_push {
    uint32_t batch, heads, tokens, units;
    uint32_t dh, first;
    uint32_t stride_b, stride_h, stride_t;
    uint32_t block_size, table_width;
} vka_kv_append_push;

/* One of the two dispatches (K, then V). */
typedef struct vka_kv_append_pass {
    vka_binding bindings[3];
    vka_pipeline *pipeline;
    vka_kv_append_push push;
    uint32_t gx, gy;
} vka_kv_append_pass;

typedef struct vka_kv_append_plan {
    vka_kv_append_pass pass[2];
} vka_kv_append_plan;
vkattn_result vka_kv_append_check(vkattn_kv_cache *cache, const vkattn_tensor *k,
                                  const vkattn_tensor *v, uint32_t batch, const char *k_name,
                                  const char *v_name, vkattn_tensor *k_out, vkattn_tensor *v_out);
vkattn_result vka_kv_append_prepare(vkattn_context *ctx, vkattn_kv_cache *cache,
                                    const vkattn_tensor *k, const vkattn_tensor *v, uint32_t batch,
                                    vka_kv_append_plan *plan);
vkattn_result vka_kv_append_dispatch(vkattn_context *ctx, VkCommandBuffer cmd,
                                     vka_kv_append_plan *plan, const vka_binding *meta);

/* vkattn_cmd_kv_cache_append with args->offsets (kvcache_packed.c). */
vkattn_result vka_kv_append_packed(vkattn_context *ctx, VkCommandBuffer cmd,
                                   const vkattn_kv_append_args *args);
/* A packed call's batch, sequences and offsets `name` [batch + 1] against
 * the packed token count `total` (named `total_name`) (kvcache_packed.c). */
vkattn_result vka_kv_packed_offsets(vkattn_context *ctx, uint32_t batch, const uint32_t *sequences,
                                    const int32_t *offsets, int64_t total, const char *name,
                                    const char *total_name);

/* Blocks that `tokens` tokens occupy (without the tokens + block_size - 1
 * that wraps near 2^32). */
static inline uint32_t vka_blocks_for(const vkattn_kv_cache *c, uint32_t tokens)
{
    return tokens / c->d.block_size + (tokens % c->d.block_size != 0);
}

/* Words of metadata for `batch` rows (for binding ranges). */
static inline uint64_t vka_kv_meta_words(const vkattn_kv_cache *c, uint32_t batch)
{
    return 2ull * batch + (uint64_t)batch * c->table_width;
}

/* ---- attention over the cache (kv_attention_*.c) */

/* Queries per batch row up to which the split-KV (decode) path is taken. */
#define VKA_KV_DECODE_MAX_TOKENS 16

/* q [B, Hq, T, Dk] and out [B, Hq, T, Dv] (strides free, last stride 1, rows
 * on 4-element boundaries unless elem), checked against the cache (Hq % Hkv
 * == 0, Dk, Dv) by vka_kv_attention_check. */
typedef struct vka_kv_attention_problem {
    vkattn_tensor q, out; /* resolved strides */
    uint32_t batch, num_heads, new_tokens;
    float scale; /* resolved: 1/sqrt(Dk) when 0 was given */
    /* q read and out written an element at a time (a head dim that is not
     * a multiple of 8): offsets and strides in elements, storage inputs */
    bool elem;
    uint32_t kv_splits; /* 0: automatic; ignored when new_tokens > 16 */
    /* Score modifiers (vka_kv_attention_check_mods; zeros: none) and their
     * tensors, resolved (buffer NULL when absent): sinks and slopes f32
     * [Hq], LSE f32 [B, Hq, T]. ALiBi by max bias has no slopes tensor:
     * the standard slopes come from a constant table at prepare time. */
    vka_score_mods mods;
    vkattn_tensor sinks, slopes, lse;
    /* The additive mask (vka_kv_attention_check_mask), resolved: f32 or f16
     * [B, T, K] or [T, K] (buffer NULL: none). */
    vkattn_tensor mask;
} vka_kv_attention_problem;

/* The score modifiers of a call, as the API's args give them. */
typedef struct vka_kv_mods_args {
    uint32_t window;
    float softcap;
    float alibi_max_bias;
    vkattn_tensor sinks, alibi_slopes, lse; /* buffer NULL: absent */
} vka_kv_mods_args;

/* Checks q/out against the cache and the device (dtypes f32/f16 and equal,
 * Hq == the cache's num_heads and a multiple of its Hkv, Dh, layout, q/out
 * disjoint, kv_splits x T <= VKATTN_KV_MAX_SPLIT_ROWS on the decode path,
 * pools and tensors within one binding window each); `prefix` names them in
 * messages ("args->"). Records nothing. (kv_attention_api.c) */
vkattn_result vka_kv_attention_check(vkattn_kv_cache *cache, const vkattn_tensor *q,
                                     const vkattn_tensor *out, float scale, uint32_t kv_splits,
                                     const char *prefix, vka_kv_attention_problem *p);

/* Checks the score modifiers of a problem that passed vka_kv_attention_check
 * (vka_score_mods_check over the KV path, tensors resolved; lse an output
 * disjoint from q; a windowed cache needs a window of at most its own) and
 * stores them in `p`. (kv_attention_api.c) */
vkattn_result vka_kv_attention_check_mods(vkattn_kv_cache *cache, const vka_kv_mods_args *in,
                                          const char *prefix, vka_kv_attention_problem *p);

/* Checks the optional additive mask `in` (buffer NULL: none) of a problem
 * that passed vka_kv_attention_check_mods: rank 2 [T, K] or 3 [B, T, K],
 * f32 or f16, T and B the problem's, element indices within 31 bits and one
 * binding, disjoint from out and lse; stores it in `p`. K against the
 * sequences' lengths is checked by vka_kv_attention_prepare, which knows
 * them. `prefix` names it ("args->"). (kv_attention_api.c) */
vkattn_result vka_kv_attention_check_mask(vkattn_kv_cache *cache, const vkattn_tensor *in,
                                          const char *prefix, vka_kv_attention_problem *p);

/* What a call runs (kv_attention_config.c). */
enum {
    VKA_KV_KERNEL_DECODE,       /* kv_decode_sg.comp */
    VKA_KV_KERNEL_SUBGROUP,     /* kv_attention_sg.comp */
    VKA_KV_KERNEL_SHARED,       /* kv_attention_sm.comp */
    VKA_KV_KERNEL_DECODE_QUANT, /* kv_decode_q_sg.comp */
    VKA_KV_KERNEL_COOPMAT,      /* kv_attention_cm.comp */
};
typedef struct vka_kv_config {
    uint32_t kernel;         /* VKA_KV_KERNEL_* */
    bool texel;              /* q and the pools through texel views */
    uint32_t spec[6];        /* the kernel's specialization constants (5: MODS) */
    uint32_t rows_per_group; /* tile rows per workgroup */
    uint32_t block_keys;     /* keys per block: split lengths are multiples of it */
    uint32_t tiles;          /* row tiles per (sequence, KV head) */
    uint32_t splits;         /* key ranges per sequence (1: no combine pass) */
    uint64_t scratch_bytes;  /* the split scratch this batch uses */
} vka_kv_config;

/* Push constants of kv_attention_main.glsl and kv_attention_combine.comp. */
typedef struct vka_kv_main_push {
    uint32_t q_off, q_sb, q_sh, q_st;
    uint32_t o_off, o_sb, o_sh, o_st;
    uint32_t batch, tokens, group, kv_heads;
    uint32_t block_size, table_width, splits, split_align;
    uint32_t s_heads;
    float scale_log2;
    uint32_t window;
    float softcap_log2;
    uint32_t slopes_off, sinks_off;
    uint32_t lse_off, lse_sb, lse_sh, lse_st;
    uint32_t mask_off, mask_sb, mask_st, mask_sk; /* elements */
} vka_kv_main_push;

typedef struct vka_kv_combine_push {
    uint32_t o_off, o_sb, o_sh, o_st;
    uint32_t batch, heads, tokens, s_heads, splits;
    uint32_t sinks_off;
    uint32_t lse_off, lse_sb, lse_sh, lse_st;
} vka_kv_combine_push;

/* MODS bits of kv_attention_main.glsl and kv_attention_combine.comp. */
enum {
    VKA_KV_MOD_WINDOW = 1,
    VKA_KV_MOD_SOFTCAP = 2,
    VKA_KV_MOD_ALIBI = 4,
    VKA_KV_MOD_SINKS = 8,
    VKA_KV_MOD_LSE = 16,
    VKA_KV_MOD_MASK = 32,     /* main pass only */
    VKA_KV_MOD_MASK_F16 = 64, /* with VKA_KV_MOD_MASK: the mask is f16 */
};

/* Everything recording needs, obtained before anything is recorded. */
typedef struct vka_kv_attention_plan {
    vka_kv_config config;
    vka_pipeline *main;
    vka_pipeline *combine;    /* NULL with one split */
    vka_binding bindings[10]; /* meta (slot 0) is filled in at record time */
    vka_binding combine_bindings[4];
    vka_kv_main_push push;
    vka_kv_combine_push combine_push;
    uint32_t grid[3], combine_grid[2];
} vka_kv_attention_plan;

/* Chooses splits, kernel and tiles and gets pipelines and bindings for a
 * checked problem and a checked step (vka_kv_step_check: its lengths give
 * the split choice). Records nothing and changes nothing, so a caller can
 * call it before vka_kv_step_record and fail cleanly. (kv_attention_record.c) */
vkattn_result vka_kv_attention_prepare(vkattn_context *ctx, vkattn_kv_cache *cache,
                                       const vka_kv_step *step, const vka_kv_attention_problem *p,
                                       vka_kv_attention_plan *plan);

/* Records a prepared attention after the step's metadata (`meta`, from
 * vka_kv_step_record): a barrier ordering earlier compute work on the
 * cache (split scratch, pools written by appends or projections) before
 * it, the main pass and, with several splits, a barrier and the combine
 * pass. Fails only where recording a dispatch can (descriptor sets). */
vkattn_result vka_kv_attention_record(vkattn_context *ctx, VkCommandBuffer cmd,
                                      const vka_kv_attention_plan *plan, const vka_binding *meta);

#endif
