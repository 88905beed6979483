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

#endif
