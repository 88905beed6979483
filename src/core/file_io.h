/* Whole-file reads and writes (file_io.c) for the context's caches. */
#ifndef VKA_FILE_IO_H
#define VKA_FILE_IO_H

#include "core/context.h"

#include <stddef.h>

/* The whole of a file, at most max_size bytes, into *data (from
 * vka_alloc, to vka_free; an empty file gives a 1-byte buffer and
 * *size 0). MISSING: it does not exist; UNREADABLE: it is not a regular
 * file (a directory, a FIFO - never waited on), cannot be read, is larger,
 * or memory ran out. *data is NULL unless OK. */
typedef enum vka_file_read { VKA_FILE_OK, VKA_FILE_MISSING, VKA_FILE_UNREADABLE } vka_file_read;
vka_file_read vka_read_file(vkattn_context *ctx, const char *path, size_t max_size, void **data,
                            size_t *size);
/* Writes `size` bytes to `path`. A regular file (or a missing path, or a
 * link, which is replaced) is written beside it under a fresh name -
 * created with O_EXCL | O_NOFOLLOW, so nothing planted there is followed -
 * and renamed into place: no half-written file, and the temporary is removed
 * on failure. A terminal, a pipe or a device like /dev/null is written to
 * directly; a directory or other special file is refused. On failure the
 * message names `what` ("tuning data"), the path and the reason. */
vkattn_result vka_write_file(vkattn_context *ctx, const char *path, const void *data, size_t size,
                             const char *what);

/* The save-to-file form of a context's bytes (pipeline cache, tuning data):
 * `data_fn` is the public query-then-fill getter of those bytes; `fn` names
 * the entry point in messages, `what` the bytes. */
typedef vkattn_result (*vka_data_fn)(vkattn_context *ctx, void *data, size_t *size);
vkattn_result vka_save_data(vkattn_context *ctx, const char *fn, const char *path,
                            vka_data_fn data_fn, const char *what);

#endif
