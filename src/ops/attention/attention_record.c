/* Recording of attention: the FlashAttention-2 forward kernels
 * (attention_sg.comp, attention_sm.comp) and, when asked for, the attention
 * weights (attention_weights.comp) - kernel tables, bindings, push constants
 * and dispatches. The checks are attention_api.c's; the cut into dispatches
 * whose windows fit, attention_chunks.c's. */
#include "ops/attention/attention_internal.h"
#include "core/const_buffers.h"
#include "vka_spirv.h"

#include <math.h>

#include <string.h>

/* Where a chunk of a [B, H, T, D] tensor starts in its binding and its
 * batch, head and token strides, in vec4s. */
typedef struct bhtd_push {
    uint32_t off, sb, sh, st;
} bhtd_push;
/* The same for the mask (element units; batch, head, query, key strides) and
 * the key padding (batch, key strides). */
typedef struct mask_push {
    uint32_t off, sb, sh, sq, sk;
} mask_push;
typedef struct padding_push {
    uint32_t off, sb, sk;
} padding_push;

/* Push constants of attention_main.glsl (128 bytes, the guaranteed most).
 * `flags` holds the flags in bits 0-7 and the first elements of the sinks,
 * slopes and LSE windows in bits 8-15, 16-23 and 24-31. */
typedef struct main_push {
    bhtd_push q, k, v, o;
    mask_push m;
    padding_push p;
    uint32_t q_len, kv_len, group;
    int32_t causal_shift;
    uint32_t flags;
    float scale; /* natural domain (attention_main.glsl) */
    uint32_t lse_sb, lse_sh;
} main_push;
_Static_assert(sizeof(main_push) == 128, "main_push mirrors attention_main.glsl");

/* Push constants of attention_weights.comp (120 bytes). */
typedef struct weights_push {
    bhtd_push q, k;
    mask_push m;
    padding_push p;
    mask_push w; /* weights: offset, batch, head (rank 4), query, key strides */
    uint32_t q_len, kv_len, group, heads, head_first;
    int32_t causal_shift;
    uint32_t flags;
    float scale_log2;
    float head_weight;
    uint32_t g_sb; /* the head mask's batch stride (0: one row for all) */
} weights_push;
_Static_assert(sizeof(weights_push) == 124, "weights_push mirrors attention_weights.comp");

#define TEX VKA_BINDING_TEXEL
#define STO VKA_BINDING_STORAGE
#define MAIN_KERNEL(fam, variant, in, full)                                                      \
    {                                                                                            \
        .name = "attention_" #fam "_" #variant, .spirv = &vka_spirv_attention_##fam##_##variant, \
        .binding_count = 9, .bindings = {in, in, in, STO, STO, STO, STO, STO, STO},              \
        .push_size = sizeof(main_push), .full_subgroups = full                                   \
    }
#define WEIGHTS_KERNEL(variant, in)                                                             \
    {                                                                                           \
        .name = "attention_weights_" #variant, .spirv = &vka_spirv_attention_weights_##variant, \
        .binding_count = 8, .bindings = {in, in, STO, STO, STO, STO, STO, STO},                 \
        .push_size = sizeof(weights_push)                                                       \
    }
/* Storage-input variants by [q/out storage][k/v storage]. */
#define SG_STORAGE(v, unused) MAIN_KERNEL(sg, v, STO, true)
#define SM_STORAGE(v, unused) MAIN_KERNEL(sm, v, STO, false)
#define W_STORAGE(v, unused) WEIGHTS_KERNEL(v, STO)

/* Indexed [q/out storage kind][k/v storage kind]. */
static const vka_kernel sg_storage[3][3] = VKA_STORAGE_PAIRS(SG_STORAGE, 0);
static const vka_kernel sm_storage[3][3] = VKA_STORAGE_PAIRS(SM_STORAGE, 0);
static const vka_kernel weights_storage[3][3] = VKA_STORAGE_PAIRS(W_STORAGE, 0);
/* Variants with a bf16 operand (storage buffers only). */
static const vka_kernel sg_bf16[4][4] = VKA_STORAGE_PAIRS_BF16(SG_STORAGE, 0);
static const vka_kernel sm_bf16[4][4] = VKA_STORAGE_PAIRS_BF16(SM_STORAGE, 0);
static const vka_kernel weights_bf16[4][4] = VKA_STORAGE_PAIRS_BF16(W_STORAGE, 0);

/* Texel-buffer inputs (rgba32f views of f32 data, rgba32ui views of f16),
 * by [q/out storage kind][k/v dtype is f16]. */
#define TEXEL_TABLE(fam, full)                                            \
    {                                                                     \
        [VKA_STORAGE_F32] = {MAIN_KERNEL(fam, tex_f32_f32, TEX, full),    \
                             MAIN_KERNEL(fam, tex_f32_f16, TEX, full)},   \
        [VKA_STORAGE_F16] = {MAIN_KERNEL(fam, tex_f16_f32, TEX, full),    \
                             MAIN_KERNEL(fam, tex_f16_f16, TEX, full)},   \
        [VKA_STORAGE_F16P] = {MAIN_KERNEL(fam, tex_f16p_f32, TEX, full),  \
                              MAIN_KERNEL(fam, tex_f16p_f16, TEX, full)}, \
    }
