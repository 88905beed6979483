/* vkattn_cmd_attention and vkattn_attention: a call is checked and
 * recorded as one problem (attention_api.c, attention_record.c) or, packed
 * (args->sequences > 0), as one problem per sequence (attention_packed.c). */
#include "ops/attention/attention_internal.h"

#include "core/submit.h"

/* One call as the entry points hold it between checking and recording:
 * the caller's args (alive for the whole call) and the checked problem. */
typedef struct att_call {
    const vkattn_attention_args *args;
    vka_att_problem p;
} att_call;

static vkattn_result check_call(vkattn_context *ctx, const void *args, void *call)
{
    att_call *c = call;
    c->args = args;
    VKA_TRY(c->args && c->args->sequences ? vka_att_packed_validate(ctx, c->args, &c->p)
                                          : vka_att_validate(ctx, c->args, &c->p));
    return vka_att_dropout_check(ctx, c->args, &c->p);
}

static vkattn_result record_call(vkattn_context *ctx, VkCommandBuffer cmd, const void *call)
{
    const att_call *c = call;
    if (c->args->sequences)
        return vka_att_packed_record(ctx, cmd, c->args, &c->p);
    VKA_TRY(vka_att_record(ctx, cmd, &c->p));
    if (c->args->dropout_p == 0.0f)
        return VKATTN_SUCCESS;
    return vka_att_record_dropout(ctx, cmd, &c->p, c->args->dropout_p, c->args->dropout_seed);
}

/* vkattn_cmd_attention and vkattn_attention */
VKA_OP_ENTRY_POINTS(attention, vkattn_attention_args, att_call, check_call, record_call)
