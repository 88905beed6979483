// FlashAttention-2 forward, subgroup family (CPU drivers): no shared memory,
// no barriers; operands move between invocations with subgroupShuffle from
// constant lanes (on lavapipe much cheaper than per-lane loads).
//
// A subgroup owns R consecutive rows (see attention_main.glsl) and walks the
// visible keys in blocks of BC = SG * C. Inputs are read eight elements
// ("an octet") at a time (load8, see attention_io.glsl):
//   Q.K^T  lanes run along keys: lane l scores keys l, l + SG, ... of the
//          block. Each lane fetches one octet of every query row and hands it
//          to the others by shuffles, so each K octet a lane fetches serves
//          all R rows.
//   P.V    lanes run along the head dimension: lane l owns output octets
//          l, l + SG, ... of every row, kept in registers across the keys;
//          each key's probabilities are shuffled in from the lane that
//          scored it.
// Running max and sum are fp32; scores and the max stay in the natural
// domain and exp(s - m) is exp2((s - m) * log2(e)). With large scores the
// scores' last rounding (not exp2's) bounds the accuracy: folded into the
// log2 domain they were rounded at 1.44 times their magnitude, up to twice
// as coarse (scores near +-70 fared up to 14x worse than PyTorch's f32 on
// some inputs; tests/test_attention_accuracy.c). The dot products are one
// fma chain in element order, as PyTorch's f32 math sums. Key blocks hidden by causality
// or outside the sliding window of every row are never visited; the score
// modifiers (attention_main.glsl) are specialization constants, so a plain
// call compiles none of them.
//
// Shaped for how lavapipe runs it (figures: docs/kernels.md): an `if` runs
// both ways, so the mask and padding loads are compiled in only with MASKS;
// a texel fetch is a call that clobbers every vector register, so each loop
// body fetches all its operands before it computes; a loop-carried value
// costs a select per iteration, so only the key block loop is a loop (the
// key groups inside a block are unrolled). Lavapipe stops all the loops of
// an invocation after 65535 iterations in total (LP_MAX_TGSI_LOOP_ITERATIONS):
// a block costs one of them (DK / (8 SG) + 2 C + 1 should a compiler leave the
// inner loops rolled: one row tile can still walk about 150K keys at D 128).
#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_shuffle : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#include "attention_main.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WORKGROUP_SIZE = 32u;
layout(constant_id = 1) const uint SG = 8u;   // subgroup size (pipeline requires it)
layout(constant_id = 2) const uint DK = 128u; // q/k head dimension
layout(constant_id = 3) const uint R = 16u;   // rows per subgroup
layout(constant_id = 4) const uint C = 2u;    // keys per lane per block
layout(constant_id = 5) const uint RB = 2u;   // rows per P.V register block (divides R)
layout(constant_id = 6) const bool MASKS = false; // additive mask / key padding may be set
layout(constant_id = 7) const uint DV = 128u; // v/out head dimension

// Q.K^T runs over the DK octets, P.V and the output over the DV octets. A
// head dim that is not a multiple of 8 is padded to one with zeros inside
// the kernel, and every row is then read and written element by element
// (ELEM, attention_elem.glsl: offsets and strides count elements).
const uint DKP = (DK + 7u) / 8u * 8u;
const uint DVP = (DV + 7u) / 8u * 8u;
const bool ELEM = DKP != DK || DVP != DV;
const uint DO = DKP / 8u;                // q/k octets per row
const uint OPL = (DO + SG - 1u) / SG;    // q/k octets per lane
const bool EVEN = DO % SG == 0u;         // every lane owns OPL whole q/k octets
const uint VO = DVP / 8u;                // v/out octets per row
const uint VPL = (VO + SG - 1u) / SG;    // output octets per lane
const bool VEVEN = VO % SG == 0u;        // every lane owns VPL whole output octets
const uint BC = SG * C;                  // keys per block

// The octet lane `lane` reads as its t-th, clamped into the row when D
// leaves some lanes without one: they read a real octet for nothing (their
// q is zero and their outputs are never stored), so the fully unrolled key
// loops hold no ifs (ifs split them into many small blocks, which lavapipe
// compiles far more slowly; figures: docs/kernels.md). Their K octets are
// zeroed by a select (spare_k): 0 * inf would make the key's score NaN where
// the owning lane's q_d * inf makes it a proper +-inf.
uint octet(uint lane, uint t) {
    return EVEN ? lane + SG * t : min(lane + SG * t, DO - 1u);
}
uint v_octet(uint lane, uint t) {
    return VEVEN ? lane + SG * t : min(lane + SG * t, VO - 1u);
}
vec4 spare_k(vec4 k, uint lane, uint t) {
    // all(), not &&: glslang turns a short-circuit && into a branch
    return mix(k, vec4(0.0), bvec4(all(bvec2(!EVEN, lane + SG * t >= DO))));
}

