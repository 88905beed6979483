/* The linear op (y = x W^T + b) and its segmented, head-split form used by
 * the MHA layer: the entry points and every check (recording:
 * linear_record.c). */
#include "spec/dtype.h"
#include "spec/error_text.h"
#include "ops/linear/linear_internal.h"

#include <string.h>

static vkattn_result check_same_dtype(vkattn_context *ctx, const vkattn_tensor *t, const char *what,
                                      const vkattn_tensor *ref, const char *ref_what)
{
    char b1[VKA_DTYPE_TEXT], b2[VKA_DTYPE_TEXT];
    if (t->dtype != ref->dtype)
        return vka_fail(ctx, VKATTN_ERROR_UNSUPPORTED_DTYPE,
                        "%s.dtype %s differs from %s.dtype %s: they must be the same", what,
                        vka_dtype_text(t->dtype, b1), ref_what, vka_dtype_text(ref->dtype, b2));
    return VKATTN_SUCCESS;
}

static vkattn_result check_rank(vkattn_context *ctx, const vkattn_tensor *t, const char *what,
                                uint32_t a, uint32_t b, const char *layout)
{
    if (t->rank != a && t->rank != b)
        return vka_fail(ctx, VKATTN_ERROR_INVALID_ARGUMENT, "%s.rank is %u: it must be %s", what,
                        t->rank, layout);
    return VKATTN_SUCCESS;
}

static vkattn_result check_dim(vkattn_context *ctx, const vkattn_tensor *t, const char *what,
                               uint32_t i, int64_t want, const char *meaning)
{
    if (t->shape[i] != want)
        return vka_fail(ctx, VKATTN_ERROR_SHAPE_MISMATCH, "%s.shape[%u] is %lld but %s is %lld",
                        what, i, (long long)t->shape[i], meaning, (long long)want);
    return VKATTN_SUCCESS;
}

static bool is_pool(const vka_linear_segment *s) { return s->target != VKA_LINEAR_TO_DST; }

static const char *pool_name(const vka_linear_segment *s)
{
    return s->target == VKA_LINEAR_TO_K_POOL ? "K pool" : "V pool";
}

/* The pool segments' targets, the cache and the step they append to. Checks
 * what does not depend on x (see check_pool_rows for that). */
