/* CPU reference of rotary position embeddings (see "rotary positions" in
 * vkattn/ops.h): every angle from the double frequencies of spec/rope.c,
 * sin and cos in double. */
#include "ref/ref.h"
#include "spec/dtype.h"
#include "spec/error_text.h"
#include "spec/rope.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void vka_ref_rope_rotate(const vkattn_rope_desc *r, int64_t position, double *x)
{
    uint32_t half = r->dims / 2;
    for (uint32_t i = 0; i < half; i++) {
        double a = (double)position * vka_rope_inv_freq(r, i);
        double c = cos(a), s = sin(a);
        uint32_t ix = r->style == VKATTN_ROPE_GPTJ ? 2 * i : i;
        uint32_t iy = r->style == VKATTN_ROPE_GPTJ ? 2 * i + 1 : i + half;
        double u = x[ix], v = x[iy];
        x[ix] = u * c - v * s;
        x[iy] = u * s + v * c;
    }
}

/* x or out: present, rank 4, f32 or f16, every dimension >= 1. */
static vkattn_result check_operand(const vkattn_host_tensor *t, const char *name, char *error,
                                   size_t error_size)
{
    if (!t->data) {
        vka_error_format(error, error_size, "args->%s.data is NULL: %s is required", name, name);
        return VKATTN_ERROR_INVALID_ARGUMENT;
    }
    if (t->rank != 4) {
        vka_error_format(error, error_size, "args->%s.rank is %u: %s is rank 4 [B, H, T, D]", name,
                         t->rank, name);
        return VKATTN_ERROR_INVALID_ARGUMENT;
    }
    if (!vka_dtype_is_float(t->dtype) && t->dtype != VKATTN_DTYPE_BF16) {
        char b[VKA_DTYPE_TEXT];
        vka_error_format(error, error_size, "args->%s.dtype %s is not supported: f32, f16 or bf16",
                         name, vka_dtype_text(t->dtype, b));
        return VKATTN_ERROR_UNSUPPORTED_DTYPE;
    }
    for (uint32_t i = 0; i < 4; i++)
        if (t->shape[i] < 1 || t->shape[i] > UINT32_MAX) {
            vka_error_format(error, error_size,
                             "args->%s.shape[%u] is %lld: every dimension must be in 1..2^32-1",
                             name, i, (long long)t->shape[i]);
            return VKATTN_ERROR_INVALID_ARGUMENT;
        }
    return VKATTN_SUCCESS;
}

/* Bytes [*begin, *end) a resolved tensor spans. */
static void span(const vkattn_host_tensor *t, uintptr_t *begin, uintptr_t *end)
{
    int64_t last = 0;
    for (uint32_t i = 0; i < t->rank; i++)
        last += (t->shape[i] - 1) * t->strides[i];
    *begin = (uintptr_t)t->data;
    *end = *begin + (uintptr_t)(last + 1) * vkattn_dtype_size(t->dtype);
}

/* out has x's shape and dtype, and is either x itself (same data and
 * strides: in place, each row is read before it is written) or disjoint
 * from it: other overlaps would make the result depend on the order. */
static vkattn_result check_out(const vkattn_host_tensor *x, const vkattn_host_tensor *out,
                               char *error, size_t error_size)
{
    if (out->dtype != x->dtype) {
        vka_error_format(error, error_size,
                         "args->out.dtype %s differs from args->x.dtype %s: out has x's dtype",
                         vkattn_dtype_name(out->dtype), vkattn_dtype_name(x->dtype));
        return VKATTN_ERROR_SHAPE_MISMATCH;
    }
    for (uint32_t i = 0; i < 4; i++)
        if (out->shape[i] != x->shape[i]) {
            vka_error_format(error, error_size,
                             "args->out.shape[%u] %lld differs from args->x.shape[%u] %lld", i,
                             (long long)out->shape[i], i, (long long)x->shape[i]);
            return VKATTN_ERROR_SHAPE_MISMATCH;
        }
    if (out->data == x->data && memcmp(out->strides, x->strides, sizeof x->strides) == 0)
        return VKATTN_SUCCESS;
    uintptr_t a0, a1, b0, b1;
    span(x, &a0, &a1);
    span(out, &b0, &b1);
    if (a0 < b1 && b0 < a1) {
        vka_error_format(error, error_size,
                         "args->out overlaps args->x without being x itself (same data and "
                         "strides: in place)");
        return VKATTN_ERROR_INVALID_ARGUMENT;
    }
    return VKATTN_SUCCESS;
}

