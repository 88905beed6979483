/* Tensor views: construction, default strides, bounds checks, and the
 * checks every op shares (rows, outputs, overlaps). */
#include "core/tensor.h"

#include "core/buffer.h"
#include "core/host.h"
#include "spec/attention_shapes.h"
#include "spec/dtype.h"
#include "spec/size_math.h"

#include <string.h>

/* Row-major strides of `shape` (rank entries), or false when a dimension is
 * negative or the element count does not fit int64_t. */
static bool contiguous_strides(const int64_t *shape, uint32_t rank, int64_t *strides)
{
    uint64_t stride = 1;
    for (uint32_t i = rank; i-- > 0;) {
        if (shape[i] < 0 || stride > INT64_MAX)
            return false;
        strides[i] = (int64_t)stride;
        if (!vka_mul_u64(stride, (uint64_t)shape[i], &stride))
            return false;
    }
    return stride <= INT64_MAX;
}

vkattn_tensor vkattn_tensor_make(vkattn_buffer *buffer, uint64_t offset, vkattn_dtype dtype,
                                 uint32_t rank, const int64_t *shape)
{
    vkattn_tensor t;
    memset(&t, 0, sizeof t);
    t.buffer = buffer;
    t.offset = offset;
    t.dtype = dtype;
    t.rank = rank > VKATTN_MAX_RANK ? VKATTN_MAX_RANK : rank;
    for (uint32_t i = 0; i < t.rank; i++)
        t.shape[i] = shape ? shape[i] : 0;
    /* shapes past int64 elements keep the default (0) strides: the op that
     * resolves them names the problem */
    if (!contiguous_strides(t.shape, t.rank, t.strides))
        memset(t.strides, 0, sizeof t.strides);
    return t;
}

int64_t vkattn_tensor_numel(const vkattn_tensor *t)
{
    if (!t)
        return 0;
    uint64_t n = 1;
    for (uint32_t i = 0; i < t->rank && i < VKATTN_MAX_RANK; i++)
        if (t->shape[i] < 0 || !vka_mul_u64(n, (uint64_t)t->shape[i], &n))
            return -1;
    return n > INT64_MAX ? -1 : (int64_t)n;
}

bool vka_tensor_is_contiguous(const vkattn_tensor *t)
{
    int64_t stride = 1;
    for (uint32_t i = t->rank; i-- > 0;) {
        if (t->shape[i] != 1 && t->strides[i] != stride)
            return false;
        stride *= t->shape[i];
    }
    return true;
}

/* A tensor's buffer: given, and of this context. */
static vkattn_result check_buffer(vkattn_context *ctx, const vkattn_tensor *t, const char *what)
{
    if (!t->buffer)
        return vka_fail(ctx, VKATTN_ERROR_INVALID_ARGUMENT, "%s.buffer is NULL", what);
    if (t->buffer->ctx != ctx)
        return vka_fail(ctx, VKATTN_ERROR_INVALID_ARGUMENT, "%s.buffer belongs to another context",
                        what);
    return VKATTN_SUCCESS;
}

/* The rank, shape and strides of a tensor on a buffer of this context,
 * default strides resolved into *out (the rest of it copied from t). */
static vkattn_result resolve_view(vkattn_context *ctx, const vkattn_tensor *t, const char *what,
                                  vkattn_tensor *out)
{
    VKA_TRY(check_buffer(ctx, t, what));
    if (t->rank == 0 || t->rank > VKATTN_MAX_RANK)
        return vka_fail(ctx, VKATTN_ERROR_INVALID_ARGUMENT, "%s.rank %u is not in 1..%d", what,
                        t->rank, VKATTN_MAX_RANK);
    *out = *t;
    bool default_strides = true;
    for (uint32_t i = 0; i < t->rank; i++) {
        if (t->shape[i] <= 0)
            return vka_fail(ctx, VKATTN_ERROR_INVALID_ARGUMENT,
                            "%s.shape[%u] is %lld: every dimension must be >= 1", what, i,
                            (long long)t->shape[i]);
        if (t->strides[i] < 0)
            return vka_fail(ctx, VKATTN_ERROR_INVALID_ARGUMENT,
                            "%s.strides[%u] is %lld: strides must be >= 0", what, i,
                            (long long)t->strides[i]);
        default_strides = default_strides && t->strides[i] == 0;
    }
    if (default_strides && !contiguous_strides(t->shape, t->rank, out->strides))
        return vka_fail(ctx, VKATTN_ERROR_OUT_OF_RANGE,
                        "%s.shape: the number of elements does not fit 64 bits", what);
    return VKATTN_SUCCESS;
}

