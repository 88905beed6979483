/* Device options, context opening and messages shared by the CLI commands. */
#include "cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

const char cli_device_options_help[] =
    "  --device SEL          device index or name substring (default: $VKATTN_DEVICE,\n"
    "                        else automatic: discrete > integrated > virtual > CPU)\n"
    "  --validate            enable the Khronos validation layer (with synchronization\n"
    "                        validation); any message makes the command fail\n"
    "  --pipeline-cache PATH load the pipeline cache from PATH and save it back with the\n"
    "                        command's outputs (all or nothing); a directory or a file\n"
    "                        that is not a pipeline cache is refused before any work,\n"
    "                        never overwritten\n"
    "  --tuning PATH         attention, mha: use the tuning data in PATH (kernel choices\n"
    "                        measured on this device; a missing file: built-in choices;\n"
    "                        a directory or a file that is not tuning data is refused\n"
    "                        before any work, never overwritten)\n"
    "  --tune                attention, mha: first measure the kernel choices for this\n"
    "                        command's shapes (seconds; mha --prefill: its prefill and\n"
    "                        decode steps); with --tuning, save them to PATH for next time.\n"
    "                        Progress on stderr: on a terminal a line redrawn per\n"
    "                        candidate, else one line per op measured\n"
    "  --quiet               no progress lines\n"
    "  --kernels auto|subgroup|shared|coopmat   the kernel family: the device's choice\n"
    "                        checked by the start-up self-test (auto, default), the\n"
    "                        subgroup-shuffle kernels, the shared-memory tiles, or the\n"
    "                        cooperative-matrix kernels (matrix units) for the ops they\n"
    "                        implement (GEMMs, attention, KV-cache attention; the others\n"
    "                        keep the device's family); a family the self-test or a quirk\n"
    "                        turned off, or that the device lacks, is an error naming\n"
    "                        why (vkattn selftest shows it)\n"
    "  --no-texel-buffers    read inputs through storage buffers only\n"
    "  --no-quirks           ignore the driver-quirk table (what it turns off for a known\n"
    "                        driver bug stays on: it may crash; vkattn selftest lists them)\n"
    "  -v, --verbose         print informational messages\n";

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
    bool *set = strcmp(a, "--no-texel-buffers") == 0 ? &o->no_texel_buffers
                : strcmp(a, "--no-quirks") == 0      ? &o->no_quirks
                                                     : NULL;
    if (set) {
        *set = true;
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
    else if (strcmp(a, "--kernels") == 0)
        value = &o->kernels;
    if (!value)
        return 0;
    if (*i + 1 >= argc) {
        cli_error("%s needs a value", a);
        return -1;
    }
    *value = argv[++*i];
    if (value == &o->kernels && strcmp(o->kernels, "auto") && strcmp(o->kernels, "subgroup") &&
        strcmp(o->kernels, "shared") && strcmp(o->kernels, "coopmat")) {
        cli_error("--kernels \"%s\": expected auto, subgroup, shared or coopmat", o->kernels);
        return -1;
    }
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

uint32_t cli_context_flags(const cli_device_options *o)
{
    uint32_t flags = o->validate ? VKATTN_CONTEXT_VALIDATION : 0;
    if (o->kernels && strcmp(o->kernels, "subgroup") == 0)
        flags |= VKATTN_CONTEXT_SUBGROUP_KERNELS;
    if (o->kernels && strcmp(o->kernels, "shared") == 0)
        flags |= VKATTN_CONTEXT_NO_SUBGROUP_KERNELS;
    if (o->kernels && strcmp(o->kernels, "coopmat") == 0)
        flags |= VKATTN_CONTEXT_COOPMAT_KERNELS;
    if (o->no_texel_buffers)
        flags |= VKATTN_CONTEXT_NO_TEXEL_BUFFERS;
    if (o->no_self_test)
        flags |= VKATTN_CONTEXT_NO_SELF_TEST;
    if (o->no_quirks)
        flags |= VKATTN_CONTEXT_NO_QUIRKS;
    return flags;
}

int cli_close(vkattn_context *ctx, cli_device_options *o, int status)
{
    if (ctx) {
        if (status == 0 && cli_save_pipeline_cache(ctx, o) != 0)
            status = 1;
        uint32_t errors = 0, warnings = 0;
        vkattn_context_validation_counts(ctx, &errors, &warnings);
        vkattn_context_destroy(ctx);
        if (o->validate && (errors || warnings)) {
            cli_error("validation layer: %u errors, %u warnings", errors, warnings);
            status = 1;
        }
    }
    return cli_stage_finish(&o->outputs, o->command, status);
}

int cli_save_pipeline_cache(vkattn_context *ctx, cli_device_options *o)
{
    if (!o->pipeline_cache || o->pipeline_cache_saved)
        return 0;
    o->pipeline_cache_saved = true;
    const char *path = cli_stage_path(&o->outputs, o->pipeline_cache);
    if (vkattn_context_save_pipeline_cache(ctx, path) == VKATTN_SUCCESS)
        return 0;
    cli_error("--pipeline-cache \"%s\": not saved: %s", o->pipeline_cache,
              vkattn_context_last_error(ctx));
    return 1;
}

vkattn_result cli_save_tuning(vkattn_context *ctx, const cli_device_options *o)
{
    if (!o->tuning)
        return VKATTN_SUCCESS;
    const char *path = cli_stage_path(&o->outputs, o->tuning);
    vkattn_result r = vkattn_context_save_tuning(ctx, path);
    if (r != VKATTN_SUCCESS)
        cli_error("--tuning \"%s\": not saved: %s", o->tuning, vkattn_context_last_error(ctx));
    return r;
}

/* An existing file given for --tuning or --pipeline-cache must be what the
 * option says: it is rewritten later, and an unrelated file (a mistyped
 * path, an .npy, a directory) must not be, nor read as one. */
static int check_state_file(const char *command, const char *path, const char *option)
{
    bool tuning = strcmp(option, "--tuning") == 0;
    const char *kind = tuning ? "vkattn tuning file" : "Vulkan pipeline cache";
    struct stat st;
    if (!path || stat(path, &st) != 0)
        return 0; /* missing: created later; its folder is checked as an output's */
    if (!S_ISREG(st.st_mode)) {
        cli_error("%s: %s \"%s\": %s, not a %s; nothing was written", command, option, path,
                  S_ISDIR(st.st_mode) ? "a directory" : "not a regular file", kind);
        return -1;
    }
    FILE *f = fopen(path, "rb");
    if (!f)
        return 0; /* unreadable: the library says so */
    unsigned char head[16] = {0};
    size_t n = fread(head, 1, sizeof head, f);
    fclose(f);
    if (n == 0)
        return 0;
    bool ok;
    if (tuning) {
        /* any format version: the library says if it cannot take it */
        ok = n >= strlen(VKATTN_TUNING_MAGIC) &&
             memcmp(head, VKATTN_TUNING_MAGIC, strlen(VKATTN_TUNING_MAGIC)) == 0;
    } else { /* VkPipelineCacheHeaderVersionOne: headerSize >= 32, version 1 */
        uint32_t size = 0, version = 0;
        memcpy(&size, head, 4);
        memcpy(&version, head + 4, 4);
        ok = n >= 8 && size >= 32 && version == 1;
    }
    if (!ok)
        cli_error("%s \"%s\": the file is not a %s; not using or overwriting it", option, path,
                  kind);
    return ok ? 0 : -1;
}

int cli_stage_device_outputs(cli_device_options *o, const char *command)
{
    o->command = command;
    if (check_state_file(command, o->tuning, "--tuning") != 0 ||
        check_state_file(command, o->pipeline_cache, "--pipeline-cache") != 0)
        return -1;
    if (cli_stage_add(&o->outputs, command, "--pipeline-cache", o->pipeline_cache) != 0)
        return -1;
    return o->tune ? cli_stage_add(&o->outputs, command, "--tuning", o->tuning) : 0;
}
