/* Kernel configurations of the linear op: which family, input binding and
 * tile preset runs a problem, from the device's limits (built-in choice) or
 * from the tuning table; what a configuration becomes for one problem
 * (specialization constants, tiles, grid).
 *
 * Tuning key (VKA_TUNE_LINEAR; the shape class):
 *   values[0]  rows M, bucketed: 1, 2, 3-4, 5-8, ..., 1025-2048, more
 *   values[1]  columns N, bucketed at 256, 1024, 4096, 16384
 *   values[2]  K, bucketed at 256, 1024, 4096, 16384
 *   values[3]  x is f32 (0), f16 (1) or bf16 (2)
 *   values[4]  w is f32 (0), f16 (1), bf16 (2) or q8_0 (3)
 *   values[5]  0
 *   values[6]  0
 * Problems whose segments append to a KV cache pool (the projection of an
 * MHA step) take the plain GEMM's entry: the pool changes only the stores of
 * the epilogue, not the main loop the configuration shapes, and it is the
 * plain GEMM that vkattn_linear_tune times.
 * Tuning config: words[0] family, [1] input binding, [2] preset,
 * [3] the version (LINEAR_CONFIG_VERSION: entries of another are not found). */
#include "ops/linear/linear_internal.h"
#include "core/tuning_table.h"

#include <string.h>

/* Subgroup GEMM tiles: rows per subgroup (rounded to whole subgroups), the
 * columns per lane, quads of K per unrolled trip. Fetches dominate on CPU
 * drivers, so tiles are as large as the accumulator spills and the unrolled
 * code size allow (docs/tuning.md). */
typedef struct sg_preset {
    uint32_t rows, tn, kq;
} sg_preset;
static const sg_preset sg_presets[] = {
    {32, 8, 4}, /* 0: the default */
    {32, 8, 2}, /* 1: half the unrolled body (compile time, instruction cache) */
    {64, 8, 2}, /* 2: taller: fewer W fetches per FMA */
    {16, 8, 4}, /* 3: short: few rows */
    {32, 4, 4}, /* 4: narrow: few columns */
};
#define SG_PRESETS (sizeof sg_presets / sizeof sg_presets[0])

/* Shared-memory GEMM tiles: BM x BM block per workgroup, T x T per
 * invocation, BK deep: big blocks for GPUs with the shared memory and the
 * invocations for them, small ones for the rest. */
typedef struct sh_preset {
    uint32_t bm, t, bk;
} sh_preset;
static const sh_preset sh_presets[] = {
    {32, 4, 16},  /* 0: 64 invocations, 4 KiB */
    {128, 8, 16}, /* 1: 256 invocations, 17 KiB: GPUs */
    {64, 4, 16},  /* 2: 256 invocations, 8.5 KiB */
    {64, 8, 16},  /* 3: 64 invocations, 8.5 KiB */
};
#define SH_PRESETS (sizeof sh_presets / sizeof sh_presets[0])

/* GEMV on subgroups: columns per subgroup, unrolled steps, subgroups per
 * workgroup. */
typedef struct gemv_preset {
    uint32_t nr, unroll, teams;
} gemv_preset;
static const gemv_preset gemv_sg_presets[] = {
    {8, 4, 4},  /* 0: the default for 3-8 rows */
    {4, 4, 4},  /* 1 */
    {16, 2, 4}, /* 2: the default for 1-2 rows of f16 weights */
};
/* Preset 2 halves the X fetches per W fetch: it pays with f16 weights (one
 * fetch per 8 weights), not with f32 (two); figures in docs/tuning.md. */
#define GEMV_SG_FEW_ROWS_PRESET 2u
#define GEMV_SG_PRESETS (sizeof gemv_sg_presets / sizeof gemv_sg_presets[0])

/* GEMV on a workgroup (shared-memory reduction): invocations (power of
 * two), columns per workgroup. */
typedef struct gemv_sh_preset {
    uint32_t wg, nr;
} gemv_sh_preset;
static const gemv_sh_preset gemv_sh_presets[] = {
    {128, 2}, /* 0: the default */
    {64, 4},  /* 1 */
    {256, 2}, /* 2 */
};
#define GEMV_SH_PRESETS (sizeof gemv_sh_presets / sizeof gemv_sh_presets[0])

