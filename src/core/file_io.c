/* Whole-file reads and writes for the context's caches (pipeline cache,
 * tuning data). */
#include "core/file_io.h"

#include "core/host.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* Opens a regular file for reading without blocking on a FIFO or a device
 * (O_NONBLOCK while opening, then fstat). -1: missing; -2: not a regular
 * file or not readable. */
static int open_regular(const char *path)
{
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (fd < 0)
        return errno == ENOENT || errno == ENOTDIR ? -1 : -2;
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) ||
        fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK) != 0) {
        close(fd);
        return -2;
    }
    return fd;
}

/* Reads in growing chunks until read() returns 0 instead of trusting the
 * size fstat gives (a file may grow or shrink meanwhile). */
vka_file_read vka_read_file(vkattn_context *ctx, const char *path, size_t max_size, void **data,
                            size_t *size)
{
    *data = NULL;
    *size = 0;
    int fd = open_regular(path);
    if (fd == -1)
        return VKA_FILE_MISSING;
    if (fd < 0)
        return VKA_FILE_UNREADABLE;
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
        ssize_t got = read(fd, buf + n, cap - n);
        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0) {
            ok = got == 0;
            break;
        }
        n += (size_t)got;
    }
    close(fd);
    ok = ok && n <= max_size;
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

static bool write_all(int fd, const void *data, size_t size)
{
    const char *p = data;
    while (size) {
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

/* A new file beside `path` that did not exist before: O_CREAT | O_EXCL |
 * O_NOFOLLOW on a name nobody can guess in advance, so a file or link
 * planted there is never opened (a clash just takes another name). */
static int create_temporary(const char *path, char *tmp, size_t tmp_size)
{
    const char *slash = strrchr(path, '/');
    int dir_len = slash ? (int)(slash - path + 1) : 0;
    const char *base = slash ? slash + 1 : path;
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    uint64_t seed = (uint64_t)now.tv_nsec ^ ((uint64_t)now.tv_sec << 30) ^ (uint64_t)getpid() ^
                    (uint64_t)(uintptr_t)tmp;
    for (int attempt = 0; attempt < 100; attempt++) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        int n = snprintf(tmp, tmp_size, "%.*s.%s.%016llx.tmp", dir_len, path, base,
                         (unsigned long long)(seed >> 1));
        if (n < 0 || (size_t)n >= tmp_size) {
            errno = ENAMETOOLONG;
            return -1;
        }
        int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
        if (fd >= 0 || errno != EEXIST)
            return fd;
    }
    return -1;
}

/* strerror, thread-safe. */
static const char *error_text(int err, char *buf, size_t size)
{
    if (strerror_r(err, buf, size) != 0)
        snprintf(buf, size, "error %d", err);
    return buf;
}

/* For messages: paths longer than this are shortened in the middle, so the
 * reason after them is never cut off. */
#define PATH_SHOWN 200

static const char *shown(const char *path, char *buf, size_t size)
{
    size_t n = strlen(path);
    if (n <= PATH_SHOWN)
        return path;
    snprintf(buf, size, "%.*s...%s", PATH_SHOWN / 2, path, path + n - PATH_SHOWN / 2);
    return buf;
}

vkattn_result vka_write_file(vkattn_context *ctx, const char *path, const void *data, size_t size,
                             const char *what)
{
    char name[PATH_SHOWN + 8], reason[128];
    struct stat st;
    if (lstat(path, &st) == 0 && !S_ISREG(st.st_mode) && !S_ISLNK(st.st_mode)) {
        /* not a file to replace: a terminal, /dev/null or a pipe is written
         * to as it is; anything else is refused */
        int fd = S_ISCHR(st.st_mode) || S_ISFIFO(st.st_mode)
                     ? open(path, O_WRONLY | O_NOCTTY | O_CLOEXEC)
                     : -1;
        bool ok = fd >= 0 && write_all(fd, data, size);
        if (fd >= 0 && close(fd) != 0)
            ok = false;
        if (ok)
            return VKATTN_SUCCESS;
        return vka_fail(ctx, VKATTN_ERROR_IO, "cannot write %s to \"%s\": %s", what,
                        shown(path, name, sizeof name),
                        fd < 0 && !S_ISCHR(st.st_mode) && !S_ISFIFO(st.st_mode)
                            ? "it is not a regular file"
                            : error_text(errno, reason, sizeof reason));
    }
    /* Beside the target, then renamed over it: readers never see half a
     * file, and a failure leaves the old one. A link at `path` is replaced,
     * never written through. */
    char tmp[4096];
    int fd = create_temporary(path, tmp, sizeof tmp);
    int err = errno;
    bool ok = fd >= 0 && write_all(fd, data, size);
    if (fd >= 0 && !ok)
        err = errno;
    if (fd >= 0 && close(fd) != 0 && ok) {
        ok = false;
        err = errno;
    }
    if (ok && rename(tmp, path) != 0) {
        ok = false;
        err = errno;
    }
    if (!ok && fd >= 0)
        unlink(tmp);
    if (ok)
        return VKATTN_SUCCESS;
    return vka_fail(ctx, VKATTN_ERROR_IO, "cannot write %s \"%s\": %s", what,
                    shown(path, name, sizeof name), error_text(err, reason, sizeof reason));
}

vkattn_result vka_save_data(vkattn_context *ctx, const char *fn, const char *path,
                            vka_data_fn data_fn, const char *what)
{
    if (!ctx)
        return VKATTN_ERROR_INVALID_ARGUMENT;
    if (!path || !*path)
        return vka_fail(ctx, VKATTN_ERROR_INVALID_ARGUMENT, "%s: path is empty", fn);
    size_t size = 0;
    vkattn_result r = data_fn(ctx, NULL, &size);
    if (r != VKATTN_SUCCESS)
        return r;
    void *data = vka_alloc(ctx, size ? size : 1);
    if (!data)
        return vka_fail(ctx, VKATTN_ERROR_OUT_OF_HOST_MEMORY, "%s: out of host memory (%zu bytes)",
                        fn, size);
    r = data_fn(ctx, data, &size);
    if (r == VKATTN_SUCCESS)
        r = vka_write_file(ctx, path, data, size, what);
    vka_free(ctx, data);
    return r;
}
