/* The dropout mask of attention (see "attention semantics"): Philox4x32-10
 * as Random123 defines it, the same integer arithmetic as dropout.glsl, so
 * the kernels, the backward and the reference draw the same mask. */
#include "vkattn.h"

#include <math.h>

#define PHILOX_M0 0xD2511F53u
#define PHILOX_M1 0xCD9E8D57u
#define PHILOX_W0 0x9E3779B9u
#define PHILOX_W1 0xBB67AE85u

void vkattn_philox4x32_10(const uint32_t ctr[4], const uint32_t key[2], uint32_t out[4])
{
    uint32_t c0 = ctr[0], c1 = ctr[1], c2 = ctr[2], c3 = ctr[3];
    uint32_t k0 = key[0], k1 = key[1];
    for (int round = 0; round < 10; round++) {
        uint64_t p0 = (uint64_t)PHILOX_M0 * c0, p1 = (uint64_t)PHILOX_M1 * c2;
        uint32_t hi0 = (uint32_t)(p0 >> 32), lo0 = (uint32_t)p0;
        uint32_t hi1 = (uint32_t)(p1 >> 32), lo1 = (uint32_t)p1;
        c0 = hi1 ^ c1 ^ k0;
        c1 = lo1;
        c2 = hi0 ^ c3 ^ k1;
        c3 = lo0;
        k0 += PHILOX_W0;
        k1 += PHILOX_W1;
    }
    out[0] = c0, out[1] = c1, out[2] = c2, out[3] = c3;
}

uint32_t vkattn_dropout_bits(uint64_t seed, uint32_t b, uint32_t h, uint32_t i, uint32_t j)
{
    const uint32_t ctr[4] = {j >> 2, i, h, b};
    const uint32_t key[2] = {(uint32_t)seed, (uint32_t)(seed >> 32)};
    uint32_t out[4];
    vkattn_philox4x32_10(ctr, key, out);
    return out[j & 3u];
}

uint32_t vkattn_dropout_threshold(float p)
{
    if (!(p > 0.0f))
        return 0;
    if (p >= 1.0f)
        return UINT32_MAX;
    return (uint32_t)floor((double)p * 4294967296.0);
}
