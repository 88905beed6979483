// Start-up self-test (src/core/selftest*.c): one cooperative-matrix
// multiply-add at the shape the coopmat kernels use, as they use it: A (M x
// K) and B (K x N) staged in shared memory as float16_t (B column-major, as
// the kernels keep W and K tiles), C read from storage, D = A B + C stored
// back. Small integers: the exact answer is known.
#version 450
#extension GL_GOOGLE_include_directive : require
#include "coopmat.glsl"

layout(local_size_x_id = 0) in; // one subgroup
layout(constant_id = 0) const uint WORKGROUP_SIZE = 32u;

layout(std430, binding = 0) readonly buffer In { float inp[]; }; // A, B^T, C (row-major)
layout(std430, binding = 1) writeonly buffer Out { float o[]; };

shared float16_t a_s[CM_M * CM_K];
shared float16_t b_s[CM_N * CM_K];
shared float c_s[CM_M * CM_N];

void main() {
    uint i = gl_LocalInvocationIndex;
    for (uint e = i; e < CM_M * CM_K; e += WORKGROUP_SIZE)
        a_s[e] = float16_t(inp[e]);
    for (uint e = i; e < CM_N * CM_K; e += WORKGROUP_SIZE)
        b_s[e] = float16_t(inp[CM_M * CM_K + e]);
    for (uint e = i; e < CM_M * CM_N; e += WORKGROUP_SIZE)
        c_s[e] = inp[(CM_M + CM_N) * CM_K + e];
    barrier();
    CM_A a;
    CM_B b;
    CM_C c;
    coopMatLoad(a, a_s, 0u, CM_K, CM_ROW);
    coopMatLoad(b, b_s, 0u, CM_K, CM_COL);
    coopMatLoad(c, c_s, 0u, CM_N, CM_ROW);
    c = coopMatMulAdd(a, b, c);
    coopMatStore(c, o, 0u, CM_N, CM_ROW);
}
