/* CPU reference of a whole MHA layer (see "MHA layer" in vkattn.h):
 * projections, head split, QK-norm and RoPE of Q and K, attention (with
 * the desc's score modifiers and args->causal_align), merge, output
 * projection.
 *
 * Q, K, V and O are kept in f32 between the steps, as the GPU layer stores
 * them; every step accumulates in double. The norm and the rotation are one
 * step, as in the GPU's projection epilogue: each head is read from the f32
 * projection, normed and rotated in double, and stored to f32 once. The
 * split and merge are only strides: head h of a [B, T, H*Dh] row block is
 * the view [B, H, T, Dh] with strides {T*H*Dh, Dh, H*Dh, 1}. */
#include "spec/mha_desc.h"
#include "ref/ref.h"

#include "spec/dtype.h"
#include "spec/error_text.h"
#include "spec/varlen.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* x, kv and y: present, rank 3, f32, dimensions in 1..UINT32_MAX. */
static vkattn_result check_activation(const vkattn_host_tensor *t, const char *name, char *error,
                                      size_t error_size)
{
    if (!t->data) {
        vka_error_format(error, error_size, "args->%s.data is NULL: %s is required", name, name);
        return VKATTN_ERROR_INVALID_ARGUMENT;
    }
    if (t->rank != 3) {
        vka_error_format(error, error_size, "args->%s.rank is %u: %s is rank 3 [B, T, features]",
                         name, t->rank, name);
        return VKATTN_ERROR_INVALID_ARGUMENT;
    }
    if (t->dtype != VKATTN_DTYPE_F32) {
        const char *dn = vkattn_dtype_name(t->dtype);
        vka_error_format(error, error_size,
                         "args->%s.dtype %s is not supported: the MHA reference takes f32", name,
                         dn ? dn : "(not a vkattn_dtype)");
        return VKATTN_ERROR_UNSUPPORTED_DTYPE;
    }
    for (uint32_t i = 0; i < 3; i++) {
        if (t->shape[i] < 1 || t->shape[i] > (int64_t)UINT32_MAX) {
            vka_error_format(error, error_size,
                             "args->%s.shape[%u] is %lld: every dimension must be in 1..%lu", name,
                             i, (long long)t->shape[i], (unsigned long)UINT32_MAX);
            return VKATTN_ERROR_INVALID_ARGUMENT;
        }
    }
    return VKATTN_SUCCESS;
}

static vkattn_result check_size(const vkattn_host_tensor *t, const char *name, uint32_t i,
                                int64_t want, const char *want_text, char *error, size_t error_size)
{
    if (t->shape[i] == want)
        return VKATTN_SUCCESS;
    vka_error_format(error, error_size, "args->%s.shape[%u] %lld differs from %s %lld", name, i,
                     (long long)t->shape[i], want_text, (long long)want);
    return VKATTN_ERROR_SHAPE_MISMATCH;
}

/* A [rows, cols] f32 host weight. */
static vkattn_host_tensor weight_tensor(const void *data, vkattn_dtype dt, int64_t rows,
                                        int64_t cols)
{
    int64_t shape[2] = {rows, cols};
    return vkattn_host_tensor_make((void *)data, dt, 2, shape);
}

/* A [n] bias; NULL data means no bias (zeros). */
static vkattn_host_tensor bias_tensor(const void *data, vkattn_dtype dt, int64_t n)
{
    if (dt == VKATTN_DTYPE_Q8_0) /* biases beside q8_0 weights are f32 */
        dt = VKATTN_DTYPE_F32;
    return vkattn_host_tensor_make((void *)data, dt, 1, &n);
}

/* A [B, T, H*Dh] f32 activation seen as heads [B, H, T, Dh]. */
static vkattn_host_tensor head_view(float *data, int64_t b, int64_t t, int64_t h, int64_t dh)
{
    int64_t shape[4] = {b, h, t, dh};
    vkattn_host_tensor v = vkattn_host_tensor_make(data, VKATTN_DTYPE_F32, 4, shape);
    v.strides[0] = t * h * dh;
    v.strides[1] = dh;
    v.strides[2] = h * dh;
    v.strides[3] = 1;
    return v;
}

