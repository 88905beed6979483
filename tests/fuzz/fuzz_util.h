/* Shared by the fuzz harnesses (tests/fuzz, docs/fuzzing.md): a private
 * temporary directory made once per process and removed at exit, and the
 * harness's way of reporting a finding (a message, then abort(), which
 * libFuzzer turns into a crash with a reproducer file). */
#ifndef VKATTN_FUZZ_UTIL_H
#define VKATTN_FUZZ_UTIL_H

#include <stddef.h>
#include <stdint.h>

/* libFuzzer's entry points (defined by each harness). */
int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* A new directory vkattn-fuzz-<what>-XXXXXX in $TMPDIR, else /dev/shm,
 * else /tmp, removed with what is in it at exit; aborts if it cannot be
 * made. */
const char *fuzz_temp_dir(const char *what);

/* Prints "fuzz: <message>" where the sanitizers report (seen even when
 * -close_fd_mask discards stderr) and aborts. */
void fuzz_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

/* For a harness that changes its working directory in
 * LLVMFuzzerInitialize (before libFuzzer reads its arguments): makes the
 * relative paths among the arguments (corpus directories, reproducers,
 * -artifact_prefix= and the like) absolute against the current directory,
 * and adds -artifact_prefix=<current directory>/ unless one is given, so
 * crash files land where they would without the chdir. With `quiet`, also
 * adds -close_fd_mask=3: the code under test writes stdout and stderr to
 * /dev/null while libFuzzer's own lines and the sanitizers' reports still
 * reach the real stderr (not when a -close_fd_mask is given or
 * VKATTN_FUZZ_VERBOSE is set, to see the output of one reproducer). */
void fuzz_prepare_args(int *argc, char ***argv, int quiet);

#endif
