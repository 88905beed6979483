/* Recording of attention over a KV cache: kernel tables, pipelines,
 * bindings and push constants of a step's chosen configuration
 * (kv_attention_config.c), and its dispatches. */
#include "ops/kvcache/kvcache_internal.h"

#include "core/const_buffers.h"
#include "vka_spirv.h"

#include <string.h>

#define TEX VKA_BINDING_TEXEL
#define STO VKA_BINDING_STORAGE
#define KV_KERNEL(fam, variant, in, full)                                        \
    {                                                                            \
        .name = "kv_attention_" #fam "_" #variant,                               \
        .spirv = &vka_spirv_kv_attention_##fam##_##variant, .binding_count = 10, \
        .bindings = {STO, in, in, in, STO, STO, STO, STO, STO, STO},             \
        .push_size = sizeof(vka_kv_main_push), .full_subgroups = full            \
    }
#define COMBINE_KERNEL(variant)                                                    \
    {                                                                              \
        .name = "kv_attention_combine_" #variant,                                  \
        .spirv = &vka_spirv_kv_attention_combine_##variant, .binding_count = 4,    \
        .bindings = {STO, STO, STO, STO}, .push_size = sizeof(vka_kv_combine_push) \
    }
/* Storage-input variants by [q/out storage][cache storage]. */
#define KV_STORAGE(v, fam, full) KV_KERNEL(fam, v, STO, full)

_Static_assert(sizeof(vka_kv_main_push) == 120, "mirrors kv_attention_main.glsl");
_Static_assert(sizeof(vka_kv_combine_push) == 56, "mirrors kv_attention_combine.comp");
_Static_assert(sizeof(vka_kv_main_push) <= 128, "the push constant limit every device has");

static const vka_kernel sg_storage[3][3] = VKA_STORAGE_PAIRS(KV_STORAGE, sg, true);
static const vka_kernel sm_storage[3][3] = VKA_STORAGE_PAIRS(KV_STORAGE, sm, false);
/* ... and the pairs with a bf16 (storage only: the config picks texel
 * inputs for bf16 in the decode kernel alone, see kv_attention_config.c) */
static const vka_kernel sg_bf16[4][4] = VKA_STORAGE_PAIRS_BF16(KV_STORAGE, sg, true);
static const vka_kernel sm_bf16[4][4] = VKA_STORAGE_PAIRS_BF16(KV_STORAGE, sm, false);
/* ... over a quantized cache (storage only), by [family is sm][q/out
 * storage][vka_quant_index of the cache's format] */
