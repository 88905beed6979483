/* CPU reference of attention (see "attention semantics" in vkattn.h):
 * double accumulation, exact softmax over the visible keys, GQA by index,
 * the score modifiers (window, softcap, sinks, ALiBi, causal alignment),
 * the LSE output and dropout. */
#include "ref/ref.h"

#include "spec/dtype.h"
#include "spec/error_text.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* A finite value at every element of a resolved f32 [n] or [m, n] tensor,
 * else a named error ("args->sinks[3] is nan"). */
static vkattn_result check_finite(const vkattn_host_tensor *t, const char *name, char *error,
                                  size_t error_size)
{
    const int64_t rows = t->rank == 2 ? t->shape[0] : 1, n = t->shape[t->rank - 1];
    for (int64_t r = 0; r < rows; r++)
        for (int64_t i = 0; i < n; i++) {
            int64_t at = (t->rank == 2 ? r * t->strides[0] : 0) + i * t->strides[t->rank - 1];
            double x = vka_host_load(t, at);
            if (!isfinite(x)) {
                if (t->rank == 2)
                    vka_error_format(error, error_size, "%s[%lld, %lld] is %g: it must be finite",
                                     name, (long long)r, (long long)i, x);
                else
                    vka_error_format(error, error_size, "%s[%lld] is %g: it must be finite", name,
                                     (long long)i, x);
                return VKATTN_ERROR_INVALID_ARGUMENT;
            }
        }
    return VKATTN_SUCCESS;
}

/* The score modifiers and LSE, checked as the GPU checks them
 * (spec/score_mods.c). */
static vkattn_result check_mods(const vkattn_ref_attention_args *args, const char *prefix,
                                vka_ref_attention_plan *p, char *error, size_t error_size)
{
    vka_score_mods_args in;
    memset(&in, 0, sizeof in);
    in.causal_align = args->causal_align;
    in.window = args->window;
    in.softcap = args->softcap;
    in.alibi_max_bias = args->alibi_max_bias;
    in.sinks = vka_host_shape_view(&args->sinks);
    in.alibi_slopes = vka_host_shape_view(&args->alibi_slopes);
    in.lse = vka_host_shape_view(&args->lse);
    in.dropout_p = args->dropout_p;
    in.dropout_seed = args->dropout_seed;
    return vka_score_mods_check(&in, &p->dims, prefix, false, &p->mods, error, error_size);
}

