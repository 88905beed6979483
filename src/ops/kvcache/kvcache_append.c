/* vkattn_cmd_kv_cache_append: copies K and V of your own into a KV cache
 * (kv_append.comp), or quantizes them into a quantized one
 * (kv_append_quant.comp). The MHA layer's steps do not use it for the
 * others: their projection writes into the cache itself. */
#include "ops/kvcache/kvcache_internal.h"
#include "vka_spirv.h"

#include <string.h>

#define WORKGROUP 64u

/* kv_append_<id>: kv_append.comp or kv_append_quant.comp, by variant */
#define KERNEL_(id)                                                                       \
    {                                                                                     \
        .name = "kv_append_" #id, .spirv = &vka_spirv_kv_append_##id, .binding_count = 3, \
        .bindings = {VKA_BINDING_STORAGE, VKA_BINDING_STORAGE, VKA_BINDING_STORAGE},      \
        .push_size = sizeof(vka_kv_append_push)                                           \
    }
#define KERNEL(id) KERNEL_(id)
#define APPEND_KERNEL(c, s) KERNEL(c##_##s)

/* by [the cache's storage][k and v's]; a device has one f16 path, so f16
 * never meets f16p (no such kernel) */
static const vka_kernel append_kernels[4][4] = {
    [VKA_STORAGE_F32] = {[VKA_STORAGE_F32] = APPEND_KERNEL(f32, f32),
                         [VKA_STORAGE_F16] = APPEND_KERNEL(f32, f16),
                         [VKA_STORAGE_F16P] = APPEND_KERNEL(f32, f16p),
                         [VKA_STORAGE_BF16] = APPEND_KERNEL(f32, bf16)},
    [VKA_STORAGE_F16] = {[VKA_STORAGE_F32] = APPEND_KERNEL(f16, f32),
                         [VKA_STORAGE_F16] = APPEND_KERNEL(f16, f16),
                         [VKA_STORAGE_BF16] = APPEND_KERNEL(f16, bf16)},
    [VKA_STORAGE_F16P] = {[VKA_STORAGE_F32] = APPEND_KERNEL(f16p, f32),
                          [VKA_STORAGE_F16P] = APPEND_KERNEL(f16p, f16p),
                          [VKA_STORAGE_BF16] = APPEND_KERNEL(f16p, bf16)},
    [VKA_STORAGE_BF16] = {[VKA_STORAGE_F32] = APPEND_KERNEL(bf16, f32),
                          [VKA_STORAGE_F16] = APPEND_KERNEL(bf16, f16),
                          [VKA_STORAGE_F16P] = APPEND_KERNEL(bf16, f16p),
                          [VKA_STORAGE_BF16] = APPEND_KERNEL(bf16, bf16)},
};

