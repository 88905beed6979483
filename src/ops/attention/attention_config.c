/* Attention: which kernel configuration a call runs - family, input
 * binding, tile preset - from the tuning table or the built-in choice, and
 * the specialization constants that realise it.
 *
 * Tuning key (VKA_TUNE_ATTENTION), values:
 *   0 head dim (exact: it is a specialization constant anyway); where v's
 *     head dim differs, + v_head_dim << 16
 *   1 query heads per KV head, bucketed 1, 2, <=4, <=8, more
 *   2 queries per head (Tq), bucketed 1, <=16, <=64, <=256, <=1024, more
 *   3 keys (Tk), bucketed the same way
 *   4 causal (0/1)
 *   5 dtypes: 1 if q/out are f16, + 2 if k/v are f16, + 4 if q/out are
 *     bf16, + 8 if k/v are bf16; where v's dtype differs from k's or they
 *     are quantized, + 16 (v's dtype + 1) + 256 (k's dtype + 1)
 *   6 batch x KV heads (independent work), bucketed 1, <=4, <=16, more
 * Config words: 0 family (ATT_FAMILY_*), 1 texel inputs (0/1), 2 preset,
 * 3 the version (ATT_CONFIG_VERSION: entries of another are not found). */
#include "ops/attention/attention_internal.h"
#include "core/tuning_table.h"

#include <string.h>

/* Subgroup family presets: rows per subgroup (R), keys per lane per key
 * block (C) and rows per P.V register block (RB). Code size, and a CPU
 * driver's compile time, grow with R x C; R halves above head dim 128 (live
 * outputs), and above 256 R is a quarter and C 1 (vka_att_config_spec). Why
 * these three: docs/tuning.md. */
typedef struct sg_preset {
    uint32_t rows, keys, row_block;
} sg_preset;
static const sg_preset sg_presets[] = {
    {8, 2, 2},  /* 0: small problems: quick to compile */
    {16, 2, 2}, /* 1: large problems */
    {16, 4, 2}, /* 2: longer key blocks (fewer softmax passes) */
};
#define SG_PRESETS (sizeof sg_presets / sizeof sg_presets[0])
/* Problems with at least this many (row, key) pairs per KV head take a
 * large preset: below, its compile time is not repaid. */
#define SG_LARGE_PAIRS (64u * 256u)
#define SG_LARGE_PRESET 1u
#define SG_WORKGROUP 32u /* what LAVAPIPE.md found best for GEMM */

/* Shared-memory family presets: the full tile of vka_att_sm_tile_fit (0), half the
 * rows (1: more workgroups for small problems), half the keys (2: less
 * shared memory per workgroup, more resident workgroups). */
#define SM_PRESETS 3u

/* Coopmat family: rows and keys per workgroup as multiples of the device's
 * matrices (preset 0: two of each, shrunk to fit; 1: one of each), four
 * subgroups. */
#define CM_PRESETS 2u
#define CM_SUBGROUPS 4u

typedef struct cm_tile {
    uint32_t br, bc, wg;
} cm_tile;

/* Shared memory of attention_cm.comp's (and kv_attention_cm.comp's) tiles:
 * f16 tiles, a second copy of each split operand, f32 scores and P V, and
 * `key_extra_bytes` per key. */
static uint64_t cm_bytes(const vkattn_coopmat_shape *s, const vka_att_cm_dims *d, cm_tile t)
{
    uint64_t dkc = ((d->dk + 7) / 8 * 8 + s->k - 1) / s->k * s->k;
    uint64_t dvc = ((d->dv + 7) / 8 * 8 + s->n - 1) / s->n * s->n;
    uint64_t qs = d->q_split ? 2 : 1, kvs = d->kv_split ? 2 : 1;
    uint64_t tpr = t.wg / t.br;
    return 2 * (qs * t.br * (dkc + 8) + kvs * t.bc * (dkc + 8) + kvs * t.bc * (dvc + 8) +
                qs * t.br * (t.bc + 8)) +
           4 * ((uint64_t)t.br * t.bc + t.br * dvc + t.br * tpr) +
           (uint64_t)d->key_extra_bytes * t.bc;
}

