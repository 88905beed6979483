/* Host <-> buffer copies through the context's staging buffer (transfer.c;
 * the public vkattn_buffer_upload / _download). */
#ifndef VKA_TRANSFER_H
#define VKA_TRANSFER_H

#include "core/context.h"

/* Frees the staging buffer (context destruction). */
void vka_staging_destroy(vkattn_context *ctx);

#endif
