/* Whole-file reads and writes for the context's caches (pipeline cache,
 * tuning data). */
#include "core/file_io.h"

#include "core/host.h"

#include <stdio.h>
#include <string.h>

/* Reads in growing chunks until fread comes up short (end of file or an
 * error) instead of trusting fseek/ftell: on Linux a directory opens with
 * fopen and reports a size near LONG_MAX (fread then fails), and pipes
 * report no size at all. */
vka_file_read vka_read_file(vkattn_context *ctx, const char *path, size_t max_size, void **data,
                                  size_t *size)
{
    *data = NULL;
    *size = 0;
    FILE *f = fopen(path, "rb");
    if (!f)
        return VKA_FILE_MISSING;
    unsigned char *buf = NULL;
    size_t cap = 0, n = 0;
    bool ok = true;
    for (;;) {
        if (n == cap) {
            /* one byte past max_size is room enough to see a file too big */
            size_t grown = cap ? 2 * cap : 64u * 1024u;
            if (grown > max_size + 1)
                grown = max_size + 1;
            unsigned char *next = cap > max_size ? NULL : vka_alloc(ctx, grown);
            if (!next) {
                ok = false;
                break;
            }
            if (n)
                memcpy(next, buf, n);
            vka_free(ctx, buf);
            buf = next;
            cap = grown;
        }
        size_t want = cap - n, got = fread(buf + n, 1, want, f);
        n += got;
        if (got < want) /* end of file or an error */
            break;
    }
    ok = ok && !ferror(f) && n <= max_size;
    fclose(f);
    if (ok && !buf)
        ok = (buf = vka_alloc(ctx, 1)) != NULL; /* an empty file: still a buffer */
    if (!ok) {
        vka_free(ctx, buf);
        return VKA_FILE_UNREADABLE;
    }
    *data = buf;
    *size = n;
    return VKA_FILE_OK;
}

bool vka_write_file(const char *path, const void *data, size_t size)
{
    /* Beside the target, then renamed over it: readers never see half a
     * file, and a failure leaves the old one. */
    char tmp[4096];
    int n = snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = n > 0 && (size_t)n < sizeof tmp ? fopen(tmp, "wb") : NULL;
    bool ok = f && fwrite(data, 1, size, f) == size;
    if (f && fclose(f) != 0)
        ok = false;
    if (ok && rename(tmp, path) != 0)
        ok = false;
    if (!ok && f)
        remove(tmp);
    return ok;
}
