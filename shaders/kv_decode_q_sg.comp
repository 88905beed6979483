// Attention over a quantized KV cache (QF: 0 q8_0, 1 q4_0, 2 q4_1, 3 q5_0,
// 4 q5_1, 5 iq4_nl; layouts: tensor_io.glsl) for few
// rows (decode, T <= 16), subgroup family, through rgba32ui texel views of
// the pools. Same interface, grid, splits and scratch as kv_attention_sg.comp
// (see kv_attention_main.glsl).
//
// ggml's blocks (34, 18, 20, 22 or 24 bytes) fall on a 16-byte texel only
// every 8 blocks, so the unit of this kernel is a group of 8 blocks: 256
// values, 17 texels (q8_0), 9 (q4_0, iq4_nl), 10 (q4_1), 11 (q5_0) or 12
// (q5_1), KPG = 256 / D whole keys (D is 64, 128 or 256;
// the cache's pages hold a multiple of KPG keys, so a group never
// straddles two). Lane l owns group l of every block of SG groups: it
// fetches the group's texels, finds each block's scale and words at fixed
// places in them, and so forms whole scores of its KPG keys against q (every
// row of q in every lane: no shuffle, no reduction per score). P.V the same
// way: each lane adds its keys' values into its own copy of the output rows,
// and the copies are added across the subgroup once, at the end.
//
// The running max of a row moves only when a block's max passes it by more
// than LAZY (log2 domain): the probabilities stay below 2^LAZY, and the
// output copies are rescaled a few times per sequence instead of every
// block. Dequantization is folded into the sums: d * sum(q_i x_i) for a
// score, (p d) q_i for a value; the offset of q4_0 (8) and q5_0 (16) and
// the minimum m of q4_1 and q5_1 once per block (through the sum of q over
// a block, and the sums of p d and p m over a block's keys).
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
layout(constant_id = 2) const uint D = 128u; // head dimension: 64, 128 or 256
layout(constant_id = 3) const uint R = 4u;   // rows per subgroup
layout(constant_id = 4) const uint GPL = 1u; // groups per lane (1, 2 or 4)

const uint BLOCK_BYTES = QUANT_BLOCK_BYTES(QF);
// the nibble formats' fields: nibbles at QS_OFF; a fifth bit per value in
// the word at QH_OFF (q5_0, q5_1); the minimum's f16 at byte 2 (q4_1,
// q5_1); the offset subtracted from q (q4_0 8, q5_0 16)
#define NIBBLES (QF != 0)
#define FIFTH (QF == 3 || QF == 4)
#define HAS_MIN (QF == 2 || QF == 4)
#define HAS_OFFSET (QF == 1 || QF == 3)
const uint QS_OFF = QF == 2 ? 4u : QF == 3 ? 6u : QF == 4 ? 8u : 2u;
const uint QH_OFF = QF == 3 ? 2u : 4u;
const float OFFSET = QF == 3 ? 16.0 : 8.0;
const uint GT = BLOCK_BYTES / 2u; // texels of a group of 8 blocks
const uint KPG = 256u / D;        // keys of a group
const uint KPL = KPG * GPL;       // keys of a lane
const uint BPK = D / 32u;         // blocks of a key
const uint DQ = D / 4u;           // quads of a row
const uint NK = SG * KPL;         // keys of a block
const float LAZY = 8.0;

// The 32-bit word at even byte o_ of the group whose texels start at t_[i_]
// (two words joined where it straddles one), and the f16 scale at even byte
// o_. Key kk of a lane is key kk % KPG of its group kk / KPG: KOFF is where
// its block bb starts.
#define GWORD_AT(t_, i_, o_) t_[(i_) + ((o_) >> 4u)][((o_) >> 2u) & 3u]
#define GWORD(t_, i_, o_)                                                            \
    (((o_) & 2u) == 0u ? GWORD_AT(t_, i_, o_)                                         \
                       : (GWORD_AT(t_, i_, (o_) - 2u) >> 16u) |                       \
                             (GWORD_AT(t_, i_, (o_) + 2u) << 16u))
