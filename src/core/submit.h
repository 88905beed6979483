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

/* The two entry forms of an op on tensors, from its check and its record:
 * `check` turns the caller's args into a checked call (`call`, the op's own
 * struct); then vka_op_record records it into the caller's `cmd`, and
 * vka_op_submit - having checked before touching the context's command
 * buffer - records, submits and waits. Both begin with vka_check_entry
 * (`fn` names the entry point in messages). */
typedef vkattn_result (*vka_check_fn)(vkattn_context *ctx, const void *args, void *call);
vkattn_result vka_op_record(vkattn_context *ctx, const char *fn, VkCommandBuffer cmd,
                            const void *args, vka_check_fn check, void *call, vka_record_fn record);
vkattn_result vka_op_submit(vkattn_context *ctx, const char *fn, const void *args,
                            vka_check_fn check, void *call, vka_record_fn record);

/* Defines the public pair vkattn_cmd_<op> and vkattn_<op> (declared in
 * vkattn/ops.h) from an op's `check` into a `call_type` and its `record`:
 * every op on tensors has these two forms and nothing else in them. */
#define VKA_OP_ENTRY_POINTS(op, args_type, call_type, check, record)                               \
    vkattn_result vkattn_cmd_##op(vkattn_context *ctx, VkCommandBuffer cmd, const args_type *args) \
    {                                                                                              \
        call_type call;                                                                            \
        return vka_op_record(ctx, "vkattn_cmd_" #op, cmd, args, check, &call, record);             \
    }                                                                                              \
    vkattn_result vkattn_##op(vkattn_context *ctx, const args_type *args)                          \
    {                                                                                              \
        call_type call;                                                                            \
        return vka_op_submit(ctx, "vkattn_" #op, args, check, &call, record);                      \
    }

#endif