static vkattn_result check_pool_targets(vkattn_context *ctx, const vka_linear_segments_args *a,
                                        vka_linear_problem *p)
{
    uint32_t seen = 0;
    for (uint32_t i = 0; i < a->segment_count; i++) {
        const vka_linear_segment *s = &a->segments[i];
        if (s->target != VKA_LINEAR_TO_DST && s->target != VKA_LINEAR_TO_K_POOL &&
            s->target != VKA_LINEAR_TO_V_POOL)
            return vka_fail(ctx, VKATTN_ERROR_INVALID_ARGUMENT,
                            "args->segments[%u].target is %d: it must be VKA_LINEAR_TO_DST, "
                            "_TO_K_POOL or _TO_V_POOL",
                            i, (int)s->target);
        if (!is_pool(s))
            continue;
        if (!a->cache || !a->cache->cache)
            return vka_fail(ctx, VKATTN_ERROR_INVALID_ARGUMENT,
                            "args->segments[%u] targets the %s but args->cache%s is NULL", i,
                            pool_name(s), a->cache ? "->cache" : "");
        if (seen & (1u << s->target))
            return vka_fail(ctx, VKATTN_ERROR_INVALID_ARGUMENT,
                            "args->segments[%u] targets the %s, which an earlier segment "
                            "writes already",
                            i, pool_name(s));
        seen |= 1u << s->target;
        if (s->dst.buffer)
            return vka_fail(ctx, VKATTN_ERROR_INVALID_ARGUMENT,
                            "args->segments[%u].dst.buffer is set but the segment targets the "
                            "%s: leave dst zero",
                            i, pool_name(s));
        p->pool_segments |= 1u << i;
    }
    if (!a->cache)
        return VKATTN_SUCCESS;
    /* a step whose K and V go to scratch (a quantized cache appends them
     * after the projection) still takes its RoPE positions from the cache */
    bool cache_positions = a->heads && a->heads->position_source == VKA_POSITIONS_CACHE;
    if (!p->pool_segments && !cache_positions)
        return vka_fail(ctx, VKATTN_ERROR_INVALID_ARGUMENT,
                        "args->cache is set but no segment targets the K or V pool");
    const vkattn_kv_cache *c = a->cache->cache;
    if (c->ctx != ctx)
        return vka_fail(ctx, VKATTN_ERROR_INVALID_ARGUMENT,
                        "args->cache->cache belongs to another context");
    if (a->cache->batch == 0 || a->cache->batch > c->d.max_sequences)
        return vka_fail(ctx, VKATTN_ERROR_INVALID_ARGUMENT,
                        "args->cache->batch is %u: it must be 1..%u (the cache's max_sequences)",
                        a->cache->batch, c->d.max_sequences);
    if (a->cache->new_tokens == 0)
        return vka_fail(ctx, VKATTN_ERROR_INVALID_ARGUMENT, "args->cache->new_tokens is 0");
    /* The pools are bound whole: which rows a step touches is only known on
     * the GPU (block tables). */
    uint64_t k_pool = c->k_pool_bytes, v_pool = c->v_pool_bytes;
    uint64_t pool = k_pool > v_pool ? k_pool : v_pool;
    uint64_t limit = vka_min_u64(ctx->info.max_storage_buffer_range, 1ull << 32);
    if (vka_align_up(pool, 4) > limit)
        return vka_fail(ctx, VKATTN_ERROR_OUT_OF_RANGE,
                        "args->cache->cache: its %s pool is %llu bytes, more than one binding "
                        "of this device holds (maxStorageBufferRange %llu): the projection "
                        "cannot append to it",
                        pool == k_pool ? "K" : "V", (unsigned long long)pool,
                        (unsigned long long)ctx->info.max_storage_buffer_range);
    const vka_binding *m = a->cache->meta;
    if (m && (m->buffer != c->meta || m->offset != 0 ||
              m->range < 4 * vka_kv_meta_words(c, a->cache->batch)))
        return vka_fail(ctx, VKATTN_ERROR_INVALID_ARGUMENT,
                        "args->cache->meta is not the cache's step metadata for %u sequences "
                        "(use the binding vka_kv_step_record returned)",
                        a->cache->batch);
    p->cache = c;
    p->batch = a->cache->batch;
    if (m)
        p->meta = *m;
    return VKATTN_SUCCESS;
}

/* A pool segment against the cache and x; fills its dst with the whole pool. */
static vkattn_result check_pool_segment(vkattn_context *ctx, const vka_linear_segments_args *a,
                                        uint32_t i, vka_linear_problem *p)
{
    const vka_linear_segment *s = &a->segments[i];
    const vkattn_kv_cache *c = p->cache;
    const vkattn_kv_cache_desc *d = &c->d;
    char b1[VKA_DTYPE_TEXT], b2[VKA_DTYPE_TEXT];
    if (p->x.dtype != d->dtype)
        return vka_fail(ctx, VKATTN_ERROR_UNSUPPORTED_DTYPE,
                        "args->x.dtype %s differs from the cache's dtype %s: segment %u writes "
                        "its %s in x's dtype",
                        vka_dtype_text(p->x.dtype, b1), vka_dtype_text(d->dtype, b2), i,
                        pool_name(s));
    const bool is_k = s->target == VKA_LINEAR_TO_K_POOL;
    const uint32_t dim = is_k ? d->head_dim : d->v_head_dim, row = is_k ? c->k_row : c->v_row;
    if (s->head_dim != dim || (uint64_t)s->columns != (uint64_t)d->num_kv_heads * dim)
        return vka_fail(ctx, VKATTN_ERROR_SHAPE_MISMATCH,
                        "args->segments[%u] (%s) has columns %u, head_dim %u but the cache "
                        "holds %u KV heads x %s %u (columns %u)",
                        i, pool_name(s), s->columns, s->head_dim, d->num_kv_heads,
                        is_k ? "head_dim" : "v_head_dim", dim, d->num_kv_heads * dim);
    /* the epilogue writes token rows of head_dim values back to back */
    if (row != dim)
        return vka_fail(ctx, VKATTN_ERROR_UNSUPPORTED,
                        "args->segments[%u] (%s): the cache keeps rows of %u values for %s %u "
                        "(padded to a multiple of 8), which the projection cannot write",
                        i, pool_name(s), row, is_k ? "head_dim" : "v_head_dim", dim);
    vkattn_buffer *pool = is_k ? c->k : c->v;
    uint64_t pool_bytes = is_k ? c->k_pool_bytes : c->v_pool_bytes;
    int64_t elements = (int64_t)(pool_bytes / vkattn_dtype_size(d->dtype));
    p->dst[i] = vkattn_tensor_make(pool, 0, d->dtype, 1, &elements);
    return VKATTN_SUCCESS;
}

