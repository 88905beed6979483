// Attention backward, the sinks' gradient (see attention_bwd.glsl): one
// workgroup per query head h sums -exp(sink_h - lse) dot(dout, out) over
// every batch row and query, each invocation a strided share of the rows
// in order, then a tree in shared memory: the same bits every run.
#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
#include "attention_bwd.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG = 64u; // a power of 2
layout(constant_id = 4) const uint DV = 64u;
const uint DVQ = DV / 4u;

layout(set = 0, binding = 10, std430) writeonly buffer dsinks_buffer { float dsinks_data[]; };

shared float partial[WG];

void main() {
    const uint t = gl_LocalInvocationID.x, h = gl_WorkGroupID.x;
    const uint batch = pc.m_sb; // the host passes B there (no mask is read here)
    const float sink = sinks_data[((pc.small_offs >> 8u) & 0xffu) + h];
    float sum = 0.0;
    for (uint e = t; e < batch * pc.q_len; e += WG) {
        uint b = e / pc.q_len, i = e % pc.q_len;
        float lse = row_lse(b, h, i);
        if (lse == NEG_INF)
            continue;
        sum -= exp2((sink - lse) * LOG2E) * row_dr(b, h, i, DVQ);
    }
    partial[t] = sum;
    barrier();
    for (uint half_ = WG / 2u; half_ > 0u; half_ /= 2u) {
        if (t < half_)
            partial[t] += partial[t + half_];
        barrier();
    }
    if (t == 0u)
        dsinks_data[(pc.small_offs >> 24u) + h] = partial[0];
}
