/* vkattn_ref_mha_backward: the checks and the entry points (the computation
 * is in ref_mha_backward_run.c and ref_mha_backward_heads.c). The forward's
 * arguments are checked as vkattn_ref_mha checks them, named where the
 * backward holds them ("args->forward.x"); the attention's masks and
 * modifiers by the attention reference's own prepare step. */
#include "ref/ref_backward.h"

#include "spec/dtype.h"
#include "spec/error_text.h"
#include "spec/mha_desc.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* A check whose messages name "args->" run for arguments that sit at
 * `pre` ("args->forward."): its message renamed. */
static vkattn_result renamed(vkattn_result r, const char *why, const char *pre, char *error,
                             size_t error_size)
{
    if (r == VKATTN_SUCCESS)
        return r;
    if (strncmp(why, "args->", 6) == 0)
        vka_error_format(error, error_size, "%s%s", pre, why + 6);
    else
        vka_error_format(error, error_size, "%s", why);
    return r;
}

/* What the backward does not take, refused by name. */
static vkattn_result check_scope(const vkattn_mha_desc *d, const vkattn_mha_weights *w,
                                 const vkattn_ref_mha_args *f, const char *pre, char *error,
                                 size_t error_size)
{
    char b[VKA_DTYPE_TEXT];
    if (d->add_bias_kv || d->add_zero_attn) {
        vka_error_format(error, error_size,
                         "desc->%s is true: the layer's backward does not take the appended rows "
                         "(add_bias_kv, add_zero_attn)",
                         d->add_bias_kv ? "add_bias_kv" : "add_zero_attn");
        return VKATTN_ERROR_UNSUPPORTED;
    }
    if (w->dtype != VKATTN_DTYPE_F32) {
        vka_error_format(error, error_size,
                         "weights->dtype is %s: the reference backward takes f32 weights",
                         vka_dtype_text(w->dtype, b));
        return VKATTN_ERROR_UNSUPPORTED_DTYPE;
    }
    if (d->weight_dtype == VKATTN_DTYPE_Q8_0) {
        vka_error_format(error, error_size,
                         "desc->weight_dtype is q8_0: quantized weights are not trained (f32, "
                         "f16 or bf16)");
        return VKATTN_ERROR_UNSUPPORTED_DTYPE;
    }
    if (f->sequences > 0) {
        vka_error_format(error, error_size,
                         "%ssequences is %u: packed sequences have no backward yet (pad them into "
                         "a batch with key_padding)",
                         pre, f->sequences);
        return VKATTN_ERROR_UNSUPPORTED;
    }
    if (f->head_mask.data) {
        vka_error_format(error, error_size,
                         "%shead_mask is given: the layer's backward takes no head mask (leave its "
                         "data NULL)",
                         pre);
        return VKATTN_ERROR_UNSUPPORTED;
    }
    if (f->kv_cache_dtype != VKATTN_DTYPE_F32) {
        vka_error_format(error, error_size,
                         "%skv_cache_dtype is %s: a KV cache is inference; the backward takes "
                         "none (0)",
                         pre, vka_dtype_text(f->kv_cache_dtype, b));
        return VKATTN_ERROR_UNSUPPORTED;
    }
    if (f->weights.data) {
        vka_error_format(error, error_size,
                         "%sweights is given: the backward takes no attention weights (leave its "
                         "data NULL)",
                         pre);
        return VKATTN_ERROR_INVALID_ARGUMENT;
    }
    return VKATTN_SUCCESS;
}

