/* vkattn_attention_backward: the gradients of attention (see "attention
 * backward" in vkattn/ops.h) - checks, tiles, bindings and the three
 * dispatches (attention_bwd_dkdv.comp, attention_bwd_dq.comp,
 * attention_bwd_dsinks.comp). The forward's own checks run first, on
 * args->forward, naming its fields so. */
#include "ops/attention/attention_internal.h"
#include "vka_spirv.h"

#include <string.h>

/* Push constants of attention_bwd.glsl (128 bytes). */
typedef struct bwd_push {
    uint32_t q[3], k[3], v[3], o[3], g[3]; /* batch, head, token strides (quads) */
    uint32_t m_sb, m_sh, m_sq, m_sk;       /* mask strides (elements) */
    uint32_t p_sb, p_sk;                   /* key padding strides (elements) */
    uint32_t q_len, kv_len, heads, flags;
    float scale;
    uint32_t seed_lo, seed_hi, threshold;
    uint32_t quad_offs, mask_offs, small_offs;
} bwd_push;
_Static_assert(sizeof(bwd_push) == 128, "bwd_push mirrors attention_bwd.glsl");

enum { BWD_FLAG_TOP_LEFT = 256u, BWD_FLAG_DROPOUT = 512u };
#define BWD_WORKGROUP 64u
#define BWD_MAX_TILE 32u

#define STO VKA_BINDING_STORAGE
#define BWD_KERNEL(pair, kernel, n)                                               \
    {                                                                             \
        .name = "attention_bwd_" #kernel "_" #pair,                               \
        .spirv = &vka_spirv_attention_bwd_##kernel##_##pair, .binding_count = n,  \
        .bindings = {STO, STO, STO, STO, STO, STO, STO, STO, STO, STO, STO, STO}, \
        .push_size = sizeof(bwd_push)                                             \
    }
#define DKDV(pair, unused) BWD_KERNEL(pair, dkdv, 12)
#define DQ(pair, unused) BWD_KERNEL(pair, dq, 11)
static const vka_kernel dkdv_kernels[3][3] = VKA_STORAGE_PAIRS(DKDV, 0);
static const vka_kernel dkdv_bf16[4][4] = VKA_STORAGE_PAIRS_BF16(DKDV, 0);
static const vka_kernel dq_kernels[3][3] = VKA_STORAGE_PAIRS(DQ, 0);
static const vka_kernel dq_bf16[4][4] = VKA_STORAGE_PAIRS_BF16(DQ, 0);
#define DSINKS(dt)                                                                                \
    {                                                                                             \
        .name = "attention_bwd_dsinks_" #dt, .spirv = &vka_spirv_attention_bwd_dsinks_##dt,       \
        .binding_count = 11, .bindings = {STO, STO, STO, STO, STO, STO, STO, STO, STO, STO, STO}, \
        .push_size = sizeof(bwd_push)                                                             \
    }
#define DROPOUT(dt)                                                                               \
    {                                                                                             \
        .name = "attention_dropout_" #dt, .spirv = &vka_spirv_attention_dropout_##dt,             \
        .binding_count = 11, .bindings = {STO, STO, STO, STO, STO, STO, STO, STO, STO, STO, STO}, \
        .push_size = sizeof(bwd_push)                                                             \
    }
static const vka_kernel dsinks_kernels[4] = {
    [VKA_STORAGE_F32] = DSINKS(f32),
    [VKA_STORAGE_F16] = DSINKS(f16),
    [VKA_STORAGE_F16P] = DSINKS(f16p),
    [VKA_STORAGE_BF16] = DSINKS(bf16),
};

/* A checked call. */
typedef struct bwd_call {
    vka_att_problem p; /* the forward's */
    vkattn_tensor dout, dq, dk, dv, dsinks;
    bool dropout;
    uint32_t threshold;
    uint64_t seed;
    uint32_t wg, tile; /* workgroup size, BR = BC */
} bwd_call;

/* Shared memory of the dkdv kernel (the larger) for tiles of t rows and
 * keys. */
static uint64_t tile_bytes(uint32_t t, uint32_t dk, uint32_t dv)
{
    return 16ull * (2ull * t * (dk / 4) + 2ull * t * (dv / 4)) + 4ull * (2ull * t * t + 2ull * t);
}

