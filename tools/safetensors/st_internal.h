/* Pieces shared by the files of the .safetensors reader. */
#ifndef VKATTN_ST_INTERNAL_H
#define VKATTN_ST_INTERNAL_H

#include "safetensors.h"

/* Formats "<path>: <message>" into `error` (may be NULL); returns -1. */
int st_fail(char *error, size_t error_size, const char *path, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;
/* Frees the tensor index of `f` (names included), not the mapping. */
void st_free_index(st_file *f);

#endif