/* Cooperative-matrix GEMM tiles: subgroups along M and N, matrices per
 * subgroup along M and N (each the device's CM_M x CM_N), K step in
 * elements (rounded up to whole CM_K). */
typedef struct cm_preset {
    uint32_t sg_rows, sg_cols, tr, tc, bk;
} cm_preset;
static const cm_preset cm_presets[] = {
    {2, 2, 2, 2, 32}, /* 0: the default: 4 subgroups, 4 matrices each */
    {2, 2, 4, 2, 32}, /* 1: taller: fewer W loads per FMA (big M) */
    {1, 1, 2, 2, 32}, /* 2: one subgroup: small problems, many workgroups */
    {2, 2, 2, 4, 16}, /* 3: wider, shallower K step (shared memory) */
};
#define CM_PRESETS (sizeof cm_presets / sizeof cm_presets[0])

static bool is_16bit(vkattn_dtype dt) { return dt == VKATTN_DTYPE_F16 || dt == VKATTN_DTYPE_BF16; }

static bool has_16bit_operand(const vka_linear_problem *p)
{
    return is_16bit(p->x.dtype) || is_16bit(p->w.dtype);
}

/* The subgroup families' binding: CPU drivers pay per fetch, so f16 and
 * bf16 operands come 8 at a time (packed); f32 operands have no packed
 * form (plain texels); storage buffers without texel inputs. */
static uint32_t subgroup_input(const vkattn_context *ctx, const vka_linear_problem *p)
{
    if (!ctx->info.texel_inputs)
        return LINEAR_INPUT_STORAGE;
    if (p->w.dtype == VKATTN_DTYPE_Q8_0) /* texels in the GEMV only */
        return p->M <= LINEAR_GEMV_MAX_ROWS ? LINEAR_INPUT_TEXEL : LINEAR_INPUT_STORAGE;
    return has_16bit_operand(p) ? LINEAR_INPUT_TEXEL_PACKED : LINEAR_INPUT_TEXEL;
}

static bool family_valid(const vkattn_context *ctx, const vka_linear_problem *p,
                         const vka_linear_config *c);

/* Shared memory of a coopmat plan: the f16 tiles (a second copy of an
 * operand that is split into two halves) and the staged f32 output tile
 * with the epilogue's arrays (linear_io.glsl) beside it. */
static uint64_t cm_shared(const vka_linear_problem *p, const vka_linear_plan *plan)
{
    uint64_t bm = plan->spec[1], bn = plan->spec[2], ldk = plan->spec[3] + 8;
    uint64_t xs = p->x.dtype == VKATTN_DTYPE_F32 ? 2 : 1;
    uint64_t ws = p->w.dtype == VKATTN_DTYPE_F32 || p->w.dtype == VKATTN_DTYPE_Q8_0 ? 2 : 1;
    uint64_t hd = plan->spec[8] ? plan->spec[8] : bn, heads = bn / hd;
    uint64_t rot = vka_linear_has_heads(p) ? p->heads.rope_dims / 2 : 0;
    return (bm * xs + bn * ws) * ldk * 2 + bm * bn * 4 + bm * heads * 4 * 4 + (bm * rot + 1) * 8 +
           bm * 3 * 4 + heads * 2 * 4;
}

/* The heads epilogue's tiles (see vka_linear_plan_make) within the
 * device's workgroup and shared-memory limits. */
