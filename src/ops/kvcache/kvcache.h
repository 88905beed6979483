/* KV cache internals: the pools, the host-side lengths and block tables, and
 * the per-step metadata the kernels read.
 *
 * Both layouts are the same thing to the kernels: K and V are pools of
 * blocks [num_blocks, Hkv, block_size, Dh], and token t of the sequence in
 * batch row b lives in block table[b][t / block_size] at row t % block_size.
 * A contiguous cache is one block of `capacity` tokens per sequence with
 * table[b] = {sequence id}.
 *
 * Step metadata (uint32 words), written into the cache's metadata buffer by
 * vkCmdUpdateBuffer when a step is recorded, so it travels with the command
 * buffer in order:
 *     start[b]   b < batch          tokens the sequence held before the step
 *     length[b]  at batch + b       tokens after the step (start + new)
 *     table[b][i] at 2*batch + b*table_width + i   block of tokens
 *                                   [i*block_size, (i+1)*block_size)
 */
#ifndef VKA_KV_CACHE_H
#define VKA_KV_CACHE_H

#include "core/buffer.h"
#include "core/context.h"
#include "core/host.h"
#include "core/kernel.h"
#include "core/limits.h"
#include "core/pipeline.h"
#include "core/record.h"
#include "core/submit.h"
#include "core/tensor.h"
#include "core/windows.h"
#include "spec/dtype.h"
#include "spec/error_text.h"
#include "spec/size_math.h"

struct vkattn_kv_cache {
    vkattn_context *ctx;
    vkattn_kv_cache_desc d; /* resolved: block_size and num_blocks filled in */
    bool paged;
    uint32_t table_width;   /* blocks a sequence can hold: ceil(capacity / block_size) */
    uint64_t block_bytes;   /* bytes of one block of K (or V) */
    vkattn_buffer *k, *v;   /* the pools */
    vkattn_buffer *meta;    /* step metadata */
    /* split-KV partial results: [max_sequences][num_heads][VKATTN_KV_MAX_SPLIT_ROWS]
     * rows of Dh + 2 floats (unnormalised output, running max, running sum) */
    vkattn_buffer *split_scratch;
    uint32_t *lengths;      /* [max_sequences] */
    uint32_t *tables;       /* [max_sequences][table_width]; UINT32_MAX: no block */
    uint32_t *free_blocks;  /* stack of free block ids (paged) */
    uint32_t free_count;
};

/* A step checked against the cache but not applied yet. */
typedef struct vka_kv_step {
    vkattn_kv_cache *cache;
    uint32_t batch;
    const uint32_t *sequences;
    uint32_t new_tokens;  /* T: 0 for attention over what is there */
    uint32_t max_length;  /* the longest sequence after the step */
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
vkattn_result vka_kv_step_record(const vka_kv_step *step, VkCommandBuffer cmd,
                                    vka_binding *meta);

/* Words of metadata for `batch` rows (for binding ranges). */
static inline uint64_t vka_kv_meta_words(const vkattn_kv_cache *c, uint32_t batch)
{
    return 2ull * batch + (uint64_t)batch * c->table_width;
}

#endif