static const vka_kernel sg_texel[3][2] = TEXEL_TABLE(sg, true);
static const vka_kernel sm_texel[3][2] = TEXEL_TABLE(sm, false);
/* by [q dtype is f16][k dtype is f16] */
static const vka_kernel weights_texel[2][2] = {
    {WEIGHTS_KERNEL(tex_f32_f32, TEX), WEIGHTS_KERNEL(tex_f32_f16, TEX)},
    {WEIGHTS_KERNEL(tex_f16_f32, TEX), WEIGHTS_KERNEL(tex_f16_f16, TEX)},
};

/* The coopmat family (storage inputs; devices with 16-bit storage, so no
 * f16p), by [q/out storage kind][k/v storage kind]. */
#if VKATTN_HAVE_COOPMAT
static const vka_kernel cm_storage[4][4] = {
    [VKA_STORAGE_F32] = {[VKA_STORAGE_F32] = MAIN_KERNEL(cm, f32_f32, STO, true),
                         [VKA_STORAGE_F16] = MAIN_KERNEL(cm, f32_f16, STO, true),
                         [VKA_STORAGE_BF16] = MAIN_KERNEL(cm, f32_bf16, STO, true)},
    [VKA_STORAGE_F16] = {[VKA_STORAGE_F32] = MAIN_KERNEL(cm, f16_f32, STO, true),
                         [VKA_STORAGE_F16] = MAIN_KERNEL(cm, f16_f16, STO, true),
                         [VKA_STORAGE_BF16] = MAIN_KERNEL(cm, f16_bf16, STO, true)},
    [VKA_STORAGE_BF16] = {[VKA_STORAGE_F32] = MAIN_KERNEL(cm, bf16_f32, STO, true),
                          [VKA_STORAGE_F16] = MAIN_KERNEL(cm, bf16_f16, STO, true),
                          [VKA_STORAGE_BF16] = MAIN_KERNEL(cm, bf16_bf16, STO, true)},
};
#else
static const vka_kernel cm_storage[4][4];
#endif

/* k and v in storage `any` (attention_main.glsl's KV_ANY: their dtypes are
 * specialization constants), by q/out storage kind. */
static const vka_kernel sg_any[4] = {
    [VKA_STORAGE_F32] = MAIN_KERNEL(sg, f32_any, STO, true),
    [VKA_STORAGE_F16] = MAIN_KERNEL(sg, f16_any, STO, true),
    [VKA_STORAGE_F16P] = MAIN_KERNEL(sg, f16p_any, STO, true),
    [VKA_STORAGE_BF16] = MAIN_KERNEL(sg, bf16_any, STO, true),
};
static const vka_kernel sm_any[4] = {
    [VKA_STORAGE_F32] = MAIN_KERNEL(sm, f32_any, STO, false),
    [VKA_STORAGE_F16] = MAIN_KERNEL(sm, f16_any, STO, false),
    [VKA_STORAGE_F16P] = MAIN_KERNEL(sm, f16p_any, STO, false),
    [VKA_STORAGE_BF16] = MAIN_KERNEL(sm, bf16_any, STO, false),
};
static const vka_kernel weights_any[4] = {
    [VKA_STORAGE_F32] = WEIGHTS_KERNEL(f32_any, STO),
    [VKA_STORAGE_F16] = WEIGHTS_KERNEL(f16_any, STO),
    [VKA_STORAGE_F16P] = WEIGHTS_KERNEL(f16p_any, STO),
    [VKA_STORAGE_BF16] = WEIGHTS_KERNEL(bf16_any, STO),
};
#if VKATTN_HAVE_COOPMAT
static const vka_kernel cm_any[4] = {
    [VKA_STORAGE_F32] = MAIN_KERNEL(cm, f32_any, STO, true),
    [VKA_STORAGE_F16] = MAIN_KERNEL(cm, f16_any, STO, true),
    [VKA_STORAGE_BF16] = MAIN_KERNEL(cm, bf16_any, STO, true),
};
#else
static const vka_kernel cm_any[4];
#endif

/* ------------------------------------------------------------ tile sizes */

/* Specialization constants at most: the kernels' own, then the modifiers',
 * then (coopmat) the matrix shape at ids 16..18. */
#define SPEC_ALL 19
#define SPEC_CM_SHAPE 16

#define WEIGHTS_WORKGROUP 64u

/* The kernel, its specialization constants and tile rows of a config. */
typedef struct main_config {
    const vka_kernel *kernel;
    uint32_t spec[SPEC_ALL];
    uint32_t spec_count;
    uint32_t rows_per_group; /* tile rows per workgroup */
} main_config;

/* The kernel of a config's family for texel or storage inputs (the chunk
 * plan decides which: texel views may not reach every element). */
