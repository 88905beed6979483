/* ggml's nibble block formats: q4_0, and llama.cpp's other KV cache types
 * q4_1, q5_0, q5_1 and iq4_nl, quantized as ggml's reference quantizers do
 * (quantize_row_*_ref), step by step in f32 and compiled without
 * floating-point contraction like quant.c: bit for bit ggml's blocks where
 * ggml is built without contraction too (built with it, ggml fuses iq4_nl's
 * sums and its scale may land one f16 step apart; docs/quantization.md has
 * the comparison). Layouts,
 * little-endian, 32 values per block:
 *   q4_0   f16 d, 16 bytes of nibbles                   18 bytes  x = d (q - 8)
 *   q4_1   f16 d, f16 m, 16 bytes of nibbles            20 bytes  x = d q + m
 *   q5_0   f16 d, 32-bit qh, 16 bytes of low nibbles    22 bytes  x = d (q - 16)
 *   q5_1   f16 d, f16 m, 32-bit qh, 16 bytes            24 bytes  x = d q + m
 *   iq4_nl f16 d, 16 bytes of nibbles indexing a table  18 bytes  x = d T[q]
 * Value j < 16 is the low nibble of byte j, value j + 16 its high nibble;
 * q5's fifth bit of value j is bit j of qh. */
#include "spec/quant_formats.h"

#include <float.h>
#include <math.h>
#include <string.h>

#define BLOCK 32
#define HALF (BLOCK / 2)

/* iq4_nl's sixteen levels (ggml's kvalues_iq4nl). */
static const int8_t iq4nl_levels[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                        1,    13,   25,  38,  53,  69,  89,  113};

static void put_f16(uint8_t *at, float v)
{
    uint16_t h = vkattn_f32_to_f16(v);
    at[0] = (uint8_t)(h & 0xff);
    at[1] = (uint8_t)(h >> 8);
}

static float get_f16(const uint8_t *at)
{
    return vkattn_f16_to_f32((uint16_t)(at[0] | at[1] << 8));
}

static void put_u32(uint8_t *at, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        at[i] = (uint8_t)(v >> (8 * i));
}

static uint32_t get_u32(const uint8_t *at)
{
    return (uint32_t)at[0] | (uint32_t)at[1] << 8 | (uint32_t)at[2] << 16 | (uint32_t)at[3] << 24;
}

static void min_max(const float *x, float *lo, float *hi)
{
    *lo = FLT_MAX;
    *hi = -FLT_MAX;
    for (int j = 0; j < BLOCK; j++) {
        if (x[j] < *lo)
            *lo = x[j];
        if (x[j] > *hi)
            *hi = x[j];
    }
}

/* q4_1 and q5_1: the block's range in 2^bits - 1 steps from its minimum. */
static void quantize_affine(const float *x, int bits, uint8_t *out)
{
    float lo, hi;
    min_max(x, &lo, &hi);
    const float d = (hi - lo) / (float)((1 << bits) - 1);
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    put_f16(out, d);
    put_f16(out + 2, lo);
    uint8_t *qs = out + (bits == 5 ? 8 : 4);
    uint32_t qh = 0;
    for (int j = 0; j < HALF; j++) {
        const float v0 = (x[j] - lo) * id;
        const float v1 = (x[HALF + j] - lo) * id;
        const float s0 = v0 + 0.5f;
        const float s1 = v1 + 0.5f;
        int q0, q1;
        if (bits == 4) { /* ggml: MIN(15, (int8_t)(v + 0.5f)) */
            q0 = (int8_t)s0;
            q1 = (int8_t)s1;
            q0 = q0 < 15 ? q0 : 15;
            q1 = q1 < 15 ? q1 : 15;
        } else { /* ggml: (uint8_t)(v + 0.5f), at most 31.5 */
            q0 = (uint8_t)s0;
            q1 = (uint8_t)s1;
            qh |= (uint32_t)((q0 >> 4) & 1) << j;
            qh |= (uint32_t)((q1 >> 4) & 1) << (j + HALF);
        }
        qs[j] = (uint8_t)((q0 & 0x0f) | (q1 & 0x0f) << 4);
    }
    if (bits == 5)
        put_u32(out + 4, qh);
}

/* The value of largest magnitude (the first on ties; 0 for an all-zero
 * block), as ggml's q4_0, q5_0 and iq4_nl quantizers find it. */
static float largest_magnitude(const float *x)
{
    float amax = 0.0f, max = 0.0f;
    for (int j = 0; j < BLOCK; j++)
        if (amax < fabsf(x[j])) {
            amax = fabsf(x[j]);
            max = x[j];
        }
    return max;
}

