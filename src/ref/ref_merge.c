/* CPU reference of vkattn_attention_merge (see its comment in vkattn.h):
 * two attention results over disjoint key sets combined by their LSE, in
 * double, row by row, so out and lse may be their own inputs. */
#include "ref/ref.h"

#include "spec/dtype.h"
#include "spec/error_text.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* The merge's tensors, in the order they are checked and named. */
enum { OUT_A, LSE_A, OUT_B, LSE_B, OUT, LSE, COUNT };

static const char *const names[COUNT] = {"out_a", "lse_a", "out_b", "lse_b", "out", "lse"};

/* Present, rank, dtype and dimensions (1..UINT32_MAX) of one tensor; `t` is
 * an output (out) or LSE [B, Hq, Tq] f32, the others [B, Hq, Tq, D]. */
static vkattn_result check_one(const vkattn_host_tensor *t, int which, vkattn_dtype out_dtype,
                               char *error, size_t error_size)
{
    const bool lse = which == LSE_A || which == LSE_B || which == LSE;
    const char *name = names[which];
    const char *layout = lse ? "f32 [B, Hq, Tq]" : "[B, Hq, Tq, D]";
    if (!t->data) {
        vka_error_format(error, error_size, "args->%s.data is NULL: %s is required", name, name);
        return VKATTN_ERROR_INVALID_ARGUMENT;
    }
    const uint32_t rank = lse ? 3 : 4;
    if (t->rank != rank) {
        vka_error_format(error, error_size, "args->%s.rank is %u: it must be %s", name, t->rank,
                         layout);
        return VKATTN_ERROR_INVALID_ARGUMENT;
    }
    char b[VKA_DTYPE_TEXT];
    if (lse && t->dtype != VKATTN_DTYPE_F32) {
        vka_error_format(error, error_size, "args->%s.dtype is %s: it must be f32 (%s)", name,
                         vka_dtype_text(t->dtype, b), layout);
        return VKATTN_ERROR_UNSUPPORTED_DTYPE;
    }
    if (which == OUT_A && t->dtype != VKATTN_DTYPE_F32 && t->dtype != VKATTN_DTYPE_F16 &&
        t->dtype != VKATTN_DTYPE_BF16) {
        vka_error_format(error, error_size, "args->out_a.dtype is %s: it must be f32, f16 or bf16",
                         vka_dtype_text(t->dtype, b));
        return VKATTN_ERROR_UNSUPPORTED_DTYPE;
    }
    if (!lse && t->dtype != out_dtype) {
        char a[VKA_DTYPE_TEXT];
        vka_error_format(error, error_size,
                         "args->%s.dtype %s differs from args->out_a.dtype %s: the outputs "
                         "share one dtype",
                         name, vka_dtype_text(t->dtype, b), vka_dtype_text(out_dtype, a));
        return VKATTN_ERROR_UNSUPPORTED_DTYPE;
    }
    for (uint32_t i = 0; i < rank; i++)
        if (t->shape[i] < 1 || t->shape[i] > (int64_t)UINT32_MAX) {
            vka_error_format(error, error_size,
                             "args->%s.shape[%u] is %lld: every dimension must be in 1..%lu", name,
                             i, (long long)t->shape[i], (unsigned long)UINT32_MAX);
            return VKATTN_ERROR_INVALID_ARGUMENT;
        }
    return VKATTN_SUCCESS;
}

/* Every tensor against out_a's [B, Hq, Tq, D] (LSE: its first three). */
static vkattn_result check_shapes(const vkattn_host_tensor *const t[COUNT], char *error,
                                  size_t error_size)
{
    static const char *const dim_names[4] = {"batch", "heads", "queries", "head_dim"};
    for (int which = 0; which < COUNT; which++) {
        if (which == LSE && !t[LSE]->data)
            continue;
        VKA_TRY(check_one(t[which], which, t[OUT_A]->dtype, error, error_size));
        for (uint32_t i = 0; i < t[which]->rank; i++)
            if (t[which]->shape[i] != t[OUT_A]->shape[i]) {
                vka_error_format(error, error_size,
                                 "args->%s.shape[%u] (%s) %lld differs from args->out_a.shape[%u] "
                                 "%lld",
                                 names[which], i, dim_names[i], (long long)t[which]->shape[i], i,
                                 (long long)t[OUT_A]->shape[i]);
                return VKATTN_ERROR_SHAPE_MISMATCH;
            }
    }
    return VKATTN_SUCCESS;
}

