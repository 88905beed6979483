/* CPU reference of attention (see "attention semantics" in vkattn.h):
 * double accumulation, exact softmax over the visible keys, GQA by index. */
#include "ref/ref.h"

#include "spec/error_text.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

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

    /* Strides, one tensor at a time; names as the shape check gives them. */
    struct {
        const vkattn_host_tensor *in;
        vkattn_host_tensor *out;
        const char *name;
        bool output;
    } tensors[] = {
        {&args->q, &p.q, "q", false},
        {&args->k, &p.k, "k", false},
        {&args->v, &p.v, "v", false},
        {&args->out, &p.out, "out", true},
        {&args->mask, &p.mask, "mask", false},
        {&args->key_padding, &p.key_padding, "key_padding", false},
        {&args->weights, &p.weights, "weights", true},
    };
    for (size_t i = 0; i < sizeof tensors / sizeof tensors[0]; i++) {
        if (!tensors[i].in->data)
            continue; /* optional and absent (required ones were checked) */
        char name[64];
        vka_error_format(name, sizeof name, "%s%s", prefix, tensors[i].name);
        VKA_TRY(vka_host_tensor_resolve(tensors[i].in, name, tensors[i].output, tensors[i].out,
                                        error, error_size));
    }

    p.causal = args->causal;
    char scale_name[64];
    vka_error_format(scale_name, sizeof scale_name, "%sscale", prefix);
    VKA_TRY(
        vka_attention_scale(args->scale, p.dims.head_dim, scale_name, &p.scale, error, error_size));

    /* Scratch: K and V of one kv head, a query row, an output row, a score
     * row, and for rank-3 weights the per-batch sum over heads. */
    size_t tk = p.dims.kv_len, d = p.dims.head_dim, kv = 0, total = 0;
    bool ok = vka_size_mul(tk, d, &kv) && vka_size_mul(kv, 2, &kv) && kv <= SIZE_MAX - 2 * d - tk;
    if (ok)
        total = kv + 2 * d + tk;
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

void vka_ref_attention_run(const vka_ref_attention_plan *p, double *scratch)
{
    const vka_attention_dims *dm = &p->dims;
    const int64_t B = dm->batch, Hq = dm->num_heads, Hkv = dm->num_kv_heads;
    const int64_t Tq = dm->q_len, Tk = dm->kv_len, D = dm->head_dim;
    const int64_t group = Hq / Hkv;
    /* Bottom-right causal alignment: query i sees keys j <= i + (Tk - Tq). */
    const int64_t causal_shift = Tk - Tq;
    const vkattn_host_tensor *q = &p->q, *k = &p->k, *v = &p->v, *o = &p->out;
    const vkattn_host_tensor *m = &p->mask, *kp = &p->key_padding, *w = &p->weights;

    double *kbuf = scratch;
    double *vbuf = kbuf + Tk * D;
    double *qrow = vbuf + Tk * D;
    double *acc = qrow + D;
    double *prob = acc + D;
    double *wsum = prob + Tk; /* only with rank-3 weights */

    for (int64_t b = 0; b < B; b++) {
        if (dm->weights_rank == 3)
            memset(wsum, 0, (size_t)(Tq * Tk) * sizeof *wsum);
        for (int64_t g = 0; g < Hkv; g++) {
            gather(k, b * k->strides[0] + g * k->strides[1], Tk, k->strides[2], D, k->strides[3],
                   kbuf);
            gather(v, b * v->strides[0] + g * v->strides[1], Tk, v->strides[2], D, v->strides[3],
                   vbuf);
            for (int64_t h = g * group; h < (g + 1) * group; h++) {
                /* Size-1 mask dimensions broadcast: their index stays 0. */
                int64_t mask_base = 0;
                if (m->data && m->rank == 4)
                    mask_base = (m->shape[0] == 1 ? 0 : b) * m->strides[0] +
                                (m->shape[1] == 1 ? 0 : h) * m->strides[1];
                for (int64_t i = 0; i < Tq; i++) {
                    gather(q, b * q->strides[0] + h * q->strides[1] + i * q->strides[2], 1, 0, D,
                           q->strides[3], qrow);
                    int64_t last = Tk - 1; /* last key this row may see */
                    if (p->causal && i + causal_shift < last)
                        last = i + causal_shift;
                    /* Scores of the visible keys; -inf marks hidden ones. A NaN
                     * score is visible and poisons the row, as it should. */
                    double row_max = -INFINITY;
                    bool any = false;
                    for (int64_t j = 0; j < Tk; j++) {
                        double sc = -INFINITY;
                        bool visible =
                            j <= last &&
                            !(kp->data &&
                              vka_host_load(kp, b * kp->strides[0] + j * kp->strides[1]) == 0);
                        if (visible) {
                            double dot = 0.0;
                            const double *kr = kbuf + j * D;
                            for (int64_t e = 0; e < D; e++)
                                dot += qrow[e] * kr[e];
                            sc = p->scale * dot;
                            if (m->data)
                                sc += vka_host_load(m, mask_base + i * m->strides[m->rank - 2] +
                                                           j * m->strides[m->rank - 1]);
                        }
                        prob[j] = sc;
                        if (sc != -INFINITY) {
                            any = true;
                            if (!(sc <= row_max))
                                row_max = sc;
                        }
                    }
                    /* Softmax; a row with no visible key stays all zero. */
                    double sum = 0.0;
                    for (int64_t j = 0; j < Tk; j++) {
                        prob[j] = (any && prob[j] != -INFINITY) ? exp(prob[j] - row_max) : 0.0;
                        sum += prob[j];
                    }
                    double inv = any ? 1.0 / sum : 0.0;
                    for (int64_t e = 0; e < D; e++)
                        acc[e] = 0.0;
                    for (int64_t j = 0; j < Tk; j++) {
                        prob[j] *= inv;
                        if (prob[j] == 0.0)
                            continue;
                        const double *vr = vbuf + j * D;
                        for (int64_t e = 0; e < D; e++)
                            acc[e] += prob[j] * vr[e];
                    }
                    int64_t obase = b * o->strides[0] + h * o->strides[1] + i * o->strides[2];
                    for (int64_t e = 0; e < D; e++)
                        vka_host_store(o, obase + e * o->strides[3], acc[e]);
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

vkattn_result vkattn_ref_attention(const vkattn_ref_attention_args *args, char *error,
                                   size_t error_size)
{
    vka_ref_attention_plan plan;
    VKA_TRY(vka_ref_attention_prepare(args, "args->", &plan, error, error_size));
    double *scratch = vka_ref_scratch(plan.scratch_doubles, error, error_size);
    if (!scratch)
        return VKATTN_ERROR_OUT_OF_HOST_MEMORY;
    vka_ref_attention_run(&plan, scratch);
    free(scratch);
    return VKATTN_SUCCESS;
}
