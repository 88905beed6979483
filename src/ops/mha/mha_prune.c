/* vkattn_mha_prune_heads: structured pruning. The layer's weights come back
 * from the device (vkattn_mha_get_weights), the kept heads' rows of Wq (and
 * of Wk / Wv for the KV heads they need) and columns of Wo are copied into
 * a smaller layout, and the layer switches to it - all or nothing. */
#include "ops/mha/mha_internal.h"
#include "spec/mha_desc.h"

#include <string.h>

static uint32_t gcd_u32(uint32_t a, uint32_t b)
{
    while (b) {
        uint32_t t = a % b;
        a = b;
        b = t;
    }
    return a;
}

/* The pruned shape: kept query heads in ascending order, and the KV head
 * each new KV slot copies (a group kept c times is kept c / g times, g the
 * gcd of the kept counts, so every new group is g query heads). */
typedef struct prune_plan {
    uint32_t *heads, count; /* kept query heads, ascending */
    uint32_t *kv, kv_count; /* old KV head of each new KV head */
} prune_plan;

static vkattn_result plan_heads(vkattn_mha *m, const uint32_t *keep, uint32_t count, prune_plan *p)
{
    vkattn_context *ctx = m->ctx;
    const uint32_t hq = m->d.num_heads, hkv = m->d.num_kv_heads, group = hq / hkv;
    if (!keep || count == 0 || count > hq)
        return vka_fail(ctx, VKATTN_ERROR_INVALID_ARGUMENT,
                        "vkattn_mha_prune_heads: keep %s with count %u: keep 1..%u of the %u "
                        "query heads",
                        keep ? "given" : "is NULL", count, hq, hq);
    bool *kept = vka_alloc(ctx, hq * sizeof *kept);
    uint32_t *per_group = vka_alloc(ctx, hkv * sizeof *per_group);
    p->heads = vka_alloc(ctx, count * sizeof *p->heads);
    p->kv = vka_alloc(ctx, count * sizeof *p->kv);
    vkattn_result r = VKATTN_SUCCESS;
    if (!kept || !per_group || !p->heads || !p->kv)
        r = vka_fail(ctx, VKATTN_ERROR_OUT_OF_HOST_MEMORY, "out of host memory");
    if (r == VKATTN_SUCCESS) {
        memset(kept, 0, hq * sizeof *kept);
        memset(per_group, 0, hkv * sizeof *per_group);
    }
    for (uint32_t i = 0; r == VKATTN_SUCCESS && i < count; i++) {
        if (keep[i] >= hq)
            r = vka_fail(ctx, VKATTN_ERROR_INVALID_ARGUMENT,
                         "vkattn_mha_prune_heads: keep[%u] is %u: the layer has heads 0..%u", i,
                         keep[i], hq - 1);
        else if (kept[keep[i]])
            r = vka_fail(ctx, VKATTN_ERROR_INVALID_ARGUMENT,
                         "vkattn_mha_prune_heads: keep[%u] is %u, which is already kept", i,
                         keep[i]);
        else
            kept[keep[i]] = true, per_group[keep[i] / group]++;
    }
    if (r == VKATTN_SUCCESS) {
        uint32_t g = 0;
        for (uint32_t k = 0; k < hkv; k++)
            g = gcd_u32(g, per_group[k]);
        p->count = p->kv_count = 0;
        for (uint32_t h = 0; h < hq; h++)
            if (kept[h])
                p->heads[p->count++] = h;
        for (uint32_t k = 0; k < hkv; k++)
            for (uint32_t c = 0; c < per_group[k] / g; c++)
                p->kv[p->kv_count++] = k;
    }
    vka_free(ctx, kept);
    vka_free(ctx, per_group);
    return r;
}

/* Rows [first, first + n) of a matrix with `in` values per row, `rows_in`
 * bytes each, copied to `dst` (advanced). */
static uint8_t *copy_rows(uint8_t *dst, const uint8_t *src, uint64_t first, uint64_t n,
                          uint64_t row_bytes)
{
    memcpy(dst, src + first * row_bytes, n * row_bytes);
    return dst + n * row_bytes;
}

/* The pruned weights in the layer's dtypes, laid out as the new layer keeps
 * them (vka_mha_layout_of(nd)). */