// Octet `oct` of the row that starts at `row` (a quad or, with ELEM, an
// element index), and the store of output quad `quad` of a row.
void q_oct(uint row, uint oct, out vec4 lo, out vec4 hi) {
    if (ELEM)
        q_elem8(row, oct, DK, lo, hi);
    else
        q_load8(row + 2u * oct, lo, hi);
}
void k_oct(uint row, uint oct, out vec4 lo, out vec4 hi) {
    if (ELEM)
        k_elem8(row, oct, DK, lo, hi);
    else
        k_load8(row + 2u * oct, lo, hi);
}
void v_oct(uint row, uint oct, out vec4 lo, out vec4 hi) {
    if (ELEM)
        v_elem8(row, oct, DV, lo, hi);
    else
        v_load8(row + 2u * oct, lo, hi);
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
    // Workgroups alternate between the ends of the row range, so any
    // contiguous run of them (lavapipe splits the grid into one chunk per
    // thread) holds as many cheap early rows as expensive late ones.
    const uint wx = gl_WorkGroupID.x, nx = gl_NumWorkGroups.x;
    const uint group_index = (wx & 1u) == 0u ? wx / 2u : nx - 1u - wx / 2u;
    const uint tile = group_index * (WORKGROUP_SIZE / SG) + gl_SubgroupID;
    const uint rows = pc.q_len * dispatch_heads();
    const uint row0 = tile * R;
    if (row0 >= rows)
        return; // the whole subgroup: nothing below needs the others
    const uint batch = gl_WorkGroupID.z, kv_head = gl_WorkGroupID.y;
    const uint last_row = min(row0 + R, rows) - 1u;

    Row rw[R];
    vec4 o[R][VPL][2];
    float m[R], l[R];
    [[unroll]] for (uint r = 0u; r < R; r++) {
        rw[r] = row_info(min(row0 + r, last_row), batch, kv_head);
        [[unroll]] for (uint t = 0u; t < VPL; t++)
            o[r][t][0] = o[r][t][1] = vec4(0.0);
        m[r] = NEG_INF;
        l[r] = 0.0;
    }
    // This lane's octets of every query row, read once, scaled.
    vec4 q[R][OPL][2];
    [[unroll]] for (uint r = 0u; r < R; r++)
        [[unroll]] for (uint t = 0u; t < OPL; t++) {
            q[r][t][0] = q[r][t][1] = vec4(0.0);
            if (EVEN || lane + SG * t < DO) // ifs, not ?:, so loads stay in bounds
                q_oct(rw[r].q, lane + SG * t, q[r][t][0], q[r][t][1]);
            q[r][t][0] *= pc.scale;
            q[r][t][1] *= pc.scale;
        }

    uint key_begin, key_end, key_full;
    key_range(row0, last_row, key_begin, key_end, key_full);
    const uint k_base = pc.k_off + batch * pc.k_sb + kv_head * pc.k_sh;
    const uint v_base = pc.v_off + batch * pc.v_sb + kv_head * pc.v_sh;

    for (uint j0 = key_begin; j0 < key_end; j0 += BC) {
        // ---- scores: key group ci (keys j0 + SG * ci + kk) at a time. Every
        // lane takes its octets of the SG keys' rows, forms its partial dot
        // with each row, and a butterfly of shuffles adds the partials up
        // and transposes them: lane kk ends with key kk's score.
        float s[R][C];
        [[unroll]] for (uint r = 0u; r < R; r++)
            [[unroll]] for (uint ci = 0u; ci < C; ci++)
                s[r][ci] = 0.0;
        [[unroll]] for (uint ci = 0u; ci < C; ci++) {
            vec4 k[SG][OPL][2];
            [[unroll]] for (uint kk = 0u; kk < SG; kk++) {
                const uint k_row = k_base + min(j0 + SG * ci + kk, pc.kv_len - 1u) * pc.k_st;
                [[unroll]] for (uint t = 0u; t < OPL; t++) {
                    k_oct(k_row, octet(lane, t), k[kk][t][0], k[kk][t][1]);
                    k[kk][t][0] = spare_k(k[kk][t][0], lane, t);
                    k[kk][t][1] = spare_k(k[kk][t][1], lane, t);
                }
            }
            [[unroll]] for (uint r = 0u; r < R; r++) {
                float part[64]; // SG of them (subgroups up to 64 lanes)
                [[unroll]] for (uint kk = 0u; kk < 64u; kk++) {
                    part[kk] = 0.0;
                    if (kk >= SG)
                        continue;
                    float a = 0.0;
                    [[unroll]] for (uint t = 0u; t < OPL; t++)
                        [[unroll]] for (uint h = 0u; h < 2u; h++) {
                            a = fma(q[r][t][h].x, k[kk][t][h].x, a);
                            a = fma(q[r][t][h].y, k[kk][t][h].y, a);
                            a = fma(q[r][t][h].z, k[kk][t][h].z, a);
                            a = fma(q[r][t][h].w, k[kk][t][h].w, a);
                        }
                    part[kk] = a;
                }
                // SG vectors -> one: each stage pairs vectors n apart; lanes
                // with bit n keep the second, the others the first, and each
                // adds what its partner lane sent
                [[unroll]] for (uint i = 0u; i < 6u; i++) {
                    const uint n = 32u >> i; // constant once unrolled
                    [[unroll]] for (uint v = 0u; v < 32u; v++)
                        if (v < n && n < SG) {
                            bool upper = (lane & n) != 0u;
                            float keep = upper ? part[v + n] : part[v];
                            float send = upper ? part[v] : part[v + n];
                            part[v] = keep + subgroupShuffleXor(send, n);
                        }
                }
                [[unroll]] for (uint cj = 0u; cj < C; cj++)
                    if (cj == ci)
                        s[r][cj] = part[0];
            }
        }
        // ---- hide causal, windowed and past-the-end keys by arithmetic
        // (cheap); the additive mask and key padding only when compiled in;
        // softcap and ALiBi only when specialized in
        [[unroll]] for (uint r = 0u; r < R; r++)
            [[unroll]] for (uint ci = 0u; ci < C; ci++)
                s[r][ci] = final_score(s[r][ci], rw[r], batch, j0 + lane + SG * ci, MASKS);
        // ---- online softmax; a row that has seen no visible key keeps
        // m = -inf, and m_safe = 0 keeps exp2(-inf - -inf) (NaN) away
        [[unroll]] for (uint r = 0u; r < R; r++) {
            float mx = s[r][0];
            [[unroll]] for (uint ci = 1u; ci < C; ci++)
                mx = max(mx, s[r][ci]);
            // butterfly of shuffles, not subgroupMax (a loop over the lanes
            // on lavapipe; figures: docs/kernels.md)
            [[unroll]] for (uint i = 0u; i < 7u; i++) {
                const uint n = 64u >> i;
                if (n < SG)
                    mx = max(mx, subgroupShuffleXor(mx, n));
            }
            float m_new = max(m[r], mx);
            float m_safe = m_new == NEG_INF ? 0.0 : m_new;
            float alpha = exp2((m[r] - m_safe) * LOG2E);
            m[r] = m_new;
            float sum = 0.0;
            [[unroll]] for (uint ci = 0u; ci < C; ci++) {
                s[r][ci] = exp2((s[r][ci] - m_safe) * LOG2E);
                sum += s[r][ci];
            }
            l[r] = l[r] * alpha + sum; // per-lane partial sums, added up at the end
            [[unroll]] for (uint t = 0u; t < VPL; t++) {
                o[r][t][0] *= alpha;
                o[r][t][1] *= alpha;
            }
        }
        // ---- O += P V: key j0 + SG * ci + src was scored by lane src.
        // Keys past key_end have p = 0 exactly and read a clamped (real) row
        // of V, so the body needs no per-key condition, and key groups past
        // the end are not skipped either (that `if` would run both ways on
        // lavapipe anyway). (As in any tiled kernel, a hidden key whose V
        // row holds inf or NaN still poisons its block's rows: 0 * inf.)
        [[unroll]] for (uint ci = 0u; ci < C; ci++) {
            vec4 v[SG][VPL][2];
            [[unroll]] for (uint src = 0u; src < SG; src++) {
                const uint v_row = v_base + min(j0 + SG * ci + src, pc.kv_len - 1u) * pc.v_st;
                [[unroll]] for (uint t = 0u; t < VPL; t++)
                    v_oct(v_row, v_octet(lane, t), v[src][t][0], v[src][t][1]);
            }
            [[unroll]] for (uint r0 = 0u; r0 < R; r0 += RB) {
                float p[RB][SG];
                [[unroll]] for (uint rr = 0u; rr < RB; rr++) {
                    float pl = s[r0 + rr][0]; // this lane's probability of key group ci
                    [[unroll]] for (uint cj = 1u; cj < C; cj++)
                        if (ci == cj)
                            pl = s[r0 + rr][cj];
                    [[unroll]] for (uint src = 0u; src < SG; src++)
                        p[rr][src] = subgroupShuffle(pl, src);
                }
                [[unroll]] for (uint t = 0u; t < VPL; t++)
                    [[unroll]] for (uint h = 0u; h < 2u; h++)
                        [[unroll]] for (uint src = 0u; src < SG; src++)
                            [[unroll]] for (uint rr = 0u; rr < RB; rr++)
                                o[r0 + rr][t][h] = fma(vec4(p[rr][src]), v[src][t][h], o[r0 + rr][t][h]);
            }
        }
    }

    // ---- normalise (with the sink) and store, and the LSE; a row with no
    // visible key has l = 0 -> zeros
    [[unroll]] for (uint r = 0u; r < R; r++) {
        float total = subgroupAdd(l[r]);
        float inv = row_finish(rw[r], m[r], total, lane == 0u && row0 + r <= last_row);
        if (row0 + r <= last_row) {
            [[unroll]] for (uint t = 0u; t < VPL; t++) {
                uint c = lane + SG * t;
                if (c < VO) {
                    o_quad(rw[r].o, 2u * c, o[r][t][0] * inv);
                    o_quad(rw[r].o, 2u * c + 1u, o[r][t][1] * inv);
                }
            }
        }
    }
}
