/* The library's messages in the terms of the CLI's user: the library names
 * its argument structs ("args->k.shape[1]", "desc->num_kv_heads"), for
 * library callers; the CLI speaks of its options, files and the files'
 * dimensions instead. */
#ifndef VKATTN_CLI_MESSAGES_H
#define VKATTN_CLI_MESSAGES_H

#include "cli_io.h"

/* A name in the library's messages and what the CLI's user knows it as. */
typedef struct cli_term {
    const char *library; /* "desc->num_kv_heads" */
    const char *user;    /* "--kv-heads" */
} cli_term;

/* The terms of the attention and mha commands; NULL-terminated. */
extern const cli_term cli_command_terms[];
/* The terms of info --layer Dm,H,Hkv[,Dh]; NULL-terminated. */
extern const cli_term cli_layer_terms[];

/* `msg` into `out`: "args-><input>" as the input's flag and file, with
 * ".shape[d]" as "dimension d' of" it (d' the file's own dimension, after
 * cli_input_swap_dims), "[i]" as "element i of" it (the offsets),
 * ".rank" and ".dtype" likewise; then `terms`
 * (NULL: none); any struct name left ("args->batch") loses its prefix. */
void cli_translate(const char *msg, const cli_input *inputs, int n_inputs, const cli_term *terms,
                   char *out, size_t size);
/* The context's last error, translated with cli_command_terms, printed with
 * the result's name. */
void cli_report_error(vkattn_context *ctx, vkattn_result r, const cli_input *inputs, int n_inputs);

#endif
