/* ggml's q8_0 block quantizer (the nibble formats: quant_formats.c) and the
 * entry points for every format, step by step in f32 (compiled without
 * floating-point contraction: a fused multiply-add would round x * id + 8.5
 * once instead of twice). The reference and the library both quantize with
 * these, so their blocks are bit-identical. */
#include "spec/quant.h"
#include "spec/quant_formats.h"

#include <math.h>

#define BLOCK 32

float vka_quant_max_abs(vkattn_dtype dtype)
{
    /* the f16 maximum 65504 times the scale's divisor: q8_0 d = amax / 127,
     * q4_0 d = -max / 8, q5_0 d = -max / 16; q4_1 and q5_1 keep the minimum
     * itself; iq4_nl's least-squares d is a weighted mean of x / level over
     * the block, each at most 127 / 7 below amax (a value 7 levels' worth
     * of amax / 127 above zero takes the level 1) */
    switch (dtype) {
    case VKATTN_DTYPE_Q8_0:
        return 65504.0f * 127.0f;
    case VKATTN_DTYPE_Q4_0:
        return 65504.0f * 8.0f;
    case VKATTN_DTYPE_Q5_0:
        return 65504.0f * 16.0f;
    case VKATTN_DTYPE_IQ4_NL:
        return 65504.0f * 18.0f;
    default:
        return 65504.0f;
    }
}

static void put_scale(uint8_t *block, float d)
{
    uint16_t h = vkattn_f32_to_f16(d);
    block[0] = (uint8_t)(h & 0xff);
    block[1] = (uint8_t)(h >> 8);
}

static void quantize_q8_0(const float *x, uint8_t *out)
{
    float amax = 0.0f;
    for (int j = 0; j < BLOCK; j++)
        amax = fmaxf(amax, fabsf(x[j]));
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    put_scale(out, d);
    for (int j = 0; j < BLOCK; j++) {
        const float v = x[j] * id;
        out[2 + j] = (uint8_t)(int8_t)roundf(v);
    }
}

void vka_quantize_block(vkattn_dtype dtype, const float *x, uint8_t *out)
{
    if (dtype == VKATTN_DTYPE_Q8_0)
        quantize_q8_0(x, out);
    else
        vka_quantize_block_format(dtype, x, out);
}

void vka_dequantize_block(vkattn_dtype dtype, const uint8_t *in, float *y)
{
    if (dtype != VKATTN_DTYPE_Q8_0) {
        vka_dequantize_block_format(dtype, in, y);
        return;
    }
    const float d = vkattn_f16_to_f32((uint16_t)(in[0] | in[1] << 8));
    for (int j = 0; j < BLOCK; j++)
        y[j] = d * (float)(int8_t)in[2 + j];
}
