/* Attention: everything about a call is checked here, before anything is
 * recorded. Shapes and dtypes go through the rules the CPU reference shares
 * (attention_shapes.c); memory, strides, overlaps and the device's binding
 * windows are checked here. */
#include "ops/attention/attention_internal.h"

#include "spec/error_text.h"

#include <math.h>
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

/* q, k, v and out: rows read and written 4 elements at a time. */
static vkattn_result check_layout(vkattn_context *ctx, const vkattn_tensor *t, const char *name)
{
    if (t->strides[3] != 1)
        return vka_fail(ctx, VKATTN_ERROR_INVALID_ARGUMENT,
                           "args->%s.strides[3] is %lld: the last dimension of %s must be "
                           "contiguous (stride 1)",
                           name, (long long)t->strides[3], name);
    for (uint32_t d = 0; d < 3; d++)
        if (t->strides[d] % 4 != 0)
            return vka_fail(ctx, VKATTN_ERROR_INVALID_ARGUMENT,
                               "args->%s.strides[%u] is %lld: the strides of %s must be "
                               "multiples of 4",
                               name, d, (long long)t->strides[d], name);
    if (t->offset % 16 != 0)
        return vka_fail(ctx, VKATTN_ERROR_INVALID_ARGUMENT,
                           "args->%s.offset %llu is not a multiple of 16 bytes", name,
                           (unsigned long long)t->offset);
    return VKATTN_SUCCESS;
}

/* Outputs cannot broadcast: two indices would write one element. */
static vkattn_result check_output_strides(vkattn_context *ctx, const vkattn_tensor *t,
                                          const char *name)
{
    for (uint32_t d = 0; d < t->rank; d++)
        if (t->strides[d] == 0 && t->shape[d] > 1)
            return vka_fail(ctx, VKATTN_ERROR_INVALID_ARGUMENT,
                               "args->%s.strides[%u] is 0 while args->%s.shape[%u] is %lld: an "
                               "output cannot broadcast (its elements would overlap)",
                               name, d, name, d, (long long)t->shape[d]);
    return VKATTN_SUCCESS;
}

static uint64_t end_byte(const vkattn_tensor *t)
{
    uint64_t last = 0;
    for (uint32_t d = 0; d < t->rank; d++)
        last += (uint64_t)(t->shape[d] - 1) * (uint64_t)t->strides[d];
    return t->offset + (last + 1) * vkattn_dtype_size(t->dtype);
}

/* The byte ranges of two tensors in one buffer must be disjoint. */
static vkattn_result check_disjoint(vkattn_context *ctx, const vkattn_tensor *a,
                                    const char *a_name, const vkattn_tensor *b,
                                    const char *b_name)
{
    if (!a->buffer || !b->buffer || a->buffer != b->buffer)
        return VKATTN_SUCCESS;
    uint64_t a_end = end_byte(a), b_end = end_byte(b);
    if (a->offset < b_end && b->offset < a_end)
        return vka_fail(ctx, VKATTN_ERROR_INVALID_ARGUMENT,
                           "args->%s (bytes %llu..%llu) overlaps args->%s (bytes %llu..%llu) in "
                           "the same buffer: outputs must not overlap the inputs or each other",
                           a_name, (unsigned long long)a->offset, (unsigned long long)a_end,
                           b_name, (unsigned long long)b->offset, (unsigned long long)b_end);
    return VKATTN_SUCCESS;
}

/* The smallest pieces a call can be cut into must fit one binding each:
 * one head's K and V, one row of the mask and of the key padding. */
static vkattn_result check_windows(vkattn_context *ctx, const vka_att_problem *p)
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
            return vka_fail(ctx, VKATTN_ERROR_UNSUPPORTED,
                               "args->%s: %s spans %llu bytes (kv_len %u, head_dim %u), more "
                               "than one binding of this device can hold (maxStorageBufferRange "
                               "%llu)",
                               pieces[i].name, pieces[i].piece,
                               (unsigned long long)vka_box_bytes(pieces[i].t, &box), d->kv_len,
                               d->head_dim,
                               (unsigned long long)ctx->info.max_storage_buffer_range);
    }
    return VKATTN_SUCCESS;
}

vkattn_result vka_att_validate(vkattn_context *ctx, const vkattn_attention_args *args, vka_att_problem *p)
{
    memset(p, 0, sizeof *p);
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
    vkattn_result r = vka_attention_check(&s, "args->", &p->dims, error, sizeof error);
    if (r != VKATTN_SUCCESS)
        return vka_fail(ctx, r, "%s", error);

    named tensors[] = {
        {&args->q, &p->q, "args->q"},
        {&args->k, &p->k, "args->k"},
        {&args->v, &p->v, "args->v"},
        {&args->out, &p->out, "args->out"},
        {&args->mask, &p->mask, "args->mask"},
        {&args->key_padding, &p->key_padding, "args->key_padding"},
        {&args->weights, &p->weights, "args->weights"},
    };
    for (size_t i = 0; i < sizeof tensors / sizeof tensors[0]; i++) {
        if (!tensors[i].in->buffer)
            continue; /* optional and absent (required ones were checked) */
        r = vka_tensor_resolve(ctx, tensors[i].in, tensors[i].name, tensors[i].out);
        if (r != VKATTN_SUCCESS)
            return r;
    }
    if ((r = check_layout(ctx, &p->q, "q")) != VKATTN_SUCCESS ||
        (r = check_layout(ctx, &p->k, "k")) != VKATTN_SUCCESS ||
        (r = check_layout(ctx, &p->v, "v")) != VKATTN_SUCCESS ||
        (r = check_layout(ctx, &p->out, "out")) != VKATTN_SUCCESS ||
        (r = check_output_strides(ctx, &p->out, "out")) != VKATTN_SUCCESS)
        return r;
    if (p->weights.buffer && (r = check_output_strides(ctx, &p->weights, "weights")) != VKATTN_SUCCESS)
        return r;

    const vkattn_tensor *inputs[] = {&p->q, &p->k, &p->v, &p->mask, &p->key_padding};
    static const char *const input_names[] = {"q", "k", "v", "mask", "key_padding"};
    for (size_t i = 0; i < 5; i++) {
        if ((r = check_disjoint(ctx, &p->out, "out", inputs[i], input_names[i])) != VKATTN_SUCCESS ||
            (r = check_disjoint(ctx, &p->weights, "weights", inputs[i], input_names[i])) !=
                VKATTN_SUCCESS)
            return r;
    }
    if ((r = check_disjoint(ctx, &p->weights, "weights", &p->out, "out")) != VKATTN_SUCCESS)
        return r;

    double scale = args->scale != 0.0f ? (double)args->scale : 1.0 / sqrt((double)p->dims.head_dim);
    p->scale_log2 = (float)(scale * 1.4426950408889634);
    p->causal = args->causal;
    return check_windows(ctx, p);
}
