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

#endif
