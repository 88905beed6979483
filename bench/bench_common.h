/* What the parts of vkattn-bench share. */
#ifndef BENCH_COMMON_H
#define BENCH_COMMON_H

#include "vkattn.h"

/* Prints "vkattn-bench: <what>: <ctx's last error>" and exits with status 1.
 * A benchmark has nothing sensible to do after a failure. */
_Noreturn void bench_die(const vkattn_context *ctx, const char *what);

/* Ends the program when a vkattn call failed. */
#define BENCH_CHECK(ctx, expr, what)  \
    do {                              \
        if ((expr) != VKATTN_SUCCESS) \
            bench_die((ctx), (what)); \
    } while (0)

/* Recorded at the start of every command buffer the bench submits: makes
 * earlier submissions' shader and transfer writes visible and orders their
 * reads before new writes (every rep rewrites the same outputs), as the
 * synchronization contract of vkattn.h asks of the caller. */
void bench_cmd_barrier(vkattn_context *ctx, VkCommandBuffer cmd);

/* The tuners' progress on stderr (--tune): a line redrawn per candidate on
 * a terminal, else one line per op measured. */
void bench_tune_progress(const vkattn_tune_progress *p, void *user);

/* Median of n values (sorts them); n > 0. */
double bench_median(double *v, int n);

#endif