vkattn_result vka_tensor_resolve(vkattn_context *ctx, const vkattn_tensor *t, const char *what,
                                 vkattn_tensor *out)
{
    VKA_TRY(check_buffer(ctx, t, what));
    size_t esize = vkattn_dtype_size(t->dtype);
    if (!esize && vka_dtype_is_quantized(t->dtype))
        return vka_fail(ctx, VKATTN_ERROR_UNSUPPORTED_DTYPE,
                        "%s.dtype is %s: quantized data has no element size; it is taken as a KV "
                        "cache's dtype (vkattn_kv_cache_desc.dtype), as attention's k and v, and "
                        "as linear's w (q8_0), not here",
                        what, vkattn_dtype_name(t->dtype));
    if (!esize)
        return vka_fail(ctx, VKATTN_ERROR_UNSUPPORTED_DTYPE, "%s.dtype %d is not a vkattn_dtype",
                        what, (int)t->dtype);
    if (t->offset % esize)
        return vka_fail(ctx, VKATTN_ERROR_INVALID_ARGUMENT,
                        "%s.offset %llu is not a multiple of the %s element size %zu", what,
                        (unsigned long long)t->offset, vkattn_dtype_name(t->dtype), esize);
    VKA_TRY(resolve_view(ctx, t, what, out));
    /* Bytes spanned: from the offset to the last element (strides are
     * non-negative, so it is the farthest) plus one element; every step
     * checked, so no huge stride or offset wraps around into the buffer. */
    uint64_t last = 0, term, bytes, end;
    bool fits = true;
    for (uint32_t i = 0; i < t->rank && fits; i++)
        fits = vka_mul_u64((uint64_t)(t->shape[i] - 1), (uint64_t)out->strides[i], &term) &&
               vka_add_u64(last, term, &last);
    fits = fits && vka_add_u64(last, 1, &last) && vka_mul_u64(last, esize, &bytes) &&
           vka_add_u64(t->offset, bytes, &end);
    if (!fits)
        return vka_fail(ctx, VKATTN_ERROR_OUT_OF_RANGE,
                        "%s spans more than 2^64 bytes from its offset %llu (shape and strides "
                        "too large) but its buffer has %llu bytes",
                        what, (unsigned long long)t->offset, (unsigned long long)t->buffer->size);
    if (end > t->buffer->size)
        return vka_fail(ctx, VKATTN_ERROR_OUT_OF_RANGE,
                        "%s spans bytes %llu..%llu but its buffer has %llu bytes", what,
                        (unsigned long long)t->offset, (unsigned long long)end,
                        (unsigned long long)t->buffer->size);
    return VKATTN_SUCCESS;
}

vkattn_result vka_tensor_resolve_blocks(vkattn_context *ctx, const vkattn_tensor *t,
                                        const char *what, uint64_t align, vkattn_tensor *out)
{
    if (!vka_dtype_is_quantized(t->dtype))
        return vka_tensor_resolve(ctx, t, what, out);
    VKA_TRY(check_buffer(ctx, t, what));
    if (t->rank == 0 || t->rank > VKATTN_MAX_RANK)
        return vka_fail(ctx, VKATTN_ERROR_INVALID_ARGUMENT, "%s.rank %u is not in 1..%d", what,
                        t->rank, VKATTN_MAX_RANK);
    for (uint32_t i = 0; i < t->rank; i++)
        if (t->shape[i] <= 0)
            return vka_fail(ctx, VKATTN_ERROR_INVALID_ARGUMENT,
                            "%s.shape[%u] is %lld: every dimension must be >= 1", what, i,
                            (long long)t->shape[i]);
    const char *name = vkattn_dtype_name(t->dtype);
    int64_t last = t->shape[t->rank - 1];
    if (last % (2 * VKA_QUANT_BLOCK))
        return vka_fail(ctx, VKATTN_ERROR_INVALID_ARGUMENT,
                        "%s.shape[%u] is %lld: a %s tensor's last dimension must be a multiple of "
                        "64 (whole pairs of %u-value blocks, so rows start on 32-bit words)",
                        what, t->rank - 1, (long long)last, name, VKA_QUANT_BLOCK);
    *out = *t;
    uint64_t numel = 1;
    bool default_strides = true;
    for (uint32_t i = 0; i < t->rank; i++)
        default_strides = default_strides && t->strides[i] == 0;
    if (!contiguous_strides(t->shape, t->rank, out->strides))
        return vka_fail(ctx, VKATTN_ERROR_OUT_OF_RANGE,
                        "%s.shape: the number of elements does not fit 64 bits", what);
    for (uint32_t i = 0; i < t->rank; i++) {
        if (!default_strides && t->shape[i] > 1 && t->strides[i] != out->strides[i])
            return vka_fail(ctx, VKATTN_ERROR_INVALID_ARGUMENT,
                            "%s.strides[%u] is %lld: %s tensors are contiguous (stride %lld "
                            "there), blocks packed back to back",
                            what, i, (long long)t->strides[i], name, (long long)out->strides[i]);
        numel *= (uint64_t)t->shape[i];
    }
    if (t->offset % align)
        return vka_fail(ctx, VKATTN_ERROR_INVALID_ARGUMENT,
                        "%s.offset %llu is not a multiple of %llu bytes (the device's storage "
                        "buffer offset alignment, at least 16): %s data is bound from its start",
                        what, (unsigned long long)t->offset, (unsigned long long)align, name);
    uint64_t bytes = vkattn_dtype_row_bytes(t->dtype, numel), end;
    if (!bytes || !vka_add_u64(t->offset, bytes, &end) || end > t->buffer->size)
        return vka_fail(ctx, VKATTN_ERROR_OUT_OF_RANGE,
                        "%s (%s, %llu values: %llu bytes) from offset %llu does not fit its "
                        "buffer of %llu bytes",
                        what, name, (unsigned long long)numel, (unsigned long long)bytes,
                        (unsigned long long)t->offset, (unsigned long long)t->buffer->size);
    return VKATTN_SUCCESS;
}

