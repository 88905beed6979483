/* Host services of a context: host memory, errors and log messages, the
 * lock (see core/host.h). */
#include "core/host.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------ host allocation */

static void *default_allocate(void *user, size_t size, size_t alignment)
{
    (void)user;
    if (alignment < sizeof(void *))
        alignment = sizeof(void *);
    void *p = NULL;
    return posix_memalign(&p, alignment, size ? size : 1) == 0 ? p : NULL;
}

static void default_free(void *user, void *memory)
{
    (void)user;
    free(memory);
}

const vkattn_allocator vka_default_allocator = {default_allocate, default_free, NULL};

void *vka_alloc(vkattn_context *ctx, size_t size)
{
    void *p = ctx->allocator.allocate(ctx->allocator.user, size, 16);
    if (p)
        memset(p, 0, size);
    return p;
}

void vka_free(vkattn_context *ctx, void *p)
{
    if (p)
        ctx->allocator.free(ctx->allocator.user, p);
}

/* --------------------------------------------------------------- errors */

void vka_log(vkattn_context *ctx, vkattn_log_level level, const char *fmt, ...)
{
    if (!ctx->log)
        return;
    char message[VKA_ERROR_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(message, sizeof message, fmt, ap);
    va_end(ap);
    ctx->log(ctx->log_user, level, message);
}

vkattn_result vka_fail(vkattn_context *ctx, vkattn_result code, const char *fmt, ...)
{
    char message[VKA_ERROR_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(message, sizeof message, fmt, ap);
    va_end(ap);
    vka_lock(ctx);
    memcpy(ctx->last_error, message, sizeof message);
    vka_unlock(ctx);
    if (ctx->log) /* outside the lock: the logger may call back into vkattn */
        ctx->log(ctx->log_user, VKATTN_LOG_ERROR, message);
    return code;
}

bool vka_lock_init(vkattn_context *ctx)
{
    pthread_mutexattr_t attr;
    if (pthread_mutexattr_init(&attr) != 0)
        return false;
    ctx->lock_ready = pthread_mutexattr_settype(&attr, PTHREAD_MUTEX_RECURSIVE) == 0 &&
                      pthread_mutex_init(&ctx->lock, &attr) == 0;
    pthread_mutexattr_destroy(&attr);
    return ctx->lock_ready;
}

void vka_lock_destroy(vkattn_context *ctx)
{
    if (ctx->lock_ready)
        pthread_mutex_destroy(&ctx->lock);
    ctx->lock_ready = false;
}

void vka_lock(vkattn_context *ctx)
{
    if (ctx->lock_ready)
        pthread_mutex_lock(&ctx->lock);
}

void vka_unlock(vkattn_context *ctx)
{
    if (ctx->lock_ready)
        pthread_mutex_unlock(&ctx->lock);
}

vkattn_result vka_fail_vk(vkattn_context *ctx, VkResult vr, const char *what)
{
    vkattn_result code = VKATTN_ERROR_VULKAN;
    if (vr == VK_ERROR_OUT_OF_HOST_MEMORY)
        code = VKATTN_ERROR_OUT_OF_HOST_MEMORY;
    else if (vr == VK_ERROR_OUT_OF_DEVICE_MEMORY)
        code = VKATTN_ERROR_OUT_OF_DEVICE_MEMORY;
    else if (vr == VK_ERROR_DEVICE_LOST)
        code = VKATTN_ERROR_DEVICE_LOST;
    return vka_fail(ctx, code, "%s failed: %s", what, vka_vk_result_name(vr));
}

vkattn_result vka_check_entry(vkattn_context *ctx, const char *fn, bool needs_cmd,
                              VkCommandBuffer cmd, const void *args)
{
    if (!ctx)
        return VKATTN_ERROR_INVALID_ARGUMENT;
    if ((needs_cmd && !cmd) || !args)
        return vka_fail(ctx, VKATTN_ERROR_INVALID_ARGUMENT, "%s: %s is NULL", fn,
                        needs_cmd && !cmd ? "cmd" : "args");
    return VKATTN_SUCCESS;
}

const char *vkattn_context_last_error(const vkattn_context *ctx)
{
    return ctx ? ctx->last_error : "ctx is NULL";
}
