/* Descriptor sets cached by content. A set is written once, for one exact
 * list of (buffer, offset, range[, view format]) bindings, and never changed
 * afterwards, so the same set may be used by any number of command buffers at
 * once with no lifetime tracking. Sets (and the texel-buffer views they use)
 * are dropped when a buffer they reference is destroyed - at which point the
 * caller guarantees the GPU no longer uses that buffer. This works on every
 * device, with no push-descriptor extension. */
#include "core/descriptors.h"

#include "core/buffer.h"
#include "core/host.h"

#include <string.h>

#define SETS_PER_POOL 64u

/* Keys are compared as bytes, so they are built zero-initialised. */
typedef struct set_key {
    VkDescriptorSetLayout layout;
    uint32_t count;
    uint32_t pad;
    struct {
        VkBuffer buffer;
        uint64_t offset;
        uint64_t range;
        uint64_t format; /* VkFormat for texel bindings, 0 for storage */
    } b[VKA_MAX_BINDINGS];
} set_key;

typedef struct view_key {
    VkBuffer buffer;
    uint64_t offset;
    uint64_t range;
    uint64_t format;
} view_key;

typedef struct entry {
    struct entry *next;
    uint64_t hash;
    union {
        set_key set;
        view_key view;
    } key;
    VkDescriptorSet set;
    VkDescriptorPool pool;
    VkBufferView view;
} entry;

typedef struct table {
    entry **buckets;
    uint32_t bucket_count; /* power of two */
    uint32_t count;
} table;

struct vka_descriptor_cache {
    table sets;
    table views;
    VkDescriptorPool *pools;
    uint32_t pool_count;
};

static uint64_t hash_bytes(const void *p, size_t n)
{
    const unsigned char *s = p;
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (size_t i = 0; i < n; i++)
        h = (h ^ s[i]) * 1099511628211ull;
    return h;
}

static bool table_rehash(vkattn_context *ctx, table *t)
{
    uint32_t n = t->bucket_count ? t->bucket_count * 2 : 64;
    entry **buckets = vka_alloc(ctx, n * sizeof *buckets);
    if (!buckets)
        return false;
    for (uint32_t i = 0; i < t->bucket_count; i++)
        for (entry *e = t->buckets[i], *next; e; e = next) {
            next = e->next;
            e->next = buckets[e->hash & (n - 1)];
            buckets[e->hash & (n - 1)] = e;
        }
    vka_free(ctx, t->buckets);
    t->buckets = buckets;
    t->bucket_count = n;
    return true;
}

static entry *table_find(table *t, uint64_t hash, const void *key, size_t key_size)
{
    if (!t->bucket_count)
        return NULL;
    for (entry *e = t->buckets[hash & (t->bucket_count - 1)]; e; e = e->next)
        if (e->hash == hash && memcmp(&e->key, key, key_size) == 0)
            return e;
    return NULL;
}

static entry *table_insert(vkattn_context *ctx, table *t, uint64_t hash, const void *key,
                           size_t key_size)
{
    if (t->count >= t->bucket_count && !table_rehash(ctx, t))
        return NULL;
    entry *e = vka_alloc(ctx, sizeof *e);
    if (!e)
        return NULL;
    e->hash = hash;
    memcpy(&e->key, key, key_size);
    e->next = t->buckets[hash & (t->bucket_count - 1)];
    t->buckets[hash & (t->bucket_count - 1)] = e;
    t->count++;
    return e;
}

vkattn_result vka_descriptors_init(vkattn_context *ctx)
{
    ctx->descriptors = vka_alloc(ctx, sizeof *ctx->descriptors);
    return ctx->descriptors ? VKATTN_SUCCESS
                            : vka_fail(ctx, VKATTN_ERROR_OUT_OF_HOST_MEMORY, "out of host memory");
}

static void release(vkattn_context *ctx, entry *e, bool is_view)
{
    if (is_view)
        ctx->vk.vkDestroyBufferView(ctx->device, e->view, ctx->vk_allocator);
    else
        ctx->vk.vkFreeDescriptorSets(ctx->device, e->pool, 1, &e->set);
    vka_free(ctx, e);
}

