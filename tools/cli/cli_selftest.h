/* The self-test's report as the CLI prints it (cli_selftest.c). */
#ifndef VKATTN_CLI_SELFTEST_H
#define VKATTN_CLI_SELFTEST_H

#include "vkattn.h"

#include <stdio.h>

/* Where the report came from, whether every op has a working kernel family,
 * each feature on or off and why, the quirks that apply; each line starts
 * with `indent`. */
void cli_print_features(FILE *f, const vkattn_self_test_report *rep, const char *indent);

#endif
