/* The training cases of vkattn-bench: a backward beside its forward on the
 * same inputs (vkattn_bench.c times the two apart and prints the ratio of
 * their medians as "bwd_over_fwd").
 *
 * FLOPs count the backward's useful products only, as FlashAttention-2
 * counts them: per visible (query, key) pair and head 2 (3 Dk + 2 Dv) -
 * the scores recomputed (Dk), dP = dout v^T (Dv), dv += P^T dout (Dv),
 * dq += dS k (Dk), dk += dS^T q (Dk) - 2.5x the forward's 2 (Dk + Dv) when
 * Dk = Dv. A layer adds the projections' gradients, twice each forward
 * GEMM (dX = dY W and dW = dY^T X); the forward the layer's backward
 * recomputes inside it (projections, attention) is not counted as work.
 * Bytes: what the backward must read and write at least once. */
#include "bench_runner.h"

#include "bench_common.h"

static void prepare_attention(bench_runner *r)
{
    const bench_case *c = r->c;
    vkattn_attention_args *a = &r->attention;
    uint32_t dv = c->dv ? c->dv : c->d;
    int64_t ls[3] = {c->b, c->hq, c->tq}, os[4] = {c->b, c->hq, c->tq, dv};
    a->lse = bench_random_tensor(r, VKATTN_DTYPE_F32, 3, ls, 20); /* what the backward reads */
    vkattn_attention_backward_args *g = &r->attention_backward;
    g->forward = *a;
    g->dout = bench_random_tensor(r, c->act, 4, os, 21);
    /* the gradients in the inputs' dtype (torch's autograd gives them so) */
    g->dq = bench_random_tensor(r, c->act, 4, a->q.shape, 22);
    g->dk = bench_random_tensor(r, c->act, 4, a->k.shape, 23);
    g->dv = bench_random_tensor(r, c->act, 4, a->v.shape, 24);
    double pairs = bench_visible_pairs(c->tq, c->tk, c->causal, c->window);
    double as = (double)vkattn_dtype_size(c->act);
    r->forward_flops = r->flops;
    r->flops = 2.0 * c->b * c->hq * (3.0 * c->d + 2.0 * dv) * pairs;
    /* q, k, v, out (the forward's bytes), dout, lse, then dq, dk, dv */
    r->bytes +=
        (double)c->b * c->hq * c->tq * (dv * as + 4.0) +
        ((double)c->b * c->hq * c->tq * c->d + (double)c->b * c->hkv * c->tk * (c->d + dv)) * as;
}

static void prepare_layer(bench_runner *r)
{
    const bench_case *c = r->c;
    const vkattn_dtype f32 = VKATTN_DTYPE_F32;
    uint32_t dm = c->d, dh = dm / c->hq;
    int64_t xs[3] = {c->b, c->tq, dm};
    int64_t wq[2] = {(int64_t)c->hq * dh, dm}, wkv[2] = {(int64_t)c->hkv * dh, dm};
    int64_t wo[2] = {dm, (int64_t)c->hq * dh};
    BENCH_CHECK(r->ctx, vkattn_mha_reserve_backward(r->layer, c->b, c->tq, c->tk),
                "reserving the backward's scratch");
    vkattn_mha_backward_args *g = &r->layer_backward;
    g->forward = r->forward;
    g->dy = bench_random_tensor(r, c->act, 3, xs, 21);
    g->dx = bench_random_tensor(r, f32, 3, xs, 22);
    g->grads.wq = bench_random_tensor(r, f32, 2, wq, 23);
    g->grads.wk = bench_random_tensor(r, f32, 2, wkv, 24);
    g->grads.wv = bench_random_tensor(r, f32, 2, wkv, 25);
    g->grads.wo = bench_random_tensor(r, f32, 2, wo, 26);
    if (c->bias) {
        g->grads.bq = bench_random_tensor(r, f32, 1, wq, 27);
        g->grads.bk = bench_random_tensor(r, f32, 1, wkv, 28);
        g->grads.bv = bench_random_tensor(r, f32, 1, wkv, 29);
        g->grads.bo = bench_random_tensor(r, f32, 1, wo, 30);
    }
    double weights = (double)(c->hq + 2 * c->hkv) * dh * dm + (double)dm * c->hq * dh;
    double biases = c->bias ? (double)(c->hq + 2 * c->hkv) * dh + dm : 0;
    double tokens = (double)c->b * c->tq;
    double pairs = bench_visible_pairs(c->tq, c->tk, c->causal, 0);
    r->forward_flops = r->flops;
    r->flops = 2.0 * 2.0 * tokens * weights + 2.0 * c->b * c->hq * 5.0 * dh * pairs;
    /* weights in their dtype, x and dy in the activations', then dx and
     * the weights' and biases' gradients in f32 */
    r->bytes = (double)vkattn_dtype_row_bytes(c->data, (uint64_t)weights) +
               2.0 * tokens * dm * (double)vkattn_dtype_size(c->act) +
               4.0 * (tokens * dm + weights + biases);
}

void bench_backward_prepare(bench_runner *r)
{
    if (r->c->kind == BENCH_LAYER_BWD)
        prepare_layer(r);
    else
        prepare_attention(r);
}

vkattn_result bench_backward_record(bench_runner *r, VkCommandBuffer cmd)
{
    if (r->c->kind == BENCH_LAYER_BWD)
        return vkattn_cmd_mha_backward(r->layer, cmd, &r->layer_backward);
    return vkattn_cmd_attention_backward(r->ctx, cmd, &r->attention_backward);
}
