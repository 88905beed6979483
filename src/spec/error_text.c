/* Error text for the context-free validators. */
#include "spec/error_text.h"

#include <stdarg.h>
#include <stdio.h>

void vka_error_format(char *error, size_t error_size, const char *fmt, ...)
{
    if (!error || !error_size)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(error, error_size, fmt, ap);
    va_end(ap);
}