static void build_pruned(const vkattn_mha_desc *d, const vkattn_mha_desc *nd,
                         const vka_mha_layout *nl, const prune_plan *p,
                         const vkattn_mha_weight_copy *old, uint8_t *out)
{
    const vkattn_dtype wdt = d->weight_dtype;
    const uint64_t dk = d->head_dim, dv = d->v_head_dim;
    const uint64_t bes = vkattn_dtype_size(vka_mha_bias_dtype(d));
    const uint64_t q_row = vkattn_dtype_row_bytes(wdt, d->embed_dim);
    const uint64_t k_row = vkattn_dtype_row_bytes(wdt, d->kv_dim);
    const uint64_t v_row = vkattn_dtype_row_bytes(wdt, d->value_dim);
    uint8_t *at = out + nl->off_wq;
    for (uint32_t i = 0; i < p->count; i++)
        at = copy_rows(at, old->wq, p->heads[i] * dk, dk, q_row);
    at = out + nl->off_wkv; /* Wk's rows then Wv's, right after Wq's when packed */
    for (uint32_t i = 0; i < p->kv_count; i++)
        at = copy_rows(at, old->wk, p->kv[i] * dk, dk, k_row);
    for (uint32_t i = 0; i < p->kv_count; i++)
        at = copy_rows(at, old->wv, p->kv[i] * dv, dv, v_row);
    /* Wo [Dm, Hq*Dv]: each row keeps its kept heads' columns (q8_0: whole
     * blocks, Dv a multiple of 32) */
    const uint64_t old_o = vkattn_dtype_row_bytes(wdt, (uint64_t)d->num_heads * dv);
    const uint64_t head_o = vkattn_dtype_row_bytes(wdt, dv);
    at = out + nl->off_wo;
    for (uint64_t r = 0; r < d->embed_dim; r++)
        for (uint32_t i = 0; i < p->count; i++)
            at = copy_rows(at, (const uint8_t *)old->wo + r * old_o, p->heads[i], 1, head_o);
    if (!d->bias)
        return;
    at = out + nl->off_bq;
    for (uint32_t i = 0; i < p->count; i++)
        at = copy_rows(at, old->bq, p->heads[i] * dk, dk, bes);
    at = out + nl->off_bkv;
    for (uint32_t i = 0; i < p->kv_count; i++)
        at = copy_rows(at, old->bk, p->kv[i] * dk, dk, bes);
    for (uint32_t i = 0; i < p->kv_count; i++)
        at = copy_rows(at, old->bv, p->kv[i] * dv, dv, bes);
    memcpy(out + nl->off_bo, old->bo, nd->embed_dim * bes);
}

/* The kept heads' sinks and slopes, in a new mods buffer (NULL without
 * either). Slopes are kept as values: the standard ones of the old head
 * count are not the standard ones of the new. */
static vkattn_result prune_mods(vkattn_mha *m, const prune_plan *p, vkattn_buffer **out,
                                uint64_t *off_slopes)
{
    *out = NULL;
    *off_slopes = 0;
    if (!m->mods_params)
        return VKATTN_SUCCESS;
    const uint32_t hq = m->d.num_heads;
    uint64_t old_bytes = m->off_slopes + 4ull * hq;
    *off_slopes = vka_align_up(4ull * p->count, VKA_MHA_PLACEMENT);
    uint64_t bytes = *off_slopes + 4ull * p->count;
    float *old = vka_alloc(m->ctx, old_bytes), *fresh = vka_alloc(m->ctx, bytes);
    vkattn_result r = old && fresh
                          ? VKATTN_SUCCESS
                          : vka_fail(m->ctx, VKATTN_ERROR_OUT_OF_HOST_MEMORY, "out of host memory");
    if (r == VKATTN_SUCCESS)
        r = vkattn_buffer_download(m->mods_params, 0, old, old_bytes);
    if (r == VKATTN_SUCCESS) {
        memset(fresh, 0, bytes);
        for (uint32_t i = 0; i < p->count; i++) {
            fresh[i] = old[p->heads[i]];
            fresh[*off_slopes / 4 + i] = old[m->off_slopes / 4 + p->heads[i]];
        }
        vkattn_buffer_desc bd = {.size = bytes};
        r = vkattn_buffer_create(m->ctx, &bd, out);
    }
    if (r == VKATTN_SUCCESS)
        r = vkattn_buffer_upload(*out, 0, fresh, bytes);
    if (r != VKATTN_SUCCESS) {
        vkattn_buffer_destroy(*out);
        *out = NULL;
    }
    vka_free(m->ctx, old);
    vka_free(m->ctx, fresh);
    return r;
}

/* The layer's current weights on the host, in one allocation. */
static vkattn_result read_weights(vkattn_mha *m, vkattn_mha_weight_copy *w, uint8_t **all)
{
    const vkattn_mha_desc *d = &m->d;
    const uint64_t bes = vkattn_dtype_size(vka_mha_bias_dtype(d));
    const uint64_t n[8] = {vka_mha_weight_bytes(d, vka_mha_q_width(d), d->embed_dim),
                           vka_mha_weight_bytes(d, vka_mha_k_width(d), d->kv_dim),
                           vka_mha_wv_bytes(d),
                           vka_mha_weight_bytes(d, d->embed_dim, vka_mha_o_width(d)),
                           vka_mha_q_width(d) * bes,
                           vka_mha_k_width(d) * bes,
                           vka_mha_v_width(d) * bes,
                           d->embed_dim * bes};
    uint64_t total = 0;
    for (int i = 0; i < 8; i++)
        total += n[i];
    *all = vka_alloc(m->ctx, total);
    if (!*all)
        return vka_fail(m->ctx, VKATTN_ERROR_OUT_OF_HOST_MEMORY,
                        "out of host memory (%llu bytes of weights)", (unsigned long long)total);
    void **slot[8] = {&w->wq, &w->wk, &w->wv, &w->wo, &w->bq, &w->bk, &w->bv, &w->bo};
    uint64_t at = 0;
    for (int i = 0; i < 8; i++) {
        *slot[i] = *all + at;
        at += n[i];
    }
    return vkattn_mha_get_weights(m, w);
}

