// Attention over a KV cache for few rows (decode, T <= 16), subgroup family
// (CPU drivers): the GEMV access pattern of linear_gemv.comp applied twice.
// Same interface, grid, splits and scratch as kv_attention_sg.comp (see
// kv_attention_main.glsl); chosen instead of it where the head dimension
// splits into whole octets (8 elements) per lane.
//
// A workgroup is one subgroup owning R rows of one (batch row, KV head,
// split); it walks the split's visible keys in blocks of SG keys. Every key
// row is read as D / 8 octets; lane l reads octets l, l + SG, ... of each
// key (adjacent lanes on adjacent texels: one contiguous run per key, the
// fastest pattern on lavapipe, see docs/kernels.md) and keeps the matching
// slice of every query row in registers, so nothing is shuffled per element:
//   Q.K^T  each lane forms partial scores of all SG keys x R rows over its
//          slice; a butterfly of subgroupShuffleXor adds them up so that
//          lane l ends with the scores of key j0 + l (SG - 1 shuffles per
//          row and key pair instead of a reduction per score);
//   P.V    each lane accumulates its slice of every output row, the
//          probabilities shuffled in from the lane that owns the key.
// With f16 or bf16 K/V through rgba32ui views (KV_TEX16, KV_TEXBF16) the
// raw texels of a block are fetched first and unpacked while computing: a texel fetch is a call
// on lavapipe, so no unpacked value has to live across one.
// Running max and sum are fp32 in the log2 domain.
#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_shuffle : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#include "kv_attention_main.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WORKGROUP_SIZE = 8u; // == SG
layout(constant_id = 1) const uint SG = 8u;  // subgroup size (pipeline requires it), a power of 2
layout(constant_id = 2) const uint D = 128u; // head dimension, a multiple of 8 * SG
layout(constant_id = 3) const uint R = 4u;   // rows per subgroup
layout(constant_id = 4) const uint UNUSED = 1u; // keeps the sg family's spec layout

const uint DC = D / 4u;        // quads per row
const uint OPL = D / (8u * SG); // octets per lane per key
const uint NK = SG;            // keys per block

#if defined(KV_TEX16)
// Raw octets: one rgba32ui texel of 8 halves, unpacked at use.
#define RAW uvec4
RAW k_raw(uint quad) { return texelFetch(k_tex, int(quad >> 1u)); }
RAW v_raw(uint quad) { return texelFetch(v_tex, int(quad >> 1u)); }
void unpack8(RAW w, out vec4 lo, out vec4 hi) { UNPACK_HALVES8(w, lo, hi); }
vec2 unpack2(RAW w, uint i) { return unpackHalf2x16(w[i]); }
#elif defined(KV_TEXBF16)
// ... of 8 bfloat16 (two shifts or masks a pair: cheaper than halves).
#define RAW uvec4
RAW k_raw(uint quad) { return texelFetch(k_tex, int(quad >> 1u)); }
RAW v_raw(uint quad) { return texelFetch(v_tex, int(quad >> 1u)); }
void unpack8(RAW w, out vec4 lo, out vec4 hi) { UNPACK_BF16x8(w, lo, hi); }
vec2 unpack2(RAW w, uint i) { return BF16_PAIR(w[i]); }
#else
struct Octet {
    vec4 lo, hi;
};
#define RAW Octet
RAW k_raw(uint quad) {
    Octet o;
    k_load8(quad, o.lo, o.hi);
    return o;
}
RAW v_raw(uint quad) {
    Octet o;
    v_load8(quad, o.lo, o.hi);
    return o;
}
void unpack8(RAW w, out vec4 lo, out vec4 hi) {
    lo = w.lo;
    hi = w.hi;
}
vec2 unpack2(RAW w, uint i) { return i < 2u ? (i == 0u ? w.lo.xy : w.lo.zw) : (i == 2u ? w.hi.xy : w.hi.zw); }
#endif

// One butterfly step (skipped at compile time where h >= NK).
#define BUTTERFLY(h)                                                         \
    if ((h) < NK) {                                                          \
        const bool upper = (lane & (h)) != 0u;                               \
        [[unroll]] for (uint i = 0u; i < (h); i++)                           \
            [[unroll]] for (uint r = 0u; r < R; r++) {                       \
                float lo_v = sp[i * R + r], hi_v = sp[(i + (h)) * R + r];    \
                float keep = upper ? hi_v : lo_v;                            \
                float send = upper ? lo_v : hi_v;                            \
                sp[i * R + r] = keep + subgroupShuffleXor(send, (h));        \
            }                                                                \
    }

