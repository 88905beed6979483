/* vkattn_ref_attention: one call (ref_attention.c), or packed sequences
 * (args->sequences > 0: ref_attention_packed.c). */
#include "ref/ref.h"

#include "spec/error_text.h"

#include <stdlib.h>

vkattn_result vkattn_ref_attention(const vkattn_ref_attention_args *args, char *error,
                                   size_t error_size)
{
    if (args && args->sequences)
        return vka_ref_attention_packed(args, error, error_size);
    vka_ref_attention_plan plan;
    VKA_TRY(vka_ref_attention_prepare(args, "args->", &plan, error, error_size));
    float *kf = NULL, *vf = NULL;
    vkattn_result r = vka_ref_dequantized(&plan.k, "k", &kf, error, error_size);
    if (r == VKATTN_SUCCESS)
        r = vka_ref_dequantized(&plan.v, "v", &vf, error, error_size);
    double *scratch = NULL;
    if (r == VKATTN_SUCCESS) {
        scratch = vka_ref_scratch(plan.scratch_doubles, error, error_size);
        r = scratch ? VKATTN_SUCCESS : VKATTN_ERROR_OUT_OF_HOST_MEMORY;
    }
    if (r == VKATTN_SUCCESS)
        vka_ref_attention_run(&plan, scratch);
    free(scratch), free(kf), free(vf);
    return r;
}
