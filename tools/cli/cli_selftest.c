/* vkattn selftest: the start-up self-test's checks on the chosen device, one
 * line each, the features they decide and the driver quirks that apply
 * (vkattn/selftest.h); and the short forms `vkattn info` and every command
 * that opens a device print. */
#include "cli.h"
#include "cli_selftest.h"

#include <stdio.h>
#include <string.h>

static const char help_text[] =
    "usage: vkattn selftest [--device SEL] [--kernels auto|subgroup|shared|coopmat]\n"
    "                       [--no-texel-buffers] [--no-quirks] [--validate]\n"
    "Runs the start-up self-test's checks on the chosen device now (whatever a\n"
    "pipeline cache holds): tiny known-answer dispatches of what the kernels rely on\n"
    "(the subgroup contract at the reported size, each texel-buffer format, 16-bit\n"
    "storage, shared memory with barriers). Prints one line per check (the feature\n"
    "it guards, passed / FAILED / not run, its probe's time, what was wrong), then\n"
    "each feature on or off and why, and the driver quirks that apply. Exit 0 when\n"
    "every op has a working kernel family (and a --kernels family works), else 1.\n";

static const char *feature_short(int f) { return vkattn_feature_name((vkattn_feature)f); }

void cli_print_features(FILE *f, const vkattn_self_test_report *rep, const char *indent)
{
    static const char *const source[3] = {"ran now", "from the pipeline cache", "skipped"};
    fprintf(f, "%sself-test: %s", indent, source[rep->source]);
    if (rep->source == VKATTN_SELF_TEST_RAN)
        fprintf(f, " (%.1f ms)", rep->ms);
    fprintf(f, "; every op has a working kernel family: %s\n",
            rep->every_op_has_a_family ? "yes" : "NO");
    for (int i = 0; i < VKATTN_FEATURE_COUNT; i++) {
        const vkattn_feature_report *r = &rep->features[i];
        fprintf(f, "%s  %-22s %s%s%s\n", indent, feature_short(i), r->on ? "on" : "off",
                r->why[0] ? (r->on ? "    " : "   ") : "", r->why);
    }
    for (uint32_t q = 0; q < rep->quirk_count; q++)
        fprintf(f, "%s  quirk %s%s: %s\n%s    reproducer: %s\n", indent, rep->quirks[q].id,
                rep->quirks[q].applied ? "" : " (ignored)", rep->quirks[q].why, indent,
                rep->quirks[q].reproducer);
}

static void print_checks(const vkattn_self_test_report *rep)
{
    for (uint32_t k = 0; k < rep->check_count; k++) {
        const vkattn_self_test_check *c = &rep->checks[k];
        const char *state = !c->checked ? "not run" : c->passed ? "passed" : "FAILED";
        printf("  %-22s %-22s %-7s", feature_short(c->feature), c->name, state);
        if (c->checked)
            printf(" %7.1f ms", c->ms);
        else
            printf("           ");
        const char *why = c->checked ? c->detail : rep->features[c->feature].why;
        printf("%s%s\n", why[0] ? "  " : "", why);
    }
}

static int no_own_option(void *user, int argc, char **argv, int *i)
{
    (void)user;
    (void)argc;
    cli_error("selftest: unknown argument \"%s\" (see vkattn selftest --help)", argv[*i]);
    return 2;
}

int cli_selftest(int argc, char **argv)
{
    cli_device_options o = {.no_self_test = true}; /* run below, whatever the cache held */
    int code = cli_parse_args(argc, argv, &o, help_text, no_own_option, NULL);
    if (code != CLI_ARGS_OK)
        return code;
    vkattn_context *ctx = cli_stage_device_outputs(&o, "selftest") == 0 ? cli_open(&o) : NULL;
    if (!ctx)
        return cli_close(NULL, &o, 1);
    const vkattn_device_info *d = vkattn_context_device_info(ctx);
    printf("self-test on \"%s\" (%s %s, subgroup size %u)\n", d->name, d->driver_name,
           d->driver_info, d->subgroup_size);
    vkattn_self_test_report rep;
    vkattn_result r = vkattn_context_run_self_test(ctx, &rep);
    int status = 0;
    if (r != VKATTN_SUCCESS && r != VKATTN_ERROR_UNSUPPORTED) {
        cli_error("selftest: %s [%s]", vkattn_context_last_error(ctx), vkattn_result_name(r));
        return cli_close(ctx, &o, 1);
    }
    print_checks(&rep);
    cli_print_features(stdout, &rep, "");
    if (r == VKATTN_ERROR_UNSUPPORTED) { /* a --kernels family that does not work */
        cli_error("selftest: --kernels %s: %s", o.kernels, vkattn_context_last_error(ctx));
        status = 1;
    }
    if (!rep.every_op_has_a_family)
        status = 1;
    return cli_close(ctx, &o, status);
}
