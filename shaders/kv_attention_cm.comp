// Attention over a KV cache on cooperative matrices (the coopmat family;
// coopmat.glsl): kv_attention_sm.comp's dataflow (keys through the block
// table, the split of the key range, every modifier) with S = Q K^T and P V
// on the matrix units as attention_cm.comp computes them (see there: f16
// tiles, f32 scores and P V through shared memory, O in registers, f32
// operands and dequantized q8_0 / q4_0 blocks split into two halves). It
// serves prefill over the cache, and decode steps whose query heads per KV
// head (GQA packing: row = query * group + head) fill a matrix's rows.
#version 450
#extension GL_GOOGLE_include_directive : require
#include "coopmat.glsl"
#include "kv_attention_main.glsl"
#include "attention_elem.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WORKGROUP_SIZE = 128u; // BR * TPR, whole subgroups
layout(constant_id = 1) const uint DK = 128u; // q/k head dimension
layout(constant_id = 2) const uint BR = 32u;  // rows per workgroup, a multiple of CM_M
layout(constant_id = 3) const uint BC = 32u;  // keys per block, a multiple of CM_N and CM_K
layout(constant_id = 4) const uint TPR = 4u;  // invocations per row
layout(constant_id = 6) const uint DV = 128u; // v/out head dimension

#include "attention_cm.glsl"

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


void main() {
    const uint lid = gl_LocalInvocationID.x;
    const uint g = gl_SubgroupID;
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

    // the queries, scaled into the log2 domain, zeros past the head dim
    for (uint idx = lid; idx < BR * (DKC / 4u); idx += WORKGROUP_SIZE) {
        uint qr_i = idx / (DKC / 4u), c = idx % (DKC / 4u);
        vec4 x = vec4(0.0);
        if (c < DC) {
            KvRow qr = kv_row_info(min(row0 + qr_i, last_row), b, kv_head, shift, DV);
            x = q_quad(qr.q, c) * pc.scale_log2;
        }
        put_q(qr_i * LDQ + 4u * c, x);
    }

    vec4 o[CPT];
    [[unroll]] for (uint u = 0u; u < CPT; u++)
        o[u] = vec4(0.0);
    float m = NEG_INF, l = 0.0;

    for (uint j0 = lo; j0 < key_end; j0 += BC) {
        // ---- pool rows of the block's keys (past the end: the last key,
        // hidden below, so its probability is 0), then K and V
        barrier();
        for (uint idx = lid; idx < BC; idx += WORKGROUP_SIZE)
            kr_s[idx] = key_row(b, kv_head, min(j0 + idx, key_end - 1u));
        barrier();
        for (uint idx = lid; idx < BC * (DKC / 4u); idx += WORKGROUP_SIZE) {
            uint j = idx / (DKC / 4u), c = idx % (DKC / 4u);
            put_k(j * LDQ + 4u * c, c < DC ? k_load4(kr_s[j] * KRQ + c) : vec4(0.0));
        }
        for (uint idx = lid; idx < BC * (DVC / 4u); idx += WORKGROUP_SIZE) {
            uint j = idx / (DVC / 4u), c = idx % (DVC / 4u);
            put_v(j * LDV + 4u * c, c < VC ? v_load4(kr_s[j] * VRQ + c) : vec4(0.0));
        }
        barrier();
        scores(g);
        barrier();
        // ---- the modifiers and the online softmax (as kv_attention_sm.comp)
        float s[KPT];
        float mx = NEG_INF;
        const bool edge = j0 + BC > key_full || (M_WINDOW && j0 < first_all);
        [[unroll]] for (uint kk = 0u; kk < KPT; kk++) {
            uint j = t + TPR * kk;
            s[kk] = NEG_INF;
            if (j < BC) {
                float acc = s_s[r * BC + j];
                bool hidden = edge && (kv_hidden(rw, j0 + j) || j0 + j >= key_end);
                s[kk] = hidden ? NEG_INF : kv_modify(acc, rw, j0 + j);
            }
            mx = max(mx, s[kk]);
        }
        red_s[r * TPR + t] = mx;
        barrier();
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
            if (j < BC) {
                float h = P_SPLIT ? hi_part1(p) : p;
                ph_s[r * LDP + j] = float16_t(h);
                if (P_SPLIT)
                    pl_s[r * LDP + j] = float16_t(lo_part(p, h));
            }
            sum += p;
        }
        l = l * alpha + sum; // this invocation's share; added up at the end
        barrier();
        products(g);
        barrier();
        [[unroll]] for (uint u = 0u; u < CPT; u++) {
            uint c = t + TPR * u;
            if (c < VC) {
                uint at = r * DVC + 4u * c;
                o[u] = o[u] * alpha +
                       vec4(pv_s[at], pv_s[at + 1u], pv_s[at + 2u], pv_s[at + 3u]);
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
