/* The reference of torch's add_bias_kv and add_zero_attn: the attention
 * over the caller's keys (its output and LSE) widened by the appended rows,
 * each visible to every query. In double: with s_b the bias row's score
 * (softcapped like any other) and the zero row's score 0,
 *     out = (e^L o + e^s_b g bv) / (e^L + e^s_b + e^0)
 * where L is the main pass's LSE and g the head mask's factor (o is gated
 * already), every exponent taken relative to the largest; the weights of
 * the caller's keys rescaled by e^L over that denominator, the rows' own
 * g e^s over it. */
#include "ref/ref.h"

#include <math.h>

/* A value as the layer's dtype keeps it (nearest even). */
static double stored(vkattn_dtype dtype, float x)
{
    if (dtype == VKATTN_DTYPE_F16)
        return vkattn_f16_to_f32(vkattn_f32_to_f16(x));
    if (dtype == VKATTN_DTYPE_BF16)
        return vkattn_bf16_to_f32(vkattn_f32_to_bf16(x));
    return x;
}

static double gate_of(const vkattn_host_tensor *g, int64_t b, int64_t h)
{
    if (!g->data)
        return 1.0;
    if (g->rank == 1)
        return vka_host_load(g, h * g->strides[0]);
    int64_t row = g->shape[0] == 1 ? 0 : b;
    return vka_host_load(g, row * g->strides[0] + h * g->strides[1]);
}

/* Row (b, h, i)'s weights: the caller's keys' scaled by `main_share`, then
 * the appended rows' (bias, zero: those the layer has). Rank 3 adds each
 * head's share (1 / Hq) to a row zeroed at head 0. */
static void store_weights(const vkattn_mha_desc *d, const vka_ref_appended_rows *rows, int64_t b,
                          int64_t h, int64_t i, double main_share, const double appended[2])
{
    const vkattn_host_tensor *w = rows->weights;
    const int64_t Hq = d->num_heads, Tk = rows->kv_len;
    const bool per_head = w->rank == 4;
    const int64_t *st = w->strides;
    const int64_t row = per_head ? b * st[0] + h * st[1] + i * st[2] : b * st[0] + i * st[1];
    const int64_t sk = st[w->rank - 1];
    const double share = per_head ? 1.0 : 1.0 / (double)Hq;
    const float *p = rows->p_main + ((b * Hq + h) * rows->q_len + i) * Tk;
    int64_t j = 0;
    double values[2];
    int n = 0;
    if (d->add_bias_kv)
        values[n++] = appended[0];
    if (d->add_zero_attn)
        values[n++] = appended[1];
    for (; j < Tk + n; j++) {
        double v = j < Tk ? p[j] * main_share : values[j - Tk];
        float *at = (float *)w->data + row + j * sk;
        *at = (float)(per_head || h == 0 ? v * share : *at + v * share);
    }
}

void vka_ref_mha_appended(const vkattn_mha_desc *d, const vka_ref_appended_rows *rows)
{
    const int64_t B = rows->batch, Tq = rows->q_len, Hq = d->num_heads;
    const int64_t Dk = d->head_dim, Dv = d->v_head_dim, group = Hq / d->num_kv_heads;
    for (int64_t b = 0; b < B; b++)
        for (int64_t i = 0; i < Tq; i++)
            for (int64_t h = 0; h < Hq; h++) {
                const float *q = rows->q + ((b * Tq + i) * Hq + h) * Dk;
                float *o = rows->o + ((b * Tq + i) * Hq + h) * Dv;
                const int64_t kv = h / group;
                double lse = rows->lse[(b * Hq + h) * Tq + i];
                double s_bias = -INFINITY;
                if (d->add_bias_kv) {
                    double dot = 0.0;
                    for (int64_t e = 0; e < Dk; e++)
                        dot += (double)q[e] * stored(d->dtype, rows->bias_k[kv * Dk + e]);
                    s_bias = d->scale * dot;
                    if (d->softcap != 0.0f)
                        s_bias = d->softcap * tanh(s_bias / d->softcap);
                }
                double s_zero = d->add_zero_attn ? 0.0 : -INFINITY;
                double top = fmax(lse, fmax(s_bias, s_zero)); /* finite: a row is there */
                double w_main = exp(lse - top), w_bias = exp(s_bias - top);
                double denom = w_main + w_bias + exp(s_zero - top);
                double g = gate_of(rows->head_mask, b, h);
                for (int64_t e = 0; e < Dv; e++) {
                    double bv = d->add_bias_kv ? stored(d->dtype, rows->bias_v[kv * Dv + e]) : 0.0;
                    o[e] = (float)((w_main * o[e] + w_bias * g * bv) / denom);
                }
                if (rows->weights->data) {
                    const double appended[2] = {g * w_bias / denom, g * exp(s_zero - top) / denom};
                    store_weights(d, rows, b, h, i, w_main / denom, appended);
                }
            }
}
