/* NumPy .npy writing (see npy.h): the same bytes as numpy.save. A regular
 * file (or a new one) is written beside its path under a fresh name and
 * renamed into place, so readers never see half a file and no link planted
 * at a predictable name is ever followed; a terminal, /dev/null or a FIFO is
 * written as it is. */
#include "npy_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* The whole preamble numpy.save writes: magic, version 1.0, length, dict,
 * growth room, space padding to 64 bytes, newline. Returns its length, or 0
 * when it does not fit `size`. */
static size_t build_header(npy_dtype dtype, uint32_t rank, const int64_t *shape, char *buf,
                           size_t size)
{
    char shape_buf[256], dict[512];
    npy_shape_text(rank, shape, shape_buf, sizeof shape_buf);
    int n = snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': False, 'shape': %s, }",
                     npy_dtype_descr(dtype), shape_buf);
    if (n < 0 || (size_t)n >= sizeof dict)
        return 0;
    size_t len = (size_t)n;
    if (rank > 0) {
        char first[24];
        size_t digits = (size_t)snprintf(first, sizeof first, "%lld", (long long)shape[0]);
        size_t growth = digits < NPY_GROWTH_DIGITS ? NPY_GROWTH_DIGITS - digits : 0;
        if (len + growth >= sizeof dict)
            return 0;
        memset(dict + len, ' ', growth);
        len += growth;
    }
    size_t hlen = len + 1; /* + '\n' */
    /* magic, 2 version bytes, 2 length bytes; numpy pads a full 64 if aligned */
    size_t pad = NPY_ALIGN - (NPY_MAGIC_LEN + 4 + hlen) % NPY_ALIGN;
    size_t total = NPY_MAGIC_LEN + 4 + hlen + pad;
    if (total > size || hlen + pad > 0xffff)
        return 0;
    memcpy(buf, NPY_MAGIC, NPY_MAGIC_LEN);
    buf[6] = 1;
    buf[7] = 0;
    buf[8] = (char)((hlen + pad) & 0xff);
    buf[9] = (char)((hlen + pad) >> 8);
    memcpy(buf + 10, dict, len);
    memset(buf + 10 + len, ' ', pad);
    buf[total - 1] = '\n';
    return total;
}

static bool write_all(int fd, const void *data, size_t size)
{
    const char *p = data;
    while (size > 0) {
        ssize_t n = write(fd, p, size);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return false;
        p += n;
        size -= (size_t)n;
    }
    return true;
}

static bool write_data(int fd, npy_dtype dtype, const void *data, size_t nbytes)
{
    if (dtype != NPY_BOOL)
        return write_all(fd, data, nbytes);
    /* numpy bools are exactly 0 or 1. */
    const uint8_t *src = data;
    uint8_t chunk[4096];
    for (size_t done = 0; done < nbytes;) {
        size_t n = nbytes - done < sizeof chunk ? nbytes - done : sizeof chunk;
        for (size_t i = 0; i < n; i++)
            chunk[i] = src[done + i] != 0;
        if (!write_all(fd, chunk, n))
            return false;
        done += n;
    }
    return true;
}

/* A new file beside `path` that did not exist before: O_CREAT | O_EXCL |
 * O_NOFOLLOW under a name nobody can guess in advance, so a file or link
 * planted there is never opened (a clash just takes another name). `tmp`
 * has room for strlen(path) + 32 bytes. */
static int create_temporary(const char *path, char *tmp)
{
    const char *slash = strrchr(path, '/');
    int dir_len = slash ? (int)(slash - path + 1) : 0;
    const char *base = slash ? slash + 1 : path;
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    uint64_t seed = (uint64_t)now.tv_nsec ^ ((uint64_t)now.tv_sec << 30) ^
                    ((uint64_t)getpid() << 16) ^ (uint64_t)(uintptr_t)tmp;
    for (int attempt = 0; attempt < 100; attempt++) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        sprintf(tmp, "%.*s.%s.%016llx.tmp", dir_len, path, base, (unsigned long long)(seed >> 1));
        int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
        if (fd >= 0 || errno != EEXIST)
            return fd;
    }
    return -1;
}

/* Writes the chunks to `fd` in order (with `bools`, the last one's bytes as
 * 0/1), then closes it; false with the errno of the first failure in *e. */
static bool write_and_close(int fd, const npy_chunk *chunks, size_t count, bool bools, int *e)
{
    bool ok = true;
    for (size_t k = 0; ok && k < count; k++)
        ok = bools && k + 1 == count ? write_data(fd, NPY_BOOL, chunks[k].data, chunks[k].size)
                                     : write_all(fd, chunks[k].data, chunks[k].size);
    *e = errno;
    if (close(fd) != 0 && ok) {
        ok = false;
        *e = errno;
    }
    return ok;
}

