// Attention backward, dq (see attention_bwd.glsl): a workgroup owns BR
// query rows of one (batch row, query head), holds their q and dout in
// shared memory, and walks the keys they can see BC at a time: the tile's
// score gradients dS (recomputed as attention_bwd_dkdv.comp does), then
// dq += dS k in registers (each invocation owns fixed quads of the rows'
// dq). Each element is one invocation's sum in a fixed order.
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
const uint NQ = (BR * DKQ + WG - 1u) / WG; // dq quads per invocation

DECLARE_OUT4(10, dq, OUT_DT)

shared vec4 sk[BC * DKQ], sv[BC * DVQ], sq[BR * DKQ], sg[BR * DVQ];
shared float sds[BR * BC], sdr[BR], slse[BR];

float dot_quads_k(uint a, uint b) { // sq row a . sk row b
    float s = 0.0;
    for (uint d = 0u; d < DKQ; d++)
        s += dot(sq[a * DKQ + d], sk[b * DKQ + d]);
    return s;
}
float dot_quads_v(uint a, uint b) { // sg row a . sv row b
    float s = 0.0;
    for (uint d = 0u; d < DVQ; d++)
        s += dot(sg[a * DVQ + d], sv[b * DVQ + d]);
    return s;
}

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
    for (uint e = t; e < BR * DVQ; e += WG) {
        uint i = i0 + e / DVQ;
        sg[e] = i < pc.q_len ? g_load4(G_OFF + b * pc.g_sb + h * pc.g_sh + i * pc.g_st + e % DVQ)
                             : vec4(0.0);
    }
    for (uint r = t; r < BR; r += WG) {
        uint i = i0 + r;
        float dr = 0.0, lse = NEG_INF;
        if (i < pc.q_len) {
            dr = row_dr(b, h, i, DVQ);
            lse = row_lse(b, h, i);
        }
        sdr[r] = dr;
        slse[r] = lse;
    }
    vec4 aq[NQ];
    [[unroll]] for (uint n = 0u; n < NQ; n++)
        aq[n] = vec4(0.0);

    // The keys any of the rows can see.
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
            float ds = 0.0;
            if (i < pc.q_len && j < pc.kv_len) {
                float p, cc;
                uint mask_row = b * pc.m_sb + h * pc.m_sh + i * pc.m_sq;
                probability(pc.scale * dot_quads_k(r, c), b, h, i, j, query_pos(i), mask_row,
                            slse[r], slope, p, cc);
                if (p != 0.0)
                    ds = p * (keep_scale(b, h, i, j) * dot_quads_v(r, c) - sdr[r]) * cc * pc.scale;
            }
            sds[e] = ds;
        }
        barrier();
        [[unroll]] for (uint n = 0u; n < NQ; n++) {
            uint e = t + WG * n;
            if (e < BR * DKQ) {
                uint r = e / DKQ, d = e % DKQ;
                vec4 acc = aq[n];
                for (uint c = 0u; c < BC; c++)
                    acc += sds[r * BC + c] * sk[c * DKQ + d];
                aq[n] = acc;
            }
        }
    }

    // dq contiguous [B, Hq, Tq, Dk]
    const uint row0 = (b * query_heads() + h) * pc.q_len;
    [[unroll]] for (uint n = 0u; n < NQ; n++) {
        uint e = t + WG * n, i = i0 + e / DKQ;
        if (e < BR * DKQ && i < pc.q_len)
            dq_store4(DQ_OFF + (row0 + i) * DKQ + e % DKQ, aq[n]);
    }
}
