/* vkattn-quant-accuracy: what each KV cache type costs in accuracy at the
 * bench's decode shape (bench_cases.c's attn_decode_gqa_d128_kv4096: 32
 * query heads over 8 KV heads of 128, 4096 keys, one query row), on the CPU
 * reference alone (the kernels equal it within the activations' tolerance:
 * test_kv_quant, test_kv_quant_formats): K and V quantized and dequantized
 * by vkattn_ref_quantize / _dequantize (16-bit types: rounded to nearest
 * even), attention against the same K and V unquantized. One JSON line per
 * cache type and input distribution: max and mean |error|, and max |out|.
 *   vkattn-quant-accuracy [--keys N] [--seed S]
 * Public header only, like the bench. */
#include "vkattn.h"
#include "vkattn/reference.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { HQ = 32, HKV = 8, D = 128 };

static uint64_t next(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

static float uniform(uint64_t *s) { return (float)((next(s) >> 11) * 0x1.0p-53) * 2.0f - 1.0f; }

static float normal(uint64_t *s)
{
    double u = ((next(s) >> 11) + 1) * 0x1.0p-53, v = (next(s) >> 11) * 0x1.0p-53;
    return (float)(sqrt(-2.0 * log(u)) * cos(6.283185307179586 * v));
}

/* x as the cache of dtype `dt` holds it (n values, whole blocks). */
static int store_as(vkattn_dtype dt, const float *x, float *y, size_t n, void *blocks)
{
    char err[512] = "";
    if (dt == VKATTN_DTYPE_F32) {
        memcpy(y, x, n * sizeof *x);
        return 0;
    }
    if (dt == VKATTN_DTYPE_F16 || dt == VKATTN_DTYPE_BF16) {
        for (size_t i = 0; i < n; i++)
            y[i] = dt == VKATTN_DTYPE_F16 ? vkattn_f16_to_f32(vkattn_f32_to_f16(x[i]))
                                          : vkattn_bf16_to_f32(vkattn_f32_to_bf16(x[i]));
        return 0;
    }
    if (vkattn_ref_quantize(dt, x, n, blocks, err, sizeof err) != VKATTN_SUCCESS ||
        vkattn_ref_dequantize(dt, blocks, n, y, err, sizeof err) != VKATTN_SUCCESS) {
        fprintf(stderr, "vkattn-quant-accuracy: %s\n", err);
        return 1;
    }
    return 0;
}

static int attend(const float *q, const float *k, const float *v, float *out, uint32_t keys)
{
    int64_t qs[4] = {1, HQ, 1, D}, ks[4] = {1, HKV, keys, D};
    vkattn_ref_attention_args a = {.q = vkattn_host_tensor_make((void *)q, VKATTN_DTYPE_F32, 4, qs),
                                   .k = vkattn_host_tensor_make((void *)k, VKATTN_DTYPE_F32, 4, ks),
                                   .v = vkattn_host_tensor_make((void *)v, VKATTN_DTYPE_F32, 4, ks),
                                   .out = vkattn_host_tensor_make(out, VKATTN_DTYPE_F32, 4, qs)};
    char err[512] = "";
    if (vkattn_ref_attention(&a, err, sizeof err) != VKATTN_SUCCESS) {
        fprintf(stderr, "vkattn-quant-accuracy: %s\n", err);
        return 1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    uint32_t keys = 4096;
    uint64_t seed = 29;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--keys") && i + 1 < argc)
            keys = (uint32_t)strtoul(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--seed") && i + 1 < argc)
            seed = strtoull(argv[++i], NULL, 10);
        else {
            fprintf(stderr, "usage: vkattn-quant-accuracy [--keys N] [--seed S]\n");
            return 2;
        }
    }
    if (!keys || keys > 1u << 20 || !seed) {
        fprintf(stderr, "vkattn-quant-accuracy: --keys must be 1 to 1048576, --seed nonzero\n");
        return 2;
    }
    const vkattn_dtype types[] = {VKATTN_DTYPE_F16,  VKATTN_DTYPE_BF16,  VKATTN_DTYPE_Q8_0,
                                  VKATTN_DTYPE_Q5_1, VKATTN_DTYPE_Q5_0,  VKATTN_DTYPE_Q4_1,
                                  VKATTN_DTYPE_Q4_0, VKATTN_DTYPE_IQ4_NL};
    const size_t nkv = (size_t)HKV * keys * D, nq = (size_t)HQ * D;
    float *k = malloc(nkv * sizeof *k), *v = malloc(nkv * sizeof *v),
          *kq = malloc(nkv * sizeof *kq), *vq = malloc(nkv * sizeof *vq), q[HQ * D], exact[HQ * D],
          got[HQ * D];
    void *blocks = malloc(nkv / 32 * 34);
    int rc = !(k && v && kq && vq && blocks);
    for (int dist = 0; dist < 2 && !rc; dist++) {
        uint64_t s = seed;
        float (*draw)(uint64_t *) = dist ? normal : uniform;
        for (size_t i = 0; i < nkv; i++) {
            k[i] = draw(&s);
            v[i] = draw(&s);
        }
        for (size_t i = 0; i < nq; i++)
            q[i] = draw(&s);
        rc = attend(q, k, v, exact, keys);
        double top = 0;
        for (size_t i = 0; i < nq; i++)
            top = fmax(top, fabs(exact[i]));
        for (size_t t = 0; t < sizeof types / sizeof types[0] && !rc; t++) {
            rc = store_as(types[t], k, kq, nkv, blocks) || store_as(types[t], v, vq, nkv, blocks) ||
                 attend(q, kq, vq, got, keys);
            double worst = 0, sum = 0;
            for (size_t i = 0; i < nq && !rc; i++) {
                double e = fabs((double)got[i] - exact[i]);
                worst = fmax(worst, e);
                sum += e;
            }
            if (!rc)
                printf("{\"cache\": \"%s\", \"inputs\": \"%s\", \"heads\": \"%d/%d\", \"d\": %d, "
                       "\"keys\": %u, \"max_abs_error\": %.3g, \"mean_abs_error\": %.3g, "
                       "\"max_abs_out\": %.4g}\n",
                       vkattn_dtype_name(types[t]), dist ? "normal" : "uniform", HQ, HKV, D, keys,
                       worst, sum / (double)nq, top);
        }
    }
    free(k);
    free(v);
    free(kq);
    free(vq);
    free(blocks);
    return rc;
}
