/* vkattn mha --prefill (cli_mha_steps.c). */
#ifndef VKATTN_CLI_MHA_STEPS_H
#define VKATTN_CLI_MHA_STEPS_H

#include "cli.h"

/* --prefill: the first `prefill` tokens of every sequence as one step into a
 * KV cache, then one step per remaining token; views of x and y select the
 * tokens of each step. With --tune the steps are tuned first (the prefill
 * step and the decode steps at the full length) and the tuning saved. */
vkattn_result cli_mha_run_steps(vkattn_context *ctx, vkattn_mha *layer,
                                const vkattn_mha_forward_args *fa, vkattn_dtype dtype,
                                vkattn_dtype kv_dtype, uint32_t prefill, uint32_t paged_block,
                                uint32_t kv_splits, const cli_device_options *o);

#endif
