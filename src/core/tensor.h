/* Tensor views on buffers (tensor.c): defaults resolved and checked
 * against their buffer. */
#ifndef VKA_TENSOR_H
#define VKA_TENSOR_H

#include "core/context.h"

/* Resolves default strides and checks the tensor against its buffer.
 * `what` names the argument in messages ("args->src"). */
vkattn_result vka_tensor_resolve(vkattn_context *ctx, const vkattn_tensor *t, const char *what,
                                 vkattn_tensor *out);
bool vka_tensor_is_contiguous(const vkattn_tensor *t);
/* vka_tensor_resolve for an operand that may also be quantized (q8_0,
 * q4_0): such a tensor is contiguous rows of whole pairs of blocks (the last
 * dimension a multiple of 64, strides default or exactly the contiguous
 * ones) at an offset that is a multiple of `align` bytes, so windows can
 * start at block boundaries. Other dtypes go to vka_tensor_resolve. */
vkattn_result vka_tensor_resolve_blocks(vkattn_context *ctx, const vkattn_tensor *t,
                                        const char *what, uint64_t align, vkattn_tensor *out);
/* A quantized tensor read through the kernels' word readers (attention's k
 * and v): strides count values, rows are whole blocks (the last stride 1,
 * the others multiples of 32: vka_quant_strides_check), the offset a
 * multiple of `align` bytes (it is bound from there). */
vkattn_result vka_tensor_resolve_quant(vkattn_context *ctx, const vkattn_tensor *t,
                                       const char *what, uint64_t align, vkattn_tensor *out);

/* The checks the ops share, on resolved tensors; `name` names the tensor in
 * messages ("args->q"). */

/* Bytes [*begin, *end) the tensor spans: its first element to one past its
 * last. */
void vka_tensor_bytes(const vkattn_tensor *t, uint64_t *begin, uint64_t *end);
/* `t` (named `name` in messages) holds f32 or f16; `op` names the op
 * ("vkattn_convert", "the linear op"). */
vkattn_result vka_tensor_check_float(vkattn_context *ctx, const vkattn_tensor *t, const char *name,
                                     const char *op);
/* Rows the kernels read and write several elements at a time: the last
 * dimension contiguous (stride 1, free where it has one element), the other
 * strides multiples of `stride_multiple` elements, the offset a multiple of
 * `offset_multiple` bytes. */
vkattn_result vka_tensor_check_rows(vkattn_context *ctx, const vkattn_tensor *t, const char *name,
                                    uint32_t stride_multiple, uint32_t offset_multiple);
/* An output: distinct indices address distinct elements (no zero stride
 * over a dimension larger than 1, no strides that interleave). */
vkattn_result vka_tensor_check_output(vkattn_context *ctx, const vkattn_tensor *t,
                                      const char *name);
/* `t` has `like`'s rank and shape (a gradient and its tensor): the
 * message names the first dimension that differs. */
vkattn_result vka_tensor_check_shape_as(vkattn_context *ctx, const vkattn_tensor *t,
                                        const char *name, const vkattn_tensor *like,
                                        const char *like_name);
/* An output and another tensor in the same buffer must not share a byte. */
vkattn_result vka_tensor_check_disjoint(vkattn_context *ctx, const vkattn_tensor *out,
                                        const char *out_name, const vkattn_tensor *other,
                                        const char *other_name);

#endif
