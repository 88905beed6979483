/* A ragged prefill into the KV cache in one call: K and V of several
 * sequences packed along one token axis with their offsets
 * (vkattn_kv_append_args.offsets). Checked as a whole - every sequence,
 * the capacity and the pool - before anything is recorded; then each
 * sequence's tokens are one ordinary append (a step of its own), so
 * nothing can fail half way. */
#include "ops/kvcache/kvcache_internal.h"

#include "spec/error_text.h"
#include "spec/varlen.h"

#include <string.h>

/* The whole call against the cache as it is: sequence ids, capacity, and
 * the blocks all the sequences' new tokens take together. */
static vkattn_result check_steps(vkattn_kv_cache *c, const vkattn_kv_append_args *a)
{
    vkattn_context *ctx = c->ctx;
    uint64_t blocks = 0;
    for (uint32_t b = 0; b < a->batch; b++) {
        uint32_t s = a->sequences[b], n = (uint32_t)(a->offsets[b + 1] - a->offsets[b]);
        if (s >= c->d.max_sequences)
            return vka_fail(ctx, VKATTN_ERROR_INVALID_ARGUMENT,
                            "args->sequences[%u] is %u: the cache holds sequences 0..%u", b, s,
                            c->d.max_sequences - 1);
        for (uint32_t e = 0; e < b; e++)
            if (a->sequences[e] == s)
                return vka_fail(ctx, VKATTN_ERROR_INVALID_ARGUMENT,
                                "args->sequences[%u] and [%u] are both sequence %u", e, b, s);
        uint32_t len = c->lengths[s];
        if ((uint64_t)len + n > c->d.capacity)
            return vka_fail(ctx, VKATTN_ERROR_OUT_OF_RANGE,
                            "args->sequences[%u]: sequence %u holds %u tokens; %u more exceed the "
                            "cache's capacity of %u",
                            b, s, len, n, c->d.capacity);
        if (c->paged)
            blocks += vka_blocks_for(c, len + n) - vka_blocks_for(c, len);
    }
    if (c->paged && blocks > c->free_count)
        return vka_fail(ctx, VKATTN_ERROR_CACHE_FULL,
                        "KV cache full: the packed append needs %llu new blocks of %u tokens but "
                        "the pool has %u free (of %u)",
                        (unsigned long long)blocks, c->d.block_size, c->free_count,
                        c->d.num_blocks);
    return VKATTN_SUCCESS;
}

vkattn_result vka_kv_packed_offsets(vkattn_context *ctx, uint32_t batch, const uint32_t *sequences,
                                    const int32_t *offsets, int64_t total, const char *name,
                                    const char *total_name)
{
    if (batch == 0 || !sequences)
        return vka_fail(ctx, VKATTN_ERROR_INVALID_ARGUMENT, "args->%s",
                        batch == 0 ? "batch is 0" : "sequences is NULL");
    char error[VKA_ERROR_MAX];
    vkattn_result r =
        vka_varlen_check(offsets, batch, total, name, total_name, error, sizeof error);
    return r == VKATTN_SUCCESS ? r : vka_fail(ctx, r, "%s", error);
}

static void slice(vkattn_tensor *t, int64_t start, int64_t count)
{
    t->offset += vka_varlen_slice(t->dtype, t->shape, t->strides, 2, start, count);
}

vkattn_result vka_kv_append_packed(vkattn_context *ctx, VkCommandBuffer cmd,
                                   const vkattn_kv_append_args *a)
{
    vkattn_kv_cache *c = a->cache;
    vkattn_tensor k, v;
    VKA_TRY(vka_kv_append_check(c, &a->k, &a->v, 1, "args->k", "args->v", &k, &v));
    VKA_TRY(vka_kv_packed_offsets(ctx, a->batch, a->sequences, a->offsets, k.shape[2],
                                  "args->offsets", "args->k.shape[2] (sum T)"));
    VKA_TRY(check_steps(c, a));
    vka_kv_append_plan *plans = vka_alloc(ctx, a->batch * sizeof *plans);
    if (!plans)
        return vka_fail(ctx, VKATTN_ERROR_OUT_OF_HOST_MEMORY, "out of host memory");
    vkattn_result r = VKATTN_SUCCESS;
    for (uint32_t b = 0; r == VKATTN_SUCCESS && b < a->batch; b++) {
        int64_t n = (int64_t)a->offsets[b + 1] - a->offsets[b];
        if (n == 0)
            continue;
        vkattn_tensor kb = k, vb = v;
        slice(&kb, a->offsets[b], n);
        slice(&vb, a->offsets[b], n);
        r = vka_kv_append_prepare(ctx, c, &kb, &vb, 1, &plans[b]);
        if (r != VKATTN_SUCCESS) {
            char why[VKA_ERROR_MAX];
            memcpy(why, ctx->last_error, sizeof why);
            r = vka_fail(ctx, r, "sequence %u (row %u, tokens from %d): %s", a->sequences[b], b,
                         a->offsets[b], why);
        }
    }
    /* each sequence's step: checked above as a whole, so none fails */
    for (uint32_t b = 0; r == VKATTN_SUCCESS && b < a->batch; b++) {
        uint32_t n = (uint32_t)(a->offsets[b + 1] - a->offsets[b]);
        if (n == 0)
            continue;
        vka_kv_step step;
        vka_binding meta;
        r = vka_kv_step_check(c, 1, &a->sequences[b], n, "args->", &step);
        if (r == VKATTN_SUCCESS)
            r = vka_kv_step_record(&step, cmd, &meta);
        if (r == VKATTN_SUCCESS)
            r = vka_kv_append_dispatch(ctx, cmd, &plans[b], &meta);
        if (r == VKATTN_SUCCESS)
            vka_kv_step_release(&step);
    }
    vka_free(ctx, plans);
    return r;
}