/* ------------------------------------------------------- shared checks */

vkattn_result vka_tensor_resolve_quant(vkattn_context *ctx, const vkattn_tensor *t,
                                       const char *what, uint64_t align, vkattn_tensor *out)
{
    VKA_TRY(resolve_view(ctx, t, what, out));
    char error[VKA_ERROR_MAX];
    vkattn_result r = vka_quant_strides_check(what, t->dtype, t->rank, t->shape, out->strides,
                                              error, sizeof error);
    if (r != VKATTN_SUCCESS)
        return vka_fail(ctx, r, "%s", error);
    const char *name = vkattn_dtype_name(t->dtype);
    if (t->offset % align)
        return vka_fail(ctx, VKATTN_ERROR_INVALID_ARGUMENT,
                        "%s.offset %llu is not a multiple of %llu bytes (the device's storage "
                        "buffer offset alignment, at least 16): %s data is bound from its start",
                        what, (unsigned long long)t->offset, (unsigned long long)align, name);
    uint64_t last = 0, term, bytes = 0, end = 0;
    bool fits = true;
    for (uint32_t i = 0; i < t->rank && fits; i++)
        fits = vka_mul_u64((uint64_t)(t->shape[i] - 1), (uint64_t)out->strides[i], &term) &&
               vka_add_u64(last, term, &last);
    fits = fits && vka_add_u64(last, 1, &last);
    if (fits)
        bytes = vkattn_dtype_row_bytes(t->dtype, last);
    /* (the word the last block ends in is the buffer's: every buffer is whole
     * 32-bit words, vkattn_buffer's vk_size) */
    fits = fits && bytes && vka_add_u64(t->offset, bytes, &end);
    if (!fits || end > t->buffer->size)
        return vka_fail(ctx, VKATTN_ERROR_OUT_OF_RANGE,
                        "%s (%s, %llu bytes) from offset %llu does not fit its buffer of %llu "
                        "bytes",
                        what, name, (unsigned long long)bytes, (unsigned long long)t->offset,
                        (unsigned long long)t->buffer->size);
    return VKATTN_SUCCESS;
}

void vka_tensor_bytes(const vkattn_tensor *t, uint64_t *begin, uint64_t *end)
{
    uint64_t last = 0;
    for (uint32_t i = 0; i < t->rank; i++)
        last += (uint64_t)(t->shape[i] - 1) * (uint64_t)t->strides[i];
    *begin = t->offset;
    if (vka_dtype_is_quantized(t->dtype)) /* contiguous: vka_tensor_resolve_blocks */
        *end = t->offset + vkattn_dtype_row_bytes(t->dtype, last + 1);
    else
        *end = t->offset + (last + 1) * vkattn_dtype_size(t->dtype);
}

vkattn_result vka_tensor_check_rows(vkattn_context *ctx, const vkattn_tensor *t, const char *name,
                                    uint32_t stride_multiple, uint32_t offset_multiple)
{
    uint32_t l = t->rank - 1;
    if (t->shape[l] > 1 && t->strides[l] != 1)
        return vka_fail(ctx, VKATTN_ERROR_INVALID_ARGUMENT,
                        "%s.strides[%u] is %lld: the last dimension of %s must be contiguous "
                        "(stride 1)",
                        name, l, (long long)t->strides[l], name);
    for (uint32_t d = 0; d < l; d++)
        if (t->strides[d] % stride_multiple != 0)
            return vka_fail(ctx, VKATTN_ERROR_INVALID_ARGUMENT,
                            "%s.strides[%u] is %lld: the strides of %s must be multiples of %u",
                            name, d, (long long)t->strides[d], name, stride_multiple);
    if (t->offset % offset_multiple != 0)
        return vka_fail(ctx, VKATTN_ERROR_INVALID_ARGUMENT,
                        "%s.offset %llu is not a multiple of %u bytes", name,
                        (unsigned long long)t->offset, offset_multiple);
    return VKATTN_SUCCESS;
}