bool vka_att_cm_tile(const vkattn_context *ctx, const vka_att_cm_dims *d, uint32_t preset,
                     uint32_t *br, uint32_t *bc, uint32_t *wg)
{
    const vkattn_coopmat_shape *s = &ctx->info.coopmat_shape;
    if (!s->m || !vka_coopmat_allowed(ctx))
        return false;
    uint32_t kn = s->n > s->k ? s->n : s->k; /* keys: whole N (S) and K (P V) */
    cm_tile t = {preset == 0 ? 2 * s->m : s->m, preset == 0 ? 2 * kn : kn,
                 CM_SUBGROUPS * vka_subgroup_size(ctx)};
    while (t.wg > vka_max_workgroup(ctx) && t.wg > vka_subgroup_size(ctx))
        t.wg /= 2;
    for (;;) {
        if (t.br <= t.wg && t.wg % t.br == 0 && cm_bytes(s, d, t) <= ctx->info.max_shared_memory) {
            *br = t.br;
            *bc = t.bc;
            *wg = t.wg;
            return true;
        }
        if (t.bc > kn)
            t.bc /= 2;
        else if (t.br > s->m)
            t.br /= 2;
        else
            return false;
    }
}

static bool cm_tile_for(const vkattn_context *ctx, const vka_att_problem *p, uint32_t preset,
                        cm_tile *out)
{
    const vka_attention_dims *d = &p->dims;
    vka_att_cm_dims dims = {d->head_dim, d->v_head_dim,
                            d->q_dtype == VKATTN_DTYPE_F32 || d->q_dtype == VKATTN_DTYPE_BF16,
                            d->kv_dtype == VKATTN_DTYPE_F32 || vka_att_kv_any(p), 0};
    return vka_att_cm_tile(ctx, &dims, preset, &out->br, &out->bc, &out->wg);
}

bool vka_att_coopmat_fits(const vkattn_context *ctx, const vka_att_problem *p)
{
    cm_tile t;
    return vka_coopmat_allowed(ctx) && cm_tile_for(ctx, p, CM_PRESETS - 1, &t);
}

bool vka_att_config_valid(const vkattn_context *ctx, const vka_att_config *cfg)
{
    if (cfg->family == ATT_FAMILY_COOPMAT) /* storage inputs only */
        return vka_coopmat_allowed(ctx) && !cfg->texel && cfg->preset < CM_PRESETS;
    if (cfg->family == ATT_FAMILY_SUBGROUP)
        return vka_subgroup_families_allowed(ctx) && cfg->preset < SG_PRESETS;
    if (cfg->family == ATT_FAMILY_SHARED)
        return cfg->preset < SM_PRESETS;
    return false;
}

static uint64_t pairs_per_kv_head(const vka_att_problem *p)
{
    const vka_attention_dims *d = &p->dims;
    return (uint64_t)d->q_len * (d->num_heads / d->num_kv_heads) * d->kv_len;
}

void vka_att_config_default(const vkattn_context *ctx, const vka_att_problem *p,
                            vka_att_config *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    /* matrix units: where the rows a KV head's workgroups share fill a
     * matrix (prefill, or GQA groups as large), or wherever forced; head
     * dims whose smallest tile does not fit keep the other families */
    const vka_attention_dims *d = &p->dims;
    uint64_t rows = (uint64_t)d->q_len * (d->num_heads / d->num_kv_heads);
    if (ctx->info.coopmat_kernels && vka_att_coopmat_fits(ctx, p) &&
        (rows >= ctx->info.coopmat_shape.m || (ctx->flags & VKATTN_CONTEXT_COOPMAT_KERNELS))) {
        cfg->family = ATT_FAMILY_COOPMAT;
        return;
    }
    cfg->texel = ctx->info.texel_inputs;
    if (ctx->info.subgroup_kernels) {
        cfg->family = ATT_FAMILY_SUBGROUP;
        cfg->preset = pairs_per_kv_head(p) >= SG_LARGE_PAIRS ? SG_LARGE_PRESET : 0;
    } else {
        cfg->family = ATT_FAMILY_SHARED;
    }
}

