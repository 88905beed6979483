/* vkattn_ref_attention_backward: the checks and the entry point (the
 * computation is in ref_attention_backward_run.c). The forward's arguments
 * are checked by the forward's own prepare step, so a call the forward
 * refuses is refused here with the same message (names start with
 * "args->forward."). */
#include "ref/ref.h"

#include "spec/dtype.h"
#include "spec/error_text.h"

#include <stdlib.h>
#include <string.h>

/* Refusals before the forward's checks: what the backward does not take. */
static vkattn_result check_scope(const vkattn_ref_attention_args *f, char *error, size_t error_size)
{
    if (f->sequences > 0) {
        vka_error_format(error, error_size,
                         "args->forward.sequences is %u: packed sequences have no backward yet "
                         "(pad them into a batch with key_padding)",
                         f->sequences);
        return VKATTN_ERROR_UNSUPPORTED;
    }
    if (f->weights.data) {
        vka_error_format(error, error_size,
                         "args->forward.weights is given: the backward takes no attention "
                         "weights (leave its data NULL)");
        return VKATTN_ERROR_INVALID_ARGUMENT;
    }
    if (f->q.data && f->q.rank == 3) {
        vka_error_format(error, error_size,
                         "args->forward.q.rank is 3 (one q for every batch row): the backward "
                         "takes a rank-4 q [B, Hq, Tq, Dk]");
        return VKATTN_ERROR_INVALID_ARGUMENT;
    }
    return VKATTN_SUCCESS;
}

/* A quantized k or v has no gradient of its own: refused by name. */
static vkattn_result check_not_quantized(const vkattn_host_tensor *t, const char *name, char *error,
                                         size_t error_size)
{
    if (!vka_dtype_is_quantized(t->dtype))
        return VKATTN_SUCCESS;
    vka_error_format(error, error_size,
                     "args->forward.%s.dtype is %s: the backward takes an f32, f16 or bf16 %s "
                     "(a quantized cache is inference)",
                     name, vkattn_dtype_name(t->dtype), name);
    return VKATTN_ERROR_UNSUPPORTED_DTYPE;
}

/* A gradient tensor `name` ("dq"): present, f32, f16 or bf16, rank 4 with
 * the `want` shape (as `like` says: "as args->forward.q's"), strides
 * resolved into `out`. */
static vkattn_result check_grad(const vkattn_host_tensor *t, const char *name,
                                const int64_t want[4], const char *like, bool output,
                                vkattn_host_tensor *out, char *error, size_t error_size)
{
    if (!t->data) {
        vka_error_format(error, error_size, "args->%s.data is NULL: %s is required", name, name);
        return VKATTN_ERROR_INVALID_ARGUMENT;
    }
    if (t->rank != 4) {
        vka_error_format(error, error_size, "args->%s.rank is %u: it must be 4, %s", name, t->rank,
                         like);
        return VKATTN_ERROR_INVALID_ARGUMENT;
    }
    for (uint32_t i = 0; i < 4; i++)
        if (t->shape[i] != want[i]) {
            vka_error_format(error, error_size, "args->%s.shape[%u] is %lld: it must be %lld, %s",
                             name, i, (long long)t->shape[i], (long long)want[i], like);
            return VKATTN_ERROR_SHAPE_MISMATCH;
        }
    if (t->dtype != VKATTN_DTYPE_F32 && t->dtype != VKATTN_DTYPE_F16 &&
        t->dtype != VKATTN_DTYPE_BF16) {
        char b[VKA_DTYPE_TEXT];
        vka_error_format(error, error_size, "args->%s.dtype is %s: it must be f32, f16 or bf16",
                         name, vka_dtype_text(t->dtype, b));
        return VKATTN_ERROR_UNSUPPORTED_DTYPE;
    }
    char full[32];
    vka_error_format(full, sizeof full, "args->%s", name);
    return vka_host_tensor_resolve(t, full, output, out, error, error_size);
}

/* dsinks: absent, or f32 [Hq] and only with the forward's sinks. */
static vkattn_result check_dsinks(const vkattn_ref_attention_backward_args *a, uint32_t heads,
                                  vkattn_host_tensor *out, char *error, size_t error_size)
{
    const vkattn_host_tensor *t = &a->dsinks;
    memset(out, 0, sizeof *out);
    if (!t->data)
        return VKATTN_SUCCESS;
    if (!a->forward.sinks.data) {
        vka_error_format(error, error_size,
                         "args->dsinks is given but args->forward.sinks is not: there is no sink "
                         "to differentiate");
        return VKATTN_ERROR_INVALID_ARGUMENT;
    }
    if (t->dtype != VKATTN_DTYPE_F32) {
        char b[VKA_DTYPE_TEXT];
        vka_error_format(error, error_size, "args->dsinks.dtype is %s: it must be f32 [Hq]",
                         vka_dtype_text(t->dtype, b));
        return VKATTN_ERROR_UNSUPPORTED_DTYPE;
    }
    if (t->rank != 1) {
        vka_error_format(error, error_size, "args->dsinks.rank is %u: it must be 1, f32 [Hq]",
                         t->rank);
        return VKATTN_ERROR_INVALID_ARGUMENT;
    }
    if (t->shape[0] != (int64_t)heads) {
        vka_error_format(error, error_size,
                         "args->dsinks.shape[0] is %lld: it must be %u, as args->forward.sinks'",
                         (long long)t->shape[0], heads);
        return VKATTN_ERROR_SHAPE_MISMATCH;
    }
    return vka_host_tensor_resolve(t, "args->dsinks", true, out, error, error_size);
}

