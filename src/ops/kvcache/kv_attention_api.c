/* vkattn_kv_attention: attention of new queries over a KV cache - the entry
 * points and every check. The choice of kernel, tiles and splits:
 * kv_attention_config.c; recording: kv_attention_record.c; kernels:
 * shaders/kv_attention_*. */
#include "ops/kvcache/kvcache_internal.h"
#include "spec/varlen.h"
#include "spec/attention_shapes.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* Whether a call reads q and writes out an element at a time: a head dim
 * that is not a multiple of 8 (the kernels pad rows to 8 inside). */
static bool elementwise(const vkattn_kv_cache *c)
{
    return c->d.head_dim % VKA_HEAD_DIM_MULTIPLE || c->d.v_head_dim % VKA_HEAD_DIM_MULTIPLE;
}

/* q [B, Hq, T, Dk] / out [B, Hq, T, Dv] (`is_out`): rows read and written 4
 * elements at a time, or one at a time with elementwise() (q's rows are
 * then free; out's too where Dv is not a multiple of 8, which a device
 * keeping out as pairs in 32-bit words cannot write). */
static vkattn_result check_tensor(vkattn_kv_cache *c, const vkattn_tensor *in, const char *prefix,
                                  bool is_out, vkattn_tensor *t)
{
    vkattn_context *ctx = c->ctx;
    const char *name = is_out ? "out" : "q", *dname = is_out ? "Dv" : "Dk";
    const uint32_t dim = is_out ? c->d.v_head_dim : c->d.head_dim;
    char what[96];
    snprintf(what, sizeof what, "%s%s", prefix, name);
    vkattn_result r = vka_tensor_resolve(ctx, in, what, t);
    if (r != VKATTN_SUCCESS)
        return r;
    if (t->rank != 4)
        return vka_fail(ctx, VKATTN_ERROR_INVALID_ARGUMENT,
                        "%s.rank is %u: expected 4 ([B, Hq, T, %s])", what, t->rank, dname);
    char b[VKA_DTYPE_TEXT];
    if (!vka_dtype_is_float(t->dtype) && t->dtype != VKATTN_DTYPE_BF16)
        return vka_fail(ctx, VKATTN_ERROR_UNSUPPORTED_DTYPE, "%s.dtype is %s: f32, f16 or bf16",
                        what, vka_dtype_text(t->dtype, b));
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
    if (t->shape[3] != dim)
        return vka_fail(ctx, VKATTN_ERROR_SHAPE_MISMATCH,
                        "%s.shape[3] (%s) %lld differs from the cache's %s %u", what,
                        is_out ? "v_head_dim" : "head_dim", (long long)t->shape[3],
                        is_out ? "v_head_dim" : "head_dim", dim);
    if (t->shape[0] > UINT32_MAX || t->shape[2] > UINT32_MAX)
        return vka_fail(ctx, VKATTN_ERROR_INVALID_ARGUMENT, "%s: batch or tokens too large", what);
    uint32_t storage = vka_storage_kind(ctx, t->dtype);
    if (is_out && dim % VKA_HEAD_DIM_MULTIPLE &&
        (storage == VKA_STORAGE_F16P || storage == VKA_STORAGE_BF16))
        return vka_fail(ctx, VKATTN_ERROR_UNSUPPORTED,
                        "%s is %s with v_head_dim %u: this device keeps %s as pairs in 32-bit "
                        "words, which cannot be written one element at a time (use a head dim "
                        "that is a multiple of 8, or f32%s)",
                        what, vkattn_dtype_name(t->dtype), dim, vkattn_dtype_name(t->dtype),
                        t->dtype == VKATTN_DTYPE_F16 ? "" : " or f16");
    size_t es = vkattn_dtype_size(t->dtype);
    if (elementwise(c) && (!is_out || dim % VKA_HEAD_DIM_MULTIPLE))
        VKA_TRY(vka_tensor_check_rows(ctx, t, what, 1, es));
    else
        VKA_TRY(vka_tensor_check_rows(ctx, t, what, 4, 16));
    vka_box box = {{0},
                   {(uint64_t)t->shape[0], (uint64_t)t->shape[1], (uint64_t)t->shape[2],
                    (uint64_t)t->shape[3]}};
    if (!vka_box_fits_storage(ctx, t, &box))
        return vka_fail(ctx, VKATTN_ERROR_UNSUPPORTED,
                        "%s spans %llu bytes, more than one binding of this device can hold "
                        "(maxStorageBufferRange %llu)",
                        what, (unsigned long long)vka_box_bytes(t, &box),
                        (unsigned long long)ctx->info.max_storage_buffer_range);
    return VKATTN_SUCCESS;
}