/* x, kv and value: present, rank 3, f32, dimensions in 1..UINT32_MAX. */
static vkattn_result check_activation(const vkattn_host_tensor *t, const char *pre,
                                      const char *name, char *error, size_t error_size)
{
    if (!t->data) {
        vka_error_format(error, error_size, "%s%s.data is NULL: %s is required", pre, name, name);
        return VKATTN_ERROR_INVALID_ARGUMENT;
    }
    if (t->rank != 3) {
        vka_error_format(error, error_size, "%s%s.rank is %u: %s is rank 3 [B, T, features]", pre,
                         name, t->rank, name);
        return VKATTN_ERROR_INVALID_ARGUMENT;
    }
    if (t->dtype != VKATTN_DTYPE_F32) {
        char b[VKA_DTYPE_TEXT];
        vka_error_format(error, error_size,
                         "%s%s.dtype %s is not supported: the MHA reference takes f32", pre, name,
                         vka_dtype_text(t->dtype, b));
        return VKATTN_ERROR_UNSUPPORTED_DTYPE;
    }
    for (uint32_t i = 0; i < 3; i++)
        if (t->shape[i] < 1 || t->shape[i] > (int64_t)UINT32_MAX) {
            vka_error_format(error, error_size,
                             "%s%s.shape[%u] is %lld: every dimension must be in 1..%lu", pre, name,
                             i, (long long)t->shape[i], (unsigned long)UINT32_MAX);
            return VKATTN_ERROR_INVALID_ARGUMENT;
        }
    return VKATTN_SUCCESS;
}

static vkattn_result check_size(const vkattn_host_tensor *t, const char *pre, const char *name,
                                uint32_t i, int64_t want, const char *want_text, char *error,
                                size_t error_size)
{
    if (t->shape[i] == want)
        return VKATTN_SUCCESS;
    vka_error_format(error, error_size, "%s%s.shape[%u] %lld differs from %s %lld", pre, name, i,
                     (long long)t->shape[i], want_text, (long long)want);
    return VKATTN_ERROR_SHAPE_MISMATCH;
}

/* x, kv and value against the desc, resolved into the plan. */
static vkattn_result check_io(const vkattn_mha_desc *d, const vkattn_ref_mha_args *f,
                              const char *pre, vka_ref_mha_bwd_plan *p, char *error,
                              size_t error_size)
{
    char name[64];
    VKA_TRY(check_activation(&f->x, pre, "x", error, error_size));
    VKA_TRY(check_size(&f->x, pre, "x", 2, d->embed_dim, "desc->embed_dim", error, error_size));
    p->self = f->kv.data == NULL;
    if (p->self) {
        if (d->kv_dim != d->embed_dim) {
            vka_error_format(error, error_size,
                             "%skv.data is NULL (self-attention) but desc->kv_dim %u differs from "
                             "desc->embed_dim %u",
                             pre, d->kv_dim, d->embed_dim);
            return VKATTN_ERROR_INVALID_ARGUMENT;
        }
    } else {
        VKA_TRY(check_activation(&f->kv, pre, "kv", error, error_size));
        VKA_TRY(
            check_size(&f->kv, pre, "kv", 0, f->x.shape[0], "the batch of x", error, error_size));
        VKA_TRY(check_size(&f->kv, pre, "kv", 2, d->kv_dim, "desc->kv_dim", error, error_size));
    }
    const vkattn_host_tensor *keys = p->self ? &f->x : &f->kv;
    p->has_value = f->value.data != NULL;
    if (p->has_value) {
        VKA_TRY(check_activation(&f->value, pre, "value", error, error_size));
        VKA_TRY(check_size(&f->value, pre, "value", 0, f->x.shape[0], "the batch of x", error,
                           error_size));
        VKA_TRY(check_size(&f->value, pre, "value", 1, keys->shape[1], "the keys' length", error,
                           error_size));
        VKA_TRY(check_size(&f->value, pre, "value", 2, d->value_dim, "desc->value_dim", error,
                           error_size));
    } else if (d->value_dim != d->kv_dim) {
        vka_error_format(error, error_size,
                         "%svalue.data is NULL but desc->value_dim %u differs from desc->kv_dim "
                         "%u: give the values' input",
                         pre, d->value_dim, d->kv_dim);
        return VKATTN_ERROR_INVALID_ARGUMENT;
    }
    vka_error_format(name, sizeof name, "%sx", pre);
    VKA_TRY(vka_host_tensor_resolve(&f->x, name, false, &p->x, error, error_size));
    vka_error_format(name, sizeof name, "%s%s", pre, p->self ? "x" : "kv");
    VKA_TRY(vka_host_tensor_resolve(keys, name, false, &p->kv, error, error_size));
    p->vin = p->kv;
    vka_error_format(name, sizeof name, "%svalue", pre);
    if (p->has_value)
        VKA_TRY(vka_host_tensor_resolve(&f->value, name, false, &p->vin, error, error_size));
    return VKATTN_SUCCESS;
}