void vka_att_tuning_key(const vka_att_problem *p, uint32_t key[7])
{
    static const uint32_t groups[] = {1, 2, 4, 8};
    static const uint32_t lens[] = {1, 16, 64, 256, 1024};
    static const uint32_t work[] = {1, 4, 16};
    const vka_attention_dims *d = &p->dims;
    /* Dv joins only where it differs, so keys of Dk == Dv calls stay valid */
    key[0] = d->head_dim + (d->v_head_dim != d->head_dim ? d->v_head_dim << 16 : 0);
    key[1] = vka_tuning_bucket(d->num_heads / d->num_kv_heads, groups, 4);
    key[2] = vka_tuning_bucket(d->q_len, lens, 5);
    key[3] = vka_tuning_bucket(d->kv_len, lens, 5);
    key[4] = p->causal;
    key[5] =
        (d->q_dtype == VKATTN_DTYPE_F16) + 2u * (d->kv_dtype == VKATTN_DTYPE_F16) +
        4u * (d->q_dtype == VKATTN_DTYPE_BF16) + 8u * (d->kv_dtype == VKATTN_DTYPE_BF16) +
        (vka_att_kv_any(p) ? 16u * (1u + (uint32_t)d->v_dtype) + 256u * (1u + (uint32_t)d->kv_dtype)
                           : 0u);
    key[6] = vka_tuning_bucket((uint64_t)d->batch * d->num_kv_heads, work, 3);
}

void vka_att_config_choose(vkattn_context *ctx, const vka_att_problem *p, vka_att_config *cfg)
{
    vka_tuning_key key = {.op = VKA_TUNE_ATTENTION};
    vka_att_tuning_key(p, key.values);
    vka_tuning_config stored;
    if (vka_tuning_find(ctx, &key, ATT_CONFIG_VERSION, &stored)) {
        vka_att_config c = {stored.words[0], stored.words[1] != 0, stored.words[2]};
        /* texel inputs the device cannot take simply fall back to storage */
        c.texel = c.texel && ctx->info.texel_inputs;
        if (vka_att_config_valid(ctx, &c) &&
            (c.family != ATT_FAMILY_COOPMAT || vka_att_coopmat_fits(ctx, p))) {
            *cfg = c;
            return;
        }
    }
    vka_att_config_default(ctx, p, cfg);
}

uint32_t vka_att_config_candidates(const vkattn_context *ctx, const vka_att_problem *p,
                                   vka_att_config *out, uint32_t max)
{
    uint32_t n = 0;
    for (uint32_t preset = 0; vka_att_coopmat_fits(ctx, p) && preset < CM_PRESETS; preset++)
        if (n < max)
            out[n++] = (vka_att_config){ATT_FAMILY_COOPMAT, false, preset};
    for (uint32_t fam = ATT_FAMILY_SUBGROUP; fam <= ATT_FAMILY_SHARED; fam++) {
        uint32_t presets = fam == ATT_FAMILY_SUBGROUP ? SG_PRESETS : SM_PRESETS;
        for (int texel = ctx->info.texel_inputs ? 1 : 0; texel >= 0; texel--)
            for (uint32_t preset = 0; preset < presets; preset++) {
                vka_att_config c = {fam, texel != 0, preset};
                /* storage inputs only with the family's first preset: the
                 * binding and the tiles are nearly independent choices */
                if (!vka_att_config_valid(ctx, &c) ||
                    (!c.texel && ctx->info.texel_inputs && preset))
                    continue;
                if (n < max)
                    out[n++] = c;
            }
    }
    return n;
}

vka_att_sm_tile vka_att_sm_tile_fit(const vkattn_context *ctx, uint32_t head_dim, uint32_t max_rows,
                                    bool half_rows, bool half_keys, uint32_t key_extra_bytes)
{
    return vka_att_sm_tile_fit2(ctx, head_dim, head_dim, max_rows, half_rows, half_keys,
                                key_extra_bytes);
}

