/* Tensor views on buffers (tensor.c): defaults resolved and checked
 * against their buffer. */
#ifndef VKA_TENSOR_H
#define VKA_TENSOR_H

#include "core/context.h"

/* Resolves default strides and checks the tensor against its buffer.
 * `what` names the argument in messages ("args->src"). */
vkattn_result vka_tensor_resolve(vkattn_context *ctx, const vkattn_tensor *t,
                                    const char *what, vkattn_tensor *out);
bool vka_tensor_is_contiguous(const vkattn_tensor *t);

#endif
