/* Data types: what each takes (the public vkattn_dtype_size / _name and the
 * host f16 conversions are defined in dtype.c) and how messages name them. */
#ifndef VKA_DTYPE_H
#define VKA_DTYPE_H

#include "vkattn.h"

#include <stdbool.h>

/* Bytes vka_dtype_text may write. */
#define VKA_DTYPE_TEXT 40

/* A dtype for messages: its name ("f16"), or, for a value that is no
 * vkattn_dtype, "77 (not a vkattn_dtype)" written into `buf`. */
const char *vka_dtype_text(vkattn_dtype dtype, char buf[VKA_DTYPE_TEXT]);

/* f32 or f16: what activations, weights, K/V and layers take. */
static inline bool vka_dtype_is_float(vkattn_dtype dtype)
{
    return dtype == VKATTN_DTYPE_F32 || dtype == VKATTN_DTYPE_F16;
}

/* q8_0, q4_0, q4_1, q5_0, q5_1, iq4_nl: ggml's blocks of VKA_QUANT_BLOCK
 * values (layouts: vkattn_dtype). */
#define VKA_QUANT_BLOCK 32u
static inline bool vka_dtype_is_quantized(vkattn_dtype dtype)
{
    return dtype == VKATTN_DTYPE_Q8_0 || dtype == VKATTN_DTYPE_Q4_0 || dtype == VKATTN_DTYPE_Q4_1 ||
           dtype == VKATTN_DTYPE_Q5_0 || dtype == VKATTN_DTYPE_Q5_1 || dtype == VKATTN_DTYPE_IQ4_NL;
}
/* Bytes of one block: 34 (q8_0), 18 (q4_0, iq4_nl), 20 (q4_1), 22 (q5_0),
 * 24 (q5_1); 0 for the others. */
static inline uint32_t vka_quant_block_bytes(vkattn_dtype dtype)
{
    switch (dtype) {
    case VKATTN_DTYPE_Q8_0:
        return 34u;
    case VKATTN_DTYPE_Q4_0:
    case VKATTN_DTYPE_IQ4_NL:
        return 18u;
    case VKATTN_DTYPE_Q4_1:
        return 20u;
    case VKATTN_DTYPE_Q5_0:
        return 22u;
    case VKATTN_DTYPE_Q5_1:
        return 24u;
    default:
        return 0u;
    }
}
/* The quantized dtypes in the order of the kernel tables (q8_0 0, q4_0 1,
 * q4_1 2, q5_0 3, q5_1 4, iq4_nl 5); VKA_QUANT_FORMATS of them. */
#define VKA_QUANT_FORMATS 6
static inline int vka_quant_index(vkattn_dtype dtype)
{
    return dtype == VKATTN_DTYPE_Q8_0 ? 0 : dtype == VKATTN_DTYPE_Q4_0 ? 1 : (int)dtype - 5;
}
/* Whether a block is 2 bytes more than whole 32-bit words (34, 18, 22
 * bytes): blocks then share words with their neighbours. */
static inline bool vka_quant_blocks_share_words(vkattn_dtype dtype)
{
    return vka_quant_block_bytes(dtype) % 4u == 2u;
}

/* Value i of host data in f32, f16 or bf16 (the bits of the 16-bit ones),
 * as f32: exact. */
static inline float vka_widen(const void *src, vkattn_dtype dtype, uint64_t i)
{
    return dtype == VKATTN_DTYPE_F32   ? ((const float *)src)[i]
           : dtype == VKATTN_DTYPE_F16 ? vkattn_f16_to_f32(((const uint16_t *)src)[i])
                                       : vkattn_bf16_to_f32(((const uint16_t *)src)[i]);
}

#endif
