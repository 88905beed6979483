/* Training options of vkattn attention: --dropout and --seed (the forward's
 * dropout), --grad-out DO.npy and --grads PREFIX (the backward's dq, dk and
 * dv written to PREFIX.dq.npy, PREFIX.dk.npy, PREFIX.dv.npy), and their
 * --check against the CPU reference's backward. */
#ifndef VKATTN_CLI_GRADS_H
#define VKATTN_CLI_GRADS_H

#include "cli_io.h"

#include <stdbool.h>
#include <stdint.h>

enum { CLI_GRADS_PATH_MAX = 4096 };

/* The training options attention and mha share (mha's gradients:
 * cli_mha_grads.h). */
typedef struct cli_train {
    float dropout; /* --dropout P, [0, 1) */
    uint64_t seed; /* --seed S */
    bool seed_given;
    const char *prefix; /* --grads PREFIX; NULL: no backward */
} cli_train;

/* --dropout, --seed, --grads: 1 when taken, 0 when not one of them, -1
 * after printing why the value is wrong. */
int cli_train_option(cli_train *t, const char *flag, const char *value);

/* An option the backward (or the dropout pass) does not take: its flag,
 * whether it was given, and why (NULL: "the backward does not take it yet",
 * or the dropout pass's). */
typedef struct cli_grads_conflict {
    const char *flag;
    bool given;
    const char *why;
} cli_grads_conflict;
/* After parsing: --seed only with --dropout, --grads and --grad-out
 * together (`grad_out` the input's path, NULL: not given; `grad_out_text`
 * what it is: "--grad-out DO.npy (the loss's gradient of O)"), and none of
 * `conflicts` given with either. Messages start with `command`. 0, or -1
 * after printing. */
int cli_train_check(const cli_train *t, const char *command, const char *grad_out,
                    const char *grad_out_text, const cli_grads_conflict *conflicts, int n);

typedef struct cli_grads {
    cli_train train;                   /* --dropout, --seed, --grads */
    char paths[3][CLI_GRADS_PATH_MAX]; /* PREFIX.dq.npy, .dk.npy, .dv.npy */
    int64_t shapes[3][4];              /* dq, dk, dv: q's, k's, v's */
    vkattn_buffer *lse;                /* the LSE when --lse-out does not give one */
    vkattn_buffer *buffers[3];
    float *got[3], *ref[3]; /* read back; --check's reference */
} cli_grads;

extern const char cli_grads_help[];

/* After parsing: cli_train_check for attention, then the paths filled. 0,
 * or -1 after printing. */
int cli_grads_check(cli_grads *g, const char *grad_out, const cli_grads_conflict *conflicts, int n);
/* The forward's dropout into its args (device and reference). */
void cli_grads_attention(const cli_grads *g, vkattn_attention_args *a);
void cli_grads_reference(const cli_grads *g, vkattn_ref_attention_args *r);
/* With dropout or a backward and no --lse-out: an LSE buffer of the job's
 * own for args->lse. VKATTN_SUCCESS or the failure. */
vkattn_result cli_grads_lse(cli_grads *g, vkattn_context *ctx, vkattn_attention_args *args);
/* After the forward: the backward of `args` with dout, its gradients read
 * back as f32. VKATTN_SUCCESS or the failure (the context says why). */
vkattn_result cli_grads_run(cli_grads *g, vkattn_context *ctx, const vkattn_attention_args *args,
                            vkattn_tensor dout, vkattn_dtype dtype);
/* --check: the reference's backward of `ref` (its forward's args) with
 * dout, compared elementwise (|got - want| / (1 + |want|), f32 2e-4,
 * 16-bit 2e-2). 0, or 1 after printing. */
int cli_grads_check_reference(cli_grads *g, const vkattn_ref_attention_args *ref,
                              vkattn_host_tensor dout, vkattn_dtype dtype);
/* The three files, to their staged temporaries (`staged` maps a path to
 * it). 0, or 1 after printing. */
int cli_grads_write(const cli_grads *g, const char *const staged[3]);
void cli_grads_free(cli_grads *g);

#endif
