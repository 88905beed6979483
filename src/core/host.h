/* Host services every part of the library calls: host memory through the
 * context's allocator, errors (the last-error string and the logger), log
 * messages and the context's lock. They only read and write the context's
 * own fields, so any subsystem may use them without depending on another. */
#ifndef VKA_HOST_H
#define VKA_HOST_H

#include "core/context.h"
#include "spec/error_text.h"

#if defined(__GNUC__)
#define VKA_PRINTF(fmt_index, args_index) __attribute__((format(printf, fmt_index, args_index)))
#else
#define VKA_PRINTF(fmt_index, args_index)
#endif

extern const vkattn_allocator vka_default_allocator;

void *vka_alloc(vkattn_context *ctx, size_t size); /* zeroed */
void vka_free(vkattn_context *ctx, void *p);

/* Formats the message into the last-error string, sends it to the logger and
 * returns `code`. Use as `return vka_fail(ctx, VKATTN_ERROR_..., "...")`. */
vkattn_result vka_fail(vkattn_context *ctx, vkattn_result code, const char *fmt, ...)
    VKA_PRINTF(3, 4);
/* Maps a VkResult to a vkattn_result and records "<what> failed: VK_ERROR_..". */
vkattn_result vka_fail_vk(vkattn_context *ctx, VkResult vr, const char *what);
void vka_log(vkattn_context *ctx, vkattn_log_level level, const char *fmt, ...) VKA_PRINTF(3, 4);
/* The context's lock (see struct vkattn_context); recursive, as failures
 * inside locked regions record their message through it. */
void vka_lock(vkattn_context *ctx);
bool vka_lock_init(vkattn_context *ctx); /* false: the lock could not be made */
void vka_lock_destroy(vkattn_context *ctx);
void vka_unlock(vkattn_context *ctx);

/* The checks every entry point starts with: a NULL context is
 * VKATTN_ERROR_INVALID_ARGUMENT without a message (there is nowhere to keep
 * one); then cmd (for the vkattn_cmd_* forms: `needs_cmd`) and args, each
 * refused by name ("vkattn_cmd_linear: cmd is NULL"). */
vkattn_result vka_check_entry(vkattn_context *ctx, const char *fn, bool needs_cmd,
                              VkCommandBuffer cmd, const void *args);

/* "VK_ERROR_DEVICE_LOST" (result.c). */
const char *vka_vk_result_name(VkResult vr);

#endif
