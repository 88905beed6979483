/* One run of attention or mha: the options they share, their inputs and
 * outputs on the host and the device, and the order of their steps. */
#ifndef VKATTN_CLI_JOB_H
#define VKATTN_CLI_JOB_H

#include "cli.h"
#include "cli_io.h"

/* The outputs of attention and mha: the attention result and, with
 * --weights-out, the attention weights, with --lse-out (attention) the
 * log-sum-exp of every row; their device buffers, what was read back, and
 * the CPU reference's values for --check. */
typedef struct cli_outputs {
    vkattn_dtype dtype;          /* the result's storage on the device (weights: f32) */
    uint32_t rank, weights_rank; /* weights_rank 0: no --weights-out */
    int64_t shape[4], weights_shape[4];
    int64_t n, weights_n;        /* elements */
    int64_t lse_shape[3], lse_n; /* lse_n 0: no --lse-out */
    vkattn_buffer *buffer, *weights_buffer, *lse_buffer;
    float *out, *weights, *lse;         /* read back */
    float *ref, *ref_weights, *ref_lse; /* --check */
} cli_outputs;

/* One run of attention or mha: the options they share and what they hold
 * from loading the inputs to writing the outputs. The command sets
 * `command`, `inputs`, `bufs` and `n_inputs` (and device.tunable) before
 * parsing; cli_job_end releases the rest. */
typedef struct cli_job {
    const char *command;  /* "attention", "mha": names the command in messages */
    cli_input *inputs;    /* taken by their flags */
    vkattn_buffer **bufs; /* the inputs' device copies, n_inputs entries */
    int n_inputs;
    cli_device_options device;
    const char *out_path;     /* --out */
    const char *weights_path; /* --weights-out */
    const char *lse_path;     /* --lse-out: f32 [B, Hq, Tq] (commands that take it) */
    /* The command's own output files (--weights-png, --save-weights, ...),
     * set after parsing: checked against the other paths, staged and placed
     * with the job's outputs (cli_stage.h); a NULL path is not given. */
    cli_path_use own_outputs[20]; /* mha: 3, and up to 14 of --grads */
    int n_own_outputs;
    bool causal, per_head, check;
    bool causal_top_left;  /* --causal-top-left: causal, queries at i (cli_mods.h) */
    bool mask_true_blocks; /* --mask-true-blocks: a boolean mask's True hides */
    bool seq_first;        /* --seq-first (mha only): [T, B, E] activations */
    bool input_bf16;       /* --input-bf16: uint16 .npy inputs hold bf16 bits */
    vkattn_dtype dtype;    /* --dtype; default f32 */
    /* The command's own options without a value (mha's --report): true
     * when `flag` is one (and it is now set), else false. NULL: none. */
    bool (*own_switch)(void *user, const char *flag);
    vkattn_context *ctx;
    cli_outputs out;
} cli_job;

/* A command's own option with its value: 1 when taken, 0 when the command
 * has no such option, -1 after printing why the value is wrong. */
typedef int (*cli_value_option)(void *user, const char *flag, const char *value);
/* Walks the arguments (cli_parse_args): the device options, the options of
 * cli_job, then the command's own through `own`. CLI_ARGS_OK, or the exit
 * status. */
int cli_job_parse(cli_job *j, int argc, char **argv, const char *help, cli_value_option own,
                  void *user);
/* After parsing: the inputs listed in `required` were given, then `missing`
 * (a flag the command found missing; NULL: none) and --out, --per-head
 * comes with --weights-out, and no output (own_outputs included) names the
 * same file as another output or an input (cli_check_path_collisions); else
 * prints the first that is not so and returns -1. */
int cli_job_check_required(const cli_job *j, const int *required, int n_required,
                           const char *missing);

/* Before any work: every output of the job (the device's, --out,
 * --weights-out, --lse-out, own_outputs) checked and staged in
 * j->device.outputs, so that cli_job_end places all of them or none. 0, or
 * -1 after printing. */
int cli_job_stage_outputs(cli_job *j);
/* Where the job writes the output `path` (its temporary: cli_stage_path). */
const char *cli_job_output_path(const cli_job *j, const char *path);

/* Loads the inputs that were given, in order: input `pad` as a key-padding
 * mask, those of rank CLI_POSITIONS_RANK as positions (cli_rope.h), of rank
 * CLI_HEADS_RANK as per-head values (cli_mods.h), the others float32 of rank
 * ranks[k] (0: any 1..4). -1 on failure (printed). */
int cli_job_load(cli_job *j, const uint32_t *ranks, int pad);
/* Uploads, in order, the given inputs that have a slot (slots[k] NULL: not
 * on the device) and points the slot at a tensor over the copy: float32 data
 * stored as --dtype, except input `mask`, which stays f32 (it is additive,
 * and -inf must survive), and inputs that keep f32. -1 on failure (printed). */
int cli_job_upload(cli_job *j, vkattn_tensor *const *slots, int mask);
/* The convention of a boolean mask (--mask-true-blocks). */
vkattn_bool_mask cli_job_bool_mask(const cli_job *j);
/* Host tensors over the given inputs that have a slot, for the CPU
 * reference: f32, u8 for a key-padding mask, int32 for positions. */
void cli_job_host_inputs(const cli_job *j, vkattn_host_tensor *const *slots);

/* The result's shape (its first dimension the batch), the weights':
 * [B, Tq, Tk] averaged over heads, or with --per-head [B, H, Tq, Tk], and
 * with --lse-out the LSE's: [B, H, Tq]. */
void cli_job_shape_outputs(cli_job *j, uint32_t rank, const int64_t *shape, int64_t heads,
                           int64_t tq, int64_t tk);
/* Device buffers for the outputs, and tensors over them in *out, (with
 * --weights-out) *weights and (with --lse-out) *lse. -1 on failure,
 * reported naming the inputs. */
int cli_job_create_outputs(cli_job *j, vkattn_tensor *out, vkattn_tensor *weights,
                           vkattn_tensor *lse);
/* Reads the outputs back. -1 on failure (printed). */
int cli_job_download(cli_job *j);
/* --check: room for the reference's values, and host tensors over it in
 * *out, (when weights were read back) *weights and (LSE) *lse. -1 on
 * failure (printed). */
int cli_job_reference(cli_job *j, vkattn_host_tensor *out, vkattn_host_tensor *weights,
                      vkattn_host_tensor *lse);
/* --check, once the reference ran: cli_check_report on the outputs, then
 * cli_mods_check_lse on the LSE. */
int cli_job_compare(const cli_job *j);

/* A step of a command, given the `user` of cli_job_run: 0, or nonzero after
 * printing why it failed. */
typedef int (*cli_job_step)(void *user);
/* Stages the outputs, loads the inputs, opens the context, runs the command,
 * checks it (with --check) and writes the outputs to their temporaries; each
 * step only when the ones before succeeded. cli_job_end places them (or,
 * after any failure, removes them). 0 on success, else 1. */
int cli_job_run(cli_job *j, cli_job_step load, cli_job_step run, cli_job_step check, void *user);
/* Frees the inputs and outputs, closes the context, then places the staged
 * outputs when `status` is 0 and closing went well, else removes them
 * (cli_close); returns `status`, or 1 when closing or placing failed. */
int cli_job_end(cli_job *j, int status);

#endif
