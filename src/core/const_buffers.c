/* Constant buffers kept per context under a key (see const_buffers.h): a
 * short list guarded by the context's lock; each buffer is made and filled
 * outside the lock, and when two threads race for one key the first one in
 * wins (as with the dummy buffer, core/record.c). */
#include "core/const_buffers.h"

#include "core/buffer.h"
#include "core/host.h"
#include "spec/size_math.h"

#include <string.h>

struct vka_const_buffers {
    struct vka_const_buffers *next;
    vkattn_buffer *buffer;
    size_t key_size;
    unsigned char key[]; /* key_size bytes */
};

typedef struct vka_const_buffers entry;

/* The entry of `key`, or NULL; `*count` gets the number of entries. Under
 * the lock. */
static entry *find(vkattn_context *ctx, const void *key, size_t key_size, uint32_t *count)
{
    *count = 0;
    for (entry *e = ctx->const_buffers; e; e = e->next, ++*count)
        if (e->key_size == key_size && memcmp(e->key, key, key_size) == 0)
            return e;
    return NULL;
}

/* A buffer in host-visible coherent memory, mapped: the context's buffer
 * memory where that is host-visible (unified memory), else the staging
 * type. */
static vkattn_result make_mapped(vkattn_context *ctx, uint64_t bytes, vkattn_buffer **out)
{
    vkattn_buffer *b = vka_alloc(ctx, sizeof *b);
    if (!b)
        return vka_fail(ctx, VKATTN_ERROR_OUT_OF_HOST_MEMORY, "out of host memory");
    b->ctx = ctx;
    b->size = bytes;
    b->vk_size = vka_align_up(bytes, 16);
    b->owned = true;
    uint32_t type = ctx->buffers_mapped ? ctx->buffer_memory_type : ctx->staging_memory_type;
    bool host_visible = false;
    vkattn_result r = vka_buffer_make(ctx, b->vk_size, VK_BUFFER_USAGE_STORAGE_BUFFER_BIT, type,
                                      &b->buffer, &b->memory, &host_visible);
    if (r == VKATTN_SUCCESS && !host_visible)
        r = vka_fail(ctx, VKATTN_ERROR_UNSUPPORTED,
                     "no host-visible memory type takes a storage buffer of %llu bytes",
                     (unsigned long long)bytes);
    if (r == VKATTN_SUCCESS) {
        VkResult vr = ctx->vk.vkMapMemory(ctx->device, b->memory, 0, VK_WHOLE_SIZE, 0, &b->map);
        if (vr != VK_SUCCESS)
            r = vka_fail_vk(ctx, vr, "vkMapMemory (constant buffer)");
    }
    if (r != VKATTN_SUCCESS) {
        vkattn_buffer_destroy(b);
        return r;
    }
    *out = b;
    return VKATTN_SUCCESS;
}

vkattn_result vka_const_buffer_get(vkattn_context *ctx, const void *key, size_t key_size,
                                   uint64_t bytes, vka_const_fill_fn fill, const void *user,
                                   vkattn_buffer **out)
{
    uint32_t count;
    vka_lock(ctx);
    entry *e = find(ctx, key, key_size, &count);
    *out = e ? e->buffer : NULL;
    vka_unlock(ctx);
    if (*out)
        return VKATTN_SUCCESS;
    if (count >= VKA_CONST_BUFFERS_MAX)
        return vka_fail(ctx, VKATTN_ERROR_OUT_OF_RANGE,
                        "the context already keeps %u constant tables (one per distinct RoPE "
                        "desc): use fewer distinct descs per context",
                        count);
    entry *made = vka_alloc(ctx, sizeof *made + key_size);
    if (!made)
        return vka_fail(ctx, VKATTN_ERROR_OUT_OF_HOST_MEMORY, "out of host memory");
    vkattn_result r = make_mapped(ctx, bytes, &made->buffer);
    if (r != VKATTN_SUCCESS) {
        vka_free(ctx, made);
        return r;
    }
    fill(made->buffer->map, bytes, user);
    made->key_size = key_size;
    memcpy(made->key, key, key_size);

    vka_lock(ctx);
    e = find(ctx, key, key_size, &count);
    if (!e) {
        made->next = ctx->const_buffers;
        ctx->const_buffers = made;
        e = made;
        made = NULL;
    }
    *out = e->buffer;
    vka_unlock(ctx);
    if (made) { /* another thread stored the same table first */
        vkattn_buffer_destroy(made->buffer);
        vka_free(ctx, made);
    }
    return VKATTN_SUCCESS;
}

void vka_const_buffers_destroy(vkattn_context *ctx)
{
    for (entry *e = ctx->const_buffers, *next; e; e = next) {
        next = e->next;
        vkattn_buffer_destroy(e->buffer);
        vka_free(ctx, e);
    }
    ctx->const_buffers = NULL;
}
