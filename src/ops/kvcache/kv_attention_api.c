/* vkattn_kv_attention: attention of new queries over a KV cache. Checks and
 * recording here; the choice of kernel, tiles and splits and the bindings:
 * kv_attention_plan.c; kernels: shaders/kv_attention_*. */
#include "spec/dtype.h"
#include "spec/error_text.h"
#include "ops/kvcache/kvcache_internal.h"

#include "ops/attention/attention_internal.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* q / out: [B, Hq, T, Dh] rows read and written 4 elements at a time. */
static vkattn_result check_tensor(vkattn_kv_cache *c, const vkattn_tensor *in, const char *prefix,
                                  const char *name, vkattn_tensor *t)
{
    vkattn_context *ctx = c->ctx;
    char what[96];
    snprintf(what, sizeof what, "%s%s", prefix, name);
    vkattn_result r = vka_tensor_resolve(ctx, in, what, t);
    if (r != VKATTN_SUCCESS)
        return r;
    if (t->rank != 4)
        return vka_fail(ctx, VKATTN_ERROR_INVALID_ARGUMENT,
                           "%s.rank is %u: expected 4 ([B, Hq, T, Dh])", what, t->rank);
    char b[VKA_DTYPE_TEXT];
    if (!vka_dtype_is_float(t->dtype))
        return vka_fail(ctx, VKATTN_ERROR_UNSUPPORTED_DTYPE, "%s.dtype is %s: f32 or f16", what,
                           vka_dtype_text(t->dtype, b));
    if (t->shape[1] % c->d.num_kv_heads)
        return vka_fail(ctx, VKATTN_ERROR_SHAPE_MISMATCH,
                           "%s.shape[1] (num_heads) %lld is not a multiple of the cache's "
                           "num_kv_heads %u",
                           what, (long long)t->shape[1], c->d.num_kv_heads);
    if (t->shape[1] != c->d.num_heads)
        return vka_fail(ctx, VKATTN_ERROR_SHAPE_MISMATCH,
                           "%s.shape[1] (num_heads) %lld differs from the cache's num_heads %u "
                           "(its split scratch is laid out for them)",
                           what, (long long)t->shape[1], c->d.num_heads);
    if (t->shape[3] != c->d.head_dim)
        return vka_fail(ctx, VKATTN_ERROR_SHAPE_MISMATCH,
                           "%s.shape[3] (head_dim) %lld differs from the cache's head_dim %u", what,
                           (long long)t->shape[3], c->d.head_dim);
    if (t->shape[0] > UINT32_MAX || t->shape[2] > UINT32_MAX)
        return vka_fail(ctx, VKATTN_ERROR_INVALID_ARGUMENT, "%s: batch or tokens too large", what);
    if (t->strides[3] != 1 || t->strides[0] % 4 || t->strides[1] % 4 || t->strides[2] % 4 ||
        t->offset % 16)
        return vka_fail(ctx, VKATTN_ERROR_INVALID_ARGUMENT,
                           "%s: the last stride must be 1, the others multiples of 4 and the "
                           "offset a multiple of 16 bytes (strides %lld, %lld, %lld, %lld; "
                           "offset %llu)",
                           what, (long long)t->strides[0], (long long)t->strides[1],
                           (long long)t->strides[2], (long long)t->strides[3],
                           (unsigned long long)t->offset);
    vka_box box = {{0}, {(uint64_t)t->shape[0], (uint64_t)t->shape[1], (uint64_t)t->shape[2],
                         (uint64_t)t->shape[3]}};
    if (!vka_box_fits_storage(ctx, t, &box))
        return vka_fail(ctx, VKATTN_ERROR_UNSUPPORTED,
                           "%s spans %llu bytes, more than one binding of this device can hold "
                           "(maxStorageBufferRange %llu)",
                           what, (unsigned long long)vka_box_bytes(t, &box),
                           (unsigned long long)ctx->info.max_storage_buffer_range);
    return VKATTN_SUCCESS;
}

static uint64_t end_byte(const vkattn_tensor *t)
{
    uint64_t last = 0;
    for (uint32_t d = 0; d < t->rank; d++)
        last += (uint64_t)(t->shape[d] - 1) * (uint64_t)t->strides[d];
    return t->offset + (last + 1) * vkattn_dtype_size(t->dtype);
}

