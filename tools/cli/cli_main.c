/* vkattn: the command-line tool's dispatch, apart from main so a fuzz
 * harness can call it with device creation stubbed. */
#include "cli.h"
#include "cli_viz.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char usage[] =
    "usage: vkattn <command> [options]\n"
    "\n"
    "commands:\n"
    "  info      list the Vulkan devices and the capabilities vkattn uses\n"
    "  attention attention of .npy tensors (Q, K, V, masks; optional RoPE) on the device\n"
    "  mha       one multi-head attention layer (torch weight layout; RoPE, QK-norm, scale,\n"
    "            KV-cache decoding) on .npy inputs\n"
    "  viz       pictures of attention weights (PNG, SVG): from a weights .npy, or Q and K\n"
    "  demo      GPT-2- and Llama-shaped layers with random weights, checked on the CPU\n"
    "  smoke     run a small conversion kernel on the device and check it\n"
    "  selftest  the start-up self-test's checks on the device, the driver quirks\n"
    "  version   print the library version\n"
    "\n"
    "`vkattn <command> --help` lists the command's options.\n"
    "\n"
    "environment:\n"
    "  VKATTN_DEVICE   device index or name substring for commands that open one\n"
    "  If none of VK_ICD_FILENAMES, VK_DRIVER_FILES and VK_ADD_DRIVER_FILES is set,\n"
    "  the tool adds SwiftShader's Vulkan driver from Debian's chromium-common\n"
    "  ("
    "/usr/lib/chromium/vk_swiftshader_icd.json"
    ") to the loader's drivers\n"
    "  when that file exists, so both CPU implementations are listed.\n";

#define SWIFTSHADER_ICD "/usr/lib/chromium/vk_swiftshader_icd.json"

/* The loader only reads these at instance creation, so setting one here, in
 * the tool's own process, affects nothing else. */
static void add_swiftshader_driver(void)
{
    if (getenv("VK_ICD_FILENAMES") || getenv("VK_DRIVER_FILES") || getenv("VK_ADD_DRIVER_FILES"))
        return;
    if (access(SWIFTSHADER_ICD, R_OK) == 0)
        setenv("VK_ADD_DRIVER_FILES", SWIFTSHADER_ICD, 0);
}

int cli_main(int argc, char **argv)
{
    if (argc < 2 || strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0 ||
        strcmp(argv[1], "help") == 0) {
        fputs(usage, argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    add_swiftshader_driver();
    const char *cmd = argv[1];
    if (strcmp(cmd, "info") == 0)
        return cli_info(argc - 1, argv + 1);
    if (strcmp(cmd, "smoke") == 0)
        return cli_smoke(argc - 1, argv + 1);
    if (strcmp(cmd, "attention") == 0)
        return cli_attention(argc - 1, argv + 1);
    if (strcmp(cmd, "mha") == 0)
        return cli_mha(argc - 1, argv + 1);
    if (strcmp(cmd, "viz") == 0)
        return cli_viz(argc - 1, argv + 1);
    if (strcmp(cmd, "demo") == 0)
        return cli_demo(argc - 1, argv + 1);
    if (strcmp(cmd, "selftest") == 0)
        return cli_selftest(argc - 1, argv + 1);
    if (strcmp(cmd, "version") == 0 || strcmp(cmd, "--version") == 0) {
        printf("vkattn %s\n", vkattn_version_string());
        return 0;
    }
    cli_error("unknown command \"%s\"\n%s", cmd, usage);
    return 2;
}
