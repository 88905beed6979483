/* Attention over a KV cache: kernel family, tile sizes and split count per
 * device and step, pipelines and bindings (see kv_attention.h). */
#include "ops/kvcache/kvcache_internal.h"

#include "ops/attention/attention_internal.h"
#include "vka_spirv.h"

#include <string.h>

#define TEX VKA_BINDING_TEXEL
#define STO VKA_BINDING_STORAGE
#define KV_KERNEL(fam, variant, in, full)                                                    \
    {                                                                                        \
        .name = "kv_attention_" #fam "_" #variant,                                           \
        .spirv = &vka_spirv_kv_attention_##fam##_##variant, .binding_count = 6,           \
        .bindings = {STO, in, in, in, STO, STO}, .push_size = sizeof(vka_kv_main_push),   \
        .full_subgroups = full                                                               \
    }
#define COMBINE_KERNEL(variant)                                                              \
    {                                                                                        \
        .name = "kv_attention_combine_" #variant,                                            \
        .spirv = &vka_spirv_kv_attention_combine_##variant, .binding_count = 2,           \
        .bindings = {STO, STO}, .push_size = sizeof(vka_kv_combine_push)                  \
    }
/* Storage-input variants by [q/out storage][cache storage]: a device uses
 * one f16 path, so f16 never meets f16p. */
#define KV_TABLE(fam, full)                                                                  \
    {                                                                                        \
        [VKA_STORAGE_F32] = {[VKA_STORAGE_F32] = KV_KERNEL(fam, f32_f32, STO, full),   \
                                [VKA_STORAGE_F16] = KV_KERNEL(fam, f32_f16, STO, full),   \
                                [VKA_STORAGE_F16P] = KV_KERNEL(fam, f32_f16p, STO, full)}, \
        [VKA_STORAGE_F16] = {[VKA_STORAGE_F32] = KV_KERNEL(fam, f16_f32, STO, full),   \
                                [VKA_STORAGE_F16] = KV_KERNEL(fam, f16_f16, STO, full)},  \
        [VKA_STORAGE_F16P] = {[VKA_STORAGE_F32] = KV_KERNEL(fam, f16p_f32, STO, full), \
                                 [VKA_STORAGE_F16P] = KV_KERNEL(fam, f16p_f16p, STO, full)}, \
    }

_Static_assert(sizeof(vka_kv_main_push) == 72, "mirrors kv_attention_main.glsl");
_Static_assert(sizeof(vka_kv_combine_push) == 36, "mirrors kv_attention_combine.comp");

static const vka_kernel sg_storage[3][3] = KV_TABLE(sg, true);
static const vka_kernel sm_storage[3][3] = KV_TABLE(sm, false);
/* Texel inputs (rgba32f views of f32 data, rgba32ui views of f16 data), by
 * [q/out storage][cache dtype is f16]. */
#define KV_TEXEL_TABLE(fam, full)                                                            \
    {                                                                                        \
        [VKA_STORAGE_F32] = {KV_KERNEL(fam, tex_f32_f32, TEX, full),                      \
                                KV_KERNEL(fam, tex_f32_f16, TEX, full)},                     \
        [VKA_STORAGE_F16] = {KV_KERNEL(fam, tex_f16_f32, TEX, full),                      \
                                KV_KERNEL(fam, tex_f16_f16, TEX, full)},                     \
        [VKA_STORAGE_F16P] = {KV_KERNEL(fam, tex_f16p_f32, TEX, full),                    \
                                 KV_KERNEL(fam, tex_f16p_f16, TEX, full)},                   \
    }
static const vka_kernel sg_texel[3][2] = KV_TEXEL_TABLE(sg, true);
static const vka_kernel sm_texel[3][2] = KV_TEXEL_TABLE(sm, false);
/* The subgroup family's decode kernel (kv_decode_sg.comp), texel inputs
 * only, by [q/out storage][cache dtype is f16]. */
#define DEC_KERNEL(variant)                                                                  \
    {                                                                                        \
        .name = "kv_decode_sg_" #variant, .spirv = &vka_spirv_kv_decode_sg_##variant,     \
        .binding_count = 6, .bindings = {STO, TEX, TEX, TEX, STO, STO},                      \
        .push_size = sizeof(vka_kv_main_push), .full_subgroups = true                     \
    }