vkattn_result vka_kv_attention_check(vkattn_kv_cache *c, const vkattn_tensor *q,
                                        const vkattn_tensor *out, float scale, uint32_t kv_splits,
                                        const char *prefix, vka_kv_attention_problem *p)
{
    vkattn_context *ctx = c->ctx;
    memset(p, 0, sizeof *p);
    vkattn_result r = check_tensor(c, q, prefix, "q", &p->q);
    if (r == VKATTN_SUCCESS)
        r = check_tensor(c, out, prefix, "out", &p->out);
    if (r != VKATTN_SUCCESS)
        return r;
    if (p->out.dtype != p->q.dtype)
        return vka_fail(ctx, VKATTN_ERROR_UNSUPPORTED_DTYPE, "%sout.dtype is %s but %sq.dtype is %s: "
                           "they must be the same", prefix, vkattn_dtype_name(p->out.dtype), prefix,
                           vkattn_dtype_name(p->q.dtype));
    for (int d = 0; d < 4; d++)
        if (p->out.shape[d] != p->q.shape[d])
            return vka_fail(ctx, VKATTN_ERROR_SHAPE_MISMATCH, "%sout.shape[%d] is %lld but %sq.shape[%d] is %lld",
                               prefix, d, (long long)p->out.shape[d], prefix, d, (long long)p->q.shape[d]);
    for (int d = 0; d < 4; d++)
        if (p->out.strides[d] == 0 && p->out.shape[d] > 1)
            return vka_fail(ctx, VKATTN_ERROR_INVALID_ARGUMENT,
                               "%sout.strides[%d] is 0 while its shape is %lld: an output cannot "
                               "broadcast", prefix, d, (long long)p->out.shape[d]);
    if (p->q.buffer == p->out.buffer && p->q.offset < end_byte(&p->out) &&
        p->out.offset < end_byte(&p->q))
        return vka_fail(ctx, VKATTN_ERROR_INVALID_ARGUMENT,
                           "%sout (bytes %llu..%llu) overlaps %sq (bytes %llu..%llu) in the same "
                           "buffer", prefix, (unsigned long long)p->out.offset,
                           (unsigned long long)end_byte(&p->out), prefix,
                           (unsigned long long)p->q.offset, (unsigned long long)end_byte(&p->q));
    p->batch = (uint32_t)p->q.shape[0];
    p->num_heads = (uint32_t)p->q.shape[1];
    p->new_tokens = (uint32_t)p->q.shape[2];
    if (p->new_tokens <= VKA_KV_DECODE_MAX_TOKENS && kv_splits &&
        (uint64_t)kv_splits * p->new_tokens > VKATTN_KV_MAX_SPLIT_ROWS)
        return vka_fail(ctx, VKATTN_ERROR_INVALID_ARGUMENT,
                           "%skv_splits %u x %u queries per sequence is %llu split rows, more than "
                           "VKATTN_KV_MAX_SPLIT_ROWS (%d)", prefix, kv_splits, p->new_tokens,
                           (unsigned long long)kv_splits * p->new_tokens, VKATTN_KV_MAX_SPLIT_ROWS);
    /* The pools are bound whole: a pool past one window would need the cache
     * to split it. */
    uint64_t pool = c->block_bytes * c->d.num_blocks;
    uint64_t align = ctx->info.min_storage_buffer_offset_alignment;
    if (pool + (align < 16 ? 16 : align) + 4 > vka_storage_window_limit(ctx))
        return vka_fail(ctx, VKATTN_ERROR_UNSUPPORTED,
                           "the cache's K and V pools are %llu bytes each, more than one binding of "
                           "this device can hold (maxStorageBufferRange %llu): use fewer blocks or "
                           "sequences per cache", (unsigned long long)pool,
                           (unsigned long long)ctx->info.max_storage_buffer_range);
    p->scale = scale != 0.0f ? scale : (float)(1.0 / sqrt((double)c->d.head_dim));
    p->kv_splits = kv_splits;
    return VKATTN_SUCCESS;
}

/* ------------------------------------------------------------ recording */