#define GSCALE(t_, i_, o_) unpackHalf2x16(GWORD_AT(t_, i_, o_) >> (((o_) & 2u) * 8u)).x
#define GBASE(kk_) (((kk_) / KPG) * GT)
#define KOFF(kk_, bb_) ((((kk_) % KPG) * BPK + (bb_)) * BLOCK_BYTES)

// The four signed bytes of a word (q8_0), low byte first; the low / high
// nibbles of a word's bytes (q4_0, without the offset of 8).
vec4 q8_values(uint w) {
    return vec4(ivec4(int(w << 24u), int(w << 16u), int(w << 8u), int(w)) >> 24);
}
uvec4 nib_low(uint w) { return uvec4(w, w >> 8u, w >> 16u, w >> 24u) & 0xfu; }
// The values (less their offset, before the scale) of the four bytes' low
// and high nibbles of word w: quad c of a block and quad c + 4; qh the
// block's fifth bits (q5_0, q5_1).
void nibble_values(uint w, uint qh, uint c, out vec4 lo, out vec4 hi) {
    uvec4 nl = nib_low(w), nh = nib_low(w >> 4u);
#if FIFTH
    nl |= ((uvec4(qh >> (4u * c)) >> uvec4(0u, 1u, 2u, 3u)) & 1u) << 4u;
    nh |= ((uvec4(qh >> (16u + 4u * c)) >> uvec4(0u, 1u, 2u, 3u)) & 1u) << 4u;
#endif
#if QF == 5
    lo = iq4nl_levels4(nl);
    hi = iq4nl_levels4(nh);
#else
    lo = vec4(nl);
    hi = vec4(nh);
#endif
}

// a + dot(x, y) as four FMAs
float fma4(vec4 x, vec4 y, float a) {
    return fma(x.w, y.w, fma(x.z, y.z, fma(x.y, y.y, fma(x.x, y.x, a))));
}

