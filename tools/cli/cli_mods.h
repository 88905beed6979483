/* The score modifiers that attention and mha share (--window, --softcap,
 * --sinks, --alibi-slopes, --alibi-max-bias, --causal-top-left; see
 * "attention semantics" in include/vkattn/ops.h) and the per-head files
 * they read. --causal-top-left and --lse-out are cli_job's (a flag without
 * a value; an output path). */
#ifndef VKATTN_CLI_MODS_H
#define VKATTN_CLI_MODS_H

#include "cli_job.h"

/* The scalar options as given; zeros: none. */
typedef struct cli_mods {
    uint32_t window;      /* --window W; 0: none */
    float softcap;        /* --softcap C */
    float alibi_max_bias; /* --alibi-max-bias B */
} cli_mods;

/* Takes `flag` with its value when it is one of the scalar options above:
 * 1 when taken, 0 when not one, -1 after printing why the value is wrong. */
int cli_mods_option(cli_mods *m, const char *flag, const char *value);
/* After parsing, with the command's --alibi-slopes input:
 * --causal with --causal-top-left, or --alibi-slopes with
 * --alibi-max-bias. -1 after printing, naming both flags. */
int cli_mods_check_given(const cli_mods *m, const cli_job *j, const cli_input *slopes);

/* `ranks` entry of cli_job_load for a per-head file (cli_mods_load_heads). */
#define CLI_HEADS_RANK 0xfffffffeu
/* Loads --sinks or --alibi-slopes: float32, rank 1, every value finite.
 * -1 after printing the flag, the file and the element. */
int cli_mods_load_heads(cli_input *in);
/* Its length is the number of query heads (`what` says where that came
 * from). -1 after printing the file, its length and the heads'. */
int cli_mods_check_heads(const cli_input *in, int64_t heads, const char *what);

/* The causal alignment the options ask for. */
vkattn_causal_align cli_mods_align(const cli_job *j);
/* The scalar modifiers into a call's arguments (tensors come as inputs). */
void cli_mods_attention(const cli_mods *m, const cli_job *j, vkattn_attention_args *args);
void cli_mods_reference(const cli_mods *m, const cli_job *j, vkattn_ref_attention_args *args);
/* ... and into a layer's desc, with its --sinks and --alibi-slopes inputs
 * (their data go to vkattn_mha_weights). */
void cli_mods_desc(const cli_mods *m, const cli_input *sinks, const cli_input *slopes,
                   vkattn_mha_desc *desc);

/* --check of --lse-out: per element |got - want| / (1 + |want|), -inf only
 * where the reference has -inf (a row with nothing visible). Prints the
 * error; 0 within `tol`, else 1 after printing why. */
int cli_mods_check_lse(const float *got, const float *want, int64_t n, double tol);

extern const char cli_mods_help[];

#endif