static const vka_kernel dec_texel[3][2] = {
    [VKA_STORAGE_F32] = {DEC_KERNEL(tex_f32_f32), DEC_KERNEL(tex_f32_f16)},
    [VKA_STORAGE_F16] = {DEC_KERNEL(tex_f16_f32), DEC_KERNEL(tex_f16_f16)},
    [VKA_STORAGE_F16P] = {DEC_KERNEL(tex_f16p_f32), DEC_KERNEL(tex_f16p_f16)},
};
static const vka_kernel combine_kernels[3] = {COMBINE_KERNEL(f32), COMBINE_KERNEL(f16),
                                                 COMBINE_KERNEL(f16p)};

/* ------------------------------------------------------------ tile sizes */

#define SG_ROWS_MAX 8u /* rows per subgroup (4 above head dim 128) */
/* Keys per lane per key block: 4 for decode's few rows (fewer query
 * shuffles per K texel: about 0.6 of the streaming rate on lavapipe against
 * 0.5 with 2), 2 for 8 rows (what the attention kernel found best; keeps the
 * score registers in check). */
#define SG_KEYS_FEW_ROWS 4u
#define SG_KEYS_MANY_ROWS 2u
/* Large prefills take large tiles (16 rows x 4 keys, 8 rows above head dim
 * 128: 10-20% faster there, but ~4 s of lavapipe's JIT instead of ~1 s, so
 * only for problems that repay it). */
#define SG_ROWS_LARGE 16u
#define SG_KEYS_LARGE 4u
#define SG_LARGE_ROWS 64u  /* T * group at least this... */
#define SG_LARGE_KEYS 256u /* ...and the longest sequence at least this */
#define COMBINE_WORKGROUP 64u
/* Automatic splits: about this many workgroups in the split pass (CPU
 * drivers run few threads, GPUs many compute units), and no split shorter
 * than this many keys (below, the combine pass costs more than it saves). */
#define CPU_TARGET_GROUPS 16u
#define GPU_TARGET_GROUPS 512u
#define CPU_MIN_SPLIT_KEYS 256u
#define GPU_MIN_SPLIT_KEYS 128u

static uint32_t pow2_at_least(uint32_t v)
{
    uint32_t p = 1;
    while (p < v)
        p *= 2;
    return p;
}

typedef struct kv_config {
    const vka_kernel *kernel;
    uint32_t spec[5];
    uint32_t rows_per_group; /* tile rows per workgroup */
    uint32_t block_keys;     /* keys per block: split lengths are multiples of it */
} kv_config;

/* Subgroup family: one subgroup per workgroup (several gain nothing on CPU
 * drivers, which run a workgroup's subgroups one after another) owning R rows
 * (a power of two covering the rows of a decode step where possible: the
 * group's query heads x queries), C keys per lane per block. */
static void sg_config(const vkattn_context *ctx, uint32_t d, uint32_t rows, bool large,
                      kv_config *cfg)
{
    uint32_t sg = ctx->info.subgroup_size;
    uint32_t rmax = large ? SG_ROWS_LARGE : SG_ROWS_MAX;
    if (d > 128)
        rmax /= 2;
    uint32_t r = pow2_at_least(rows);
    if (r > rmax)
        r = rmax;
    uint32_t keys = large ? SG_KEYS_LARGE : r <= 4 ? SG_KEYS_FEW_ROWS : SG_KEYS_MANY_ROWS;
    uint32_t spec[5] = {sg, sg, d, r, keys};
    memcpy(cfg->spec, spec, sizeof spec);
    cfg->rows_per_group = r;
    cfg->block_keys = sg * keys;
}

/* Decode kernel of the subgroup family: each lane holds whole octets (8
 * elements) of the head dimension, so D must split into SG * 8 pieces
 * (subgroup sizes are powers of two); R rows per subgroup, at most 4 (q and
 * the output slice of every row live in each lane's registers / stack:
 * R * D / SG * 2 floats), one subgroup per workgroup, SG keys per block. */
