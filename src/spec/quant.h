/* ggml's block quantizers (quant.c), shared by the reference and the
 * library (weights quantized when a layer is loaded). */
#ifndef VKA_QUANT_H
#define VKA_QUANT_H

#include "spec/dtype.h"

#include <stdint.h>

/* The largest |x| whose block scale f16 holds (q8_0: 65504 * 127; q4_0:
 * 65504 * 8). */
float vka_quant_max_abs(vkattn_dtype dtype);

/* One block of VKA_QUANT_BLOCK finite values (|x| at most
 * vka_quant_max_abs) into vka_quant_block_bytes(dtype) bytes at `out`, as
 * ggml's quantize_row_q8_0 / q4_0_ref do; dtype q8_0 or q4_0. */
void vka_quantize_block(vkattn_dtype dtype, const float *x, uint8_t *out);

#endif
