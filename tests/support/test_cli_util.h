/* What the CLI suites (test_cli.c, test_cli_hardening.c) share: a scratch
 * directory per suite, paths in it, small text files, and running the
 * tool (VKATTN_CLI_PATH, defined per test target). */
#ifndef VKATTN_TEST_CLI_UTIL_H
#define VKATTN_TEST_CLI_UTIL_H

#include <stddef.h>

/* The suite's scratch directory (made by cli_setup). */
extern char cli_tmp[256];
/* `name` inside cli_tmp (one of 8 rotating buffers). */
const char *cli_path_of(const char *name);
/* A whole small file (at most size - 1 bytes) as text; "" when missing. */
size_t cli_read_text(const char *path, char *buf, size_t size);
/* Runs `prefix vkattn args` (prefix: "" or e.g. "timeout 20"); returns the
 * exit status (128 when killed), its stderr in `err`. */
int cli_run_with(const char *prefix, const char *args, char *err, size_t size);
/* cmocka group setup and teardown: make and remove cli_tmp. */
int cli_setup(void **state);
int cli_teardown(void **state);

#endif