static const vka_kernel *main_kernel(const vkattn_context *ctx, const vka_att_problem *p,
                                     const vka_att_config *cfg, bool texel)
{
    uint32_t qs = vka_storage_kind(ctx, p->dims.q_dtype);
    uint32_t ks = vka_storage_kind(ctx, p->dims.kv_dtype);
    bool kv16 = p->dims.kv_dtype == VKATTN_DTYPE_F16;
    if (vka_att_kv_any(p)) /* (never texel: vka_att_texel_ok) */
        return cfg->family == ATT_FAMILY_COOPMAT    ? &cm_any[qs]
               : cfg->family == ATT_FAMILY_SUBGROUP ? &sg_any[qs]
                                                    : &sm_any[qs];
    if (cfg->family == ATT_FAMILY_COOPMAT)
        return &cm_storage[qs][ks];
    if (qs == VKA_STORAGE_BF16 || ks == VKA_STORAGE_BF16) /* (never texel: vka_att_texel_ok) */
        return cfg->family == ATT_FAMILY_SUBGROUP ? &sg_bf16[qs][ks] : &sm_bf16[qs][ks];
    if (cfg->family == ATT_FAMILY_SUBGROUP)
        return texel ? &sg_texel[qs][kv16] : &sg_storage[qs][ks];
    return texel ? &sm_texel[qs][kv16] : &sm_storage[qs][ks];
}

/* ------------------------------------------------------------- bindings */

/* Binds the window of a box of `t`; `*first` is its first element in units
 * of vec4s (`vec4` true: q, k, v, out) or elements. */
static vkattn_result bind_box(vkattn_context *ctx, const vkattn_tensor *t, const vka_box *box,
                              bool texel, bool vec4, vka_binding *b, uint32_t *first)
{
    if (!t->buffer)
        return vka_bind_dummy(ctx, texel ? VK_FORMAT_R32G32B32A32_SFLOAT : VK_FORMAT_UNDEFINED, b);
    uint64_t f, extent;
    vka_box_span(t, box, &f, &extent);
    if (vka_dtype_is_quantized(t->dtype)) {
        /* ggml's blocks (k and v of the `any` kernels): bound from the
         * tensor's offset (aligned: vka_tensor_resolve_quant) to the word
         * the box's last block ends in; quads count values from there, and
         * the box starts on a block (strides are whole blocks) */
        uint64_t bytes = vkattn_dtype_row_bytes(t->dtype, f + extent);
        VKA_TRY(vka_bind_window(ctx, t->buffer, t->offset, (bytes + 3) / 4 * 4, 4, b, first));
        *first += (uint32_t)(f / 4);
        return VKATTN_SUCCESS;
    }
    size_t es = vkattn_dtype_size(t->dtype);
    uint64_t offset = t->offset + f * es, bytes = extent * es;
    if (texel)
        return vka_bind_texel_quads(ctx, t->buffer, offset, bytes, t->dtype, b, first);
    return vka_bind_window(ctx, t->buffer, offset, bytes, vec4 ? 4 * es : es, b, first);
}

/* Stride of dimension `dim` for a chunk, in `unit`s; 0 where the chunk has
 * one index there (so huge strides of dimensions cut into single chunks
 * never reach 32-bit push constants). */
static uint32_t stride_of(const vkattn_tensor *t, const vka_box *box, uint32_t dim, uint32_t unit)
{
    return t->buffer && box->count[dim] > 1 ? (uint32_t)(t->strides[dim] / unit) : 0;
}

/* Local query i of a chunk starting at query i0 sits at i + causal_shift:
 * bottom-right i0 + i + Tk - Tq, top-left i0 + i. */
static int32_t causal_shift(const vka_att_problem *p, uint32_t i0)
{
    int64_t shift = (p->mods.top_left ? 0 : (int64_t)p->dims.kv_len - (int64_t)p->dims.q_len) + i0;
    return shift > INT32_MAX ? INT32_MAX : shift < -INT32_MAX ? -INT32_MAX : (int32_t)shift;
}

static uint32_t base_flags(const vka_att_problem *p)
{
    uint32_t f = p->causal ? ATT_FLAG_CAUSAL : 0;
    if (p->mask.buffer) { /* the dtype in (MASK_F16, MASK_BOOL): f32, f16, u8, bf16 */
        f |= ATT_FLAG_MASK;
        if (p->mask.dtype == VKATTN_DTYPE_F16)
            f |= ATT_FLAG_MASK_F16;
        else if (p->mask.dtype == VKATTN_DTYPE_BF16)
            f |= ATT_FLAG_MASK_F16 | ATT_FLAG_MASK_BOOL;
        else if (p->mask.dtype == VKATTN_DTYPE_U8)
            f |= ATT_FLAG_MASK_BOOL | (p->mask_true_blocks ? ATT_FLAG_MASK_BLOCKS : 0);
    }
    if (p->key_padding.buffer)
        f |= ATT_FLAG_KEY_PADDING;
    return f;
}