vkattn_result vka_cmd_kv_attention_record(vkattn_context *ctx, VkCommandBuffer cmd,
                                             const vka_kv_attention_plan *plan,
                                             const vka_binding *meta)
{
    vka_binding b[6];
    memcpy(b, plan->bindings, sizeof b);
    b[0] = *meta;
    /* The split scratch is the cache's, reused by every call (the caller's
     * contract covers only their tensors), and the pools may have been
     * written by an append or a projection since the metadata barrier. */
    vka_cmd_compute_barrier(ctx, cmd);
    vkattn_result r = vka_cmd_dispatch(ctx, cmd, plan->main, b, &plan->push, plan->grid[0],
                                          plan->grid[1], plan->grid[2]);
    if (r != VKATTN_SUCCESS || !plan->combine)
        return r;
    vka_cmd_compute_barrier(ctx, cmd);
    return vka_cmd_dispatch(ctx, cmd, plan->combine, plan->combine_bindings, &plan->combine_push,
                               plan->combine_grid[0], plan->combine_grid[1], 1);
}

vkattn_result vka_cmd_kv_attention_step(vkattn_context *ctx, VkCommandBuffer cmd,
                                           vkattn_kv_cache *cache, const vka_kv_step *step,
                                           const vka_binding *meta,
                                           const vka_kv_attention_problem *p)
{
    vka_kv_attention_plan plan;
    vkattn_result r = vka_kv_attention_prepare(ctx, cache, step, p, &plan);
    if (r != VKATTN_SUCCESS)
        return r;
    return vka_cmd_kv_attention_record(ctx, cmd, &plan, meta);
}

/* ----------------------------------------------------------------- API */

/* Checks everything and prepares; the step is checked, not applied. */
static vkattn_result check_args(vkattn_context *ctx, const vkattn_kv_attention_args *a,
                                vka_kv_step *step, vka_kv_attention_plan *plan)
{
    if (!a->cache)
        return vka_fail(ctx, VKATTN_ERROR_INVALID_ARGUMENT, "args->cache is NULL");
    if (a->cache->ctx != ctx)
        return vka_fail(ctx, VKATTN_ERROR_INVALID_ARGUMENT, "args->cache belongs to another context");
    vka_kv_attention_problem p;
    vkattn_result r = vka_kv_attention_check(a->cache, &a->q, &a->out, a->scale, a->kv_splits,
                                                "args->", &p);
    if (r != VKATTN_SUCCESS)
        return r;
    if (p.batch != a->batch)
        return vka_fail(ctx, VKATTN_ERROR_SHAPE_MISMATCH,
                           "args->q.shape[0] is %u but args->batch is %u", p.batch, a->batch);
    r = vka_kv_step_check(a->cache, a->batch, a->sequences, 0, "args->", step);
    if (r != VKATTN_SUCCESS)
        return r;
    return vka_kv_attention_prepare(ctx, a->cache, step, &p, plan);
}

vkattn_result vkattn_cmd_kv_attention(vkattn_context *ctx, VkCommandBuffer cmd,
                                      const vkattn_kv_attention_args *args)
{
    if (!ctx)
        return VKATTN_ERROR_INVALID_ARGUMENT;
    if (!cmd || !args)
        return vka_fail(ctx, VKATTN_ERROR_INVALID_ARGUMENT, "vkattn_cmd_kv_attention: %s is NULL",
                           !cmd ? "cmd" : "args");
    vka_kv_step step;
    vka_kv_attention_plan plan;
    vkattn_result r = check_args(ctx, args, &step, &plan);
    if (r != VKATTN_SUCCESS)
        return r;
    vka_binding meta;
    r = vka_kv_step_record(&step, cmd, &meta);
    if (r != VKATTN_SUCCESS)
        return r;
    return vka_cmd_kv_attention_record(ctx, cmd, &plan, &meta);
}

vkattn_result vkattn_kv_attention(vkattn_context *ctx, const vkattn_kv_attention_args *args)
{
    if (!ctx)
        return VKATTN_ERROR_INVALID_ARGUMENT;
    if (!args)
        return vka_fail(ctx, VKATTN_ERROR_INVALID_ARGUMENT, "vkattn_kv_attention: args is NULL");
    /* Check before touching the context's command buffer. */
    vka_kv_step step;
    vka_kv_attention_plan plan;
    vkattn_result r = check_args(ctx, args, &step, &plan);
    if (r != VKATTN_SUCCESS)
        return r;
    VkCommandBuffer cmd;
    r = vkattn_commands_begin(ctx, &cmd);
    if (r != VKATTN_SUCCESS)
        return r;
    vka_binding meta;
    r = vka_kv_step_record(&step, cmd, &meta);
    if (r == VKATTN_SUCCESS)
        r = vka_cmd_kv_attention_record(ctx, cmd, &plan, &meta);
    return vka_commands_finish(ctx, r);
}
