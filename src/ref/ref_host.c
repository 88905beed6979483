/* Host tensors of the CPU reference: construction and stride resolution. */
#include "ref/ref.h"

#include "spec/dtype.h"
#include "spec/error_text.h"
#include "spec/size_math.h"

#include <stdlib.h>
#include <string.h>

vkattn_host_tensor vkattn_host_tensor_make(void *data, vkattn_dtype dtype, uint32_t rank,
                                           const int64_t *shape)
{
    vkattn_host_tensor t;
    memset(&t, 0, sizeof t);
    t.data = data;
    t.dtype = dtype;
    t.rank = rank > VKATTN_MAX_RANK ? VKATTN_MAX_RANK : rank;
    uint64_t stride = 1;
    bool fits = true;
    for (uint32_t i = t.rank; i-- > 0;) {
        t.shape[i] = shape ? shape[i] : 0;
        t.strides[i] = (int64_t)stride;
        fits = fits && t.shape[i] >= 0 && stride <= INT64_MAX &&
               vka_mul_u64(stride, (uint64_t)t.shape[i], &stride);
    }
    /* shapes past int64 elements keep the default (0) strides: the op that
     * resolves them names the problem */
    if (!fits || stride > INT64_MAX)
        memset(t.strides, 0, sizeof t.strides);
    return t;
}

vka_shape_view vka_host_shape_view(const vkattn_host_tensor *t)
{
    vka_shape_view v;
    v.present = t->data != NULL;
    v.dtype = t->dtype;
    v.rank = t->rank;
    v.shape = t->shape;
    return v;
}

vkattn_result vka_host_tensor_resolve(const vkattn_host_tensor *t, const char *name, bool output,
                                      vkattn_host_tensor *out, char *error, size_t error_size)
{
    vkattn_host_tensor r = *t;
    bool all_zero = true;
    for (uint32_t i = 0; i < t->rank; i++) {
        if (t->strides[i] < 0) {
            vka_error_format(error, error_size, "%s.strides[%u] is %lld: strides must be >= 0",
                             name, i, (long long)t->strides[i]);
            return VKATTN_ERROR_INVALID_ARGUMENT;
        }
        all_zero = all_zero && t->strides[i] == 0;
    }
    if (all_zero) {
        uint64_t stride = 1;
        for (uint32_t i = t->rank; i-- > 0;) {
            r.strides[i] = (int64_t)stride;
            uint64_t dim = (uint64_t)t->shape[i];
            if (i > 0 && dim > (uint64_t)INT64_MAX / stride) {
                vka_error_format(error, error_size,
                                 "%s.shape: the number of elements overflows 64 bits", name);
                return VKATTN_ERROR_INVALID_ARGUMENT;
            }
            stride *= dim;
        }
    } else if (output) {
        for (uint32_t i = 0; i < t->rank; i++) {
            if (t->strides[i] == 0 && t->shape[i] > 1) {
                vka_error_format(error, error_size,
                                 "%s.strides[%u] is 0 while %s.shape[%u] is %lld: an output "
                                 "cannot broadcast (its elements would overlap)",
                                 name, i, name, i, (long long)t->shape[i]);
                return VKATTN_ERROR_INVALID_ARGUMENT;
            }
        }
    }
    /* The offset of the last element must fit int64_t; shapes were checked
     * >= 1 by the caller. */
    uint64_t last = 0;
    for (uint32_t i = 0; i < t->rank; i++) {
        uint64_t extent = (uint64_t)(t->shape[i] - 1);
        uint64_t stride = (uint64_t)r.strides[i];
        if (stride && extent > (uint64_t)INT64_MAX / stride) {
            last = UINT64_MAX;
            break;
        }
        last += extent * stride;
        if (last > (uint64_t)INT64_MAX)
            break;
    }
    if (last > (uint64_t)INT64_MAX) {
        vka_error_format(error, error_size,
                         "%s.strides: the last element's offset overflows 64 bits", name);
        return VKATTN_ERROR_INVALID_ARGUMENT;
    }
    *out = r;
    return VKATTN_SUCCESS;
}

double *vka_ref_scratch(size_t doubles, char *error, size_t error_size)
{
    size_t bytes = 0;
    double *scratch =
        vka_size_mul(doubles ? doubles : 1, sizeof(double), &bytes) ? malloc(bytes) : NULL;
    if (!scratch)
        vka_error_format(error, error_size,
                         "cannot allocate %zu doubles of scratch memory for the reference",
                         doubles);
    return scratch;
}

vkattn_result vka_host_positions_resolve(const vkattn_host_tensor *p, int64_t batch, int64_t tokens,
                                         vkattn_host_tensor *out, char *error, size_t error_size)
{
    if (p->dtype != VKATTN_DTYPE_I32) {
        char b[VKA_DTYPE_TEXT];
        vka_error_format(error, error_size, "args->positions.dtype %s is not supported: int32",
                         vka_dtype_text(p->dtype, b));
        return VKATTN_ERROR_UNSUPPORTED_DTYPE;
    }
    if (p->rank != 2) {
        vka_error_format(error, error_size,
                         "args->positions.rank is %u: positions are rank 2 [B, T]", p->rank);
        return VKATTN_ERROR_INVALID_ARGUMENT;
    }
    const int64_t want[2] = {batch, tokens};
    static const char *const what[2] = {"the batch", "the tokens per batch row"};
    for (uint32_t i = 0; i < 2; i++)
        if (p->shape[i] != want[i]) {
            vka_error_format(error, error_size,
                             "args->positions.shape[%u] %lld differs from %s %lld", i,
                             (long long)p->shape[i], what[i], (long long)want[i]);
            return VKATTN_ERROR_SHAPE_MISMATCH;
        }
    VKA_TRY(vka_host_tensor_resolve(p, "args->positions", false, out, error, error_size));
    const int32_t *v = out->data;
    for (int64_t b = 0; b < batch; b++)
        for (int64_t t = 0; t < tokens; t++) {
            int32_t at = v[b * out->strides[0] + t * out->strides[1]];
            if (at < 0 || at > VKATTN_ROPE_MAX_POSITION) {
                vka_error_format(error, error_size,
                                 "args->positions[%lld, %lld] is %ld: positions must be in "
                                 "[0, %ld] (VKATTN_ROPE_MAX_POSITION)",
                                 (long long)b, (long long)t, (long)at,
                                 (long)VKATTN_ROPE_MAX_POSITION);
                return VKATTN_ERROR_INVALID_ARGUMENT;
            }
        }
    return VKATTN_SUCCESS;
}
