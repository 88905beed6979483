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

/* q8_0 or q4_0: ggml's blocks of VKA_QUANT_BLOCK values. */
#define VKA_QUANT_BLOCK 32u
static inline bool vka_dtype_is_quantized(vkattn_dtype dtype)
{
    return dtype == VKATTN_DTYPE_Q8_0 || dtype == VKATTN_DTYPE_Q4_0;
}
/* Bytes of one block: 34 (q8_0: an f16 scale, 32 int8), 18 (q4_0: an f16
 * scale, 16 bytes of nibbles); 0 for the others. */
static inline uint32_t vka_quant_block_bytes(vkattn_dtype dtype)
{
    return dtype == VKATTN_DTYPE_Q8_0 ? 34u : dtype == VKATTN_DTYPE_Q4_0 ? 18u : 0u;
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