static bool heads_fit(const vkattn_context *ctx, const vka_linear_problem *p,
                      const vka_linear_config *c)
{
    if (c->family == LINEAR_FAM_GEMV_SH) /* a workgroup owns too few columns */
        return false;
    vka_linear_plan plan;
    vka_linear_plan_make(ctx, p, c, &plan);
    if (c->family == LINEAR_FAM_CM)
        return plan.epi_cols % p->head_dim[0] == 0 && plan.spec[5] <= 8 &&
               plan.spec[0] <= vka_max_workgroup(ctx) &&
               cm_shared(p, &plan) <= ctx->info.max_shared_memory;
    uint64_t hd = p->head_dim[0];
    if (!plan.epi_cols || plan.epi_cols % hd)
        return false;
    /* linear_io.glsl's epi_* arrays: the staged rows, partial sums (4 per
     * head row), angles, row and head addresses */
    uint64_t rows = plan.epi_rows, heads = plan.epi_cols / hd;
    uint64_t shared = rows * plan.epi_cols * 4 + rows * heads * 4 * 4 +
                      (rows * (p->heads.rope_dims / 2) + 1) * 8 + rows * 3 * 4 + heads * 2 * 4;
    if (c->family == LINEAR_FAM_SH) /* BM, BN, BK: spec 1..3 */
        shared += ((uint64_t)plan.spec[1] + plan.spec[2]) * (plan.spec[3] / 4 + 1) * 16;
    return plan.spec[0] <= vka_max_workgroup(ctx) && shared <= ctx->info.max_shared_memory;
}

bool vka_linear_config_valid(const vkattn_context *ctx, const vka_linear_problem *p,
                             const vka_linear_config *c)
{
    if (!family_valid(ctx, p, c))
        return false;
    return !vka_linear_has_heads(p) || heads_fit(ctx, p, c);
}

static bool family_valid(const vkattn_context *ctx, const vka_linear_problem *p,
                         const vka_linear_config *c)
{
    uint32_t max_wg = vka_max_workgroup(ctx), sg = vka_subgroup_size(ctx);
    if (c->input >= LINEAR_INPUT_COUNT)
        return false;
    if (c->input != LINEAR_INPUT_STORAGE && !ctx->info.texel_inputs)
        return false;
    /* q8_0 blocks: rgba32ui texels in the GEMV kernels, else words */
    bool gemv_family = c->family == LINEAR_FAM_GEMV_SG || c->family == LINEAR_FAM_GEMV_SH;
    if (p->w.dtype == VKATTN_DTYPE_Q8_0 && c->input != LINEAR_INPUT_STORAGE &&
        !(gemv_family && c->input == LINEAR_INPUT_TEXEL))
        return false;
    /* packed texels carry halves: with f32 operands only, the packed
     * binding would run the plain texel kernel under another name */
    if (c->input == LINEAR_INPUT_TEXEL_PACKED && !has_16bit_operand(p))
        return false;
    bool gemv = c->family == LINEAR_FAM_GEMV_SG || c->family == LINEAR_FAM_GEMV_SH;
    if (gemv && p->M > LINEAR_GEMV_MAX_ROWS)
        return false;
    switch (c->family) {
    case LINEAR_FAM_SG:
        return vka_subgroup_families_allowed(ctx) && c->preset < SG_PRESETS && sg <= max_wg;
    case LINEAR_FAM_GEMV_SG:
        return vka_subgroup_families_allowed(ctx) && c->preset < GEMV_SG_PRESETS && sg <= max_wg;
    case LINEAR_FAM_SH: {
        if (c->preset >= SH_PRESETS || c->input == LINEAR_INPUT_TEXEL_PACKED)
            return false;
        const sh_preset *s = &sh_presets[c->preset];
        uint32_t wg = (s->bm / s->t) * (s->bm / s->t);
        uint64_t shared = 2ull * s->bm * (s->bk / 4 + 1) * 16;
        return wg <= max_wg && shared <= ctx->info.max_shared_memory;
    }
    case LINEAR_FAM_CM: {
        if (c->preset >= CM_PRESETS || c->input != LINEAR_INPUT_STORAGE ||
            !vka_coopmat_allowed(ctx))
            return false;
        vka_linear_plan plan;
        vka_linear_plan_make(ctx, p, c, &plan);
        return plan.spec[0] <= max_wg && cm_shared(p, &plan) <= ctx->info.max_shared_memory;
    }
    case LINEAR_FAM_GEMV_SH: {
        if (c->preset >= GEMV_SH_PRESETS)
            return false;
        const gemv_sh_preset *s = &gemv_sh_presets[c->preset];
        return s->wg <= max_wg &&
               (uint64_t)LINEAR_GEMV_MAX_ROWS * s->nr * s->wg * 4 <= ctx->info.max_shared_memory;
    }
    default:
        return false;
    }
}

