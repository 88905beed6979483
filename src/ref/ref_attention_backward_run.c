/* The computation of vkattn_ref_attention_backward, in double. Each query
 * row's probabilities are recomputed by the forward's own scoring
 * (vka_ref_attention_probs), then with Z the dropout scale and g the head
 * mask's gate (see "attention backward" in vkattn.h):
 *     dO' = g dO,  O_u = sum_j P Z v_j,  Dr = dot(dO', O_u)
 *     dv_j += P Z dO',  dS = P (Z dot(dO', v_j) - Dr)
 *     dq_i += scale c dS k_j,  dk_j += scale c dS q_i   (c: softcap slope)
 *     dsinks_h -= P_sink Dr.
 * dk and dv of a KV head sum over its group's query heads in double and are
 * written once; a row with no visible key adds nothing. */
#include "ref/ref.h"

#include <math.h>
#include <string.h>

/* Copies n elements at stride `stride` from element `base` to dst, in double. */
static void load_row(const vkattn_host_tensor *t, int64_t base, int64_t n, int64_t stride,
                     double *dst)
{
    for (int64_t e = 0; e < n; e++)
        dst[e] = vka_host_load(t, base + e * stride);
}

static void store_row(const vkattn_host_tensor *t, int64_t base, int64_t n, int64_t stride,
                      const double *src)
{
    for (int64_t e = 0; e < n; e++)
        vka_host_store(t, base + e * stride, src[e]);
}

/* Element offset of row (b, h, i) of a resolved rank-4 tensor. */
static int64_t row_at(const vkattn_host_tensor *t, int64_t b, int64_t h, int64_t i)
{
    return b * t->strides[0] + h * t->strides[1] + i * t->strides[2];
}

typedef struct row_scratch {
    const double *kbuf, *vbuf;         /* Tk x Dk, Tk x Dv: the KV head */
    double *dkbuf, *dvbuf;             /* their gradients, summed over the group */
    double *qrow, *dorow, *dqrow, *ou; /* Dk, Dv, Dk, Dv */
    double *prob, *dcap, *z;           /* Tk each */
} row_scratch;

/* Query row i of head h in batch row b: adds its share to dK and dV, writes
 * its dq row, and returns P_sink * Dr (0 without sinks or visible keys). */
static double backward_row(const vka_ref_backward_plan *bp, int64_t b, int64_t h, int64_t i,
                           double gate, const row_scratch *s)
{
    const vka_ref_attention_plan *p = &bp->fwd;
    const int64_t Tk = p->dims.kv_len, Dk = p->dims.head_dim, Dv = p->dims.v_head_dim;
    const vkattn_host_tensor *q = &p->q, *dout = &bp->dout, *dq = &bp->dq;
    load_row(q, row_at(q, b, h, i), Dk, q->strides[3], s->qrow);
    memset(s->dqrow, 0, (size_t)Dk * sizeof *s->dqrow);
    double sink_prob = 0.0;
    double lse =
        vka_ref_attention_probs(p, b, h, i, s->qrow, s->kbuf, s->prob, s->dcap, &sink_prob);
    if (lse == -INFINITY) { /* nothing visible: out was 0 whatever q, k, v */
        store_row(dq, row_at(dq, b, h, i), Dk, dq->strides[3], s->dqrow);
        return 0.0;
    }
    load_row(dout, row_at(dout, b, h, i), Dv, dout->strides[3], s->dorow);
    for (int64_t e = 0; e < Dv; e++)
        s->dorow[e] *= gate;
    /* The ungated output through the dropout mask, and Dr. */
    memset(s->ou, 0, (size_t)Dv * sizeof *s->ou);
    for (int64_t j = 0; j < Tk; j++) {
        s->z[j] = vka_ref_dropout_scale(p, b, h, i, j);
        if (s->prob[j] == 0.0)
            continue;
        const double pz = s->prob[j] * s->z[j];
        const double *vr = s->vbuf + j * Dv;
        for (int64_t e = 0; e < Dv; e++)
            s->ou[e] += pz * vr[e];
    }
    double dr = 0.0;
    for (int64_t e = 0; e < Dv; e++)
        dr += s->dorow[e] * s->ou[e];
    for (int64_t j = 0; j < Tk; j++) {
        if (s->prob[j] == 0.0) /* hidden (or underflowed): no gradient */
            continue;
        const double pz = s->prob[j] * s->z[j];
        const double *vr = s->vbuf + j * Dv, *kr = s->kbuf + j * Dk;
        double *dvr = s->dvbuf + j * Dv, *dkr = s->dkbuf + j * Dk;
        double dp = 0.0;
        for (int64_t e = 0; e < Dv; e++) {
            dvr[e] += pz * s->dorow[e];
            dp += s->dorow[e] * vr[e];
        }
        const double ds = s->prob[j] * (s->z[j] * dp - dr);
        const double dx = p->scale * s->dcap[j] * ds; /* d loss / d dot(q_i, k_j) */
        for (int64_t e = 0; e < Dk; e++) {
            s->dqrow[e] += dx * kr[e];
            dkr[e] += dx * s->qrow[e];
        }
    }
    store_row(dq, row_at(dq, b, h, i), Dk, dq->strides[3], s->dqrow);
    return sink_prob * dr;
}

