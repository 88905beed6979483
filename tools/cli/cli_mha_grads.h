/* Training options of vkattn mha: --dropout and --seed (the layer's
 * forward's dropout), --grad-out DY.npy and --grads PREFIX (the layer's
 * backward: dx, dkv, dvalue and every weight's gradient, one file each,
 * Hugging Face names), and their --check against the CPU reference's
 * backward. */
#ifndef VKATTN_CLI_MHA_GRADS_H
#define VKATTN_CLI_MHA_GRADS_H

#include "cli_grads.h"

/* The files of --grads, in this order: PREFIX.<name>.npy. */
enum {
    CLI_MHA_DX,
    CLI_MHA_DKV,    /* with --kv or --key */
    CLI_MHA_DVALUE, /* with --value */
    CLI_MHA_DWQ,    /* q_proj.weight .. o_proj.weight */
    CLI_MHA_DWK,
    CLI_MHA_DWV,
    CLI_MHA_DWO,
    CLI_MHA_DBQ, /* q_proj.bias .. o_proj.bias: the layer has biases */
    CLI_MHA_DBK,
    CLI_MHA_DBV,
    CLI_MHA_DBO,
    CLI_MHA_DQN, /* q_norm.weight, k_norm.weight: QK-norm */
    CLI_MHA_DKN,
    CLI_MHA_DSINKS, /* sinks: --sinks */
    CLI_MHA_GRADS
};

typedef struct cli_mha_grads {
    cli_train train; /* --dropout, --seed, --grads */
    /* PREFIX.<name>.npy of the files this run may write (malloc'd; NULL:
     * not); the layer's biases are known only once --weights is read, so
     * theirs are staged whenever it could have them */
    char *paths[CLI_MHA_GRADS];
    uint32_t ranks[CLI_MHA_GRADS];
    int64_t shapes[CLI_MHA_GRADS][3];
    vkattn_buffer *buffers[CLI_MHA_GRADS]; /* during cli_mha_grads_run only */
    float *got[CLI_MHA_GRADS], *ref[CLI_MHA_GRADS];
} cli_mha_grads;

typedef struct mha_job mha_job; /* cli_mha_job.h */

extern const char cli_mha_grads_help[];

/* After parsing (--key already moved to --kv): cli_train_check, the
 * options the backward does not take, and the files named and added to
 * the job's outputs. 0, or -1 after printing. */
int cli_mha_grads_check(mha_job *m);
/* After loading: --grad-out's shape against --x's. 0, or -1 after
 * printing. */
int cli_mha_grads_check_input(const mha_job *m);
/* The forward's dropout into its args (device and reference). */
void cli_mha_grads_forward(const cli_mha_grads *g, vkattn_mha_forward_args *a);
void cli_mha_grads_reference(const cli_mha_grads *g, vkattn_ref_mha_args *r);
/* After the forward `fa`: DY uploaded, the layer's backward, its gradients
 * read back (their device buffers gone again). 0, or -1 after printing. */
int cli_mha_grads_run(mha_job *m, const vkattn_mha_forward_args *fa);
/* --check: the reference's backward of `ref` (its forward's args, `w` the
 * weights) compared elementwise (|got - want| / (1 + |want|), f32 2e-4,
 * 16-bit 2e-2), one line per gradient. 0, or 1 after printing. */
int cli_mha_grads_check_reference(mha_job *m, const vkattn_mha_weights *w,
                                  const vkattn_ref_mha_args *ref);
/* The computed gradients to their staged temporaries. 0, or 1 after
 * printing. */
int cli_mha_grads_write(const mha_job *m);
/* Frees what cli_mha_grads holds, after cli_job_end has placed the files
 * (it reads their paths); its device buffers live in cli_mha_grads_run
 * alone. */
void cli_mha_grads_free(cli_mha_grads *g);

#endif
