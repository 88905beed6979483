// FMA limit kernel of vkattn-bench (LAVAPIPE.md "best FMA kernel shape"):
// ACCUMULATORS independent fp32 chains per invocation, the inner loop
// unrolled UNROLL times so loop control (vector mask code on CPU drivers)
// costs nothing. FLOPs = invocations * iterations * UNROLL * ACCUMULATORS * 2.
// m and c come from push constants so the compiler cannot fold the chains;
// with |m| < 1 every chain converges to c / (1 - m): no overflow, no denormals.
#version 450
#extension GL_EXT_control_flow_attributes : require

#ifndef ACCUMULATORS
#define ACCUMULATORS 12
#endif
#ifndef UNROLL
#define UNROLL 16
#endif

layout(local_size_x = 64) in;
layout(std430, set = 0, binding = 0) writeonly buffer Out { float out_[]; };
layout(push_constant) uniform Push {
    uint iterations;
    float m;
    float c;
    float seed;
} pc;

void main() {
    float a[ACCUMULATORS];
    [[unroll]] for (int i = 0; i < ACCUMULATORS; i++)
        a[i] = pc.seed * float(i + 1) + float(gl_LocalInvocationID.x) * 1e-3;
    for (uint it = 0u; it < pc.iterations; it++) {
        [[unroll]] for (int u = 0; u < UNROLL; u++)
            [[unroll]] for (int i = 0; i < ACCUMULATORS; i++)
                a[i] = fma(a[i], pc.m, pc.c);
    }
    float s = 0.0;
    [[unroll]] for (int i = 0; i < ACCUMULATORS; i++)
        s += a[i];
    out_[gl_GlobalInvocationID.x] = s; // keeps every chain alive
}