#define QUANT_KERNEL(q, s) KERNEL(q##_##s)
#define QUANT_KERNELS(q, odd)                            \
    {                                                    \
        [VKA_STORAGE_F32] = QUANT_KERNEL(q, f32##odd),   \
        [VKA_STORAGE_F16] = QUANT_KERNEL(q, f16##odd),   \
        [VKA_STORAGE_F16P] = QUANT_KERNEL(q, f16p##odd), \
        [VKA_STORAGE_BF16] = QUANT_KERNEL(q, bf16##odd), \
    }
/* by [head dim an odd number of blocks that share words][vka_quant_index
 * of the cache's format][storage of k and v]; blocks of whole words (q4_1,
 * q5_1) have no odd variants: each invocation writes its own */
static const vka_kernel quant_kernels[2][VKA_QUANT_FORMATS][4] = {
    {QUANT_KERNELS(q8_0, ), QUANT_KERNELS(q4_0, ), QUANT_KERNELS(q4_1, ), QUANT_KERNELS(q5_0, ),
     QUANT_KERNELS(q5_1, ), QUANT_KERNELS(iq4_nl, )},
    {QUANT_KERNELS(q8_0, _odd),
     QUANT_KERNELS(q4_0, _odd), [3] = QUANT_KERNELS(q5_0, _odd), [5] = QUANT_KERNELS(iq4_nl, _odd)},
};

/* Whether a head dim is appended a quad at a time (else an element at a
 * time: rows, strides and offsets are then free). */
static bool by_quads(uint32_t head_dim) { return head_dim % 4 == 0; }

/* Checks k or v: [B, Hkv, T, D] in f32, f16 or bf16 (converted to a float
 * cache's dtype, or quantized), with D the cache's head dim of it; rows on
 * 4-element boundaries where D is a multiple of 4. */
static vkattn_result check_input(vkattn_kv_cache *c, const vkattn_tensor *t, const char *name,
                                 uint32_t batch, bool is_v, vkattn_tensor *out)
{
    vkattn_context *ctx = c->ctx;
    vkattn_result r = vka_tensor_resolve(ctx, t, name, out);
    if (r != VKATTN_SUCCESS)
        return r;
    if (out->rank != 4)
        return vka_fail(ctx, VKATTN_ERROR_INVALID_ARGUMENT,
                        "%s.rank is %u: expected 4 ([B, Hkv, T, %s])", name, out->rank,
                        is_v ? "Dv" : "Dk");
    char b[VKA_DTYPE_TEXT];
    if (!vka_dtype_is_float(out->dtype) && out->dtype != VKATTN_DTYPE_BF16)
        return vka_fail(ctx, VKATTN_ERROR_UNSUPPORTED_DTYPE,
                        "%s.dtype is %s: a %s cache %s f32, f16 or bf16 values", name,
                        vka_dtype_text(out->dtype, b), vkattn_dtype_name(c->d.dtype),
                        vka_dtype_is_quantized(c->d.dtype) ? "quantizes" : "takes");
    const uint32_t dim = is_v ? c->d.v_head_dim : c->d.head_dim;
    const int64_t want[4] = {batch, c->d.num_kv_heads, out->shape[2], dim};
    const char *what[4] = {"batch", "the cache's num_kv_heads", "",
                           is_v ? "the cache's v_head_dim" : "the cache's head_dim"};
    for (int i = 0; i < 4; i++)
        if (i != 2 && out->shape[i] != want[i])
            return vka_fail(ctx, VKATTN_ERROR_SHAPE_MISMATCH, "%s.shape[%d] is %lld but %s is %lld",
                            name, i, (long long)out->shape[i], what[i], (long long)want[i]);
    uint32_t es = (uint32_t)vkattn_dtype_size(out->dtype);
    if (by_quads(dim) || vka_dtype_is_quantized(c->d.dtype))
        VKA_TRY(vka_tensor_check_rows(ctx, out, name, 4, 4 * es));
    else
        VKA_TRY(vka_tensor_check_rows(ctx, out, name, 1, es));
    return VKATTN_SUCCESS;
}

/* One pass of an append: t (k or v) into `pool` (rows of `row` elements,
 * head dim `dim`). */
static vkattn_result prepare_pass(vkattn_context *ctx, vkattn_kv_cache *c, const vkattn_tensor *t,
                                  uint32_t batch, const vkattn_buffer *pool, uint64_t pool_bytes,
                                  uint32_t dim, uint32_t row, vka_kv_append_pass *pass)
{
    uint32_t tokens = (uint32_t)t->shape[2];
    size_t es = vkattn_dtype_size(t->dtype), pool_es = vkattn_dtype_size(c->d.dtype);
    uint64_t span =
        (uint64_t)((batch - 1) * t->strides[0] + (c->d.num_kv_heads - 1) * t->strides[1] +
                   (tokens - 1) * t->strides[2] + dim) *
        es;
    const bool quant = vka_dtype_is_quantized(c->d.dtype), quads = !quant && by_quads(dim);
    /* blocks that share words with their neighbours: one per invocation */
    const bool sharing = quant && vka_quant_blocks_share_words(c->d.dtype);
    const bool odd = sharing && row / 32 % 2; /* (a quantized row: whole blocks) */
    /* sources by quads or elements; the pool whole: quads or element pairs
     * of the cache's dtype, or a quantized one's words */
    uint32_t unit = quads ? 4 : 1, first, unused;
    vka_binding *b = pass->bindings;
    VKA_TRY(vka_bind_window(ctx, t->buffer, t->offset, span, unit * es, &b[1], &first));
    uint32_t pool_unit = quant ? 4 : (uint32_t)((quads ? 4 : 2) * pool_es);
    VKA_TRY(vka_bind_window(ctx, pool, 0, pool_bytes, pool_unit, &b[2], &unused));
    uint32_t spec[2] = {vka_workgroup_size(ctx, WORKGROUP), !quads};
    const vka_kernel *kernel =
        quant ? &quant_kernels[odd][vka_quant_index(c->d.dtype)][vka_storage_kind(ctx, t->dtype)]
              : &append_kernels[vka_storage_kind(ctx, c->d.dtype)][vka_storage_kind(ctx, t->dtype)];
    VKA_TRY(vka_pipeline_get(ctx, kernel, spec, quant ? 1 : 2, &pass->pipeline));
    /* per pool row: pairs of quantized blocks or single ones, quads or
     * element pairs */
    uint32_t per_row = quant ? (sharing && !odd ? row / 64 : row / 32) : quads ? row / 4 : row / 2;
    uint64_t units = (uint64_t)batch * c->d.num_kv_heads * tokens * per_row;
    vka_grid_2d(ctx, vka_div_up64(units, spec[0]), &pass->gx, &pass->gy);
    if (pass->gy > ctx->info.max_workgroup_count[1] || units > UINT32_MAX)
        return vka_fail(ctx, VKATTN_ERROR_OUT_OF_RANGE,
                        "append of %llu units is too large for one dispatch",
                        (unsigned long long)units);
    pass->push = (vka_kv_append_push){
        .batch = batch,
        .heads = c->d.num_kv_heads,
        .tokens = tokens,
        .units = per_row,
        .dh = dim,
        .first = first,
        .stride_b = (uint32_t)(t->strides[0] / unit),
        .stride_h = (uint32_t)(t->strides[1] / unit),
        .stride_t = (uint32_t)(t->strides[2] / unit),
        .block_size = c->d.block_size,
        .table_width = c->table_width,
    };
    return VKATTN_SUCCESS;
}

/* Binds k, v and the pools and gets the kernels of an append of checked k
 * and v (tokens per sequence): everything that can fail, before the step's
 * metadata is recorded (which moves the cache). */
vkattn_result vka_kv_append_prepare(vkattn_context *ctx, vkattn_kv_cache *c, const vkattn_tensor *k,
                                    const vkattn_tensor *v, uint32_t batch,
                                    vka_kv_append_plan *plan)
{
    VKA_TRY(prepare_pass(ctx, c, k, batch, c->k, c->k_pool_bytes, c->d.head_dim, c->k_row,
                         &plan->pass[0]));
    return prepare_pass(ctx, c, v, batch, c->v, c->v_pool_bytes, c->d.v_head_dim, c->v_row,
                        &plan->pass[1]);
}

vkattn_result vka_kv_append_dispatch(vkattn_context *ctx, VkCommandBuffer cmd,
                                     vka_kv_append_plan *plan, const vka_binding *meta)
{
    for (int i = 0; i < 2; i++) {
        vka_kv_append_pass *p = &plan->pass[i];
        p->bindings[0] = *meta;
        VKA_TRY(vka_cmd_dispatch(ctx, cmd, p->pipeline, p->bindings, &p->push, p->gx, p->gy, 1));
    }
    return VKATTN_SUCCESS;
}

vkattn_result vka_kv_append_check(vkattn_kv_cache *c, const vkattn_tensor *k,
                                  const vkattn_tensor *v, uint32_t batch, const char *k_name,
                                  const char *v_name, vkattn_tensor *k_out, vkattn_tensor *v_out)
{
    vkattn_context *ctx = c->ctx;
    VKA_TRY(check_input(c, k, k_name, batch, false, k_out));
    VKA_TRY(check_input(c, v, v_name, batch, true, v_out));
    if (v_out->shape[2] != k_out->shape[2])
        return vka_fail(ctx, VKATTN_ERROR_SHAPE_MISMATCH,
                        "%s.shape[2] is %lld but %s.shape[2] is %lld: the same tokens", v_name,
                        (long long)v_out->shape[2], k_name, (long long)k_out->shape[2]);
    if (k_out->shape[2] > UINT32_MAX)
        return vka_fail(ctx, VKATTN_ERROR_OUT_OF_RANGE, "%s.shape[2] is too large", k_name);
    return VKATTN_SUCCESS;
}
