/* All-or-nothing output files (cli_stage.h). The temporary's name is
 * reserved and given up again when the output is added: that proves a file
 * can be created there before any work, and a command that dies (a driver
 * that crashes) leaves nothing behind. The writers then create it afresh
 * under that unguessable name, without following links. */
#include "cli_stage.h"
#include "cli.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* Room for the base name in a temporary's name: the writers add about 24
 * bytes of their own temporaries to it, and a name has at most 255. */
enum { BASE_SHOWN = 100 };

/* "<dir>/.<base>.<16 hex digits>.<tag>", the base cut to BASE_SHOWN bytes;
 * malloc'd (NULL: out of memory). */
static char *name_beside(const char *path, const char *tag, uint64_t *seed)
{
    const char *slash = strrchr(path, '/');
    int dir_len = slash ? (int)(slash - path + 1) : 0;
    const char *base = slash ? slash + 1 : path;
    size_t size = (size_t)dir_len + BASE_SHOWN + strlen(tag) + 24;
    char *name = malloc(size);
    *seed = *seed * 6364136223846793005ull + 1442695040888963407ull;
    if (name)
        snprintf(name, size, "%.*s.%.*s.%016llx.%s", dir_len, path, BASE_SHOWN, base,
                 (unsigned long long)(*seed >> 1), tag);
    return name;
}

static uint64_t fresh_seed(const void *salt)
{
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    return (uint64_t)now.tv_nsec ^ ((uint64_t)now.tv_sec << 30) ^ ((uint64_t)getpid() << 16) ^
           (uint64_t)(uintptr_t)salt;
}

/* The folder part of `path` for messages ("." when it has none). */
static void folder_of(const char *path, char *buf, size_t size)
{
    const char *slash = strrchr(path, '/');
    if (!slash)
        snprintf(buf, size, ".");
    else
        snprintf(buf, size, "%.*s", slash == path ? 1 : (int)(slash - path), path);
}

/* Why no file can be written at `path`, into `why` (empty: it can). A
 * terminal or a pipe sets *in_place. */
static void check_target(const char *path, bool *in_place, char *why, size_t size)
{
    *in_place = false;
    why[0] = '\0';
    struct stat st;
    if (!*path) {
        snprintf(why, size, "an empty path");
        return;
    }
    if (stat(path, &st) == 0) { /* stat: a link to a directory is a directory */
        if (S_ISDIR(st.st_mode))
            snprintf(why, size, "a directory, not a file");
        else if (S_ISCHR(st.st_mode) || S_ISFIFO(st.st_mode))
            *in_place = true;
        else if (!S_ISREG(st.st_mode))
            snprintf(why, size, "a socket or block device, not a file");
        return;
    }
    char folder[4096];
    folder_of(path, folder, sizeof folder);
    if (stat(folder, &st) != 0)
        snprintf(why, size, "no folder \"%s\" (%s)", folder, strerror(errno));
    else if (!S_ISDIR(st.st_mode))
        snprintf(why, size, "\"%s\" is not a folder", folder);
}