/* The chunks into a fresh temporary renamed over `path` (a link at `path`
 * is replaced, never written through); on failure the temporary is removed
 * and `path` left as it was. */
static int write_replacing(const char *path, const npy_chunk *chunks, size_t count, bool bools,
                           char *error, size_t error_size)
{
    char *tmp = malloc(strlen(path) + 32);
    if (!tmp)
        return npy_fail(error, error_size, path, "out of memory");
    int fd = create_temporary(path, tmp);
    if (fd < 0) {
        int e = errno;
        free(tmp);
        return npy_fail(error, error_size, path, "cannot create a file beside it: %s", strerror(e));
    }
    int e = 0;
    bool ok = write_and_close(fd, chunks, count, bools, &e);
    const char *what = "write failed";
    if (ok && rename(tmp, path) != 0) {
        ok = false;
        e = errno;
        what = "cannot rename the written file into place";
    }
    if (!ok)
        unlink(tmp);
    free(tmp);
    return ok ? 0 : npy_fail(error, error_size, path, "%s: %s", what, strerror(e));
}

/* A character device or FIFO (what `path` resolves to): written as it is,
 * never created or replaced. */
static int write_in_place(const char *path, const npy_chunk *chunks, size_t count, bool bools,
                          char *error, size_t error_size)
{
    int fd = open(path, O_WRONLY | O_NOCTTY | O_CLOEXEC);
    if (fd < 0)
        return npy_fail(error, error_size, path, "cannot open for writing: %s", strerror(errno));
    int e = 0;
    bool ok = write_and_close(fd, chunks, count, bools, &e);
    return ok ? 0 : npy_fail(error, error_size, path, "write failed: %s", strerror(e));
}

/* npy_write_file, the last chunk written as 0/1 bytes with `bools`. */
static int write_file(const char *path, const npy_chunk *chunks, size_t count, bool bools,
                      char *error, size_t error_size)
{
    if (!path)
        return npy_fail(error, error_size, path, "no path given");
    /* stat, not lstat: /dev/stdout is a link to a pipe or terminal */
    struct stat st;
    if (stat(path, &st) != 0 || S_ISREG(st.st_mode))
        return write_replacing(path, chunks, count, bools, error, error_size);
    if (S_ISCHR(st.st_mode) || S_ISFIFO(st.st_mode))
        return write_in_place(path, chunks, count, bools, error, error_size);
    return npy_fail(error, error_size, path,
                    "not a regular file (%s): cannot rename a written file over it; not writing "
                    "it",
                    S_ISDIR(st.st_mode) ? "a directory" : "a socket or block device");
}

int npy_write_file(const char *path, const npy_chunk *chunks, size_t count, char *error,
                   size_t error_size)
{
    return write_file(path, chunks, count, false, error, error_size);
}

int npy_write(const char *path, npy_dtype dtype, uint32_t rank, const int64_t *shape,
              const void *data, char *error, size_t error_size)
{
    if (!path)
        return npy_fail(error, error_size, path, "no path given");
    if (!npy_dtype_descr(dtype))
        return npy_fail(error, error_size, path, "dtype %d is not an npy_dtype", (int)dtype);
    if (rank > NPY_MAX_RANK)
        return npy_fail(error, error_size, path, "rank %u is over the limit of %d", rank,
                        NPY_MAX_RANK);
    if (rank > 0 && !shape)
        return npy_fail(error, error_size, path, "no shape given for rank %u", rank);
    for (uint32_t i = 0; i < rank; i++)
        if (shape[i] < 0)
            return npy_fail(error, error_size, path, "shape[%u] is %lld: dimensions must be >= 0",
                            i, (long long)shape[i]);
    size_t nbytes;
    if (!npy_array_bytes(rank, shape, npy_dtype_size(dtype), &nbytes))
        return npy_fail(error, error_size, path, "the array's size overflows");
    if (nbytes && !data)
        return npy_fail(error, error_size, path, "no data given for %zu bytes", nbytes);
    char header[1024];
    size_t header_size = build_header(dtype, rank, shape, header, sizeof header);
    if (!header_size)
        return npy_fail(error, error_size, path, "header does not fit format 1.0");
    const npy_chunk chunks[2] = {{header, header_size}, {data, nbytes}};
    return write_file(path, chunks, 2, dtype == NPY_BOOL, error, error_size);
}
