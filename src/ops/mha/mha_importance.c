/* vkattn_mha_head_importance: each head's share of the layer's output, as
 * the change a head mask that removes it alone makes - Hq + 1 forwards of
 * the caller's inputs, their outputs compared on the host. */
#include "ops/mha/mha_internal.h"
#include "spec/dtype.h"

#include <math.h>
#include <string.h>

/* y's elements as floats: its buffer's span downloaded once into `raw`
 * (bytes), read through its strides into `out` [B * T * Dm]. */
static vkattn_result read_output(const vkattn_tensor *y, void *raw, uint64_t span, float *out)
{
    VKA_TRY(vkattn_buffer_download(y->buffer, y->offset, raw, span));
    const int64_t *s = y->strides;
    uint64_t i = 0;
    for (int64_t b = 0; b < y->shape[0]; b++)
        for (int64_t t = 0; t < y->shape[1]; t++)
            for (int64_t e = 0; e < y->shape[2]; e++)
                out[i++] = vka_widen(raw, y->dtype, (uint64_t)(b * s[0] + t * s[1] + e * s[2]));
    return VKATTN_SUCCESS;
}

vkattn_result vkattn_mha_head_importance(vkattn_mha *m, const vkattn_mha_forward_args *args,
                                         float *importance)
{
    if (!m)
        return VKATTN_ERROR_INVALID_ARGUMENT;
    vkattn_context *ctx = m->ctx;
    if (!args || !importance)
        return vka_fail(ctx, VKATTN_ERROR_INVALID_ARGUMENT,
                        "vkattn_mha_head_importance: %s is NULL", !args ? "args" : "importance");
    if (args->head_mask.buffer)
        return vka_fail(ctx, VKATTN_ERROR_INVALID_ARGUMENT,
                        "args->head_mask is given: the importance masks each head itself");
    /* one checked forward first (it names every bad argument), unmasked */
    VKA_TRY(vkattn_mha_forward(m, args));
    vkattn_tensor y = args->y;
    if (y.strides[0] == 0 && y.strides[1] == 0 && y.strides[2] == 0)
        y = vkattn_tensor_make(y.buffer, y.offset, y.dtype, 3, y.shape);
    const uint32_t hq = m->d.num_heads;
    const uint64_t n = (uint64_t)y.shape[0] * y.shape[1] * y.shape[2];
    const uint64_t span =
        ((uint64_t)(y.shape[0] - 1) * y.strides[0] + (uint64_t)(y.shape[1] - 1) * y.strides[1] +
         (uint64_t)(y.shape[2] - 1) * y.strides[2] + 1) *
        vkattn_dtype_size(y.dtype);
    float *full = vka_alloc(ctx, n * sizeof *full), *masked = vka_alloc(ctx, n * sizeof *masked);
    float *gate = vka_alloc(ctx, hq * sizeof *gate);
    void *raw = vka_alloc(ctx, span);
    vkattn_buffer *gate_buf = NULL;
    vkattn_result r = full && masked && gate && raw
                          ? VKATTN_SUCCESS
                          : vka_fail(ctx, VKATTN_ERROR_OUT_OF_HOST_MEMORY, "out of host memory");
    if (r == VKATTN_SUCCESS)
        r = read_output(&y, raw, span, full);
    if (r == VKATTN_SUCCESS) {
        vkattn_buffer_desc bd = {.size = 4ull * hq};
        r = vkattn_buffer_create(ctx, &bd, &gate_buf);
    }
    vkattn_mha_forward_args a = *args;
    int64_t heads[1] = {hq};
    a.head_mask = vkattn_tensor_make(gate_buf, 0, VKATTN_DTYPE_F32, 1, heads);
    for (uint32_t h = 0; r == VKATTN_SUCCESS && h < hq; h++) {
        for (uint32_t k = 0; k < hq; k++)
            gate[k] = k == h ? 0.0f : 1.0f;
        r = vkattn_buffer_upload(gate_buf, 0, gate, 4ull * hq);
        if (r == VKATTN_SUCCESS)
            r = vkattn_mha_forward(m, &a);
        if (r == VKATTN_SUCCESS)
            r = read_output(&y, raw, span, masked);
        if (r == VKATTN_SUCCESS) {
            double ss = 0.0;
            for (uint64_t i = 0; i < n; i++) {
                double diff = (double)full[i] - masked[i];
                ss += diff * diff;
            }
            importance[h] = (float)sqrt(ss / (double)n);
        }
    }
    if (r == VKATTN_SUCCESS) /* y as the caller expects it: unmasked */
        r = vkattn_mha_forward(m, args);
    vkattn_buffer_destroy(gate_buf);
    vka_free(ctx, full);
    vka_free(ctx, masked);
    vka_free(ctx, gate);
    vka_free(ctx, raw);
    return r;
}
