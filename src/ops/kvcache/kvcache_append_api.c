/* vkattn_cmd_kv_cache_append: T tokens for every sequence (kvcache_append.c),
 * or a ragged prefill with offsets (kvcache_packed.c). */
#include "ops/kvcache/kvcache_internal.h"

vkattn_result vkattn_cmd_kv_cache_append(vkattn_context *ctx, VkCommandBuffer cmd,
                                         const vkattn_kv_append_args *a)
{
    if (!ctx)
        return VKATTN_ERROR_INVALID_ARGUMENT;
    if (!cmd || !a || !a->cache)
        return vka_fail(ctx, VKATTN_ERROR_INVALID_ARGUMENT,
                        "vkattn_cmd_kv_cache_append: %s is NULL",
                        !cmd ? "cmd"
                        : !a ? "args"
                             : "args->cache");
    vkattn_kv_cache *c = a->cache;
    if (c->ctx != ctx)
        return vka_fail(ctx, VKATTN_ERROR_INVALID_ARGUMENT,
                        "args->cache belongs to another context");
    if (a->offsets)
        return vka_kv_append_packed(ctx, cmd, a);
    vkattn_tensor k, v;
    VKA_TRY(vka_kv_append_check(c, &a->k, &a->v, a->batch, "args->k", "args->v", &k, &v));
    vka_kv_append_plan plan;
    VKA_TRY(vka_kv_append_prepare(ctx, c, &k, &v, a->batch, &plan));
    vka_kv_step step;
    VKA_TRY(vka_kv_step_check(c, a->batch, a->sequences, (uint32_t)k.shape[2], "args->", &step));
    /* nothing can fail from here on but the recording itself */
    vka_binding meta;
    vkattn_result r = vka_kv_step_record(&step, cmd, &meta);
    if (r == VKATTN_SUCCESS)
        r = vka_kv_append_dispatch(ctx, cmd, &plan, &meta);
    if (r == VKATTN_SUCCESS)
        vka_kv_step_release(&step);
    return r;
}
