/* The size report of a layer (mha --report, info --layer): its parameters
 * and weight bytes, and its KV cache's bytes per token and for a context,
 * beside the same layer as MHA, GQA and MQA; every figure from the
 * library's calls (vkattn_mha_param_count, vkattn_kv_cache_memory). */
#ifndef VKATTN_CLI_REPORT_H
#define VKATTN_CLI_REPORT_H

#include "cli_messages.h"
#include "vkattn.h"

#include <stdio.h>

/* Context length of the report when none is given (--context). */
#define CLI_REPORT_CONTEXT 4096u

/* Prints the report of `desc` for `context` tokens to `f`. 0, or -1 after
 * printing why the desc is refused: the library's message in `terms`
 * (cli_messages.h), after `source` (what gave the shape: "--layer 64,8,5"). */
int cli_layer_report(FILE *f, const vkattn_mha_desc *desc, uint64_t context, const char *source,
                     const cli_term *terms);

/* Parses --layer "Dm,H,Hkv[,Dh]" into a desc (f32, no bias). 0, or -1
 * after printing what is wrong. */
int cli_parse_layer(const char *text, vkattn_mha_desc *out);

#endif
