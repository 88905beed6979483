/* vkattn_cmd_kv_cache_append: copies K and V of your own into a KV cache
 * (kv_append.comp), or quantizes them into a q8_0 / q4_0 one
 * (kv_append_quant.comp). The MHA layer's steps do not use it for the
 * others: their projection writes into the cache itself. */
#include "ops/kvcache/kvcache_internal.h"
#include "vka_spirv.h"

#include <string.h>

#define WORKGROUP 64u

#define APPEND_KERNEL(s)                                                                \
    {                                                                                   \
        .name = "kv_append_" #s, .spirv = &vka_spirv_kv_append_##s, .binding_count = 5, \
        .bindings = {VKA_BINDING_STORAGE, VKA_BINDING_STORAGE, VKA_BINDING_STORAGE,     \
                     VKA_BINDING_STORAGE, VKA_BINDING_STORAGE},                         \
        .push_size = sizeof(vka_kv_append_push)                                         \
    }

static const vka_kernel append_kernels[4] = {
    [VKA_STORAGE_F32] = APPEND_KERNEL(f32),
    [VKA_STORAGE_F16] = APPEND_KERNEL(f16),
    [VKA_STORAGE_F16P] = APPEND_KERNEL(f16p),
    [VKA_STORAGE_BF16] = APPEND_KERNEL(bf16),
};

#define QUANT_KERNEL(q, s)                                                          \
    {                                                                               \
        .name = "kv_append_" #q "_" #s, .spirv = &vka_spirv_kv_append_##q##_##s,    \
        .binding_count = 5,                                                         \
        .bindings = {VKA_BINDING_STORAGE, VKA_BINDING_STORAGE, VKA_BINDING_STORAGE, \
                     VKA_BINDING_STORAGE, VKA_BINDING_STORAGE},                     \
        .push_size = sizeof(vka_kv_append_push)                                     \
    }
#define QUANT_KERNELS(q)                                                                        \
    {                                                                                           \
        [VKA_STORAGE_F32] = QUANT_KERNEL(q, f32), [VKA_STORAGE_F16] = QUANT_KERNEL(q, f16),     \
        [VKA_STORAGE_F16P] = QUANT_KERNEL(q, f16p), [VKA_STORAGE_BF16] = QUANT_KERNEL(q, bf16), \
    }
/* by [cache is q4_0][storage of k and v] */
static const vka_kernel quant_kernels[2][4] = {QUANT_KERNELS(q8_0), QUANT_KERNELS(q4_0)};

/* Checks k or v: [B, Hkv, T, Dh] in the cache's dtype (a quantized
 * cache: f32, f16 or bf16), rows on 4-element boundaries. */
static vkattn_result check_input(vkattn_kv_cache *c, const vkattn_tensor *t, const char *name,
                                 uint32_t batch, vkattn_tensor *out)
{
    vkattn_context *ctx = c->ctx;
    vkattn_result r = vka_tensor_resolve(ctx, t, name, out);
    if (r != VKATTN_SUCCESS)
        return r;
    if (out->rank != 4)
        return vka_fail(ctx, VKATTN_ERROR_INVALID_ARGUMENT,
                        "%s.rank is %u: expected 4 ([B, Hkv, T, Dh])", name, out->rank);
    char b[VKA_DTYPE_TEXT];
    if (vka_dtype_is_quantized(c->d.dtype)) {
        if (!vka_dtype_is_float(out->dtype) && out->dtype != VKATTN_DTYPE_BF16)
            return vka_fail(ctx, VKATTN_ERROR_UNSUPPORTED_DTYPE,
                            "%s.dtype is %s: a %s cache quantizes f32, f16 or bf16 values", name,
                            vka_dtype_text(out->dtype, b), vkattn_dtype_name(c->d.dtype));
    } else if (out->dtype != c->d.dtype) {
        return vka_fail(ctx, VKATTN_ERROR_UNSUPPORTED_DTYPE,
                        "%s.dtype is %s but the cache holds %s", name,
                        vka_dtype_text(out->dtype, b), vkattn_dtype_name(c->d.dtype));
    }
    const int64_t want[4] = {batch, c->d.num_kv_heads, out->shape[2], c->d.head_dim};
    const char *dim[4] = {"batch", "the cache's num_kv_heads", "", "the cache's head_dim"};
    for (int i = 0; i < 4; i++)
        if (i != 2 && out->shape[i] != want[i])
            return vka_fail(ctx, VKATTN_ERROR_SHAPE_MISMATCH, "%s.shape[%d] is %lld but %s is %lld",
                            name, i, (long long)out->shape[i], dim[i], (long long)want[i]);
    uint32_t es = (uint32_t)vkattn_dtype_size(out->dtype);
    VKA_TRY(vka_tensor_check_rows(ctx, out, name, 4, 4 * es));
    return VKATTN_SUCCESS;
}

/* Binds k, v and the pools and gets the kernel of an append of checked k
 * and v (tokens per sequence): everything that can fail, before the step's
 * metadata is recorded (which moves the cache). */
