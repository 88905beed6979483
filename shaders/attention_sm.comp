// FlashAttention-2 forward, shared-memory family (GPUs, and any device
// without subgroup shuffles): no subgroup operations at all.
//
// A workgroup of BR * TPR invocations owns BR consecutive rows (see
// attention_main.glsl); TPR invocations serve each row. Per block of BC keys:
//   1. the workgroup stages the block's K and V in shared memory;
//   2. invocation t of a row scores keys t, t + TPR, ... against the row's
//      (pre-scaled) query, which sits in shared memory since the start;
//   3. the row's max goes through shared memory, the probabilities too;
//   4. invocation t accumulates output chunks t, t + TPR, ... of the row in
//      registers (O never leaves them until the end).
// Running max and sum are fp32, scores in the natural domain (see
// attention_sg.comp); key blocks hidden by causality or outside every row's
// sliding window are never loaded (the loop bounds stop before them). Inner
// loops advance several steps per iteration: lavapipe stops all the loops of
// an invocation after 65535 iterations in total.
#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
#include "attention_main.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WORKGROUP_SIZE = 64u; // BR * TPR
layout(constant_id = 1) const uint DK = 128u; // q/k head dimension
layout(constant_id = 2) const uint BR = 8u;  // rows per workgroup
layout(constant_id = 3) const uint BC = 16u; // keys per block
layout(constant_id = 4) const uint TPR = 8u; // invocations per row
layout(constant_id = 5) const uint DV = 128u; // v/out head dimension

// Head dims that are not multiples of 8: padded with zeros inside the
// kernel, rows read and written element by element (see attention_sg.comp).
const uint DKP = (DK + 7u) / 8u * 8u;
const uint DVP = (DV + 7u) / 8u * 8u;
const bool ELEM = DKP != DK || DVP != DV;
const uint DC = DKP / 4u;                // q/k vec4 chunks per row
const uint VC = DVP / 4u;                // v/out vec4 chunks per row
const uint CPT = (VC + TPR - 1u) / TPR;  // output chunks per invocation
const uint KPT = (BC + TPR - 1u) / TPR;  // keys scored per invocation
const uint STEP = DC % 8u == 0u ? 8u : 2u; // chunks per dot-product iteration (DC is even)

shared vec4 q_s[BR * DC];
shared vec4 k_s[BC * DC];
shared vec4 v_s[BC * VC];
shared float p_s[BR * BC];
shared float red_s[BR * TPR];

