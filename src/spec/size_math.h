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

#endif