/* x's batch and rows must be the step's. */
static vkattn_result check_pool_rows(vkattn_context *ctx, const vka_linear_segments_args *a,
                                     const vka_linear_problem *p)
{
    if (p->B != a->cache->batch)
        return vka_fail(ctx, VKATTN_ERROR_SHAPE_MISMATCH,
                        "the batch of args->x is %llu but args->cache->batch is %u",
                        (unsigned long long)p->B, a->cache->batch);
    if (p->T != a->cache->new_tokens)
        return vka_fail(ctx, VKATTN_ERROR_SHAPE_MISMATCH,
                        "the rows per batch of args->x are %llu but args->cache->new_tokens "
                        "is %u",
                        (unsigned long long)p->T, a->cache->new_tokens);
    return VKATTN_SUCCESS;
}

/* Inputs and plain outputs must not live in the cache's pools. */
static vkattn_result check_not_pool(vkattn_context *ctx, const vka_linear_problem *p,
                                    const vkattn_tensor *t, const char *what)
{
    if (p->cache && t->buffer && (t->buffer == p->cache->k || t->buffer == p->cache->v))
        return vka_fail(ctx, VKATTN_ERROR_INVALID_ARGUMENT,
                        "%s lies in a pool of args->cache->cache, which the projection writes",
                        what);
    return VKATTN_SUCCESS;
}