void vka_linear_config_default(const vkattn_context *ctx, const vka_linear_problem *p,
                               vka_linear_config *c)
{
    bool gemv = p->M <= LINEAR_GEMV_MAX_ROWS;
    memset(c, 0, sizeof *c);
    /* matrix units: GEMMs; few rows stay on the GEMVs (bandwidth-bound)
     * unless the coopmat family is forced */
    if (ctx->info.coopmat_kernels && (!gemv || (ctx->flags & VKATTN_CONTEXT_COOPMAT_KERNELS))) {
        *c = (vka_linear_config){LINEAR_FAM_CM, LINEAR_INPUT_STORAGE, 0};
        if (p->M >= 1024) /* tall tiles halve the W tile loads */
            c->preset = 1;
        uint32_t first = c->preset;
        for (uint32_t i = 0; i < CM_PRESETS; i++) {
            c->preset = (first + i) % CM_PRESETS;
            if (vka_linear_config_valid(ctx, p, c))
                return;
        }
        memset(c, 0, sizeof *c);
    }
    if (ctx->info.subgroup_kernels) {
        c->family = gemv ? LINEAR_FAM_GEMV_SG : LINEAR_FAM_SG;
        if (gemv && p->M <= 2 && p->w.dtype == VKATTN_DTYPE_F16)
            c->preset = GEMV_SG_FEW_ROWS_PRESET;
        c->input = subgroup_input(ctx, p);
    } else {
        c->family = gemv ? LINEAR_FAM_GEMV_SH : LINEAR_FAM_SH;
        /* GPUs convert rgba16f in the texture unit */
        c->input = ctx->info.texel_inputs && (p->w.dtype != VKATTN_DTYPE_Q8_0 || gemv)
                       ? LINEAR_INPUT_TEXEL
                       : LINEAR_INPUT_STORAGE;
        if (!gemv) {
            /* the big tiles where workgroups of 256 and the shared memory
             * for them are available and subgroups are GPU-sized */
            c->preset = 1;
            if (vka_subgroup_size(ctx) < 16 || !vka_linear_config_valid(ctx, p, c))
                c->preset = 0;
        }
    }
    if (!vka_linear_config_valid(ctx, p, c)) /* e.g. tiny workgroup limits */
        c->preset = 0;
    if (vka_linear_has_heads(p) && !vka_linear_config_valid(ctx, p, c)) {
        /* the heads epilogue needs a workgroup over whole heads: the
         * shared-memory GEMV has too few columns, so the GEMM takes few rows too */
        if (c->family == LINEAR_FAM_GEMV_SH) {
            c->family = LINEAR_FAM_SH;
            c->input = c->input == LINEAR_INPUT_TEXEL_PACKED ? LINEAR_INPUT_TEXEL : c->input;
        }
        for (c->preset = 0; c->preset < 4 && !vka_linear_config_valid(ctx, p, c); c->preset++)
            ;
        if (c->preset == 4)
            c->preset = 0; /* recording reports that nothing fits */
    }
}

void vka_linear_tuning_key(const vka_linear_problem *p, uint32_t key[7])
{
    static const uint32_t rows[] = {1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048};
    static const uint32_t cols[] = {256, 1024, 4096, 16384};
    key[0] = vka_tuning_bucket(p->M, rows, 12);
    key[1] = vka_tuning_bucket(p->N, cols, 4);
    key[2] = vka_tuning_bucket(p->K, cols, 4);
    key[3] = (p->x.dtype == VKATTN_DTYPE_F16) + 2u * (p->x.dtype == VKATTN_DTYPE_BF16);
    key[4] = (p->w.dtype == VKATTN_DTYPE_F16) + 2u * (p->w.dtype == VKATTN_DTYPE_BF16) +
             3u * (p->w.dtype == VKATTN_DTYPE_Q8_0);
    key[5] = 0;
    key[6] = 0;
}