/* Mask and key-padding windows and strides (shared by both push blocks). */
static vkattn_result bind_masks(vkattn_context *ctx, const vka_att_problem *p, uint32_t b0,
                                uint32_t nb, uint32_t h0, uint32_t nh, uint32_t i0, uint32_t nq,
                                vka_binding b[2], mask_push *m, padding_push *pad)
{
    vka_box mb = vka_att_chunk_box(p, 'm', b0, nb, h0, nh, i0, nq);
    vka_box pb = vka_att_chunk_box(p, 'p', b0, nb, h0, nh, i0, nq);
    vkattn_result r = bind_box(ctx, &p->mask, &mb, false, false, &b[0], &m->off);
    if (r == VKATTN_SUCCESS)
        r = bind_box(ctx, &p->key_padding, &pb, false, false, &b[1], &pad->off);
    if (r != VKATTN_SUCCESS)
        return r;
    /* (rank 4: broadcast dimensions have one index, so stride 0) */
    m->sb = stride_of(&p->mask, &mb, 0, 1), m->sh = stride_of(&p->mask, &mb, 1, 1);
    m->sq = stride_of(&p->mask, &mb, 2, 1), m->sk = stride_of(&p->mask, &mb, 3, 1);
    pad->sb = stride_of(&p->key_padding, &pb, 0, 1);
    pad->sk = stride_of(&p->key_padding, &pb, 1, 1);
    return VKATTN_SUCCESS;
}

/* ------------------------------------------------------ score modifiers */

uint32_t vka_att_mod_bits(const vka_att_problem *p)
{
    uint32_t bits = p->window ? ATT_MOD_WINDOW : 0;
    if (p->mods.softcap > 0.0f)
        bits |= ATT_MOD_SOFTCAP;
    if (p->mods.sinks)
        bits |= ATT_MOD_SINKS;
    if (p->mods.alibi)
        bits |= ATT_MOD_ALIBI;
    if (p->mods.lse)
        bits |= ATT_MOD_LSE;
    return bits;
}

/* Appends the modifiers' specialization constants (MODS, WINDOW, SOFTCAP at
 * ATT_SPEC_MODS_ID; the ids between, which the kernels do not use, get
 * zeros) to `count` constants; a plain call keeps its constants as they
 * were, and so its pipeline. Returns the new count. */
static uint32_t mod_spec(const vka_att_problem *p, uint32_t bits, uint32_t *spec, uint32_t count)
{
    if (!bits)
        return count;
    for (uint32_t i = count; i < ATT_SPEC_MODS_ID; i++)
        spec[i] = 0;
    float cap = (bits & ATT_MOD_SOFTCAP) ? p->mods.softcap : 0.0f;
    spec[ATT_SPEC_MODS_ID] = bits;
    spec[ATT_SPEC_MODS_ID + 1] = p->window;
    memcpy(&spec[ATT_SPEC_MODS_ID + 2], &cap, sizeof cap);
    return ATT_SPEC_MODS_ID + 3;
}

/* The standard ALiBi slopes of (Hq, max_bias), computed in double, kept in
 * a constant table of the context (the key: tag, Hq, max_bias bits). */
static void fill_slopes(void *dst, uint64_t bytes, const void *user)
{
    const uint32_t *key = user;
    float max_bias, *out = dst;
    memcpy(&max_bias, &key[2], sizeof max_bias);
    for (uint32_t h = 0; h < key[1] && (h + 1) * sizeof *out <= bytes; h++)
        out[h] = (float)vka_alibi_slope(key[1], max_bias, h);
}

vkattn_result vka_att_slopes_tensor(vkattn_context *ctx, const vka_att_problem *p,
                                    vkattn_tensor *out)
{
    memset(out, 0, sizeof *out);
    if (!p->mods.alibi)
        return VKATTN_SUCCESS;
    if (p->mods.alibi_slopes) {
        *out = p->alibi_slopes;
        return VKATTN_SUCCESS;
    }
    uint32_t key[3] = {0x42494c41u /* "ALIB" */, p->dims.num_heads, 0};
    memcpy(&key[2], &p->mods.alibi_max_bias, sizeof(float));
    vkattn_buffer *table;
    VKA_TRY(vka_const_buffer_get(ctx, key, sizeof key, 4ull * p->dims.num_heads, fill_slopes, key,
                                 &table));
    int64_t shape[1] = {p->dims.num_heads};
    *out = vkattn_tensor_make(table, 0, VKATTN_DTYPE_F32, 1, shape);
    return VKATTN_SUCCESS;
}

/* Binds heads [h0, h0 + nh) of a contiguous f32 [Hq] tensor (a dummy when
 * absent) and ORs its first element, shifted by `shift`, into `*flags`. */
static vkattn_result bind_heads(vkattn_context *ctx, const vkattn_tensor *t, uint32_t h0,
                                uint32_t nh, uint32_t shift, vka_binding *b, uint32_t *flags)
{
    if (!t->buffer)
        return vka_bind_dummy(ctx, VK_FORMAT_UNDEFINED, b);
    uint32_t first;
    VKA_TRY(vka_bind_window(ctx, t->buffer, t->offset + 4ull * h0, 4ull * nh, 4, b, &first));
    if (first > 0xff)
        return vka_fail(ctx, VKATTN_ERROR_UNSUPPORTED,
                        "a binding offset alignment above 1 KiB is not supported");
    *flags |= first << shift;
    return VKATTN_SUCCESS;
}

