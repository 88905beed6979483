/* CPU reference of rotary position embeddings (see "rotary positions" in
 * vkattn/ops.h): every angle from the double frequencies of spec/rope.c,
 * sin and cos in double. */
#include "ref/ref.h"
#include "spec/rope.h"

#include <math.h>

void vka_ref_rope_rotate(const vkattn_rope_desc *r, int64_t position, double *x)
{
    uint32_t half = r->dims / 2;
    for (uint32_t i = 0; i < half; i++) {
        double a = (double)position * vka_rope_inv_freq(r, i);
        double c = cos(a), s = sin(a);
        uint32_t ix = r->style == VKATTN_ROPE_GPTJ ? 2 * i : i;
        uint32_t iy = r->style == VKATTN_ROPE_GPTJ ? 2 * i + 1 : i + half;
        double u = x[ix], v = x[iy];
        x[ix] = u * c - v * s;
        x[iy] = u * s + v * c;
    }
}