static vkattn_host_tensor activation(float *data, int64_t b, int64_t t, int64_t features)
{
    int64_t shape[3] = {b, t, features};
    return vkattn_host_tensor_make(data, VKATTN_DTYPE_F32, 3, shape);
}

/* x, kv, value and y against the desc; resolved into x, kv (x itself for
 * self-attention), vin (the values' input: value, else kv's) and y. */
static vkattn_result check_io(const vkattn_mha_desc *d, const vkattn_ref_mha_args *args,
                              vkattn_host_tensor *x, vkattn_host_tensor *kv,
                              vkattn_host_tensor *vin, vkattn_host_tensor *y, char *error,
                              size_t error_size)
{
    char want[96];
    VKA_TRY(check_activation(&args->x, "x", error, error_size));
    VKA_TRY(check_size(&args->x, "x", 2, d->embed_dim, "desc->embed_dim", error, error_size));
    const bool self = args->kv.data == NULL;
    if (self) {
        if (d->kv_dim != d->embed_dim) {
            vka_error_format(error, error_size,
                             "args->kv.data is NULL (self-attention) but desc->kv_dim %u "
                             "differs from desc->embed_dim %u",
                             d->kv_dim, d->embed_dim);
            return VKATTN_ERROR_INVALID_ARGUMENT;
        }
    } else {
        VKA_TRY(check_activation(&args->kv, "kv", error, error_size));
        VKA_TRY(check_size(&args->kv, "kv", 0, args->x.shape[0], "args->x.shape[0] (batch)", error,
                           error_size));
        VKA_TRY(check_size(&args->kv, "kv", 2, d->kv_dim, "desc->kv_dim", error, error_size));
    }
    const vkattn_host_tensor *keys = self ? &args->x : &args->kv;
    if (args->value.data) {
        VKA_TRY(check_activation(&args->value, "value", error, error_size));
        VKA_TRY(check_size(&args->value, "value", 0, args->x.shape[0], "args->x.shape[0] (batch)",
                           error, error_size));
        VKA_TRY(check_size(&args->value, "value", 1, keys->shape[1],
                           self ? "args->x.shape[1] (the keys' length)"
                                : "args->kv.shape[1] (the keys' length)",
                           error, error_size));
        VKA_TRY(check_size(&args->value, "value", 2, d->value_dim, "desc->value_dim", error,
                           error_size));
    } else if (d->value_dim != d->kv_dim) {
        vka_error_format(error, error_size,
                         "args->value.data is NULL but desc->value_dim %u differs from "
                         "desc->kv_dim %u: give the values' input",
                         d->value_dim, d->kv_dim);
        return VKATTN_ERROR_INVALID_ARGUMENT;
    }
    VKA_TRY(check_activation(&args->y, "y", error, error_size));
    for (uint32_t i = 0; i < 3; i++) {
        vka_error_format(want, sizeof want, "args->x.shape[%u]", i);
        VKA_TRY(check_size(&args->y, "y", i, args->x.shape[i], want, error, error_size));
    }
    VKA_TRY(vka_host_tensor_resolve(&args->x, "args->x", false, x, error, error_size));
    VKA_TRY(
        vka_host_tensor_resolve(keys, self ? "args->x" : "args->kv", false, kv, error, error_size));
    if (args->value.data)
        VKA_TRY(
            vka_host_tensor_resolve(&args->value, "args->value", false, vin, error, error_size));
    else
        *vin = *kv;
    return vka_host_tensor_resolve(&args->y, "args->y", true, y, error, error_size);
}

/* The modern decoder options against the args: QK-norm and RoPE are for
 * self-attention (kv_dim == embed_dim is checked by vka_mha_resolve; here
 * args->kv must be absent), positions only with RoPE, int32 [B, Tq], each
 * in [0, VKATTN_ROPE_MAX_POSITION]. `pos` gets the resolved positions (data
 * NULL when not given). */
