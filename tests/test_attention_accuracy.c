/* f32 accuracy of vkattn_attention on PyTorch's own SDPA sample input
 * (issue 14, item 4): B 4, H 4, Tq 3, Tk 6, D 8, q/k/v uniform in [-9, 9]
 * and an additive float mask (scores near +-70), measured against an fp64
 * reference as the largest elementwise error |got - exp| / (1 + |exp|) on
 * all four kernel policies. The bar is the same measure of an f32 emulation
 * of torch's math (scores = (q * scale) @ k^T, softmax with max subtraction,
 * @ v, all in f32 without fused multiply-adds), computed here: the GPU must
 * stay within 1.2 times that, or 6e-6. */
#include "test_policy.h"
#include "test_util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

enum { B = 4, H = 4, TQ = 3, TK = 6, D = 8 };
enum { NQ = B * H * TQ * D, NK = B * H * TK * D, NM = B * H * TQ * TK };

typedef struct acc_data {
    float q[NQ], k[NK], v[NK], mask[NM];
    double want[NQ]; /* fp64 reference */
    double emu_err;  /* the f32 emulation's error */
} acc_data;

static double elementwise_error(const float *got, const double *want, size_t n)
{
    double worst = 0.0;
    for (size_t i = 0; i < n; i++) {
        double e = fabs((double)got[i] - want[i]) / (1.0 + fabs(want[i]));
        if (!(e <= worst)) /* NaN wins */
            worst = e;
    }
    return worst;
}

/* Plain fp64 attention, scale 1/sqrt(D). */
static void reference_f64(acc_data *d)
{
    const double scale = 1.0 / sqrt((double)D);
    for (size_t bh = 0; bh < (size_t)B * H; bh++)
        for (size_t i = 0; i < TQ; i++) {
            double s[TK], mx = -INFINITY, sum = 0.0;
            for (size_t j = 0; j < TK; j++) {
                double dot = 0.0;
                for (size_t c = 0; c < D; c++)
                    dot +=
                        (double)d->q[(bh * TQ + i) * D + c] * (double)d->k[(bh * TK + j) * D + c];
                s[j] = dot * scale + (double)d->mask[(bh * TQ + i) * TK + j];
                mx = fmax(mx, s[j]);
            }
            for (size_t j = 0; j < TK; j++) {
                s[j] = exp(s[j] - mx);
                sum += s[j];
            }
            for (size_t c = 0; c < D; c++) {
                double o = 0.0;
                for (size_t j = 0; j < TK; j++)
                    o += s[j] / sum * (double)d->v[(bh * TK + j) * D + c];
                d->want[(bh * TQ + i) * D + c] = o;
            }
        }
}

/* torch's f32 math: (q * scale) @ k^T + mask, softmax(max subtracted), @ v.
 * Products and sums are separate statements, so nothing is contracted into
 * an fma. */
static void emulate_f32(const acc_data *d, float *out)
{
    const float scale = 1.0f / sqrtf((float)D);
    for (size_t bh = 0; bh < (size_t)B * H; bh++)
        for (size_t i = 0; i < TQ; i++) {
            float qs[D], s[TK], mx = -INFINITY, sum = 0.0f;
            for (size_t c = 0; c < D; c++)
                qs[c] = d->q[(bh * TQ + i) * D + c] * scale;
            for (size_t j = 0; j < TK; j++) {
                float dot = 0.0f;
                for (size_t c = 0; c < D; c++) {
                    float p = qs[c] * d->k[(bh * TK + j) * D + c];
                    dot += p;
                }
                s[j] = dot + d->mask[(bh * TQ + i) * TK + j];
                mx = fmaxf(mx, s[j]);
            }
            for (size_t j = 0; j < TK; j++) {
                s[j] = expf(s[j] - mx);
                sum += s[j];
            }
            for (size_t j = 0; j < TK; j++)
                s[j] /= sum;
            for (size_t c = 0; c < D; c++) {
                float o = 0.0f;
                for (size_t j = 0; j < TK; j++) {
                    float p = s[j] * d->v[(bh * TK + j) * D + c];
                    o += p;
                }
                out[(bh * TQ + i) * D + c] = o;
            }
        }
}

