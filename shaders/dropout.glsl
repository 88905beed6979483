// The dropout mask of attention: Philox4x32-10 with Random123's constants,
// the same integer arithmetic as src/spec/dropout.c (vkattn_dropout_bits),
// so the kernels and the reference draw the same mask bit for bit.
#ifndef VKATTN_DROPOUT_GLSL
#define VKATTN_DROPOUT_GLSL

uvec4 philox4x32_10(uvec4 c, uvec2 k) {
    [[unroll]] for (uint round = 0u; round < 10u; round++) {
        uint hi0, lo0, hi1, lo1;
        umulExtended(0xD2511F53u, c.x, hi0, lo0);
        umulExtended(0xCD9E8D57u, c.z, hi1, lo1);
        c = uvec4(hi1 ^ c.y ^ k.x, lo1, hi0 ^ c.w ^ k.y, lo0);
        k += uvec2(0x9E3779B9u, 0xBB67AE85u);
    }
    return c;
}

// Word j % 4 of Philox of counter {j / 4, i, h, b} and the seed's key.
uint dropout_bits(uvec2 seed, uint b, uint h, uint i, uint j) {
    uvec4 r = philox4x32_10(uvec4(j >> 2u, i, h, b), seed);
    uint w = j & 3u;
    return w == 0u ? r.x : w == 1u ? r.y : w == 2u ? r.z : r.w;
}

#endif
