/* Helpers of the CPU reference suite (test_reference.h). */
#include "test_reference.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

float *ref_randf(test_rng *r, size_t n)
{
    float *p = test_alloc(n * sizeof *p);
    test_fill_uniform(r, p, n, -1.0f, 1.0f);
    return p;
}

void ref_assert_close(const float *got, const float *want, size_t n, double tol, const char *what)
{
    for (size_t i = 0; i < n; i++) {
        double g = got[i], w = want[i];
        if (isnan(g) || isnan(w) || fabs(g - w) > tol * (1.0 + fabs(w)))
            fail_msg("%s[%zu]: got %.9g, want %.9g (tolerance %g)", what, i, g, w, tol);
    }
}

void ref_attention_args(vkattn_ref_attention_args *a, const ref_dims *d, float *q, float *k,
                        float *v, float *out)
{
    memset(a, 0, sizeof *a);
    int64_t qs[4] = {d->B, d->Hq, d->Tq, d->D}, ks[4] = {d->B, d->Hkv, d->Tk, d->D};
    a->q = vkattn_host_tensor_make(q, VKATTN_DTYPE_F32, 4, qs);
    a->k = vkattn_host_tensor_make(k, VKATTN_DTYPE_F32, 4, ks);
    a->v = vkattn_host_tensor_make(v, VKATTN_DTYPE_F32, 4, ks);
    a->out = vkattn_host_tensor_make(out, VKATTN_DTYPE_F32, 4, qs);
}

size_t ref_q_elems(const ref_dims *d) { return (size_t)(d->B * d->Hq * d->Tq * d->D); }
size_t ref_kv_elems(const ref_dims *d) { return (size_t)(d->B * d->Hkv * d->Tk * d->D); }
