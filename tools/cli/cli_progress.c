/* The tuners' progress on stderr (--tune): on a terminal one line redrawn
 * per candidate; otherwise one line per op measured, so logs stay short;
 * nothing with --quiet. */
#include "cli.h"

#include <stdio.h>
#include <unistd.h>

static void print_progress(const vkattn_tune_progress *p, void *user)
{
    (void)user;
    if (isatty(STDERR_FILENO)) {
        /* \r and erase-to-end: the line is redrawn in place */
        if (p->done)
            fprintf(stderr, "\r\033[Kvkattn: tuned %s %s: %u candidates, best %.3f ms\n", p->op,
                    p->shape, p->count, (double)p->best_ms);
        else
            fprintf(stderr, "\r\033[Kvkattn: tuning %s %s: candidate %u/%u", p->op, p->shape,
                    p->candidate, p->count);
        fflush(stderr);
    } else if (p->done) {
        fprintf(stderr, "vkattn: tuned %s %s: %u candidates, best %.3f ms\n", p->op, p->shape,
                p->count, (double)p->best_ms);
    }
}

vkattn_tune_progress_fn cli_tune_progress(const cli_device_options *o)
{
    return o->quiet ? NULL : print_progress;
}
