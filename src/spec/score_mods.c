/* Score modifier checks and ALiBi slopes (see score_mods.h). */
#include "spec/score_mods.h"

#include "spec/dtype.h"
#include "spec/error_text.h"

#include <math.h>

/* An optional f32 tensor of `rank` with the given dims, named prefix+name. */
static vkattn_result check_tensor(const vka_shape_view *t, const char *prefix, const char *name,
                                  uint32_t rank, const uint32_t *dims, const char *layout,
                                  char *error, size_t error_size)
{
    if (!t->present)
        return VKATTN_SUCCESS;
    if (t->dtype != VKATTN_DTYPE_F32) {
        char b[VKA_DTYPE_TEXT];
        vka_error_format(error, error_size, "%s%s.dtype is %s: it must be f32 (%s)", prefix, name,
                         vka_dtype_text(t->dtype, b), layout);
        return VKATTN_ERROR_UNSUPPORTED_DTYPE;
    }
    if (t->rank != rank) {
        vka_error_format(error, error_size, "%s%s.rank is %u: it must be %s", prefix, name, t->rank,
                         layout);
        return VKATTN_ERROR_INVALID_ARGUMENT;
    }
    for (uint32_t i = 0; i < rank; i++)
        if (t->shape[i] != (int64_t)dims[i]) {
            vka_error_format(error, error_size, "%s%s.shape[%u] is %lld: it must be %s", prefix,
                             name, i, (long long)t->shape[i], layout);
            return VKATTN_ERROR_SHAPE_MISMATCH;
        }
    return VKATTN_SUCCESS;
}

vkattn_result vka_score_mods_check(const vka_score_mods_args *in, const vka_attention_dims *d,
                                   const char *prefix, bool kv_path, vka_score_mods *out,
                                   char *error, size_t error_size)
{
    const char *p = prefix ? prefix : "";
    vka_score_mods m = {0};
    if (in->causal_align != VKATTN_CAUSAL_BOTTOM_RIGHT &&
        in->causal_align != VKATTN_CAUSAL_TOP_LEFT) {
        vka_error_format(error, error_size,
                         "%scausal_align is %d: VKATTN_CAUSAL_BOTTOM_RIGHT (0) or "
                         "VKATTN_CAUSAL_TOP_LEFT (1)",
                         p, (int)in->causal_align);
        return VKATTN_ERROR_INVALID_ARGUMENT;
    }
    if (kv_path && in->causal_align == VKATTN_CAUSAL_TOP_LEFT) {
        vka_error_format(error, error_size,
                         "%scausal_align is VKATTN_CAUSAL_TOP_LEFT, which has no meaning over a "
                         "KV cache: its queries are the newest tokens (bottom-right)",
                         p);
        return VKATTN_ERROR_INVALID_ARGUMENT;
    }
    m.top_left = in->causal_align == VKATTN_CAUSAL_TOP_LEFT;
    m.window = in->window;
    if (!isfinite(in->softcap) || in->softcap < 0.0f) {
        vka_error_format(error, error_size, "%ssoftcap is %g: it must be 0 (none) or finite > 0", p,
                         (double)in->softcap);
        return VKATTN_ERROR_INVALID_ARGUMENT;
    }
    m.softcap = in->softcap;
    if (!isfinite(in->alibi_max_bias) || in->alibi_max_bias < 0.0f) {
        vka_error_format(error, error_size,
                         "%salibi_max_bias is %g: it must be 0 (none) or finite > 0", p,
                         (double)in->alibi_max_bias);
        return VKATTN_ERROR_INVALID_ARGUMENT;
    }
    if (in->alibi_slopes.present && in->alibi_max_bias > 0.0f) {
        vka_error_format(error, error_size,
                         "%salibi_slopes and %salibi_max_bias %g are both given: give one", p, p,
                         (double)in->alibi_max_bias);
        return VKATTN_ERROR_INVALID_ARGUMENT;
    }
    const uint32_t heads[1] = {d->num_heads}, lse[3] = {d->batch, d->num_heads, d->q_len};
    VKA_TRY(check_tensor(&in->sinks, p, "sinks", 1, heads, "f32 [Hq], one logit per query head",
                         error, error_size));
    VKA_TRY(check_tensor(&in->alibi_slopes, p, "alibi_slopes", 1, heads,
                         "f32 [Hq], one slope per query head", error, error_size));
    VKA_TRY(check_tensor(&in->lse, p, "lse", 3, lse, "f32 [B, Hq, Tq]", error, error_size));
    m.sinks = in->sinks.present;
    m.alibi_slopes = in->alibi_slopes.present;
    m.alibi_max_bias = in->alibi_max_bias;
    m.alibi = m.alibi_slopes || in->alibi_max_bias > 0.0f;
    m.lse = in->lse.present;
    /* [0, 1): p = 1 would drop everything and scale by infinity */
    if (!(in->dropout_p >= 0.0f && in->dropout_p < 1.0f)) {
        vka_error_format(error, error_size, "%sdropout_p is %g: it must be in [0, 1)", p,
                         (double)in->dropout_p);
        return VKATTN_ERROR_INVALID_ARGUMENT;
    }
    if (kv_path && in->dropout_p > 0.0f) {
        vka_error_format(error, error_size,
                         "%sdropout_p is %g: attention over a KV cache is inference, which "
                         "takes no dropout (0)",
                         p, (double)in->dropout_p);
        return VKATTN_ERROR_INVALID_ARGUMENT;
    }
    m.dropout = in->dropout_p > 0.0f;
    if (m.dropout) {
        m.dropout_p = in->dropout_p;
        m.dropout_threshold = vkattn_dropout_threshold(in->dropout_p);
        m.dropout_scale = (float)(1.0 / (1.0 - (double)in->dropout_p));
        m.dropout_seed = in->dropout_seed;
    }
    if (out)
        *out = m;
    return VKATTN_SUCCESS;
}

double vka_alibi_slope(uint32_t num_heads, double max_bias, uint32_t h)
{
    uint32_t n = 1;
    while (n * 2 <= num_heads)
        n *= 2;
    double m0 = pow(2.0, -max_bias / n), m1 = pow(2.0, -max_bias / (2.0 * n));
    return h < n ? pow(m0, h + 1.0) : pow(m1, 2.0 * (h - n) + 1.0);
}