/* q4_0 and q5_0: 2^bits steps around zero, d = max / -2^(bits - 1). */
static void quantize_centred(const float *x, int bits, uint8_t *out)
{
    const float half = (float)(1 << (bits - 1));
    const int top = (1 << bits) - 1;
    const float d = largest_magnitude(x) / -half;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    put_f16(out, d);
    uint8_t *qs = out + (bits == 5 ? 6 : 2);
    uint32_t qh = 0;
    for (int j = 0; j < HALF; j++) {
        const float v0 = x[j] * id;
        const float v1 = x[HALF + j] * id;
        const float s0 = v0 + (half + 0.5f);
        const float s1 = v1 + (half + 0.5f);
        int q0 = (int8_t)s0, q1 = (int8_t)s1; /* ggml: MIN(top, (int8_t)(v + half + 0.5f)) */
        q0 = q0 < top ? q0 : top;
        q1 = q1 < top ? q1 : top;
        qs[j] = (uint8_t)((q0 & 0x0f) | (q1 & 0x0f) << 4);
        qh |= (uint32_t)((q0 >> 4) & 1) << j;
        qh |= (uint32_t)((q1 >> 4) & 1) << (j + HALF);
    }
    if (bits == 5)
        put_u32(out + 2, qh);
}

/* The level nearest to v (ties to the upper one, as ggml's
 * best_index_int8). */
static int nearest_level(float v)
{
    if (v <= iq4nl_levels[0])
        return 0;
    if (v >= iq4nl_levels[15])
        return 15;
    int lo = 0, hi = 15;
    while (hi - lo > 1) {
        int mid = (lo + hi) / 2;
        if (v < iq4nl_levels[mid])
            hi = mid;
        else
            lo = mid;
    }
    return v - iq4nl_levels[hi - 1] < iq4nl_levels[hi] - v ? hi - 1 : hi;
}

/* iq4_nl, as ggml's quantize_row_iq4_nl_ref (no search over scales, no
 * importance weights): each value's nearest level at the scale that maps
 * the block's largest magnitude to -127, then the least-squares scale of
 * those levels with weights x^2. A block of magnitudes below 1e-15 gets
 * scale 0 and zero nibbles (ggml leaves its nibbles as its buffer held
 * them: any nibbles give zeros with scale 0). */
static void quantize_iq4_nl(const float *x, uint8_t *out)
{
    const float max = largest_magnitude(x);
    int level[BLOCK] = {0};
    float d = 0.0f;
    if (!(fabsf(max) < 1e-15f)) {
        const float d0 = max / (float)iq4nl_levels[0];
        const float id = 1.0f / d0;
        float sumqx = 0.0f, sumq2 = 0.0f;
        for (int j = 0; j < BLOCK; j++) {
            const float al = id * x[j];
            level[j] = nearest_level(al);
            const float q = iq4nl_levels[level[j]];
            const float w = x[j] * x[j];
            const float wq = w * q;
            sumqx += wq * x[j];
            sumq2 += wq * q;
        }
        d = sumq2 > 0.0f ? sumqx / sumq2 : 0.0f;
    }
    put_f16(out, d);
    for (int j = 0; j < HALF; j++)
        out[2 + j] = (uint8_t)(level[j] | level[HALF + j] << 4);
}

void vka_quantize_block_format(vkattn_dtype format, const float *x, uint8_t *out)
{
    switch (format) {
    case VKATTN_DTYPE_Q4_1:
        quantize_affine(x, 4, out);
        break;
    case VKATTN_DTYPE_Q4_0:
        quantize_centred(x, 4, out);
        break;
    case VKATTN_DTYPE_Q5_0:
        quantize_centred(x, 5, out);
        break;
    case VKATTN_DTYPE_Q5_1:
        quantize_affine(x, 5, out);
        break;
    default: /* iq4_nl */
        quantize_iq4_nl(x, out);
        break;
    }
}

void vka_dequantize_block_format(vkattn_dtype format, const uint8_t *in, float *y)
{
    const float d = get_f16(in);
    const bool five = format == VKATTN_DTYPE_Q5_0 || format == VKATTN_DTYPE_Q5_1;
    const bool affine = format == VKATTN_DTYPE_Q4_1 || format == VKATTN_DTYPE_Q5_1;
    const float m = affine ? get_f16(in + 2) : 0.0f;
    const uint32_t qh = format == VKATTN_DTYPE_Q5_0   ? get_u32(in + 2)
                        : format == VKATTN_DTYPE_Q5_1 ? get_u32(in + 4)
                                                      : 0;
    const uint8_t *qs = in + (format == VKATTN_DTYPE_Q5_1   ? 8
                              : format == VKATTN_DTYPE_Q5_0 ? 6
                              : affine                      ? 4
                                                            : 2);
    for (int j = 0; j < HALF; j++) {
        int q0 = qs[j] & 0x0f, q1 = qs[j] >> 4;
        if (format == VKATTN_DTYPE_IQ4_NL) {
            y[j] = d * iq4nl_levels[q0];
            y[HALF + j] = d * iq4nl_levels[q1];
            continue;
        }
        if (five) {
            q0 |= (int)((qh >> j) & 1) << 4;
            q1 |= (int)((qh >> (j + HALF)) & 1) << 4;
        }
        if (!affine) { /* q4_0, q5_0: centred on zero */
            q0 -= five ? 16 : 8;
            q1 -= five ? 16 : 8;
            y[j] = d * (float)q0;
            y[HALF + j] = d * (float)q1;
            continue;
        }
        y[j] = (float)q0 * d + m;
        y[HALF + j] = (float)q1 * d + m;
    }
}