vkattn_result vka_tensor_check_shape_as(vkattn_context *ctx, const vkattn_tensor *t,
                                        const char *name, const vkattn_tensor *like,
                                        const char *like_name)
{
    if (t->rank != like->rank)
        return vka_fail(ctx, VKATTN_ERROR_SHAPE_MISMATCH, "%s.rank is %u: it must be %u, as %s's",
                        name, t->rank, like->rank, like_name);
    for (uint32_t d = 0; d < t->rank; d++)
        if (t->shape[d] != like->shape[d])
            return vka_fail(ctx, VKATTN_ERROR_SHAPE_MISMATCH,
                            "%s.shape[%u] is %lld: it must be %lld, as %s's", name, d,
                            (long long)t->shape[d], (long long)like->shape[d], like_name);
    return VKATTN_SUCCESS;
}

vkattn_result vka_tensor_check_output(vkattn_context *ctx, const vkattn_tensor *t, const char *name)
{
    for (uint32_t d = 0; d < t->rank; d++)
        if (t->strides[d] == 0 && t->shape[d] > 1)
            return vka_fail(ctx, VKATTN_ERROR_INVALID_ARGUMENT,
                            "%s.strides[%u] is 0 while %s.shape[%u] is %lld: an output cannot "
                            "broadcast (its elements would overlap)",
                            name, d, name, d, (long long)t->shape[d]);
    /* Ordered by stride, each stride must step over everything the smaller
     * ones span. */
    uint32_t order[VKATTN_MAX_RANK], n = 0;
    for (uint32_t i = 0; i < t->rank; i++)
        if (t->shape[i] > 1)
            order[n++] = i;
    for (uint32_t i = 1; i < n; i++) /* insertion sort by stride */
        for (uint32_t j = i; j > 0 && t->strides[order[j]] < t->strides[order[j - 1]]; j--) {
            uint32_t tmp = order[j];
            order[j] = order[j - 1];
            order[j - 1] = tmp;
        }
    uint64_t span = 1;
    for (uint32_t i = 0; i < n; i++) {
        uint32_t d = order[i];
        if ((uint64_t)t->strides[d] < span)
            return vka_fail(ctx, VKATTN_ERROR_INVALID_ARGUMENT,
                            "%s.strides[%u] %lld makes elements overlap (the dimensions with "
                            "smaller strides span %llu elements): outputs need distinct elements",
                            name, d, (long long)t->strides[d], (unsigned long long)span);
        span += (uint64_t)(t->shape[d] - 1) * (uint64_t)t->strides[d];
    }
    return VKATTN_SUCCESS;
}

vkattn_result vka_tensor_check_disjoint(vkattn_context *ctx, const vkattn_tensor *out,
                                        const char *out_name, const vkattn_tensor *other,
                                        const char *other_name)
{
    if (!out->buffer || !other->buffer || out->buffer != other->buffer)
        return VKATTN_SUCCESS;
    uint64_t a0, a1, b0, b1;
    vka_tensor_bytes(out, &a0, &a1);
    vka_tensor_bytes(other, &b0, &b1);
    if (a0 < b1 && b0 < a1)
        return vka_fail(ctx, VKATTN_ERROR_INVALID_ARGUMENT,
                        "%s (bytes %llu..%llu) overlaps %s (bytes %llu..%llu) in the same buffer: "
                        "outputs must not overlap the inputs or each other",
                        out_name, (unsigned long long)a0, (unsigned long long)a1, other_name,
                        (unsigned long long)b0, (unsigned long long)b1);
    return VKATTN_SUCCESS;
}

vkattn_result vka_tensor_check_float(vkattn_context *ctx, const vkattn_tensor *t, const char *name,
                                     const char *op)
{
    char b[VKA_DTYPE_TEXT];
    if (!vka_dtype_is_float(t->dtype) && t->dtype != VKATTN_DTYPE_BF16)
        return vka_fail(ctx, VKATTN_ERROR_UNSUPPORTED_DTYPE,
                        "%s.dtype is %s: %s takes f32, f16 or bf16", name,
                        vka_dtype_text(t->dtype, b), op);
    return VKATTN_SUCCESS;
}