vkattn_result vka_ref_attention_prepare(const vkattn_ref_attention_args *args, const char *prefix,
                                        vka_ref_attention_plan *plan, char *error,
                                        size_t error_size)
{
    if (!prefix)
        prefix = "";
    if (!args) {
        vka_error_format(error, error_size, "args is NULL");
        return VKATTN_ERROR_INVALID_ARGUMENT;
    }
    vka_attention_shapes s = {0};
    s.q = vka_host_shape_view(&args->q);
    s.k = vka_host_shape_view(&args->k);
    s.v = vka_host_shape_view(&args->v);
    s.out = vka_host_shape_view(&args->out);
    s.mask = vka_host_shape_view(&args->mask);
    s.key_padding = vka_host_shape_view(&args->key_padding);
    s.weights = vka_host_shape_view(&args->weights);
    s.handle_name = "data";
    vka_ref_attention_plan p;
    memset(&p, 0, sizeof p);
    VKA_TRY(vka_attention_check(&s, prefix, &p.dims, error, error_size));
    VKA_TRY(check_mods(args, prefix, &p, error, error_size));
    char mask_name[64];
    vka_error_format(mask_name, sizeof mask_name, "%shead_mask", prefix);
    VKA_TRY(vka_head_mask_check(vka_host_shape_view(&args->head_mask), p.dims.batch,
                                p.dims.num_heads, mask_name, error, error_size));

    /* Strides, one tensor at a time; names as the shape checks give them.
     * Sinks and slopes are read here too: their values must be finite. */
    struct {
        const vkattn_host_tensor *in;
        vkattn_host_tensor *out;
        const char *name;
        bool output, values;
    } tensors[] = {
        {&args->q, &p.q, "q", false, false},
        {&args->k, &p.k, "k", false, false},
        {&args->v, &p.v, "v", false, false},
        {&args->out, &p.out, "out", true, false},
        {&args->mask, &p.mask, "mask", false, false},
        {&args->key_padding, &p.key_padding, "key_padding", false, false},
        {&args->weights, &p.weights, "weights", true, false},
        {&args->sinks, &p.sinks, "sinks", false, true},
        {&args->alibi_slopes, &p.alibi_slopes, "alibi_slopes", false, true},
        {&args->lse, &p.lse, "lse", true, false},
        {&args->head_mask, &p.head_mask, "head_mask", false, true},
    };
    for (size_t i = 0; i < sizeof tensors / sizeof tensors[0]; i++) {
        if (!tensors[i].in->data)
            continue; /* optional and absent (required ones were checked) */
        char name[64];
        vka_error_format(name, sizeof name, "%s%s", prefix, tensors[i].name);
        VKA_TRY(vka_host_tensor_resolve(tensors[i].in, name, tensors[i].output, tensors[i].out,
                                        error, error_size));
        if (tensors[i].values)
            VKA_TRY(check_finite(tensors[i].out, name, error, error_size));
        const vkattn_host_tensor *t = tensors[i].out;
        if (vka_dtype_is_quantized(t->dtype))
            VKA_TRY(vka_quant_strides_check(name, t->dtype, t->rank, t->shape, t->strides, error,
                                            error_size));
    }

    if (p.dims.q_broadcast) { /* [Hq, Tq, D]: every batch row reads it (stride 0) */
        vka_query_view4(&p.dims, p.q.shape, p.q.strides);
        p.q.rank = 4;
    }
    VKA_TRY(vka_bool_mask_check(args->bool_mask, prefix, error, error_size));
    if (p.mask.data) {
        int64_t shape4[4];
        vka_mask_view4(&p.dims, p.mask.rank, p.mask.shape, p.mask.strides, shape4, p.mask_strides);
    }
    p.mask_true_blocks = args->bool_mask == VKATTN_BOOL_MASK_TRUE_BLOCKS;
    p.causal = args->causal;
    p.dropout_keep = p.mods.dropout ? 1.0 / (1.0 - (double)p.mods.dropout_p) : 1.0;
    char scale_name[64];
    vka_error_format(scale_name, sizeof scale_name, "%sscale", prefix);
    VKA_TRY(
        vka_attention_scale(args->scale, p.dims.head_dim, scale_name, &p.scale, error, error_size));

    /* Scratch: K and V of one kv head, a query row, an output row, a score
     * row, and for rank-3 weights the per-batch sum over heads. */
    size_t tk = p.dims.kv_len, d = (size_t)p.dims.head_dim + p.dims.v_head_dim, kv = 0, total = 0;
    bool ok = vka_size_mul(tk, d, &kv) && kv <= SIZE_MAX - d - tk;
    if (ok)
        total = kv + d + tk;
    if (ok && p.dims.weights_rank == 3) {
        size_t sum;
        ok = vka_size_mul(p.dims.q_len, tk, &sum) && total <= SIZE_MAX - sum;
        total += sum;
    }
    ok = ok && total <= SIZE_MAX / sizeof(double);
    if (!ok) {
        vka_error_format(error, error_size,
                         "%sk.shape[2] (kv_len) %u: the reference's scratch memory size "
                         "overflows",
                         prefix, p.dims.kv_len);
        return VKATTN_ERROR_OUT_OF_HOST_MEMORY;
    }
    p.scratch_doubles = total;
    *plan = p;
    return VKATTN_SUCCESS;
}

/* Copies rows x cols elements (strides in elements) to a dense double array. */
static void gather(const vkattn_host_tensor *t, int64_t base, int64_t rows, int64_t row_stride,
                   int64_t cols, int64_t col_stride, double *dst)
{
    for (int64_t r = 0; r < rows; r++)
        for (int64_t c = 0; c < cols; c++)
            dst[r * cols + c] = vka_host_load(t, base + r * row_stride + c * col_stride);
}

/* Where query i sits for the causal rule, the window and ALiBi. */
static int64_t aligned_position(const vka_ref_attention_plan *p, int64_t i)
{
    return p->mods.top_left ? i : i + (int64_t)p->dims.kv_len - (int64_t)p->dims.q_len;
}

/* Whether key j is visible to the query at aligned position `at` by the
 * causal rule and the window (masks and padding are the caller's). */
static bool in_range(const vka_ref_attention_plan *p, int64_t at, int64_t j)
{
    if (p->causal && j > at)
        return false;
    const int64_t w = p->mods.window;
    if (w == 0)
        return true;
    return at - j < w && (p->causal || j - at < w);
}

