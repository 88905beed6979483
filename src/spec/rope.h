/* Rotary position embeddings without a context: checks of vkattn_rope_desc,
 * the frequencies (with their scalings) and the cos/sin tables the GPU
 * combines, shared by the CPU reference, the rope op and the MHA layer's
 * projection epilogue so all of them rotate by the same angles. */
#ifndef VKA_ROPE_H
#define VKA_ROPE_H

#include "vkattn.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Checks `in` for heads of `head_dim` and fills its defaults (dims) into
 * `out` (may be NULL). `name` is how messages call the desc ("desc->rope").
 * theta 0 is refused here: callers for which 0 means "no RoPE" test it
 * first. Code on failure: VKATTN_ERROR_INVALID_ARGUMENT. */
vkattn_result vka_rope_resolve(const vkattn_rope_desc *in, uint32_t head_dim, const char *name,
                               vkattn_rope_desc *out, char *error, size_t error_size);

/* inv_freq[i] of a resolved desc after its scaling, i < dims / 2, in double. */
double vka_rope_inv_freq(const vkattn_rope_desc *resolved, uint32_t i);

/* The GPU's angle tables: a position p < 2^24 is p = d0 + 64 d1 + 64^2 d2
 * + 64^3 d3 (digits < 64), and cos/sin of p * f come from the complex
 * product of the four entries (cos, sin)(d_l * 64^l * f), each computed in
 * double and rounded to float once: a few ulp at any position, where
 * p * f in fp32 would lose the angle's low bits past a few thousand.
 * Layout: float[level][digit][dims / 2][2] (cos, sin). */
#define VKA_ROPE_LEVELS 4u
#define VKA_ROPE_DIGITS 64u
#define VKA_ROPE_DIGIT_BITS 6u

/* Floats of a resolved desc's table. */
static inline uint64_t vka_rope_table_floats(const vkattn_rope_desc *resolved)
{
    return (uint64_t)VKA_ROPE_LEVELS * VKA_ROPE_DIGITS * resolved->dims;
}

/* Fills `out` (vka_rope_table_floats floats). */
void vka_rope_table_fill(const vkattn_rope_desc *resolved, float *out);

#endif