/* The head mask's rows b0.. and heads h0.. of a weights dispatch (a dummy
 * without one): its first element into flags bits 24-31, its batch stride. */
static vkattn_result bind_gate(vkattn_context *ctx, const vkattn_tensor *g, uint32_t b0,
                               uint32_t nb, uint32_t h0, uint32_t nh, vka_binding *b,
                               weights_push *push)
{
    push->g_sb = 0;
    if (!g->buffer)
        return vka_bind_dummy(ctx, VK_FORMAT_UNDEFINED, b);
    const uint32_t sb = vka_att_head_mask_batch_stride(g);
    uint64_t first = (uint64_t)b0 * sb + h0, span = (uint64_t)(sb ? nb - 1 : 0) * sb + nh;
    uint32_t at;
    VKA_TRY(vka_bind_window(ctx, g->buffer, g->offset + 4 * first, 4 * span, 4, b, &at));
    if (at > 0xff)
        return vka_fail(ctx, VKATTN_ERROR_UNSUPPORTED,
                        "a binding offset alignment above 1 KiB is not supported");
    push->flags |= at << 24;
    push->g_sb = sb;
    return VKATTN_SUCCESS;
}

/* Binds a [B, H, T, D] tensor's box and fills offset + 3 strides: in vec4s,
 * or in elements with `elem` (the kernels' ELEM). */
static vkattn_result bind_bhtd(vkattn_context *ctx, const vkattn_tensor *t, const vka_box *box,
                               bool texel, bool elem, vka_binding *b, bhtd_push *out)
{
    uint32_t unit = elem ? 1 : 4;
    vkattn_result r = bind_box(ctx, t, box, texel, !elem, b, &out->off);
    out->sb = stride_of(t, box, 0, unit);
    out->sh = stride_of(t, box, 1, unit);
    out->st = stride_of(t, box, 2, unit);
    return r;
}

/* A chunk's window of the LSE (p->lse, present): its first element
 * (<= 0xff) and its batch and head strides (queries at 1). */
typedef struct lse_window {
    uint32_t first, sb, sh;
} lse_window;

static vkattn_result bind_lse_window(vkattn_context *ctx, const vka_att_problem *p, uint32_t b0,
                                     uint32_t nb, uint32_t h0, uint32_t nh, uint32_t i0,
                                     uint32_t nq, vka_binding *b, lse_window *w)
{
    vka_box box = vka_att_chunk_box(p, 'l', b0, nb, h0, nh, i0, nq);
    VKA_TRY(bind_box(ctx, &p->lse, &box, false, false, b, &w->first));
    if (w->first > 0xff)
        return vka_fail(ctx, VKATTN_ERROR_UNSUPPORTED,
                        "a binding offset alignment above 1 KiB is not supported");
    w->sb = stride_of(&p->lse, &box, 0, 1);
    w->sh = stride_of(&p->lse, &box, 1, 1);
    return VKATTN_SUCCESS;
}

/* The LSE window of a chunk (a dummy without LSE, which the caller replaces
 * by the output's window): its first element into
 * bits 24-31 of the flags, its batch and head strides. */
static vkattn_result bind_lse(vkattn_context *ctx, const vka_att_problem *p, uint32_t b0,
                              uint32_t nb, uint32_t h0, uint32_t nh, uint32_t i0, uint32_t nq,
                              vka_binding *b, main_push *push)
{
    push->lse_sb = push->lse_sh = 0;
    if (!p->lse.buffer)
        return vka_bind_dummy(ctx, VK_FORMAT_UNDEFINED, b);
    lse_window w;
    VKA_TRY(bind_lse_window(ctx, p, b0, nb, h0, nh, i0, nq, b, &w));
    push->flags |= w.first << 24;
    push->lse_sb = w.sb;
    push->lse_sh = w.sh;
    return VKATTN_SUCCESS;
}

/* ------------------------------------------------------------ recording */

typedef struct recorder {
    vkattn_context *ctx;
    VkCommandBuffer cmd;
    bool recorded; /* a dispatch is already recorded: barrier before the next */
} recorder;

static vkattn_result dispatch(recorder *rec, vka_pipeline *pipeline, const vka_binding *bindings,
                              const void *push, uint32_t gx, uint32_t gy, uint32_t gz)
{
    /* Chunks' windows may overlap (strided layouts, alignment), so every
     * dispatch after the first waits for the previous one. */
    if (rec->recorded)
        vka_cmd_compute_barrier(rec->ctx, rec->cmd);
    rec->recorded = true;
    return vka_cmd_dispatch(rec->ctx, rec->cmd, pipeline, bindings, push, gx, gy, gz);
}