vkattn_result vka_kv_attention_check(vkattn_kv_cache *c, const vkattn_tensor *q,
                                     const vkattn_tensor *out, float scale, uint32_t kv_splits,
                                     const char *prefix, vka_kv_attention_problem *p)
{
    vkattn_context *ctx = c->ctx;
    memset(p, 0, sizeof *p);
    vkattn_result r = check_tensor(c, q, prefix, false, &p->q);
    if (r == VKATTN_SUCCESS)
        r = check_tensor(c, out, prefix, true, &p->out);
    if (r != VKATTN_SUCCESS)
        return r;
    if (p->out.dtype != p->q.dtype)
        return vka_fail(ctx, VKATTN_ERROR_UNSUPPORTED_DTYPE,
                        "%sout.dtype is %s but %sq.dtype is %s: "
                        "they must be the same",
                        prefix, vkattn_dtype_name(p->out.dtype), prefix,
                        vkattn_dtype_name(p->q.dtype));
    for (int d = 0; d < 3; d++)
        if (p->out.shape[d] != p->q.shape[d])
            return vka_fail(ctx, VKATTN_ERROR_SHAPE_MISMATCH,
                            "%sout.shape[%d] is %lld but %sq.shape[%d] is %lld", prefix, d,
                            (long long)p->out.shape[d], prefix, d, (long long)p->q.shape[d]);
    char out_name[96], q_name[96];
    snprintf(out_name, sizeof out_name, "%sout", prefix);
    snprintf(q_name, sizeof q_name, "%sq", prefix);
    VKA_TRY(vka_tensor_check_output(ctx, &p->out, out_name));
    VKA_TRY(vka_tensor_check_disjoint(ctx, &p->out, out_name, &p->q, q_name));
    p->batch = (uint32_t)p->q.shape[0];
    p->num_heads = (uint32_t)p->q.shape[1];
    p->new_tokens = (uint32_t)p->q.shape[2];
    if (p->new_tokens <= VKA_KV_DECODE_MAX_TOKENS && kv_splits &&
        (uint64_t)kv_splits * p->new_tokens > VKATTN_KV_MAX_SPLIT_ROWS)
        return vka_fail(ctx, VKATTN_ERROR_INVALID_ARGUMENT,
                        "%skv_splits %u x %u queries per sequence is %llu split rows, more than "
                        "VKATTN_KV_MAX_SPLIT_ROWS (%d)",
                        prefix, kv_splits, p->new_tokens,
                        (unsigned long long)kv_splits * p->new_tokens, VKATTN_KV_MAX_SPLIT_ROWS);
    /* The pools are bound whole: a pool past one window would need the cache
     * to split it. */
    uint64_t k_pool = c->k_pool_bytes, v_pool = c->v_pool_bytes;
    uint64_t pool = k_pool > v_pool ? k_pool : v_pool;
    uint64_t align = ctx->info.min_storage_buffer_offset_alignment;
    if (pool + (align < 16 ? 16 : align) + 4 > vka_storage_window_limit(ctx))
        return vka_fail(ctx, VKATTN_ERROR_UNSUPPORTED,
                        "the cache's %s pool is %llu bytes, more than one binding of this device "
                        "can hold (maxStorageBufferRange %llu): use fewer blocks or sequences "
                        "per cache",
                        pool == k_pool ? "K" : "V", (unsigned long long)pool,
                        (unsigned long long)ctx->info.max_storage_buffer_range);
    p->elem = elementwise(c);
    char error[VKA_ERROR_MAX], scale_name[96];
    snprintf(scale_name, sizeof scale_name, "%sscale", prefix);
    double resolved;
    vkattn_result r_scale =
        vka_attention_scale(scale, c->d.head_dim, scale_name, &resolved, error, sizeof error);
    if (r_scale != VKATTN_SUCCESS)
        return vka_fail(ctx, r_scale, "%s", error);
    p->scale = (float)resolved;
    p->kv_splits = kv_splits;
    return VKATTN_SUCCESS;
}

