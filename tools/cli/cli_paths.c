/* Output paths checked against each other and against the inputs before any
 * work: two outputs naming one file would leave only the last one written,
 * and an output naming an input would replace the user's data. */
/* realpath is X/Open in glibc, beyond the _POSIX_C_SOURCE the target sets */
#define _XOPEN_SOURCE 700

#include "cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* What a path names: an existing file by device and inode (so hard links,
 * symlinks and other spellings compare equal), a file still to be created
 * by its directory's real path plus its final name. */
typedef struct file_id {
    bool exists;
    dev_t dev;
    ino_t ino;
    char *name; /* missing files only; malloc'd */
} file_id;

static file_id identify(const char *path)
{
    file_id id = {0};
    struct stat st;
    if (stat(path, &st) == 0) {
        id.exists = true;
        id.dev = st.st_dev;
        id.ino = st.st_ino;
        return id;
    }
    const char *slash = strrchr(path, '/');
    const char *base = slash ? slash + 1 : path;
    size_t dir_len = !slash ? 0 : slash == path ? 1 : (size_t)(slash - path);
    char *dir = slash ? malloc(dir_len + 1) : NULL;
    if (dir) {
        memcpy(dir, path, dir_len);
        dir[dir_len] = '\0';
    }
    char *real = realpath(slash ? (dir ? dir : "") : ".", NULL);
    free(dir);
    /* an unresolvable directory: the path as given (writing it fails anyway) */
    const char *parent = real ? real : "";
    size_t size = strlen(parent) + strlen(real ? base : path) + 2;
    id.name = malloc(size);
    if (id.name)
        snprintf(id.name, size, "%s%s%s", parent, real ? "/" : "", real ? base : path);
    free(real);
    return id;
}

static bool same_file(const file_id *a, const file_id *b)
{
    if (a->exists || b->exists)
        return a->exists && b->exists && a->dev == b->dev && a->ino == b->ino;
    return a->name && b->name && strcmp(a->name, b->name) == 0;
}

int cli_check_path_collisions(const char *command, const cli_path_use *uses, int n)
{
    file_id ids[CLI_MAX_PATH_USES];
    if (n > CLI_MAX_PATH_USES)
        n = CLI_MAX_PATH_USES;
    for (int i = 0; i < n; i++)
        ids[i] = uses[i].path ? identify(uses[i].path) : (file_id){0};
    int status = 0;
    for (int i = 0; i < n && !status; i++)
        for (int k = i + 1; k < n && !status; k++) {
            const cli_path_use *a = &uses[i], *b = &uses[k];
            if (!a->path || !b->path || !(a->output || b->output) || !same_file(&ids[i], &ids[k]))
                continue;
            cli_error("%s: %s \"%s\" and %s \"%s\" name the same file: %s; nothing was written",
                      command, a->option, a->path, b->option, b->path,
                      a->output && b->output ? "one output would overwrite the other"
                                             : "the output would replace the input");
            status = -1;
        }
    for (int i = 0; i < n; i++)
        free(ids[i].name);
    return status;
}
