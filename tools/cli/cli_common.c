/* Device options, context opening and messages shared by the CLI commands. */
#include "cli.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char cli_device_options_help[] =
    "  --device SEL          device index or name substring (default: $VKATTN_DEVICE,\n"
    "                        else automatic: discrete > integrated > virtual > CPU)\n"
    "  --validate            enable the Khronos validation layer (with synchronization\n"
    "                        validation); any message makes the command fail\n"
    "  --pipeline-cache PATH load the pipeline cache from PATH and save it back (before\n"
    "                        any output file: a path that cannot be written fails the\n"
    "                        command without output; a file that is not a pipeline cache\n"
    "                        is refused, never overwritten)\n"
    "  --tuning PATH         attention, mha: use the tuning data in PATH (kernel choices\n"
    "                        measured on this device; a missing file: built-in choices;\n"
    "                        a file that is not tuning data is refused, never overwritten)\n"
    "  --tune                attention, mha: first measure the kernel choices for this\n"
    "                        command's shapes (seconds; mha --prefill: its prefill and\n"
    "                        decode steps); with --tuning, save them to PATH for next time.\n"
    "                        Progress on stderr: on a terminal a line redrawn per\n"
    "                        candidate, else one line per op measured\n"
    "  --quiet               no progress lines\n"
    "  -v, --verbose         print informational messages\n";

void cli_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("vkattn: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

int cli_parse_device_option(int argc, char **argv, int *i, cli_device_options *o)
{
    const char *a = argv[*i];
    if (strcmp(a, "--validate") == 0) {
        o->validate = true;
        return 1;
    }
    if ((strcmp(a, "--tune") == 0 || strcmp(a, "--tuning") == 0) && !o->tunable) {
        cli_error("%s: only the attention and mha commands take it", a);
        return -1;
    }
    if (strcmp(a, "--tune") == 0) {
        o->tune = true;
        return 1;
    }
    if (strcmp(a, "--quiet") == 0) {
        o->quiet = true;
        return 1;
    }
    if (strcmp(a, "-v") == 0 || strcmp(a, "--verbose") == 0) {
        o->verbose = true;
        return 1;
    }
    const char **value = NULL;
    if (strcmp(a, "--device") == 0)
        value = &o->device;
    else if (strcmp(a, "--pipeline-cache") == 0)
        value = &o->pipeline_cache;
    else if (strcmp(a, "--tuning") == 0)
        value = &o->tuning;
    if (!value)
        return 0;
    if (*i + 1 >= argc) {
        cli_error("%s needs a value", a);
        return -1;
    }
    *value = argv[++*i];
    return 1;
}

int cli_parse_args(int argc, char **argv, cli_device_options *o, const char *help,
                   cli_option_parser own, void *user)
{
    for (int i = 1; i < argc; i++) {
        int used = cli_parse_device_option(argc, argv, &i, o);
        if (used < 0)
            return 2;
        if (used)
            continue;
        if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
            printf("%s%s", help, cli_device_options_help);
            return 0;
        }
        if (own(user, argc, argv, &i) != 0)
            return 2;
    }
    return CLI_ARGS_OK;
}

int cli_close(vkattn_context *ctx, const cli_device_options *o)
{
    if (!ctx)
        return 0;
    int bad = 0;
    if (o->pipeline_cache && !o->pipeline_cache_saved &&
        vkattn_context_save_pipeline_cache(ctx, o->pipeline_cache) != VKATTN_SUCCESS) {
        cli_error("--pipeline-cache \"%s\": not saved (the error above)", o->pipeline_cache);
        bad = 1;
    }
    uint32_t errors = 0, warnings = 0;
    vkattn_context_validation_counts(ctx, &errors, &warnings);
    vkattn_context_destroy(ctx);
    if (o->validate && (errors || warnings)) {
        cli_error("validation layer: %u errors, %u warnings", errors, warnings);
        bad = 1;
    }
    return bad;
}

int cli_save_pipeline_cache(vkattn_context *ctx, cli_device_options *o)
{
    if (!o->pipeline_cache)
        return 0;
    o->pipeline_cache_saved = true;
    if (vkattn_context_save_pipeline_cache(ctx, o->pipeline_cache) == VKATTN_SUCCESS)
        return 0;
    cli_error("--pipeline-cache \"%s\": not saved (the error above)", o->pipeline_cache);
    return 1;
}

vkattn_result cli_save_tuning(vkattn_context *ctx, const cli_device_options *o)
{
    if (!o->tuning)
        return VKATTN_SUCCESS;
    vkattn_result r = vkattn_context_save_tuning(ctx, o->tuning);
    if (r != VKATTN_SUCCESS)
        cli_error("--tuning \"%s\": not saved (the error above)", o->tuning);
    return r;
}
