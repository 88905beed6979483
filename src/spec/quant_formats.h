/* llama.cpp's other KV cache block formats (quant_formats.c): the CPU side
 * of issue 29's q4_1, q5_0, q5_1 and iq4_nl caches, before they become
 * dtypes of their own (the kernels that read and write them come next). */
#ifndef VKA_QUANT_FORMATS_H
#define VKA_QUANT_FORMATS_H

#include "vkattn.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum vka_block_format {
    VKA_BLOCK_Q4_1,
    VKA_BLOCK_Q5_0,
    VKA_BLOCK_Q5_1,
    VKA_BLOCK_IQ4_NL,
} vka_block_format;

/* Bytes of one block of 32 values: 20, 22, 24, 18. */
size_t vka_block_format_bytes(vka_block_format format);

/* 32 finite values into one block at `out`, as ggml's reference quantizer
 * of the format. */
void vka_quantize_block_format(vka_block_format format, const float *x, uint8_t *out);

/* One block back to its 32 values. */
void vka_dequantize_block_format(vka_block_format format, const uint8_t *in, float *y);

#endif
