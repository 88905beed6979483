// FlashAttention-2 forward, subgroup family (CPU drivers): no shared memory,
// no barriers; operands move between invocations with subgroupShuffle from
// constant lanes (LAVAPIPE.md: much cheaper than per-lane loads there).
//
// A subgroup owns R consecutive rows (see attention_main.glsl) and walks the
// visible keys in blocks of BC = SG * C:
//   Q.K^T  lanes run along keys: lane l scores keys l, l + SG, ... of the
//          block. Each lane fetches one vec4 chunk of every query row and
//          hands it to the others by shuffles, so each K texel a lane fetches
//          serves all R rows.
//   P.V    lanes run along the head dimension: lane l owns output chunks
//          l, l + SG, ... of every row, kept in registers across the keys;
//          each key's probabilities are shuffled in from the lane that
//          scored it.
// Running max and sum are fp32, in the log2 domain (exp2 with the softmax
// scale and log2(e) folded into the scores). Causally hidden key blocks are
// never visited; only blocks that straddle a boundary pay for masking.
// On lavapipe all the loops of an invocation stop after 65535 iterations in
// total (LP_MAX_TGSI_LOOP_ITERATIONS): a block costs DC / SG + C + 1 of them,
// so one row tile can walk about 150K keys at D 128 (95K at D 256).
#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_shuffle : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#include "attention_main.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WORKGROUP_SIZE = 32u;
layout(constant_id = 1) const uint SG = 8u; // subgroup size (pipeline requires it)
layout(constant_id = 2) const uint D = 128u; // head dimension, a multiple of 8
layout(constant_id = 3) const uint R = 4u;   // rows per subgroup
layout(constant_id = 4) const uint C = 4u;   // keys per lane per block

const uint DC = D / 4u;                // vec4 chunks per row
const uint CPL = (DC + SG - 1u) / SG;  // chunks per lane
const uint BC = SG * C;                // keys per block
const bool EVEN = DC % SG == 0u;       // every lane owns CPL whole chunks