/* The heads epilogue: its segments, positions and parameters. */
static vkattn_result check_heads(vkattn_context *ctx, const vka_linear_segments_args *a,
                                 vka_linear_problem *p)
{
    const vka_linear_heads *h = a->heads;
    if (!h || !h->segments)
        return VKATTN_SUCCESS;
    /* the epilogue walks the tile in blocks of hd columns: its segments
     * have that head dim, and every segment starts on a block (the others,
     * such as V beside Q and K, may have heads of their own size: their
     * columns are stored one by one); pairs of dims: hd even */
    uint64_t hd = p->head_dim[0];
    if (hd % 2)
        return vka_fail(ctx, VKATTN_ERROR_INVALID_ARGUMENT,
                        "args->heads: head_dim %llu is odd (the epilogue works on pairs of "
                        "dims)",
                        (unsigned long long)hd);
    for (uint32_t i = 0; i < p->segment_count; i++) {
        bool epi = i < 2 && (h->segments & (1u << i));
        if ((epi && p->head_dim[i] != hd) || p->seg_start[i] % hd)
            return vka_fail(ctx, VKATTN_ERROR_INVALID_ARGUMENT,
                            "args->heads: segment %u (head_dim %llu, first column %llu) does not "
                            "fall on the epilogue's heads of %llu columns",
                            i, (unsigned long long)p->head_dim[i],
                            (unsigned long long)p->seg_start[i], (unsigned long long)hd);
    }
    if (h->segments >= (1u << (p->segment_count < 2 ? p->segment_count : 2)))
        return vka_fail(ctx, VKATTN_ERROR_INVALID_ARGUMENT,
                        "args->heads->segments is 0x%x: segments 0 and 1 of %u at most",
                        h->segments, p->segment_count);
    if (h->rope_dims % 2 || h->rope_dims > hd)
        return vka_fail(ctx, VKATTN_ERROR_INVALID_ARGUMENT,
                        "args->heads->rope_dims %u: even, at most head_dim %llu", h->rope_dims,
                        (unsigned long long)hd);
    if (!h->params || h->params->ctx != ctx)
        return vka_fail(ctx, VKATTN_ERROR_INVALID_ARGUMENT,
                        "args->heads->params is NULL or of another context");
    p->params_floats = 2 * hd;
    if (h->rope_dims)
        p->params_floats += (uint64_t)4 * 64 * h->rope_dims;
    if (h->params_offset % 16 || h->params_offset > h->params->size ||
        (h->params->size - h->params_offset) / 4 < p->params_floats)
        return vka_fail(ctx, VKATTN_ERROR_OUT_OF_RANGE,
                        "args->heads->params: %llu floats from offset %llu do not fit",
                        (unsigned long long)p->params_floats, (unsigned long long)h->params_offset);
    p->heads = *h;
    if (h->position_source == VKA_POSITIONS_CACHE && !p->cache)
        return vka_fail(ctx, VKATTN_ERROR_INVALID_ARGUMENT,
                        "args->heads: cache positions without args->cache");
    if (h->position_source != VKA_POSITIONS_TENSOR) {
        memset(&p->heads.positions, 0, sizeof p->heads.positions);
        return VKATTN_SUCCESS;
    }
    vkattn_tensor t;
    VKA_TRY(vka_tensor_resolve(ctx, &h->positions, "args->positions", &t));
    if (t.dtype != VKATTN_DTYPE_I32) {
        char b[VKA_DTYPE_TEXT];
        return vka_fail(ctx, VKATTN_ERROR_UNSUPPORTED_DTYPE,
                        "args->positions.dtype is %s: positions are i32",
                        vka_dtype_text(t.dtype, b));
    }
    if (t.rank != 2 || (uint64_t)t.shape[0] != p->B || (uint64_t)t.shape[1] != p->T)
        return vka_fail(ctx, VKATTN_ERROR_SHAPE_MISMATCH,
                        "args->positions is rank %u [%lld, %lld]: it must be [B %llu, T %llu]",
                        t.rank, (long long)t.shape[0], (long long)(t.rank > 1 ? t.shape[1] : 0),
                        (unsigned long long)p->B, (unsigned long long)p->T);
    if (t.strides[1] != 1 || t.strides[0] != t.shape[1] || t.offset % 4)
        return vka_fail(ctx, VKATTN_ERROR_INVALID_ARGUMENT,
                        "args->positions must be contiguous (strides {%lld, 1}, offset a "
                        "multiple of 4)",
                        (long long)t.shape[1]);
    p->heads.positions = t;
    return VKATTN_SUCCESS;
}

/* Validates everything and fills the problem; `dst_names` name each
 * segment's dst in messages. */
