/* Data types: sizes and names (public), names for messages, and IEEE
 * binary16 and bfloat16 <-> binary32 on the host. No context: the CPU reference uses
 * them as the GPU ops do. */
#include "spec/dtype.h"

#include <stdio.h>
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
    case VKATTN_DTYPE_I32:
        return 4;
    case VKATTN_DTYPE_BF16:
        return 2;
    case VKATTN_DTYPE_Q8_0:
    case VKATTN_DTYPE_Q4_0:
    case VKATTN_DTYPE_Q4_1:
    case VKATTN_DTYPE_Q5_0:
    case VKATTN_DTYPE_Q5_1:
    case VKATTN_DTYPE_IQ4_NL:
        return 0; /* no per-element size: vkattn_dtype_row_bytes */
    }
    return 0;
}

uint32_t vkattn_dtype_block_size(vkattn_dtype dtype)
{
    if (vka_dtype_is_quantized(dtype))
        return VKA_QUANT_BLOCK;
    return vkattn_dtype_size(dtype) ? 1 : 0;
}

uint64_t vkattn_dtype_row_bytes(vkattn_dtype dtype, uint64_t elements)
{
    uint64_t unit =
        vka_dtype_is_quantized(dtype) ? vka_quant_block_bytes(dtype) : vkattn_dtype_size(dtype);
    uint32_t per = vkattn_dtype_block_size(dtype);
    if (!unit || elements % per || elements / per > UINT64_MAX / unit)
        return 0;
    return elements / per * unit;
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
    case VKATTN_DTYPE_I32:
        return "i32";
    case VKATTN_DTYPE_BF16:
        return "bf16";
    case VKATTN_DTYPE_Q8_0:
        return "q8_0";
    case VKATTN_DTYPE_Q4_0:
        return "q4_0";
    case VKATTN_DTYPE_Q4_1:
        return "q4_1";
    case VKATTN_DTYPE_Q5_0:
        return "q5_0";
    case VKATTN_DTYPE_Q5_1:
        return "q5_1";
    case VKATTN_DTYPE_IQ4_NL:
        return "iq4_nl";
    }
    return NULL;
}

const char *vka_dtype_text(vkattn_dtype dtype, char buf[VKA_DTYPE_TEXT])
{
    const char *name = vkattn_dtype_name(dtype);
    if (name)
        return name;
    snprintf(buf, VKA_DTYPE_TEXT, "%d (not a vkattn_dtype)", (int)dtype);
    return buf;
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

/* ------------------------------------------------------------ host bf16 */

uint16_t vkattn_f32_to_bf16(float value)
{
    uint32_t x;
    memcpy(&x, &value, 4);
    if ((x & 0x7fffffffu) > 0x7f800000u) /* NaN: quiet, sign kept */
        return (uint16_t)((x >> 16) | 0x40u);
    /* round to nearest even on the 16 dropped bits; a carry out of the
     * fraction steps the exponent, up to inf: correct */
    return (uint16_t)((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

float vkattn_bf16_to_f32(uint16_t value)
{
    uint32_t x = (uint32_t)value << 16;
    float f;
    memcpy(&f, &x, 4);
    return f;
}