#define DEC_ROWS_MAX 4u
#define DEC_MAX_TRIPS 65000u
static bool dec_config(const vkattn_context *ctx, uint32_t d, uint32_t rows, kv_config *cfg)
{
    uint32_t sg = ctx->info.subgroup_size;
    if (sg == 0 || (sg & (sg - 1)) || d % (8 * sg))
        return false;
    uint32_t r = pow2_at_least(rows);
    if (r > DEC_ROWS_MAX)
        r = DEC_ROWS_MAX;
    uint32_t spec[5] = {sg, sg, d, r, 1};
    memcpy(cfg->spec, spec, sizeof spec);
    cfg->rows_per_group = r;
    cfg->block_keys = sg;
    return true;
}

/* Shared-memory family: the tile of vka_att_sm_tile_fit, BR at most a power of
 * two covering the step's rows, each key's pool row kept beside K and V. */
static void sm_config(const vkattn_context *ctx, uint32_t d, uint32_t rows, kv_config *cfg)
{
    vka_att_sm_tile t = vka_att_sm_tile_fit(ctx, d, pow2_at_least(rows), false, false, 4);
    uint32_t spec[5] = {t.br * t.tpr, d, t.br, t.bc, t.tpr};
    memcpy(cfg->spec, spec, sizeof spec);
    cfg->rows_per_group = t.br;
    cfg->block_keys = t.bc;
}

/* Splits of the decode path: enough workgroups to fill the device, none
 * shorter than a minimum, within the split scratch's rows. */
static uint32_t auto_splits(const vkattn_context *ctx, const vka_kv_step *step,
                            const vka_kv_attention_problem *p, uint32_t tiles, uint32_t hkv)
{
    bool cpu = ctx->info.type == VKATTN_DEVICE_TYPE_CPU;
    uint64_t groups = (uint64_t)p->batch * hkv * tiles;
    uint64_t target = cpu ? CPU_TARGET_GROUPS : GPU_TARGET_GROUPS;
    uint64_t splits = groups >= target ? 1 : vka_div_up64(target, groups);
    uint64_t by_len = vka_div_up64(step->max_length, cpu ? CPU_MIN_SPLIT_KEYS : GPU_MIN_SPLIT_KEYS);
    if (splits > by_len)
        splits = by_len;
    if (splits > VKATTN_KV_MAX_SPLIT_ROWS / p->new_tokens)
        splits = VKATTN_KV_MAX_SPLIT_ROWS / p->new_tokens;
    return splits ? (uint32_t)splits : 1;
}

/* Texel views of q and both pools, where the device prefers them and they fit. */
static bool use_texel(vkattn_context *ctx, const vkattn_kv_cache *c, const vka_kv_attention_problem *p)
{
    if (!ctx->info.texel_inputs)
        return false;
    vkattn_tensor pool = vkattn_tensor_make(c->k, 0, c->d.dtype, 1, NULL);
    pool.shape[0] = (int64_t)(c->block_bytes * c->d.num_blocks / vkattn_dtype_size(c->d.dtype));
    vka_box all = {{0}, {(uint64_t)pool.shape[0], 1, 1, 1}};
    vka_box qbox = {{0}, {(uint64_t)p->q.shape[0], (uint64_t)p->q.shape[1], (uint64_t)p->q.shape[2],
                          (uint64_t)p->q.shape[3]}};
    return vka_box_fits_texel(ctx, &pool, &all) && vka_box_fits_texel(ctx, &p->q, &qbox);
}

/* Binds q or out whole; fills its offset and strides in vec4s. */
static vkattn_result bind_tensor(vkattn_context *ctx, const vkattn_tensor *t, bool texel,
                                 vka_binding *b, uint32_t *off, uint32_t strides[3])
{
    uint64_t last = 0;
    for (uint32_t d = 0; d < 4; d++)
        last += (uint64_t)(t->shape[d] - 1) * (uint64_t)t->strides[d];
    size_t es = vkattn_dtype_size(t->dtype);
    uint64_t bytes = (last + 1) * es;
    for (uint32_t d = 0; d < 3; d++)
        strides[d] = t->shape[d] > 1 ? (uint32_t)(t->strides[d] / 4) : 0;
    if (texel)
        return vka_bind_texel_quads(ctx, t->buffer, t->offset, bytes, t->dtype, b, off);
    return vka_bind_window(ctx, t->buffer, t->offset, bytes, 4 * es, b, off);
}

