// Attention over a KV cache, shared-memory family (GPUs, and any device
// without subgroup shuffles): no subgroup operations; the structure of
// attention_sm.comp (see there) with keys read through the block table and an
// optional split of the key range.
//
// A workgroup of BR * TPR invocations owns BR consecutive rows
// (kv_attention_main.glsl) of one (batch row, KV head, split); TPR
// invocations serve each row. Per block of BC keys: the pool rows of the
// block's keys are looked up once (BC invocations), the workgroup stages K and
// V in shared memory, invocation t of a row scores keys t, t + TPR, ...,
// the row's max and probabilities go through shared memory, and invocation t
// accumulates output chunks t, t + TPR, ... in registers. Inner loops advance
// several steps per iteration: lavapipe stops all the loops of an invocation
// after 65535 iterations in total. Head dims DK (q, k) and DV (v, out) as in
// kv_attention_sg.comp (padded pool rows; ELEM: q and out by elements).
#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
#include "kv_attention_main.glsl"
#include "attention_elem.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WORKGROUP_SIZE = 64u; // BR * TPR
layout(constant_id = 1) const uint DK = 128u; // q/k head dimension
layout(constant_id = 2) const uint BR = 8u;   // rows per workgroup
layout(constant_id = 3) const uint BC = 16u;  // keys per block
layout(constant_id = 4) const uint TPR = 8u;  // invocations per row
layout(constant_id = 6) const uint DV = 128u; // v/out head dimension

const uint DKP = (DK + 7u) / 8u * 8u;      // the pools' row lengths
const uint DVP = (DV + 7u) / 8u * 8u;
const bool ELEM = DKP != DK || DVP != DV;
const uint DC = DKP / 4u;                  // q/k vec4 chunks per row
const uint VC = DVP / 4u;                  // v/out vec4 chunks per row
const uint CPT = (VC + TPR - 1u) / TPR;    // output chunks per invocation
const uint KPT = (BC + TPR - 1u) / TPR;    // keys scored per invocation
const uint STEP = DC % 8u == 0u ? 8u : 2u; // chunks per dot-product iteration (DC is even)

shared vec4 q_s[BR * DC];
shared vec4 k_s[BC * DC];
shared vec4 v_s[BC * VC];
shared uint kr_s[BC]; // each key's token row in the pools

DECLARE_ELEM_IN(1, q, Q_DT)
DECLARE_ELEM_OUT(4, o, O_DT)

// q's quads and out's stores by mode (see kv_attention_sg.comp).
vec4 q_quad(uint row, uint quad) {
    if (ELEM)
        return q_elem4(row, quad, DK);
    return q_load4(row + quad);
}
void o_quad(uint row, uint quad, vec4 x) {
    if (!ELEM) {
        o_store4(row + quad, x);
    } else if (DV % 8u == 0u) { // out keeps whole aligned quads (the host checks)
        o_store4(row / 4u + quad, x);
    } else {
        [[unroll]] for (uint u = 0u; u < 4u; u++)
            if (4u * quad + u < DV)
                o_store1(row + 4u * quad + u, x[u]);
    }
}
shared float p_s[BR * BC];
shared float red_s[BR * TPR];