/* What recording needs, all obtained before the first command is recorded. */
typedef struct prepared {
    vkattn_tensor slopes; /* the caller's or the standard ones (buffer NULL: no ALiBi) */
    main_config cfg;
    vka_att_chunks main_chunks;
    vka_pipeline *main_pipeline;
    uint32_t weights_workgroup;
    vka_att_chunks weights_chunks;
    vka_pipeline *weights_pipeline; /* NULL without weights */
} prepared;

static vkattn_result prepare(vkattn_context *ctx, const vka_att_problem *p,
                             const vka_att_config *cfg, prepared *pr)
{
    const vka_attention_dims *d = &p->dims;
    VKA_TRY(vka_att_slopes_tensor(ctx, p, &pr->slopes));
    const uint32_t bits = vka_att_mod_bits(p);
    pr->cfg.spec_count = vka_att_config_spec(ctx, p, cfg, pr->cfg.spec, &pr->cfg.rows_per_group);
    pr->cfg.spec_count = mod_spec(p, bits, pr->cfg.spec, pr->cfg.spec_count);
    if (vka_att_kv_any(p)) { /* the dtypes of k and v, ids between them 0 */
        for (uint32_t i = pr->cfg.spec_count; i < ATT_SPEC_KV_DTYPE_ID; i++)
            pr->cfg.spec[i] = 0;
        pr->cfg.spec[ATT_SPEC_KV_DTYPE_ID] = (uint32_t)d->kv_dtype;
        pr->cfg.spec[ATT_SPEC_KV_DTYPE_ID + 1] = (uint32_t)d->v_dtype;
        pr->cfg.spec_count = ATT_SPEC_KV_DTYPE_ID + 2;
    }
    if (cfg->family == ATT_FAMILY_COOPMAT) {
        for (uint32_t i = pr->cfg.spec_count; i < SPEC_CM_SHAPE; i++)
            pr->cfg.spec[i] = 0; /* ids the kernel lacks, or the modifiers' defaults */
        pr->cfg.spec[SPEC_CM_SHAPE] = ctx->info.coopmat_shape.m;
        pr->cfg.spec[SPEC_CM_SHAPE + 1] = ctx->info.coopmat_shape.n;
        pr->cfg.spec[SPEC_CM_SHAPE + 2] = ctx->info.coopmat_shape.k;
        pr->cfg.spec_count = SPEC_CM_SHAPE + 3;
    }
    vkattn_result r = vka_att_plan_main(ctx, p, pr->cfg.rows_per_group, cfg->texel,
                                        cfg->family == ATT_FAMILY_SUBGROUP, &pr->main_chunks);
    if (r != VKATTN_SUCCESS)
        return r;
    pr->cfg.kernel = main_kernel(ctx, p, cfg, pr->main_chunks.texel);
    r = vka_pipeline_get(ctx, pr->cfg.kernel, pr->cfg.spec, pr->cfg.spec_count, &pr->main_pipeline);
    pr->weights_pipeline = NULL;
    if (r != VKATTN_SUCCESS || !p->weights.buffer)
        return r;
    pr->weights_workgroup = vka_workgroup_size(ctx, WEIGHTS_WORKGROUP);
    r = vka_att_plan_weights(ctx, p, &pr->weights_chunks);
    if (r != VKATTN_SUCCESS)
        return r;
    const bool k_quant = vka_dtype_is_quantized(d->kv_dtype);
    uint32_t qs = vka_storage_kind(ctx, d->q_dtype),
             ks = k_quant ? 0 : vka_storage_kind(ctx, d->kv_dtype);
    const vka_kernel *kernel =
        k_quant                                            ? &weights_any[qs]
        : qs == VKA_STORAGE_BF16 || ks == VKA_STORAGE_BF16 ? &weights_bf16[qs][ks]
        : pr->weights_chunks.texel
            ? &weights_texel[d->q_dtype == VKATTN_DTYPE_F16][d->kv_dtype == VKATTN_DTYPE_F16]
            : &weights_storage[qs][ks];
    uint32_t spec[SPEC_ALL] = {pr->weights_workgroup, d->head_dim};
    uint32_t wbits =
        (bits & ~(uint32_t)ATT_MOD_LSE) | (p->head_mask.buffer ? ATT_MOD_HEAD_GATE : 0);
    if (p->weights_given_lse)
        wbits = (wbits & ~(uint32_t)ATT_MOD_SINKS) | ATT_MOD_LSE;
    uint32_t count = mod_spec(p, wbits, spec, 2);
    if (k_quant) { /* k's dtype (the weights kernel reads only k) */
        for (uint32_t i = count; i < ATT_SPEC_KV_DTYPE_ID; i++)
            spec[i] = 0;
        spec[ATT_SPEC_KV_DTYPE_ID] = (uint32_t)d->kv_dtype;
        count = ATT_SPEC_KV_DTYPE_ID + 1;
    }
    return vka_pipeline_get(ctx, kernel, spec, count, &pr->weights_pipeline);
}