/* Removes (and releases) every entry for which `match` holds; all when NULL. */
static void table_remove_if(vkattn_context *ctx, table *t, bool is_view, VkBuffer buffer)
{
    for (uint32_t i = 0; i < t->bucket_count; i++) {
        entry **link = &t->buckets[i];
        while (*link) {
            entry *e = *link;
            bool match = buffer == VK_NULL_HANDLE;
            if (!match && is_view)
                match = e->key.view.buffer == buffer;
            for (uint32_t j = 0; !match && !is_view && j < e->key.set.count; j++)
                match = e->key.set.b[j].buffer == buffer;
            if (match) {
                *link = e->next;
                t->count--;
                release(ctx, e, is_view);
            } else {
                link = &e->next;
            }
        }
    }
}

void vka_descriptors_destroy(vkattn_context *ctx)
{
    vka_descriptor_cache *c = ctx->descriptors;
    if (!c)
        return;
    table_remove_if(ctx, &c->sets, false, VK_NULL_HANDLE);
    table_remove_if(ctx, &c->views, true, VK_NULL_HANDLE);
    for (uint32_t i = 0; i < c->pool_count; i++)
        ctx->vk.vkDestroyDescriptorPool(ctx->device, c->pools[i], ctx->vk_allocator);
    vka_free(ctx, c->pools);
    vka_free(ctx, c->sets.buckets);
    vka_free(ctx, c->views.buckets);
    vka_free(ctx, c);
    ctx->descriptors = NULL;
}

void vka_descriptors_forget_buffer(vkattn_context *ctx, VkBuffer buffer)
{
    vka_descriptor_cache *c = ctx->descriptors;
    if (!c || buffer == VK_NULL_HANDLE)
        return;
    vka_lock(ctx);
    table_remove_if(ctx, &c->sets, false, buffer); /* sets first: they use the views */
    table_remove_if(ctx, &c->views, true, buffer);
    vka_unlock(ctx);
}

static vkattn_result view_get(vkattn_context *ctx, const vka_binding *b, VkBufferView *out)
{
    vka_descriptor_cache *c = ctx->descriptors;
    view_key key;
    memset(&key, 0, sizeof key);
    key.buffer = b->buffer->buffer;
    key.offset = b->offset;
    key.range = b->range;
    key.format = (uint64_t)b->format;
    uint64_t h = hash_bytes(&key, sizeof key);
    entry *e = table_find(&c->views, h, &key, sizeof key);
    if (!e) {
        VkBufferViewCreateInfo vi = {
            .sType = VK_STRUCTURE_TYPE_BUFFER_VIEW_CREATE_INFO,
            .buffer = key.buffer,
            .format = b->format,
            .offset = b->offset,
            .range = b->range,
        };
        VkBufferView view;
        VkResult vr = ctx->vk.vkCreateBufferView(ctx->device, &vi, ctx->vk_allocator, &view);
        if (vr != VK_SUCCESS)
            return vka_fail_vk(ctx, vr, "vkCreateBufferView");
        e = table_insert(ctx, &c->views, h, &key, sizeof key);
        if (!e) {
            ctx->vk.vkDestroyBufferView(ctx->device, view, ctx->vk_allocator);
            return vka_fail(ctx, VKATTN_ERROR_OUT_OF_HOST_MEMORY, "out of host memory");
        }
        e->view = view;
    }
    *out = e->view;
    return VKATTN_SUCCESS;
}

static vkattn_result allocate_set(vkattn_context *ctx, VkDescriptorSetLayout layout,
                                  VkDescriptorSet *set, VkDescriptorPool *pool)
{
    vka_descriptor_cache *c = ctx->descriptors;
    VkDescriptorSetAllocateInfo ai = {
        .sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO,
        .descriptorSetCount = 1,
        .pSetLayouts = &layout,
    };
    /* Newest pool first: older ones are usually full. */
    for (uint32_t i = c->pool_count; i-- > 0;) {
        ai.descriptorPool = c->pools[i];
        if (ctx->vk.vkAllocateDescriptorSets(ctx->device, &ai, set) == VK_SUCCESS) {
            *pool = c->pools[i];
            return VKATTN_SUCCESS;
        }
    }
    VkDescriptorPoolSize sizes[] = {
        {VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, SETS_PER_POOL * VKA_MAX_BINDINGS},
        {VK_DESCRIPTOR_TYPE_UNIFORM_TEXEL_BUFFER, SETS_PER_POOL * VKA_MAX_BINDINGS},
    };
    VkDescriptorPoolCreateInfo pci = {
        .sType = VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO,
        .flags = VK_DESCRIPTOR_POOL_CREATE_FREE_DESCRIPTOR_SET_BIT,
        .maxSets = SETS_PER_POOL,
        .poolSizeCount = 2,
        .pPoolSizes = sizes,
    };
    VkDescriptorPool *pools = vka_alloc(ctx, (c->pool_count + 1) * sizeof *pools);
    if (!pools)
        return vka_fail(ctx, VKATTN_ERROR_OUT_OF_HOST_MEMORY, "out of host memory");
    VkResult vr =
        ctx->vk.vkCreateDescriptorPool(ctx->device, &pci, ctx->vk_allocator, &pools[c->pool_count]);
    if (vr != VK_SUCCESS) {
        vka_free(ctx, pools);
        return vka_fail_vk(ctx, vr, "vkCreateDescriptorPool");
    }
    if (c->pool_count)
        memcpy(pools, c->pools, c->pool_count * sizeof *pools);
    vka_free(ctx, c->pools);
    c->pools = pools;
    ai.descriptorPool = pools[c->pool_count++];
    vr = ctx->vk.vkAllocateDescriptorSets(ctx->device, &ai, set);
    if (vr != VK_SUCCESS)
        return vka_fail_vk(ctx, vr, "vkAllocateDescriptorSets");
    *pool = ai.descriptorPool;
    return VKATTN_SUCCESS;
}

