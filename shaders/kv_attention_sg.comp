// Attention over a KV cache, subgroup family (CPU drivers): no shared memory,
// no barriers; the structure of attention_sg.comp (see there) with keys read
// through the block table and an optional split of the key range.
//
// A workgroup is one subgroup owning R consecutive rows (kv_attention_main.glsl)
// of one (batch row, KV head, split); it walks the split's visible keys in
// blocks of BC = SG * C:
//   Q.K^T  lane l scores keys l, l + SG, ... of the block; query chunks are
//          shuffled in, so each K texel a lane fetches serves all R rows;
//   P.V    lane l owns output chunks l, l + SG, ... of every row; each key's
//          probabilities and pool row are shuffled in from the lane that
//          scored it (V has K's layout: the row computed for K serves V).
// Running max and sum are fp32 in the log2 domain. Head dims DK (q, k) and
// DV (v, out) may differ; the pools hold rows padded with zeros to a
// multiple of 8, and a head dim that is not one makes q read and out
// written an element at a time (attention_elem.glsl; push constants then
// count elements).
#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_shuffle : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#include "kv_attention_main.glsl"
#include "attention_elem.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WORKGROUP_SIZE = 8u; // SG * subgroups
layout(constant_id = 1) const uint SG = 8u;  // subgroup size (pipeline requires it)
layout(constant_id = 2) const uint DK = 128u; // q/k head dimension
layout(constant_id = 3) const uint R = 4u;    // rows per subgroup
layout(constant_id = 4) const uint C = 2u;    // keys per lane per block
layout(constant_id = 6) const uint DV = 128u; // v/out head dimension

const uint DKP = (DK + 7u) / 8u * 8u;  // the pools' row lengths
const uint DVP = (DV + 7u) / 8u * 8u;
const bool ELEM = DKP != DK || DVP != DV;
const uint DC = DKP / 4u;              // q/k vec4 chunks per row
const uint VC = DVP / 4u;              // v/out vec4 chunks per row
const uint CPL = (VC + SG - 1u) / SG;  // output chunks per lane
const uint BC = SG * C;                // keys per block
const bool EVEN = DC % SG == 0u;       // every lane owns whole q chunks
const bool VEVEN = VC % SG == 0u;      // every lane owns CPL whole output chunks

DECLARE_ELEM_IN(1, q, Q_DT)
DECLARE_ELEM_OUT(4, o, O_DT)

