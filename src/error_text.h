/* Error text for the context-free validators (shape checks, MHA config, CPU
 * reference): they have no context to log into, so they format into a buffer
 * the caller owns. */
#ifndef VKATTN_ERROR_TEXT_H
#define VKATTN_ERROR_TEXT_H

#include <stddef.h>

/* snprintf into `error` (of `error_size` bytes); does nothing when error is
 * NULL or error_size is 0. Always NUL-terminates. */
void vkattn_error_format(char *error, size_t error_size, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

#endif