static vka_shape_view view_of(const vkattn_tensor *t)
{
    vka_shape_view v = {t->buffer != NULL, t->dtype, t->rank, t->shape};
    return v;
}

/* An optional f32 tensor of the modifiers, resolved (`out` zeroed when
 * absent); its elements are read or written one float at a time. */
static vkattn_result resolve_mod_tensor(vkattn_context *ctx, const vkattn_tensor *in,
                                        const char *prefix, const char *name, vkattn_tensor *out)
{
    memset(out, 0, sizeof *out);
    if (!in->buffer)
        return VKATTN_SUCCESS;
    char what[96];
    snprintf(what, sizeof what, "%s%s", prefix, name);
    VKA_TRY(vka_tensor_resolve(ctx, in, what, out));
    uint64_t last = 0;
    bool fits = true;
    for (uint32_t d = 0; d < out->rank; d++) {
        last += (uint64_t)(out->shape[d] - 1) * (uint64_t)out->strides[d];
        fits = fits && out->strides[d] <= UINT32_MAX;
    }
    if (!fits || (last + 1) * 4 > vka_storage_window_limit(ctx) / 2)
        return vka_fail(ctx, VKATTN_ERROR_UNSUPPORTED,
                        "%s spans %llu floats, more than one binding of this device holds", what,
                        (unsigned long long)(last + 1));
    return VKATTN_SUCCESS;
}

vkattn_result vka_kv_attention_check_mods(vkattn_kv_cache *c, const vka_kv_mods_args *in,
                                          const char *prefix, vka_kv_attention_problem *p)
{
    vkattn_context *ctx = c->ctx;
    vka_score_mods_args sa = {
        .causal_align = VKATTN_CAUSAL_BOTTOM_RIGHT,
        .window = in->window,
        .softcap = in->softcap,
        .alibi_max_bias = in->alibi_max_bias,
        .sinks = view_of(&in->sinks),
        .alibi_slopes = view_of(&in->alibi_slopes),
        .lse = view_of(&in->lse),
    };
    vka_attention_dims dims = {.batch = p->batch,
                               .num_heads = p->num_heads,
                               .num_kv_heads = c->d.num_kv_heads,
                               .q_len = p->new_tokens,
                               .head_dim = c->d.head_dim,
                               .v_head_dim = c->d.v_head_dim};
    char error[VKA_ERROR_MAX];
    vkattn_result r = vka_score_mods_check(&sa, &dims, prefix, true, &p->mods, error, sizeof error);
    if (r != VKATTN_SUCCESS)
        return vka_fail(ctx, r, "%s", error);
    /* a windowed cache gave back what lies before its window */
    if (c->d.window && (!in->window || in->window > c->d.window))
        return vka_fail(ctx, VKATTN_ERROR_INVALID_ARGUMENT,
                        "%swindow is %u but the cache's window is %u: it gives back the blocks "
                        "before its window, so attention over it needs a window of 1..%u",
                        prefix, in->window, c->d.window, c->d.window);
    VKA_TRY(resolve_mod_tensor(ctx, &in->sinks, prefix, "sinks", &p->sinks));
    VKA_TRY(resolve_mod_tensor(ctx, &in->alibi_slopes, prefix, "alibi_slopes", &p->slopes));
    VKA_TRY(resolve_mod_tensor(ctx, &in->lse, prefix, "lse", &p->lse));
    if (p->lse.buffer) {
        char lse_name[96], other[96];
        snprintf(lse_name, sizeof lse_name, "%slse", prefix);
        VKA_TRY(vka_tensor_check_output(ctx, &p->lse, lse_name));
        const vkattn_tensor *inputs[4] = {&p->q, &p->out, &p->sinks, &p->slopes};
        const char *names[4] = {"q", "out", "sinks", "alibi_slopes"};
        for (int i = 0; i < 4; i++) {
            if (!inputs[i]->buffer)
                continue;
            snprintf(other, sizeof other, "%s%s", prefix, names[i]);
            VKA_TRY(vka_tensor_check_disjoint(ctx, &p->lse, lse_name, inputs[i], other));
        }
    }
    return VKATTN_SUCCESS;
}

