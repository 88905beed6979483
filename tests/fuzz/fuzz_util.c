/* Helpers of the fuzz harnesses (fuzz_util.h). */
#include "fuzz_util.h"
#include "test_files.h"

#include <sanitizer/common_interface_defs.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char temp_dir[128];

/* Harnesses write files, and the CLI harness may make a directory or two;
 * deeper trees are left for the system's /tmp clean-up. */
static void remove_temp_dir(void)
{
    if (temp_dir[0])
        test_remove_tree(temp_dir, 2);
}

const char *fuzz_temp_dir(const char *what)
{
    if (temp_dir[0])
        return temp_dir;
    /* tmpfs when there is one: the npy harness writes files per input */
    const char *base = getenv("TMPDIR");
    if (!base || !*base)
        base = access("/dev/shm", W_OK | X_OK) == 0 ? "/dev/shm" : "/tmp";
    snprintf(temp_dir, sizeof temp_dir, "%s/vkattn-fuzz-%s-XXXXXX", base, what);
    if (!mkdtemp(temp_dir))
        fuzz_fail("cannot make %s", temp_dir);
    atexit(remove_temp_dir);
    return temp_dir;
}

void fuzz_fail(const char *fmt, ...)
{
    char message[1024];
    int n = snprintf(message, sizeof message, "fuzz: ");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(message + n, sizeof message - (size_t)n, fmt, ap);
    va_end(ap);
    /* printed where the sanitizers report: stderr, or libFuzzer's copy of
     * it when -close_fd_mask closed it */
    __sanitizer_report_error_summary(message);
    abort();
}

/* An absolute form of `path` (relative to the current directory), from
 * malloc, kept for the process's lifetime as libFuzzer keeps argv. */
static char *absolute(const char *prefix, const char *path)
{
    char cwd[4096];
    if (path[0] == '/' || !getcwd(cwd, sizeof cwd))
        return NULL;
    size_t n = strlen(prefix) + strlen(cwd) + strlen(path) + 3;
    char *s = malloc(n);
    if (!s)
        fuzz_fail("out of memory");
    snprintf(s, n, "%s%s/%s", prefix, cwd, path);
    return s;
}

void fuzz_prepare_args(int *argc, char ***argv, int quiet)
{
    static const char *path_flags[] = {
        "-artifact_prefix=",   "-exact_artifact_path=", "-dict=",
        "-features_dir=",      "-mutation_graph_file=", "-data_flow_trace=",
        "-merge_control_file="};
    static char *args[256];
    int n = *argc, have_prefix = 0, have_mask = getenv("VKATTN_FUZZ_VERBOSE") != NULL || !quiet;
    if (n < 1 || n + 3 > (int)(sizeof args / sizeof *args))
        return;
    int out = 0;
    args[out++] = (*argv)[0];
    for (int i = 1; i < n; i++) {
        char *a = (*argv)[i], *abs = NULL;
        if (a[0] != '-') {
            abs = absolute("", a);
        } else {
            have_mask |= strncmp(a, "-close_fd_mask=", 15) == 0;
            for (size_t k = 0; k < sizeof path_flags / sizeof *path_flags; k++) {
                size_t len = strlen(path_flags[k]);
                if (strncmp(a, path_flags[k], len) != 0)
                    continue;
                have_prefix |= k == 0;
                if (a[len]) {
                    char flag[32];
                    snprintf(flag, sizeof flag, "%.*s", (int)len, a);
                    abs = absolute(flag, a + len);
                }
            }
        }
        args[out++] = abs ? abs : a;
    }
    if (!have_prefix)
        args[out++] = absolute("-artifact_prefix=", "");
    if (!have_mask)
        args[out++] = "-close_fd_mask=3";
    args[out] = NULL;
    *argc = out;
    *argv = args;
}
