/* Constant buffers (const_buffers.c): small read-only tables that ops build
 * from host data on first use (the RoPE angle tables) and keep for the
 * context's life, found again by a key of bytes. Safe to call from several
 * recording threads at once. */
#ifndef VKA_CONST_BUFFERS_H
#define VKA_CONST_BUFFERS_H

#include "core/context.h"

/* Distinct keys a context keeps at most: a table is never freed while the
 * context lives (recorded work may still read it), so the count is bounded
 * rather than evicted. */
#define VKA_CONST_BUFFERS_MAX 64u

/* Writes a table's `bytes` bytes to `dst`; `user` is the caller's. */
typedef void (*vka_const_fill_fn)(void *dst, uint64_t bytes, const void *user);

/* The buffer of `bytes` bytes stored under `key` (`key_size` bytes): on
 * first use it is created in host-visible coherent memory and filled by
 * `fill` through its mapping, so nothing is submitted (this works while any
 * command buffer records, and host writes before a submission are visible
 * to it). The buffer must never be written afterwards. */
vkattn_result vka_const_buffer_get(vkattn_context *ctx, const void *key, size_t key_size,
                                   uint64_t bytes, vka_const_fill_fn fill, const void *user,
                                   vkattn_buffer **out);

/* Frees every table (context destruction, before the descriptor cache). */
void vka_const_buffers_destroy(vkattn_context *ctx);

#endif
