// Attention backward, dk and dv (see attention_bwd.glsl): a workgroup owns
// BC keys of one (batch row, KV head) and walks the query rows of every
// head of its group that can see them, BR at a time, through shared
// memory: the rows' q and dout, the tile's probabilities P' (after
// dropout) and score gradients, then dv += P'^T dout and dk += dS^T q in
// registers (each invocation owns fixed quads of the tile's dk and dv).
// Each element is one invocation's sum in a fixed order: no atomics.
#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
#include "attention_bwd.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG = 64u;
layout(constant_id = 1) const uint BR = 16u; // query rows per step
layout(constant_id = 2) const uint BC = 16u; // keys per workgroup
layout(constant_id = 3) const uint DK = 64u; // multiples of 4
layout(constant_id = 4) const uint DV = 64u;
const uint DKQ = DK / 4u, DVQ = DV / 4u;
const uint NK = (BC * DKQ + WG - 1u) / WG; // dk quads per invocation
const uint NV = (BC * DVQ + WG - 1u) / WG;

DECLARE_OUT4(10, dk, OUT_DT)
DECLARE_OUT4(11, dv, OUT_DT)

shared vec4 sk[BC * DKQ], sv[BC * DVQ], sq[BR * DKQ], sg[BR * DVQ];
shared float sp[BR * BC], sds[BR * BC], sdr[BR], slse[BR];

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
    const uint b = gl_WorkGroupID.z, kvh = gl_WorkGroupID.y, key0 = gl_WorkGroupID.x * BC;
    const uint group = group_size(), kv_heads = pc.heads >> 16u;
    const uint key_last = min(key0 + BC, pc.kv_len) - 1u;
    for (uint e = t; e < BC * DKQ; e += WG) {
        uint j = key0 + e / DKQ;
        sk[e] = j < pc.kv_len ? k_load4(K_OFF + b * pc.k_sb + kvh * pc.k_sh + j * pc.k_st + e % DKQ)
                              : vec4(0.0);
    }
    for (uint e = t; e < BC * DVQ; e += WG) {
        uint j = key0 + e / DVQ;
        sv[e] = j < pc.kv_len ? v_load4(V_OFF + b * pc.v_sb + kvh * pc.v_sh + j * pc.v_st + e % DVQ)
                              : vec4(0.0);
    }
    vec4 ak[NK], av[NV];
    [[unroll]] for (uint n = 0u; n < NK; n++)
        ak[n] = vec4(0.0);
    [[unroll]] for (uint n = 0u; n < NV; n++)
        av[n] = vec4(0.0);

    // The query rows that can see a key of the tile: pos(i) = i + shift.
    const int shift = query_pos(0u);
    int i_lo = 0, i_hi = int(pc.q_len);
    if ((pc.flags & FLAG_CAUSAL) != 0u)
        i_lo = max(i_lo, int(key0) - shift);
    if (HAS_WINDOW) {
        i_hi = min(i_hi, int(key_last) + int(WINDOW) - shift);
        if ((pc.flags & FLAG_CAUSAL) == 0u)
            i_lo = max(i_lo, int(key0) - int(WINDOW) + 1 - shift);
    }
    for (uint hh = 0u; hh < group; hh++) {
        const uint h = kvh * group + hh;
        const float slope = head_slope(h);
        for (int i0 = i_lo; i0 < i_hi; i0 += int(BR)) {
            barrier();
            for (uint e = t; e < BR * DKQ; e += WG) {
                uint i = uint(i0) + e / DKQ;
                sq[e] = i < pc.q_len
                            ? q_load4(Q_OFF + b * pc.q_sb + h * pc.q_sh + i * pc.q_st + e % DKQ)
                            : vec4(0.0);
            }
            for (uint e = t; e < BR * DVQ; e += WG) {
                uint i = uint(i0) + e / DVQ;
                sg[e] = i < pc.q_len
                            ? g_load4(G_OFF + b * pc.g_sb + h * pc.g_sh + i * pc.g_st + e % DVQ)
                            : vec4(0.0);
            }
            for (uint r = t; r < BR; r += WG) {
                uint i = uint(i0) + r;
                float dr = 0.0, lse = NEG_INF;
                if (i < pc.q_len) {
                    dr = row_dr(b, h, i, DVQ);
                    lse = row_lse(b, h, i);
                }
                sdr[r] = dr;
                slse[r] = lse;
            }
            barrier();
            for (uint e = t; e < BR * BC; e += WG) {
                uint r = e / BC, c = e % BC;
                uint i = uint(i0) + r, j = key0 + c;
                float pk = 0.0, ds = 0.0;
                if (i < pc.q_len && j < pc.kv_len) {
                    float p, cc;
                    uint mask_row = b * pc.m_sb + h * pc.m_sh + i * pc.m_sq;
                    probability(pc.scale * dot_quads_k(r, c), b, h, i, j, query_pos(i), mask_row,
                                slse[r], slope, p, cc);
                    if (p != 0.0) {
                        float z = keep_scale(b, h, i, j);
                        pk = p * z;
                        ds = p * (z * dot_quads_v(r, c) - sdr[r]) * cc * pc.scale;
                    }
                }
                sp[e] = pk;
                sds[e] = ds;
            }
            barrier();
            [[unroll]] for (uint n = 0u; n < NK; n++) {
                uint e = t + WG * n;
                if (e < BC * DKQ) {
                    uint c = e / DKQ, d = e % DKQ;
                    vec4 acc = ak[n];
                    for (uint r = 0u; r < BR; r++)
                        acc += sds[r * BC + c] * sq[r * DKQ + d];
                    ak[n] = acc;
                }
            }
            [[unroll]] for (uint n = 0u; n < NV; n++) {
                uint e = t + WG * n;
                if (e < BC * DVQ) {
                    uint c = e / DVQ, d = e % DVQ;
                    vec4 acc = av[n];
                    for (uint r = 0u; r < BR; r++)
                        acc += sp[r * BC + c] * sg[r * DVQ + d];
                    av[n] = acc;
                }
            }
        }
    }

    // dk, dv contiguous [B, Hkv, Tk, D]
    const uint row0 = (b * kv_heads + kvh) * pc.kv_len;
    [[unroll]] for (uint n = 0u; n < NK; n++) {
        uint e = t + WG * n, j = key0 + e / DKQ;
        if (e < BC * DKQ && j < pc.kv_len)
            dk_store4(DK_OFF + (row0 + j) * DKQ + e % DKQ, ak[n]);
    }
    [[unroll]] for (uint n = 0u; n < NV; n++) {
        uint e = t + WG * n, j = key0 + e / DVQ;
        if (e < BC * DVQ && j < pc.kv_len)
            dv_store4(DV_OFF + (row0 + j) * DVQ + e % DVQ, av[n]);
    }
}