/* Scratch of the run step (ref_attention_backward_run.c): K, V, dK, dV of
 * one KV head; q, dout, dq and the ungated output of a row; its
 * probabilities, softcap slopes and dropout scales; dsinks. */
static bool scratch_size(const vka_attention_dims *d, size_t *out)
{
    size_t tk = d->kv_len, dk = d->head_dim, dv = d->v_head_dim, kv, rows;
    if (!vka_size_mul(tk, 2 * (dk + dv), &kv) || !vka_size_mul(tk, 3, &rows))
        return false;
    size_t small = 2 * dk + 2 * dv + (size_t)d->num_heads;
    if (kv > SIZE_MAX - rows - small)
        return false;
    *out = kv + rows + small;
    return *out <= SIZE_MAX / sizeof(double);
}

vkattn_result vka_ref_attention_backward_prepare(const vkattn_ref_attention_backward_args *args,
                                                 vka_ref_backward_plan *plan, char *error,
                                                 size_t error_size)
{
    if (!args) {
        vka_error_format(error, error_size, "args is NULL");
        return VKATTN_ERROR_INVALID_ARGUMENT;
    }
    VKA_TRY(check_scope(&args->forward, error, error_size));
    /* forward.out is not read: when absent, the forward's checks see a
     * stand-in of the shape they expect (never touched), so only q, k and v
     * decide the shapes. */
    vkattn_ref_attention_args f = args->forward;
    char stand_in;
    if (!f.out.data && f.q.data && f.v.data && f.q.rank == 4 && f.v.rank == 4) {
        const int64_t shape[4] = {f.q.shape[0], f.q.shape[1], f.q.shape[2], f.v.shape[3]};
        f.out = vkattn_host_tensor_make(&stand_in, f.q.dtype, 4, shape);
    }
    vka_ref_backward_plan p;
    memset(&p, 0, sizeof p);
    VKA_TRY(vka_ref_attention_prepare(&f, "args->forward.", &p.fwd, error, error_size));
    p.fwd.out = (vkattn_host_tensor){0};
    p.fwd.lse = (vkattn_host_tensor){0};
    VKA_TRY(check_not_quantized(&f.k, "k", error, error_size));
    VKA_TRY(check_not_quantized(&f.v, "v", error, error_size));

    const vka_attention_dims *d = &p.fwd.dims;
    const int64_t out_shape[4] = {d->batch, d->num_heads, d->q_len, d->v_head_dim};
    VKA_TRY(check_grad(&args->dout, "dout", out_shape, "as the forward's out [B, Hq, Tq, Dv]",
                       false, &p.dout, error, error_size));
    VKA_TRY(check_grad(&args->dq, "dq", f.q.shape, "as args->forward.q's", true, &p.dq, error,
                       error_size));
    VKA_TRY(check_grad(&args->dk, "dk", f.k.shape, "as args->forward.k's", true, &p.dk, error,
                       error_size));
    VKA_TRY(check_grad(&args->dv, "dv", f.v.shape, "as args->forward.v's", true, &p.dv, error,
                       error_size));
    VKA_TRY(check_dsinks(args, d->num_heads, &p.dsinks, error, error_size));
    if (!scratch_size(d, &p.scratch_doubles)) {
        vka_error_format(error, error_size,
                         "args->forward.k.shape[2] (kv_len) %u: the reference's scratch memory "
                         "size overflows",
                         d->kv_len);
        return VKATTN_ERROR_OUT_OF_HOST_MEMORY;
    }
    *plan = p;
    return VKATTN_SUCCESS;
}

vkattn_result vkattn_ref_attention_backward(const vkattn_ref_attention_backward_args *args,
                                            char *error, size_t error_size)
{
    vka_ref_backward_plan plan;
    VKA_TRY(vka_ref_attention_backward_prepare(args, &plan, error, error_size));
    double *scratch = vka_ref_scratch(plan.scratch_doubles, error, error_size);
    if (!scratch)
        return VKATTN_ERROR_OUT_OF_HOST_MEMORY;
    vka_ref_attention_backward_run(&plan, scratch);
    free(scratch);
    return VKATTN_SUCCESS;
}