void vka_linear_config_choose(const vkattn_context *ctx, const vka_linear_problem *p,
                              vka_linear_config *c)
{
    vka_tuning_key key = {.op = VKA_TUNE_LINEAR};
    vka_linear_tuning_key(p, key.values);
    vka_tuning_config stored;
    if (vka_tuning_find(ctx, &key, LINEAR_CONFIG_VERSION, &stored)) {
        vka_linear_config t = {stored.words[0], stored.words[1], stored.words[2]};
        if (vka_linear_config_valid(ctx, p, &t)) {
            *c = t;
            return;
        }
    }
    vka_linear_config_default(ctx, p, c);
}

static void add(const vkattn_context *ctx, const vka_linear_problem *p, vka_linear_config c,
                vka_linear_config *out, uint32_t *n, uint32_t max)
{
    if (*n >= max || !vka_linear_config_valid(ctx, p, &c))
        return;
    for (uint32_t i = 0; i < *n; i++)
        if (memcmp(&out[i], &c, sizeof c) == 0)
            return;
    out[(*n)++] = c;
}

uint32_t vka_linear_config_candidates(const vkattn_context *ctx, const vka_linear_problem *p,
                                      vka_linear_config *out, uint32_t max)
{
    uint32_t n = 0;
    vka_linear_config def;
    vka_linear_config_default(ctx, p, &def);
    add(ctx, p, def, out, &n, max);
    bool gemv = p->M <= LINEAR_GEMV_MAX_ROWS;
    uint32_t fams[2] = {gemv ? LINEAR_FAM_GEMV_SG : LINEAR_FAM_SG,
                        gemv ? LINEAR_FAM_GEMV_SH : LINEAR_FAM_SH};
    uint32_t counts[2] = {gemv ? (uint32_t)GEMV_SG_PRESETS : (uint32_t)SG_PRESETS,
                          gemv ? (uint32_t)GEMV_SH_PRESETS : (uint32_t)SH_PRESETS};
    for (int f = 0; f < 2; f++) {
        /* every preset with the family's preferred binding ... */
        uint32_t in = f == 0 ? subgroup_input(ctx, p)
                      : ctx->info.texel_inputs && (p->w.dtype != VKATTN_DTYPE_Q8_0 || gemv)
                          ? LINEAR_INPUT_TEXEL
                          : LINEAR_INPUT_STORAGE;
        for (uint32_t preset = 0; preset < counts[f]; preset++)
            add(ctx, p, (vka_linear_config){fams[f], in, preset}, out, &n, max);
        /* ... and the other bindings with its first preset (add() drops
         * those the problem cannot take) */
        for (uint32_t other = 0; other < LINEAR_INPUT_COUNT; other++)
            add(ctx, p, (vka_linear_config){fams[f], other, 0}, out, &n, max);
    }
    for (uint32_t preset = 0; preset < CM_PRESETS; preset++)
        add(ctx, p, (vka_linear_config){LINEAR_FAM_CM, LINEAR_INPUT_STORAGE, preset}, out, &n, max);
    /* few rows: the GEMM kernels too */
    if (gemv && vka_subgroup_families_allowed(ctx))
        add(ctx, p, (vka_linear_config){LINEAR_FAM_SG, subgroup_input(ctx, p), 3}, out, &n, max);
    return n;
}

static uint32_t pow2_at_most(uint32_t v)
{
    uint32_t p = 1;
    while (p * 2 <= v)
        p *= 2;
    return p;
}

static uint32_t gcd_u32(uint32_t a, uint32_t b)
{
    while (b) {
        uint32_t t = a % b;
        a = b;
        b = t;
    }
    return a;
}

/* `unit` times the largest whole number of units within `want` (at least one). */
static uint32_t whole_units(uint32_t want, uint32_t unit)
{
    return want >= unit ? want / unit * unit : unit;
}

/* The heads epilogue: widen a plan's column tile to whole heads (the
 * staged tile is epi_rows x epi_cols) keeping its shape otherwise. */