vkattn_result vka_kv_attention_check_mask(vkattn_kv_cache *c, const vkattn_tensor *in,
                                          const char *prefix, vka_kv_attention_problem *p)
{
    vkattn_context *ctx = c->ctx;
    memset(&p->mask, 0, sizeof p->mask);
    if (!in->buffer)
        return VKATTN_SUCCESS;
    char what[96], b[VKA_DTYPE_TEXT];
    snprintf(what, sizeof what, "%smask", prefix);
    if (in->rank != 2 && in->rank != 3)
        return vka_fail(ctx, VKATTN_ERROR_INVALID_ARGUMENT,
                        "%s.rank is %u: expected 3 ([B, T, K]) or 2 ([T, K])", what, in->rank);
    if (in->dtype != VKATTN_DTYPE_F32 && in->dtype != VKATTN_DTYPE_F16)
        return vka_fail(ctx, VKATTN_ERROR_UNSUPPORTED_DTYPE,
                        "%s.dtype is %s: an additive mask is f32 or f16", what,
                        vka_dtype_text(in->dtype, b));
    vkattn_tensor m;
    VKA_TRY(vka_tensor_resolve(ctx, in, what, &m));
    uint32_t r = m.rank;
    if (r == 3 && m.shape[0] != p->batch)
        return vka_fail(ctx, VKATTN_ERROR_SHAPE_MISMATCH,
                        "%s.shape[0] (batch) %lld differs from the call's batch %u", what,
                        (long long)m.shape[0], p->batch);
    if (m.shape[r - 2] != p->new_tokens)
        return vka_fail(ctx, VKATTN_ERROR_SHAPE_MISMATCH,
                        "%s.shape[%u] (queries) %lld differs from the call's %u queries per "
                        "sequence",
                        what, r - 2, (long long)m.shape[r - 2], p->new_tokens);
    /* element indices of one binding, within 31 bits */
    uint64_t last = 0;
    bool fits = true;
    for (uint32_t d = 0; d < r; d++) {
        last += (uint64_t)(m.shape[d] - 1) * (uint64_t)m.strides[d];
        fits = fits && m.strides[d] <= INT32_MAX;
    }
    uint64_t bytes = (last + 1) * vkattn_dtype_size(m.dtype);
    if (!fits || bytes > vka_storage_window_limit(ctx) / 2)
        return vka_fail(ctx, VKATTN_ERROR_UNSUPPORTED,
                        "%s spans %llu bytes, more than one binding of this device holds "
                        "(maxStorageBufferRange %llu)",
                        what, (unsigned long long)bytes,
                        (unsigned long long)ctx->info.max_storage_buffer_range);
    const vkattn_tensor *outputs[2] = {&p->out, &p->lse};
    const char *names[2] = {"out", "lse"};
    for (int i = 0; i < 2; i++) {
        if (!outputs[i]->buffer)
            continue;
        char other[96];
        snprintf(other, sizeof other, "%s%s", prefix, names[i]);
        VKA_TRY(vka_tensor_check_disjoint(ctx, outputs[i], other, &m, what));
    }
    p->mask = m;
    return VKATTN_SUCCESS;
}

/* ----------------------------------------------------------------- API */

/* A call checked and prepared: its step is checked, not applied yet
 * (packed queries: each sequence's is checked again as it is recorded). */
typedef struct checked_call {
    const vkattn_kv_attention_args *args;
    vka_kv_step step;
    vka_kv_attention_plan plan;
} checked_call;

static vkattn_result check_one(vkattn_context *ctx, const vkattn_kv_attention_args *a,
                               checked_call *call)
{
    if (!a->cache)
        return vka_fail(ctx, VKATTN_ERROR_INVALID_ARGUMENT, "args->cache is NULL");
    if (a->cache->ctx != ctx)
        return vka_fail(ctx, VKATTN_ERROR_INVALID_ARGUMENT,
                        "args->cache belongs to another context");
    vka_kv_attention_problem p;
    VKA_TRY(vka_kv_attention_check(a->cache, &a->q, &a->out, a->scale, a->kv_splits, "args->", &p));
    if (p.batch != a->batch)
        return vka_fail(ctx, VKATTN_ERROR_SHAPE_MISMATCH,
                        "args->q.shape[0] is %u but args->batch is %u", p.batch, a->batch);
    vka_kv_mods_args mods = {
        .window = a->window,
        .softcap = a->softcap,
        .alibi_max_bias = a->alibi_max_bias,
        .sinks = a->sinks,
        .alibi_slopes = a->alibi_slopes,
        .lse = a->lse,
    };
    VKA_TRY(vka_kv_attention_check_mods(a->cache, &mods, "args->", &p));
    VKA_TRY(vka_kv_attention_check_mask(a->cache, &a->mask, "args->", &p));
    VKA_TRY(vka_kv_step_check(a->cache, a->batch, a->sequences, 0, "args->", &call->step));
    return vka_kv_attention_prepare(ctx, a->cache, &call->step, &p, &call->plan);
}