// Quad `quad` of the row that starts at `row` (a quad or, with ELEM, an
// element index), and its store for the output (ifs, not ?:, so that only
// the loads of the kernel's own mode are ever made).
vec4 q_quad(uint row, uint quad) {
    if (ELEM)
        return q_elem4(row, quad, DK);
    return q_load4(row + quad);
}
vec4 k_quad(uint row, uint quad) {
    if (ELEM)
        return k_elem4(row, quad, DK);
    return k_load4(row + quad);
}
vec4 v_quad(uint row, uint quad) {
    if (ELEM)
        return v_elem4(row, quad, DV);
    return v_load4(row + quad);
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
    const uint r = lid / TPR, t = lid % TPR;
    const uint rows = pc.q_len * dispatch_heads();
    const uint row0 = gl_WorkGroupID.x * BR;
    const uint batch = gl_WorkGroupID.z, kv_head = gl_WorkGroupID.y;
    // Every invocation stays to the end: all of them take part in barriers.
    const uint last_row = min(row0 + BR, rows) - 1u;
    const Row rw = row_info(min(row0 + r, last_row), batch, kv_head);

    for (uint idx = lid; idx < BR * DC; idx += WORKGROUP_SIZE) {
        Row qr = row_info(min(row0 + idx / DC, last_row), batch, kv_head);
        q_s[idx] = q_quad(qr.q, idx % DC) * pc.scale;
    }

    uint key_begin, key_end, key_full;
    key_range(row0, last_row, key_begin, key_end, key_full);
    const bool masks = (pc.flags & (FLAG_MASK | FLAG_KEY_PADDING)) != 0u;
    const uint k_base = pc.k_off + batch * pc.k_sb + kv_head * pc.k_sh;
    const uint v_base = pc.v_off + batch * pc.v_sb + kv_head * pc.v_sh;

    vec4 o[CPT];
    [[unroll]] for (uint u = 0u; u < CPT; u++)
        o[u] = vec4(0.0);
    float m = NEG_INF, l = 0.0;

    for (uint j0 = key_begin; j0 < key_end; j0 += BC) {
        // ---- stage K and V (keys past the end repeat the last one; they
        // are masked below and skipped in P.V)
        barrier(); // the previous block's readers are done (and q_s is written)
        for (uint idx = lid; idx < BC * DC; idx += WORKGROUP_SIZE) {
            uint key = min(j0 + idx / DC, pc.kv_len - 1u);
            k_s[idx] = k_quad(k_base + key * pc.k_st, idx % DC);
        }
        for (uint idx = lid; idx < BC * VC; idx += WORKGROUP_SIZE) {
            uint key = min(j0 + idx / VC, pc.kv_len - 1u);
            v_s[idx] = v_quad(v_base + key * pc.v_st, idx % VC);
        }
        barrier();
        // ---- scores of keys t, t + TPR, ...
        float s[KPT];
        float mx = NEG_INF;
        const bool edge = masks || j0 + BC > key_full || HAS_WINDOW;
        [[unroll]] for (uint kk = 0u; kk < KPT; kk++) {
            uint j = t + TPR * kk;
            s[kk] = NEG_INF;
            if (j < BC) {
                float acc = 0.0;
                for (uint c = 0u; c < DC; c += STEP)
                    [[unroll]] for (uint u = 0u; u < STEP; u++) {
                        // one chain of fmas in element order, as the
                        // subgroup kernel (and PyTorch's f32 math) sums
                        vec4 qv = q_s[r * DC + c + u], kv = k_s[j * DC + c + u];
                        acc = fma(qv.x, kv.x, acc);
                        acc = fma(qv.y, kv.y, acc);
                        acc = fma(qv.z, kv.z, acc);
                        acc = fma(qv.w, kv.w, acc);
                    }
                if (HAS_SOFTCAP)
                    acc = softcap_log2(acc, SOFTCAP);
                s[kk] = edge ? masked_score(acc, rw, batch, j0 + j) : acc;
                if (HAS_ALIBI)
                    s[kk] += alibi_log2(rw.slope, rw.pos, j0 + j);
            }
            mx = max(mx, s[kk]);
        }
        red_s[r * TPR + t] = mx;
        barrier();
        // ---- online softmax (see attention_sg.comp for m_safe)
        [[unroll]] for (uint u = 0u; u < TPR; u++)
            mx = max(mx, red_s[r * TPR + u]);
        float m_new = max(m, mx);
        float m_safe = m_new == NEG_INF ? 0.0 : m_new;
        float alpha = exp2((m - m_safe) * LOG2E);
        m = m_new;
        float sum = 0.0;
        [[unroll]] for (uint kk = 0u; kk < KPT; kk++) {
            uint j = t + TPR * kk;
            float p = exp2((s[kk] - m_safe) * LOG2E);
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

    // ---- the row's sum, normalise, store (no visible key: l = 0 -> zeros)
    barrier();
    red_s[r * TPR + t] = l;
    barrier();
    float total = 0.0;
    [[unroll]] for (uint u = 0u; u < TPR; u++)
        total += red_s[r * TPR + u];
    float inv = row_finish(rw, m, total, t == 0u && row0 + r <= last_row);
    if (row0 + r <= last_row) {
        [[unroll]] for (uint u = 0u; u < CPT; u++) {
            uint c = t + TPR * u;
            if (c < VC)
                o_quad(rw.o, c, o[u] * inv);
        }
    }
}
