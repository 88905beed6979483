/* The context's own command buffer (submit.c): the submit-and-wait form of
 * every op. */
#ifndef VKA_SUBMIT_H
#define VKA_SUBMIT_H

#include "core/context.h"

vkattn_result vka_submit_init(vkattn_context *ctx);
void vka_submit_destroy(vkattn_context *ctx);
/* Ends what was recorded since vkattn_commands_begin: submits and waits
 * when `recorded` is VKATTN_SUCCESS, else discards it and returns
 * `recorded` (the submit-and-wait forms of the ops end with this). */
vkattn_result vka_commands_finish(vkattn_context *ctx, vkattn_result recorded);

/* Records something into the command buffer `cmd`; `job` is the caller's. */
typedef vkattn_result (*vka_record_fn)(vkattn_context *ctx, VkCommandBuffer cmd, const void *job);
/* The submit-and-wait form of an op: begins the context's command buffer,
 * records into it with `record`, then submits and waits - or, when
 * recording fails, discards what was recorded and returns its result. */
vkattn_result vka_submit_and_wait(vkattn_context *ctx, vka_record_fn record, const void *job);

#endif