/* The step's metadata, then the attention. */
static vkattn_result record_one(vkattn_context *ctx, VkCommandBuffer cmd, const checked_call *call)
{
    vka_binding meta;
    VKA_TRY(vka_kv_step_record(&call->step, cmd, &meta));
    return vka_kv_attention_record(ctx, cmd, &call->plan, &meta);
}

static void slice(vkattn_tensor *t, int64_t start, int64_t count)
{
    t->offset += vka_varlen_slice(t->dtype, t->shape, t->strides, 2, start, count);
}

/* Packed queries: the whole call's shapes and offsets, then every
 * sequence as a call of one row over views of q, out and lse; recorded
 * when `cmd` is given (each checked again first: checks move nothing). */
static vkattn_result packed_calls(vkattn_context *ctx, VkCommandBuffer cmd,
                                  const vkattn_kv_attention_args *a)
{
    vkattn_tensor q, out, lse = {0};
    VKA_TRY(vka_tensor_resolve(ctx, &a->q, "args->q", &q));
    VKA_TRY(vka_tensor_resolve(ctx, &a->out, "args->out", &out));
    if (a->lse.buffer)
        VKA_TRY(vka_tensor_resolve(ctx, &a->lse, "args->lse", &lse));
    if (q.rank != 4 || q.shape[0] != 1 || out.rank != 4 || out.shape[0] != 1 ||
        (lse.buffer && (lse.rank != 3 || lse.shape[0] != 1)))
        return vka_fail(ctx, VKATTN_ERROR_SHAPE_MISMATCH,
                        "args->q, out and lse are not [1, Hq, sum T, D] and [1, Hq, sum T]: "
                        "packed queries (args->q_offsets) lie along the token axis of one row");
    if (a->mask.buffer)
        return vka_fail(ctx, VKATTN_ERROR_UNSUPPORTED,
                        "args->mask is given with args->q_offsets: packed queries take no mask");
    VKA_TRY(vka_kv_packed_offsets(ctx, a->batch, a->sequences, a->q_offsets, q.shape[2],
                                  "args->q_offsets", "args->q.shape[2] (sum T)"));
    for (uint32_t b = 0; b < a->batch; b++) {
        int64_t n = (int64_t)a->q_offsets[b + 1] - a->q_offsets[b];
        if (n == 0)
            continue;
        vkattn_kv_attention_args sub = *a;
        sub.batch = 1;
        sub.sequences = &a->sequences[b];
        sub.q_offsets = NULL;
        sub.q = q, sub.out = out, sub.lse = lse;
        slice(&sub.q, a->q_offsets[b], n);
        slice(&sub.out, a->q_offsets[b], n);
        if (lse.buffer)
            slice(&sub.lse, a->q_offsets[b], n);
        checked_call one;
        vkattn_result r = check_one(ctx, &sub, &one);
        if (r != VKATTN_SUCCESS) {
            char why[VKA_ERROR_MAX];
            memcpy(why, ctx->last_error, sizeof why);
            return vka_fail(ctx, r, "row %u (sequence %u, queries from %d): %s", b, a->sequences[b],
                            a->q_offsets[b], why);
        }
        if (cmd)
            VKA_TRY(record_one(ctx, cmd, &one));
    }
    return VKATTN_SUCCESS;
}

static vkattn_result check_call(vkattn_context *ctx, const void *args, void *checked)
{
    checked_call *call = checked;
    call->args = args;
    return call->args->q_offsets && call->args->cache
               ? packed_calls(ctx, VK_NULL_HANDLE, call->args)
               : check_one(ctx, call->args, call);
}

static vkattn_result record_call(vkattn_context *ctx, VkCommandBuffer cmd, const void *job)
{
    const checked_call *call = job;
    return call->args->q_offsets ? packed_calls(ctx, cmd, call->args) : record_one(ctx, cmd, call);
}

/* vkattn_cmd_kv_attention and vkattn_kv_attention */
VKA_OP_ENTRY_POINTS(kv_attention, vkattn_kv_attention_args, checked_call, check_call, record_call)
