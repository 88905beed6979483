// Attention's forward with dropout, second pass (see attention_bwd.glsl):
// the main kernels have written each row's LSE; a workgroup owns BR query
// rows of one (batch row, query head) and walks the keys they can see BC
// at a time, forming p = exp(s - lse) times the dropout scale (the
// backward's recomputation) and out = sum p' v in registers, then
// overwrites the main pass's out (binding 10, the dq slot of the layout).
#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
#include "attention_bwd.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG = 64u;
layout(constant_id = 1) const uint BR = 16u; // query rows per workgroup
layout(constant_id = 2) const uint BC = 16u; // keys per step
layout(constant_id = 3) const uint DK = 64u; // multiples of 4
layout(constant_id = 4) const uint DV = 64u;
const uint DKQ = DK / 4u, DVQ = DV / 4u;
const uint NO = (BR * DVQ + WG - 1u) / WG; // out quads per invocation

DECLARE_OUT4(10, out, OUT_DT)

shared vec4 sk[BC * DKQ], sv[BC * DVQ], sq[BR * DKQ];
shared float sp[BR * BC], slse[BR];

void main() {
    const uint t = gl_LocalInvocationID.x;
    const uint b = gl_WorkGroupID.z, h = gl_WorkGroupID.y, i0 = gl_WorkGroupID.x * BR;
    const uint kvh = h / group_size();
    const uint i_last = min(i0 + BR, pc.q_len) - 1u;
    const float slope = head_slope(h);
    for (uint e = t; e < BR * DKQ; e += WG) {
        uint i = i0 + e / DKQ;
        sq[e] = i < pc.q_len ? q_load4(Q_OFF + b * pc.q_sb + h * pc.q_sh + i * pc.q_st + e % DKQ)
                             : vec4(0.0);
    }
    for (uint r = t; r < BR; r += WG)
        slse[r] = i0 + r < pc.q_len ? row_lse(b, h, i0 + r) : NEG_INF;
    vec4 ao[NO];
    [[unroll]] for (uint n = 0u; n < NO; n++)
        ao[n] = vec4(0.0);

    const int first_pos = query_pos(i0), last_pos = query_pos(i_last);
    int j_lo = 0, j_hi = int(pc.kv_len);
    if ((pc.flags & FLAG_CAUSAL) != 0u)
        j_hi = min(j_hi, last_pos + 1);
    if (HAS_WINDOW) {
        j_lo = max(j_lo, first_pos - int(WINDOW) + 1);
        if ((pc.flags & FLAG_CAUSAL) == 0u)
            j_hi = min(j_hi, last_pos + int(WINDOW));
    }
    for (int j0 = j_lo; j0 < j_hi; j0 += int(BC)) {
        barrier();
        for (uint e = t; e < BC * DKQ; e += WG) {
            uint j = uint(j0) + e / DKQ;
            sk[e] = j < pc.kv_len
                        ? k_load4(K_OFF + b * pc.k_sb + kvh * pc.k_sh + j * pc.k_st + e % DKQ)
                        : vec4(0.0);
        }
        for (uint e = t; e < BC * DVQ; e += WG) {
            uint j = uint(j0) + e / DVQ;
            sv[e] = j < pc.kv_len
                        ? v_load4(V_OFF + b * pc.v_sb + kvh * pc.v_sh + j * pc.v_st + e % DVQ)
                        : vec4(0.0);
        }
        barrier();
        for (uint e = t; e < BR * BC; e += WG) {
            uint r = e / BC, c = e % BC;
            uint i = i0 + r, j = uint(j0) + c;
            float pk = 0.0;
            if (i < pc.q_len && j < pc.kv_len) {
                float x = 0.0;
                for (uint d = 0u; d < DKQ; d++)
                    x += dot(sq[r * DKQ + d], sk[c * DKQ + d]);
                float p, cc;
                uint mask_row = b * pc.m_sb + h * pc.m_sh + i * pc.m_sq;
                probability(pc.scale * x, b, h, i, j, query_pos(i), mask_row, slse[r], slope, p,
                            cc);
                if (p != 0.0)
                    pk = p * keep_scale(b, h, i, j);
            }
            sp[e] = pk;
        }
        barrier();
        [[unroll]] for (uint n = 0u; n < NO; n++) {
            uint e = t + WG * n;
            if (e < BR * DVQ) {
                uint r = e / DVQ, d = e % DVQ;
                vec4 acc = ao[n];
                for (uint c = 0u; c < BC; c++)
                    acc += sp[r * BC + c] * sv[c * DVQ + d];
                ao[n] = acc;
            }
        }
    }

    // out: the caller's strides (o_*), at the dq slot's offset
    [[unroll]] for (uint n = 0u; n < NO; n++) {
        uint e = t + WG * n, i = i0 + e / DVQ;
        if (e < BR * DVQ && i < pc.q_len)
            out_store4(DQ_OFF + b * pc.o_sb + h * pc.o_sh + i * pc.o_st + e % DVQ, ao[n]);
    }
}
