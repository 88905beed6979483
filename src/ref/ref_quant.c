/* The reference's ggml block quantizers (the block formulas are
 * spec/quant.c's, shared with the library) and their dequantization. */
#include "ref/ref.h"
#include "spec/dtype.h"
#include "spec/quant.h"
#include "spec/error_text.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define BLOCK 32

/* Checks dtype and n, and every value: finite, with a scale f16 holds. */
static vkattn_result check(vkattn_dtype dtype, const void *data, uint64_t n, const float *x,
                           char *error, size_t error_size, const char *fn)
{
    char b[VKA_DTYPE_TEXT];
    if (!vka_dtype_is_quantized(dtype)) {
        vka_error_format(error, error_size,
                         "%s: dtype %s is not quantized (q8_0, q4_0, q4_1, q5_0, q5_1, iq4_nl)", fn,
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
    const float most = vka_quant_max_abs(dtype);
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
        vka_quantize_block(dtype, x + b * BLOCK, o + b * bytes);
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
    for (uint64_t b = 0; b < n / BLOCK; b++, p += bytes)
        vka_dequantize_block(dtype, p, out + b * BLOCK);
    return VKATTN_SUCCESS;
}

vkattn_result vka_ref_quantize_rows(vkattn_dtype dtype, float *x, size_t n, uint32_t d, char *error,
                                    size_t error_size)
{
    const uint32_t r = (d + 31) / 32 * 32;
    float *row = malloc((size_t)r * sizeof(float));
    void *blocks = malloc(vkattn_dtype_row_bytes(dtype, r) + 1);
    vkattn_result res = row && blocks ? VKATTN_SUCCESS : VKATTN_ERROR_OUT_OF_HOST_MEMORY;
    if (res != VKATTN_SUCCESS)
        vka_error_format(error, error_size, "cannot allocate a quantized %s row",
                         vkattn_dtype_name(dtype));
    for (size_t at = 0; at + d <= n && res == VKATTN_SUCCESS; at += d) {
        memcpy(row, x + at, (size_t)d * sizeof(float));
        memset(row + d, 0, (size_t)(r - d) * sizeof(float));
        res = vkattn_ref_quantize(dtype, row, r, blocks, error, error_size);
        if (res == VKATTN_SUCCESS)
            res = vkattn_ref_dequantize(dtype, blocks, r, row, error, error_size);
        if (res == VKATTN_SUCCESS)
            memcpy(x + at, row, (size_t)d * sizeof(float));
    }
    free(row);
    free(blocks);
    return res;
}
