/* The rotary-position options that attention and mha share (--rope-theta,
 * --rope-dims, --rope-style, --rope-linear, --rope-llama3) and the
 * positions files (--positions, --k-positions). */
#ifndef VKATTN_CLI_ROPE_H
#define VKATTN_CLI_ROPE_H

#include "cli_io.h"

/* The options as given; rope.theta 0: no rotary embedding. */
typedef struct cli_rope_options {
    vkattn_rope_desc rope;
    const char *scaling_flag; /* --rope-linear or --rope-llama3, whichever came */
    const char *first_flag;   /* the first --rope-* option other than --rope-theta */
} cli_rope_options;

/* Takes `flag` with its value when it is a --rope-* option: 1 when taken,
 * 0 when not one, -1 after printing why the value is wrong. */
int cli_rope_option(cli_rope_options *o, const char *flag, const char *value);
/* After parsing: a --rope-* option came without --rope-theta, or
 * `positions` (the flag of a positions file given, NULL: none) did: -1
 * after printing, naming the flag. */
int cli_rope_check_given(const cli_rope_options *o, const char *command, const char *positions);
/* Once the head dimension is known (`source` says where it came from):
 * --rope-dims is at most it. -1 after printing. */
int cli_rope_check_head_dim(const cli_rope_options *o, int64_t head_dim, const char *source);

/* `ranks` entry of cli_job_load for a positions file (cli_load_positions). */
#define CLI_POSITIONS_RANK 0xffffffffu
/* Loads a positions file: int32 or int64 (converted to int32), rank 2,
 * every value in [0, VKATTN_ROPE_MAX_POSITION]. -1 after printing the
 * file and the element. */
int cli_load_positions(cli_input *in);
/* Its shape is [batch, tokens] (`what` names the tokens: "--x's tokens").
 * -1 after printing the file, the shape found and the shape needed. */
int cli_check_positions_shape(const cli_input *in, int64_t batch, int64_t tokens, const char *what);

extern const char cli_rope_help[];

#endif