/* An output that is one of its inputs must be that input exactly (the same
 * strides): then reading each row before writing it is safe. */
static vkattn_result check_alias(const vkattn_host_tensor *r, int out, int in, char *error,
                                 size_t error_size)
{
    if (!r[out].data || r[out].data != r[in].data)
        return VKATTN_SUCCESS;
    for (uint32_t i = 0; i < r[out].rank; i++)
        if (r[out].strides[i] != r[in].strides[i]) {
            vka_error_format(error, error_size,
                             "args->%s is args->%s's memory with other strides (strides[%u] "
                             "%lld, not %lld): an output may be an input, but as the same "
                             "tensor",
                             names[out], names[in], i, (long long)r[out].strides[i],
                             (long long)r[in].strides[i]);
            return VKATTN_ERROR_INVALID_ARGUMENT;
        }
    return VKATTN_SUCCESS;
}

vkattn_result vkattn_ref_attention_merge(const vkattn_ref_attention_merge_args *args, char *error,
                                         size_t error_size)
{
    if (!args) {
        vka_error_format(error, error_size, "args is NULL");
        return VKATTN_ERROR_INVALID_ARGUMENT;
    }
    const vkattn_host_tensor *t[COUNT] = {&args->out_a, &args->lse_a, &args->out_b,
                                          &args->lse_b, &args->out,   &args->lse};
    VKA_TRY(check_shapes(t, error, error_size));
    vkattn_host_tensor r[COUNT];
    memset(r, 0, sizeof r);
    for (int which = 0; which < COUNT; which++) {
        if (!t[which]->data)
            continue;
        char name[32];
        vka_error_format(name, sizeof name, "args->%s", names[which]);
        VKA_TRY(
            vka_host_tensor_resolve(t[which], name, which >= OUT, &r[which], error, error_size));
    }
    VKA_TRY(check_alias(r, OUT, OUT_A, error, error_size));
    VKA_TRY(check_alias(r, OUT, OUT_B, error, error_size));
    VKA_TRY(check_alias(r, LSE, LSE_A, error, error_size));
    VKA_TRY(check_alias(r, LSE, LSE_B, error, error_size));

    const int64_t B = r[OUT_A].shape[0], H = r[OUT_A].shape[1], T = r[OUT_A].shape[2];
    const int64_t D = r[OUT_A].shape[3];
    double *row = vka_ref_scratch(2 * (size_t)D, error, error_size);
    if (!row)
        return VKATTN_ERROR_OUT_OF_HOST_MEMORY;
    const vkattn_host_tensor *oa = &r[OUT_A], *ob = &r[OUT_B], *o = &r[OUT];
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < H; h++)
            for (int64_t i = 0; i < T; i++) {
                int64_t at[COUNT];
                for (int which = 0; which < COUNT; which++)
                    at[which] =
                        b * r[which].strides[0] + h * r[which].strides[1] + i * r[which].strides[2];
                double la = vka_host_load(&r[LSE_A], at[LSE_A]);
                double lb = vka_host_load(&r[LSE_B], at[LSE_B]);
                for (int64_t e = 0; e < D; e++) {
                    row[e] = vka_host_load(oa, at[OUT_A] + e * oa->strides[3]);
                    row[D + e] = vka_host_load(ob, at[OUT_B] + e * ob->strides[3]);
                }
                /* Both sides empty: zeros and -inf. A NaN LSE stays NaN. */
                double m = la > lb ? la : lb, wa = 0.0, wb = 0.0, lse = -INFINITY;
                if (m != -INFINITY || isnan(la) || isnan(lb)) {
                    wa = exp(la - m), wb = exp(lb - m);
                    lse = m + log(wa + wb);
                    double inv = 1.0 / (wa + wb);
                    wa *= inv, wb *= inv;
                }
                for (int64_t e = 0; e < D; e++)
                    vka_host_store(o, at[OUT] + e * o->strides[3], wa * row[e] + wb * row[D + e]);
                if (r[LSE].data)
                    vka_host_store(&r[LSE], at[LSE], lse);
            }
    free(row);
    return VKATTN_SUCCESS;
}
