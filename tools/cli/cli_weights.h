/* vkattn mha --weights: a layer's projection weights and biases by name
 * from a .safetensors file. */
#ifndef VKATTN_CLI_WEIGHTS_H
#define VKATTN_CLI_WEIGHTS_H

#include "cli_io.h"

/* The names a layer's tensors go by. */
typedef enum cli_weight_names {
    CLI_NAMES_AUTO = 0, /* hf's when <prefix>q_proj.weight exists, else torch's */
    CLI_NAMES_TORCH,    /* nn.MultiheadAttention: in_proj_weight (or q/k/v_proj_weight),
                           in_proj_bias, out_proj.weight, out_proj.bias */
    CLI_NAMES_HF,       /* Hugging Face: q_proj, k_proj, v_proj, o_proj .weight / .bias */
} cli_weight_names;

/* Parses --names torch|hf; prints an error and returns -1 otherwise. */
int cli_parse_weight_names(const char *text, cli_weight_names *out);

/* Loads Wq, Wk, Wv, Wo and (those present) bq, bk, bv, bo from `file`,
 * each under `prefix` (NULL: none), into the 8 inputs at `w` in that order
 * (torch names: also bias_k and bias_v, when present, flattened, into
 * bias_rows[0] and [1], labels[8] and [9]):
 * float32 arrays (F16 and BF16 tensors widened exactly), flag "--weights",
 * path "<file>:<tensor name>" (malloc'd into labels[k]; free them after the
 * inputs). Weights must be rank 2, biases rank 1, each F32, F16 or BF16;
 * their sizes are the caller's to check. -1 on failure, printed naming the
 * file and tensor (and, when no name set fits, the file's first tensor
 * names under the prefix). */
int cli_load_weight_file(const char *file, const char *prefix, cli_weight_names names, cli_input *w,
                         cli_input *bias_rows, char **labels);

#endif
