/* Opening a .safetensors file: mapped read-only, so a model of gigabytes
 * costs only the pages of the tensors that are read. */
#include "st_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

int st_open(const char *path, st_file *out, char *error, size_t error_size)
{
    *out = (st_file){0};
    if (!path)
        return st_fail(error, error_size, path, "no path given");
    /* O_NONBLOCK: a FIFO must not block the open before fstat refuses it */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (fd < 0)
        return st_fail(error, error_size, path, "cannot open: %s", strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return st_fail(error, error_size, path, "not a regular file");
    }
    size_t size = (size_t)st.st_size;
    void *map = NULL;
    if (size > 0) {
        map = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (map == MAP_FAILED) {
            int e = errno;
            close(fd);
            return st_fail(error, error_size, path, "cannot map %zu bytes: %s", size, strerror(e));
        }
    }
    close(fd);
    if (st_parse(map ? map : "", size, path, out, error, error_size) != 0) {
        if (map)
            munmap(map, size);
        return -1;
    }
    out->map = map;
    out->map_size = size;
    return 0;
}

void st_close(st_file *f)
{
    if (!f)
        return;
    st_free_index(f);
    if (f->map)
        munmap(f->map, f->map_size);
    *f = (st_file){0};
}