int cli_stage_add(cli_stage *s, const char *command, const char *option, const char *path)
{
    if (!path)
        return 0;
    if (s->n == CLI_MAX_STAGED) { /* a bug: a command with more outputs than room */
        cli_error("%s: %s \"%s\": more than %d outputs; nothing was written", command, option, path,
                  CLI_MAX_STAGED);
        return -1;
    }
    bool in_place;
    char why[4200];
    check_target(path, &in_place, why, sizeof why);
    if (why[0]) {
        cli_error("%s: %s \"%s\": %s; nothing was written", command, option, path, why);
        s->refused = true;
        return -1;
    }
    cli_staged_file f = {.option = option, .path = path};
    if (!in_place) {
        uint64_t seed = fresh_seed(s);
        int fd = -1, e = 0;
        for (int attempt = 0; attempt < 100 && fd < 0; attempt++) {
            free(f.temp);
            if (!(f.temp = name_beside(path, "vkattn-out", &seed))) {
                e = ENOMEM;
                break;
            }
            fd = open(f.temp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
            e = errno;
            if (fd < 0 && e != EEXIST)
                break;
        }
        if (fd < 0) {
            char folder[4096];
            folder_of(path, folder, sizeof folder);
            cli_error("%s: %s \"%s\": cannot create a file in \"%s\": %s; nothing was written",
                      command, option, path, folder, strerror(e));
            s->refused = true;
            free(f.temp);
            return -1;
        }
        close(fd);
        unlink(f.temp);
    }
    s->files[s->n++] = f;
    return 0;
}

const char *cli_stage_path(const cli_stage *s, const char *path)
{
    for (int k = 0; path && k < s->n; k++)
        if (s->files[k].path == path || strcmp(s->files[k].path, path) == 0)
            return s->files[k].temp ? s->files[k].temp : path;
    return path;
}

/* Whether `path` holds a file this command wrote (never a link or
 * anything else planted there). */
static bool written(const char *path)
{
    struct stat st;
    return path && lstat(path, &st) == 0 && S_ISREG(st.st_mode);
}

/* Every written temporary over its path; on the first that fails, -1
 * after printing, with the files placed so far marked `placed`. */
static int place_all(cli_stage *s, const char *command)
{
    uint64_t seed = fresh_seed(s);
    for (int k = 0; k < s->n; k++) {
        cli_staged_file *f = &s->files[k];
        if (!written(f->temp))
            continue; /* not asked for in this run, or written as it is */
        struct stat st;
        /* the old file kept by a second name, so that a later failure can
         * put it back; no backup where hard links are not possible */
        f->replaced = lstat(f->path, &st) == 0;
        if (f->replaced && S_ISREG(st.st_mode)) /* the new file keeps the old one's mode */
            chmod(f->temp, st.st_mode & 07777);
        if (f->replaced && (f->backup = name_beside(f->path, "vkattn-old", &seed)) &&
            linkat(AT_FDCWD, f->path, AT_FDCWD, f->backup, 0) != 0) {
            free(f->backup);
            f->backup = NULL;
        }
        if (rename(f->temp, f->path) != 0) {
            cli_error("%s: %s \"%s\": cannot rename the written file into place: %s", command,
                      f->option, f->path, strerror(errno));
            return -1;
        }
        f->placed = true;
    }
    return 0;
}

/* After a failed place_all: the files placed so far taken back. */
static void take_back(cli_stage *s, const char *command)
{
    for (int k = s->n; k-- > 0;) {
        cli_staged_file *f = &s->files[k];
        if (!f->placed)
            continue;
        if (!f->replaced) {
            unlink(f->path);
        } else if (!f->backup) {
            cli_error("%s: %s \"%s\": holds this run's result: the earlier file could not be "
                      "kept (no hard links there)",
                      command, f->option, f->path);
        } else if (rename(f->backup, f->path) == 0) {
            free(f->backup);
            f->backup = NULL;
        } else {
            cli_error("%s: %s \"%s\": the earlier file could not be put back: it is at \"%s\"",
                      command, f->option, f->path, f->backup);
            free(f->backup); /* kept on disk */
            f->backup = NULL;
        }
    }
}

int cli_stage_finish(cli_stage *s, const char *command, int status)
{
    bool in_place = false;
    for (int k = 0; k < s->n; k++)
        in_place = in_place || !s->files[k].temp;
    if (status == 0 && place_all(s, command) != 0) {
        take_back(s, command);
        status = 1;
    }
    /* not when a refusal said it, nothing was staged, or a pipe got bytes */
    if (status != 0 && !s->refused && s->n > 0 && !in_place)
        cli_error("%s: nothing was written", command);
    for (int k = 0; k < s->n; k++) {
        cli_staged_file *f = &s->files[k];
        if (written(f->temp))
            unlink(f->temp);
        if (f->backup)
            unlink(f->backup);
        free(f->temp);
        free(f->backup);
    }
    *s = (cli_stage){0};
    return status;
}