static vkattn_result bind_pool(vkattn_context *ctx, const vkattn_kv_cache *c, const vkattn_buffer *pool,
                               bool texel, vka_binding *b)
{
    uint64_t bytes = c->block_bytes * c->d.num_blocks;
    uint32_t first;
    if (texel)
        return vka_bind_texel_quads(ctx, pool, 0, bytes, c->d.dtype, b, &first);
    return vka_bind_window(ctx, pool, 0, bytes, 4 * vkattn_dtype_size(c->d.dtype), b, &first);
}

vkattn_result vka_kv_attention_prepare(vkattn_context *ctx, vkattn_kv_cache *c,
                                          const vka_kv_step *step,
                                          const vka_kv_attention_problem *p,
                                          vka_kv_attention_plan *plan)
{
    memset(plan, 0, sizeof *plan);
    if (step->batch != p->batch)
        return vka_fail(ctx, VKATTN_ERROR_SHAPE_MISMATCH,
                           "kv attention: the step has %u sequences but q has batch %u",
                           step->batch, p->batch);
    const uint32_t d = c->d.head_dim, hkv = c->d.num_kv_heads, group = p->num_heads / hkv;
    const uint32_t tokens = p->new_tokens, rows = tokens * group;
    const bool decode = tokens <= VKA_KV_DECODE_MAX_TOKENS;
    plan->subgroup = ctx->info.subgroup_kernels;
    plan->texel = use_texel(ctx, c, p);
    kv_config cfg;
    uint32_t qs = vka_storage_kind(ctx, p->q.dtype), ks = vka_storage_kind(ctx, c->d.dtype);
    bool f16 = c->d.dtype == VKATTN_DTYPE_F16;
    if (plan->subgroup) {
        bool large = !decode && rows >= SG_LARGE_ROWS && step->max_length >= SG_LARGE_KEYS;
        /* Decode through texel views: the GEMV-like kernel (q is read a quad
         * at a time, so any quad-aligned q works), for sequences whose keys
         * take fewer trips of its loop (SG keys each) than lavapipe runs
         * (65535 per invocation, whatever the split count); longer ones take
         * the subgroup kernel (SG * C keys a trip). */
        if (decode && plan->texel && dec_config(ctx, d, rows, &cfg) &&
            step->max_length / ctx->info.subgroup_size < DEC_MAX_TRIPS) {
            cfg.kernel = &dec_texel[qs][f16];
        } else {
            sg_config(ctx, d, rows, large, &cfg);
            cfg.kernel = plan->texel ? &sg_texel[qs][f16] : &sg_storage[qs][ks];
        }
    } else {
        sm_config(ctx, d, rows, &cfg);
        cfg.kernel = plan->texel ? &sm_texel[qs][f16] : &sm_storage[qs][ks];
    }
    const uint32_t tiles = vka_div_up(rows, cfg.rows_per_group);

    /* Splits: only on the decode path; automatic ones give way when the
     * split scratch of this batch does not fit one binding. */
    uint64_t scratch_row = 4ull * (d + 2);
    uint64_t scratch_bytes = (uint64_t)p->batch * c->d.num_heads * VKATTN_KV_MAX_SPLIT_ROWS * scratch_row;
    bool scratch_fits = scratch_bytes + 256 <= vka_storage_window_limit(ctx);
    uint32_t splits = 1;
    if (decode && p->kv_splits) {
        splits = p->kv_splits;
    } else if (decode && scratch_fits) {
        /* automatic: the tuned count of this shape class, else the device's */
        splits = vka_kv_tuned_splits(ctx, c, p->q.dtype, p->batch, tokens, step->max_length);
        if (!splits)
            splits = auto_splits(ctx, step, p, tiles, hkv);
    }
    if (splits > 1 && !scratch_fits)
        return vka_fail(ctx, VKATTN_ERROR_UNSUPPORTED,
                           "kv attention: the split scratch of %u sequences spans %llu bytes, more "
                           "than one binding of this device can hold: use kv_splits 1 or smaller "
                           "batches", p->batch, (unsigned long long)scratch_bytes);
    const uint32_t *max = ctx->info.max_workgroup_count;
    if ((uint64_t)tiles * splits > max[0] || hkv > max[1] || p->batch > max[2])
        return vka_fail(ctx, VKATTN_ERROR_OUT_OF_RANGE,
                           "kv attention: a grid of %llu x %u x %u workgroups exceeds the device's "
                           "maxComputeWorkGroupCount (%u, %u, %u)",
                           (unsigned long long)tiles * splits, hkv, p->batch, max[0], max[1], max[2]);
    plan->splits = splits;
    plan->grid[0] = tiles * splits, plan->grid[1] = hkv, plan->grid[2] = p->batch;

    /* Bindings (slot 0, the metadata, comes with the step). */
    vka_kv_main_push *push = &plan->push;
    vka_binding *b = plan->bindings;
    uint32_t qst[3], ost[3];
    vkattn_result r = bind_tensor(ctx, &p->q, plan->texel, &b[1], &push->q_off, qst);
    if (r == VKATTN_SUCCESS)
        r = bind_pool(ctx, c, c->k, plan->texel, &b[2]);
    if (r == VKATTN_SUCCESS)
        r = bind_pool(ctx, c, c->v, plan->texel, &b[3]);
    if (r == VKATTN_SUCCESS)
        r = bind_tensor(ctx, &p->out, false, &b[4], &push->o_off, ost);
    /* The scratch is bound in both modes (written only with splits): one
     * kernel interface; the barrier before the pass orders it either way. */
    uint32_t unused;
    uint64_t window = splits > 1 ? scratch_bytes : scratch_row;
    if (r == VKATTN_SUCCESS)
        r = vka_bind_window(ctx, c->split_scratch, 0, window, 4, &b[5], &unused);
    if (r != VKATTN_SUCCESS)
        return r;
    push->q_sb = qst[0], push->q_sh = qst[1], push->q_st = qst[2];
    push->o_sb = ost[0], push->o_sh = ost[1], push->o_st = ost[2];
    push->batch = p->batch;
    push->tokens = tokens;
    push->group = group;
    push->kv_heads = hkv;
    push->block_size = c->d.block_size;
    push->table_width = c->table_width;
    push->splits = splits;
    push->split_align = cfg.block_keys;
    push->s_heads = c->d.num_heads;
    push->scale_log2 = (float)((double)p->scale * 1.4426950408889634);
    r = vka_pipeline_get(ctx, cfg.kernel, cfg.spec, 5, &plan->main);
    if (r != VKATTN_SUCCESS || splits == 1)
        return r;

    /* The combine pass: one invocation per output vec4. */
    uint32_t wg = vka_workgroup_size(ctx, COMBINE_WORKGROUP);
    uint64_t units = (uint64_t)p->batch * p->num_heads * tokens * (d / 4);
    uint32_t gx, gy;
    vka_grid_2d(ctx, vka_div_up64(units, wg), &gx, &gy);
    if (gy > max[1])
        return vka_fail(ctx, VKATTN_ERROR_OUT_OF_RANGE,
                           "kv attention: %llu output vec4s are too many for one dispatch",
                           (unsigned long long)units);
    plan->combine_grid[0] = gx, plan->combine_grid[1] = gy;
    plan->combine_bindings[0] = b[5];
    plan->combine_bindings[1] = b[4];
    vka_kv_combine_push *cp = &plan->combine_push;
    cp->o_off = push->o_off, cp->o_sb = push->o_sb, cp->o_sh = push->o_sh, cp->o_st = push->o_st;
    cp->batch = p->batch, cp->heads = p->num_heads, cp->tokens = tokens;
    cp->s_heads = c->d.num_heads, cp->splits = splits;
    uint32_t spec[2] = {wg, d};
    return vka_pipeline_get(ctx, &combine_kernels[qs], spec, 2, &plan->combine);
}
