/* The CLI's device seam (tools/cli/cli_device.c) stubbed for fuzz_cli: no
 * device is ever created, so only argument parsing and what the commands do
 * before they need a device run. Silent, as the harness wants. */
#include "cli.h"

vkattn_context *cli_open(cli_device_options *o)
{
    (void)o;
    return NULL;
}

vkattn_result cli_list_devices(const char *device, vkattn_device_info *infos, uint32_t capacity,
                               uint32_t *count, uint32_t *chosen, vkattn_log_fn log, void *log_user)
{
    (void)device;
    (void)infos;
    (void)capacity;
    (void)log;
    (void)log_user;
    if (count)
        *count = 0;
    if (chosen)
        *chosen = 0;
    return VKATTN_ERROR_NO_DEVICE; /* what vkattn_list_devices says without a device */
}
