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

#endif