void vka_ref_attention_backward_run(const vka_ref_backward_plan *bp, double *scratch)
{
    const vka_ref_attention_plan *p = &bp->fwd;
    const vka_attention_dims *dm = &p->dims;
    const int64_t B = dm->batch, Hq = dm->num_heads, Hkv = dm->num_kv_heads;
    const int64_t Tq = dm->q_len, Tk = dm->kv_len, Dk = dm->head_dim, Dv = dm->v_head_dim;
    const int64_t group = Hq / Hkv;
    const vkattn_host_tensor *k = &p->k, *v = &p->v, *dk = &bp->dk, *dv = &bp->dv;

    double *kbuf = scratch, *vbuf = kbuf + Tk * Dk;
    row_scratch s = {.kbuf = kbuf, .vbuf = vbuf};
    s.dkbuf = vbuf + Tk * Dv;
    s.dvbuf = s.dkbuf + Tk * Dk;
    s.qrow = s.dvbuf + Tk * Dv;
    s.dorow = s.qrow + Dk;
    s.dqrow = s.dorow + Dv;
    s.ou = s.dqrow + Dk;
    s.prob = s.ou + Dv;
    s.dcap = s.prob + Tk;
    s.z = s.dcap + Tk;
    double *dsinks = s.z + Tk; /* [Hq] */
    memset(dsinks, 0, (size_t)Hq * sizeof *dsinks);

    for (int64_t b = 0; b < B; b++)
        for (int64_t g = 0; g < Hkv; g++) {
            for (int64_t j = 0; j < Tk; j++) {
                load_row(k, row_at(k, b, g, j), Dk, k->strides[3], kbuf + j * Dk);
                load_row(v, row_at(v, b, g, j), Dv, v->strides[3], vbuf + j * Dv);
            }
            memset(s.dkbuf, 0, (size_t)(Tk * (Dk + Dv)) * sizeof *s.dkbuf); /* dK, dV */
            for (int64_t h = g * group; h < (g + 1) * group; h++) {
                const double gate = vka_ref_head_gate(p, b, h);
                for (int64_t i = 0; i < Tq; i++)
                    dsinks[h] -= backward_row(bp, b, h, i, gate, &s);
            }
            for (int64_t j = 0; j < Tk; j++) {
                store_row(dk, row_at(dk, b, g, j), Dk, dk->strides[3], s.dkbuf + j * Dk);
                store_row(dv, row_at(dv, b, g, j), Dv, dv->strides[3], s.dvbuf + j * Dv);
            }
        }
    if (bp->dsinks.data)
        for (int64_t h = 0; h < Hq; h++)
            vka_host_store(&bp->dsinks, h * bp->dsinks.strides[0], dsinks[h]);
}
