/* Size arithmetic on caller-supplied numbers: rounding, and products and
 * sums that report overflow instead of wrapping. Context-free, so every
 * layer (core, ops, the reference) computes sizes the same way. */
#ifndef VKA_SIZE_MATH_H
#define VKA_SIZE_MATH_H

#include <stdbool.h>
#include <stdint.h>

static inline uint64_t vka_align_down(uint64_t v, uint64_t a) { return v - v % a; }
static inline uint64_t vka_align_up(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }
static inline uint64_t vka_min_u64(uint64_t a, uint64_t b) { return a < b ? a : b; }
static inline uint32_t vka_div_up(uint32_t a, uint32_t b) { return (a + b - 1) / b; }
static inline uint64_t vka_div_up64(uint64_t a, uint64_t b) { return (a + b - 1) / b; }

/* *out = a * b, or false when it does not fit 64 bits (*out then
 * UINT64_MAX, so a result used anyway fails every bounds check). */
static inline bool vka_mul_u64(uint64_t a, uint64_t b, uint64_t *out)
{
    if (__builtin_mul_overflow(a, b, out)) {
        *out = UINT64_MAX;
        return false;
    }
    return true;
}
/* *out = a + b, or false (and UINT64_MAX) on overflow. */
static inline bool vka_add_u64(uint64_t a, uint64_t b, uint64_t *out)
{
    if (__builtin_add_overflow(a, b, out)) {
        *out = UINT64_MAX;
        return false;
    }
    return true;
}
/* The product of `n` factors, or false (and UINT64_MAX) on overflow. */
static inline bool vka_product_u64(const uint64_t *factors, uint32_t n, uint64_t *out)
{
    uint64_t p = 1;
    for (uint32_t i = 0; i < n; i++)
        if (!vka_mul_u64(p, factors[i], &p)) {
            *out = UINT64_MAX;
            return false;
        }
    *out = p;
    return true;
}
/* ceil(a / b) without the a + b - 1 that overflows near 2^64 (b > 0). */
static inline uint64_t vka_ceil_div_u64(uint64_t a, uint64_t b) { return a / b + (a % b != 0); }

#endif
