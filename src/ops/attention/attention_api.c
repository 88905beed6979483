/* vkattn_attention: the entry points, and every check of a call before
 * anything is recorded. Shapes and dtypes go through the rules the CPU
 * reference shares (spec/attention_shapes.c); memory, strides, overlaps and
 * the device's binding windows are checked here. */
#include "ops/attention/attention_internal.h"

#include "spec/error_text.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

typedef struct named {
    const vkattn_tensor *in;
    vkattn_tensor *out;
    const char *name;
} named;

static vka_shape_view view_of(const vkattn_tensor *t)
{
    vka_shape_view v = {t->buffer != NULL, t->dtype, t->rank, t->shape};
    return v;
}

/* The smallest pieces a call can be cut into must fit one binding each:
 * one head's K and V, one row of the mask and of the key padding. */
static vkattn_result check_windows(vkattn_context *ctx, const vka_att_problem *p, const char *pre)
{
    const vka_attention_dims *d = &p->dims;
    struct {
        const vkattn_tensor *t;
        char which;
        const char *name, *piece;
    } pieces[] = {
        {&p->k, 'k', "k", "one head's keys"},
        {&p->v, 'v', "v", "one head's values"},
        {&p->q, 'q', "q", "one query row"},
        {&p->out, 'o', "out", "one output row"},
        {&p->mask, 'm', "mask", "one query's row"},
        {&p->key_padding, 'p', "key_padding", "one batch's row"},
        {&p->weights, 'w', "weights", "one query's row"},
    };
    for (size_t i = 0; i < sizeof pieces / sizeof pieces[0]; i++) {
        if (!pieces[i].t->buffer)
            continue;
        vka_box box = vka_att_chunk_box(p, pieces[i].which, 0, 1, 0, 1, 0, 1);
        if (!vka_box_fits_storage(ctx, pieces[i].t, &box))
            return vka_fail(
                ctx, VKATTN_ERROR_UNSUPPORTED,
                "%s%s: %s spans %llu bytes (kv_len %u, head_dim %u, v_head_dim %u), more "
                "than one binding of this device can hold (maxStorageBufferRange "
                "%llu)",
                pre, pieces[i].name, pieces[i].piece,
                (unsigned long long)vka_box_bytes(pieces[i].t, &box), d->kv_len, d->head_dim,
                d->v_head_dim, (unsigned long long)ctx->info.max_storage_buffer_range);
    }
    return VKATTN_SUCCESS;
}

/* Where quantized k and v may start: they are bound from their offset. */
static uint64_t quant_align(const vkattn_context *ctx)
{
    uint64_t a = ctx->info.min_storage_buffer_offset_alignment;
    return a < 16 ? 16 : a;
}

/* Every argument's name in messages: `pre` and its field. */
typedef struct att_names {
    char q[48], k[48], v[48], out[48], mask[48], key_padding[48], weights[48], sinks[48],
        alibi_slopes[48], lse[48], head_mask[48], scale[48];
} att_names;

static void name_args(const char *pre, att_names *n)
{
    struct {
        char *dst;
        const char *field;
    } all[] = {{n->q, "q"},
               {n->k, "k"},
               {n->v, "v"},
               {n->out, "out"},
               {n->mask, "mask"},
               {n->key_padding, "key_padding"},
               {n->weights, "weights"},
               {n->sinks, "sinks"},
               {n->alibi_slopes, "alibi_slopes"},
               {n->lse, "lse"},
               {n->head_mask, "head_mask"},
               {n->scale, "scale"}};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        snprintf(all[i].dst, sizeof n->q, "%s%s", pre, all[i].field);
}

