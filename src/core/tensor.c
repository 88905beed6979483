/* Tensor views: construction, default strides, bounds checks; f16 on the host. */
#include "core/internal.h"

#include <string.h>

size_t vkattn_dtype_size(vkattn_dtype dtype)
{
    switch (dtype) {
    case VKATTN_DTYPE_F32:
        return 4;
    case VKATTN_DTYPE_F16:
        return 2;
    case VKATTN_DTYPE_U8:
        return 1;
    }
    return 0;
}

const char *vkattn_dtype_name(vkattn_dtype dtype)
{
    switch (dtype) {
    case VKATTN_DTYPE_F32:
        return "f32";
    case VKATTN_DTYPE_F16:
        return "f16";
    case VKATTN_DTYPE_U8:
        return "u8";
    }
    return NULL;
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
    int64_t stride = 1;
    for (uint32_t i = t.rank; i-- > 0;) {
        t.shape[i] = shape ? shape[i] : 0;
        t.strides[i] = stride;
        stride *= t.shape[i];
    }
    return t;
}

int64_t vkattn_tensor_numel(const vkattn_tensor *t)
{
    if (!t)
        return 0;
    int64_t n = 1;
    for (uint32_t i = 0; i < t->rank && i < VKATTN_MAX_RANK; i++)
        n *= t->shape[i];
    return n;
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

vkattn_result vka_tensor_resolve(vkattn_context *ctx, const vkattn_tensor *t, const char *what,
                                    vkattn_tensor *out)
{
    if (!t->buffer)
        return vka_fail(ctx, VKATTN_ERROR_INVALID_ARGUMENT, "%s.buffer is NULL", what);
    if (t->buffer->ctx != ctx)
        return vka_fail(ctx, VKATTN_ERROR_INVALID_ARGUMENT,
                           "%s.buffer belongs to another context", what);
    size_t esize = vkattn_dtype_size(t->dtype);
    if (!esize)
        return vka_fail(ctx, VKATTN_ERROR_UNSUPPORTED_DTYPE, "%s.dtype %d is not a vkattn_dtype",
                           what, (int)t->dtype);
    if (t->rank == 0 || t->rank > VKATTN_MAX_RANK)
        return vka_fail(ctx, VKATTN_ERROR_INVALID_ARGUMENT, "%s.rank %u is not in 1..%d", what,
                           t->rank, VKATTN_MAX_RANK);
    if (t->offset % esize)
        return vka_fail(ctx, VKATTN_ERROR_INVALID_ARGUMENT,
                           "%s.offset %llu is not a multiple of the %s element size %zu", what,
                           (unsigned long long)t->offset, vkattn_dtype_name(t->dtype), esize);
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
    if (default_strides) {
        int64_t stride = 1;
        for (uint32_t i = t->rank; i-- > 0;) {
            out->strides[i] = stride;
            stride *= t->shape[i];
        }
    }
    /* Bytes spanned: the last element's offset + 1 element. */
    uint64_t last = 0;
    for (uint32_t i = 0; i < t->rank; i++)
        last += (uint64_t)(t->shape[i] - 1) * (uint64_t)out->strides[i];
    uint64_t end = t->offset + (last + 1) * esize;
    if (end > t->buffer->size)
        return vka_fail(ctx, VKATTN_ERROR_OUT_OF_RANGE,
                           "%s spans bytes %llu..%llu but its buffer has %llu bytes", what,
                           (unsigned long long)t->offset, (unsigned long long)end,
                           (unsigned long long)t->buffer->size);
    return VKATTN_SUCCESS;
}

/* ------------------------------------------------------------- host f16 */

uint16_t vkattn_f32_to_f16(float value)
{
    uint32_t x;
    memcpy(&x, &value, 4);
    uint32_t sign = (x >> 16) & 0x8000u;
    uint32_t exp = (x >> 23) & 0xffu;
    uint32_t mant = x & 0x7fffffu;
    if (exp == 0xff) /* inf or NaN (keep NaN quiet and non-zero) */
        return (uint16_t)(sign | 0x7c00u | (mant ? 0x200u | (mant >> 13) : 0));
    int32_t e = (int32_t)exp - 127 + 15;
    if (e >= 31)
        return (uint16_t)(sign | 0x7c00u); /* overflow -> inf */
    if (e <= 0) {
        if (e < -10)
            return (uint16_t)sign; /* underflows to signed zero */
        mant |= 0x800000u;         /* subnormal half: shift in the implicit bit */
        uint32_t shift = (uint32_t)(14 - e);
        uint32_t half = mant >> shift;
        uint32_t rest = mant & ((1u << shift) - 1);
        uint32_t mid = 1u << (shift - 1);
        if (rest > mid || (rest == mid && (half & 1)))
            half++;
        return (uint16_t)(sign | half);
    }
    uint32_t half = ((uint32_t)e << 10) | (mant >> 13);
    uint32_t rest = mant & 0x1fffu;
    if (rest > 0x1000u || (rest == 0x1000u && (half & 1)))
        half++; /* may carry into the exponent, up to inf: correct */
    return (uint16_t)(sign | half);
}

float vkattn_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t mant = h & 0x3ffu;
    uint32_t x;
    if (exp == 0x1f) {
        x = sign | 0x7f800000u | (mant << 13);
    } else if (exp == 0) {
        if (mant == 0) {
            x = sign;
        } else { /* subnormal: normalise */
            int32_t e = -1;
            do {
                e++;
                mant <<= 1;
            } while (!(mant & 0x400u));
            x = sign | ((uint32_t)(127 - 15 - e) << 23) | ((mant & 0x3ffu) << 13);
        }
    } else {
        x = sign | ((exp - 15 + 127) << 23) | (mant << 13);
    }
    float f;
    memcpy(&f, &x, 4);
    return f;
}
