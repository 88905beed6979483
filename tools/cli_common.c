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
    "                        command without output)\n"
    "  --tuning PATH         use the tuning data in PATH (kernel choices measured on\n"
    "                        this device; a missing file: built-in choices)\n"
    "  --tune                first measure the kernel choices for this command's shapes\n"
    "                        (seconds); with --tuning, save them to PATH for next time\n"
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
    if (strcmp(a, "--tune") == 0) {
        o->tune = true;
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

static void on_log(void *user, vkattn_log_level level, const char *message)
{
    const cli_device_options *o = user;
    if (level >= VKATTN_LOG_WARNING || o->verbose)
        fprintf(stderr, "vkattn: %s%s\n",
                level == VKATTN_LOG_ERROR ? "error: " : level == VKATTN_LOG_WARNING ? "warning: " : "",
                message);
}

vkattn_context *cli_open(const cli_device_options *o)
{
    vkattn_context_desc desc = {0};
    desc.device = o->device ? o->device : getenv("VKATTN_DEVICE");
    if (desc.device && !*desc.device)
        desc.device = NULL;
    desc.flags = o->validate ? VKATTN_CONTEXT_VALIDATION : 0;
    desc.log = on_log;
    desc.log_user = (void *)o;
    desc.pipeline_cache_path = o->pipeline_cache;
    desc.tuning_path = o->tuning;
    vkattn_context *ctx = NULL;
    vkattn_result r = vkattn_context_create(&desc, &ctx);
    if (r != VKATTN_SUCCESS) {
        /* the logger printed the detail */
        cli_error("cannot open a Vulkan device (%s)", vkattn_result_name(r));
        return NULL;
    }
    return ctx;
}

int cli_close(vkattn_context *ctx, const cli_device_options *o)
{
    if (!ctx)
        return 0;
    int bad = 0;
    if (o->pipeline_cache && !o->pipeline_cache_saved &&
        vkattn_context_save_pipeline_cache(ctx, o->pipeline_cache) != VKATTN_SUCCESS)
        bad = 1;
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
    return vkattn_context_save_pipeline_cache(ctx, o->pipeline_cache) != VKATTN_SUCCESS;
}

vkattn_result cli_save_tuning(vkattn_context *ctx, const cli_device_options *o)
{
    if (!o->tuning)
        return VKATTN_SUCCESS;
    return vkattn_context_save_tuning(ctx, o->tuning);
}
