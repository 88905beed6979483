// Appends one of K or V ([B, Hkv, T, D] of a step) to its pool of a
// quantized KV cache (layout: src/ops/kvcache/kvcache.h), quantizing as it
// writes ggml's blocks of 32 values along the head dim (QF: 0 q8_0, 1 q4_0,
// 2 q4_1, 3 q5_0, 4 q5_1, 5 iq4_nl; the layouts: tensor_io.glsl). The K and
// V of a step are two dispatches (their head dims may differ). Blocks of
// whole 32-bit words (q4_1, q5_1: 20 and 24 bytes) are one invocation's
// each. The others are 2 bytes more than whole words (34, 18, 22): where a
// head dim is an even number of blocks, one invocation quantizes a pair of
// blocks (64 values) of one token row, whole words, so no two invocations
// share a word. Where it is odd (ODD_BLOCKS), one invocation quantizes one
// block: it starts on a word or halfway into one, and the word it shares
// with its neighbour (the block before or after, maybe another token's
// row) is written by both through atomic AND / OR on their own halves
// (device scope: contexts whose memory model forbids it refuse such
// caches); the words it holds alone are stored. The arithmetic is the CPU
// reference's (vkattn_ref_quantize) step by step in f32, `precise` so that
// nothing is fused; scales are rounded to f16 to nearest even by hand.
// Variant: DT = f32 / f16 / f16p / bf16 (the storage of k and v).
#version 450
#extension GL_GOOGLE_include_directive : require
#include "tensor_io.glsl"

#ifndef ODD_BLOCKS
#define ODD_BLOCKS 0
#endif

layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WORKGROUP_SIZE = 64u;

const uint BLOCK_BYTES = QUANT_BLOCK_BYTES(QF);
// blocks of whole words: one per invocation
#define WORD_BLOCKS (QF == 2 || QF == 4)
#if WORD_BLOCKS
const uint SPAN_WORDS = BLOCK_BYTES / 4u;
#elif ODD_BLOCKS
// the words a block touches: it starts on a word or halfway into one, and
// BLOCK_BYTES is 2 more than a multiple of 4
const uint SPAN_WORDS = (BLOCK_BYTES + 2u) / 4u;
#else
const uint SPAN_WORDS = BLOCK_BYTES / 2u; // 2 blocks = BLOCK_BYTES / 2 words
#endif

layout(push_constant) uniform Push {
    uint batch, heads, tokens, units; // per pool row: pairs of blocks, or blocks
    uint dh;                           // D: values from D on (the row's padding) are zeros
    uint first;                        // element index of src[0,0,0,0] in its binding
    uint stride_b, stride_h, stride_t; // of src, in elements
    uint block_size, table_width;
} pc;

layout(set = 0, binding = 0, std430) readonly buffer meta_buffer { uint meta[]; };
DECLARE_RO(1, src, DT)
#if ODD_BLOCKS && !WORD_BLOCKS
layout(set = 0, binding = 2, std430) buffer pool_buffer { uint pool[]; };
#else
layout(set = 0, binding = 2, std430) writeonly buffer pool_buffer { uint pool[]; };
#endif

// IEEE binary16 bits of x, rounded to nearest even (vkattn_f32_to_f16's
// rounding; packHalf2x16 leaves the rounding mode to the implementation).
// x is a finite block scale, so no NaN or infinity arrives here.
uint f16_bits(float x) {
    uint u = floatBitsToUint(x);
    uint sign = (u >> 16u) & 0x8000u;
    uint a = u & 0x7fffffffu;
    if (a >= 0x477ff000u) // rounds to 65536 or more: infinity
        return sign | 0x7c00u;
    if (a >= 0x38800000u) { // a normal half
        uint r = a - 0x38000000u; // rebias the exponent (127 - 15 = 112 << 23)
        return sign | ((r + 0xfffu + ((r >> 13u) & 1u)) >> 13u);
    }
    // a subnormal half (or zero): the value in units of 2^-24, to nearest even
    uint e = a >> 23u;
    if (e < 102u) // below half of the smallest subnormal: zero
        return sign;
    uint m = (a & 0x7fffffu) | 0x800000u;
    uint shift = 126u - e; // 14 .. 24
    uint q = m >> shift, rest = m & ((1u << shift) - 1u), half_ = 1u << (shift - 1u);
    if (rest > half_ || (rest == half_ && (q & 1u) != 0u))
        q++;
    return sign | q;
}

// C's roundf: to nearest, halves away from zero (GLSL's round leaves halves
// to the implementation). |x| <= 127 here, so x - trunc(x) is exact.
float round_away(float x) {
    float t = trunc(x);
    return abs(x - t) >= 0.5 ? t + sign(x) : t;
}