static vkattn_result validate(vkattn_context *ctx, const vka_linear_segments_args *a,
                              const char *const dst_names[], vka_linear_problem *p)
{
    memset(p, 0, sizeof *p);
    if (a->segment_count < 1 || a->segment_count > VKA_LINEAR_MAX_SEGMENTS)
        return vka_fail(ctx, VKATTN_ERROR_INVALID_ARGUMENT,
                        "args->segment_count is %u: it must be 1..%d", a->segment_count,
                        VKA_LINEAR_MAX_SEGMENTS);
    VKA_TRY(check_pool_targets(ctx, a, p));
    VKA_TRY(vka_tensor_resolve(ctx, &a->x, "args->x", &p->x));
    VKA_TRY(vka_tensor_resolve_blocks(ctx, &a->w, "args->w", vka_linear_block_align(ctx), &p->w));
    if (a->b.buffer)
        VKA_TRY(vka_tensor_resolve(ctx, &a->b, "args->b", &p->b));
    for (uint32_t i = 0; i < a->segment_count; i++)
        if (!is_pool(&a->segments[i]))
            VKA_TRY(vka_tensor_resolve(ctx, &a->segments[i].dst, dst_names[i], &p->dst[i]));

    if (p->x.dtype != VKATTN_DTYPE_BF16) /* f32, f16 or bf16 */
        VKA_TRY(vka_tensor_check_float(ctx, &p->x, "args->x", "the linear op (or bf16)"));
    if (p->w.dtype == VKATTN_DTYPE_Q4_0)
        return vka_fail(ctx, VKATTN_ERROR_UNSUPPORTED_DTYPE,
                        "args->w.dtype is q4_0: quantized weights are q8_0 (q4_0 is a KV cache "
                        "dtype)");
    if (p->w.dtype != VKATTN_DTYPE_BF16 && p->w.dtype != VKATTN_DTYPE_Q8_0)
        VKA_TRY(vka_tensor_check_float(ctx, &p->w, "args->w", "the linear op (or bf16, q8_0)"));
    if (p->b.buffer && p->w.dtype == VKATTN_DTYPE_Q8_0 && p->b.dtype != VKATTN_DTYPE_F32) {
        char b1[VKA_DTYPE_TEXT];
        return vka_fail(ctx, VKATTN_ERROR_UNSUPPORTED_DTYPE,
                        "args->b.dtype is %s: with q8_0 weights the bias is f32",
                        vka_dtype_text(p->b.dtype, b1));
    }
    if (p->b.buffer && p->w.dtype != VKATTN_DTYPE_Q8_0)
        VKA_TRY(check_same_dtype(ctx, &p->b, "args->b", &p->w, "args->w"));
    for (uint32_t i = 0; i < a->segment_count; i++)
        if (!is_pool(&a->segments[i]))
            VKA_TRY(check_same_dtype(ctx, &p->dst[i], dst_names[i], &p->x, "args->x"));

    VKA_TRY(check_rank(ctx, &p->x, "args->x", 2, 3, "2 [M, K] or 3 [B, T, K]"));
    VKA_TRY(check_rank(ctx, &p->w, "args->w", 2, 2, "2 [N, K]"));
    if (p->b.buffer)
        VKA_TRY(check_rank(ctx, &p->b, "args->b", 1, 1, "1 [N]"));
    for (uint32_t i = 0; i < a->segment_count; i++)
        if (!is_pool(&a->segments[i]))
            VKA_TRY(check_rank(ctx, &p->dst[i], dst_names[i], 4, 4, "4 [B, heads, T, head_dim]"));
    VKA_TRY(vka_tensor_check_rows(ctx, &p->x, "args->x", 1, 1));
    VKA_TRY(vka_tensor_check_rows(ctx, &p->w, "args->w", 1, 1));
    if (p->b.buffer)
        VKA_TRY(vka_tensor_check_rows(ctx, &p->b, "args->b", 1, 1));
    for (uint32_t i = 0; i < a->segment_count; i++)
        if (!is_pool(&a->segments[i]))
            VKA_TRY(vka_tensor_check_rows(ctx, &p->dst[i], dst_names[i], 1, 1));

    uint32_t r = p->x.rank;
    p->B = r == 3 ? (uint64_t)p->x.shape[0] : 1;
    p->T = (uint64_t)p->x.shape[r - 2];
    p->K = (uint64_t)p->x.shape[r - 1];
    p->N = (uint64_t)p->w.shape[0];
    p->M = p->B * p->T;
    p->x_sb = r == 3 ? (uint64_t)p->x.strides[0] : 0;
    p->x_st = (uint64_t)p->x.strides[r - 2];
    p->w_sn = (uint64_t)p->w.strides[0];
    VKA_TRY(check_dim(ctx, &p->w, "args->w", 1, (int64_t)p->K, "args->x's last dimension (K)"));
    if (p->w.dtype == VKATTN_DTYPE_Q8_0 &&
        (p->x.offset / vkattn_dtype_size(p->x.dtype) % 4 || p->x_sb % 4 || p->x_st % 4))
        return vka_fail(ctx, VKATTN_ERROR_INVALID_ARGUMENT,
                        "args->x: with q8_0 weights x's rows are read 4 elements at a time: its "
                        "strides (%llu, %llu) and its offset in elements (%llu) must be "
                        "multiples of 4",
                        (unsigned long long)p->x_sb, (unsigned long long)p->x_st,
                        (unsigned long long)(p->x.offset / vkattn_dtype_size(p->x.dtype)));
    if (p->b.buffer)
        VKA_TRY(check_dim(ctx, &p->b, "args->b", 0, (int64_t)p->N, "args->w.shape[0] (N)"));
    if (p->cache)
        VKA_TRY(check_pool_rows(ctx, a, p));

    uint64_t columns = 0;
    for (uint32_t i = 0; i < a->segment_count; i++) {
        const vka_linear_segment *s = &a->segments[i];
        if (s->columns == 0 || s->head_dim == 0 || s->columns % s->head_dim)
            return vka_fail(ctx, VKATTN_ERROR_INVALID_ARGUMENT,
                            "args->segments[%u]: head_dim %u must divide columns %u (both >= 1)", i,
                            s->head_dim, s->columns);
        p->seg_start[i] = columns;
        p->head_dim[i] = s->head_dim;
        columns += s->columns;
        if (is_pool(s)) {
            VKA_TRY(check_pool_segment(ctx, a, i, p));
            continue;
        }
        const vkattn_tensor *d = &p->dst[i];
        VKA_TRY(check_dim(ctx, d, dst_names[i], 0, (int64_t)p->B, "the batch of args->x"));
        VKA_TRY(check_dim(ctx, d, dst_names[i], 1, s->columns / s->head_dim,
                          "the segment's heads (columns / head_dim)"));
        VKA_TRY(check_dim(ctx, d, dst_names[i], 2, (int64_t)p->T, "the rows per batch of args->x"));
        VKA_TRY(check_dim(ctx, d, dst_names[i], 3, s->head_dim, "the segment's head_dim"));
    }
    p->seg_start[a->segment_count] = columns;
    p->segment_count = a->segment_count;
    if (columns != p->N)
        return vka_fail(ctx, VKATTN_ERROR_SHAPE_MISMATCH,
                        "the segments' columns add up to %llu but args->w.shape[0] (N) is %llu",
                        (unsigned long long)columns, (unsigned long long)p->N);
    if (p->M > UINT32_MAX || p->N > UINT32_MAX || p->K > UINT32_MAX)
        return vka_fail(ctx, VKATTN_ERROR_OUT_OF_RANGE,
                        "linear of %llux%llux%llu (M x N x K): each must be below 2^32",
                        (unsigned long long)p->M, (unsigned long long)p->N,
                        (unsigned long long)p->K);

    VKA_TRY(check_heads(ctx, a, p));
    VKA_TRY(check_not_pool(ctx, p, &p->x, "args->x"));
    VKA_TRY(check_not_pool(ctx, p, &p->w, "args->w"));
    VKA_TRY(check_not_pool(ctx, p, &p->b, "args->b"));
    for (uint32_t i = 0; i < a->segment_count; i++) {
        if (is_pool(&a->segments[i]))
            continue;
        VKA_TRY(check_not_pool(ctx, p, &p->dst[i], dst_names[i]));
        VKA_TRY(vka_tensor_check_output(ctx, &p->dst[i], dst_names[i]));
        VKA_TRY(vka_tensor_check_disjoint(ctx, &p->dst[i], dst_names[i], &p->x, "args->x"));
        VKA_TRY(vka_tensor_check_disjoint(ctx, &p->dst[i], dst_names[i], &p->w, "args->w"));
        VKA_TRY(vka_tensor_check_disjoint(ctx, &p->dst[i], dst_names[i], &p->b, "args->b"));
    }
    return VKATTN_SUCCESS;
}