static vkattn_result record_main(recorder *rec, const vka_att_problem *p, const prepared *pr)
{
    vkattn_context *ctx = rec->ctx;
    const vka_attention_dims *d = &p->dims;
    const uint32_t group = d->num_heads / d->num_kv_heads;
    const main_config cfg = pr->cfg;
    const vka_att_chunks c = pr->main_chunks;
    vka_pipeline *pipeline = pr->main_pipeline;
    vkattn_result r;

    main_push push = {.kv_len = d->kv_len, .group = group, .scale = p->scale};
    for (uint32_t b0 = 0; b0 < d->batch; b0 += c.nb)
        for (uint32_t g0 = 0; g0 < d->num_kv_heads; g0 += c.ng)
            for (uint32_t hg0 = 0; hg0 < group; hg0 += c.nh)
                for (uint32_t i0 = 0; i0 < d->q_len; i0 += c.nq) {
                    uint32_t nb = d->batch - b0 < c.nb ? d->batch - b0 : c.nb;
                    uint32_t ng = d->num_kv_heads - g0 < c.ng ? d->num_kv_heads - g0 : c.ng;
                    uint32_t nq = d->q_len - i0 < c.nq ? d->q_len - i0 : c.nq;
                    uint32_t h0 = g0 * group + hg0, nh = ng * c.nh; /* c.nh < group: ng 1 */
                    vka_box qb = vka_att_chunk_box(p, 'q', b0, nb, h0, nh, i0, nq);
                    vka_box kb = vka_att_chunk_box(p, 'k', b0, nb, h0, nh, i0, nq);
                    vka_box vb = vka_att_chunk_box(p, 'v', b0, nb, h0, nh, i0, nq);
                    vka_box ob = vka_att_chunk_box(p, 'o', b0, nb, h0, nh, i0, nq);
                    vka_binding b[9];
                    const bool elem = vka_att_elem(p);
                    r = bind_bhtd(ctx, &p->q, &qb, c.texel, elem, &b[0], &push.q);
                    if (r == VKATTN_SUCCESS)
                        r = bind_bhtd(ctx, &p->k, &kb, c.texel, elem, &b[1], &push.k);
                    if (r == VKATTN_SUCCESS)
                        r = bind_bhtd(ctx, &p->v, &vb, c.texel, elem, &b[2], &push.v);
                    if (r == VKATTN_SUCCESS)
                        r = bind_bhtd(ctx, &p->out, &ob, false, elem, &b[3], &push.o);
                    if (r == VKATTN_SUCCESS)
                        r = bind_masks(ctx, p, b0, nb, h0, nh, i0, nq, &b[4], &push.m, &push.p);
                    push.flags = base_flags(p) | (c.nh == 1 ? ATT_FLAG_ONE_HEAD : 0);
                    if (r == VKATTN_SUCCESS)
                        r = bind_heads(ctx, &p->sinks, h0, nh, 8, &b[6], &push.flags);
                    if (r == VKATTN_SUCCESS)
                        r = bind_heads(ctx, &pr->slopes, h0, nh, 16, &b[7], &push.flags);
                    if (r == VKATTN_SUCCESS)
                        r = bind_lse(ctx, p, b0, nb, h0, nh, i0, nq, &b[8], &push);
                    if (r != VKATTN_SUCCESS)
                        return r;
                    /* Without LSE its writable binding takes the output's
                     * window (written here anyway), never the shared dummy:
                     * that would make unrelated dispatches that read the
                     * dummy (sinks, slopes) look like readers after a write. */
                    if (!p->lse.buffer)
                        b[8] = b[3];
                    push.q_len = nq;
                    push.causal_shift = causal_shift(p, i0);
                    uint32_t tiles = vka_div_up((nq * c.nh), cfg.rows_per_group);
                    r = dispatch(rec, pipeline, b, &push, tiles, ng, nb);
                    if (r != VKATTN_SUCCESS)
                        return r;
                }
    return VKATTN_SUCCESS;
}

/* The given LSE's window of a weights chunk, in place of the sinks': its
 * first element into flags bits 8-15, its batch and head strides into
 * q_len and heads (attention_weights.comp's GIVEN_LSE). */
static vkattn_result bind_given_lse(vkattn_context *ctx, const vka_att_problem *p, uint32_t b0,
                                    uint32_t nb, uint32_t h0, uint32_t nh, uint32_t i0, uint32_t nq,
                                    vka_binding *b, weights_push *push)
{
    lse_window w;
    VKA_TRY(bind_lse_window(ctx, p, b0, nb, h0, nh, i0, nq, b, &w));
    push->flags |= w.first << 8;
    push->q_len = w.sb;
    push->heads = w.sh;
    return VKATTN_SUCCESS;
}

