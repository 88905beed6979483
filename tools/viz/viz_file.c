/* Pictures to files, whole or not at all: the bytes go to a fresh
 * temporary beside the path (a name nobody can guess, created with O_EXCL
 * and O_NOFOLLOW, so nothing planted there is ever written through), which
 * is renamed over the path once everything is written. */
#include "viz_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* A new file beside `path`; `tmp` has room for strlen(path) + 32 bytes. */
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

static bool write_all(int fd, const unsigned char *data, size_t size)
{
    while (size) {
        ssize_t n = write(fd, data, size);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return false;
        data += n;
        size -= (size_t)n;
    }
    return true;
}

vkattn_viz_result vkattn_viz_save(const char *path, const void *data, size_t size, char *err,
                                  size_t err_size)
{
    if (!path || !*path)
        return viz_fail(err, err_size, VKATTN_VIZ_ERROR_ARGUMENT, "path is %s",
                        path ? "empty" : "NULL");
    if (!data && size)
        return viz_fail(err, err_size, VKATTN_VIZ_ERROR_ARGUMENT, "data is NULL for %zu bytes",
                        size);
    struct stat st; /* stat, not lstat: a link is replaced, a link to a directory refused */
    if (stat(path, &st) == 0 && !S_ISREG(st.st_mode))
        return viz_fail(err, err_size, VKATTN_VIZ_ERROR_IO,
                        "path \"%s\": %s, not a regular file; not writing it", path,
                        S_ISDIR(st.st_mode) ? "a directory" : "a special file");
    char *tmp = malloc(strlen(path) + 32);
    if (!tmp)
        return viz_fail(err, err_size, VKATTN_VIZ_ERROR_MEMORY, "out of memory");
    int fd = create_temporary(path, tmp);
    if (fd < 0) {
        int e = errno;
        free(tmp);
        return viz_fail(err, err_size, VKATTN_VIZ_ERROR_IO,
                        "path \"%s\": cannot create a file beside it: %s", path, strerror(e));
    }
    bool ok = write_all(fd, data, size);
    int e = errno;
    if (close(fd) != 0 && ok) {
        ok = false;
        e = errno;
    }
    const char *what = "write failed";
    if (ok && rename(tmp, path) != 0) {
        ok = false;
        e = errno;
        what = "cannot rename the written file into place";
    }
    if (!ok)
        unlink(tmp);
    free(tmp);
    return ok ? VKATTN_VIZ_SUCCESS
              : viz_fail(err, err_size, VKATTN_VIZ_ERROR_IO, "path \"%s\": %s: %s", path, what,
                         strerror(e));
}

vkattn_viz_result vkattn_viz_write(const vkattn_viz_desc *desc, const char *path, char *err,
                                   size_t err_size)
{
    vkattn_viz_format format;
    vkattn_viz_result r = vkattn_viz_format_of(path, &format, err, err_size);
    void *data = NULL;
    size_t size = 0;
    if (r == VKATTN_VIZ_SUCCESS)
        r = vkattn_viz_render(desc, format, &data, &size, err, err_size);
    if (r == VKATTN_VIZ_SUCCESS)
        r = vkattn_viz_save(path, data, size, err, err_size);
    vkattn_viz_free(data);
    return r;
}