double vka_ref_attention_probs(const vka_ref_attention_plan *p, int64_t b, int64_t h, int64_t i,
                               const double *qrow, const double *kbuf, double *prob, double *dcap,
                               double *sink_prob)
{
    const int64_t Tk = p->dims.kv_len, Dk = p->dims.head_dim;
    const vkattn_host_tensor *m = &p->mask, *kp = &p->key_padding;
    const int64_t at = aligned_position(p, i);
    const double cap = p->mods.softcap;
    double slope = 0.0;
    if (p->alibi_slopes.data)
        slope = vka_host_load(&p->alibi_slopes, h * p->alibi_slopes.strides[0]);
    else if (p->mods.alibi)
        slope = vka_alibi_slope(p->dims.num_heads, p->mods.alibi_max_bias, (uint32_t)h);
    /* Scores of the visible keys; -inf marks hidden ones. A NaN score is
     * visible and poisons the row, as it should. */
    const bool bool_mask = m->data && m->dtype == VKATTN_DTYPE_U8;
    const int64_t mask_row = b * p->mask_strides[0] + h * p->mask_strides[1] +
                             i * p->mask_strides[2]; /* (broadcasts have stride 0) */
    double row_max = -INFINITY;
    bool any = false;
    for (int64_t j = 0; j < Tk; j++) {
        double sc = -INFINITY, slope_of_dot = 0.0;
        bool visible =
            in_range(p, at, j) &&
            !(kp->data && vka_host_load(kp, b * kp->strides[0] + j * kp->strides[1]) == 0);
        if (visible && bool_mask)
            visible =
                (vka_host_load(m, mask_row + j * p->mask_strides[3]) != 0) != p->mask_true_blocks;
        if (visible) {
            double dot = 0.0;
            const double *kr = kbuf + j * Dk;
            for (int64_t e = 0; e < Dk; e++)
                dot += qrow[e] * kr[e];
            sc = p->scale * dot;
            slope_of_dot = 1.0;
            if (cap > 0.0) {
                sc = cap * tanh(sc / cap);
                slope_of_dot = 1.0 - (sc / cap) * (sc / cap); /* d cap tanh(x / cap) / dx */
            }
            if (m->data && !bool_mask)
                sc += vka_host_load(m, mask_row + j * p->mask_strides[3]);
            if (slope != 0.0)
                sc -= slope * (double)llabs(at - j);
        }
        prob[j] = sc;
        if (dcap)
            dcap[j] = slope_of_dot;
        if (sc != -INFINITY) {
            any = true;
            if (!(sc <= row_max))
                row_max = sc;
        }
    }
    if (sink_prob)
        *sink_prob = 0.0;
    if (!any) { /* a row with no visible key: zeros, even with a sink */
        for (int64_t j = 0; j < Tk; j++)
            prob[j] = 0.0;
        return -INFINITY;
    }
    /* Softmax; the sink joins the denominator (and the max, for range). */
    double sink = -INFINITY;
    if (p->sinks.data) {
        sink = vka_host_load(&p->sinks, h * p->sinks.strides[0]);
        if (sink > row_max)
            row_max = sink;
    }
    double sum = p->sinks.data ? exp(sink - row_max) : 0.0;
    for (int64_t j = 0; j < Tk; j++) {
        prob[j] = prob[j] != -INFINITY ? exp(prob[j] - row_max) : 0.0;
        sum += prob[j];
    }
    double inv = 1.0 / sum;
    for (int64_t j = 0; j < Tk; j++)
        prob[j] *= inv;
    if (sink_prob && p->sinks.data)
        *sink_prob = exp(sink - row_max) * inv;
    return row_max + log(sum);
}

/* One query row of head h: the probabilities into prob[0..Tk), the output
 * row (through the dropout mask) in acc[0..Dv); returns the LSE (-inf when
 * nothing is visible, and then prob and acc are all zero). */
static double attend_row(const vka_ref_attention_plan *p, int64_t b, int64_t h, int64_t i,
                         const double *qrow, const double *kbuf, const double *vbuf, double *prob,
                         double *acc)
{
    const int64_t Tk = p->dims.kv_len, Dv = p->dims.v_head_dim;
    double lse = vka_ref_attention_probs(p, b, h, i, qrow, kbuf, prob, NULL, NULL);
    for (int64_t e = 0; e < Dv; e++)
        acc[e] = 0.0;
    for (int64_t j = 0; j < Tk; j++) {
        if (prob[j] == 0.0)
            continue;
        const double pz = prob[j] * vka_ref_dropout_scale(p, b, h, i, j);
        const double *vr = vbuf + j * Dv;
        for (int64_t e = 0; e < Dv; e++)
            acc[e] += pz * vr[e];
    }
    return lse;
}

double vka_ref_head_gate(const vka_ref_attention_plan *p, int64_t b, int64_t h)
{
    const vkattn_host_tensor *hm = &p->head_mask;
    if (!hm->data)
        return 1.0;
    int64_t row = hm->rank == 2 && hm->shape[0] > 1 ? b * hm->strides[0] : 0;
    return vka_host_load(hm, row + h * hm->strides[hm->rank - 1]);
}