vkattn_result vka_kv_append_prepare(vkattn_context *ctx, vkattn_kv_cache *c,
                                    const vkattn_tensor *kt, const vkattn_tensor *vt,
                                    uint32_t batch, vka_kv_append_plan *plan)
{
    const vkattn_tensor k = *kt, v = *vt;
    uint32_t tokens = (uint32_t)k.shape[2];
    size_t es = vkattn_dtype_size(k.dtype);
    uint64_t span = (uint64_t)((batch - 1) * k.strides[0] + (c->d.num_kv_heads - 1) * k.strides[1] +
                               (tokens - 1) * k.strides[2] + c->d.head_dim) *
                    es;
    vka_binding *b = plan->bindings;
    uint32_t k_first, v_first, unused;
    vkattn_result r = vka_bind_window(ctx, k.buffer, k.offset, span, 4 * es, &b[1], &k_first);
    if (r == VKATTN_SUCCESS)
        r = vka_bind_window(ctx, v.buffer, v.offset, span, 4 * es, &b[2], &v_first);
    /* the pools whole: quads of the cache's dtype, or a quantized one's words */
    bool quant = vka_dtype_is_quantized(c->d.dtype);
    uint32_t pool_unit = quant ? 4 : (uint32_t)(4 * es);
    if (r == VKATTN_SUCCESS)
        r = vka_bind_window(ctx, c->k, 0, c->block_bytes * c->d.num_blocks, pool_unit, &b[3],
                            &unused);
    if (r == VKATTN_SUCCESS)
        r = vka_bind_window(ctx, c->v, 0, c->block_bytes * c->d.num_blocks, pool_unit, &b[4],
                            &unused);
    if (r != VKATTN_SUCCESS)
        return r;
    uint32_t spec[1] = {vka_workgroup_size(ctx, WORKGROUP)};
    const vka_kernel *kernel =
        quant ? &quant_kernels[c->d.dtype == VKATTN_DTYPE_Q4_0][vka_storage_kind(ctx, k.dtype)]
              : &append_kernels[vka_storage_kind(ctx, c->d.dtype)];
    VKA_TRY(vka_pipeline_get(ctx, kernel, spec, 1, &plan->pipeline));
    /* one invocation per quad, or per pair of quantized blocks */
    uint32_t per_row = quant ? c->d.head_dim / 64 : c->d.head_dim / 4;
    uint32_t unit = quant ? 1 : 4; /* offsets and strides in elements, or in quads */
    uint64_t units = (uint64_t)batch * c->d.num_kv_heads * tokens * per_row;
    vka_grid_2d(ctx, vka_div_up64(units, spec[0]), &plan->gx, &plan->gy);
    if (plan->gy > ctx->info.max_workgroup_count[1] || units > UINT32_MAX)
        return vka_fail(ctx, VKATTN_ERROR_OUT_OF_RANGE,
                        "append of %llu units is too large for one dispatch",
                        (unsigned long long)units);
    plan->push = (vka_kv_append_push){
        .batch = batch,
        .heads = c->d.num_kv_heads,
        .tokens = tokens,
        .dh4 = per_row,
        .k_first = k_first * (4 / unit),
        .v_first = v_first * (4 / unit),
        .stride_b = (uint32_t)(k.strides[0] / unit),
        .stride_h = (uint32_t)(k.strides[1] / unit),
        .stride_t = (uint32_t)(k.strides[2] / unit),
        .block_size = c->d.block_size,
        .table_width = c->table_width,
    };
    return VKATTN_SUCCESS;
}

vkattn_result vka_kv_append_dispatch(vkattn_context *ctx, VkCommandBuffer cmd,
                                     vka_kv_append_plan *plan, const vka_binding *meta)
{
    plan->bindings[0] = *meta;
    return vka_cmd_dispatch(ctx, cmd, plan->pipeline, plan->bindings, &plan->push, plan->gx,
                            plan->gy, 1);
}

vkattn_result vka_kv_append_check(vkattn_kv_cache *c, const vkattn_tensor *k,
                                  const vkattn_tensor *v, uint32_t batch, const char *k_name,
                                  const char *v_name, vkattn_tensor *k_out, vkattn_tensor *v_out)
{
    vkattn_context *ctx = c->ctx;
    VKA_TRY(check_input(c, k, k_name, batch, k_out));
    VKA_TRY(check_input(c, v, v_name, batch, v_out));
    if (v_out->shape[2] != k_out->shape[2] ||
        memcmp(k_out->strides, v_out->strides, sizeof k_out->strides) != 0)
        return vka_fail(ctx, VKATTN_ERROR_SHAPE_MISMATCH,
                        "%s must have %s's shape and strides (tokens %lld vs %lld)", v_name, k_name,
                        (long long)v_out->shape[2], (long long)k_out->shape[2]);
    if (k_out->shape[2] > UINT32_MAX)
        return vka_fail(ctx, VKATTN_ERROR_OUT_OF_RANGE, "%s.shape[2] is too large", k_name);
    return VKATTN_SUCCESS;
}

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