static vkattn_result set_get_locked(vkattn_context *ctx, VkDescriptorSetLayout layout,
                                    const vka_kernel *kernel, const vka_binding *bindings,
                                    VkDescriptorSet *out)
{
    vka_descriptor_cache *c = ctx->descriptors;
    set_key key;
    memset(&key, 0, sizeof key);
    key.layout = layout;
    key.count = kernel->binding_count;
    for (uint32_t i = 0; i < kernel->binding_count; i++) {
        key.b[i].buffer = bindings[i].buffer->buffer;
        key.b[i].offset = bindings[i].offset;
        key.b[i].range = bindings[i].range;
        key.b[i].format =
            kernel->bindings[i] == VKA_BINDING_TEXEL ? (uint64_t)bindings[i].format : 0;
    }
    uint64_t h = hash_bytes(&key, sizeof key);
    entry *e = table_find(&c->sets, h, &key, sizeof key);
    if (e) {
        *out = e->set;
        return VKATTN_SUCCESS;
    }

    VkDescriptorBufferInfo infos[VKA_MAX_BINDINGS];
    VkBufferView views[VKA_MAX_BINDINGS];
    VkWriteDescriptorSet writes[VKA_MAX_BINDINGS];
    for (uint32_t i = 0; i < kernel->binding_count; i++) {
        bool texel = kernel->bindings[i] == VKA_BINDING_TEXEL;
        writes[i] = (VkWriteDescriptorSet){
            .sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET,
            .dstBinding = i,
            .descriptorCount = 1,
            .descriptorType =
                texel ? VK_DESCRIPTOR_TYPE_UNIFORM_TEXEL_BUFFER : VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
        };
        if (texel) {
            vkattn_result r = view_get(ctx, &bindings[i], &views[i]);
            if (r != VKATTN_SUCCESS)
                return r;
            writes[i].pTexelBufferView = &views[i];
        } else {
            infos[i] = (VkDescriptorBufferInfo){key.b[i].buffer, key.b[i].offset, key.b[i].range};
            writes[i].pBufferInfo = &infos[i];
        }
    }
    VkDescriptorSet set = VK_NULL_HANDLE;
    VkDescriptorPool pool = VK_NULL_HANDLE;
    vkattn_result r = allocate_set(ctx, layout, &set, &pool);
    if (r != VKATTN_SUCCESS)
        return r;
    e = table_insert(ctx, &c->sets, h, &key, sizeof key);
    if (!e) {
        ctx->vk.vkFreeDescriptorSets(ctx->device, pool, 1, &set);
        return vka_fail(ctx, VKATTN_ERROR_OUT_OF_HOST_MEMORY, "out of host memory");
    }
    for (uint32_t i = 0; i < kernel->binding_count; i++)
        writes[i].dstSet = set;
    ctx->vk.vkUpdateDescriptorSets(ctx->device, kernel->binding_count, writes, 0, NULL);
    e->set = set;
    e->pool = pool;
    *out = set;
    return VKATTN_SUCCESS;
}

vkattn_result vka_descriptor_set_get(vkattn_context *ctx, VkDescriptorSetLayout layout,
                                     const vka_kernel *kernel, const vka_binding *bindings,
                                     VkDescriptorSet *out)
{
    vka_lock(ctx);
    vkattn_result r = set_get_locked(ctx, layout, kernel, bindings, out);
    vka_unlock(ctx);
    return r;
}
