/* ggml's q8_0 and q4_0 block quantizers and their dequantization, step by
 * step in f32 (compiled without floating-point contraction: a fused
 * multiply-add would round x * id + 8.5 once instead of twice). */
#include "ref/ref.h"
#include "spec/dtype.h"
#include "spec/error_text.h"

#include <math.h>
#include <string.h>

#define BLOCK 32

/* The f16 maximum: a scale above it would be stored as infinity. */
#define F16_MAX 65504.0f

/* Checks dtype and n, and every value: finite, with a scale f16 holds. */
static vkattn_result check(vkattn_dtype dtype, const void *data, uint64_t n, const float *x,
                           char *error, size_t error_size, const char *fn)
{
    char b[VKA_DTYPE_TEXT];
    if (!vka_dtype_is_quantized(dtype)) {
        vka_error_format(error, error_size, "%s: dtype %s is not q8_0 or q4_0", fn,
                         vka_dtype_text(dtype, b));
        return VKATTN_ERROR_UNSUPPORTED_DTYPE;
    }
    if (n % BLOCK) {
        vka_error_format(error, error_size,
                         "%s: n %llu is not a multiple of the block size %d (%s)", fn,
                         (unsigned long long)n, BLOCK, vkattn_dtype_name(dtype));
        return VKATTN_ERROR_INVALID_ARGUMENT;
    }
    if (n && !data) {
        vka_error_format(error, error_size, "%s: the data pointer is NULL", fn);
        return VKATTN_ERROR_INVALID_ARGUMENT;
    }
    /* q8_0: d = amax / 127; q4_0: d = -max / 8 */
    const float most = F16_MAX * (dtype == VKATTN_DTYPE_Q8_0 ? 127.0f : 8.0f);
    for (uint64_t i = 0; x && i < n; i++) {
        if (!isfinite(x[i])) {
            vka_error_format(error, error_size,
                             "%s: element %llu is %s: only finite values "
                             "quantize",
                             fn, (unsigned long long)i, isnan(x[i]) ? "NaN" : "infinite");
            return VKATTN_ERROR_INVALID_ARGUMENT;
        }
        if (fabsf(x[i]) > most) {
            vka_error_format(error, error_size,
                             "%s: element %llu is %g: the block scale would overflow f16 (|x| "
                             "at most %g for %s)",
                             fn, (unsigned long long)i, (double)x[i], (double)most,
                             vkattn_dtype_name(dtype));
            return VKATTN_ERROR_INVALID_ARGUMENT;
        }
    }
    return VKATTN_SUCCESS;
}

static void put_scale(uint8_t *block, float d)
{
    uint16_t h = vkattn_f32_to_f16(d);
    block[0] = (uint8_t)(h & 0xff);
    block[1] = (uint8_t)(h >> 8);
}

static float get_scale(const uint8_t *block)
{
    return vkattn_f16_to_f32((uint16_t)(block[0] | block[1] << 8));
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

static void quantize_q4_0(const float *x, uint8_t *out)
{
    float amax = 0.0f, max = 0.0f;
    for (int j = 0; j < BLOCK; j++)
        if (amax < fabsf(x[j])) {
            amax = fabsf(x[j]);
            max = x[j];
        }
    const float d = max / -8.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    put_scale(out, d);
    for (int j = 0; j < BLOCK / 2; j++) {
        const float v0 = x[j] * id;
        const float v1 = x[BLOCK / 2 + j] * id;
        const float s0 = v0 + 8.5f;
        const float s1 = v1 + 8.5f;
        int q0 = (int8_t)s0, q1 = (int8_t)s1;
        q0 = q0 < 15 ? q0 : 15;
        q1 = q1 < 15 ? q1 : 15;
        out[2 + j] = (uint8_t)(q0 | q1 << 4);
    }
}

vkattn_result vkattn_ref_quantize(vkattn_dtype dtype, const float *x, uint64_t n, void *out,
                                  char *error, size_t error_size)
{
    vkattn_result r = check(dtype, x, n, x, error, error_size, "vkattn_ref_quantize");
    if (r == VKATTN_SUCCESS && n && !out) {
        vka_error_format(error, error_size, "vkattn_ref_quantize: out is NULL");
        r = VKATTN_ERROR_INVALID_ARGUMENT;
    }
    if (r != VKATTN_SUCCESS)
        return r;
    const uint32_t bytes = vka_quant_block_bytes(dtype);
    uint8_t *o = out;
    for (uint64_t b = 0; b < n / BLOCK; b++)
        (dtype == VKATTN_DTYPE_Q8_0 ? quantize_q8_0 : quantize_q4_0)(x + b * BLOCK, o + b * bytes);
    return VKATTN_SUCCESS;
}

vkattn_result vkattn_ref_quantize_q8_0(const float *x, uint64_t n, void *out, char *error,
                                       size_t error_size)
{
    return vkattn_ref_quantize(VKATTN_DTYPE_Q8_0, x, n, out, error, error_size);
}

vkattn_result vkattn_ref_quantize_q4_0(const float *x, uint64_t n, void *out, char *error,
                                       size_t error_size)
{
    return vkattn_ref_quantize(VKATTN_DTYPE_Q4_0, x, n, out, error, error_size);
}

vkattn_result vkattn_ref_dequantize(vkattn_dtype dtype, const void *in, uint64_t n, float *out,
                                    char *error, size_t error_size)
{
    vkattn_result r = check(dtype, in, n, NULL, error, error_size, "vkattn_ref_dequantize");
    if (r == VKATTN_SUCCESS && n && !out) {
        vka_error_format(error, error_size, "vkattn_ref_dequantize: out is NULL");
        r = VKATTN_ERROR_INVALID_ARGUMENT;
    }
    if (r != VKATTN_SUCCESS)
        return r;
    const uint32_t bytes = vka_quant_block_bytes(dtype);
    const uint8_t *p = in;
    for (uint64_t b = 0; b < n / BLOCK; b++, p += bytes) {
        const float d = get_scale(p);
        float *y = out + b * BLOCK;
        for (int j = 0; j < BLOCK; j++) {
            if (dtype == VKATTN_DTYPE_Q8_0) {
                y[j] = d * (float)(int8_t)p[2 + j];
            } else {
                int q = j < BLOCK / 2 ? (p[2 + j] & 0xf) : (p[2 + j - BLOCK / 2] >> 4);
                y[j] = d * (float)(q - 8);
            }
        }
    }
    return VKATTN_SUCCESS;
}
