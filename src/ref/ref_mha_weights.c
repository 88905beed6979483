/* The MHA reference's weights as the device keeps them: converted from the
 * host's dtype to desc.weight_dtype (rounded to f16 / bf16 to nearest even,
 * or quantized to q8_0 as vkattn_ref_quantize does, biases then f32), so
 * the reference multiplies by the very values the layer's kernels read. */
#include "ref/ref.h"
#include "spec/dtype.h"
#include "spec/error_text.h"

#include <stdlib.h>
#include <string.h>

/* n values of `from` at src as `to` (f32, f16, bf16 or q8_0) in a new
 * array at *out; `name` names the array in messages. */
static vkattn_result convert(const void *src, vkattn_dtype from, vkattn_dtype to, uint64_t n,
                             const char *name, void **out, char *error, size_t error_size)
{
    *out = NULL;
    float *wide = malloc(n * sizeof *wide + 1);
    void *dst = malloc(vkattn_dtype_row_bytes(to, n) + 1);
    if (!wide || !dst) {
        free(wide);
        free(dst);
        vka_error_format(error, error_size, "out of host memory converting weights->%s", name);
        return VKATTN_ERROR_OUT_OF_HOST_MEMORY;
    }
    for (uint64_t i = 0; i < n; i++)
        wide[i] = vka_widen(src, from, i);
    vkattn_result r = VKATTN_SUCCESS;
    if (to == VKATTN_DTYPE_Q8_0) {
        char why[512];
        r = vkattn_ref_quantize(to, wide, n, dst, why, sizeof why);
        if (r != VKATTN_SUCCESS)
            vka_error_format(error, error_size, "weights->%s to q8_0: %s", name, why);
    } else {
        for (uint64_t i = 0; i < n; i++)
            if (to == VKATTN_DTYPE_F32)
                ((float *)dst)[i] = wide[i];
            else
                ((uint16_t *)dst)[i] = to == VKATTN_DTYPE_F16 ? vkattn_f32_to_f16(wide[i])
                                                              : vkattn_f32_to_bf16(wide[i]);
    }
    free(wide);
    if (r != VKATTN_SUCCESS)
        free(dst);
    else
        *out = dst;
    return r;
}

vkattn_result vka_ref_mha_store_weights(const vkattn_mha_desc *d, vka_mha_weight_views *wv,
                                        void *owned[8], char *error, size_t error_size)
{
    memset(owned, 0, 8 * sizeof *owned);
    vkattn_dtype to = d->weight_dtype;
    /* an f32 layer reads f16 / bf16 host values exactly; q8_0 given is kept */
    if (to == wv->dtype || to == VKATTN_DTYPE_F32)
        return VKATTN_SUCCESS;
    vkattn_dtype bias_to = to == VKATTN_DTYPE_Q8_0 ? VKATTN_DTYPE_F32 : to;
    uint64_t qw = vka_mha_q_width(d), kw = vka_mha_k_width(d), vw = vka_mha_v_width(d),
             ow = vka_mha_o_width(d);
    const void **slot[8] = {&wv->wq, &wv->wk, &wv->wv, &wv->wo, &wv->bq, &wv->bk, &wv->bv, &wv->bo};
    const uint64_t n[8] = {qw * d->embed_dim,
                           kw * d->kv_dim,
                           vw * d->value_dim,
                           (uint64_t)d->embed_dim * ow,
                           qw,
                           kw,
                           vw,
                           d->embed_dim};
    static const char *const names[8] = {"wq", "wk", "wv", "wo", "bq", "bk", "bv", "bo"};
    for (int i = 0; i < 8; i++) {
        if (!*slot[i])
            continue;
        vkattn_result r = convert(*slot[i], wv->dtype, i < 4 ? to : bias_to, n[i], names[i],
                                  &owned[i], error, error_size);
        if (r != VKATTN_SUCCESS) {
            for (int j = 0; j < 8; j++)
                free(owned[j]);
            memset(owned, 0, 8 * sizeof *owned);
            return r;
        }
        *slot[i] = owned[i];
    }
    wv->dtype = to;
    return VKATTN_SUCCESS;
}