vkattn_result vkattn_mha_prune_heads(vkattn_mha *m, const uint32_t *keep, uint32_t count)
{
    if (!m)
        return VKATTN_ERROR_INVALID_ARGUMENT;
    vkattn_context *ctx = m->ctx;
    if (!m->weights_set)
        return vka_fail(ctx, VKATTN_ERROR_INVALID_ARGUMENT,
                        "the layer has no weights yet (call vkattn_mha_set_weights)");
    if (vka_mha_appends(&m->d))
        return vka_fail(ctx, VKATTN_ERROR_UNSUPPORTED,
                        "vkattn_mha_prune_heads: a layer with desc.%s cannot be pruned yet",
                        m->d.add_bias_kv ? "add_bias_kv" : "add_zero_attn");
    prune_plan p = {0};
    vkattn_result r = plan_heads(m, keep, count, &p);
    /* the new desc, checked as a new layer's would be */
    vkattn_mha_desc nd = m->d;
    nd.num_heads = p.count;
    nd.num_kv_heads = p.kv_count;
    if (r == VKATTN_SUCCESS && m->d.weight_dtype == VKATTN_DTYPE_Q8_0 && m->d.v_head_dim % 32)
        r = vka_fail(ctx, VKATTN_ERROR_UNSUPPORTED,
                     "vkattn_mha_prune_heads: a q8_0 layer's Wo keeps blocks of 32 values across "
                     "heads of v_head_dim %u: its heads cannot be taken apart",
                     m->d.v_head_dim);
    if (r == VKATTN_SUCCESS) {
        char why[VKA_ERROR_MAX];
        vkattn_result rr = vka_mha_resolve(&nd, &nd, why, sizeof why);
        if (rr != VKATTN_SUCCESS)
            r = vka_fail(ctx, rr, "vkattn_mha_prune_heads: the pruned layer: %s", why);
    }
    vka_mha_layout nl;
    vka_mha_layout_of(&nd, &nl);
    if (r == VKATTN_SUCCESS && nl.bytes > ctx->info.max_allocation_size)
        r = vka_fail(ctx, VKATTN_ERROR_OUT_OF_RANGE, "the pruned weights are too large");
    vkattn_mha_weight_copy old = {0};
    uint8_t *old_all = NULL, *fresh = NULL;
    vkattn_buffer *weights = NULL, *mods = NULL;
    uint64_t off_slopes = 0;
    if (r == VKATTN_SUCCESS)
        r = read_weights(m, &old, &old_all);
    if (r == VKATTN_SUCCESS && !(fresh = vka_alloc(ctx, nl.bytes)))
        r = vka_fail(ctx, VKATTN_ERROR_OUT_OF_HOST_MEMORY, "out of host memory");
    if (r == VKATTN_SUCCESS) {
        memset(fresh, 0, nl.bytes);
        build_pruned(&m->d, &nd, &nl, &p, &old, fresh);
        vkattn_buffer_desc bd = {.size = nl.bytes};
        r = vkattn_buffer_create(ctx, &bd, &weights);
    }
    if (r == VKATTN_SUCCESS)
        r = vkattn_buffer_upload(weights, 0, fresh, nl.bytes);
    if (r == VKATTN_SUCCESS)
        r = prune_mods(m, &p, &mods, &off_slopes);
    if (r == VKATTN_SUCCESS) { /* nothing can fail from here on */
        vkattn_buffer_destroy(m->weights);
        vkattn_buffer_destroy(m->mods_params);
        m->weights = weights, weights = NULL;
        m->mods_params = mods;
        m->off_slopes = off_slopes;
        m->d = nd;
        m->weights_bytes = nl.bytes;
        m->off_wq = nl.off_wq, m->off_wkv = nl.off_wkv, m->off_wo = nl.off_wo;
        m->off_bq = nl.off_bq, m->off_bkv = nl.off_bkv, m->off_bo = nl.off_bo;
        vka_mha_use_own_weights(m);
    }
    vkattn_buffer_destroy(weights);
    vka_free(ctx, fresh);
    vka_free(ctx, old_all);
    vka_free(ctx, p.heads);
    vka_free(ctx, p.kv);
    return r;
}
