/* Attention over a KV cache: which kernel, tiles, input binding and split
 * count a step runs, per device and step - the built-in choice, and the
 * split count vkattn_kv_attention_tune stored for the step's shape class.
 *
 * The split count is the decode path's main choice: too few splits leave
 * the device idle on short batches, too many add partial rows to combine.
 * The built-in choice (auto_splits) targets a workgroup count per device
 * type; the tuner times the candidates on a scratch cache and stores the
 * fastest split count per shape class, which automatic calls (kv_splits 0)
 * of that class then use.
 *
 * Tuning key (VKA_TUNE_KV_ATTENTION), values:
 *   0 head dim (+ v head dim << 16 where they differ)
 *   1 query heads per KV head, bucketed 1, 2, <=4, <=8, more
 *   2 new tokens per sequence, bucketed 1, 2, <=4, <=8, <=16
 *   3 cache length, bucketed <=256, <=1024, <=4096, <=16384, more
 *   4 sequences x KV heads (independent work), bucketed 1, <=4, <=16, <=64, more
 *   5 dtypes: 1 if q/out are f16, + 2 if the cache is f16
 *   6 1 if the cache is paged
 * Config words: 0 split count, 1-2 unused (0), 3 the version
 * (VKA_KV_CONFIG_VERSION: entries of another are not found). */
#include "ops/kvcache/kvcache_internal.h"

#include "ops/attention/attention.h"
#include "spec/attention_shapes.h"

#include <string.h>

#define SG_ROWS_MAX 8u /* rows per subgroup (4 above head dim 128) */
/* Keys per lane per key block: 4 for decode's few rows (fewer query
 * shuffles per K texel), 2 for 8 rows (what the attention kernel found
 * best; keeps the score registers in check). Figures: docs/tuning.md. */
#define SG_KEYS_FEW_ROWS 4u
#define SG_KEYS_MANY_ROWS 2u
/* Large prefills take large tiles (16 rows x 4 keys, 8 rows above head dim
 * 128): faster there, but several times the compile time on CPU drivers, so
 * only for problems that repay it (docs/tuning.md). */
#define SG_ROWS_LARGE 16u
#define SG_KEYS_LARGE 4u
#define SG_LARGE_ROWS 64u  /* T * group at least this... */
#define SG_LARGE_KEYS 256u /* ...and the longest sequence at least this */
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

/* Subgroup family: one subgroup per workgroup (several gain nothing on CPU
 * drivers, which run a workgroup's subgroups one after another) owning R rows
 * (a power of two covering the rows of a decode step where possible: the
 * group's query heads x queries), C keys per lane per block. */