static vkattn_result check_shape_as(vkattn_context *ctx, const vkattn_tensor *t, const char *name,
                                    const vkattn_tensor *like, const char *like_name)
{
    if (!t->buffer)
        return vka_fail(ctx, VKATTN_ERROR_INVALID_ARGUMENT, "%s.buffer is NULL: it is required",
                        name);
    return vka_tensor_check_shape_as(ctx, t, name, like, like_name);
}

static vkattn_result check_float(vkattn_context *ctx, const vkattn_tensor *t, const char *name)
{
    if (t->dtype == VKATTN_DTYPE_F32 || t->dtype == VKATTN_DTYPE_F16 ||
        t->dtype == VKATTN_DTYPE_BF16)
        return VKATTN_SUCCESS;
    char b[VKA_DTYPE_TEXT];
    return vka_fail(ctx, VKATTN_ERROR_UNSUPPORTED_DTYPE,
                    "%s.dtype is %s: it must be f32, f16 or bf16", name,
                    vka_dtype_text(t->dtype, b));
}

/* What the forward took that the backward's kernels (and the forward's
 * dropout pass, which shares them) do not (yet); `pre` starts every name
 * ("args->forward." or "args->"), `who` names the pass. */
static vkattn_result check_scope(vkattn_context *ctx, const vkattn_attention_args *f,
                                 const vka_att_problem *p, const char *pre, const char *who)
{
    char b[VKA_DTYPE_TEXT], b2[VKA_DTYPE_TEXT];
    if (f->head_mask.buffer)
        return vka_fail(ctx, VKATTN_ERROR_UNSUPPORTED,
                        "%shead_mask is given: %s has no head mask on the device (the "
                        "reference's has)",
                        pre, who);
    if (p->dims.q_broadcast)
        return vka_fail(ctx, VKATTN_ERROR_UNSUPPORTED,
                        "%sq.rank is 3: %s takes a rank-4 q [B, Hq, Tq, Dk]", pre, who);
    if (!f->lse.buffer)
        return vka_fail(ctx, VKATTN_ERROR_INVALID_ARGUMENT,
                        "%slse.buffer is NULL: %s needs the forward's LSE", pre, who);
    const vkattn_dtype qd = p->dims.q_dtype;
    const vkattn_dtype kd[2] = {p->dims.kv_dtype, p->dims.v_dtype};
    static const char *const kn[2] = {"k", "v"};
    for (int i = 0; i < 2; i++)
        if (kd[i] != qd)
            return vka_fail(ctx, VKATTN_ERROR_UNSUPPORTED_DTYPE,
                            "%s%s.dtype is %s: %s needs q, k, v and out of one dtype (%sq's "
                            "is %s)",
                            pre, kn[i], vka_dtype_text(kd[i], b), who, pre, vka_dtype_text(qd, b2));
    const uint32_t dims[2] = {p->dims.head_dim, p->dims.v_head_dim};
    static const char *const dn[2] = {"q.shape[3] (head_dim)", "v.shape[3] (v_head_dim)"};
    for (int i = 0; i < 2; i++)
        if (dims[i] % 4)
            return vka_fail(ctx, VKATTN_ERROR_UNSUPPORTED,
                            "%s%s is %u: %s reads rows as quads, so it must be a multiple of 4",
                            pre, dn[i], dims[i], who);
    const vkattn_tensor *l = &p->lse;
    if (l->strides[0] != (int64_t)p->dims.num_heads * p->dims.q_len ||
        l->strides[1] != (int64_t)p->dims.q_len || l->strides[2] != 1)
        return vka_fail(ctx, VKATTN_ERROR_INVALID_ARGUMENT,
                        "%slse.strides are {%lld, %lld, %lld}: %s reads it contiguous "
                        "[B, Hq, Tq]",
                        pre, (long long)l->strides[0], (long long)l->strides[1],
                        (long long)l->strides[2], who);
    if (p->dims.num_heads > 0xffffu)
        return vka_fail(ctx, VKATTN_ERROR_UNSUPPORTED,
                        "%sq.shape[1] (num_heads) is %u: %s takes at most 65535", pre,
                        p->dims.num_heads, who);
    return VKATTN_SUCCESS;
}

