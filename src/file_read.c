/* Whole-file reads for the context's caches (pipeline cache, tuning data). */
#include "internal.h"

#include <stdio.h>
#include <string.h>

/* Reads in growing chunks until end of file instead of trusting
 * fseek/ftell: on Linux a directory opens with fopen and reports a size
 * near LONG_MAX, and pipes report none; fread fails on the first and
 * reads the second to its end. */
bool vkattn_read_file(vkattn_context *ctx, const char *path, size_t max_size, void **data, size_t *size)
{
    *data = NULL;
    *size = 0;
    FILE *f = fopen(path, "rb");
    if (!f)
        return false;
    unsigned char *buf = NULL;
    size_t cap = 0, n = 0;
    bool ok = true;
    for (;;) {
        if (n == cap) {
            if (cap > max_size) { /* one byte past the limit was read: too big */
                ok = false;
                break;
            }
            size_t grown = cap ? 2 * cap : 64u * 1024u;
            if (grown > max_size + 1)
                grown = max_size + 1;
            unsigned char *next = vkattn_alloc(ctx, grown);
            if (!next) {
                ok = false;
                break;
            }
            if (n)
                memcpy(next, buf, n);
            vkattn_free(ctx, buf);
            buf = next;
            cap = grown;
        }
        size_t got = fread(buf + n, 1, cap - n, f);
        n += got;
        if (got == 0 || n < cap) {
            if (ferror(f) || n > max_size)
                ok = false;
            else if (!feof(f))
                continue;
            break;
        }
    }
    fclose(f);
    if (!ok) {
        vkattn_free(ctx, buf);
        return false;
    }
    if (!buf && !(buf = vkattn_alloc(ctx, 1))) /* an empty file: still a buffer */
        return false;
    *data = buf;
    *size = n;
    return true;
}