#define KV_QUANT(fam, full, q)                                                         \
    {                                                                                  \
        KV_KERNEL(fam, q##_q8_0, STO, full), KV_KERNEL(fam, q##_q4_0, STO, full),      \
            KV_KERNEL(fam, q##_q4_1, STO, full), KV_KERNEL(fam, q##_q5_0, STO, full),  \
            KV_KERNEL(fam, q##_q5_1, STO, full), KV_KERNEL(fam, q##_iq4_nl, STO, full) \
    }
#define KV_QUANT_TABLE(fam, full)                       \
    {                                                   \
        [VKA_STORAGE_F32] = KV_QUANT(fam, full, f32),   \
        [VKA_STORAGE_F16] = KV_QUANT(fam, full, f16),   \
        [VKA_STORAGE_F16P] = KV_QUANT(fam, full, f16p), \
        [VKA_STORAGE_BF16] = KV_QUANT(fam, full, bf16), \
    }
static const vka_kernel quant_kernels[2][4][VKA_QUANT_FORMATS] = {KV_QUANT_TABLE(sg, true),
                                                                  KV_QUANT_TABLE(sm, false)};
/* Texel inputs (rgba32f views of f32 data, rgba32ui views of f16 data), by
 * [q/out storage][cache dtype is f16]. */
#define KV_TEXEL_TABLE(fam, full)                                       \
    {                                                                   \
        [VKA_STORAGE_F32] = {KV_KERNEL(fam, tex_f32_f32, TEX, full),    \
                             KV_KERNEL(fam, tex_f32_f16, TEX, full)},   \
        [VKA_STORAGE_F16] = {KV_KERNEL(fam, tex_f16_f32, TEX, full),    \
                             KV_KERNEL(fam, tex_f16_f16, TEX, full)},   \
        [VKA_STORAGE_F16P] = {KV_KERNEL(fam, tex_f16p_f32, TEX, full),  \
                              KV_KERNEL(fam, tex_f16p_f16, TEX, full)}, \
    }
static const vka_kernel sg_texel[3][2] = KV_TEXEL_TABLE(sg, true);
static const vka_kernel sm_texel[3][2] = KV_TEXEL_TABLE(sm, false);
/* The subgroup family's decode kernel (kv_decode_sg.comp), texel inputs
 * only, by [q/out storage][cache dtype: f32, f16, bf16]. */
#define DEC_KERNEL(variant)                                                                  \
    {                                                                                        \
        .name = "kv_decode_sg_" #variant, .spirv = &vka_spirv_kv_decode_sg_##variant,        \
        .binding_count = 10, .bindings = {STO, TEX, TEX, TEX, STO, STO, STO, STO, STO, STO}, \
        .push_size = sizeof(vka_kv_main_push), .full_subgroups = true                        \
    }
#define DEC_KERNELS(q)                                                                   \
    {                                                                                    \
        DEC_KERNEL(tex_##q##_f32), DEC_KERNEL(tex_##q##_f16), DEC_KERNEL(tex_##q##_bf16) \
    }
static const vka_kernel dec_texel[4][3] = {
    [VKA_STORAGE_F32] = DEC_KERNELS(f32),
    [VKA_STORAGE_F16] = DEC_KERNELS(f16),
    [VKA_STORAGE_F16P] = DEC_KERNELS(f16p),
    [VKA_STORAGE_BF16] = DEC_KERNELS(bf16),
};
/* ... over a quantized cache (kv_decode_q_sg.comp), by [q/out storage]
 * [vka_quant_index of the cache's format]. */
#define DECQ_KERNEL(variant)                                                                 \
    {                                                                                        \
        .name = "kv_decode_q_sg_" #variant, .spirv = &vka_spirv_kv_decode_q_sg_##variant,    \
        .binding_count = 10, .bindings = {STO, TEX, TEX, TEX, STO, STO, STO, STO, STO, STO}, \
        .push_size = sizeof(vka_kv_main_push), .full_subgroups = true                        \
    }
#define DECQ_KERNELS(q)                                                           \
    {                                                                             \
        DECQ_KERNEL(q##_q8_0), DECQ_KERNEL(q##_q4_0), DECQ_KERNEL(q##_q4_1),      \
            DECQ_KERNEL(q##_q5_0), DECQ_KERNEL(q##_q5_1), DECQ_KERNEL(q##_iq4_nl) \
    }
static const vka_kernel decq_texel[4][VKA_QUANT_FORMATS] = {
    [VKA_STORAGE_F32] = DECQ_KERNELS(f32),
    [VKA_STORAGE_F16] = DECQ_KERNELS(f16),
    [VKA_STORAGE_F16P] = DECQ_KERNELS(f16p),
    [VKA_STORAGE_BF16] = DECQ_KERNELS(bf16),
};
/* The coopmat family (storage inputs, 16-bit storage: no f16p), by [q/out
 * storage][cache: f32, f16, bf16, then the quantized formats by
 * vka_quant_index]. */
#define CM_COLUMNS (3 + VKA_QUANT_FORMATS)
#if VKATTN_HAVE_COOPMAT
#define CM_KERNELS(q)                                                               \
    {                                                                               \
        KV_KERNEL(cm, q##_f32, STO, true), KV_KERNEL(cm, q##_f16, STO, true),       \
            KV_KERNEL(cm, q##_bf16, STO, true), KV_KERNEL(cm, q##_q8_0, STO, true), \
            KV_KERNEL(cm, q##_q4_0, STO, true), KV_KERNEL(cm, q##_q4_1, STO, true), \
            KV_KERNEL(cm, q##_q5_0, STO, true), KV_KERNEL(cm, q##_q5_1, STO, true), \
            KV_KERNEL(cm, q##_iq4_nl, STO, true)                                    \
    }
static const vka_kernel cm_storage[4][CM_COLUMNS] = {
    [VKA_STORAGE_F32] = CM_KERNELS(f32),
    [VKA_STORAGE_F16] = CM_KERNELS(f16),
    [VKA_STORAGE_BF16] = CM_KERNELS(bf16),
};
#else
static const vka_kernel cm_storage[4][CM_COLUMNS];
#endif
static const vka_kernel combine_kernels[4] = {COMBINE_KERNEL(f32), COMBINE_KERNEL(f16),
                                              COMBINE_KERNEL(f16p), COMBINE_KERNEL(bf16)};

#define COMBINE_WORKGROUP 64u

/* Binds q or out whole; fills its offset and strides in vec4s, or with
 * `elem` in elements. */
static vkattn_result bind_tensor(vkattn_context *ctx, const vkattn_tensor *t, bool texel, bool elem,
                                 vka_binding *b, uint32_t *off, uint32_t strides[3])
{
    uint64_t last = 0;
    for (uint32_t d = 0; d < 4; d++)
        last += (uint64_t)(t->shape[d] - 1) * (uint64_t)t->strides[d];
    size_t es = vkattn_dtype_size(t->dtype);
    uint64_t bytes = (last + 1) * es;
    const uint32_t unit = elem ? 1 : 4;
    for (uint32_t d = 0; d < 3; d++)
        strides[d] = t->shape[d] > 1 ? (uint32_t)(t->strides[d] / unit) : 0;
    if (texel)
        return vka_bind_texel_quads(ctx, t->buffer, t->offset, bytes, t->dtype, b, off);
    return vka_bind_window(ctx, t->buffer, t->offset, bytes, unit * es, b, off);
}

static vkattn_result bind_pool(vkattn_context *ctx, const vkattn_kv_cache *c,
                               const vkattn_buffer *pool, bool texel, vka_binding *b)
{
    uint64_t bytes = pool == c->k ? c->k_pool_bytes : c->v_pool_bytes;
    uint32_t first;
    if (vka_dtype_is_quantized(c->d.dtype)) { /* whole: raw texels or 32-bit words */
        if (!texel)
            return vka_bind_window(ctx, pool, 0, bytes, 4, b, &first);
        VKA_TRY(vka_bind_texel_window(ctx, pool, 0, bytes, VKATTN_DTYPE_F32, b, &first));
        b->format = VK_FORMAT_R32G32B32A32_UINT;
        return VKATTN_SUCCESS;
    }
    if (texel)
        return vka_bind_texel_quads(ctx, pool, 0, bytes, c->d.dtype, b, &first);
    return vka_bind_window(ctx, pool, 0, bytes, 4 * vkattn_dtype_size(c->d.dtype), b, &first);
}

/* The kernel of a configuration for q/out of storage kind `qs` over a
 * cache of dtype `kv`. */
static const vka_kernel *main_kernel(const vkattn_context *ctx, const vka_kv_config *cfg,
                                     vkattn_dtype q, vkattn_dtype kv)
{
    uint32_t qs = vka_storage_kind(ctx, q);
    if (cfg->kernel == VKA_KV_KERNEL_COOPMAT) {
        uint32_t col = kv == VKATTN_DTYPE_F32    ? 0
                       : kv == VKATTN_DTYPE_F16  ? 1
                       : kv == VKATTN_DTYPE_BF16 ? 2
                                                 : 3 + (uint32_t)vka_quant_index(kv);
        return &cm_storage[qs][col];
    }
    if (cfg->kernel == VKA_KV_KERNEL_DECODE_QUANT)
        return &decq_texel[qs][vka_quant_index(kv)];
    if (vka_dtype_is_quantized(kv))
        return &quant_kernels[cfg->kernel != VKA_KV_KERNEL_SUBGROUP][qs][vka_quant_index(kv)];
    uint32_t ks = vka_storage_kind(ctx, kv);
    bool f16 = kv == VKATTN_DTYPE_F16;
    if (cfg->kernel == VKA_KV_KERNEL_DECODE)
        return &dec_texel[qs][kv == VKATTN_DTYPE_BF16 ? 2 : f16];
    if (qs == VKA_STORAGE_BF16 || ks == VKA_STORAGE_BF16)
        return cfg->kernel == VKA_KV_KERNEL_SUBGROUP ? &sg_bf16[qs][ks] : &sm_bf16[qs][ks];
    switch (cfg->kernel) {
    case VKA_KV_KERNEL_SUBGROUP:
        return cfg->texel ? &sg_texel[qs][f16] : &sg_storage[qs][ks];
    default:
        return cfg->texel ? &sm_texel[qs][f16] : &sm_storage[qs][ks];
    }
}

/* ---- score modifiers */

/* The standard ALiBi slopes of a call by max bias (f32 [Hq]), kept by the
 * context: keyed by head count and max bias. */
typedef struct alibi_key {
    char tag[8]; /* "kvalibi": no other table has this key */
    uint32_t heads;
    float max_bias;
} alibi_key;

static void fill_slopes(void *dst, uint64_t bytes, const void *user)
{
    const alibi_key *k = user;
    float *f = dst;
    for (uint32_t h = 0; h < k->heads && (h + 1) * 4ull <= bytes; h++)
        f[h] = (float)vka_alibi_slope(k->heads, k->max_bias, h);
}

/* A [B, Hq, T] (or [Hq]) f32 tensor bound whole as floats: its first
 * element and strides (0 where a dimension has one element). */
static vkattn_result bind_floats(vkattn_context *ctx, const vkattn_tensor *t, vka_binding *b,
                                 uint32_t *off, uint32_t strides[3])
{
    uint64_t last = 0;
    for (uint32_t d = 0; d < t->rank; d++) {
        last += (uint64_t)(t->shape[d] - 1) * (uint64_t)t->strides[d];
        if (strides)
            strides[d] = t->shape[d] > 1 ? (uint32_t)t->strides[d] : 0;
    }
    return vka_bind_window(ctx, t->buffer, t->offset, (last + 1) * 4, 4, b, off);
}

/* Bindings 6-9 (slopes, sinks, LSE, mask; the split scratch's binding
 * stands in for absent ones, never read), their push constants and the
 * MODS word. */
static vkattn_result prepare_mods(vkattn_context *ctx, const vka_kv_attention_problem *p,
                                  vka_kv_attention_plan *plan, uint32_t *mods)
{
    const vka_score_mods *m = &p->mods;
    vka_kv_main_push *push = &plan->push;
    vka_binding *b = plan->bindings;
    b[6] = b[7] = b[8] = b[9] = b[5];
    *mods = 0;
    if (m->window) {
        *mods |= VKA_KV_MOD_WINDOW;
        push->window = m->window;
    }
    if (m->softcap > 0.0f) {
        *mods |= VKA_KV_MOD_SOFTCAP;
        push->softcap_log2 = (float)((double)m->softcap * 1.4426950408889634);
    }
    if (m->alibi) {
        *mods |= VKA_KV_MOD_ALIBI;
        if (p->slopes.buffer) {
            VKA_TRY(bind_floats(ctx, &p->slopes, &b[6], &push->slopes_off, NULL));
        } else {
            alibi_key key;
            memset(&key, 0, sizeof key);
            memcpy(key.tag, "kvalibi", 8);
            key.heads = p->num_heads;
            key.max_bias = m->alibi_max_bias;
            vkattn_buffer *table;
            VKA_TRY(vka_const_buffer_get(ctx, &key, sizeof key, 4ull * p->num_heads, fill_slopes,
                                         &key, &table));
            VKA_TRY(
                vka_bind_window(ctx, table, 0, 4ull * p->num_heads, 4, &b[6], &push->slopes_off));
        }
    }
    if (m->sinks) {
        *mods |= VKA_KV_MOD_SINKS;
        VKA_TRY(bind_floats(ctx, &p->sinks, &b[7], &push->sinks_off, NULL));
    }
    if (m->lse) {
        *mods |= VKA_KV_MOD_LSE;
        uint32_t st[3];
        VKA_TRY(bind_floats(ctx, &p->lse, &b[8], &push->lse_off, st));
        push->lse_sb = st[0], push->lse_sh = st[1], push->lse_st = st[2];
    }
    if (p->mask.buffer) {
        /* [B or 1, T, K], read as words: the window starts on an aligned
         * offset, the first element counted in the mask's own elements */
        const vkattn_tensor *t = &p->mask;
        uint32_t r = t->rank;
        uint64_t last = 0;
        for (uint32_t d = 0; d < r; d++)
            last += (uint64_t)(t->shape[d] - 1) * (uint64_t)t->strides[d];
        size_t es = vkattn_dtype_size(t->dtype);
        *mods |= VKA_KV_MOD_MASK | (t->dtype == VKATTN_DTYPE_F16 ? VKA_KV_MOD_MASK_F16 : 0);
        VKA_TRY(vka_bind_window(ctx, t->buffer, t->offset, (last + 1) * es, es, &b[9],
                                &push->mask_off));
        push->mask_sb = r == 3 && t->shape[0] > 1 ? (uint32_t)t->strides[0] : 0;
        push->mask_st = t->shape[r - 2] > 1 ? (uint32_t)t->strides[r - 2] : 0;
        push->mask_sk = t->shape[r - 1] > 1 ? (uint32_t)t->strides[r - 1] : 0;
    }
    return VKATTN_SUCCESS;
}

/* A windowed cache: every sequence must still hold the blocks from the
 * first key this call reads (its sequences' lengths after the step). */
static vkattn_result check_held(vkattn_context *ctx, const vkattn_kv_cache *c,
                                const vka_kv_step *step, const vka_kv_attention_problem *p)
{
    if (!c->d.window)
        return VKATTN_SUCCESS;
    for (uint32_t b = 0; b < step->batch; b++) {
        uint32_t s = step->sequences[b], before = c->lengths[s];
        uint32_t len = before + step->new_tokens;
        uint32_t first = vka_kv_first_key(len, p->new_tokens, p->mods.window);
        if (first < before &&
            c->tables[(size_t)s * c->table_width + first / c->d.block_size] == UINT32_MAX)
            return vka_fail(ctx, VKATTN_ERROR_OUT_OF_RANGE,
                            "kv attention: sequences[%u] (sequence %u) no longer holds key %u, "
                            "which its first query's window of %u needs: the cache (window %u) "
                            "gave back the blocks before the window of its last append's first "
                            "token; attend right after each append",
                            b, s, first, p->mods.window, c->d.window);
    }
    return VKATTN_SUCCESS;
}

/* The mask's keys (its last dimension) must cover every sequence of the
 * call at its length after the step. */
static vkattn_result check_mask_keys(vkattn_context *ctx, const vkattn_kv_cache *c,
                                     const vka_kv_step *step, const vka_kv_attention_problem *p)
{
    if (!p->mask.buffer)
        return VKATTN_SUCCESS;
    uint32_t r = p->mask.rank;
    int64_t keys = p->mask.shape[r - 1];
    for (uint32_t b = 0; b < step->batch; b++) {
        uint32_t s = step->sequences[b];
        uint64_t len = (uint64_t)c->lengths[s] + step->new_tokens;
        if ((uint64_t)keys < len)
            return vka_fail(ctx, VKATTN_ERROR_SHAPE_MISMATCH,
                            "args->mask.shape[%u] (keys) %lld is less than sequence %u's length "
                            "%llu (sequences[%u]): the mask needs a column per key",
                            r - 1, (long long)keys, s, (unsigned long long)len, b);
    }
    return VKATTN_SUCCESS;
}

/* The combine pass: one invocation per output vec4. */
static vkattn_result prepare_combine(vkattn_context *ctx, const vkattn_kv_cache *c,
                                     const vka_kv_attention_problem *p, vka_kv_attention_plan *plan)
{
    uint32_t wg = vka_workgroup_size(ctx, COMBINE_WORKGROUP);
    uint64_t units = (uint64_t)p->batch * p->num_heads * p->new_tokens * (c->v_row / 4);
    uint32_t gx, gy;
    vka_grid_2d(ctx, vka_div_up64(units, wg), &gx, &gy);
    if (gy > ctx->info.max_workgroup_count[1])
        return vka_fail(ctx, VKATTN_ERROR_OUT_OF_RANGE,
                        "kv attention: %llu output vec4s are too many for one dispatch",
                        (unsigned long long)units);
    plan->combine_grid[0] = gx, plan->combine_grid[1] = gy;
    plan->combine_bindings[0] = plan->bindings[5];
    plan->combine_bindings[1] = plan->bindings[4];
    plan->combine_bindings[2] = plan->bindings[7]; /* sinks (or the dummy) */
    plan->combine_bindings[3] = plan->bindings[8]; /* LSE (or the dummy) */
    const vka_kv_main_push *push = &plan->push;
    vka_kv_combine_push *cp = &plan->combine_push;
    cp->o_off = push->o_off, cp->o_sb = push->o_sb, cp->o_sh = push->o_sh, cp->o_st = push->o_st;
    cp->batch = p->batch, cp->heads = p->num_heads, cp->tokens = p->new_tokens;
    cp->s_heads = c->d.num_heads, cp->splits = plan->config.splits;
    cp->sinks_off = push->sinks_off;
    cp->lse_off = push->lse_off, cp->lse_sb = push->lse_sb, cp->lse_sh = push->lse_sh;
    cp->lse_st = push->lse_st;
    /* the sinks and the LSE belong to the merged rows */
    uint32_t spec[4] = {wg, c->d.v_head_dim,
                        plan->config.spec[5] & (VKA_KV_MOD_SINKS | VKA_KV_MOD_LSE), p->elem};
    return vka_pipeline_get(ctx, &combine_kernels[vka_storage_kind(ctx, p->q.dtype)], spec, 4,
                            &plan->combine);
}

vkattn_result vka_kv_attention_prepare(vkattn_context *ctx, vkattn_kv_cache *c,
                                       const vka_kv_step *step, const vka_kv_attention_problem *p,
                                       vka_kv_attention_plan *plan)
{
    memset(plan, 0, sizeof *plan);
    if (step->batch != p->batch)
        return vka_fail(ctx, VKATTN_ERROR_SHAPE_MISMATCH,
                        "kv attention: the step has %u sequences but q has batch %u", step->batch,
                        p->batch);
    VKA_TRY(check_held(ctx, c, step, p));
    VKA_TRY(check_mask_keys(ctx, c, step, p));
    vka_kv_config *cfg = &plan->config;
    VKA_TRY(vka_kv_config_choose(ctx, c, step, p, cfg));
    const uint32_t hkv = c->d.num_kv_heads;
    plan->grid[0] = cfg->tiles * cfg->splits, plan->grid[1] = hkv, plan->grid[2] = p->batch;

    /* Bindings (slot 0, the metadata, comes with the step). The scratch is
     * bound in both modes (written only with splits): one kernel interface;
     * the barrier before the pass orders it either way. */
    vka_kv_main_push *push = &plan->push;
    vka_binding *b = plan->bindings;
    uint32_t qst[3], ost[3], unused;
    uint64_t window = cfg->splits > 1 ? cfg->scratch_bytes : 4ull * (c->d.v_head_dim + 2);
    VKA_TRY(bind_tensor(ctx, &p->q, cfg->texel, p->elem, &b[1], &push->q_off, qst));
    VKA_TRY(bind_pool(ctx, c, c->k, cfg->texel, &b[2]));
    VKA_TRY(bind_pool(ctx, c, c->v, cfg->texel, &b[3]));
    VKA_TRY(bind_tensor(ctx, &p->out, false, p->elem, &b[4], &push->o_off, ost));
    VKA_TRY(vka_bind_window(ctx, c->split_scratch, 0, window, 4, &b[5], &unused));
    push->q_sb = qst[0], push->q_sh = qst[1], push->q_st = qst[2];
    push->o_sb = ost[0], push->o_sh = ost[1], push->o_st = ost[2];
    push->batch = p->batch;
    push->tokens = p->new_tokens;
    push->group = p->num_heads / hkv;
    push->kv_heads = hkv;
    push->block_size = c->d.block_size;
    push->table_width = c->table_width;
    push->splits = cfg->splits;
    push->split_align = cfg->block_keys;
    push->s_heads = c->d.num_heads;
    push->scale_log2 = (float)((double)p->scale * 1.4426950408889634);
    uint32_t mods;
    VKA_TRY(prepare_mods(ctx, p, plan, &mods));
    /* with several splits the main pass leaves the sinks and the LSE to
     * the combine pass */
    cfg->spec[5] = mods;
    uint32_t main_mods =
        cfg->splits > 1 ? mods & ~(uint32_t)(VKA_KV_MOD_SINKS | VKA_KV_MOD_LSE) : mods;
    /* 6: the v head dim (sg, sm, cm); 7, 8: the pools' rows (kv_attention_main.glsl);
     * 16..18: the matrix shape (cm) */
    uint32_t spec[19] = {0};
    memcpy(spec, cfg->spec, sizeof cfg->spec);
    spec[5] = main_mods;
    spec[6] = c->d.v_head_dim;
    spec[7] = c->k_row;
    spec[8] = c->v_row;
    uint32_t count = 9;
    if (cfg->kernel == VKA_KV_KERNEL_COOPMAT) {
        spec[16] = ctx->info.coopmat_shape.m;
        spec[17] = ctx->info.coopmat_shape.n;
        spec[18] = ctx->info.coopmat_shape.k;
        count = 19;
    }
    VKA_TRY(vka_pipeline_get(ctx, main_kernel(ctx, cfg, p->q.dtype, c->d.dtype), spec, count,
                             &plan->main));
    return cfg->splits == 1 ? VKATTN_SUCCESS : prepare_combine(ctx, c, p, plan);
}

vkattn_result vka_kv_attention_record(vkattn_context *ctx, VkCommandBuffer cmd,
                                      const vka_kv_attention_plan *plan, const vka_binding *meta)
{
    vka_binding b[10];
    memcpy(b, plan->bindings, sizeof b);
    b[0] = *meta;
    /* The split scratch is the cache's, reused by every call (the caller's
     * contract covers only their tensors), and the pools may have been
     * written by an append or a projection since the metadata barrier. */
    vka_cmd_compute_barrier(ctx, cmd);
    vkattn_result r = vka_cmd_dispatch(ctx, cmd, plan->main, b, &plan->push, plan->grid[0],
                                       plan->grid[1], plan->grid[2]);
    if (r != VKATTN_SUCCESS || !plan->combine)
        return r;
    vka_cmd_compute_barrier(ctx, cmd);
    return vka_cmd_dispatch(ctx, cmd, plan->combine, plan->combine_bindings, &plan->combine_push,
                            plan->combine_grid[0], plan->combine_grid[1], 1);
}