// Quad `quad` of the q row starting at `row` (a quad or, with ELEM, an
// element index), and the output's store (ifs, not ?:, so that only the
// loads of the kernel's own mode are ever made).
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
    const uint lane = gl_SubgroupInvocationID;
    const uint split = gl_WorkGroupID.x % pc.splits;
    const uint tile = gl_WorkGroupID.x / pc.splits * (WORKGROUP_SIZE / SG) + gl_SubgroupID;
    const uint rows = pc.tokens * pc.group;
    const uint row0 = tile * R;
    if (row0 >= rows)
        return; // the whole subgroup: nothing below needs the others
    const uint kv_head = gl_WorkGroupID.y, b = gl_WorkGroupID.z;
    const uint last_row = min(row0 + R, rows) - 1u;
    const uint len = seq_length(b);
    const int shift = int(len) - int(pc.tokens);
    uint first, first_all, lo, hi, key_end, key_full;
    window_range(row0, last_row, shift, first, first_all);
    split_range(first, len, split, lo, hi);
    visible_range(row0, last_row, shift, lo, hi, key_end, key_full);

    KvRow rw[R];
    vec4 o[R][CPL];
    float m[R], l[R];
    [[unroll]] for (uint r = 0u; r < R; r++) {
        rw[r] = kv_row_info(min(row0 + r, last_row), b, kv_head, shift, DV);
        [[unroll]] for (uint t = 0u; t < CPL; t++)
            o[r][t] = vec4(0.0);
        m[r] = NEG_INF;
        l[r] = 0.0;
    }

    for (uint j0 = lo; j0 < key_end; j0 += BC) {
        // ---- scores of this lane's keys j0 + lane + SG * ci (clamped to a
        // real key: past key_end they are masked and get p = 0); token rows
        // of the pools (K's quads: * KRQ, V's: * VRQ)
        uint k_row[C];
        [[unroll]] for (uint ci = 0u; ci < C; ci++)
            k_row[ci] = key_row(b, kv_head, min(j0 + lane + SG * ci, key_end - 1u));
        float s[R][C];
        [[unroll]] for (uint r = 0u; r < R; r++)
            [[unroll]] for (uint ci = 0u; ci < C; ci++)
                s[r][ci] = 0.0;
        [[dont_unroll]] for (uint c0 = 0u; c0 < DC; c0 += SG) {
            vec4 qc[R]; // this lane's chunk c0 + lane of every row, handed around below
            [[unroll]] for (uint r = 0u; r < R; r++) {
                qc[r] = vec4(0.0);
                if (EVEN || c0 + lane < DC) // ifs, not ?:, so loads stay in bounds
                    qc[r] = q_quad(rw[r].q, c0 + lane);
            }
            [[unroll]] for (uint src = 0u; src < SG; src++) {
                if (EVEN || c0 + src < DC) {
                    vec4 kc[C];
                    [[unroll]] for (uint ci = 0u; ci < C; ci++)
                        kc[ci] = k_load4(k_row[ci] * KRQ + c0 + src);
                    [[unroll]] for (uint r = 0u; r < R; r++) {
                        vec4 qv = subgroupShuffle(qc[r], src);
                        [[unroll]] for (uint ci = 0u; ci < C; ci++)
                            s[r][ci] += dot(qv, kc[ci]);
                    }
                }
            }
        }
        // ---- scale and modifiers; causal, window and range masks only
        // where some key may be hidden
        const bool edge = j0 + BC > key_full || (M_WINDOW && j0 < first_all);
        [[unroll]] for (uint r = 0u; r < R; r++)
            [[unroll]] for (uint ci = 0u; ci < C; ci++) {
                uint j = j0 + lane + SG * ci;
                s[r][ci] = kv_modify(s[r][ci] * pc.scale_log2, rw[r], j);
                if (edge && (kv_hidden(rw[r], j) || j >= key_end))
                    s[r][ci] = NEG_INF;
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
        const uint keys = min(BC, key_end - j0);
        [[dont_unroll]] for (uint ci = 0u; ci < C; ci++) {
            if (SG * ci >= keys)
                break;
            float pl[R]; // this lane's probabilities of key group ci, and its row
            uint rl = k_row[0];
            [[unroll]] for (uint r = 0u; r < R; r++)
                pl[r] = s[r][0];
            [[unroll]] for (uint cj = 1u; cj < C; cj++)
                if (ci == cj) {
                    rl = k_row[cj];
                    [[unroll]] for (uint r = 0u; r < R; r++)
                        pl[r] = s[r][cj];
                }
            [[unroll]] for (uint src = 0u; src < SG; src++) {
                float p[R];
                [[unroll]] for (uint r = 0u; r < R; r++)
                    p[r] = subgroupShuffle(pl[r], src);
                const uint v_row = subgroupShuffle(rl, src) * VRQ;
                [[unroll]] for (uint t = 0u; t < CPL; t++) {
                    uint c = lane + SG * t;
                    vec4 vc = vec4(0.0);
                    if (VEVEN || c < VC)
                        vc = v_load4(v_row + c);
                    [[unroll]] for (uint r = 0u; r < R; r++)
                        o[r][t] += p[r] * vc;
                }
            }
        }
    }

    // ---- one split: normalise and store (no visible key: l = 0 -> zeros);
    // several: the unnormalised row, its max and its sum
    const uint s_off = split_step(split, DV);
    [[unroll]] for (uint r = 0u; r < R; r++) {
        float total = subgroupAdd(l[r]);
        if (row0 + r > last_row)
            continue;
        if (pc.splits == 1u) {
            float inv = kv_finish(rw[r], b, m[r], total, lane == 0u);
            [[unroll]] for (uint t = 0u; t < CPL; t++) {
                uint c = lane + SG * t;
                if (c < VC)
                    o_quad(rw[r].o, c, o[r][t] * inv);
            }
        } else {
            uint base = rw[r].split + s_off;
            [[unroll]] for (uint t = 0u; t < CPL; t++) {
                uint c = lane + SG * t;
                [[unroll]] for (uint e = 0u; e < 4u; e++)
                    if (4u * c + e < DV) // the row holds DV values, then max and sum
                        split_data[base + 4u * c + e] = o[r][t][e];
            }
            if (lane == 0u) {
                split_data[base + DV] = m[r];
                split_data[base + DV + 1u] = total;
            }
        }
    }
}
