/* attention's --k-dtype, --v-dtype and --quantize-kv: K and V stored on the
 * device in dtypes of their own (f32, f16, bf16, or ggml's blocks: q8_0,
 * q4_0, q4_1, q5_0, q5_1, iq4_nl), read from .npy as float32 (rounded to
 * the dtype, or with --quantize-kv quantized on load) or, for a quantized
 * dtype, as the raw blocks: uint8 [B,Hkv,Tk,D/32*block bytes]. */
#ifndef VKATTN_CLI_KV_INPUTS_H
#define VKATTN_CLI_KV_INPUTS_H

#include "cli_io.h"

typedef struct cli_kv_inputs {
    const char *name[2]; /* --k-dtype, --v-dtype as given (NULL: --dtype's) */
    vkattn_dtype dtype[2];
    bool quantize; /* --quantize-kv */
} cli_kv_inputs;

extern const char cli_kv_inputs_help[];

/* A command's own option: 1 when taken, 0 when not one of these, -1 after
 * printing why the value is wrong. */
int cli_kv_inputs_option(cli_kv_inputs *o, const char *flag, const char *value);
/* --quantize-kv (no value): true when `flag` is it (and it is now set). */
bool cli_kv_inputs_switch(cli_kv_inputs *o, const char *flag);
/* After parsing, with --dtype known: each dtype resolved (default --dtype's),
 * --quantize-kv only with a quantized one, none with --rope-theta (the
 * rotation writes K in --dtype) or --input-bf16 raw blocks. 0, or -1 after
 * printing. */
int cli_kv_inputs_check(cli_kv_inputs *o, vkattn_dtype job_dtype, bool rope, bool input_bf16);
/* Before the job loads its inputs: K and V of raw blocks are read here
 * (cli_kv_inputs_load), not by the job. */
void cli_kv_inputs_prepare(const cli_kv_inputs *o, cli_input *kv[2]);
/* After the job loaded the others: raw blocks read (the array's shape then
 * counts values: its last dimension D, the data blocks), float ones
 * quantized with --quantize-kv, or rounded to a float dtype. 0, or -1 after
 * printing. */
int cli_kv_inputs_load(const cli_kv_inputs *o, cli_input *kv[2]);
/* Input i (0 K, 1 V) on the device, and a tensor over it (its shape the
 * array's). NULL after printing on failure. */
vkattn_buffer *cli_kv_inputs_upload(const cli_kv_inputs *o, int i, vkattn_context *ctx,
                                    const npy_array *a, vkattn_tensor *t);
/* A host tensor over input i for the CPU reference (the same blocks). */
vkattn_host_tensor cli_kv_inputs_host(const cli_kv_inputs *o, int i, const npy_array *a);

#endif