static vkattn_result check_gradients(vkattn_context *ctx, const vkattn_attention_backward_args *a,
                                     bwd_call *c)
{
    const vka_att_problem *p = &c->p;
    VKA_TRY(check_shape_as(ctx, &a->dout, "args->dout", &p->out, "args->forward.out"));
    if (a->dout.dtype != p->dims.q_dtype) {
        char b[VKA_DTYPE_TEXT], b2[VKA_DTYPE_TEXT];
        return vka_fail(ctx, VKATTN_ERROR_UNSUPPORTED_DTYPE,
                        "args->dout.dtype is %s: it must be args->forward.out's, %s",
                        vka_dtype_text(a->dout.dtype, b), vka_dtype_text(p->dims.q_dtype, b2));
    }
    VKA_TRY(vka_tensor_resolve(ctx, &a->dout, "args->dout", &c->dout));
    VKA_TRY(vka_tensor_check_rows(ctx, &c->dout, "args->dout", 4, 16));
    const vkattn_tensor *in[3] = {&a->dq, &a->dk, &a->dv};
    vkattn_tensor *out[3] = {&c->dq, &c->dk, &c->dv};
    const vkattn_tensor *like[3] = {&p->q, &p->k, &p->v};
    static const char *const names[3] = {"args->dq", "args->dk", "args->dv"};
    static const char *const like_names[3] = {"args->forward.q", "args->forward.k",
                                              "args->forward.v"};
    for (int i = 0; i < 3; i++) {
        VKA_TRY(check_shape_as(ctx, in[i], names[i], like[i], like_names[i]));
        VKA_TRY(check_float(ctx, in[i], names[i]));
        if (in[i]->dtype != a->dq.dtype) {
            char b[VKA_DTYPE_TEXT], b2[VKA_DTYPE_TEXT];
            return vka_fail(ctx, VKATTN_ERROR_UNSUPPORTED_DTYPE,
                            "%s.dtype is %s: it must be args->dq's, %s", names[i],
                            vka_dtype_text(in[i]->dtype, b), vka_dtype_text(a->dq.dtype, b2));
        }
        VKA_TRY(vka_tensor_resolve(ctx, in[i], names[i], out[i]));
        if (!vka_tensor_is_contiguous(out[i]))
            return vka_fail(ctx, VKATTN_ERROR_INVALID_ARGUMENT,
                            "%s.strides are {%lld, %lld, %lld, %lld}: the gradients are written "
                            "contiguous (leave the strides 0)",
                            names[i], (long long)out[i]->strides[0], (long long)out[i]->strides[1],
                            (long long)out[i]->strides[2], (long long)out[i]->strides[3]);
        VKA_TRY(vka_tensor_check_rows(ctx, out[i], names[i], 4, 16));
        VKA_TRY(vka_tensor_check_output(ctx, out[i], names[i]));
    }
    if (a->dsinks.buffer) {
        if (!p->sinks.buffer)
            return vka_fail(ctx, VKATTN_ERROR_INVALID_ARGUMENT,
                            "args->dsinks is given without args->forward.sinks");
        VKA_TRY(check_shape_as(ctx, &a->dsinks, "args->dsinks", &p->sinks, "args->forward.sinks"));
        if (a->dsinks.dtype != VKATTN_DTYPE_F32) {
            char b[VKA_DTYPE_TEXT];
            return vka_fail(ctx, VKATTN_ERROR_UNSUPPORTED_DTYPE,
                            "args->dsinks.dtype is %s: it must be f32",
                            vka_dtype_text(a->dsinks.dtype, b));
        }
        VKA_TRY(vka_tensor_resolve(ctx, &a->dsinks, "args->dsinks", &c->dsinks));
        if (!vka_tensor_is_contiguous(&c->dsinks))
            return vka_fail(ctx, VKATTN_ERROR_INVALID_ARGUMENT,
                            "args->dsinks.strides[0] is %lld: it must be contiguous (stride 1)",
                            (long long)c->dsinks.strides[0]);
        VKA_TRY(vka_tensor_check_output(ctx, &c->dsinks, "args->dsinks"));
    }
    /* No output shares a byte with an input or another output. */
    const vkattn_tensor *outs[4] = {&c->dq, &c->dk, &c->dv, &c->dsinks};
    static const char *const out_names[4] = {"args->dq", "args->dk", "args->dv", "args->dsinks"};
    const vkattn_tensor *ins[11] = {
        &p->q,    &p->k,           &p->v,     &p->out,          &p->lse, &c->dout,
        &p->mask, &p->key_padding, &p->sinks, &p->alibi_slopes, NULL};
    static const char *const in_names[10] = {"args->forward.q",     "args->forward.k",
                                             "args->forward.v",     "args->forward.out",
                                             "args->forward.lse",   "args->dout",
                                             "args->forward.mask",  "args->forward.key_padding",
                                             "args->forward.sinks", "args->forward.alibi_slopes"};
    for (int o = 0; o < 4; o++) {
        for (int i = 0; ins[i]; i++)
            VKA_TRY(vka_tensor_check_disjoint(ctx, outs[o], out_names[o], ins[i], in_names[i]));
        for (int o2 = o + 1; o2 < 4; o2++)
            VKA_TRY(vka_tensor_check_disjoint(ctx, outs[o], out_names[o], outs[o2], out_names[o2]));
    }
    return VKATTN_SUCCESS;
}

