// The backward GEMMs (src/ops/linear/linear_grad.c): C = A B (+ bias)
// (+ C), A [M, K] and B [K, N] read through free element strides, so one
// kernel serves dx = dy W, dw = dy^T x and the recomputed projections
// x W^T + b of the layer's backward, whatever is transposed.
//
// Every operand is a storage buffer of 32-bit words and its dtype a push
// constant (f32, f16 or bf16, two 16-bit values per word, the low one first):
// no 16-bit storage is needed, and one SPIR-V serves every dtype. A may also
// be all ones (no binding read): C's one row is then B's column sums (the
// biases' gradients). C is f32, or f16 / bf16 written as whole words (the
// host then has N, C's row stride and offset even, so no word has two
// writers).
//
// Tiles: a workgroup of 128 invocations owns BM x BN = 64 x 32 outputs, each
// invocation 4 x 4 of them, staged through shared memory BK = 16 steps of K
// at a time. Every output is one invocation's sum in a fixed order: the
// same bits every run.
#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
#include "tensor_io.glsl"

layout(local_size_x = 128) in;

const uint BM = 64u, BN = 32u, BK = 16u;
const uint T_F32 = 0u, T_F16 = 1u, T_BF16 = 2u, T_ONES = 3u;
const uint FLAG_BIAS = 1u, FLAG_ACCUMULATE = 2u;

layout(push_constant) uniform Push {
    uint M, N, K;
    uint a_off, a_sm, a_sk; // elements from the binding's start
    uint b_off, b_sk, b_sn;
    uint c_off, c_sm, c_sn;
    uint bias_off;
    uint types; // a (bits 0-1), b (2-3), bias (4-5), c (6-7): T_*
    uint flags; // FLAG_*
} pc;

layout(set = 0, binding = 0, std430) readonly buffer a_buffer { uint a_w[]; };
layout(set = 0, binding = 1, std430) readonly buffer b_buffer { uint b_w[]; };
layout(set = 0, binding = 2, std430) readonly buffer bias_buffer { uint bias_w[]; };
layout(set = 0, binding = 3, std430) buffer c_buffer { uint c_w[]; };

float word_value(uint w, uint i, uint t) {
    if (t == T_F32) return uintBitsToFloat(w);
    uint h = (i & 1u) != 0u ? w >> 16 : w & 0xffffu;
    return t == T_F16 ? unpackHalf2x16(h).x : uintBitsToFloat(h << 16);
}
float load_a(uint i, uint t) { return word_value(a_w[t == T_F32 ? i : i >> 1], i, t); }
float load_b(uint i, uint t) { return word_value(b_w[t == T_F32 ? i : i >> 1], i, t); }
float load_bias(uint i, uint t) { return word_value(bias_w[t == T_F32 ? i : i >> 1], i, t); }
uint half_bits(float x, uint t) {
    return t == T_F16 ? packHalf2x16(vec2(x, 0.0)) & 0xffffu : BF16_BITS(x);
}

shared float as_[BK][BM];
shared float bs_[BK][BN];

void main() {
    const uint ta = pc.types & 3u, tb = (pc.types >> 2) & 3u;
    const uint tbias = (pc.types >> 4) & 3u, tc = (pc.types >> 6) & 3u;
    const uint lid = gl_LocalInvocationID.x;
    const uint m0 = gl_WorkGroupID.y * BM, n0 = gl_WorkGroupID.x * BN;
    const uint tm = (lid / (BN / 4u)) * 4u, tn = (lid % (BN / 4u)) * 4u;
    float acc[4][4];
    [[unroll]] for (uint i = 0u; i < 4u; i++)
        [[unroll]] for (uint j = 0u; j < 4u; j++) acc[i][j] = 0.0;

    for (uint k0 = 0u; k0 < pc.K; k0 += BK) {
        // A's tile: BK x BM = 1024 values, 8 per invocation
        // (unrolled: lavapipe counts every loop iteration of an invocation
        // against one limit of 65535, so only the K loop may loop)
        [[unroll]] for (uint s = 0u; s < BK * BM / 128u; s++) {
            uint u = lid + 128u * s;
            uint kk = u / BM, mm = u % BM;
            uint m = m0 + mm, k = k0 + kk;
            float v = 0.0;
            if (m < pc.M && k < pc.K)
                v = ta == T_ONES ? 1.0 : load_a(pc.a_off + m * pc.a_sm + k * pc.a_sk, ta);
            as_[kk][mm] = v;
        }
        [[unroll]] for (uint s = 0u; s < BK * BN / 128u; s++) {
            uint u = lid + 128u * s;
            uint kk = u / BN, nn = u % BN;
            uint n = n0 + nn, k = k0 + kk;
            bs_[kk][nn] = n < pc.N && k < pc.K ? load_b(pc.b_off + k * pc.b_sk + n * pc.b_sn, tb)
                                               : 0.0;
        }
        barrier();
        [[unroll]] for (uint kk = 0u; kk < BK; kk++) {
            vec4 a = vec4(as_[kk][tm], as_[kk][tm + 1u], as_[kk][tm + 2u], as_[kk][tm + 3u]);
            vec4 b = vec4(bs_[kk][tn], bs_[kk][tn + 1u], bs_[kk][tn + 2u], bs_[kk][tn + 3u]);
            [[unroll]] for (uint i = 0u; i < 4u; i++)
                [[unroll]] for (uint j = 0u; j < 4u; j++) acc[i][j] = fma(a[i], b[j], acc[i][j]);
        }
        barrier();
    }

    [[unroll]] for (uint i = 0u; i < 4u; i++) {
        uint m = m0 + tm + i;
        if (m >= pc.M) continue;
        float v[4];
        [[unroll]] for (uint j = 0u; j < 4u; j++) {
            uint n = n0 + tn + j;
            v[j] = acc[i][j];
            if (n < pc.N && (pc.flags & FLAG_BIAS) != 0u)
                v[j] += load_bias(pc.bias_off + n, tbias);
        }
        if (tc == T_F32) {
            [[unroll]] for (uint j = 0u; j < 4u; j++) {
                uint n = n0 + tn + j;
                if (n >= pc.N) continue;
                uint at = pc.c_off + m * pc.c_sm + n * pc.c_sn;
                float x = v[j];
                if ((pc.flags & FLAG_ACCUMULATE) != 0u) x += uintBitsToFloat(c_w[at]);
                c_w[at] = floatBitsToUint(x);
            }
        } else { // pairs (n, n + 1), n even, into whole words
            [[unroll]] for (uint j = 0u; j < 4u; j += 2u) {
                uint n = n0 + tn + j;
                if (n >= pc.N) continue;
                uint at = (pc.c_off + m * pc.c_sm + n) >> 1;
                float x0 = v[j], x1 = v[j + 1u];
                if ((pc.flags & FLAG_ACCUMULATE) != 0u) {
                    x0 += word_value(c_w[at], 0u, tc);
                    x1 += word_value(c_w[at], 1u, tc);
                }
                c_w[at] = half_bits(x0, tc) | (half_bits(x1, tc) << 16);
            }
        }
    }
}