/* QK-norm and RoPE need self-attention; positions are for RoPE only,
 * int32 [B, Tq], each in [0, VKATTN_ROPE_MAX_POSITION]. */
static vkattn_result check_modern(const vkattn_mha_desc *d, const vkattn_ref_mha_args *f,
                                  const char *pre, vka_ref_mha_bwd_plan *p, char *error,
                                  size_t error_size)
{
    const bool rope = d->rope.theta != 0.0f;
    if ((rope || d->qk_norm) && (f->kv.data || f->value.data)) {
        const char *which = f->kv.data ? "kv" : "value";
        vka_error_format(error, error_size,
                         "%s%s is given (cross-attention) but desc->%s needs self-attention: "
                         "leave %s%s.data NULL",
                         pre, which, rope ? "rope" : "qk_norm", pre, which);
        return VKATTN_ERROR_INVALID_ARGUMENT;
    }
    if (!f->positions.data)
        return VKATTN_SUCCESS;
    if (!rope) {
        vka_error_format(error, error_size,
                         "%spositions is given but desc->rope.theta is 0: positions are for RoPE "
                         "layers only",
                         pre);
        return VKATTN_ERROR_INVALID_ARGUMENT;
    }
    char why[512] = "";
    vkattn_result r = vka_host_positions_resolve(&f->positions, f->x.shape[0], f->x.shape[1],
                                                 &p->positions, why, sizeof why);
    return renamed(r, why, pre, error, error_size);
}

/* Every one of the n values of weights-><name> (NULL: not given) finite. */
static vkattn_result check_finite(const float *w, const char *name, uint32_t n, char *error,
                                  size_t error_size)
{
    for (uint32_t i = 0; w && i < n; i++)
        if (!isfinite(w[i])) {
            vka_error_format(error, error_size, "weights->%s[%u] is %g: it must be finite", name, i,
                             (double)w[i]);
            return VKATTN_ERROR_INVALID_ARGUMENT;
        }
    return VKATTN_SUCCESS;
}

/* The attention step's plan: masks and modifiers checked by the attention
 * reference (named at `pre`); its q, k, v and out are placeholders of the
 * layer's shapes, never read. */
static vkattn_result plan_attention(const vkattn_mha_desc *d, const vkattn_ref_mha_args *f,
                                    const char *pre, vka_ref_mha_bwd_plan *p, char *error,
                                    size_t error_size)
{
    const int64_t B = p->x.shape[0], Tq = p->x.shape[1], Tk = p->kv.shape[1];
    int64_t heads = d->num_heads;
    const int64_t qs[4] = {B, d->num_heads, Tq, d->head_dim};
    const int64_t ks[4] = {B, d->num_kv_heads, Tk, d->head_dim};
    const int64_t vs[4] = {B, d->num_kv_heads, Tk, d->v_head_dim};
    const int64_t os[4] = {B, d->num_heads, Tq, d->v_head_dim};
    float placeholder = 0.0f;
    vkattn_ref_attention_args aa;
    memset(&aa, 0, sizeof aa);
    aa.q = vkattn_host_tensor_make(&placeholder, VKATTN_DTYPE_F32, 4, qs);
    aa.k = vkattn_host_tensor_make(&placeholder, VKATTN_DTYPE_F32, 4, ks);
    aa.v = vkattn_host_tensor_make(&placeholder, VKATTN_DTYPE_F32, 4, vs);
    aa.out = vkattn_host_tensor_make(&placeholder, VKATTN_DTYPE_F32, 4, os);
    aa.mask = f->mask;
    aa.key_padding = f->key_padding;
    aa.causal = f->causal;
    aa.bool_mask = f->bool_mask;
    aa.scale = d->scale;
    aa.causal_align = f->causal_align;
    aa.window = d->window;
    aa.softcap = d->softcap;
    aa.dropout_p = f->dropout_p;
    aa.dropout_seed = f->dropout_seed;
    if (p->wv.sinks)
        aa.sinks = vkattn_host_tensor_make((void *)p->wv.sinks, VKATTN_DTYPE_F32, 1, &heads);
    if (p->wv.alibi_slopes)
        aa.alibi_slopes =
            vkattn_host_tensor_make((void *)p->wv.alibi_slopes, VKATTN_DTYPE_F32, 1, &heads);
    else
        aa.alibi_max_bias = d->alibi_max_bias; /* resolved: 0 without desc->alibi */
    VKA_TRY(vka_ref_attention_prepare(&aa, pre, &p->ap, error, error_size));
    const vkattn_host_tensor none = {0};
    p->ap.q = p->ap.k = p->ap.v = p->ap.out = none;
    return VKATTN_SUCCESS;
}

