/* The MHA layer's per-head steps in double on dense [B, T, H*D]
 * activations, forward and backward: QK-norm and RoPE of Q and K, and
 * attention. Rows are scored by the attention reference's own
 * vka_ref_attention_probs and dropped by vka_ref_dropout_scale, so masks,
 * modifiers and the dropout mask are exactly vkattn_ref_attention's; the
 * backward is vkattn_ref_attention_backward's (see
 * ref_attention_backward_run.c) on double rows instead of f32 tensors:
 *     O_u = sum_j P Z v_j,  Dr = dot(dO, O_u),
 *     dv_j += P Z dO,  dS = P (Z dot(dO, v_j) - Dr),
 *     dq_i += scale c dS k_j,  dk_j += scale c dS q_i,  dsinks_h -= P_sink Dr.
 * QK-norm backward (y = x r w, r = 1 / sqrt(mean(x^2) + eps)):
 *     dx = r (g w) - x r^3 / D sum(g w x),  dw += g x r;
 * RoPE backward: the rotation by the negated angles (its transpose). */
#include "ref/ref_backward.h"

#include <math.h>
#include <string.h>

/* Token t's RoPE position in batch row b. */
static int64_t position_of(const vka_ref_mha_bwd_plan *p, int64_t b, int64_t t)
{
    const vkattn_host_tensor *pos = &p->positions;
    if (!pos->data)
        return t;
    return ((const int32_t *)pos->data)[b * pos->strides[0] + t * pos->strides[1]];
}

/* 1 / sqrt(mean(x^2) + eps) of one head's Dh values. */
static double rms_inverse(const double *x, int64_t dh, double eps)
{
    double ss = 0.0;
    for (int64_t e = 0; e < dh; e++)
        ss += x[e] * x[e];
    return 1.0 / sqrt(ss / (double)dh + eps);
}

void vka_ref_heads_forward(const vka_ref_mha_bwd_plan *p, const double *lin, int64_t T, int64_t H,
                           const float *norm, double *out)
{
    const vkattn_mha_desc *d = &p->desc;
    const bool rope = d->rope.theta != 0.0f;
    const int64_t B = p->x.shape[0], Dh = d->head_dim;
    const double eps = d->norm_eps;
    memcpy(out, lin, (size_t)(B * T * H * Dh) * sizeof *out);
    if (!norm && !rope)
        return;
    for (int64_t b = 0; b < B; b++)
        for (int64_t t = 0; t < T; t++)
            for (int64_t h = 0; h < H; h++) {
                double *row = out + ((b * T + t) * H + h) * Dh;
                if (norm) {
                    const double r = rms_inverse(row, Dh, eps);
                    for (int64_t e = 0; e < Dh; e++)
                        row[e] = row[e] * r * norm[e];
                }
                if (rope)
                    vka_ref_rope_rotate(&d->rope, position_of(p, b, t), row);
            }
}

void vka_ref_heads_backward(const vka_ref_mha_bwd_plan *p, const double *lin, int64_t T, int64_t H,
                            const float *norm, double *grad, double *dnorm)
{
    const vkattn_mha_desc *d = &p->desc;
    const bool rope = d->rope.theta != 0.0f;
    const int64_t B = p->x.shape[0], Dh = d->head_dim;
    const double eps = d->norm_eps;
    for (int64_t b = 0; b < B; b++)
        for (int64_t t = 0; t < T; t++)
            for (int64_t h = 0; h < H; h++) {
                const int64_t at = ((b * T + t) * H + h) * Dh;
                double *g = grad + at;
                const double *x = lin + at;
                if (rope) /* the transpose of a rotation is the rotation back */
                    vka_ref_rope_rotate(&d->rope, -position_of(p, b, t), g);
                if (!norm)
                    continue;
                const double r = rms_inverse(x, Dh, eps);
                double s = 0.0;
                for (int64_t e = 0; e < Dh; e++)
                    s += g[e] * norm[e] * x[e];
                const double c = r * r * r * s / (double)Dh;
                for (int64_t e = 0; e < Dh; e++) {
                    if (dnorm)
                        dnorm[e] += g[e] * x[e] * r;
                    g[e] = r * g[e] * norm[e] - x[e] * c;
                }
            }
}

/* ---- attention on dense double activations */

size_t vka_ref_mha_attention_scratch(const vka_ref_attention_plan *ap)
{
    /* a KV head's keys (Tk x Dk), a row's probabilities, softcap slopes and
     * dropout scales (3 Tk) and its output through the mask (Dv) */
    const size_t tk = ap->dims.kv_len;
    return tk * ap->dims.head_dim + 3 * tk + ap->dims.v_head_dim;
}

typedef struct layout {
    int64_t B, Hq, Hkv, Tq, Tk, Dk, Dv, group;
    int64_t qw, kw, vw, ow; /* row widths of q, k, v and o */
} layout;

static layout layout_of(const vka_ref_attention_plan *ap)
{
    const vka_attention_dims *d = &ap->dims;
    layout l = {.B = d->batch,
                .Hq = d->num_heads,
                .Hkv = d->num_kv_heads,
                .Tq = d->q_len,
                .Tk = d->kv_len,
                .Dk = d->head_dim,
                .Dv = d->v_head_dim};
    l.group = l.Hq / l.Hkv;
    l.qw = l.Hq * l.Dk;
    l.kw = l.Hkv * l.Dk;
    l.vw = l.Hkv * l.Dv;
    l.ow = l.Hq * l.Dv;
    return l;
}

