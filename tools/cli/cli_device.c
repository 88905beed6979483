/* The only file of the CLI that creates Vulkan objects: a fuzz harness
 * links everything else (vkattn_cli_lib) with its own stubs of these. */
#include "cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void on_log(void *user, vkattn_log_level level, const char *message)
{
    const cli_device_options *o = user;
    if (level >= VKATTN_LOG_WARNING || o->verbose)
        fprintf(stderr, "vkattn: %s%s\n",
                level == VKATTN_LOG_ERROR     ? "error: "
                : level == VKATTN_LOG_WARNING ? "warning: "
                                              : "",
                message);
}

/* An existing, non-empty file given for --tuning or --pipeline-cache must
 * be what the option says: it is rewritten later, and an unrelated file
 * (a mistyped path, an .npy) must not be. */
static bool cache_file_ok(const char *path, const char *option)
{
    FILE *f = path ? fopen(path, "rb") : NULL;
    if (!f)
        return true; /* missing: created later; unreadable: the library says so */
    unsigned char head[16] = {0};
    size_t n = fread(head, 1, sizeof head, f);
    fclose(f);
    if (n == 0)
        return true;
    bool ok;
    if (strcmp(option, "--tuning") == 0) {
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
                  strcmp(option, "--tuning") == 0 ? "vkattn tuning file" : "Vulkan pipeline cache");
    return ok;
}

vkattn_context *cli_open(const cli_device_options *o)
{
    if (!cache_file_ok(o->tuning, "--tuning") ||
        !cache_file_ok(o->pipeline_cache, "--pipeline-cache"))
        return NULL;
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

vkattn_result cli_list_devices(const char *device, vkattn_device_info *infos, uint32_t capacity,
                               uint32_t *count, uint32_t *chosen, vkattn_log_fn log, void *log_user)
{
    return vkattn_list_devices(device, infos, capacity, count, chosen, log, log_user);
}