static acc_data *make_data(uint64_t seed)
{
    acc_data *d = test_alloc(sizeof *d);
    test_rng rng = test_rng_seed(seed);
    test_fill_uniform(&rng, d->q, NQ, -9.0f, 9.0f);
    test_fill_uniform(&rng, d->k, NK, -9.0f, 9.0f);
    test_fill_uniform(&rng, d->v, NK, -9.0f, 9.0f);
    test_fill_uniform(&rng, d->mask, NM, -1.0f, 1.0f);
    reference_f64(d);
    float emu[NQ];
    emulate_f32(d, emu);
    d->emu_err = elementwise_error(emu, d->want, NQ);
    return d;
}

/* One input on one context: the error, reported and asserted. */
static void run_input(test_gpu *g, uint32_t policy, const acc_data *d, unsigned input)
{
    vkattn_context *ctx = g->ctx;
    int64_t qs[4] = {B, H, TQ, D}, ks[4] = {B, H, TK, D}, ms[4] = {B, H, TQ, TK};
    float got[NQ];
    for (size_t i = 0; i < NQ; i++)
        got[i] = NAN;
    vkattn_buffer *bq = test_buffer_of(ctx, VKATTN_DTYPE_F32, d->q, NQ);
    vkattn_buffer *bk = test_buffer_of(ctx, VKATTN_DTYPE_F32, d->k, NK);
    vkattn_buffer *bv = test_buffer_of(ctx, VKATTN_DTYPE_F32, d->v, NK);
    vkattn_buffer *bm = test_buffer_of(ctx, VKATTN_DTYPE_F32, d->mask, NM);
    vkattn_buffer *bo = test_buffer_of(ctx, VKATTN_DTYPE_F32, got, NQ);
    vkattn_attention_args a = {
        .q = vkattn_tensor_make(bq, 0, VKATTN_DTYPE_F32, 4, qs),
        .k = vkattn_tensor_make(bk, 0, VKATTN_DTYPE_F32, 4, ks),
        .v = vkattn_tensor_make(bv, 0, VKATTN_DTYPE_F32, 4, ks),
        .mask = vkattn_tensor_make(bm, 0, VKATTN_DTYPE_F32, 4, ms),
        .out = vkattn_tensor_make(bo, 0, VKATTN_DTYPE_F32, 4, qs),
    };
    TEST_OK(ctx, vkattn_attention(ctx, &a));
    TEST_OK(ctx, vkattn_buffer_download(bo, 0, got, sizeof got));
    double err = elementwise_error(got, d->want, NQ);
    double bar = fmax(1.2 * d->emu_err, 6e-6);
    printf("[ accuracy ] %s %s input %u: max |got-exp|/(1+|exp|) %.3g (torch's f32 math %.3g)\n",
           g->impl, test_policies[policy].name, input, err, d->emu_err);
    if (!(err <= bar))
        fail_msg("%s input %u: max elementwise error |got-exp|/(1+|exp|) %.3g above %.3g (torch's "
                 "f32 math: %.3g)",
                 test_policies[policy].name, input, err, bar, d->emu_err);
    TEST_DESTROY_BUFFERS(bq, bk, bv, bm, bo);
}

/* INPUTS inputs (seeds): which one is worst, for the device or for torch's
 * f32 math, is down to the luck of the roundings, and one input may pass
 * by luck (the log2-domain subgroup kernel passed the first and failed 3
 * of these 8). */
enum { INPUTS = 8 };

static void run_policy(test_gpu *g, uint32_t policy, const void *arg)
{
    acc_data *const *data = arg;
    for (unsigned i = 0; i < INPUTS; i++)
        run_input(g, policy, data[i], i);
}

static void test_torch_sample_f32(void **state)
{
    (void)state;
    acc_data *data[INPUTS];
    for (unsigned i = 0; i < INPUTS; i++)
        data[i] = make_data(20241114u + i);
    test_for_each_policy(0, run_policy, data);
    for (unsigned i = 0; i < INPUTS; i++)
        free(data[i]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_torch_sample_f32),
    };
    return cmocka_run_group_tests_name("attention_accuracy", tests, NULL, NULL);
}
