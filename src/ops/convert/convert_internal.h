/* The convert op's own files: checks and entry points (convert_api.c),
 * recording (convert_record.c). */
#ifndef VKA_CONVERT_INTERNAL_H
#define VKA_CONVERT_INTERNAL_H

#include "core/context.h"

/* Records dst = scale * src for checked, contiguous tensors of the same
 * element count (scale resolved: 0 is not "1" here). */
vkattn_result vka_convert_record(vkattn_context *ctx, VkCommandBuffer cmd, const vkattn_tensor *src,
                                 const vkattn_tensor *dst, float scale);

#endif
