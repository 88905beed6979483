/* Error text for the context-free validators (shape checks, MHA config, CPU
 * reference): they have no context to log into, so they format into a buffer
 * the caller owns. Also the dtype helpers every validator's messages use. */
#ifndef VKA_ERROR_TEXT_H
#define VKA_ERROR_TEXT_H

#include "vkattn.h"

#include <stdbool.h>
#include <stddef.h>

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

/* snprintf into `error` (of `error_size` bytes); does nothing when error is
 * NULL or error_size is 0. Always NUL-terminates. */
void vka_error_format(char *error, size_t error_size, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

#endif
