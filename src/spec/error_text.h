/* Error handling that needs no context: the context-free validators (shape
 * checks, desc rules, the CPU reference) format their messages into a buffer
 * the caller owns; and the one way every layer propagates a failure. */
#ifndef VKA_ERROR_TEXT_H
#define VKA_ERROR_TEXT_H

#include "vkattn.h"

#include <stddef.h>

/* snprintf into `error` (of `error_size` bytes); does nothing when error is
 * NULL or error_size is 0. Always NUL-terminates. */
void vka_error_format(char *error, size_t error_size, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

/* `VKA_TRY(expr);` returns expr's result from the calling function unless it
 * is VKATTN_SUCCESS. */
#define VKA_TRY(expr)                      \
    do {                                   \
        vkattn_result vka_try_r_ = (expr); \
        if (vka_try_r_ != VKATTN_SUCCESS)  \
            return vka_try_r_;             \
    } while (0)

#endif