void vka_ref_attention_run(const vka_ref_attention_plan *p, double *scratch)
{
    const vka_attention_dims *dm = &p->dims;
    const int64_t B = dm->batch, Hq = dm->num_heads, Hkv = dm->num_kv_heads;
    const int64_t Tq = dm->q_len, Tk = dm->kv_len, Dk = dm->head_dim, Dv = dm->v_head_dim;
    const int64_t group = Hq / Hkv;
    const vkattn_host_tensor *q = &p->q, *k = &p->k, *v = &p->v, *o = &p->out;
    const vkattn_host_tensor *w = &p->weights, *l = &p->lse;

    double *kbuf = scratch;
    double *vbuf = kbuf + Tk * Dk;
    double *qrow = vbuf + Tk * Dv;
    double *acc = qrow + Dk;
    double *prob = acc + Dv;
    double *wsum = prob + Tk; /* only with rank-3 weights */

    for (int64_t b = 0; b < B; b++) {
        if (dm->weights_rank == 3)
            memset(wsum, 0, (size_t)(Tq * Tk) * sizeof *wsum);
        for (int64_t g = 0; g < Hkv; g++) {
            gather(k, b * k->strides[0] + g * k->strides[1], Tk, k->strides[2], Dk, k->strides[3],
                   kbuf);
            gather(v, b * v->strides[0] + g * v->strides[1], Tk, v->strides[2], Dv, v->strides[3],
                   vbuf);
            for (int64_t h = g * group; h < (g + 1) * group; h++) {
                const double gate = vka_ref_head_gate(p, b, h);
                for (int64_t i = 0; i < Tq; i++) {
                    gather(q, b * q->strides[0] + h * q->strides[1] + i * q->strides[2], 1, 0, Dk,
                           q->strides[3], qrow);
                    double lse = attend_row(p, b, h, i, qrow, kbuf, vbuf, prob, acc);
                    /* the head mask scales the head's probabilities (and so
                     * its output), not the LSE */
                    if (gate != 1.0) {
                        for (int64_t e = 0; e < Dv; e++)
                            acc[e] *= gate;
                        for (int64_t j = 0; j < Tk; j++)
                            prob[j] *= gate;
                    }
                    int64_t obase = b * o->strides[0] + h * o->strides[1] + i * o->strides[2];
                    for (int64_t e = 0; e < Dv; e++)
                        vka_host_store(o, obase + e * o->strides[3], acc[e]);
                    if (l->data)
                        vka_host_store(l, b * l->strides[0] + h * l->strides[1] + i * l->strides[2],
                                       lse);
                    if (dm->weights_rank == 4) {
                        int64_t wbase = b * w->strides[0] + h * w->strides[1] + i * w->strides[2];
                        for (int64_t j = 0; j < Tk; j++)
                            vka_host_store(w, wbase + j * w->strides[3], prob[j]);
                    } else if (dm->weights_rank == 3) {
                        for (int64_t j = 0; j < Tk; j++)
                            wsum[i * Tk + j] += prob[j];
                    }
                }
            }
        }
        if (dm->weights_rank == 3)
            for (int64_t i = 0; i < Tq; i++)
                for (int64_t j = 0; j < Tk; j++)
                    vka_host_store(w, b * w->strides[0] + i * w->strides[1] + j * w->strides[2],
                                   wsum[i * Tk + j] / (double)Hq);
    }
}

vkattn_result vka_ref_dequantized(vkattn_host_tensor *t, const char *name, float **owned,
                                  char *error, size_t error_size)
{
    *owned = NULL;
    if (!vka_dtype_is_quantized(t->dtype))
        return VKATTN_SUCCESS;
    uint64_t values = 1; /* the last value's index + 1: whole blocks */
    for (uint32_t i = 0; i < t->rank; i++)
        values += (uint64_t)(t->shape[i] - 1) * (uint64_t)t->strides[i];
    float *f = values <= SIZE_MAX / sizeof(float) ? malloc((size_t)values * sizeof(float)) : NULL;
    if (!f) {
        vka_error_format(error, error_size, "args->%s: out of host memory for its %llu values",
                         name, (unsigned long long)values);
        return VKATTN_ERROR_OUT_OF_HOST_MEMORY;
    }
    vkattn_result r = vkattn_ref_dequantize(t->dtype, t->data, values, f, error, error_size);
    if (r != VKATTN_SUCCESS) {
        free(f);
        return r;
    }
    t->data = f;
    t->dtype = VKATTN_DTYPE_F32;
    *owned = f;
    return VKATTN_SUCCESS;
}