// key_row of kv_attention_main.glsl without integer division (as in
// kv_decode_sg.comp): the quotient through a float reciprocal, corrected.
uint key_row_fast(uint b, uint kv_head, uint j, float inv_bs) {
    uint i = uint(float(j) * inv_bs);
    i = i * pc.block_size > j ? i - 1u : i;
    i = (i + 1u) * pc.block_size <= j ? i + 1u : i;
    uint block = meta[2u * pc.batch + b * pc.table_width + i];
    return (block * pc.kv_heads + kv_head) * pc.block_size + (j - i * pc.block_size);
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

    // Every row of q whole in every lane (the same values: dynamically
    // uniform fetches), the lane's copy of the output rows.
    KvRow rw[R];
    vec4 q[R][DQ];
    vec4 o[R][DQ];
    float m[R], l[R];
#if HAS_OFFSET || HAS_MIN
    float qsum[R][BPK]; // sum of q over each block's 32 values
#endif
#if HAS_OFFSET
    float pdsum[R][BPK]; // sum of p d over the keys, per block of the values
#endif
#if HAS_MIN
    float pmsum[R][BPK]; // sum of p m over the keys, per block of the values
#endif
    [[unroll]] for (uint r = 0u; r < R; r++) {
        rw[r] = kv_row_info(min(row0 + r, last_row), b, kv_head, shift, D);
        [[unroll]] for (uint c = 0u; c < DQ; c++) {
            q[r][c] = q_load4(rw[r].q + c);
            o[r][c] = vec4(0.0);
        }
#if HAS_OFFSET || HAS_MIN
        [[unroll]] for (uint bb = 0u; bb < BPK; bb++) {
            vec4 t = vec4(0.0);
            [[unroll]] for (uint c = 0u; c < 8u; c++)
                t += q[r][bb * 8u + c];
            qsum[r][bb] = (t.x + t.y) + (t.z + t.w);
#if HAS_OFFSET
            pdsum[r][bb] = 0.0;
#endif
#if HAS_MIN
            pmsum[r][bb] = 0.0;
#endif
        }
#endif
        m[r] = NEG_INF;
        l[r] = 0.0;
    }

    // Blocks start on a group (keys before lo in the first one are masked);
    // a lane past the last key reads the last real group (masked too).
    // Software pipelined: a block's V texels are fetched before its scores
    // are formed, the next block's K texels before its P.V, so the loads of
    // the fetches (calls on lavapipe) overlap the arithmetic.
    const float inv_bs = 1.0 / float(pc.block_size);
    const uint start = lo & ~(KPG - 1u);
    const uint last_group_key = key_end > 0u ? (key_end - 1u) & ~(KPG - 1u) : 0u;
    uint g[GPL];
    uvec4 kt[GPL * GT];
    [[unroll]] for (uint gi = 0u; gi < GPL; gi++) {
        uint j = min(start + lane * KPL + gi * KPG, last_group_key);
        g[gi] = key_end > lo ? key_row_fast(b, kv_head, j, inv_bs) / KPG * GT : 0u;
        [[unroll]] for (uint t = 0u; t < GT; t++)
            kt[gi * GT + t] = texelFetch(k_tex, int(g[gi] + t));
    }
    for (uint j0 = start; j0 < key_end; j0 += NK) {
        const uint kb = j0 + lane * KPL; // the lane's first key
        uvec4 vt[GPL * GT];
        [[unroll]] for (uint gi = 0u; gi < GPL; gi++)
            [[unroll]] for (uint t = 0u; t < GT; t++)
                vt[gi * GT + t] = texelFetch(v_tex, int(g[gi] + t));
        // ---- scores of the lane's keys
        float s[KPL][R];
        [[unroll]] for (uint kk = 0u; kk < KPL; kk++)
            [[unroll]] for (uint r = 0u; r < R; r++)
                s[kk][r] = 0.0;
        [[unroll]] for (uint bb = 0u; bb < BPK; bb++) {
            float part[KPL][R];
            [[unroll]] for (uint kk = 0u; kk < KPL; kk++)
                [[unroll]] for (uint r = 0u; r < R; r++)
                    part[kk][r] = 0.0;
#if !NIBBLES
            [[unroll]] for (uint c = 0u; c < 8u; c++)
                [[unroll]] for (uint kk = 0u; kk < KPL; kk++) {
                    vec4 x = q8_values(GWORD(kt, GBASE(kk), KOFF(kk, bb) + 2u + 4u * c));
                    [[unroll]] for (uint r = 0u; r < R; r++)
                        part[kk][r] = fma4(q[r][bb * 8u + c], x, part[kk][r]);
                }
#else
            uint qh[KPL];
            [[unroll]] for (uint kk = 0u; kk < KPL; kk++)
                qh[kk] = FIFTH ? GWORD(kt, GBASE(kk), KOFF(kk, bb) + QH_OFF) : 0u;
            [[unroll]] for (uint c = 0u; c < 4u; c++)
                [[unroll]] for (uint kk = 0u; kk < KPL; kk++) {
                    uint w = GWORD(kt, GBASE(kk), KOFF(kk, bb) + QS_OFF + 4u * c);
                    vec4 xl, xh;
                    nibble_values(w, qh[kk], c, xl, xh);
                    [[unroll]] for (uint r = 0u; r < R; r++)
                        part[kk][r] = fma4(q[r][bb * 8u + 4u + c], xh,
                                           fma4(q[r][bb * 8u + c], xl, part[kk][r]));
                }
#endif
            [[unroll]] for (uint kk = 0u; kk < KPL; kk++) {
                float d = GSCALE(kt, GBASE(kk), KOFF(kk, bb));
#if HAS_MIN
                float mn = GSCALE(kt, GBASE(kk), KOFF(kk, bb) + 2u);
#endif
                [[unroll]] for (uint r = 0u; r < R; r++)
#if HAS_OFFSET
                    s[kk][r] = fma(d, fma(-OFFSET, qsum[r][bb], part[kk][r]), s[kk][r]);
#elif HAS_MIN
                    s[kk][r] = fma(mn, qsum[r][bb], fma(d, part[kk][r], s[kk][r]));
#else
                    s[kk][r] = fma(d, part[kk][r], s[kk][r]);
#endif
            }
        }
        // ---- scale and modifiers; causal, window and range masks only
        // where some key may be hidden (or precede the split)
        const bool edge = j0 < lo || j0 + NK > key_full || (M_WINDOW && j0 < first_all);
        [[unroll]] for (uint kk = 0u; kk < KPL; kk++) {
            const uint j = kb + kk;
            [[unroll]] for (uint r = 0u; r < R; r++) {
                s[kk][r] = kv_modify(s[kk][r] * pc.scale_log2, rw[r], j);
                if (edge && (j < lo || j >= key_end || kv_hidden(rw[r], j)))
                    s[kk][r] = NEG_INF;
            }
        }
        // ---- online softmax with a lazy max (see the top); a row that has
        // seen no visible key keeps m = -inf, and m_safe = 0 keeps
        // exp2(-inf - -inf) (NaN) away
        float p[KPL][R];
        [[unroll]] for (uint r = 0u; r < R; r++) {
            float bm = s[0][r];
            [[unroll]] for (uint kk = 1u; kk < KPL; kk++)
                bm = max(bm, s[kk][r]);
            bm = subgroupMax(bm);
            if (bm > m[r] + LAZY) { // the same in every lane
                float alpha = exp2(m[r] - bm); // 0 while m is -inf
                m[r] = bm;
                l[r] *= alpha;
                [[unroll]] for (uint c = 0u; c < DQ; c++)
                    o[r][c] *= alpha;
#if HAS_OFFSET
                [[unroll]] for (uint bb = 0u; bb < BPK; bb++)
                    pdsum[r][bb] *= alpha;
#endif
#if HAS_MIN
                [[unroll]] for (uint bb = 0u; bb < BPK; bb++)
                    pmsum[r][bb] *= alpha;
#endif
            }
            float m_safe = m[r] == NEG_INF ? 0.0 : m[r];
            [[unroll]] for (uint kk = 0u; kk < KPL; kk++) {
                p[kk][r] = exp2(s[kk][r] - m_safe);
                l[r] += p[kk][r];
            }
        }
        // ---- the next block's K (clamped: the last trip fetches a real
        // group it does not use)
        [[unroll]] for (uint gi = 0u; gi < GPL; gi++) {
            uint j = min(kb + NK + gi * KPG, last_group_key);
            g[gi] = key_row_fast(b, kv_head, j, inv_bs) / KPG * GT;
            [[unroll]] for (uint t = 0u; t < GT; t++)
                kt[gi * GT + t] = texelFetch(k_tex, int(g[gi] + t));
        }
        // ---- O += P V over the lane's keys; a hidden key's scale never
        // multiplies (its group may hold unwritten bytes past the sequence)
        [[unroll]] for (uint bb = 0u; bb < BPK; bb++) {
            float pd[KPL][R];
            [[unroll]] for (uint kk = 0u; kk < KPL; kk++) {
                float d = GSCALE(vt, GBASE(kk), KOFF(kk, bb));
                [[unroll]] for (uint r = 0u; r < R; r++)
                    pd[kk][r] = p[kk][r] == 0.0 ? 0.0 : p[kk][r] * d;
#if HAS_MIN
                float mn = GSCALE(vt, GBASE(kk), KOFF(kk, bb) + 2u);
                [[unroll]] for (uint r = 0u; r < R; r++)
                    pmsum[r][bb] += p[kk][r] == 0.0 ? 0.0 : p[kk][r] * mn;
#endif
            }
#if !NIBBLES
            [[unroll]] for (uint c = 0u; c < 8u; c++) {
                vec4 x[KPL];
                [[unroll]] for (uint kk = 0u; kk < KPL; kk++)
                    x[kk] = q8_values(GWORD(vt, GBASE(kk), KOFF(kk, bb) + 2u + 4u * c));
                [[unroll]] for (uint r = 0u; r < R; r++) {
                    vec4 acc = o[r][bb * 8u + c];
                    [[unroll]] for (uint kk = 0u; kk < KPL; kk++)
                        acc = fma(vec4(pd[kk][r]), x[kk], acc);
                    o[r][bb * 8u + c] = acc;
                }
            }
#else
#if HAS_OFFSET
            [[unroll]] for (uint r = 0u; r < R; r++)
                [[unroll]] for (uint kk = 0u; kk < KPL; kk++)
                    pdsum[r][bb] += pd[kk][r];
#endif
            uint qh[KPL];
            [[unroll]] for (uint kk = 0u; kk < KPL; kk++)
                qh[kk] = FIFTH ? GWORD(vt, GBASE(kk), KOFF(kk, bb) + QH_OFF) : 0u;
            [[unroll]] for (uint c = 0u; c < 4u; c++) {
                vec4 xl[KPL], xh[KPL];
                [[unroll]] for (uint kk = 0u; kk < KPL; kk++) {
                    uint w = GWORD(vt, GBASE(kk), KOFF(kk, bb) + QS_OFF + 4u * c);
                    nibble_values(w, qh[kk], c, xl[kk], xh[kk]);
                }
                [[unroll]] for (uint r = 0u; r < R; r++) {
                    vec4 al = o[r][bb * 8u + c], ah = o[r][bb * 8u + 4u + c];
                    [[unroll]] for (uint kk = 0u; kk < KPL; kk++) {
                        al = fma(vec4(pd[kk][r]), xl[kk], al);
                        ah = fma(vec4(pd[kk][r]), xh[kk], ah);
                    }
                    o[r][bb * 8u + c] = al;
                    o[r][bb * 8u + 4u + c] = ah;
                }
            }
#endif
        }
    }

    // ---- the lanes' copies added up (less the offset times the sum of p d
    // of each block, plus the sum of p m); lane c % SG stores quad c. One split: normalise and store
    // (no visible key: l = 0 -> zeros); several: the unnormalised row, its
    // max and its sum
    const uint s_off = split_step(split, D);
    [[unroll]] for (uint r = 0u; r < R; r++) {
        float total = subgroupAdd(l[r]);
        float inv = 0.0;
        if (pc.splits == 1u && row0 + r <= last_row)
            inv = kv_finish(rw[r], b, m[r], total, lane == 0u);
        [[unroll]] for (uint c = 0u; c < DQ; c++) {
            vec4 oc = o[r][c];
#if HAS_OFFSET
            oc = fma(vec4(-OFFSET), vec4(pdsum[r][c / 8u]), oc);
#endif
#if HAS_MIN
            oc += vec4(pmsum[r][c / 8u]);
#endif
            vec4 sum = subgroupAdd(oc);
            if (c % SG != lane || row0 + r > last_row)
                continue;
            if (pc.splits == 1u) {
                o_store4(rw[r].o + c, sum * inv);
            } else {
                uint base = rw[r].split + s_off + 4u * c;
                [[unroll]] for (uint e = 0u; e < 4u; e++)
                    split_data[base + e] = sum[e];
            }
        }
        if (pc.splits > 1u && lane == 0u && row0 + r <= last_row) {
            uint base = rw[r].split + s_off;
            split_data[base + D] = m[r];
            split_data[base + D + 1u] = total;
        }
    }
}
