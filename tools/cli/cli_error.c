/* The CLI's one way to say what went wrong: a leaf every other file uses. */
#include "cli.h"

#include <stdarg.h>
#include <stdio.h>

void cli_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("vkattn: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}