static void heads_tiles(const vkattn_context *ctx, const vka_linear_problem *p,
                        vka_linear_plan *plan)
{
    uint32_t hd = (uint32_t)p->head_dim[0], sg = vka_subgroup_size(ctx);
    (void)ctx;
    switch (plan->family) {
    case LINEAR_FAM_SG: { /* spec: wg, sg, groups, tn, kq; lanes of a head: hd / tn */
        uint32_t tn = plan->spec[3], need = hd / tn;
        uint32_t lanes = sg / gcd_u32(sg, need) * need; /* lcm(sg, need) */
        plan->spec[0] = whole_units(plan->spec[0], lanes);
        plan->tile_n = (uint64_t)plan->spec[0] * tn;
        plan->epi_rows = plan->spec[2];
        break;
    }
    case LINEAR_FAM_GEMV_SG: { /* spec: wg, sg, mr, nr, unroll */
        uint32_t nr = plan->spec[3], teams = hd / gcd_u32(hd, nr);
        teams = whole_units(plan->spec[0] / sg, teams);
        plan->spec[0] = teams * sg;
        plan->tile_n = (uint64_t)teams * nr;
        plan->epi_rows = plan->spec[2];
        break;
    }
    case LINEAR_FAM_SH: { /* spec: wg, bm, bn, bk, tm, tn */
        uint32_t bm = plan->spec[1], tm = plan->spec[4];
        uint32_t bn = whole_units(plan->spec[2], hd), tn = 8; /* hd: a multiple of 8 */
        plan->spec[2] = bn;
        plan->spec[5] = tn;
        plan->spec[0] = (bm / tm) * (bn / tn);
        if (bn > 128)
            plan->spec[3] = 8; /* a shallower K step keeps the wide W tile in 32 KiB */
        plan->tile_n = bn;
        plan->epi_rows = bm / tm;
        break;
    }
    case LINEAR_FAM_CM: { /* spec: wg, bm, bn, bk, tr, tc; bn: whole heads and matrices */
        uint32_t unit = plan->spec[2] / plan->spec[5]; /* columns of one matrix per subgroup row */
        uint32_t bn = plan->spec[2] / gcd_u32(plan->spec[2], hd) * hd; /* lcm(bn, hd) */
        plan->spec[2] = bn;
        plan->spec[5] = bn / unit;
        plan->spec[8] = hd;
        plan->spec[15] = bn;
        plan->tile_n = bn;
        plan->epi_rows = plan->spec[1];
        break;
    }
    default:
        break;
    }
    plan->epi_cols = (uint32_t)plan->tile_n;
}