void main() {
    const uint lane = gl_SubgroupInvocationID;
    const uint tile = gl_WorkGroupID.x * (WORKGROUP_SIZE / SG) + gl_SubgroupID;
    const uint rows = pc.q_len * pc.heads;
    const uint row0 = tile * R;
    if (row0 >= rows)
        return; // the whole subgroup: nothing below needs the others
    const uint batch = gl_WorkGroupID.z, kv_head = gl_WorkGroupID.y;
    const uint last_row = min(row0 + R, rows) - 1u;

    Row rw[R];
    vec4 o[R][CPL];
    float m[R], l[R];
    [[unroll]] for (uint r = 0u; r < R; r++) {
        rw[r] = row_info(min(row0 + r, last_row), batch, kv_head);
        [[unroll]] for (uint t = 0u; t < CPL; t++)
            o[r][t] = vec4(0.0);
        m[r] = NEG_INF;
        l[r] = 0.0;
    }

    uint key_end, key_full;
    key_range(row0, last_row, key_end, key_full);
    const bool masks = (pc.flags & (FLAG_MASK | FLAG_KEY_PADDING)) != 0u;
    const uint k_base = pc.k_off + batch * pc.k_sb + kv_head * pc.k_sh;
    const uint v_base = pc.v_off + batch * pc.v_sb + kv_head * pc.v_sh;

    // Loops run over chunks (QK) and key groups (PV) without unrolling; only
    // the loops over source lanes (shuffles need constant lanes) and over a
    // lane's own output chunks (registers need constant indices) unroll.
    // Fully unrolled kernels took lavapipe's JIT minutes to compile.
    for (uint j0 = 0u; j0 < key_end; j0 += BC) {
        // ---- scores of this lane's keys j0 + lane + SG * ci
        uint k_row[C];
        [[unroll]] for (uint ci = 0u; ci < C; ci++)
            k_row[ci] = k_base + min(j0 + lane + SG * ci, pc.kv_len - 1u) * pc.k_st;
        float s[R][C];
        [[unroll]] for (uint r = 0u; r < R; r++)
            [[unroll]] for (uint ci = 0u; ci < C; ci++)
                s[r][ci] = 0.0;
        [[dont_unroll]] for (uint c0 = 0u; c0 < DC; c0 += SG) {
            // this lane's chunk c0 + lane of every row, handed around below
            vec4 qc[R];
            [[unroll]] for (uint r = 0u; r < R; r++) {
                qc[r] = vec4(0.0);
                if (EVEN || c0 + lane < DC) // ifs, not ?:, so loads stay in bounds
                    qc[r] = q_load4(rw[r].q + c0 + lane);
            }
            [[unroll]] for (uint src = 0u; src < SG; src++) {
                if (EVEN || c0 + src < DC) {
                    vec4 kc[C];
                    [[unroll]] for (uint ci = 0u; ci < C; ci++)
                        kc[ci] = k_load4(k_row[ci] + c0 + src);
                    [[unroll]] for (uint r = 0u; r < R; r++) {
                        vec4 qv = subgroupShuffle(qc[r], src);
                        [[unroll]] for (uint ci = 0u; ci < C; ci++)
                            s[r][ci] += dot(qv, kc[ci]);
                    }
                }
            }
        }
        [[unroll]] for (uint r = 0u; r < R; r++)
            [[unroll]] for (uint ci = 0u; ci < C; ci++)
                s[r][ci] *= pc.scale_log2;
        // ---- masks, only where some key of the block may be hidden
        if (masks || j0 + BC > key_full) {
            [[unroll]] for (uint r = 0u; r < R; r++)
                [[unroll]] for (uint ci = 0u; ci < C; ci++)
                    s[r][ci] = masked_score(s[r][ci], rw[r], batch, j0 + lane + SG * ci);
        }
        // ---- online softmax; a row that has seen no visible key keeps
        // m = -inf, and m_safe = 0 keeps exp2(-inf - -inf) (NaN) away
        [[unroll]] for (uint r = 0u; r < R; r++) {
            float mx = s[r][0];
            [[unroll]] for (uint ci = 1u; ci < C; ci++)
                mx = max(mx, s[r][ci]);
            float m_new = max(m[r], subgroupMax(mx));
            float m_safe = m_new == NEG_INF ? 0.0 : m_new;
            float alpha = exp2(m[r] - m_safe);
            m[r] = m_new;
            float sum = 0.0;
            [[unroll]] for (uint ci = 0u; ci < C; ci++) {
                s[r][ci] = exp2(s[r][ci] - m_safe);
                sum += s[r][ci];
            }
            l[r] = l[r] * alpha + sum; // per-lane partial sums, added up at the end
            [[unroll]] for (uint t = 0u; t < CPL; t++)
                o[r][t] *= alpha;
        }
        // ---- O += P V: key j0 + SG * ci + src was scored by lane src
        // Keys past key_end have p = 0 exactly and read a clamped (real) row
        // of V, so the unrolled body needs no per-key condition: lavapipe
        // turns every register written under a condition into a select. (As
        // in any tiled kernel, a hidden key whose V row holds inf or NaN
        // still poisons its block's rows: 0 * inf.)
        const uint keys = min(BC, key_end - j0);
        [[dont_unroll]] for (uint ci = 0u; ci < C; ci++) {
            if (SG * ci >= keys)
                break;
            float pl[R]; // this lane's probabilities of key group ci
            [[unroll]] for (uint r = 0u; r < R; r++) {
                pl[r] = s[r][0];
                [[unroll]] for (uint cj = 1u; cj < C; cj++)
                    if (ci == cj)
                        pl[r] = s[r][cj];
            }
            [[unroll]] for (uint src = 0u; src < SG; src++) {
                float p[R];
                [[unroll]] for (uint r = 0u; r < R; r++)
                    p[r] = subgroupShuffle(pl[r], src);
                const uint v_row = v_base + min(j0 + SG * ci + src, pc.kv_len - 1u) * pc.v_st;
                [[unroll]] for (uint t = 0u; t < CPL; t++) {
                    uint c = lane + SG * t;
                    vec4 vc = vec4(0.0);
                    if (EVEN || c < DC)
                        vc = v_load4(v_row + c);
                    [[unroll]] for (uint r = 0u; r < R; r++)
                        o[r][t] += p[r] * vc;
                }
            }
        }
    }

    // ---- normalise and store; a row with no visible key has l = 0 -> zeros
    [[unroll]] for (uint r = 0u; r < R; r++) {
        float total = subgroupAdd(l[r]);
        float inv = total > 0.0 ? 1.0 / total : 0.0;
        if (row0 + r <= last_row) {
            [[unroll]] for (uint t = 0u; t < CPL; t++) {
                uint c = lane + SG * t;
                if (c < DC)
                    o_store4(rw[r].o + c, o[r][t] * inv);
            }
        }
    }
}
