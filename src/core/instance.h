/* The standalone context's VkInstance and the validation messenger
 * (instance.c). */
#ifndef VKA_INSTANCE_H
#define VKA_INSTANCE_H

#include "core/context.h"

/* `gipa`: the loader's entry point (NULL: the vkGetInstanceProcAddr the
 * library links). */
vkattn_result vka_instance_create(vkattn_context *ctx, bool validation,
                                  PFN_vkGetInstanceProcAddr gipa);
vkattn_result vka_messenger_attach(vkattn_context *ctx);
void vka_fill_messenger_info(vkattn_context *ctx, VkDebugUtilsMessengerCreateInfoEXT *info);

#endif