/* Every tensor whole in one binding, the grids within the device's; `pre`
 * names the forward's tensors ("args->forward.", or "args->" for the
 * dropout pass). */
static vkattn_result check_fit(vkattn_context *ctx, bwd_call *c, const char *pre)
{
    const vka_att_problem *p = &c->p;
    const vkattn_tensor *all[] = {&p->q,   &p->k,    &p->v,           &p->out,   &c->dout,
                                  &p->lse, &p->mask, &p->key_padding, &p->sinks, &p->alibi_slopes,
                                  &c->dq,  &c->dk,   &c->dv,          &c->dsinks};
    static const char *const names[] = {"q",   "k",    "v",           "out",   "dout",
                                        "lse", "mask", "key_padding", "sinks", "alibi_slopes",
                                        "dq",  "dk",   "dv",          "dsinks"};
    _Static_assert(sizeof names / sizeof names[0] == sizeof all / sizeof all[0], "a name each");
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
        const vkattn_tensor *t = all[i];
        if (!t->buffer)
            continue;
        vka_box box = {{0}, {1, 1, 1, 1}};
        for (uint32_t d = 0; d < t->rank; d++)
            box.count[d] = (uint64_t)t->shape[d];
        if (!vka_box_fits_storage(ctx, t, &box))
            return vka_fail(ctx, VKATTN_ERROR_UNSUPPORTED,
                            "%s%s spans %llu bytes: more than one storage binding of this "
                            "device holds (maxStorageBufferRange %llu; the backward binds each "
                            "tensor whole)",
                            i == 4 || i >= 10 ? "args->" : pre, names[i],
                            (unsigned long long)vka_box_bytes(t, &box),
                            (unsigned long long)ctx->info.max_storage_buffer_range);
    }
    const uint32_t dk = p->dims.head_dim, dv = p->dims.v_head_dim;
    c->wg = vka_workgroup_size(ctx, BWD_WORKGROUP);
    uint32_t pow2 = 1;
    while (pow2 * 2 <= c->wg)
        pow2 *= 2;
    c->wg = pow2; /* the sinks kernel's tree */
    c->tile = 0;
    for (uint32_t t = BWD_MAX_TILE; t >= 1 && !c->tile; t /= 2)
        if (tile_bytes(t, dk, dv) <= ctx->info.max_shared_memory)
            c->tile = t;
    if (!c->tile)
        return vka_fail(ctx, VKATTN_ERROR_UNSUPPORTED,
                        "vkattn_attention_backward: head dims %u and %u need %llu bytes of "
                        "shared memory at the smallest tile; the device has %u",
                        dk, dv, (unsigned long long)tile_bytes(1, dk, dv),
                        ctx->info.max_shared_memory);
    const uint32_t *max = ctx->info.max_workgroup_count;
    uint64_t key_tiles = vka_div_up(p->dims.kv_len, c->tile);
    uint64_t q_tiles = vka_div_up(p->dims.q_len, c->tile);
    if (key_tiles > max[0] || q_tiles > max[0] || p->dims.num_heads > max[1] ||
        p->dims.batch > max[2] || p->dims.num_heads > max[0])
        return vka_fail(ctx, VKATTN_ERROR_UNSUPPORTED,
                        "vkattn_attention_backward: the grid (%llu key tiles, %llu query tiles, "
                        "%u heads, %u batch rows) exceeds the device's maxComputeWorkGroupCount",
                        (unsigned long long)key_tiles, (unsigned long long)q_tiles,
                        p->dims.num_heads, p->dims.batch);
    return VKATTN_SUCCESS;
}

