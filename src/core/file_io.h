/* Whole-file reads and writes (file_io.c) for the context's caches. */
#ifndef VKA_FILE_IO_H
#define VKA_FILE_IO_H

#include "core/context.h"

#include <stddef.h>

/* The whole of a file, at most max_size bytes, into *data (from
 * vka_alloc, to vka_free; an empty file gives a 1-byte buffer and
 * *size 0). MISSING: it does not open; UNREADABLE: it opens but is not a
 * readable file (a directory), is larger, or memory ran out. *data is NULL
 * unless OK. */
typedef enum vka_file_read { VKA_FILE_OK, VKA_FILE_MISSING, VKA_FILE_UNREADABLE } vka_file_read;
vka_file_read vka_read_file(vkattn_context *ctx, const char *path, size_t max_size, void **data,
                                  size_t *size);
/* Writes `size` bytes to `path` through `path`.tmp renamed into place (no
 * half-written file, the temporary removed on failure). false: not written. */
bool vka_write_file(const char *path, const void *data, size_t size);

#endif