static const char *const segment_names[] = {"args->segments[0].dst", "args->segments[1].dst",
                                            "args->segments[2].dst"};

vkattn_result vka_linear_segments_check(vkattn_context *ctx, const vka_linear_segments_args *args)
{
    if (!ctx)
        return VKATTN_ERROR_INVALID_ARGUMENT;
    if (!args)
        return vka_fail(ctx, VKATTN_ERROR_INVALID_ARGUMENT,
                        "vka_linear_segments_check: args is NULL");
    vka_linear_problem p;
    return validate(ctx, args, segment_names, &p);
}

vkattn_result vka_cmd_linear_segments(vkattn_context *ctx, VkCommandBuffer cmd,
                                      const vka_linear_segments_args *args)
{
    VKA_TRY(vka_check_entry(ctx, "vka_cmd_linear_segments", true, cmd, args));
    if (args->cache && !args->cache->meta)
        return vka_fail(ctx, VKATTN_ERROR_INVALID_ARGUMENT,
                        "args->cache->meta is NULL: record the step's metadata first "
                        "(vka_kv_step_record)");
    vka_linear_problem p;
    VKA_TRY(validate(ctx, args, segment_names, &p));
    return vka_linear_record(ctx, cmd, &p, NULL);
}

vkattn_result vka_linear_problem_plain(vkattn_context *ctx, const vkattn_linear_args *args,
                                       vka_linear_problem *p)
{
    /* y's own shape checks, then y viewed as [B, 1, T, N] (one head of N). */
    vkattn_tensor x, w, y;
    VKA_TRY(vka_tensor_resolve(ctx, &args->x, "args->x", &x));
    VKA_TRY(vka_tensor_resolve_blocks(ctx, &args->w, "args->w", vka_linear_block_align(ctx), &w));
    VKA_TRY(vka_tensor_resolve(ctx, &args->y, "args->y", &y));
    VKA_TRY(check_rank(ctx, &x, "args->x", 2, 3, "2 [M, K] or 3 [B, T, K]"));
    VKA_TRY(check_rank(ctx, &w, "args->w", 2, 2, "2 [N, K]"));
    if (y.rank != x.rank)
        return vka_fail(ctx, VKATTN_ERROR_SHAPE_MISMATCH,
                        "args->y.rank %u differs from args->x.rank %u", y.rank, x.rank);
    for (uint32_t i = 0; i + 1 < x.rank; i++)
        VKA_TRY(check_dim(ctx, &y, "args->y", i, x.shape[i], "the same dimension of args->x"));
    VKA_TRY(check_dim(ctx, &y, "args->y", y.rank - 1, w.shape[0], "args->w.shape[0] (N)"));
    VKA_TRY(vka_tensor_check_output(ctx, &y, "args->y"));
    /* the plain op's rows start on 16 bytes (segments take any element
     * offset: the MHA layer places them) */
    VKA_TRY(vka_tensor_check_rows(ctx, &x, "args->x", 1, 16));
    VKA_TRY(vka_tensor_check_rows(ctx, &w, "args->w", 1, 16));
    VKA_TRY(vka_tensor_check_rows(ctx, &y, "args->y", 1, 16));
    if (args->b.buffer) {
        vkattn_tensor b;
        VKA_TRY(vka_tensor_resolve(ctx, &args->b, "args->b", &b));
        VKA_TRY(vka_tensor_check_rows(ctx, &b, "args->b", 1, 16));
    }
    if (args->w.shape[0] > UINT32_MAX)
        return vka_fail(ctx, VKATTN_ERROR_OUT_OF_RANGE,
                        "args->w.shape[0] (N) %lld exceeds 2^32 - 1", (long long)args->w.shape[0]);

    vka_linear_segments_args s;
    memset(&s, 0, sizeof s);
    s.x = args->x;
    s.w = args->w;
    s.b = args->b;
    s.segment_count = 1;
    s.segments[0].columns = (uint32_t)args->w.shape[0];
    s.segments[0].head_dim = (uint32_t)args->w.shape[0];
    vkattn_tensor *d = &s.segments[0].dst;
    *d = y;
    d->rank = 4;
    bool r3 = y.rank == 3;
    int64_t shape[4] = {r3 ? y.shape[0] : 1, 1, y.shape[r3 ? 1 : 0], y.shape[r3 ? 2 : 1]};
    int64_t strides[4] = {r3 ? y.strides[0] : 0, 0, y.strides[r3 ? 1 : 0], y.strides[r3 ? 2 : 1]};
    memcpy(d->shape, shape, sizeof shape);
    memcpy(d->strides, strides, sizeof strides);
    static const char *const names[] = {"args->y"};
    return validate(ctx, &s, names, p);
}

static vkattn_result check_call(vkattn_context *ctx, const void *args, void *problem)
{
    return vka_linear_problem_plain(ctx, args, problem);
}

static vkattn_result record_call(vkattn_context *ctx, VkCommandBuffer cmd, const void *problem)
{
    return vka_linear_record(ctx, cmd, problem, NULL);
}

/* vkattn_cmd_linear and vkattn_linear */
VKA_OP_ENTRY_POINTS(linear, vkattn_linear_args, vka_linear_problem, check_call, record_call)