/* dy (required) and dx, dkv, dvalue (optional): f32 with their inputs'
 * shapes, resolved into the plan. */
static vkattn_result check_io_grads(const vkattn_ref_mha_backward_args *a, vka_ref_mha_bwd_plan *p,
                                    char *error, size_t error_size)
{
    const vkattn_ref_mha_args *f = &a->forward;
    struct {
        const vkattn_host_tensor *t, *like;
        vkattn_host_tensor *out;
        const char *name, *like_name, *needs;
    } io[4] = {
        {&a->dy, &f->x, &p->dy, "dy", "x", NULL},
        {&a->dx, &f->x, &p->dx, "dx", "x", NULL},
        {&a->dkv, &f->kv, &p->dkv, "dkv", "kv", "self-attention: the keys' share is in dx"},
        {&a->dvalue, &f->value, &p->dvalue, "dvalue", "value",
         "the values come from kv (or x): their share is in dkv (or dx)"},
    };
    if (!a->dy.data) {
        vka_error_format(error, error_size, "args->dy.data is NULL: dy is required");
        return VKATTN_ERROR_INVALID_ARGUMENT;
    }
    for (int i = 0; i < 4; i++) {
        const vkattn_host_tensor *t = io[i].t;
        if (!t->data)
            continue;
        if (!io[i].like->data) {
            vka_error_format(error, error_size,
                             "args->%s is given but args->forward.%s is not (%s)", io[i].name,
                             io[i].like_name, io[i].needs);
            return VKATTN_ERROR_INVALID_ARGUMENT;
        }
        if (t->dtype != VKATTN_DTYPE_F32) {
            char b[VKA_DTYPE_TEXT];
            vka_error_format(error, error_size, "args->%s.dtype is %s: it must be f32", io[i].name,
                             vka_dtype_text(t->dtype, b));
            return VKATTN_ERROR_UNSUPPORTED_DTYPE;
        }
        if (t->rank != 3) {
            vka_error_format(error, error_size,
                             "args->%s.rank is %u but it must be 3, as args->forward.%s's",
                             io[i].name, t->rank, io[i].like_name);
            return VKATTN_ERROR_SHAPE_MISMATCH;
        }
        for (uint32_t e = 0; e < 3; e++)
            if (t->shape[e] != io[i].like->shape[e]) {
                vka_error_format(error, error_size,
                                 "args->%s.shape[%u] is %lld but args->forward.%s.shape[%u] is "
                                 "%lld: %s has %s's shape",
                                 io[i].name, e, (long long)t->shape[e], io[i].like_name, e,
                                 (long long)io[i].like->shape[e], io[i].name,
                                 i == 0 ? "y" : io[i].like_name);
                return VKATTN_ERROR_SHAPE_MISMATCH;
            }
        char name[32];
        vka_error_format(name, sizeof name, "args->%s", io[i].name);
        VKA_TRY(vka_host_tensor_resolve(t, name, i > 0, io[i].out, error, error_size));
    }
    return VKATTN_SUCCESS;
}