static vkattn_result check_backward(vkattn_context *ctx, const void *in, void *out)
{
    const vkattn_attention_backward_args *a = in;
    bwd_call *c = out;
    memset(c, 0, sizeof *c);
    if (!a)
        return vka_fail(ctx, VKATTN_ERROR_INVALID_ARGUMENT, "args is NULL");
    const vkattn_attention_args *f = &a->forward;
    if (f->sequences)
        return vka_fail(ctx, VKATTN_ERROR_UNSUPPORTED,
                        "args->forward.sequences is %u: packed sequences have no backward yet",
                        f->sequences);
    if (f->weights.buffer)
        return vka_fail(ctx, VKATTN_ERROR_INVALID_ARGUMENT,
                        "args->forward.weights is given: the backward takes none (leave its "
                        "buffer NULL)");
    VKA_TRY(vka_att_validate_as(ctx, f, "args->forward.", &c->p));
    VKA_TRY(check_scope(ctx, f, &c->p, "args->forward.", "the backward"));
    if (!(f->dropout_p >= 0.0f && f->dropout_p < 1.0f))
        return vka_fail(ctx, VKATTN_ERROR_INVALID_ARGUMENT,
                        "args->forward.dropout_p is %g: it must be in [0, 1)",
                        (double)f->dropout_p);
    c->threshold = vkattn_dropout_threshold(f->dropout_p);
    c->dropout = c->threshold != 0;
    c->seed = f->dropout_seed;
    VKA_TRY(check_gradients(ctx, a, c));
    return check_fit(ctx, c, "args->forward.");
}

/* ---------------------------------------------------------------- record */

/* Binds tensor t whole (absent: the dummy); `quads`: offsets counted in
 * quads, else in elements. Returns the offset in *first. */
static vkattn_result bind_whole(vkattn_context *ctx, const vkattn_tensor *t, bool quads,
                                vka_binding *bind, uint32_t *first)
{
    *first = 0;
    if (!t->buffer)
        return vka_bind_dummy(ctx, VK_FORMAT_UNDEFINED, bind);
    vka_box box = {{0}, {1, 1, 1, 1}};
    for (uint32_t d = 0; d < t->rank; d++)
        box.count[d] = (uint64_t)t->shape[d];
    uint64_t begin, extent;
    vka_box_span(t, &box, &begin, &extent);
    size_t es = vkattn_dtype_size(t->dtype);
    return vka_bind_window(ctx, t->buffer, t->offset + begin * es, extent * es, quads ? 4 * es : es,
                           bind, first);
}

static void strides3(const vkattn_tensor *t, uint32_t s[3])
{
    for (int d = 0; d < 3; d++)
        s[d] = t->shape[d] > 1 ? (uint32_t)(t->strides[d] / 4) : 0;
}

/* The push constants, bindings 0-9 of a call and those of dq (or the
 * dropout pass's out), dk, dv and dsinks in grads[4] (a dummy where
 * absent), and the specialization constants. */