vka_att_sm_tile vka_att_sm_tile_fit2(const vkattn_context *ctx, uint32_t head_dim,
                                     uint32_t v_head_dim, uint32_t max_rows, bool half_rows,
                                     bool half_keys, uint32_t key_extra_bytes)
{
    /* q and k rows are dc vec4s, v and out rows vc; TPR serves the output */
    uint32_t dc = head_dim / 4, vc = v_head_dim / 4, tpr = 8;
    while (tpr * 4 < vc)
        tpr *= 2;
    uint32_t wg = vka_workgroup_size(ctx, 128);
    if (tpr > wg)
        tpr = wg;
    vka_att_sm_tile t = {tpr, wg / tpr, 4 * tpr};
    if (half_rows && t.br > 1)
        t.br /= 2;
    if (t.br > max_rows)
        t.br = max_rows;
    if (half_keys && t.bc > 8)
        t.bc /= 2;
    for (;;) {
        uint64_t bytes = 16ull * (t.br * dc + (uint64_t)t.bc * (dc + vc)) +
                         4ull * (t.br * t.bc + t.br * tpr) + (uint64_t)key_extra_bytes * t.bc;
        if (bytes <= ctx->info.max_shared_memory)
            break;
        if (t.bc > 8)
            t.bc /= 2;
        else if (t.br > 1)
            t.br /= 2;
        else if (t.bc > 1)
            t.bc /= 2;
        else
            break; /* 1 row x 1 key of D <= 576 is 7 KiB: every device has 16 KiB */
    }
    return t;
}

/* Shared-memory family: the tile of vka_att_sm_tile_fit; preset 1 halves the
 * rows (more workgroups for small problems), preset 2 the keys (less shared
 * memory per workgroup, more resident workgroups). */
static uint32_t sm_spec(const vkattn_context *ctx, uint32_t d, uint32_t dv, uint32_t preset,
                        uint32_t spec[ATT_SPEC_MAX], uint32_t *rows_per_group)
{
    /* the tiles hold rows padded to multiples of 8 (attention_sm.comp) */
    vka_att_sm_tile t = vka_att_sm_tile_fit2(ctx, (d + 7) / 8 * 8, (dv + 7) / 8 * 8, UINT32_MAX,
                                             preset == 1, preset == 2, 0);
    const uint32_t s[6] = {t.br * t.tpr, d, t.br, t.bc, t.tpr, dv};
    memcpy(spec, s, sizeof s);
    *rows_per_group = t.br;
    return 6;
}

uint32_t vka_att_config_spec(const vkattn_context *ctx, const vka_att_problem *p,
                             const vka_att_config *cfg, uint32_t spec[ATT_SPEC_MAX],
                             uint32_t *rows_per_group)
{
    uint32_t d = p->dims.head_dim, dv = p->dims.v_head_dim;
    cm_tile t;
    if (cfg->family == ATT_FAMILY_COOPMAT && cm_tile_for(ctx, p, cfg->preset, &t)) {
        /* (ids 16..18, the matrix shape, the recording adds) */
        const uint32_t s[6] = {t.wg, d, t.br, t.bc, t.wg / t.br, dv};
        memcpy(spec, s, sizeof s);
        *rows_per_group = t.br;
        return 6;
    }
    if (cfg->family != ATT_FAMILY_SUBGROUP)
        return sm_spec(ctx, d, dv, cfg->preset, spec, rows_per_group);
    uint32_t sg = ctx->info.subgroup_size;
    uint32_t wg = vka_workgroup_size(ctx, SG_WORKGROUP < sg ? sg : SG_WORKGROUP);
    const sg_preset *ps = &sg_presets[cfg->preset < SG_PRESETS ? cfg->preset : 0];
    /* Live registers grow with the head dims: above 128 half the rows, above
     * 256 (up to 576: MLA) a quarter of them and one key group per block.
     * Rows read element by element (head dims not multiples of 8) take the
     * small tiles too: their unrolled loads are what a CPU driver's compile
     * time grows with. */
    uint32_t dmax = ((d > dv ? d : dv) + 7) / 8 * 8; /* (rows padded to 8) */
    bool small = dmax > 256 || vka_att_elem(p);
    uint32_t rows = small ? ps->rows / 4 : dmax > 128 ? ps->rows / 2 : ps->rows;
    uint32_t keys = small ? 1 : ps->keys;
    uint32_t rb = ps->row_block < rows ? ps->row_block : rows;
    bool masks = p->mask.buffer || p->key_padding.buffer;
    const uint32_t s[8] = {wg, sg, d, rows, keys, rb, masks, dv};
    memcpy(spec, s, sizeof s);
    *rows_per_group = rows * (wg / sg);
    return 8;
}