/* The weights' gradients: each optional, f32, of its parameter's shape,
 * and only for parameters the layer has. */
static vkattn_result check_param_grads(const vkattn_mha_desc *d, const vkattn_ref_mha_grads *g,
                                       vka_ref_mha_bwd_plan *p, char *error, size_t error_size)
{
    const vkattn_host_tensor *given[VKA_GRADS] = {&g->wq,     &g->wk,     &g->wv,   &g->wo,
                                                  &g->bq,     &g->bk,     &g->bv,   &g->bo,
                                                  &g->q_norm, &g->k_norm, &g->sinks};
    static const char *const names[VKA_GRADS] = {"wq", "wk", "wv",     "wo",     "bq",   "bk",
                                                 "bv", "bo", "q_norm", "k_norm", "sinks"};
    static const char *const params[VKA_GRADS] = {"Wq", "Wk", "Wv",     "Wo",     "bq",   "bk",
                                                  "bv", "bo", "q_norm", "k_norm", "sinks"};
    static const char *const dims[VKA_GRADS][2] = {
        {"Hq*Dk", "Dm"}, {"Hkv*Dk", "Dkv"}, {"Hkv*Dv", "Dvin"}, {"Dm", "Hq*Dv"},
        {"Hq*Dk", NULL}, {"Hkv*Dk", NULL},  {"Hkv*Dv", NULL},   {"Dm", NULL},
        {"Dh", NULL},    {"Dh", NULL},      {"Hq", NULL},
    };
    const int64_t qw = vka_mha_q_width(d), kw = vka_mha_k_width(d), vw = vka_mha_v_width(d),
                  ow = vka_mha_o_width(d), dm = d->embed_dim;
    const int64_t shapes[VKA_GRADS][2] = {
        {qw, dm}, {kw, d->kv_dim}, {vw, d->value_dim}, {dm, ow},         {qw, 0},           {kw, 0},
        {vw, 0},  {dm, 0},         {d->head_dim, 0},   {d->head_dim, 0}, {d->num_heads, 0},
    };
    for (int i = 0; i < VKA_GRADS; i++) {
        const vkattn_host_tensor *t = given[i];
        if (!t->data)
            continue;
        const char *flag = i >= VKA_GRAD_BQ && i <= VKA_GRAD_BO && !d->bias              ? "bias"
                           : i >= VKA_GRAD_Q_NORM && i <= VKA_GRAD_K_NORM && !d->qk_norm ? "qk_norm"
                           : i == VKA_GRAD_SINKS && !d->sinks                            ? "sinks"
                                                                                         : NULL;
        if (flag) {
            vka_error_format(error, error_size,
                             "args->grads.%s is given but desc->%s is false: the layer has no %s",
                             names[i], flag, params[i]);
            return VKATTN_ERROR_INVALID_ARGUMENT;
        }
        if (t->dtype != VKATTN_DTYPE_F32) {
            char b[VKA_DTYPE_TEXT];
            vka_error_format(error, error_size, "args->grads.%s.dtype is %s: gradients are f32",
                             names[i], vka_dtype_text(t->dtype, b));
            return VKATTN_ERROR_UNSUPPORTED_DTYPE;
        }
        const uint32_t rank = i <= VKA_GRAD_WO ? 2 : 1;
        if (t->rank != rank) {
            if (rank == 2)
                vka_error_format(error, error_size,
                                 "args->grads.%s.rank is %u but the layer's %s is rank 2 [%s, %s]",
                                 names[i], t->rank, params[i], dims[i][0], dims[i][1]);
            else
                vka_error_format(error, error_size,
                                 "args->grads.%s.rank is %u but the layer's %s is rank 1 [%s]",
                                 names[i], t->rank, params[i], dims[i][0]);
            return VKATTN_ERROR_SHAPE_MISMATCH;
        }
        for (uint32_t e = 0; e < rank; e++)
            if (t->shape[e] != shapes[i][e]) {
                vka_error_format(error, error_size,
                                 "args->grads.%s.shape[%u] is %lld but the layer's %s has %lld %s "
                                 "(%s)",
                                 names[i], e, (long long)t->shape[e], params[i],
                                 (long long)shapes[i][e],
                                 rank == 1 ? "values"
                                 : e == 0  ? "rows"
                                           : "columns",
                                 dims[i][e]);
                return VKATTN_ERROR_SHAPE_MISMATCH;
            }
        char name[32];
        vka_error_format(name, sizeof name, "args->grads.%s", names[i]);
        VKA_TRY(vka_host_tensor_resolve(t, name, true, &p->grads[i], error, error_size));
    }
    return VKATTN_SUCCESS;
}