vkattn_result vka_att_validate_as(vkattn_context *ctx, const vkattn_attention_args *args,
                                  const char *pre, vka_att_problem *p)
{
    memset(p, 0, sizeof *p);
    att_names nm;
    name_args(pre, &nm);
    vka_attention_shapes s = {0};
    s.q = view_of(&args->q);
    s.k = view_of(&args->k);
    s.v = view_of(&args->v);
    s.out = view_of(&args->out);
    s.mask = view_of(&args->mask);
    s.key_padding = view_of(&args->key_padding);
    s.weights = view_of(&args->weights);
    s.handle_name = "buffer";
    char error[VKA_ERROR_MAX];
    vkattn_result r = vka_attention_check(&s, pre, &p->dims, error, sizeof error);
    if (r != VKATTN_SUCCESS)
        return vka_fail(ctx, r, "%s", error);
    vka_score_mods_args mods = {
        .causal_align = args->causal_align,
        .window = args->window,
        .softcap = args->softcap,
        .alibi_max_bias = args->alibi_max_bias,
        .sinks = view_of(&args->sinks),
        .alibi_slopes = view_of(&args->alibi_slopes),
        .lse = view_of(&args->lse),
    };
    r = vka_score_mods_check(&mods, &p->dims, pre, false, &p->mods, error, sizeof error);
    if (r != VKATTN_SUCCESS)
        return vka_fail(ctx, r, "%s", error);

    named tensors[] = {
        {&args->q, &p->q, nm.q},
        {&args->k, &p->k, nm.k},
        {&args->v, &p->v, nm.v},
        {&args->out, &p->out, nm.out},
        {&args->mask, &p->mask, nm.mask},
        {&args->key_padding, &p->key_padding, nm.key_padding},
        {&args->weights, &p->weights, nm.weights},
        {&args->sinks, &p->sinks, nm.sinks},
        {&args->alibi_slopes, &p->alibi_slopes, nm.alibi_slopes},
        {&args->lse, &p->lse, nm.lse},
    };
    for (size_t i = 0; i < sizeof tensors / sizeof tensors[0]; i++) {
        if (!tensors[i].in->buffer)
            continue; /* optional and absent (required ones were checked) */
        r = vka_dtype_is_quantized(tensors[i].in->dtype)
                ? vka_tensor_resolve_quant(ctx, tensors[i].in, tensors[i].name, quant_align(ctx),
                                           tensors[i].out)
                : vka_tensor_resolve(ctx, tensors[i].in, tensors[i].name, tensors[i].out);
        if (r != VKATTN_SUCCESS)
            return r;
    }
    if (p->dims.q_broadcast) { /* [Hq, Tq, D]: every batch row reads it (stride 0) */
        vka_query_view4(&p->dims, p->q.shape, p->q.strides);
        p->q.rank = 4;
    }
    r = vka_bool_mask_check(args->bool_mask, pre, error, sizeof error);
    if (r != VKATTN_SUCCESS)
        return vka_fail(ctx, r, "%s", error);
    p->mask_true_blocks = args->bool_mask == VKATTN_BOOL_MASK_TRUE_BLOCKS;
    if (p->mask.buffer) { /* one rank-4 view, broadcast dimensions at stride 0 */
        vkattn_tensor m = p->mask;
        vka_mask_view4(&p->dims, m.rank, m.shape, m.strides, p->mask.shape, p->mask.strides);
        p->mask.rank = 4;
    }
    /* Rows read as quads need strides that are multiples of 4 and 16-byte
     * offsets; a head dim that is not a multiple of 8 is read (and written)
     * element by element, so its tensors' strides are free and their offsets
     * multiples of the element size. */
    const bool k_odd = p->dims.head_dim % 8 != 0, v_odd = p->dims.v_head_dim % 8 != 0;
    const uint32_t qs = (uint32_t)vkattn_dtype_size(p->dims.q_dtype);
    const uint32_t ks = (uint32_t)vkattn_dtype_size(p->dims.kv_dtype);
    const uint32_t vs = (uint32_t)vkattn_dtype_size(p->dims.v_dtype);
    VKA_TRY(vka_tensor_check_rows(ctx, &p->q, nm.q, k_odd ? 1 : 4, k_odd ? qs : 16));
    /* (quantized k and v: vka_tensor_resolve_quant's rules, stricter) */
    if (!vka_dtype_is_quantized(p->dims.kv_dtype))
        VKA_TRY(vka_tensor_check_rows(ctx, &p->k, nm.k, k_odd ? 1 : 4, k_odd ? ks : 16));
    if (!vka_dtype_is_quantized(p->dims.v_dtype))
        VKA_TRY(vka_tensor_check_rows(ctx, &p->v, nm.v, v_odd ? 1 : 4, v_odd ? vs : 16));
    VKA_TRY(vka_tensor_check_rows(ctx, &p->out, nm.out, v_odd ? 1 : 4, v_odd ? qs : 16));
    uint32_t out_kind = vka_storage_kind(ctx, p->dims.q_dtype);
    if (v_odd && (out_kind == VKA_STORAGE_F16P || out_kind == VKA_STORAGE_BF16)) {
        char b[VKA_DTYPE_TEXT];
        return vka_fail(ctx, VKATTN_ERROR_UNSUPPORTED,
                        "%s.shape[3] (v_head_dim) %u is not a multiple of 8, which needs "
                        "out written element by element: a %s out is stored as pairs in 32-bit "
                        "words on this device (%s), so it cannot be",
                        nm.v, p->dims.v_head_dim, vka_dtype_text(p->dims.q_dtype, b),
                        out_kind == VKA_STORAGE_BF16 ? "bf16 always is"
                                                     : "no 16-bit storage buffer access");
    }
    VKA_TRY(vka_tensor_check_output(ctx, &p->out, nm.out));
    if (p->weights.buffer)
        VKA_TRY(vka_tensor_check_output(ctx, &p->weights, nm.weights));
    const vkattn_tensor *heads[2] = {&p->sinks, &p->alibi_slopes};
    const char *const head_names[2] = {nm.sinks, nm.alibi_slopes};
    for (size_t i = 0; i < 2; i++)
        if (heads[i]->buffer && p->dims.num_heads > 1 && heads[i]->strides[0] != 1)
            return vka_fail(ctx, VKATTN_ERROR_INVALID_ARGUMENT,
                            "%s.strides[0] is %lld: it must be contiguous (stride 1)",
                            head_names[i], (long long)heads[i]->strides[0]);
    if (p->lse.buffer) {
        VKA_TRY(vka_tensor_check_output(ctx, &p->lse, nm.lse));
        /* the kernels' push constants hold no query stride for it */
        if (p->dims.q_len > 1 && p->lse.strides[2] != 1)
            return vka_fail(ctx, VKATTN_ERROR_INVALID_ARGUMENT,
                            "%s.strides[2] is %lld: the LSE's query dimension must be "
                            "contiguous (stride 1)",
                            nm.lse, (long long)p->lse.strides[2]);
    }
    const vkattn_tensor *inputs[] = {&p->q,           &p->k,     &p->v,           &p->mask,
                                     &p->key_padding, &p->sinks, &p->alibi_slopes};
    const char *const input_names[] = {nm.q,           nm.k,     nm.v,           nm.mask,
                                       nm.key_padding, nm.sinks, nm.alibi_slopes};
    for (size_t i = 0; i < sizeof inputs / sizeof inputs[0]; i++) {
        VKA_TRY(vka_tensor_check_disjoint(ctx, &p->out, nm.out, inputs[i], input_names[i]));
        VKA_TRY(vka_tensor_check_disjoint(ctx, &p->weights, nm.weights, inputs[i], input_names[i]));
        VKA_TRY(vka_tensor_check_disjoint(ctx, &p->lse, nm.lse, inputs[i], input_names[i]));
    }
    VKA_TRY(vka_att_check_head_mask(ctx, &args->head_mask, p->dims.batch, p->dims.num_heads,
                                    nm.head_mask, &p->head_mask));
    const vkattn_tensor *outputs[3] = {&p->out, &p->weights, &p->lse};
    const char *const output_names[3] = {nm.out, nm.weights, nm.lse};
    for (size_t i = 0; i < 3; i++)
        VKA_TRY(vka_tensor_check_disjoint(ctx, outputs[i], output_names[i], &p->head_mask,
                                          nm.head_mask));
    VKA_TRY(vka_tensor_check_disjoint(ctx, &p->weights, nm.weights, &p->out, nm.out));
    VKA_TRY(vka_tensor_check_disjoint(ctx, &p->lse, nm.lse, &p->out, nm.out));
    VKA_TRY(vka_tensor_check_disjoint(ctx, &p->lse, nm.lse, &p->weights, nm.weights));

    double scale;
    r = vka_attention_scale(args->scale, p->dims.head_dim, nm.scale, &scale, error, sizeof error);
    if (r != VKATTN_SUCCESS)
        return vka_fail(ctx, r, "%s", error);
    p->scale = (float)scale;
    p->scale_log2 = (float)(scale * 1.4426950408889634);
    p->causal = args->causal;
    /* A window reaching every key of every query (|i' - j| < Tq + Tk)
     * changes nothing: the kernels run without one. */
    uint64_t reach = (uint64_t)p->dims.q_len + p->dims.kv_len;
    p->window = p->mods.window >= reach ? 0 : p->mods.window;
    return check_windows(ctx, p, pre);
}

vkattn_result vka_att_validate(vkattn_context *ctx, const vkattn_attention_args *args,
                               vka_att_problem *p)
{
    return vka_att_validate_as(ctx, args, "args->", p);
}

/* ----------------------------------------------------------------- API */

vkattn_result vka_att_cmd_weights_given(vkattn_context *ctx, VkCommandBuffer cmd,
                                        const vkattn_attention_args *args)
{
    if (!args->weights.buffer || !args->lse.buffer || args->sinks.buffer)
        return vka_fail(ctx, VKATTN_ERROR_INVALID_ARGUMENT,
                        "vka_att_cmd_weights_given: weights and lse are required, sinks refused");
    vka_att_problem p;
    VKA_TRY(vka_att_validate(ctx, args, &p));
    p.weights_given_lse = true;
    return vka_att_record_weights_only(ctx, cmd, &p);
}