static vkattn_result check_modern(const vkattn_mha_desc *d, const vkattn_ref_mha_args *args,
                                  vkattn_host_tensor *pos, char *error, size_t error_size)
{
    const bool rope = d->rope.theta != 0.0f;
    memset(pos, 0, sizeof *pos);
    if ((rope || d->qk_norm) && (args->kv.data || args->value.data)) {
        const char *which = args->kv.data ? "kv" : "value";
        vka_error_format(error, error_size,
                         "args->%s is given (cross-attention) but desc->%s needs self-attention: "
                         "leave args->%s.data NULL",
                         which, rope ? "rope" : "qk_norm", which);
        return VKATTN_ERROR_INVALID_ARGUMENT;
    }
    const vkattn_host_tensor *p = &args->positions;
    if (!p->data)
        return VKATTN_SUCCESS;
    if (!rope) {
        vka_error_format(error, error_size,
                         "args->positions is given but desc->rope.theta is 0: positions are "
                         "for RoPE layers only");
        return VKATTN_ERROR_INVALID_ARGUMENT;
    }
    return vka_host_positions_resolve(p, args->x.shape[0], args->x.shape[1], pos, error,
                                      error_size);
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

/* The layer as four linear steps (Q, K, V, output projection), the QK-norm
 * and RoPE step of Q and K, and one attention step, all checked. */
typedef struct layer_plan {
    vka_ref_linear_plan lp[4];
    vka_ref_attention_plan ap;
    vkattn_mha_desc desc;         /* resolved */
    const float *q_norm, *k_norm; /* desc.qk_norm only, else NULL */
    vkattn_dtype kv_cache_dtype;  /* f16, bf16, q8_0, q4_0: K and V rounded through it */
    vkattn_host_tensor positions; /* resolved; data NULL: 0..Tq-1 */
    size_t nq, nk, nv, no;        /* floats of Q, K, V and O */
    size_t nl;                    /* floats of the LSE (appended rows only, else 0) */
    size_t nw;                    /* ... and of the main pass's weights, when asked for */
    vkattn_host_tensor weights;   /* ... the caller's weights, resolved (else data NULL) */
    const float *bias_k, *bias_v; /* desc.add_bias_kv only, else NULL */
} layer_plan;

/* The weights of a layer with appended rows: f32, rank 3 [B, Tq, Tk + n]
 * or rank 4 [B, Hq, Tq, Tk + n]; resolved into `out`. */
static vkattn_result check_appended_weights(const vkattn_mha_desc *d, const vkattn_host_tensor *w,
                                            int64_t B, int64_t Tq, int64_t Tk,
                                            vkattn_host_tensor *out, char *error, size_t error_size)
{
    const int64_t n = (int64_t)d->add_bias_kv + (int64_t)d->add_zero_attn;
    if (w->dtype != VKATTN_DTYPE_F32 || (w->rank != 3 && w->rank != 4)) {
        vka_error_format(error, error_size,
                         "args->weights must be f32 of rank 3 [B, Tq, Tk + %lld] or 4 [B, Hq, Tq, "
                         "Tk + %lld] (the appended rows' columns last)",
                         (long long)n, (long long)n);
        return VKATTN_ERROR_INVALID_ARGUMENT;
    }
    const int64_t want4[4] = {B, d->num_heads, Tq, Tk + n}, want3[3] = {B, Tq, Tk + n};
    const int64_t *want = w->rank == 4 ? want4 : want3;
    for (uint32_t i = 0; i < w->rank; i++)
        if (w->shape[i] != want[i]) {
            vka_error_format(error, error_size,
                             "args->weights.shape[%u] is %lld but the layer's is %lld (with the "
                             "%lld appended row%s of desc->add_bias_kv / add_zero_attn)",
                             i, (long long)w->shape[i], (long long)want[i], (long long)n,
                             n > 1 ? "s" : "");
            return VKATTN_ERROR_SHAPE_MISMATCH;
        }
    return vka_host_tensor_resolve(w, "args->weights", true, out, error, error_size);
}

/* Plans every step, with the f32 temporaries not yet allocated: `placeholder`
 * stands in for their data until every check has passed. */
static vkattn_result plan_layer(const vkattn_mha_desc *d, const vka_mha_weight_views *wv,
                                const vkattn_ref_mha_args *args, const vkattn_host_tensor *x,
                                const vkattn_host_tensor *kv, const vkattn_host_tensor *vin,
                                const vkattn_host_tensor *y, float *placeholder, layer_plan *plan,
                                char *error, size_t error_size)
{
    const int64_t B = x->shape[0], Tq = x->shape[1], Tk = kv->shape[1];
    const int64_t Dm = d->embed_dim, Dkv = d->kv_dim, Dk = d->head_dim, Dv = d->v_head_dim;
    const int64_t QW = vka_mha_q_width(d), KW = vka_mha_k_width(d), VW = vka_mha_v_width(d),
                  OW = vka_mha_o_width(d);
    vkattn_ref_linear_args la[4];
    memset(la, 0, sizeof la);
    la[0].x = *x;
    la[0].w = weight_tensor(wv->wq, wv->dtype, QW, Dm);
    la[0].b = bias_tensor(wv->bq, wv->dtype, QW);
    la[0].y = activation(placeholder, B, Tq, QW);
    la[1].x = *kv;
    la[1].w = weight_tensor(wv->wk, wv->dtype, KW, Dkv);
    la[1].b = bias_tensor(wv->bk, wv->dtype, KW);
    la[1].y = activation(placeholder, B, Tk, KW);
    la[2].x = *vin;
    la[2].w = weight_tensor(wv->wv, wv->dtype, VW, d->value_dim);
    la[2].b = bias_tensor(wv->bv, wv->dtype, VW);
    la[2].y = activation(placeholder, B, Tk, VW);
    la[3].x = activation(placeholder, B, Tq, OW);
    la[3].w = weight_tensor(wv->wo, wv->dtype, Dm, OW);
    la[3].b = bias_tensor(wv->bo, wv->dtype, Dm);
    la[3].y = *y;
    for (int i = 0; i < 4; i++)
        VKA_TRY(vka_ref_linear_prepare(&la[i], "args->", &plan->lp[i], error, error_size));

    vkattn_ref_attention_args aa;
    memset(&aa, 0, sizeof aa);
    aa.q = head_view(placeholder, B, Tq, d->num_heads, Dk);
    aa.k = head_view(placeholder, B, Tk, d->num_kv_heads, Dk);
    aa.v = head_view(placeholder, B, Tk, d->num_kv_heads, Dv);
    aa.out = head_view(placeholder, B, Tq, d->num_heads, Dv);
    aa.mask = args->mask;
    aa.key_padding = args->key_padding;
    aa.weights = args->weights;
    aa.causal = args->causal;
    aa.bool_mask = args->bool_mask;
    aa.scale = d->scale;
    aa.causal_align = args->causal_align;
    aa.window = d->window;
    aa.softcap = d->softcap;
    aa.head_mask = args->head_mask;
    /* the layer's batch row b and query head h are the dropout's b and h
     * (packed: the sequence's index, set by run_packed) */
    aa.dropout_p = args->dropout_p;
    aa.dropout_seed = args->dropout_seed;
    int64_t heads = d->num_heads;
    plan->nl = plan->nw = 0;
    memset(&plan->weights, 0, sizeof plan->weights);
    if (d->add_bias_kv || d->add_zero_attn) {
        int64_t lse_shape[3] = {B, heads, Tq};
        aa.lse = vkattn_host_tensor_make(placeholder, VKATTN_DTYPE_F32, 3, lse_shape);
        plan->nl = (size_t)(B * heads * Tq);
        if (args->weights.data) {
            VKA_TRY(check_appended_weights(d, &args->weights, B, Tq, Tk, &plan->weights, error,
                                           error_size));
            int64_t w_shape[4] = {B, heads, Tq, Tk};
            aa.weights = vkattn_host_tensor_make(placeholder, VKATTN_DTYPE_F32, 4, w_shape);
            plan->nw = plan->nl * (size_t)Tk;
        }
    }
    if (wv->sinks)
        aa.sinks = vkattn_host_tensor_make((void *)wv->sinks, VKATTN_DTYPE_F32, 1, &heads);
    if (wv->alibi_slopes)
        aa.alibi_slopes =
            vkattn_host_tensor_make((void *)wv->alibi_slopes, VKATTN_DTYPE_F32, 1, &heads);
    else
        aa.alibi_max_bias = d->alibi_max_bias; /* resolved: 0 without desc->alibi */
    VKA_TRY(vka_ref_attention_prepare(&aa, "args->", &plan->ap, error, error_size));
    size_t rq, rk;
    bool ok = vka_size_mul((size_t)B, (size_t)Tq, &rq) &&
              vka_size_mul((size_t)B, (size_t)Tk, &rk) && vka_size_mul(rq, (size_t)QW, &plan->nq) &&
              vka_size_mul(rk, (size_t)KW, &plan->nk) && vka_size_mul(rk, (size_t)VW, &plan->nv) &&
              vka_size_mul(rq, (size_t)OW, &plan->no);
    if (!ok) {
        vka_error_format(error, error_size,
                         "the reference's temporaries (Q, K, V, O) overflow the address space");
        return VKATTN_ERROR_OUT_OF_HOST_MEMORY;
    }
    return VKATTN_SUCCESS;
}

/* QK-norm then RoPE of every head of `act` ([B, T, H*Dh] f32, in place),
 * each head read once, computed in double and stored once. `norm` NULL: no
 * norm; rope theta 0: no rotation. */
static void norm_rope_heads(const layer_plan *plan, float *act, int64_t T, int64_t H,
                            const float *norm)
{
    const vkattn_mha_desc *d = &plan->desc;
    const bool rope = d->rope.theta != 0.0f;
    if (!norm && !rope)
        return;
    const int64_t B = plan->ap.dims.batch, Dh = d->head_dim;
    const vkattn_host_tensor *pos = &plan->positions;
    double h[VKA_ATTENTION_HEAD_DIM_MAX];
    for (int64_t b = 0; b < B; b++)
        for (int64_t t = 0; t < T; t++) {
            int64_t at =
                pos->data ? ((const int32_t *)pos->data)[b * pos->strides[0] + t * pos->strides[1]]
                          : t;
            for (int64_t hd = 0; hd < H; hd++) {
                float *row = act + ((b * T + t) * H + hd) * Dh;
                double ss = 0.0;
                for (int64_t e = 0; e < Dh; e++) {
                    h[e] = row[e];
                    ss += h[e] * h[e];
                }
                if (norm) {
                    double r = 1.0 / sqrt(ss / (double)Dh + (double)d->norm_eps);
                    for (int64_t e = 0; e < Dh; e++)
                        h[e] = h[e] * r * norm[e];
                }
                if (rope)
                    vka_ref_rope_rotate(&d->rope, at, h);
                for (int64_t e = 0; e < Dh; e++)
                    row[e] = (float)h[e];
            }
        }
}

/* Allocates Q, K, V, O (f32) and the double scratch, then runs the steps. */
/* t rounded to nearest even f16 or bf16 values (other dtypes: as is). */
static void round_to(vkattn_dtype dtype, float *t, size_t n)
{
    if (dtype == VKATTN_DTYPE_F16)
        for (size_t e = 0; e < n; e++)
            t[e] = vkattn_f16_to_f32(vkattn_f32_to_f16(t[e]));
    else if (dtype == VKATTN_DTYPE_BF16)
        for (size_t e = 0; e < n; e++)
            t[e] = vkattn_bf16_to_f32(vkattn_f32_to_bf16(t[e]));
}

static vkattn_result run_layer(layer_plan *plan, char *error, size_t error_size)
{
    size_t nq = plan->nq, nk = plan->nk, nv = plan->nv, no = plan->no, nf = 0;
    size_t nl = plan->nl, nw = plan->nw;
    bool ok = nq <= SIZE_MAX / 6 && nk <= SIZE_MAX / 6 && nv <= SIZE_MAX / 6 &&
              no <= SIZE_MAX / 6 && nl <= SIZE_MAX / 6 && nw <= SIZE_MAX / 6 &&
              vka_size_mul(nq + nk + nv + no + nl + nw, sizeof(float), &nf);
    size_t ns = plan->ap.scratch_doubles;
    for (int i = 0; i < 4; i++)
        if (plan->lp[i].scratch_doubles > ns)
            ns = plan->lp[i].scratch_doubles;
    float *act = ok ? malloc(nf) : NULL;
    double *scratch = act ? malloc(ns * sizeof *scratch) : NULL;
    if (!scratch) {
        free(act);
        vka_error_format(error, error_size,
                         "cannot allocate the reference's temporaries (Q, K, V, O: %zu "
                         "bytes; scratch: %zu bytes)",
                         nf, ns * sizeof *scratch);
        return VKATTN_ERROR_OUT_OF_HOST_MEMORY;
    }
    float *q = act, *k = q + nq, *v = k + nk, *o = v + nv;
    plan->lp[0].y.data = q;
    plan->lp[1].y.data = k;
    plan->lp[2].y.data = v;
    plan->lp[3].x.data = o;
    plan->ap.q.data = q;
    plan->ap.k.data = k;
    plan->ap.v.data = v;
    plan->ap.out.data = o;
    plan->ap.lse.data = nl ? o + no : NULL;
    if (nw)
        plan->ap.weights.data = o + no + nl;
    for (int i = 0; i < 3; i++)
        vka_ref_linear_run(&plan->lp[i], scratch);
    norm_rope_heads(plan, q, plan->ap.dims.q_len, plan->desc.num_heads, plan->q_norm);
    norm_rope_heads(plan, k, plan->ap.dims.kv_len, plan->desc.num_kv_heads, plan->k_norm);
    vkattn_result r = VKATTN_SUCCESS;
    /* the layer's steps stage K and V in its dtype on their way into a
     * cache of another: rounded twice */
    if (plan->kv_cache_dtype != VKATTN_DTYPE_F32 && plan->kv_cache_dtype != plan->desc.dtype)
        for (int i = 0; i < 2; i++)
            round_to(plan->desc.dtype, i ? v : k, i ? nv : nk);
    if (vka_dtype_is_quantized(plan->kv_cache_dtype)) {
        for (int i = 0; i < 2 && r == VKATTN_SUCCESS; i++)
            r = vka_ref_quantize_rows(plan->kv_cache_dtype, i ? v : k, i ? nv : nk,
                                      i ? plan->ap.dims.v_head_dim : plan->ap.dims.head_dim, error,
                                      error_size);
    } else {
        for (int i = 0; i < 2; i++)
            round_to(plan->kv_cache_dtype, i ? v : k, i ? nv : nk);
    }
    if (r != VKATTN_SUCCESS) {
        free(scratch);
        free(act);
        return r;
    }
    vka_ref_attention_run(&plan->ap, scratch);
    if (nl) {
        vka_ref_appended_rows rows = {
            .batch = plan->ap.dims.batch,
            .q_len = plan->ap.dims.q_len,
            .q = q,
            .lse = o + no,
            .o = o,
            .bias_k = plan->bias_k,
            .bias_v = plan->bias_v,
            .head_mask = &plan->ap.head_mask,
            .kv_len = plan->ap.dims.kv_len,
            .p_main = nw ? o + no + nl : NULL,
            .weights = &plan->weights,
        };
        vka_ref_mha_appended(&plan->desc, &rows);
    }
    vka_ref_linear_run(&plan->lp[3], scratch);
    free(scratch);
    free(act);
    return VKATTN_SUCCESS;
}

static vkattn_result run_with_weights(const vkattn_mha_desc *d, const vka_mha_weight_views *wv,
                                      const vkattn_ref_mha_args *args, char *error,
                                      size_t error_size);
static vkattn_result run_packed(const vkattn_mha_desc *d, const vka_mha_weight_views *wv,
                                const vkattn_ref_mha_args *args, char *error, size_t error_size);

vkattn_result vkattn_ref_mha(const vkattn_mha_desc *desc, const vkattn_mha_weights *weights,
                             const vkattn_ref_mha_args *args, char *error, size_t error_size)
{
    vkattn_mha_desc d;
    vka_mha_weight_views wv;
    VKA_TRY(vka_mha_resolve(desc, &d, error, error_size));
    VKA_TRY(vka_mha_weights_check(&d, weights, &wv, error, error_size));
    VKA_TRY(check_finite(wv.sinks, "sinks", d.num_heads, error, error_size));
    VKA_TRY(check_finite(wv.alibi_slopes, "alibi_slopes", d.num_heads, error, error_size));
    VKA_TRY(check_finite(wv.bias_k, "bias_k", vka_mha_k_width(&d), error, error_size));
    VKA_TRY(check_finite(wv.bias_v, "bias_v", vka_mha_v_width(&d), error, error_size));
    void *owned[8];
    VKA_TRY(vka_ref_mha_store_weights(&d, &wv, owned, error, error_size));
    vkattn_result r = run_with_weights(&d, &wv, args, error, error_size);
    for (int i = 0; i < 8; i++)
        free(owned[i]);
    return r;
}

/* Checks and plans one ordinary (not packed) layer call. */
static vkattn_result prepare_layer(const vkattn_mha_desc *dp, const vka_mha_weight_views *wvp,
                                   const vkattn_ref_mha_args *args, layer_plan *plan, char *error,
                                   size_t error_size)
{
    vkattn_mha_desc d = *dp;
    vka_mha_weight_views wv = *wvp;
    vkattn_host_tensor x, kv, vin, y;
    VKA_TRY(check_io(&d, args, &x, &kv, &vin, &y, error, error_size));
    VKA_TRY(check_modern(&d, args, &plan->positions, error, error_size));
    float placeholder = 0.0f;
    VKA_TRY(plan_layer(&d, &wv, args, &x, &kv, &vin, &y, &placeholder, plan, error, error_size));
    plan->desc = d;
    plan->q_norm = wv.q_norm;
    plan->k_norm = wv.k_norm;
    plan->bias_k = wv.bias_k;
    plan->bias_v = wv.bias_v;
    plan->kv_cache_dtype = args->kv_cache_dtype;
    if (!vka_dtype_is_float(args->kv_cache_dtype) && args->kv_cache_dtype != VKATTN_DTYPE_BF16 &&
        !vka_dtype_is_quantized(args->kv_cache_dtype)) {
        char b[VKA_DTYPE_TEXT];
        vka_error_format(error, error_size,
                         "args->kv_cache_dtype %s is not supported: 0 (f32: none), f16, bf16, "
                         "q8_0 or q4_0",
                         vka_dtype_text(args->kv_cache_dtype, b));
        return VKATTN_ERROR_UNSUPPORTED_DTYPE;
    }
    return VKATTN_SUCCESS;
}

/* vkattn_ref_mha once the weights are as the device keeps them. */
static vkattn_result run_with_weights(const vkattn_mha_desc *d, const vka_mha_weight_views *wv,
                                      const vkattn_ref_mha_args *args, char *error,
                                      size_t error_size)
{
    if (!args) {
        vka_error_format(error, error_size, "args is NULL");
        return VKATTN_ERROR_INVALID_ARGUMENT;
    }
    if (args->sequences)
        return run_packed(d, wv, args, error, error_size);
    layer_plan plan;
    VKA_TRY(prepare_layer(d, wv, args, &plan, error, error_size));
    return run_layer(&plan, error, error_size);
}

/* ---- packed ragged batches (args->sequences > 0) */

/* Tokens [start, start + count) of a packed [1, T, ...] host tensor (data
 * NULL: stays absent), its strides resolved. */
static vkattn_result token_slice(const vkattn_host_tensor *t, const char *name, bool output,
                                 int64_t start, int64_t count, vkattn_host_tensor *out, char *error,
                                 size_t error_size)
{
    *out = *t;
    if (!t->data)
        return VKATTN_SUCCESS;
    VKA_TRY(vka_host_tensor_resolve(t, name, output, out, error, error_size));
    out->data =
        (char *)out->data + vka_varlen_slice(out->dtype, out->shape, out->strides, 1, start, count);
    return VKATTN_SUCCESS;
}

/* Sequence i's ordinary call over views of the packed tensors. */
static vkattn_result sequence_args(const vkattn_ref_mha_args *args, uint32_t i,
                                   vkattn_ref_mha_args *sub, char *error, size_t error_size)
{
    vka_varlen_seq s = vka_varlen_sequence(args->q_offsets, args->k_offsets, i);
    *sub = *args;
    sub->sequences = 0;
    sub->q_offsets = sub->k_offsets = NULL;
    VKA_TRY(token_slice(&args->x, "args->x", false, s.q0, s.nq, &sub->x, error, error_size));
    VKA_TRY(token_slice(&args->y, "args->y", true, s.q0, s.nq, &sub->y, error, error_size));
    VKA_TRY(token_slice(&args->kv, "args->kv", false, s.k0, s.nk, &sub->kv, error, error_size));
    VKA_TRY(token_slice(&args->value, "args->value", false, s.k0, s.nk, &sub->value, error,
                        error_size));
    VKA_TRY(token_slice(&args->positions, "args->positions", false, s.q0, s.nq, &sub->positions,
                        error, error_size));
    const vkattn_host_tensor *g = &args->head_mask;
    if (g->data && g->rank == 2) { /* its row i (or its only row) */
        VKA_TRY(vka_host_tensor_resolve(g, "args->head_mask", false, &sub->head_mask, error,
                                        error_size));
        if (g->shape[0] > 1)
            sub->head_mask.data = (float *)sub->head_mask.data + i * sub->head_mask.strides[0];
        sub->head_mask.rank = 1;
        sub->head_mask.shape[0] = g->shape[1];
        sub->head_mask.strides[0] = sub->head_mask.strides[1];
    }
    return VKATTN_SUCCESS;
}

/* The packed call's own rules, before any sequence's. */
static vkattn_result check_packed(const vkattn_mha_desc *d, const vkattn_ref_mha_args *args,
                                  char *error, size_t error_size)
{
    if (args->x.rank != 3 || args->x.shape[0] != 1 || (args->kv.data && args->kv.rank != 3)) {
        vka_error_format(error, error_size,
                         "args->x.shape[0] is %lld: packed sequences (args->sequences %u) lie one "
                         "after the other along the token axis of one batch row ([1, sum Tq, Dm])",
                         (long long)(args->x.rank ? args->x.shape[0] : 0), args->sequences);
        return VKATTN_ERROR_SHAPE_MISMATCH;
    }
    const vkattn_host_tensor *keys = args->kv.data ? &args->kv : &args->x;
    vka_varlen_totals totals = {args->x.shape[1], keys->shape[1], "x.shape[1] (sum Tq)",
                                args->kv.data ? "kv.shape[1] (sum Tk)" : "x.shape[1] (sum Tk)"};
    VKA_TRY(vka_varlen_offsets_check(args->sequences, args->q_offsets, args->k_offsets, totals,
                                     "args->", error, error_size));
    if (!args->kv.data)
        VKA_TRY(vka_varlen_same_offsets(args->sequences, args->q_offsets, args->k_offsets, "args->",
                                        error, error_size));
    VKA_TRY(vka_varlen_refuse_unpacked(args->mask.data, args->key_padding.data, args->weights.data,
                                       "args->", "causal and the layer's modifiers", error,
                                       error_size));
    return vka_head_mask_check(vka_host_shape_view(&args->head_mask), args->sequences, d->num_heads,
                               "args->head_mask", error, error_size);
}

/* Every sequence checked and planned, then run: its own layer call over
 * its tokens (positions restart at 0), as the padded call's batch row. */
static vkattn_result run_packed(const vkattn_mha_desc *d, const vka_mha_weight_views *wv,
                                const vkattn_ref_mha_args *args, char *error, size_t error_size)
{
    VKA_TRY(check_packed(d, args, error, error_size));
    layer_plan *plans = calloc(args->sequences, sizeof *plans);
    if (!plans) {
        vka_error_format(error, error_size, "out of host memory for %u sequences' plans",
                         args->sequences);
        return VKATTN_ERROR_OUT_OF_HOST_MEMORY;
    }
    vkattn_result r = VKATTN_SUCCESS;
    for (uint32_t i = 0; r == VKATTN_SUCCESS && i < args->sequences; i++) {
        if (args->q_offsets[i + 1] == args->q_offsets[i])
            continue;
        vkattn_ref_mha_args sub;
        char why[512];
        r = sequence_args(args, i, &sub, why, sizeof why);
        if (r == VKATTN_SUCCESS)
            r = prepare_layer(d, wv, &sub, &plans[i], why, sizeof why);
        if (r != VKATTN_SUCCESS) {
            vka_varlen_seq s = vka_varlen_sequence(args->q_offsets, args->k_offsets, i);
            vka_error_format(error, error_size,
                             "sequence %u (queries from token %lld, keys from %lld): %s", i,
                             (long long)s.q0, (long long)s.k0, why);
        }
    }
    for (uint32_t i = 0; r == VKATTN_SUCCESS && i < args->sequences; i++)
        if (args->q_offsets[i + 1] != args->q_offsets[i]) {
            plans[i].ap.dropout_batch = i; /* the dropout's b is the sequence */
            r = run_layer(&plans[i], error, error_size);
        }
    free(plans);
    return r;
}