static void sg_config(const vkattn_context *ctx, const vkattn_kv_cache *c, uint32_t rows,
                      bool large, vka_kv_config *cfg)
{
    uint32_t sg = ctx->info.subgroup_size;
    uint32_t rmax = large ? SG_ROWS_LARGE : SG_ROWS_MAX;
    uint32_t widest = c->k_row > c->v_row ? c->k_row : c->v_row;
    if (widest > 128)
        rmax /= 2;
    if (widest > VKA_HEAD_DIM_FAST_MAX) /* up to 576: a quarter, one key group a block */
        rmax /= 2;
    uint32_t r = pow2_at_least(rows);
    if (r > rmax)
        r = rmax;
    uint32_t keys = large ? SG_KEYS_LARGE : r <= 4 ? SG_KEYS_FEW_ROWS : SG_KEYS_MANY_ROWS;
    if (widest > VKA_HEAD_DIM_FAST_MAX)
        keys = 1;
    uint32_t spec[5] = {sg, sg, c->d.head_dim, r, keys};
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
static bool dec_config(const vkattn_context *ctx, uint32_t d, uint32_t rows, vka_kv_config *cfg)
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

/* Whether both pools fit texel views, as elements of `es` bytes. */
static bool pools_fit_texel(vkattn_context *ctx, const vkattn_kv_cache *c, size_t es)
{
    for (int i = 0; i < 2; i++) {
        uint64_t bytes = i ? c->v_pool_bytes : c->k_pool_bytes;
        vkattn_tensor pool = vkattn_tensor_make(i ? c->v : c->k, 0, c->d.dtype, 1, NULL);
        pool.dtype = es == 4 ? VKATTN_DTYPE_F32 : c->d.dtype;
        pool.shape[0] = (int64_t)(bytes / es);
        vka_box all = {{0}, {(uint64_t)pool.shape[0], 1, 1, 1}};
        if (!vka_box_fits_texel(ctx, &pool, &all))
            return false;
    }
    return true;
}

static bool q_fits_texel(vkattn_context *ctx, const vka_kv_attention_problem *p)
{
    vka_box qbox = {{0},
                    {(uint64_t)p->q.shape[0], (uint64_t)p->q.shape[1], (uint64_t)p->q.shape[2],
                     (uint64_t)p->q.shape[3]}};
    return vka_box_fits_texel(ctx, &p->q, &qbox);
}

/* Decode kernel over a quantized cache: lanes own ggml blocks (head dims
 * of 32 to 256 in a power of two of blocks), a key's blocks spread over
 * min(SG, D / 32) lanes; each lane keeps R rows of q and of the output for
 * the blocks it owns (R * 32 * blocks per lane at most DECQ_VALUES_MAX
 * values each); SG keys per key block. */
#define DECQ_VALUES_MAX 128u
static bool decq_config(const vkattn_context *ctx, const vkattn_kv_cache *c, uint32_t rows,
                        vka_kv_config *cfg)
{
    uint32_t sg = ctx->info.subgroup_size, d = c->d.head_dim;
    /* subgroups of 4 (SwiftShader) take the subgroup kernel: SwiftShader's
     * compiler runs out of memory on this one at head dim 64 */
    if (sg < 8 || (sg & (sg - 1)) || d % 32 || ((d / 32) & (d / 32 - 1)) || d > 256)
        return false;
    uint32_t blocks = d / 32, lanes = blocks < sg ? blocks : sg;
    uint32_t per_lane = 32 * (blocks / lanes);
    uint32_t r = pow2_at_least(rows);
    if (r > DEC_ROWS_MAX)
        r = DEC_ROWS_MAX;
    while (r > 1 && r * per_lane > DECQ_VALUES_MAX)
        r /= 2;
    uint32_t spec[5] = {sg, sg, d, r, 1};
    memcpy(cfg->spec, spec, sizeof spec);
    cfg->rows_per_group = r;
    cfg->block_keys = sg;
    return true;
}

/* Whether q and the pools of a quantized cache fit texel views (the pools
 * as rgba32ui texels of raw blocks). */
static bool quant_texel(vkattn_context *ctx, const vkattn_kv_cache *c,
                        const vka_kv_attention_problem *p)
{
    if (!ctx->info.texel_inputs)
        return false;
    return pools_fit_texel(ctx, c, 4) && q_fits_texel(ctx, p);
}

/* Shared-memory family: the tile of vka_att_sm_tile_fit, BR at most a power of
 * two covering the step's rows, each key's pool row kept beside K and V. */
static void sm_config(const vkattn_context *ctx, const vkattn_kv_cache *c, uint32_t rows,
                      vka_kv_config *cfg)
{
    vka_att_sm_tile t =
        vka_att_sm_tile_fit2(ctx, c->k_row, c->v_row, pow2_at_least(rows), false, false, 4);
    uint32_t spec[5] = {t.br * t.tpr, c->d.head_dim, t.br, t.bc, t.tpr};
    memcpy(cfg->spec, spec, sizeof spec);
    cfg->rows_per_group = t.br;
    cfg->block_keys = t.bc;
}

/* Coopmat family: the tile of vka_att_cm_tile (each key's pool row kept
 * beside K and V); false where it cannot run or does not fit. Splits and
 * everything after the tile work as in the shared-memory family. */
static bool cm_config(const vkattn_context *ctx, const vkattn_kv_cache *c,
                      const vka_kv_attention_problem *p, vka_kv_config *cfg)
{
    bool quant = vka_dtype_is_quantized(c->d.dtype);
    vka_att_cm_dims d = {c->d.head_dim, c->d.v_head_dim,
                         p->q.dtype == VKATTN_DTYPE_F32 || p->q.dtype == VKATTN_DTYPE_BF16,
                         c->d.dtype == VKATTN_DTYPE_F32 || quant, 4};
    uint32_t br, bc, wg;
    if (!vka_att_cm_tile(ctx, &d, 0, &br, &bc, &wg))
        return false;
    uint32_t spec[5] = {wg, c->d.head_dim, br, bc, wg / br};
    memcpy(cfg->spec, spec, sizeof spec);
    cfg->rows_per_group = br;
    cfg->block_keys = bc;
    cfg->texel = false;
    cfg->kernel = VKA_KV_KERNEL_COOPMAT;
    return true;
}

/* The most keys one row tile reads: the longest sequence, or with a window
 * W the W + T - 1 keys from its first query's window on (the split-KV work
 * covers only those: keys before the window are never read). */
static uint32_t read_length(const vka_kv_step *step, const vka_kv_attention_problem *p)
{
    uint64_t span = (uint64_t)p->mods.window + p->new_tokens - 1;
    return p->mods.window && span < step->max_length ? (uint32_t)span : step->max_length;
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
    uint64_t by_len =
        vka_div_up64(read_length(step, p), cpu ? CPU_MIN_SPLIT_KEYS : GPU_MIN_SPLIT_KEYS);
    if (splits > by_len)
        splits = by_len;
    if (splits > VKATTN_KV_MAX_SPLIT_ROWS / p->new_tokens)
        splits = VKATTN_KV_MAX_SPLIT_ROWS / p->new_tokens;
    return splits ? (uint32_t)splits : 1;
}

/* Texel views of q and both pools, where the device prefers them and they
 * fit (bf16: rgba32ui views, which only the decode kernel reads). */
static bool use_texel(vkattn_context *ctx, const vkattn_kv_cache *c,
                      const vka_kv_attention_problem *p)
{
    if (!ctx->info.texel_inputs || vka_dtype_is_quantized(c->d.dtype) || /* blocks: words */
        p->elem) /* q read one element at a time */
        return false;
    return pools_fit_texel(ctx, c, vkattn_dtype_size(c->d.dtype)) && q_fits_texel(ctx, p);
}

void vka_kv_tuning_key(const vkattn_kv_cache *c, vkattn_dtype q_dtype, uint32_t batch,
                       uint32_t new_tokens, uint32_t length, vka_tuning_key *key)
{
    static const uint32_t groups[] = {1, 2, 4, 8};
    static const uint32_t tokens[] = {1, 2, 4, 8};
    static const uint32_t lens[] = {256, 1024, 4096, 16384};
    static const uint32_t work[] = {1, 4, 16, 64};
    memset(key, 0, sizeof *key);
    key->op = VKA_TUNE_KV_ATTENTION;
    key->values[0] = c->d.head_dim + (c->d.v_head_dim != c->d.head_dim ? c->d.v_head_dim << 16 : 0);
    key->values[1] = vka_tuning_bucket(c->d.num_heads / c->d.num_kv_heads, groups, 4);
    key->values[2] = vka_tuning_bucket(new_tokens, tokens, 4);
    key->values[3] = vka_tuning_bucket(length, lens, 4);
    key->values[4] = vka_tuning_bucket((uint64_t)batch * c->d.num_kv_heads, work, 4);
    key->values[5] =
        (q_dtype == VKATTN_DTYPE_F16) + 2u * (c->d.dtype == VKATTN_DTYPE_F16) +
        4u * (q_dtype == VKATTN_DTYPE_BF16) + 8u * (c->d.dtype == VKATTN_DTYPE_BF16) +
        16u *
            (vka_dtype_is_quantized(c->d.dtype) ? (uint32_t)vka_quant_index(c->d.dtype) + 1u : 0u);
    key->values[6] = c->paged;
}

/* The stored split count of the shape class, or 0 when there is none (or
 * it does not suit this step): automatic splits then come from the device. */
static uint32_t tuned_splits(const vkattn_context *ctx, const vkattn_kv_cache *c,
                             vkattn_dtype q_dtype, uint32_t batch, uint32_t new_tokens,
                             uint32_t length)
{
    vka_tuning_key key;
    vka_kv_tuning_key(c, q_dtype, batch, new_tokens, length, &key);
    vka_tuning_config cfg;
    if (!vka_tuning_find(ctx, &key, VKA_KV_CONFIG_VERSION, &cfg))
        return 0;
    uint32_t splits = cfg.words[0];
    /* a stored count this step cannot take is ignored, never an error */
    if (!splits || !new_tokens || splits > VKATTN_KV_MAX_SPLIT_ROWS / new_tokens || splits > length)
        return 0;
    return splits;
}

/* The kernel, tiles and binding of a step's rows. */
static void choose_kernel(vkattn_context *ctx, const vkattn_kv_cache *c, const vka_kv_step *step,
                          const vka_kv_attention_problem *p, vka_kv_config *cfg)
{
    const uint32_t d = c->d.head_dim, group = p->num_heads / c->d.num_kv_heads;
    const uint32_t rows = p->new_tokens * group;
    const bool decode = p->new_tokens <= VKA_KV_DECODE_MAX_TOKENS;
    /* the decode kernels: one head dim, a multiple of 8 up to 256 */
    const bool one_dim = d == c->d.v_head_dim && d % 8 == 0 && d <= VKA_HEAD_DIM_FAST_MAX;
    cfg->texel = use_texel(ctx, c, p);
    /* bf16 through texel views in the decode kernel only; the others read
     * it from storage buffers */
    const bool bf16 = c->d.dtype == VKATTN_DTYPE_BF16 || p->q.dtype == VKATTN_DTYPE_BF16;
    /* matrix units: prefill over the cache, and decode steps whose query
     * heads per KV head fill a matrix's rows (GQA packing); the rest keep
     * the other kernels, even when the family is forced */
    if (ctx->info.coopmat_kernels && rows >= ctx->info.coopmat_shape.m && cm_config(ctx, c, p, cfg))
        return;
    if (!ctx->info.subgroup_kernels) {
        cfg->texel = cfg->texel && !bf16;
        cfg->kernel = VKA_KV_KERNEL_SHARED;
        sm_config(ctx, c, rows, cfg);
        return;
    }
    /* Decode through texel views: the GEMV-like kernel (q is read a quad at
     * a time, so any quad-aligned q works), for sequences whose keys take
     * fewer trips of its loop (SG keys each) than lavapipe runs (65535 per
     * invocation, whatever the split count); longer ones take the subgroup
     * kernel (SG * C keys a trip). */
    if (decode && one_dim && cfg->texel && dec_config(ctx, d, rows, cfg) &&
        read_length(step, p) / ctx->info.subgroup_size < DEC_MAX_TRIPS) {
        cfg->kernel = VKA_KV_KERNEL_DECODE;
        return;
    }
    if (decode && one_dim && vka_dtype_is_quantized(c->d.dtype) && quant_texel(ctx, c, p) &&
        decq_config(ctx, c, rows, cfg) && read_length(step, p) / cfg->block_keys < DEC_MAX_TRIPS) {
        cfg->kernel = VKA_KV_KERNEL_DECODE_QUANT;
        cfg->texel = true;
        return;
    }
    cfg->texel = cfg->texel && !bf16;
    bool large = !decode && rows >= SG_LARGE_ROWS && read_length(step, p) >= SG_LARGE_KEYS;
    cfg->kernel = VKA_KV_KERNEL_SUBGROUP;
    sg_config(ctx, c, rows, large, cfg);
}

vkattn_result vka_kv_config_choose(vkattn_context *ctx, const vkattn_kv_cache *c,
                                   const vka_kv_step *step, const vka_kv_attention_problem *p,
                                   vka_kv_config *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    const uint32_t hkv = c->d.num_kv_heads, tokens = p->new_tokens;
    const bool decode = tokens <= VKA_KV_DECODE_MAX_TOKENS;
    choose_kernel(ctx, c, step, p, cfg);
    cfg->tiles = vka_div_up(tokens * (p->num_heads / hkv), cfg->rows_per_group);

    /* Splits: only on the decode path; automatic ones give way when the
     * split scratch of this batch does not fit one binding. */
    cfg->scratch_bytes = (uint64_t)p->batch * c->d.num_heads * VKATTN_KV_MAX_SPLIT_ROWS * 4ull *
                         (c->d.v_head_dim + 2);
    bool scratch_fits = cfg->scratch_bytes + 256 <= vka_storage_window_limit(ctx);
    uint32_t splits = 1;
    if (decode && p->kv_splits) {
        splits = p->kv_splits;
    } else if (decode && scratch_fits) {
        /* automatic: the tuned count of this shape class, else the device's */
        splits = tuned_splits(ctx, c, p->q.dtype, p->batch, tokens, read_length(step, p));
        if (!splits)
            splits = auto_splits(ctx, step, p, cfg->tiles, hkv);
    }
    if (splits > 1 && !scratch_fits)
        return vka_fail(ctx, VKATTN_ERROR_UNSUPPORTED,
                        "kv attention: the split scratch of %u sequences spans %llu bytes, more "
                        "than one binding of this device can hold: use kv_splits 1 or smaller "
                        "batches",
                        p->batch, (unsigned long long)cfg->scratch_bytes);
    const uint32_t *max = ctx->info.max_workgroup_count;
    if ((uint64_t)cfg->tiles * splits > max[0] || hkv > max[1] || p->batch > max[2])
        return vka_fail(ctx, VKATTN_ERROR_OUT_OF_RANGE,
                        "kv attention: a grid of %llu x %u x %u workgroups exceeds the device's "
                        "maxComputeWorkGroupCount (%u, %u, %u)",
                        (unsigned long long)cfg->tiles * splits, hkv, p->batch, max[0], max[1],
                        max[2]);
    cfg->splits = splits;
    return VKATTN_SUCCESS;
}