void vka_linear_plan_make(const vkattn_context *ctx, const vka_linear_problem *p,
                          const vka_linear_config *c, vka_linear_plan *plan)
{
    const vkattn_device_info *in = &ctx->info;
    uint32_t sg = vka_subgroup_size(ctx), max_wg = vka_max_workgroup(ctx);
    memset(plan, 0, sizeof *plan);
    plan->family = c->family;
    plan->input = c->input;
    uint32_t mr = 1;
    while (mr < p->M && mr < LINEAR_GEMV_MAX_ROWS)
        mr *= 2;
    switch (c->family) {
    case LINEAR_FAM_SG: {
        const sg_preset *s = &sg_presets[c->preset];
        /* rows in whole subgroups, no more than the problem has; wider
         * subgroups get narrower lanes (the accumulators per lane stay) */
        uint32_t groups = s->rows / sg ? s->rows / sg : 1;
        uint32_t need = (uint32_t)vka_div_up64(p->M, sg);
        if (groups > need)
            groups = need;
        uint32_t tn = s->tn * 8 / (sg > 8 ? sg : 8);
        tn = tn < 2 ? 2 : tn;
        /* subgroups per workgroup: up to 4, fewer where that leaves too few
         * workgroups to spread over the device's threads */
        uint32_t per = max_wg / sg < 4 ? max_wg / sg : 4;
        uint64_t row_blocks = vka_div_up64(p->M, (uint64_t)groups * sg);
        while (per > 1 && row_blocks * vka_div_up64(p->N, (uint64_t)per * sg * tn) < 16)
            per /= 2;
        memcpy(plan->spec, (uint32_t[]){per * sg, sg, groups, tn, s->kq}, 5 * sizeof(uint32_t));
        plan->spec_count = 5;
        plan->tile_m = (uint64_t)groups * sg;
        plan->tile_n = (uint64_t)per * sg * tn;
        plan->rows_in_x = true;
        break;
    }
    case LINEAR_FAM_SH: {
        const sh_preset *s = &sh_presets[c->preset];
        uint32_t wg = (s->bm / s->t) * (s->bm / s->t);
        memcpy(plan->spec, (uint32_t[]){wg, s->bm, s->bm, s->bk, s->t, s->t}, 6 * sizeof(uint32_t));
        plan->spec_count = 6;
        plan->tile_m = s->bm;
        plan->tile_n = s->bm;
        break;
    }
    case LINEAR_FAM_CM: {
        /* spec 0..5: workgroup, BM, BN, BK, TR, TC; 8: EPI_HD; 14, 15: the
         * staged tile (BM x BN); 16..18: the device's matrix shape */
        const cm_preset *s = &cm_presets[c->preset < CM_PRESETS ? c->preset : 0];
        vkattn_coopmat_shape cm = in->coopmat_shape;
        if (!cm.m) /* the family cannot run: a plan nobody dispatches */
            cm = (vkattn_coopmat_shape){16, 16, 16};
        uint32_t bm = s->sg_rows * s->tr * cm.m, bn = s->sg_cols * s->tc * cm.n;
        uint32_t bk = (s->bk + cm.k - 1) / cm.k * cm.k;
        bk = (bk + 3) / 4 * 4;
        memset(plan->spec, 0, sizeof plan->spec);
        memcpy(plan->spec, (uint32_t[]){s->sg_rows * s->sg_cols * sg, bm, bn, bk, s->tr, s->tc},
               6 * sizeof(uint32_t));
        plan->spec[8] = bn;
        plan->spec[9] = 0;
        float eps = 1e-6f;
        memcpy(&plan->spec[10], &eps, 4);
        plan->spec[14] = bm; /* the staged tile: EPI_ROWS x EPI_COLS */
        plan->spec[15] = bn;
        plan->spec[16] = cm.m;
        plan->spec[17] = cm.n;
        plan->spec[18] = cm.k;
        plan->spec_count = 19;
        plan->tile_m = bm;
        plan->tile_n = bn;
        plan->epi_rows = bm;
        plan->epi_cols = bn;
        break;
    }
    case LINEAR_FAM_GEMV_SG: {
        const gemv_preset *s = &gemv_sg_presets[c->preset];
        uint32_t teams = max_wg / sg < s->teams ? max_wg / sg : s->teams;
        memcpy(plan->spec, (uint32_t[]){teams * sg, sg, mr, s->nr, s->unroll},
               5 * sizeof(uint32_t));
        plan->spec_count = 5;
        plan->tile_m = mr;
        plan->tile_n = (uint64_t)teams * s->nr;
        break;
    }
    default: {
        const gemv_sh_preset *s = &gemv_sh_presets[c->preset];
        uint32_t wg = pow2_at_most(s->wg < max_wg ? s->wg : max_wg);
        memcpy(plan->spec, (uint32_t[]){wg, sg, mr, s->nr, 2}, 5 * sizeof(uint32_t));
        plan->spec_count = 5;
        plan->tile_m = mr;
        plan->tile_n = s->nr;
        break;
    }
    }
    if (vka_linear_has_heads(p))
        heads_tiles(ctx, p, plan);
    bool gemv = c->family == LINEAR_FAM_GEMV_SG || c->family == LINEAR_FAM_GEMV_SH;
    uint32_t rows_dim = plan->rows_in_x ? 0 : 1;
    plan->max_rows = gemv ? mr : plan->tile_m * in->max_workgroup_count[rows_dim];
    plan->max_cols = plan->tile_n * in->max_workgroup_count[1 - rows_dim];
}