uint words[SPAN_WORDS];

// Value e of the source row starting at element `row` (pc.first added):
// zero from the head dim on, where a pool row pads to whole blocks; the
// load stays in the row (a select, no branch, picks the zero).
float src_value(uint row, uint e) {
    float x = src_load(pc.first + row + min(e, pc.dh - 1u));
    return e < pc.dh ? x : 0.0;
}

void put_byte(uint at, uint value) {
    uint w = at >> 2u, shift = (at & 3u) * 8u;
    words[w] = (words[w] & ~(0xffu << shift)) | ((value & 0xffu) << shift);
}

void put_f16(uint at, float x) {
    uint h = f16_bits(x);
    put_byte(at, h);
    put_byte(at + 1u, h >> 8u);
}

void put_word(uint at, uint value) {
    for (uint k = 0u; k < 4u; k++)
        put_byte(at + k, value >> (8u * k));
}

#if QF == 5
const float LEVELS[16] = float[16](-127.0, -104.0, -83.0, -65.0, -49.0, -35.0, -22.0, -10.0,
                                   1.0, 13.0, 25.0, 38.0, 53.0, 69.0, 89.0, 113.0);

// The level nearest to v (ties to the upper one), as the reference's
// nearest_level: a bisection over the sorted levels.
uint nearest_level(float v) {
    if (v <= LEVELS[0])
        return 0u;
    if (v >= LEVELS[15])
        return 15u;
    uint lo = 0u, hi = 15u;
    while (hi - lo > 1u) {
        uint mid = (lo + hi) / 2u;
        if (v < LEVELS[mid])
            hi = mid;
        else
            lo = mid;
    }
    precise float below = v - LEVELS[hi - 1u];
    precise float above = LEVELS[hi] - v;
    return below < above ? hi - 1u : hi;
}
#endif

// The block, x its 32 values, at byte `base` of words[] (the pair's second
// block: BLOCK_BYTES; ODD_BLOCKS: 0 or 2).
void quantize_block(uint base, float x[32]) {
#if QF == 0
    float amax = 0.0;
    for (uint j = 0u; j < 32u; j++)
        amax = max(amax, abs(x[j]));
    precise float d = amax / 127.0;
    precise float id = d != 0.0 ? 1.0 / d : 0.0;
    for (uint j = 0u; j < 32u; j++) {
        precise float v = x[j] * id;
        put_byte(base + 2u + j, uint(int(round_away(v))));
    }
    put_f16(base, d);
#elif QF == 1 || QF == 3
    // q4_0, q5_0: steps of the largest magnitude (signed) / -8 or -16
    const float HALF_RANGE = QF == 1 ? 8.0 : 16.0;
    float amax = 0.0, mx = 0.0;
    for (uint j = 0u; j < 32u; j++)
        if (amax < abs(x[j])) {
            amax = abs(x[j]);
            mx = x[j];
        }
    precise float d = mx / -HALF_RANGE;
    precise float id = d != 0.0 ? 1.0 / d : 0.0;
    uint qh = 0u;
    for (uint j = 0u; j < 16u; j++) {
        precise float v0 = x[j] * id;
        precise float v1 = x[j + 16u] * id;
        precise float s0 = v0 + (HALF_RANGE + 0.5);
        precise float s1 = v1 + (HALF_RANGE + 0.5);
        uint top = uint(2.0 * HALF_RANGE) - 1u;
        uint q0 = min(top, uint(int(s0))), q1 = min(top, uint(int(s1)));
        put_byte(base + (QF == 1 ? 2u : 6u) + j, (q0 & 15u) | ((q1 & 15u) << 4u));
        qh |= ((q0 >> 4u) & 1u) << j;
        qh |= ((q1 >> 4u) & 1u) << (j + 16u);
    }
    put_f16(base, d);
#if QF == 3
    put_word(base + 2u, qh);
#endif
#elif QF == 2 || QF == 4
    // q4_1, q5_1: the block's range in 15 or 31 steps from its minimum
    const float STEPS = QF == 2 ? 15.0 : 31.0;
    float lo = 3.402823466e38, hi = -3.402823466e38;
    for (uint j = 0u; j < 32u; j++) {
        if (x[j] < lo)
            lo = x[j];
        if (x[j] > hi)
            hi = x[j];
    }
    precise float range = hi - lo;
    precise float d = range / STEPS;
    precise float id = d != 0.0 ? 1.0 / d : 0.0;
    uint qh = 0u;
    for (uint j = 0u; j < 16u; j++) {
        precise float u0 = x[j] - lo;
        precise float u1 = x[j + 16u] - lo;
        precise float v0 = u0 * id;
        precise float v1 = u1 * id;
        precise float s0 = v0 + 0.5;
        precise float s1 = v1 + 0.5;
        uint q0 = uint(int(s0)), q1 = uint(int(s1));
#if QF == 2
        q0 = min(15u, q0);
        q1 = min(15u, q1);
#endif
        put_byte(base + (QF == 2 ? 4u : 8u) + j, (q0 & 15u) | ((q1 & 15u) << 4u));
        qh |= ((q0 >> 4u) & 1u) << j;
        qh |= ((q1 >> 4u) & 1u) << (j + 16u);
    }
    put_f16(base, d);
    put_f16(base + 2u, lo);
#if QF == 4
    put_word(base + 4u, qh);
#endif
#else
    // iq4_nl: each value's nearest level at the scale that maps the largest
    // magnitude to -127, then the least-squares scale with weights x^2
    float amax = 0.0, mx = 0.0;
    for (uint j = 0u; j < 32u; j++)
        if (abs(x[j]) > amax) {
            amax = abs(x[j]);
            mx = x[j];
        }
    uint level[32];
    for (uint j = 0u; j < 32u; j++)
        level[j] = 0u;
    precise float d = 0.0;
    if (!(amax < 1e-15)) {
        precise float d0 = mx / -127.0;
        precise float id = 1.0 / d0;
        precise float sumqx = 0.0, sumq2 = 0.0;
        for (uint j = 0u; j < 32u; j++) {
            precise float al = id * x[j];
            level[j] = nearest_level(al);
            float q = LEVELS[level[j]];
            precise float w = x[j] * x[j];
            precise float wq = w * q;
            precise float wqx = wq * x[j];
            precise float wqq = wq * q;
            sumqx = sumqx + wqx;
            sumq2 = sumq2 + wqq;
        }
        d = sumq2 > 0.0 ? sumqx / sumq2 : 0.0;
    }
    for (uint j = 0u; j < 16u; j++)
        put_byte(base + 2u + j, level[j] | (level[j + 16u] << 4u));
    put_f16(base, d);
#endif
}