vkattn_result
vka_ref_mha_bwd_prepare(const vkattn_mha_desc *desc, const vkattn_mha_weights *weights,
                        const vkattn_ref_mha_args *fwd, const vkattn_ref_mha_backward_args *bwd,
                        vka_ref_mha_bwd_plan *plan, void *owned[8], char *error, size_t error_size)
{
    const char *pre = bwd ? "args->forward." : "args->";
    memset(owned, 0, 8 * sizeof *owned);
    if (!fwd) {
        vka_error_format(error, error_size, "args is NULL");
        return VKATTN_ERROR_INVALID_ARGUMENT;
    }
    vka_ref_mha_bwd_plan p;
    memset(&p, 0, sizeof p);
    vkattn_mha_desc d;
    VKA_TRY(vka_mha_resolve(desc, &d, error, error_size));
    VKA_TRY(vka_mha_weights_check(&d, weights, &p.wv, error, error_size));
    VKA_TRY(check_scope(&d, weights, fwd, pre, error, error_size));
    VKA_TRY(check_finite(p.wv.sinks, "sinks", d.num_heads, error, error_size));
    VKA_TRY(check_finite(p.wv.alibi_slopes, "alibi_slopes", d.num_heads, error, error_size));
    VKA_TRY(check_io(&d, fwd, pre, &p, error, error_size));
    VKA_TRY(check_modern(&d, fwd, pre, &p, error, error_size));
    VKA_TRY(plan_attention(&d, fwd, pre, &p, error, error_size));
    if (bwd) {
        VKA_TRY(check_io_grads(bwd, &p, error, error_size));
        VKA_TRY(check_param_grads(&d, &bwd->grads, &p, error, error_size));
    }
    p.desc = d;
    VKA_TRY(vka_ref_mha_store_weights(&d, &p.wv, owned, error, error_size));
    *plan = p;
    return VKATTN_SUCCESS;
}

vkattn_result vkattn_ref_mha_backward(const vkattn_mha_desc *desc,
                                      const vkattn_mha_weights *weights,
                                      const vkattn_ref_mha_backward_args *args, char *error,
                                      size_t error_size)
{
    if (!args) {
        vka_error_format(error, error_size, "args is NULL");
        return VKATTN_ERROR_INVALID_ARGUMENT;
    }
    vka_ref_mha_bwd_plan plan;
    void *owned[8];
    VKA_TRY(vka_ref_mha_bwd_prepare(desc, weights, &args->forward, args, &plan, owned, error,
                                    error_size));
    vkattn_result r = vka_ref_mha_bwd_run(&plan, NULL, error, error_size);
    for (int i = 0; i < 8; i++)
        free(owned[i]);
    return r;
}

vkattn_result vka_ref_mha_forward_double(const vkattn_mha_desc *desc,
                                         const vkattn_mha_weights *weights,
                                         const vkattn_ref_mha_args *args, double *y, char *error,
                                         size_t error_size)
{
    vka_ref_mha_bwd_plan plan;
    void *owned[8];
    VKA_TRY(vka_ref_mha_bwd_prepare(desc, weights, args, NULL, &plan, owned, error, error_size));
    vkattn_result r = vka_ref_mha_bwd_run(&plan, y, error, error_size);
    for (int i = 0; i < 8; i++)
        free(owned[i]);
    return r;
}