/* KV head g of batch row b's keys, dense Tk x Dk, as the scoring wants them. */
static void gather_keys(const layout *l, const double *k, int64_t b, int64_t g, double *kbuf)
{
    for (int64_t j = 0; j < l->Tk; j++)
        memcpy(kbuf + j * l->Dk, k + (b * l->Tk + j) * l->kw + g * l->Dk,
               (size_t)l->Dk * sizeof *kbuf);
}

void vka_ref_mha_attention_forward(const vka_ref_attention_plan *ap, const double *q,
                                   const double *k, const double *v, double *o, double *scratch)
{
    const layout l = layout_of(ap);
    double *kbuf = scratch, *prob = kbuf + l.Tk * l.Dk;
    for (int64_t b = 0; b < l.B; b++)
        for (int64_t g = 0; g < l.Hkv; g++) {
            gather_keys(&l, k, b, g, kbuf);
            for (int64_t h = g * l.group; h < (g + 1) * l.group; h++)
                for (int64_t i = 0; i < l.Tq; i++) {
                    const double *qrow = q + (b * l.Tq + i) * l.qw + h * l.Dk;
                    double *orow = o + (b * l.Tq + i) * l.ow + h * l.Dv;
                    vka_ref_attention_probs(ap, b, h, i, qrow, kbuf, prob, NULL, NULL);
                    memset(orow, 0, (size_t)l.Dv * sizeof *orow);
                    for (int64_t j = 0; j < l.Tk; j++) {
                        if (prob[j] == 0.0)
                            continue;
                        const double pz = prob[j] * vka_ref_dropout_scale(ap, b, h, i, j);
                        const double *vr = v + (b * l.Tk + j) * l.vw + g * l.Dv;
                        for (int64_t e = 0; e < l.Dv; e++)
                            orow[e] += pz * vr[e];
                    }
                }
        }
}

void vka_ref_mha_attention_backward(const vka_ref_attention_plan *ap, const double *q,
                                    const double *k, const double *v, const double *dout,
                                    double *dq, double *dk, double *dv, double *dsinks,
                                    double *scratch)
{
    const layout l = layout_of(ap);
    double *kbuf = scratch, *prob = kbuf + l.Tk * l.Dk, *dcap = prob + l.Tk, *z = dcap + l.Tk;
    double *ou = z + l.Tk;
    memset(dq, 0, (size_t)(l.B * l.Tq * l.qw) * sizeof *dq);
    memset(dk, 0, (size_t)(l.B * l.Tk * l.kw) * sizeof *dk);
    memset(dv, 0, (size_t)(l.B * l.Tk * l.vw) * sizeof *dv);
    memset(dsinks, 0, (size_t)l.Hq * sizeof *dsinks);
    for (int64_t b = 0; b < l.B; b++)
        for (int64_t g = 0; g < l.Hkv; g++) {
            gather_keys(&l, k, b, g, kbuf);
            for (int64_t h = g * l.group; h < (g + 1) * l.group; h++)
                for (int64_t i = 0; i < l.Tq; i++) {
                    const double *qrow = q + (b * l.Tq + i) * l.qw + h * l.Dk;
                    const double *dorow = dout + (b * l.Tq + i) * l.ow + h * l.Dv;
                    double *dqrow = dq + (b * l.Tq + i) * l.qw + h * l.Dk;
                    double sink_prob = 0.0;
                    double lse =
                        vka_ref_attention_probs(ap, b, h, i, qrow, kbuf, prob, dcap, &sink_prob);
                    if (lse == -INFINITY) /* nothing visible: out was 0 whatever q, k, v */
                        continue;
                    memset(ou, 0, (size_t)l.Dv * sizeof *ou);
                    for (int64_t j = 0; j < l.Tk; j++) {
                        z[j] = vka_ref_dropout_scale(ap, b, h, i, j);
                        if (prob[j] == 0.0)
                            continue;
                        const double *vr = v + (b * l.Tk + j) * l.vw + g * l.Dv;
                        for (int64_t e = 0; e < l.Dv; e++)
                            ou[e] += prob[j] * z[j] * vr[e];
                    }
                    double dr = 0.0;
                    for (int64_t e = 0; e < l.Dv; e++)
                        dr += dorow[e] * ou[e];
                    dsinks[h] -= sink_prob * dr;
                    for (int64_t j = 0; j < l.Tk; j++) {
                        if (prob[j] == 0.0) /* hidden (or underflowed): no gradient */
                            continue;
                        const double pz = prob[j] * z[j];
                        const double *vr = v + (b * l.Tk + j) * l.vw + g * l.Dv;
                        const double *kr = kbuf + j * l.Dk;
                        double *dvr = dv + (b * l.Tk + j) * l.vw + g * l.Dv;
                        double *dkr = dk + (b * l.Tk + j) * l.kw + g * l.Dk;
                        double dp = 0.0;
                        for (int64_t e = 0; e < l.Dv; e++) {
                            dvr[e] += pz * dorow[e];
                            dp += dorow[e] * vr[e];
                        }
                        const double ds = prob[j] * (z[j] * dp - dr);
                        const double dx = ap->scale * dcap[j] * ds; /* by dot(q_i, k_j) */
                        for (int64_t e = 0; e < l.Dk; e++) {
                            dqrow[e] += dx * kr[e];
                            dkr[e] += dx * qrow[e];
                        }
                    }
                }
        }
}