void main() {
    uint id = (gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x) * WORKGROUP_SIZE +
              gl_LocalInvocationID.x;
    uint u = id % pc.units;
    uint rest = id / pc.units;
    uint t = rest % pc.tokens;
    rest /= pc.tokens;
    uint h = rest % pc.heads;
    uint b = rest / pc.heads;
    if (b >= pc.batch)
        return;
    uint token = meta[b] + t; // position in the sequence
    uint block = meta[2u * pc.batch + b * pc.table_width + token / pc.block_size];
    uint row = (block * pc.heads + h) * pc.block_size + token % pc.block_size;
    float x[32];
    for (uint w = 0u; w < SPAN_WORDS; w++)
        words[w] = 0u;
#if WORD_BLOCKS
    uint dst = (row * pc.units + u) * SPAN_WORDS;
    uint src = b * pc.stride_b + h * pc.stride_h + t * pc.stride_t;
    for (uint j = 0u; j < 32u; j++)
        x[j] = src_value(src, u * 32u + j);
    quantize_block(0u, x);
    for (uint w = 0u; w < SPAN_WORDS; w++)
        pool[dst + w] = words[w];
#elif ODD_BLOCKS
    uint at = (row * pc.units + u) * BLOCK_BYTES; // the block's first byte in the pool
    uint src = b * pc.stride_b + h * pc.stride_h + t * pc.stride_t;
    for (uint j = 0u; j < 32u; j++)
        x[j] = src_value(src, u * 32u + j);
    uint lead = at & 3u; // 0 or 2
    quantize_block(lead, x);
    // the half word before the block (lead 2) or after it (lead 0) is the
    // neighbour's: the shared word takes only this block's half
    uint first = at >> 2u, last = SPAN_WORDS - 1u;
    if (lead == 0u) {
        for (uint w = 0u; w < last; w++)
            pool[first + w] = words[w];
        atomicAnd(pool[first + last], 0xffff0000u);
        atomicOr(pool[first + last], words[last]);
    } else {
        atomicAnd(pool[first], 0x0000ffffu);
        atomicOr(pool[first], words[0]);
        for (uint w = 1u; w <= last; w++)
            pool[first + w] = words[w];
    }
#else
    uint dst = (row * pc.units + u) * SPAN_WORDS;
    uint src = b * pc.stride_b + h * pc.stride_h + t * pc.stride_t;
    for (uint blk = 0u; blk < 2u; blk++) {
        for (uint j = 0u; j < 32u; j++)
            x[j] = src_value(src, u * 64u + blk * 32u + j);
        quantize_block(blk * BLOCK_BYTES, x);
    }
    for (uint w = 0u; w < SPAN_WORDS; w++)
        pool[dst + w] = words[w];
#endif
}