void main() {
    const uint lane = gl_SubgroupInvocationID;
    const uint split = gl_WorkGroupID.x % pc.splits;
    const uint tile = gl_WorkGroupID.x / pc.splits;
    const uint rows = pc.tokens * pc.group;
    const uint row0 = tile * R;
    if (row0 >= rows)
        return; // the whole subgroup
    const uint kv_head = gl_WorkGroupID.y, b = gl_WorkGroupID.z;
    const uint last_row = min(row0 + R, rows) - 1u;
    const uint len = seq_length(b);
    const int shift = int(len) - int(pc.tokens);
    uint first, first_all, lo, hi, key_end, key_full;
    window_range(row0, last_row, shift, first, first_all);
    split_range(first, len, split, lo, hi);
    visible_range(row0, last_row, shift, lo, hi, key_end, key_full);

    // This lane's slice of every query row: octets lane + SG * t.
    KvRow rw[R];
    vec4 q[R][OPL][2];
    vec4 o[R][OPL][2];
    float m[R], l[R];
    [[unroll]] for (uint r = 0u; r < R; r++) {
        rw[r] = kv_row_info(min(row0 + r, last_row), b, kv_head, shift, D);
        [[unroll]] for (uint t = 0u; t < OPL; t++) {
            uint c = 2u * (lane + SG * t);
            q[r][t][0] = q_load4(rw[r].q + c);
            q[r][t][1] = q_load4(rw[r].q + c + 1u);
            o[r][t][0] = vec4(0.0);
            o[r][t][1] = vec4(0.0);
        }
        m[r] = NEG_INF;
        l[r] = 0.0;
    }

    // Software pipelined: every phase's compute is interleaved with the
    // fetches of the next phase (V of this block during Q.K^T, K of the next
    // block during P.V), so the loads of a texel fetch are in flight while
    // the FMAs run (lavapipe's fetches are calls that stall on memory;
    // figures: docs/kernels.md).
    const float inv_bs = 1.0 / float(pc.block_size);
    // Pool row (quad index) of key j0 + lane, clamped to a real key (past
    // key_end it is masked: p = 0); an empty range reads row 0 (unused).
    uint my_row = key_end > lo ? key_row_fast(b, kv_head, min(lo + lane, key_end - 1u), inv_bs) * DC : 0u;
    RAW kr[NK][OPL];
    [[unroll]] for (uint k = 0u; k < NK; k++) {
        uint row = subgroupShuffle(my_row, k);
        [[unroll]] for (uint t = 0u; t < OPL; t++)
            kr[k][t] = k_raw(row + 2u * (lane + SG * t));
    }
    for (uint j0 = lo; j0 < key_end; j0 += NK) {
        // ---- partial scores over this lane's slice, key by key, each
        // beside the fetch of that key's V octets
        RAW vr[NK][OPL];
        float sp[NK * R];
        [[unroll]] for (uint k = 0u; k < NK; k++) {
            uint row = subgroupShuffle(my_row, k);
            [[unroll]] for (uint t = 0u; t < OPL; t++)
                vr[k][t] = v_raw(row + 2u * (lane + SG * t));
            float acc[R];
            [[unroll]] for (uint r = 0u; r < R; r++)
                acc[r] = 0.0;
            [[unroll]] for (uint t = 0u; t < OPL; t++) {
                vec4 a, c;
                unpack8(kr[k][t], a, c);
                [[unroll]] for (uint r = 0u; r < R; r++) {
                    acc[r] = fma(q[r][t][0].x, a.x, acc[r]);
                    acc[r] = fma(q[r][t][0].y, a.y, acc[r]);
                    acc[r] = fma(q[r][t][0].z, a.z, acc[r]);
                    acc[r] = fma(q[r][t][0].w, a.w, acc[r]);
                    acc[r] = fma(q[r][t][1].x, c.x, acc[r]);
                    acc[r] = fma(q[r][t][1].y, c.y, acc[r]);
                    acc[r] = fma(q[r][t][1].z, c.z, acc[r]);
                    acc[r] = fma(q[r][t][1].w, c.w, acc[r]);
                }
            }
            [[unroll]] for (uint r = 0u; r < R; r++)
                sp[k * R + r] = acc[r];
        }
        // ---- butterfly: after the step with mask h, slot i holds key
        // i + (lane & ~(h - 1) & (SG - 1)) summed over the lanes that differ
        // in bits >= h; at the end slot 0 holds key j0 + lane over all lanes
        // (steps written out: a loop halving h may stay a loop, and sp[]
        // would then be indexed dynamically)
        BUTTERFLY(32u)
        BUTTERFLY(16u)
        BUTTERFLY(8u)
        BUTTERFLY(4u)
        BUTTERFLY(2u)
        BUTTERFLY(1u)
        // ---- scale and modifiers; causal, window and range masks only
        // where some key may be hidden
        const uint j = j0 + lane;
        const bool edge = j0 + NK > key_full || (M_WINDOW && j0 < first_all);
        float s[R];
        [[unroll]] for (uint r = 0u; r < R; r++) {
            s[r] = kv_modify(sp[r] * pc.scale_log2, rw[r], j);
            if (edge && (kv_hidden(rw[r], j) || j >= key_end))
                s[r] = NEG_INF;
        }
        // ---- online softmax; a row that has seen no visible key keeps
        // m = -inf, and m_safe = 0 keeps exp2(-inf - -inf) (NaN) away
        float pk[R][NK];
        [[unroll]] for (uint r = 0u; r < R; r++) {
            float m_new = max(m[r], subgroupMax(s[r]));
            float m_safe = m_new == NEG_INF ? 0.0 : m_new;
            float alpha = exp2(m[r] - m_safe);
            m[r] = m_new;
            float p = exp2(s[r] - m_safe);
            l[r] = l[r] * alpha + p; // per-lane partial sums, added up at the end
            [[unroll]] for (uint t = 0u; t < OPL; t++) {
                o[r][t][0] *= alpha;
                o[r][t][1] *= alpha;
            }
            [[unroll]] for (uint k = 0u; k < NK; k++)
                pk[r][k] = subgroupShuffle(p, k);
        }
        // ---- the next block's rows (clamped: the last trip fetches a real
        // key it does not use)
        my_row = key_row_fast(b, kv_head, min(j0 + NK + lane, key_end - 1u), inv_bs) * DC;
        // ---- O += P V over this lane's slice, one word (2 halves) of every
        // key at a time (each output value loaded and stored once per block:
        // they cannot all stay in registers), beside the next block's K
        [[unroll]] for (uint t = 0u; t < OPL; t++)
            [[unroll]] for (uint w = 0u; w < 4u; w++) {
                // fetches f in [chunk * F / 4 OPL, (chunk + 1) * F / 4 OPL)
                const uint chunk = t * 4u + w;
                [[unroll]] for (uint f = 0u; f < NK * OPL; f++)
                    if (f * 4u * OPL / (NK * OPL) == chunk) // folded: constants
                        kr[f / OPL][f % OPL] = k_raw(subgroupShuffle(my_row, f / OPL) +
                                                     2u * (lane + SG * (f % OPL)));
                vec2 vw[NK];
                [[unroll]] for (uint k = 0u; k < NK; k++)
                    vw[k] = unpack2(vr[k][t], w);
                [[unroll]] for (uint r = 0u; r < R; r++) {
                    vec2 acc = w < 2u ? (w == 0u ? o[r][t][0].xy : o[r][t][0].zw)
                                      : (w == 2u ? o[r][t][1].xy : o[r][t][1].zw);
                    [[unroll]] for (uint k = 0u; k < NK; k++)
                        acc = fma(vec2(pk[r][k]), vw[k], acc);
                    if (w == 0u) o[r][t][0].xy = acc;
                    else if (w == 1u) o[r][t][0].zw = acc;
                    else if (w == 2u) o[r][t][1].xy = acc;
                    else o[r][t][1].zw = acc;
                }
            }
    }

    // ---- one split: normalise and store (no visible key: l = 0 -> zeros);
    // several: the unnormalised row, its max and its sum
    const uint s_off = split_step(split, D);
    [[unroll]] for (uint r = 0u; r < R; r++) {
        float total = subgroupAdd(l[r]);
        if (row0 + r > last_row)
            continue;
        float inv = 0.0;
        if (pc.splits == 1u)
            inv = kv_finish(rw[r], b, m[r], total, lane == 0u);
        [[unroll]] for (uint t = 0u; t < OPL; t++) {
            uint c = 2u * (lane + SG * t);
            if (pc.splits == 1u) {
                o_store4(rw[r].o + c, o[r][t][0] * inv);
                o_store4(rw[r].o + c + 1u, o[r][t][1] * inv);
            } else {
                uint base = rw[r].split + s_off + 4u * c;
                [[unroll]] for (uint e = 0u; e < 4u; e++) {
                    split_data[base + e] = o[r][t][0][e];
                    split_data[base + 4u + e] = o[r][t][1][e];
                }
            }
        }
        if (pc.splits > 1u && lane == 0u) {
            uint base = rw[r].split + s_off;
            split_data[base + D] = m[r];
            split_data[base + D + 1u] = total;
        }
    }
}