void main() {
    const uint lid = gl_LocalInvocationID.x;
    const uint r = lid / TPR, t = lid % TPR;
    const uint split = gl_WorkGroupID.x % pc.splits;
    const uint row0 = gl_WorkGroupID.x / pc.splits * BR;
    const uint rows = pc.tokens * pc.group;
    const uint kv_head = gl_WorkGroupID.y, b = gl_WorkGroupID.z;
    // Every invocation stays to the end: all of them take part in barriers.
    const uint last_row = min(row0 + BR, rows) - 1u;
    const uint len = seq_length(b);
    const int shift = int(len) - int(pc.tokens);
    const KvRow rw = kv_row_info(min(row0 + r, last_row), b, kv_head, shift, DV);
    uint first, first_all, lo, hi, key_end, key_full;
    window_range(row0, last_row, shift, first, first_all);
    split_range(first, len, split, lo, hi);
    visible_range(row0, last_row, shift, lo, hi, key_end, key_full);

    for (uint idx = lid; idx < BR * DC; idx += WORKGROUP_SIZE) {
        KvRow qr = kv_row_info(min(row0 + idx / DC, last_row), b, kv_head, shift, DV);
        q_s[idx] = q_quad(qr.q, idx % DC) * pc.scale_log2;
    }

    vec4 o[CPT];
    [[unroll]] for (uint u = 0u; u < CPT; u++)
        o[u] = vec4(0.0);
    float m = NEG_INF, l = 0.0;

    for (uint j0 = lo; j0 < key_end; j0 += BC) {
        // ---- pool rows of the block's keys (past the end: the last key,
        // masked below and skipped in P.V), then K and V
        barrier(); // the previous block's readers are done (and q_s is written)
        for (uint idx = lid; idx < BC; idx += WORKGROUP_SIZE)
            kr_s[idx] = key_row(b, kv_head, min(j0 + idx, key_end - 1u));
        barrier();
        for (uint idx0 = lid; idx0 < BC * DC; idx0 += 4u * WORKGROUP_SIZE) {
            [[unroll]] for (uint u = 0u; u < 4u; u++) {
                uint idx = idx0 + u * WORKGROUP_SIZE;
                if (idx < BC * DC)
                    k_s[idx] = k_load4(kr_s[idx / DC] * KRQ + idx % DC);
            }
        }
        for (uint idx0 = lid; idx0 < BC * VC; idx0 += 4u * WORKGROUP_SIZE) {
            [[unroll]] for (uint u = 0u; u < 4u; u++) {
                uint idx = idx0 + u * WORKGROUP_SIZE;
                if (idx < BC * VC)
                    v_s[idx] = v_load4(kr_s[idx / VC] * VRQ + idx % VC);
            }
        }
        barrier();
        // ---- scores of keys t, t + TPR, ...
        float s[KPT];
        float mx = NEG_INF;
        const bool edge = j0 + BC > key_full || (M_WINDOW && j0 < first_all);
        [[unroll]] for (uint kk = 0u; kk < KPT; kk++) {
            uint j = t + TPR * kk;
            s[kk] = NEG_INF;
            if (j < BC) {
                float acc = 0.0;
                for (uint c = 0u; c < DC; c += STEP)
                    [[unroll]] for (uint u = 0u; u < STEP; u++)
                        acc += dot(q_s[r * DC + c + u], k_s[j * DC + c + u]);
                bool hidden = edge && (kv_hidden(rw, j0 + j) || j0 + j >= key_end);
                s[kk] = hidden ? NEG_INF : kv_modify(acc, rw, j0 + j);
            }
            mx = max(mx, s[kk]);
        }
        red_s[r * TPR + t] = mx;
        barrier();
        // ---- online softmax (see kv_attention_sg.comp for m_safe)
        [[unroll]] for (uint u = 0u; u < TPR; u++)
            mx = max(mx, red_s[r * TPR + u]);
        float m_new = max(m, mx);
        float m_safe = m_new == NEG_INF ? 0.0 : m_new;
        float alpha = exp2(m - m_safe);
        m = m_new;
        float sum = 0.0;
        [[unroll]] for (uint kk = 0u; kk < KPT; kk++) {
            uint j = t + TPR * kk;
            float p = exp2(s[kk] - m_safe);
            if (j < BC)
                p_s[r * BC + j] = p;
            sum += p;
        }
        l = l * alpha + sum; // this invocation's share; added up at the end
        [[unroll]] for (uint u = 0u; u < CPT; u++)
            o[u] *= alpha;
        barrier();
        // ---- O += P V over the block's real keys
        const uint keys = min(BC, key_end - j0);
        for (uint j0k = 0u; j0k < keys; j0k += 4u) {
            [[unroll]] for (uint jj = 0u; jj < 4u; jj++) {
                uint j = j0k + jj;
                if (j < keys) {
                    float p = p_s[r * BC + j];
                    [[unroll]] for (uint u = 0u; u < CPT; u++) {
                        uint c = t + TPR * u;
                        if (c < VC)
                            o[u] += p * v_s[j * VC + c];
                    }
                }
            }
        }
    }

    // ---- the row's sum; one split: normalise and store (no visible key:
    // l = 0 -> zeros); several: the unnormalised row, its max and its sum
    barrier();
    red_s[r * TPR + t] = l;
    barrier();
    float total = 0.0;
    [[unroll]] for (uint u = 0u; u < TPR; u++)
        total += red_s[r * TPR + u];
    if (row0 + r > last_row)
        return;
    if (pc.splits == 1u) {
        float inv = kv_finish(rw, b, m, total, t == 0u);
        [[unroll]] for (uint u = 0u; u < CPT; u++) {
            uint c = t + TPR * u;
            if (c < VC)
                o_quad(rw.o, c, o[u] * inv);
        }
    } else {
        uint base = rw.split + split_step(split, DV);
        [[unroll]] for (uint u = 0u; u < CPT; u++) {
            uint c = t + TPR * u;
            [[unroll]] for (uint e = 0u; e < 4u; e++)
                if (4u * c + e < DV) // the row holds DV values, then max and sum
                    split_data[base + 4u * c + e] = o[u][e];
        }
        if (t == 0u) {
            split_data[base + DV] = m;
            split_data[base + DV + 1u] = total;
        }
    }
}
