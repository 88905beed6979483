/* The only file of the CLI that creates Vulkan objects: a fuzz harness
 * links everything else (vkattn_cli_lib) with its own stubs of these. */
#include "cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void on_log(void *user, vkattn_log_level level, const char *message)
{
    const cli_device_options *o = user;
    /* Once the context is open, the library's refusals come back as results
     * that the command reports in its user's terms (cli_report_error), not
     * in the library's; the validation layer's messages go out as they come. */
    if (level == VKATTN_LOG_ERROR && o->context_open && strncmp(message, "validation:", 11) != 0)
        return;
    if (level >= VKATTN_LOG_WARNING || o->verbose)
        fprintf(stderr, "vkattn: %s%s\n",
                level == VKATTN_LOG_ERROR     ? "error: "
                : level == VKATTN_LOG_WARNING ? "warning: "
                                              : "",
                message);
}

/* Says, when a driver quirk matched the device, which and what it turned
 * off (or, with --no-quirks, left on). */
static void say_quirks(const vkattn_context *ctx)
{
    vkattn_self_test_report rep;
    if (vkattn_context_self_test(ctx, &rep) != VKATTN_SUCCESS)
        return;
    for (uint32_t q = 0; q < rep.quirk_count; q++) {
        const vkattn_quirk_info *k = &rep.quirks[q];
        char off[128] = "";
        for (int f = 0; f < VKATTN_FEATURE_COUNT; f++)
            if (k->turns_off & (1u << f))
                snprintf(off + strlen(off), sizeof off - strlen(off), "%s%s", off[0] ? ", " : "",
                         vkattn_feature_name((vkattn_feature)f));
        fprintf(stderr,
                "vkattn: driver quirk %s matches \"%s\": %s %s (vkattn selftest says why)\n", k->id,
                vkattn_context_device_info(ctx)->name, off,
                k->applied ? "off" : "left on (--no-quirks)");
    }
}

vkattn_context *cli_open(cli_device_options *o)
{
    vkattn_context_desc desc = {0};
    desc.device = o->device ? o->device : getenv("VKATTN_DEVICE");
    if (desc.device && !*desc.device)
        desc.device = NULL;
    desc.flags = cli_context_flags(o);
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
    o->context_open = true;
    say_quirks(ctx);
    return ctx;
}

vkattn_result cli_list_devices(const char *device, vkattn_device_info *infos, uint32_t capacity,
                               uint32_t *count, uint32_t *chosen, vkattn_log_fn log, void *log_user)
{
    return vkattn_list_devices(device, infos, capacity, count, chosen, log, log_user);
}
