/* Error text for the context-free validators. */
#include "spec/error_text.h"

#include <stdarg.h>
#include <stdio.h>

const char *vka_dtype_text(vkattn_dtype dtype, char buf[VKA_DTYPE_TEXT])
{
    const char *name = vkattn_dtype_name(dtype);
    if (name)
        return name;
    snprintf(buf, VKA_DTYPE_TEXT, "%d (not a vkattn_dtype)", (int)dtype);
    return buf;
}

void vka_error_format(char *error, size_t error_size, const char *fmt, ...)
{
    if (!error || !error_size)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(error, error_size, fmt, ap);
    va_end(ap);
}