static vkattn_result prepare(vkattn_context *ctx, const bwd_call *c, bwd_push *push,
                             vka_binding bind[12], vka_binding grads[4], uint32_t *spec)
{
    const vka_att_problem *p = &c->p;
    const vka_attention_dims *d = &p->dims;
    memset(push, 0, sizeof *push);
    strides3(&p->q, push->q);
    strides3(&p->k, push->k);
    strides3(&p->v, push->v);
    strides3(&p->out, push->o);
    if (c->dout.buffer)
        strides3(&c->dout, push->g);
    if (p->mask.buffer) {
        push->m_sb = (uint32_t)p->mask.strides[0], push->m_sh = (uint32_t)p->mask.strides[1];
        push->m_sq = (uint32_t)p->mask.strides[2], push->m_sk = (uint32_t)p->mask.strides[3];
    }
    if (p->key_padding.buffer) {
        push->p_sb = d->batch > 1 ? (uint32_t)p->key_padding.strides[0] : 0;
        push->p_sk = (uint32_t)p->key_padding.strides[1];
    }
    push->q_len = d->q_len, push->kv_len = d->kv_len;
    push->heads = (d->num_heads / d->num_kv_heads) | d->num_kv_heads << 16;
    uint32_t flags = 0;
    if (p->causal)
        flags |= ATT_FLAG_CAUSAL;
    if (p->mask.buffer) {
        flags |= ATT_FLAG_MASK;
        if (p->mask.dtype == VKATTN_DTYPE_F16)
            flags |= ATT_FLAG_MASK_F16;
        else if (p->mask.dtype == VKATTN_DTYPE_U8)
            flags |= ATT_FLAG_MASK_BOOL | (p->mask_true_blocks ? ATT_FLAG_MASK_BLOCKS : 0);
        else if (p->mask.dtype == VKATTN_DTYPE_BF16)
            flags |= ATT_FLAG_MASK_F16 | ATT_FLAG_MASK_BOOL;
    }
    if (p->key_padding.buffer)
        flags |= ATT_FLAG_KEY_PADDING;
    if (p->mods.top_left)
        flags |= BWD_FLAG_TOP_LEFT;
    if (c->dropout)
        flags |= BWD_FLAG_DROPOUT;
    push->flags = flags;
    push->scale = p->scale;
    push->seed_lo = (uint32_t)c->seed, push->seed_hi = (uint32_t)(c->seed >> 32);
    push->threshold = c->threshold;

    /* bindings: 0 q, 1 k, 2 v, 3 out, 4 dout, 5 lse, 6 mask, 7 key padding,
     * 8 sinks, 9 slopes, 10 dk | dq | dsinks (or the forward's out), 11 dv */
    uint32_t off[10];
    const vkattn_tensor *quads[5] = {&p->q, &p->k, &p->v, &p->out, &c->dout};
    for (int i = 0; i < 5; i++)
        VKA_TRY(bind_whole(ctx, quads[i], true, &bind[i], &off[i]));
    VKA_TRY(bind_whole(ctx, &p->lse, false, &bind[5], &off[5]));
    VKA_TRY(bind_whole(ctx, &p->mask, false, &bind[6], &off[6]));
    VKA_TRY(bind_whole(ctx, &p->key_padding, false, &bind[7], &off[7]));
    VKA_TRY(bind_whole(ctx, &p->sinks, false, &bind[8], &off[8]));
    vkattn_tensor slopes;
    VKA_TRY(vka_att_slopes_tensor(ctx, p, &slopes));
    VKA_TRY(bind_whole(ctx, &slopes, false, &bind[9], &off[9]));
    uint32_t dq_off, dk_off, dv_off, ds_off;
    VKA_TRY(bind_whole(ctx, &c->dq, true, &grads[0], &dq_off));
    VKA_TRY(bind_whole(ctx, &c->dk, true, &grads[1], &dk_off));
    VKA_TRY(bind_whole(ctx, &c->dv, true, &grads[2], &dv_off));
    VKA_TRY(bind_whole(ctx, &c->dsinks, false, &grads[3], &ds_off));
    push->quad_offs =
        off[0] | off[1] << 5 | off[2] << 10 | off[3] << 15 | off[4] << 20 | dq_off << 25;
    push->mask_offs = off[6] | off[7] << 8 | dk_off << 16 | dv_off << 21;
    push->small_offs = off[5] | off[8] << 8 | off[9] << 16 | ds_off << 24;

    memset(spec, 0, (ATT_SPEC_MODS_ID + 3) * sizeof *spec);
    spec[0] = c->wg, spec[1] = c->tile, spec[2] = c->tile;
    spec[3] = d->head_dim, spec[4] = d->v_head_dim;
    spec[ATT_SPEC_MODS_ID] =
        vka_att_mod_bits(p) & (ATT_MOD_WINDOW | ATT_MOD_SOFTCAP | ATT_MOD_SINKS | ATT_MOD_ALIBI);
    spec[ATT_SPEC_MODS_ID + 1] = p->window;
    memcpy(&spec[ATT_SPEC_MODS_ID + 2], &p->mods.softcap, sizeof(float));
    return VKATTN_SUCCESS;
}

