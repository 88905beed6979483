/* RoPE desc checks, frequencies and angle tables (see rope.h). */
#include "spec/rope.h"

#include "spec/error_text.h"

#include <math.h>
#include <string.h>

static bool finite_positive(float v) { return isfinite(v) && v > 0.0f; }

vkattn_result vka_rope_resolve(const vkattn_rope_desc *in, uint32_t head_dim, const char *name,
                               vkattn_rope_desc *out, char *error, size_t error_size)
{
    if (!in) {
        vka_error_format(error, error_size, "%s is NULL", name);
        return VKATTN_ERROR_INVALID_ARGUMENT;
    }
    vkattn_rope_desc r = *in;
    if (!finite_positive(r.theta)) {
        vka_error_format(error, error_size, "%s.theta is %g: it must be finite and > 0", name,
                         (double)r.theta);
        return VKATTN_ERROR_INVALID_ARGUMENT;
    }
    if (r.dims == 0)
        r.dims = head_dim;
    if (r.dims % 2 != 0 || r.dims > head_dim) {
        vka_error_format(error, error_size,
                         "%s.dims is %u: the rotary dims must be even and at most head_dim %u",
                         name, r.dims, head_dim);
        return VKATTN_ERROR_INVALID_ARGUMENT;
    }
    if (r.style != VKATTN_ROPE_NEOX && r.style != VKATTN_ROPE_GPTJ) {
        vka_error_format(error, error_size,
                         "%s.style is %d: VKATTN_ROPE_NEOX (0) or VKATTN_ROPE_GPTJ (1)", name,
                         (int)r.style);
        return VKATTN_ERROR_INVALID_ARGUMENT;
    }
    for (size_t i = 0; i < sizeof r.reserved / sizeof r.reserved[0]; i++)
        if (r.reserved[i] != 0.0f) {
            vka_error_format(error, error_size, "%s.reserved[%zu] is %g: it must be zero", name, i,
                             (double)r.reserved[i]);
            return VKATTN_ERROR_INVALID_ARGUMENT;
        }
    switch (r.scaling) {
    case VKATTN_ROPE_SCALING_NONE:
        return out ? (*out = r, VKATTN_SUCCESS) : VKATTN_SUCCESS;
    case VKATTN_ROPE_SCALING_LINEAR:
    case VKATTN_ROPE_SCALING_LLAMA3:
        break;
    default:
        vka_error_format(error, error_size,
                         "%s.scaling is %d: VKATTN_ROPE_SCALING_NONE (0), _LINEAR (1) or "
                         "_LLAMA3 (2)",
                         name, (int)r.scaling);
        return VKATTN_ERROR_INVALID_ARGUMENT;
    }
    if (!finite_positive(r.factor)) {
        vka_error_format(error, error_size, "%s.factor is %g: it must be finite and > 0", name,
                         (double)r.factor);
        return VKATTN_ERROR_INVALID_ARGUMENT;
    }
    if (r.scaling == VKATTN_ROPE_SCALING_LLAMA3) {
        if (!finite_positive(r.low_freq_factor) || !isfinite(r.high_freq_factor) ||
            r.high_freq_factor <= r.low_freq_factor) {
            vka_error_format(error, error_size,
                             "%s.low_freq_factor %g and .high_freq_factor %g: both finite, "
                             "0 < low < high",
                             name, (double)r.low_freq_factor, (double)r.high_freq_factor);
            return VKATTN_ERROR_INVALID_ARGUMENT;
        }
        if (r.original_max_positions == 0) {
            vka_error_format(error, error_size,
                             "%s.original_max_positions is 0: Llama 3 scaling needs it "
                             "(Llama 3.1: 8192)",
                             name);
            return VKATTN_ERROR_INVALID_ARGUMENT;
        }
    }
    if (out)
        *out = r;
    return VKATTN_SUCCESS;
}

double vka_rope_inv_freq(const vkattn_rope_desc *r, uint32_t i)
{
    double f = pow((double)r->theta, -2.0 * i / (double)r->dims);
    if (r->scaling == VKATTN_ROPE_SCALING_LINEAR)
        return f / r->factor;
    if (r->scaling != VKATTN_ROPE_SCALING_LLAMA3)
        return f;
    /* HF's _compute_llama3_parameters, term by term */
    const double pi = 3.14159265358979323846;
    double orig = r->original_max_positions;
    double low_wavelen = orig / r->low_freq_factor, high_wavelen = orig / r->high_freq_factor;
    double wavelen = 2.0 * pi / f;
    if (wavelen < high_wavelen)
        return f;
    if (wavelen > low_wavelen)
        return f / r->factor;
    double s =
        (orig / wavelen - r->low_freq_factor) / ((double)r->high_freq_factor - r->low_freq_factor);
    return (1.0 - s) * f / r->factor + s * f;
}

void vka_rope_table_fill(const vkattn_rope_desc *r, float *out)
{
    uint32_t half = r->dims / 2;
    for (uint32_t level = 0; level < VKA_ROPE_LEVELS; level++) {
        double unit = ldexp(1.0, (int)(level * VKA_ROPE_DIGIT_BITS));
        for (uint32_t digit = 0; digit < VKA_ROPE_DIGITS; digit++)
            for (uint32_t i = 0; i < half; i++) {
                double a = digit * unit * vka_rope_inv_freq(r, i);
                float *e = out + (((uint64_t)level * VKA_ROPE_DIGITS + digit) * half + i) * 2;
                e[0] = (float)cos(a);
                e[1] = (float)sin(a);
            }
    }
}
