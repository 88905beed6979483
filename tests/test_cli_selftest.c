/* vkattn selftest, the self-test in vkattn info, and choosing the kernels by
 * hand (--kernels, --no-texel-buffers) on the implementation under test:
 * every check listed and passed (at LP_NATIVE_VECTOR_WIDTH=1024 the subgroup
 * checks fail, exit 0: the shared-memory family serves every op, and
 * --kernels subgroup is an error naming the failed check); a bad --kernels
 * value is refused; forced families give the reference's results. */
#include "npy/npy.h"
#include "test_cli_util.h"
#include "test_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef VKATTN_CLI_PATH
#error "VKATTN_CLI_PATH must name the vkattn executable"
#endif

static const char *const checks[] = {
    "subgroup.add_one", "subgroup.ids",         "subgroup.reduce",      "subgroup.broadcast",
    "subgroup.shuffle", "subgroup.shuffle_xor", "shared.barrier",       "texel.rgba32f",
    "texel.rgba16f",    "texel.rgba32ui",       "storage16.load_store", "coopmat.muladd"};

static bool subgroup_lie(void)
{
    const char *e = getenv("VKATTN_TEST_SUBGROUP_LIE");
    return e && strcmp(e, "1") == 0;
}

/* stdout of the last run (cli_run_with keeps it in cli_tmp). */
static void stdout_text(char *buf, size_t size)
{
    cli_read_text(cli_path_of("stdout.txt"), buf, size);
}

/* The line of `out` that mentions `name`, into `line`. */
static void line_of(const char *out, const char *name, char *line, size_t size)
{
    const char *p = strstr(out, name);
    if (!p)
        fail_msg("no line mentions %s:\n%s", name, out);
    while (p > out && p[-1] != '\n')
        p--;
    snprintf(line, size, "%.*s", (int)strcspn(p, "\n"), p);
}

static void test_selftest_command(void **state)
{
    (void)state;
    char err[8192], out[16384], line[1024];
    int code = cli_run_with("", "selftest --validate", err, sizeof err);
    stdout_text(out, sizeof out);
    if (code != 0)
        fail_msg("vkattn selftest: exit %d\n%s%s", code, out, err);
    for (size_t k = 0; k < sizeof checks / sizeof checks[0]; k++) {
        line_of(out, checks[k], line, sizeof line);
        bool subgroup = strncmp(checks[k], "subgroup.", 9) == 0;
        /* passed, or not run where the device lacks the feature (or a quirk) */
        bool ok = strstr(line, " passed ") || strstr(line, " not run ");
        if (subgroup && subgroup_lie())
            ok = strstr(line, " FAILED ") != NULL;
        if (!ok)
            fail_msg("vkattn selftest: %s", line);
    }
    if (!strstr(out, "every op has a working kernel family: yes"))
        fail_msg("vkattn selftest:\n%s", out);
    if (subgroup_lie()) {
        line_of(out, "subgroup.add_one", line, sizeof line);
        if (!strstr(line, "subgroupAdd(1.0) gave 16 in a pipeline built for 32"))
            fail_msg("at width 1024: %s", line);
        /* the subgroup family forced: an error naming the check */
        code = cli_run_with("", "selftest --kernels subgroup", err, sizeof err);
        if (code != 1 || !strstr(err, "subgroup.add_one"))
            fail_msg("selftest --kernels subgroup at width 1024: exit %d\n%s", code, err);
    }
    code = cli_run_with("", "selftest --kernels sideways", err, sizeof err);
    if (code != 2 ||
        !strstr(err, "--kernels \"sideways\": expected auto, subgroup, shared or coopmat"))
        fail_msg("selftest --kernels sideways: exit %d\n%s", code, err);
    /* the coopmat family forced: on where the device has it (its check
     * passed), else an error saying what is missing */
    code = cli_run_with("", "selftest --kernels coopmat", err, sizeof err);
    if (code == 0) {
        stdout_text(out, sizeof out);
        line_of(out, "coopmat.muladd", line, sizeof line);
        if (!strstr(line, "passed"))
            fail_msg("selftest --kernels coopmat: %s", line);
    }
    if (code != 0 &&
        (code != 1 || !strstr(err, "coopmat kernels (VKATTN_CONTEXT_COOPMAT_KERNELS) do not work")))
        fail_msg("selftest --kernels coopmat: exit %d\n%s", code, err);
}

static void test_info_shows_the_self_test(void **state)
{
    (void)state;
    char err[8192], out[32768];
    if (cli_run_with("", "info", err, sizeof err) != 0)
        fail_msg("vkattn info:\n%s", err);
    stdout_text(out, sizeof out);
    static const char *const want[] = {"self-test: ran now", "subgroup kernels",
                                       "shared-memory kernels", "texel-buffer inputs",
                                       "16-bit storage"};
    for (size_t k = 0; k < sizeof want / sizeof want[0]; k++)
        if (!strstr(out, want[k]))
            fail_msg("vkattn info lacks \"%s\":\n%s", want[k], out);
    if (cli_run_with("", "info --json", err, sizeof err) != 0)
        fail_msg("vkattn info --json:\n%s", err);
    stdout_text(out, sizeof out);
    if (!strstr(out, "\"self_test\": {\"source\": \"ran\"") ||
        !strstr(out, "\"every_op_has_a_family\": true") || !strstr(out, "\"subgroup_kernels\": {"))
        fail_msg("vkattn info --json:\n%s", out);
}

/* attention with each family and input path forced, checked against the
 * CPU reference, giving the same output within f32's tolerance */
static void test_forced_families(void **state)
{
    (void)state;
    int64_t q[4] = {1, 4, 7, 16}, kv[4] = {1, 2, 9, 16};
    cli_write_f32("Q.npy", 4, q, 1, -1, 1);
    cli_write_f32("K.npy", 4, kv, 2, -1, 1);
    cli_write_f32("V.npy", 4, kv, 3, -1, 1);
    static const char *const ways[][2] = {{"auto", "A.npy"},
                                          {"shared", "S.npy"},
                                          {"shared --no-texel-buffers", "SN.npy"},
                                          {"subgroup", "G.npy"},
                                          {"subgroup --no-texel-buffers", "GN.npy"}};
    for (size_t k = 0; k < sizeof ways / sizeof ways[0]; k++) {
        char args[4096], err[8192];
        snprintf(args, sizeof args,
                 "attention --q %s --k %s --v %s --causal --check --validate --kernels %s "
                 "--out %s",
                 cli_path_of("Q.npy"), cli_path_of("K.npy"), cli_path_of("V.npy"), ways[k][0],
                 cli_path_of(ways[k][1]));
        int code = cli_run_with("", args, err, sizeof err);
        bool subgroup = strncmp(ways[k][0], "subgroup", 8) == 0;
        if (subgroup && code != 0 && (strstr(err, "do not work") || subgroup_lie())) {
            /* a device without the family (or the lie): refused, named */
            if (!strstr(err, "VKATTN_CONTEXT_SUBGROUP_KERNELS"))
                fail_msg("vkattn %s: exit %d without naming the family:\n%s", args, code, err);
            continue;
        }
        if (code != 0)
            fail_msg("vkattn %s: exit %d\n%s", args, code, err);
        if (k > 0)
            cli_compare_outputs("A.npy", ways[k][1], 2e-5, false, ways[k][0]);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_selftest_command),
        cmocka_unit_test(test_info_shows_the_self_test),
        cmocka_unit_test(test_forced_families),
    };
    return cmocka_run_group_tests(tests, cli_setup, cli_teardown);
}