/* positions: int32 [B, T], each in [0, VKATTN_ROPE_MAX_POSITION]; without
 * it, position_offset + T - 1 must stay in range. `pos` gets the resolved
 * tensor (data NULL when not given). */
static vkattn_result check_positions(const vkattn_ref_rope_args *args, vkattn_host_tensor *pos,
                                     char *error, size_t error_size)
{
    const vkattn_host_tensor *p = &args->positions;
    const int64_t B = args->x.shape[0], T = args->x.shape[2];
    memset(pos, 0, sizeof *pos);
    if (!p->data) {
        if ((int64_t)args->position_offset + T - 1 > VKATTN_ROPE_MAX_POSITION) {
            vka_error_format(error, error_size,
                             "args->position_offset %u + T %lld - 1 exceeds "
                             "VKATTN_ROPE_MAX_POSITION %d",
                             args->position_offset, (long long)T, VKATTN_ROPE_MAX_POSITION);
            return VKATTN_ERROR_INVALID_ARGUMENT;
        }
        return VKATTN_SUCCESS;
    }
    return vka_host_positions_resolve(p, B, T, pos, error, error_size);
}

vkattn_result vkattn_ref_rope(const vkattn_ref_rope_args *args, char *error, size_t error_size)
{
    if (!args) {
        vka_error_format(error, error_size, "args is NULL");
        return VKATTN_ERROR_INVALID_ARGUMENT;
    }
    VKA_TRY(check_operand(&args->x, "x", error, error_size));
    VKA_TRY(check_operand(&args->out, "out", error, error_size));
    const int64_t D = args->x.shape[3];
    if (args->rope.theta == 0.0f) {
        /* 0 means "no RoPE" only in a layer's desc: here it is a mistake */
        vka_error_format(error, error_size,
                         "args->rope.theta is 0: vkattn_ref_rope needs a base (Llama 2: 10000)");
        return VKATTN_ERROR_INVALID_ARGUMENT;
    }
    vkattn_rope_desc r;
    VKA_TRY(vka_rope_resolve(&args->rope, (uint32_t)D, "args->rope", &r, error, error_size));
    vkattn_host_tensor x, out, pos;
    VKA_TRY(vka_host_tensor_resolve(&args->x, "args->x", false, &x, error, error_size));
    VKA_TRY(vka_host_tensor_resolve(&args->out, "args->out", true, &out, error, error_size));
    VKA_TRY(check_out(&x, &out, error, error_size));
    VKA_TRY(check_positions(args, &pos, error, error_size));
    double *row = vka_ref_scratch((size_t)D, error, error_size);
    if (!row)
        return VKATTN_ERROR_OUT_OF_HOST_MEMORY;

    /* Everything is checked: from here on the output is written. */
    const int64_t *xs = x.strides, *os = out.strides;
    for (int64_t b = 0; b < x.shape[0]; b++)
        for (int64_t h = 0; h < x.shape[1]; h++)
            for (int64_t t = 0; t < x.shape[2]; t++) {
                int64_t xi = b * xs[0] + h * xs[1] + t * xs[2];
                int64_t oi = b * os[0] + h * os[1] + t * os[2];
                for (int64_t d = 0; d < D; d++)
                    row[d] = vka_host_load(&x, xi + d * xs[3]);
                int64_t p =
                    pos.data ? ((const int32_t *)pos.data)[b * pos.strides[0] + t * pos.strides[1]]
                             : (int64_t)args->position_offset + t;
                vka_ref_rope_rotate(&r, p, row);
                for (int64_t d = 0; d < D; d++)
                    vka_host_store(&out, oi + d * os[3], row[d]);
            }
    free(row);
    return VKATTN_SUCCESS;
}
