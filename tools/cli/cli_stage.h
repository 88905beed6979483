/* A command's output files, all or nothing: each is checked before any work
 * (its folder exists, it is not a directory, a file can be created beside
 * it), written under a temporary name beside it, and renamed into place only
 * once every output is written and the command has succeeded. On any
 * failure the temporaries go and every file that was at an output path stays
 * as it was (the same bytes and mode: the same file). */
#ifndef VKATTN_CLI_STAGE_H
#define VKATTN_CLI_STAGE_H

#include <stdbool.h>

/* One output of a command. */
typedef struct cli_staged_file {
    const char *option; /* "--out": names it in messages */
    const char *path;   /* as the user gave it */
    char *temp;         /* the temporary the command writes; NULL: a terminal, a pipe or
                           /dev/null, written as it is (it holds no earlier result) */
    char *backup;       /* while committing: a hard link to the file that was at path */
    bool replaced;      /* while committing: a file was at path */
    bool placed;        /* while committing: renamed over path */
} cli_staged_file;

enum { CLI_MAX_STAGED = 24 }; /* mha --grads alone stages up to 14 */

/* The outputs of one command; zero-initialised is empty. */
typedef struct cli_stage {
    cli_staged_file files[CLI_MAX_STAGED];
    int n;
    bool refused; /* cli_stage_add refused a path (and said so) */
} cli_stage;

/* Adds an output (path NULL: not given, nothing to do). Refuses, naming
 * `command`, `option` and the path, a path that is a directory or a socket,
 * whose folder is missing, or beside which no file can be created; the
 * refusal ends "nothing was written". 0, or -1 after printing. */
int cli_stage_add(cli_stage *s, const char *command, const char *option, const char *path);
/* Where the command writes the output `path`: its temporary, or `path`
 * itself when it is written as it is or was not added. */
const char *cli_stage_path(const cli_stage *s, const char *path);
/* The end of the command. With status 0, every temporary that was written is
 * renamed over its path (taking the mode of a file that was there); when
 * one cannot be, the ones already placed are put back (the old files from
 * their hard links) and the status becomes 1. Otherwise every temporary is
 * removed and, when outputs were staged and none was written as it is,
 * "<command>: nothing was written" printed (unless a refusal said it).
 * Then the stage is empty again. Returns the status. */

int cli_stage_finish(cli_stage *s, const char *command, int status);

#endif