static vkattn_result record_weights(recorder *rec, const vka_att_problem *p, const prepared *pr)
{
    vkattn_context *ctx = rec->ctx;
    const vka_attention_dims *d = &p->dims;
    const uint32_t group = d->num_heads / d->num_kv_heads;
    const bool per_head = p->weights.rank == 4;
    const vka_att_chunks c = pr->weights_chunks;
    vka_pipeline *pipeline = pr->weights_pipeline;
    vkattn_result r;

    weights_push push = {.kv_len = d->kv_len,
                         .group = group,
                         .scale_log2 = p->scale_log2,
                         .head_weight = per_head ? 1.0f : 1.0f / (float)d->num_heads};
    for (uint32_t b0 = 0; b0 < d->batch; b0 += c.nb)
        for (uint32_t h0 = 0; h0 < d->num_heads; h0 += c.nh)
            for (uint32_t i0 = 0; i0 < d->q_len; i0 += c.nq) {
                uint32_t nb = d->batch - b0 < c.nb ? d->batch - b0 : c.nb;
                uint32_t nh = d->num_heads - h0 < c.nh ? d->num_heads - h0 : c.nh;
                uint32_t nq = d->q_len - i0 < c.nq ? d->q_len - i0 : c.nq;
                vka_box qb = vka_att_chunk_box(p, 'q', b0, nb, h0, nh, i0, nq);
                vka_box kb = vka_att_chunk_box(p, 'k', b0, nb, h0, nh, i0, nq);
                vka_box wb = vka_att_chunk_box(p, 'w', b0, nb, h0, nh, i0, nq);
                vka_binding b[8];
                uint32_t w_first = 0;
                const bool elem = vka_att_weights_elem(p);
                r = bind_bhtd(ctx, &p->q, &qb, c.texel, elem, &b[0], &push.q);
                if (r == VKATTN_SUCCESS)
                    r = bind_bhtd(ctx, &p->k, &kb, c.texel, elem, &b[1], &push.k);
                if (r == VKATTN_SUCCESS)
                    r = bind_masks(ctx, p, b0, nb, h0, nh, i0, nq, &b[2], &push.m, &push.p);
                if (r == VKATTN_SUCCESS)
                    r = bind_box(ctx, &p->weights, &wb, false, false, &b[4], &w_first);
                push.flags =
                    base_flags(p) | (!per_head && h0 > 0 ? ATT_FLAG_WEIGHTS_ACCUMULATE : 0);
                if (r == VKATTN_SUCCESS && p->weights_given_lse)
                    r = bind_given_lse(ctx, p, b0, nb, h0, nh, i0, nq, &b[5], &push);
                else if (r == VKATTN_SUCCESS)
                    r = bind_heads(ctx, &p->sinks, h0, nh, 8, &b[5], &push.flags);
                if (r == VKATTN_SUCCESS)
                    r = bind_heads(ctx, &pr->slopes, h0, nh, 16, &b[6], &push.flags);
                if (r == VKATTN_SUCCESS)
                    r = bind_gate(ctx, &p->head_mask, b0, nb, h0, nh, &b[7], &push);
                if (r != VKATTN_SUCCESS)
                    return r;
                push.w.off = w_first;
                push.w.sb = stride_of(&p->weights, &wb, 0, 1);
                push.w.sh = per_head ? stride_of(&p->weights, &wb, 1, 1) : 0;
                push.w.sq = stride_of(&p->weights, &wb, per_head ? 2 : 1, 1);
                push.w.sk = stride_of(&p->weights, &wb, per_head ? 3 : 2, 1);
                if (!p->weights_given_lse) /* (else the given LSE's strides) */
                    push.q_len = nq, push.heads = nh;
                push.head_first = h0 % group;
                push.causal_shift = causal_shift(p, i0);
                r = dispatch(rec, pipeline, b, &push, nq, nh, nb);
                if (r != VKATTN_SUCCESS)
                    return r;
            }
    return VKATTN_SUCCESS;
}

vkattn_result vka_att_record_with(vkattn_context *ctx, VkCommandBuffer cmd,
                                  const vka_att_problem *p, const vka_att_config *cfg)
{
    prepared pr;
    vkattn_result r = prepare(ctx, p, cfg, &pr);
    if (r != VKATTN_SUCCESS)
        return r;
    recorder rec = {ctx, cmd, false};
    r = record_main(&rec, p, &pr);
    if (r == VKATTN_SUCCESS && pr.weights_pipeline)
        r = record_weights(&rec, p, &pr);
    if (r == VKATTN_SUCCESS && p->head_mask.buffer)
        r = vka_att_record_head_gate(ctx, cmd, &p->out, &p->head_mask);
    return r;
}

vkattn_result vka_att_record_weights_only(vkattn_context *ctx, VkCommandBuffer cmd,
                                          const vka_att_problem *p)
{
    vka_att_config cfg;
    vka_att_config_choose(ctx, p, &cfg);
    prepared pr;
    VKA_TRY(prepare(ctx, p, &cfg, &pr));
    recorder rec = {ctx, cmd, false};
    return record_weights(&rec, p, &pr);
}

vkattn_result vka_att_record(vkattn_context *ctx, VkCommandBuffer cmd, const vka_att_problem *p)
{
    vka_att_config cfg;
    vka_att_config_choose(ctx, p, &cfg);
    return vka_att_record_with(ctx, cmd, p, &cfg);
}
