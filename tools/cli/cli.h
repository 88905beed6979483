/* Shared pieces of the vkattn command-line tool. */
#ifndef VKATTN_CLI_H
#define VKATTN_CLI_H

#include "cli_stage.h"
#include "vkattn.h"

#include <stdbool.h>

/* Options every command that opens a device understands. */
typedef struct cli_device_options {
    const char *device;         /* --device, else $VKATTN_DEVICE */
    bool validate;              /* --validate */
    const char *pipeline_cache; /* --pipeline-cache PATH: loaded, then saved */
    bool verbose;               /* -v: info messages too */
    const char *tuning;         /* --tuning PATH: loaded; saved back after --tune */
    bool tune;                  /* --tune: run the tuner for this command's shapes first */
    bool tunable;               /* set by a command before parsing: it takes --tune/--tuning */
    bool quiet;                 /* --quiet: no progress lines (--tune) */
    const char *kernels;        /* --kernels auto|subgroup|shared (NULL: auto) */
    bool no_texel_buffers;      /* --no-texel-buffers */
    bool no_quirks;             /* --no-quirks */
    bool no_self_test;          /* set by a command that runs the self-test itself */
    bool pipeline_cache_saved;  /* set by cli_save_pipeline_cache: cli_close saves no more */
    const char *command;        /* names the command in messages (cli_stage_device_outputs) */
    bool context_open;          /* set by cli_open */
    cli_stage outputs;          /* every file the command writes (cli_stage_device_outputs
                                   and the command's own), placed by cli_close */
} cli_device_options;

/* Consumes argv[*i] (and its value) when it is a device option; returns 1 if
 * consumed, 0 if not a device option, -1 on an error it has reported (a
 * missing value, --tune/--tuning on a command that does not tune). */
int cli_parse_device_option(int argc, char **argv, int *i, cli_device_options *o);
/* Before any work: --tuning and --pipeline-cache name files of their kind
 * (missing or empty ones will be; a directory or a file of another kind is
 * refused, never used or overwritten), and the ones the command writes (the
 * pipeline cache, the tuning data with --tune) join o->outputs. 0, or -1
 * after printing. */
int cli_stage_device_outputs(cli_device_options *o, const char *command);
/* After --tune: writes the tuning data for --tuning's path (if given) to its
 * temporary (o->outputs), placed with the command's other outputs. */
vkattn_result cli_save_tuning(vkattn_context *ctx, const cli_device_options *o);
/* Writes the pipeline cache for --pipeline-cache's path (if given) to its
 * temporary now, while the context is open; cli_close then leaves it alone.
 * Nonzero on failure (the logger printed why). */
int cli_save_pipeline_cache(vkattn_context *ctx, cli_device_options *o);
/* The tuners' progress callback for these options: lines on stderr
 * (cli_progress.c), or NULL with --quiet. */
vkattn_tune_progress_fn cli_tune_progress(const cli_device_options *o);
/* Help text for the options above. */
extern const char cli_device_options_help[];

/* Takes a command's own option at argv[*i] (and its value, by advancing *i);
 * returns 0, or 2 after printing why it cannot. */
typedef int (*cli_option_parser)(void *user, int argc, char **argv, int *i);
/* cli_parse_args' result when every argument was taken: the command goes on. */
enum { CLI_ARGS_OK = -1 };
/* Walks a command's arguments: the device options into *o, -h/--help (prints
 * `help` and the device options' help), the rest through `own`. Returns
 * CLI_ARGS_OK, or the exit status: 0 after --help, 2 after a printed error. */
int cli_parse_args(int argc, char **argv, cli_device_options *o, const char *help,
                   cli_option_parser own, void *user);

/* The context flags the options ask for (--validate, --kernels,
 * --no-texel-buffers). */
uint32_t cli_context_flags(const cli_device_options *o);
/* Opens a context as the options say (and says when a driver quirk matched
 * its device); prints the error and returns NULL on failure. From then on (o->context_open) the library's error messages are
 * not printed as they are logged: each command reports the failure it gets
 * in its own terms. Defined in cli_device.c, the only file creating Vulkan
 * objects. */
vkattn_context *cli_open(cli_device_options *o);
/* vkattn_list_devices, behind a seam (cli_device.c) a fuzz harness stubs. */
vkattn_result cli_list_devices(const char *device, vkattn_device_info *infos, uint32_t capacity,
                               uint32_t *count, uint32_t *chosen, vkattn_log_fn log,
                               void *log_user);
/* The end of every command that took device options, whatever its
 * `status`: with a context, saves the pipeline cache when the command
 * succeeded (unless cli_save_pipeline_cache did), reports validation counts
 * and destroys it; then places o->outputs when everything succeeded, or
 * removes them (cli_stage_finish). Returns `status`, or 1 when saving,
 * validation or placing failed. */
int cli_close(vkattn_context *ctx, cli_device_options *o, int status);

/* A path a command was given: the option, the path (NULL: not given), and
 * whether the command writes it (a file it also reads, like
 * --pipeline-cache, counts as written). */
typedef struct cli_path_use {
    const char *option;
    const char *path;
    bool output;
} cli_path_use;
enum { CLI_MAX_PATH_USES = 64 };
/* Refuses, naming both options, any two paths naming the same file (by
 * device and inode; a file still to be created by its directory's real path
 * and name) when at least one of them is written. 0, or -1 after printing. */
int cli_check_path_collisions(const char *command, const cli_path_use *uses, int n);

/* Prints "vkattn: <message>" to stderr. */
void cli_error(const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 1, 2)))
#endif
    ;

/* The whole tool: usage, driver set-up, dispatch to a command (cli_main.c). */
int cli_main(int argc, char **argv);

int cli_info(int argc, char **argv);
int cli_smoke(int argc, char **argv);
int cli_attention(int argc, char **argv);
int cli_mha(int argc, char **argv);
int cli_demo(int argc, char **argv);
int cli_selftest(int argc, char **argv);

#endif
