// FlashAttention-2 forward on cooperative matrices (the coopmat family;
// coopmat.glsl): the shared-memory family's dataflow (attention_sm.comp) with
// both products on the device's matrix units.
//
// A workgroup of NSG subgroups (WORKGROUP_SIZE = BR * TPR invocations) owns
// BR consecutive rows (attention_main.glsl). The rows' (pre-scaled) queries
// sit in shared memory as float16_t from the start; per block of BC keys:
//   1. the workgroup stages the block's K and V as float16_t;
//   2. S = Q K^T: the (BR / CM_M) x (BC / CM_N) matrices of S are shared out
//      round-robin among the subgroups and stored to shared memory (f32);
//   3. TPR invocations per row apply the modifiers (softcap, masks, window,
//      ALiBi) to their keys' scores, find the row's max through shared memory
//      and write the probabilities (f16) - the online softmax is f32;
//   4. P V: the (BR / CM_M) x (DVC / CM_N) matrices of the block's output,
//      round-robin again, to shared memory (f32), which each invocation adds
//      to its output chunks after the rescale (O stays in registers, f32).
// Operands f16 cannot hold (f32 Q, K, V and, for an f32 output, P) are split
// as in linear_cm.comp (coopmat.glsl: hi_part, lo_part), the hi.lo + lo.hi
// products in accumulators of their own. Head dims are
// padded with zeros to whole matrices (DKC, DVC).
#version 450
#extension GL_GOOGLE_include_directive : require
#include "coopmat.glsl"
#include "attention_main.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WORKGROUP_SIZE = 128u; // BR * TPR, whole subgroups
layout(constant_id = 1) const uint DK = 128u; // q/k head dimension
layout(constant_id = 2) const uint BR = 32u;  // rows per workgroup, a multiple of CM_M
layout(constant_id = 3) const uint BC = 32u;  // keys per block, a multiple of CM_N and CM_K
layout(constant_id = 4) const uint TPR = 4u;  // invocations per row
layout(constant_id = 5) const uint DV = 128u; // v/out head dimension

#include "attention_cm.glsl"

// Quads of a row and the output's store, as attention_sm.comp reads them.
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
    } else if (DV % 8u == 0u) {
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
    const uint rows = pc.q_len * dispatch_heads();
    const uint row0 = gl_WorkGroupID.x * BR;
    const uint batch = gl_WorkGroupID.z, kv_head = gl_WorkGroupID.y;
    // Every invocation stays to the end: all of them take part in barriers.
    const uint last_row = min(row0 + BR, rows) - 1u;
    const Row rw = row_info(min(row0 + r, last_row), batch, kv_head);

    // the queries, scaled, zeros past the head dim
    for (uint idx = lid; idx < BR * (DKC / 4u); idx += WORKGROUP_SIZE) {
        uint qr_i = idx / (DKC / 4u), c = idx % (DKC / 4u);
        vec4 x = vec4(0.0);
        if (c < DC) {
            Row qr = row_info(min(row0 + qr_i, last_row), batch, kv_head);
            x = q_quad(qr.q, c) * pc.scale;
        }
        put_q(qr_i * LDQ + 4u * c, x);
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
        // ---- stage K and V (keys past the end repeat the last one: hidden
        // below, so their probabilities are 0)
        barrier();
        for (uint idx = lid; idx < BC * (DKC / 4u); idx += WORKGROUP_SIZE) {
            uint j = idx / (DKC / 4u), c = idx % (DKC / 4u);
            uint key = min(j0 + j, pc.kv_len - 1u);
            put_k(j * LDQ + 4u * c, c < DC ? k_quad(k_base + key * pc.k_st, c) : vec4(0.0));
        }
        for (uint idx = lid; idx < BC * (DVC / 4u); idx += WORKGROUP_SIZE) {
            uint j = idx / (DVC / 4u), c = idx % (DVC / 4u);
            uint key = min(j0 + j, pc.kv_len - 1u);
            put_v(j * LDV + 4u * c, c < VC ? v_quad(v_base + key * pc.v_st, c) : vec4(0.0));
        }
        barrier();
        scores(g);
        barrier();
        // ---- the modifiers and the online softmax (as attention_sm.comp)
        float s[KPT];
        float mx = NEG_INF;
        const bool edge = masks || j0 + BC > key_full || HAS_WINDOW;
        [[unroll]] for (uint kk = 0u; kk < KPT; kk++) {
            uint j = t + TPR * kk;
            s[kk] = NEG_INF;
            if (j < BC) {
                float acc = s_s[r * BC + j];
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