static vkattn_result record_backward(vkattn_context *ctx, VkCommandBuffer cmd, const void *call)
{
    const bwd_call *c = call;
    const vka_attention_dims *d = &c->p.dims;
    bwd_push push;
    vka_binding bind[12], grads[4];
    uint32_t spec[ATT_SPEC_MODS_ID + 3];
    VKA_TRY(prepare(ctx, c, &push, bind, grads, spec));

    const uint32_t in = vka_storage_kind(ctx, d->q_dtype);
    const uint32_t outk = vka_storage_kind(ctx, c->dq.dtype);
    const bool bf16 = in == VKA_STORAGE_BF16 || outk == VKA_STORAGE_BF16;
    const vka_kernel *kdkdv = bf16 ? &dkdv_bf16[in][outk] : &dkdv_kernels[in][outk];
    const vka_kernel *kdq = bf16 ? &dq_bf16[in][outk] : &dq_kernels[in][outk];
    const uint32_t nspec = ATT_SPEC_MODS_ID + 3;
    vka_pipeline *pipe;

    bind[10] = grads[1], bind[11] = grads[2];
    VKA_TRY(vka_pipeline_get(ctx, kdkdv, spec, nspec, &pipe));
    VKA_TRY(vka_cmd_dispatch(ctx, cmd, pipe, bind, &push, vka_div_up(d->kv_len, c->tile),
                             d->num_kv_heads, d->batch));
    bind[10] = grads[0];
    VKA_TRY(vka_pipeline_get(ctx, kdq, spec, nspec, &pipe));
    VKA_TRY(vka_cmd_dispatch(ctx, cmd, pipe, bind, &push, vka_div_up(d->q_len, c->tile),
                             d->num_heads, d->batch));
    if (c->dsinks.buffer) {
        bind[10] = grads[3];
        bwd_push ps = push;
        ps.m_sb = d->batch; /* the sinks kernel reads B there */
        VKA_TRY(vka_pipeline_get(ctx, &dsinks_kernels[in], spec, nspec, &pipe));
        VKA_TRY(vka_cmd_dispatch(ctx, cmd, pipe, bind, &ps, d->num_heads, 1, 1));
    }
    return VKATTN_SUCCESS;
}

/* ------------------------------------------------- the forward's dropout */

vkattn_result vka_att_dropout_check(vkattn_context *ctx, const vkattn_attention_args *args,
                                    const vka_att_problem *p)
{
    if (!(args->dropout_p >= 0.0f && args->dropout_p < 1.0f))
        return vka_fail(ctx, VKATTN_ERROR_INVALID_ARGUMENT,
                        "args->dropout_p is %g: it must be in [0, 1)", (double)args->dropout_p);
    if (args->dropout_p == 0.0f)
        return VKATTN_SUCCESS;
    if (args->sequences)
        return vka_fail(ctx, VKATTN_ERROR_UNSUPPORTED,
                        "args->dropout_p is %g with args->sequences %u: packed sequences have "
                        "no dropout on the device yet",
                        (double)args->dropout_p, args->sequences);
    VKA_TRY(check_scope(ctx, args, p, "args->", "dropout (its pass after the main one)"));
    bwd_call c;
    memset(&c, 0, sizeof c);
    c.p = *p;
    return check_fit(ctx, &c, "args->");
}

vkattn_result vka_att_record_dropout(vkattn_context *ctx, VkCommandBuffer cmd,
                                     const vka_att_problem *p, float dropout_p, uint64_t seed)
{
    static const vka_kernel kernels[4] = {
        [VKA_STORAGE_F32] = DROPOUT(f32),
        [VKA_STORAGE_F16] = DROPOUT(f16),
        [VKA_STORAGE_F16P] = DROPOUT(f16p),
        [VKA_STORAGE_BF16] = DROPOUT(bf16),
    };
    bwd_call c;
    memset(&c, 0, sizeof c);
    c.p = *p;
    VKA_TRY(check_fit(ctx, &c, "args->"));
    c.dq = p->out; /* the pass's output, at binding 10 */
    c.threshold = vkattn_dropout_threshold(dropout_p);
    c.dropout = c.threshold != 0;
    c.seed = seed;
    bwd_push push;
    vka_binding bind[12], grads[4];
    uint32_t spec[ATT_SPEC_MODS_ID + 3];
    VKA_TRY(prepare(ctx, &c, &push, bind, grads, spec));
    VKA_TRY(vka_bind_dummy(ctx, VK_FORMAT_UNDEFINED, &bind[3])); /* out is written, not read */
    bind[10] = grads[0];
    vka_pipeline *pipe;
    VKA_TRY(vka_pipeline_get(ctx, &kernels[vka_storage_kind(ctx, p->dims.q_dtype)], spec,
                             ATT_SPEC_MODS_ID + 3, &pipe));
    vka_cmd_compute_barrier(ctx, cmd); /* after the main pass's out and LSE */
    return vka_cmd_dispatch(ctx, cmd, pipe, bind, &push, vka_div_up(p->dims.q_len, c.tile),
                            p->dims.num_heads, p->dims.batch);
}

/* vkattn_cmd_attention_backward and vkattn_attention_backward */
VKA_OP_ENTRY_POINTS(attention_backward, vkattn_attention_backward_args, bwd_call, check_backward,
                    record_backward)
