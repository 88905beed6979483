/* What the CLI suites (test_cli*.c) share: a scratch
 * directory per suite, paths in it, small text files, and running the
 * tool (VKATTN_CLI_PATH, defined per test target). */
#ifndef VKATTN_TEST_CLI_UTIL_H
#define VKATTN_TEST_CLI_UTIL_H

#include "npy/npy.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The suite's scratch directory (made by cli_setup). */
extern char cli_tmp[256];
/* `name` inside cli_tmp (one of 8 rotating buffers). */
const char *cli_path_of(const char *name);
/* A whole small file (at most size - 1 bytes) as text; "" when missing. */
size_t cli_read_text(const char *path, char *buf, size_t size);
/* Runs `prefix vkattn args` (prefix: "" or e.g. "timeout 20"; the tool
 * itself through $VKATTN_TEST_RUN_PREFIX when set, as the implementation
 * under test needs); returns the exit status (128 when killed), its stderr
 * in `err`. */
int cli_run_with(const char *prefix, const char *args, char *err, size_t size);
/* Whether a file exists at `path`. */
bool cli_exists(const char *path);
/* Writes `name` in cli_tmp as a .npy file (fails the test on error). */
void cli_write_npy(const char *name, npy_dtype dtype, uint32_t rank, const int64_t *shape,
                   const void *data);
/* ... float32 values uniform in [lo, hi) from `seed`. */
void cli_write_f32(const char *name, uint32_t rank, const int64_t *shape, uint64_t seed, float lo,
                   float hi);
/* The .npy file `name` in cli_tmp (fails the test when it cannot be read). */
npy_array cli_read_npy(const char *name);
/* Runs `vkattn args` and fails the test (with its stderr) unless it exits 0. */
void cli_expect_success(const char *args);
/* Fails the test unless the float32 .npy outputs `a_name` and `b_name` (in
 * cli_tmp) are equal within `tol` (0: bit for bit), or with `differ`, differ
 * by more than 1e-3 somewhere. `what` names the comparison. */
void cli_compare_outputs(const char *a_name, const char *b_name, double tol, bool differ,
                         const char *what);
/* cmocka group setup and teardown: make and remove cli_tmp. */
int cli_setup(void **state);
int cli_teardown(void **state);

#endif
