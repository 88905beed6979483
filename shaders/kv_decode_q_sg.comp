// Attention over a quantized KV cache (QF: 0 q8_0, 1 q4_0, 2 q4_1, 3 q5_0,
// 4 q5_1, 5 iq4_nl; layouts: tensor_io.glsl) for few rows (decode, T <= 16),
// subgroup family, through rgba32ui texel views of the pools. Same
// interface, grid, splits and scratch as kv_attention_sg.comp (see
// kv_attention_main.glsl); the loop of kv_decode_sg.comp, with lanes owning
// ggml blocks where that kernel's own octets.
//
// A workgroup is one subgroup owning R rows of one (batch row, KV head,
// split); it walks the split's visible keys in blocks of SG keys. A key is
// BPK = D / 32 blocks; LPK lanes share a key (lane l holds block column
// l % LPK, and BPL blocks of it where a key has more blocks than the
// subgroup lanes), so a step covers KPS = SG / LPK keys and a block of SG
// keys takes LPK steps. Each lane keeps the matching 32 values of every
// query and output row in registers (R x 32 x BPL of each, where the
// kernel that gave every lane whole rows spilled them):
//   Q.K^T  a lane fetches its block (2 or 3 texels: a block starts on any
//          even byte of a texel), shifts its words into place and forms
//          partial scores of its key against every row; a butterfly of
//          subgroupShuffleXor across the LPK lanes of a key adds them, so
//          that each lane ends with the score of one key;
//   P.V    each lane adds its block's values into its output slice, the
//          probabilities shuffled in from the lanes that hold them; the
//          slices of the KPS keys of a step are added across the subgroup
//          once, at the end.
// K and V rows are the same bytes apart (one head dim), so V's blocks are
// found where K's were. Dequantization is folded into the sums: d *
// sum(q_i x_i) for a score, (p d) q_i for a value; the offset of q4_0 (8)
// and q5_0 (16) and the minimum m of q4_1 and q5_1 once per block (through
// the sum of q over a block, and the sums of p d and p m over the keys).
// The running max of a row moves only when a block's max passes it by more
// than LAZY (log2 domain): the probabilities stay below 2^LAZY, and the
// output slices are rescaled a few times per sequence, not every block.
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
layout(constant_id = 2) const uint D = 128u; // head dimension: 32, 64, 128 or 256
layout(constant_id = 3) const uint R = 4u;   // rows per subgroup
layout(constant_id = 4) const uint UNUSED = 1u; // keeps the sg family's spec layout

const uint BB = QUANT_BLOCK_BYTES(QF);
// the formats' fields: the nibble formats' fifth bits (q5_0, q5_1) and
// minimum (q4_1, q5_1), the offset subtracted from q (q4_0 8, q5_0 16)
#define NIBBLES (QF != 0)
#define FIFTH (QF == 3 || QF == 4)
#define HAS_MIN (QF == 2 || QF == 4)
#define HAS_OFFSET (QF == 1 || QF == 3)
// Blocks of whole words (q4_1 20 bytes, q5_1 24) start on a word; the
// others on any even byte. A lane shifts a block's words into place from
// AOFF on: the f16 scale before them is read apart (the other formats'
// scale and minimum are aligned word 0). ALIGN: what divides every block's
// start.
#define WHOLE_WORDS (QF == 2 || QF == 4)
const uint AOFF = WHOLE_WORDS ? 0u : 2u;
const uint ALIGN = QF == 4 ? 8u : QF == 2 ? 4u : 2u;
const uint NA = (BB - AOFF) / 4u;              // aligned words of a block
const uint NT = (16u - ALIGN + BB + 15u) / 16u; // texels a block may touch
const uint NW = 4u * NT;
const uint SMAX = (16u - ALIGN + AOFF) / 4u;   // the largest word shift
// where the values' words (QS_A) and the fifth bits (QH_A) are among them
const uint QS_A = QF == 4 ? 2u : (QF == 2 || QF == 3) ? 1u : 0u;
const uint QH_A = QF == 4 ? 1u : 0u;
const float OFFSET = QF == 3 ? 16.0 : 8.0;
const float LAZY = 8.0;

const uint BPK = D / 32u;             // blocks of a key
// lanes of a key: min(BPK, SG) for powers of two, in arithmetic
const uint LPK = BPK / ((BPK + SG - 1u) / SG);
const uint BPL = BPK / LPK;           // blocks of a lane
const uint KPS = SG / LPK;            // keys of a step
const uint NS = LPK;                  // steps of a block of SG keys
const uint RB = BPK * BB;             // bytes of a key row

// The four signed bytes of a word (q8_0), low byte first; the low nibbles
// of a word's bytes.
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

// Where block column `col` of pool row `row` starts: its first texel and
// its byte in that texel (row * RB in two parts, so that pools past 4 GiB
// still have texel indices in 32 bits).
void block_place(uint row, uint col, out uint texel, out uint byte_) {
    uint rest = (row & 15u) * RB + col * BB;
    texel = (row >> 4u) * RB + (rest >> 4u);
    byte_ = rest & 15u;
}

// The block at byte o of texels t: a[k] is the word at byte o + AOFF + 4k
// (the word shift picked by selects: an indexed array would be spilled),
// d the f16 scale at byte o (formats with AOFF 2), mn the minimum.
void align_block(uvec4 t[NT], uint o, out uint a[NA], out float d, out float mn) {
    uint w[NW];
    [[unroll]] for (uint i = 0u; i < NW; i++)
        w[i] = t[i / 4u][i % 4u];
    const uint e = o + AOFF, s = e >> 2u;
    uint v[NA + 1u];
    [[unroll]] for (uint k = 0u; k <= NA; k++) {
        uint x = w[k < NW ? k : NW - 1u];
        [[unroll]] for (uint c = 1u; c <= SMAX; c++)
            x = s == c ? w[k + c < NW ? k + c : NW - 1u] : x;
        v[k] = x;
    }
#if WHOLE_WORDS
    [[unroll]] for (uint k = 0u; k < NA; k++)
        a[k] = v[k];
    vec2 dm = unpackHalf2x16(a[0]);
    d = dm.x;
    mn = dm.y;
#else
    const bool half_word = (e & 2u) != 0u;
    [[unroll]] for (uint k = 0u; k < NA; k++)
        a[k] = half_word ? (v[k] >> 16u) | (v[k + 1u] << 16u) : v[k];
    const uint ws = o >> 2u;
    uint sw = w[0];
    [[unroll]] for (uint c = 1u; c < 4u; c++)
        sw = ws == c ? w[c] : sw;
    d = unpackHalf2x16(sw >> ((o & 2u) * 8u)).x;
    mn = 0.0;
#endif
}

// The largest x of the subgroup, as subgroupMax, through shuffles by
// constant masks (lavapipe runs subgroupMax as a loop over the lanes).
#define MAX_STEP(h)         \
    if ((h) < SG)           \
        x = max(x, subgroupShuffleXor(x, (h)));
float lanes_max(float x) {
    MAX_STEP(1u)
    MAX_STEP(2u)
    MAX_STEP(4u)
    MAX_STEP(8u)
    MAX_STEP(16u)
    MAX_STEP(32u)
    return x;
}

// One butterfly step over the LPK lanes of a key (skipped at compile time
// where h >= NS): slot st of lane l holds key bc ^ st of its step set, so a
// lane keeps the slots without bit h and adds the partner's slot st | h,
// which holds the same key there (no selects).
#define BUTTERFLY(h)                                                         \
    if ((h) < NS) {                                                          \
        [[unroll]] for (uint i = 0u; i < NS; i++)                            \
            if ((i & (h)) == 0u && i < 2u * (h))                             \
                [[unroll]] for (uint r = 0u; r < R; r++)                     \
                    sp[i * R + r] += subgroupShuffleXor(sp[(i | (h)) * R + r], (h)); \
    }
// The lanes' slices of a block column added over its keys' lanes (lanes
// l ^ h, h from LPK up).
#define COLUMN_SUM(h, x)                                                     \
    if ((h) >= LPK && (h) < SG)                                              \
        x += subgroupShuffleXor(x, (h));

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

    // The lane's block column bc, and its keys: at step st of a block of SG
    // keys key ks + KPS * (bc ^ st), whose pool row and probability lane
    // lane ^ st holds (shuffles by constant masks: a shuffle by a lane's own
    // index costs lavapipe a loop over the lanes).
    const uint ks = lane / LPK, bc = lane % LPK, kl = ks + KPS * bc;

    // This lane's 32 values of every query and output row per block it owns
    // (block bc + LPK * i of a key).
    KvRow rw[R];
    vec4 q[R][BPL][8];
    vec4 o[R][BPL][8];
    float m[R], l[R];
#if HAS_OFFSET || HAS_MIN
    float qsum[R][BPL]; // sum of q over each block's 32 values
#endif
#if HAS_OFFSET
    float pdsum[R][BPL]; // sum of p d over the keys
#endif
#if HAS_MIN
    float pmsum[R][BPL]; // sum of p m over the keys
#endif
    [[unroll]] for (uint r = 0u; r < R; r++) {
        rw[r] = kv_row_info(min(row0 + r, last_row), b, kv_head, shift, D);
        [[unroll]] for (uint i = 0u; i < BPL; i++) {
            [[unroll]] for (uint c = 0u; c < 8u; c++) {
                q[r][i][c] = q_load4(rw[r].q + (bc + LPK * i) * 8u + c);
                o[r][i][c] = vec4(0.0);
            }
#if HAS_OFFSET || HAS_MIN
            vec4 t = vec4(0.0);
            [[unroll]] for (uint c = 0u; c < 8u; c++)
                t += q[r][i][c];
            qsum[r][i] = (t.x + t.y) + (t.z + t.w);
#endif
#if HAS_OFFSET
            pdsum[r][i] = 0.0;
#endif
#if HAS_MIN
            pmsum[r][i] = 0.0;
#endif
        }
        m[r] = NEG_INF;
        l[r] = 0.0;
    }

    // Software pipelined as kv_decode_sg.comp: a block's V texels are
    // fetched beside its scores, the next block's K texels beside its P.V.
    // Fetches past a view's end are clamped (a block's last texel may be
    // one it does not use).
    const uint last_k = uint(textureSize(k_tex)) - 1u;
    const uint last_v = uint(textureSize(v_tex)) - 1u;
    const float inv_bs = 1.0 / float(pc.block_size);
    // pool row of key j0 + kl, clamped to a real key (past key_end it is
    // masked: p = 0); an empty range reads row 0 (unused)
    uint my_row = key_end > lo ? key_row_fast(b, kv_head, min(lo + kl, key_end - 1u), inv_bs) : 0u;
    uint bt[NS][BPL], bo[NS][BPL]; // this block's texels and bytes
    uvec4 kt[NS][BPL][NT];
    [[unroll]] for (uint st = 0u; st < NS; st++) {
        uint row = subgroupShuffleXor(my_row, st);
        [[unroll]] for (uint i = 0u; i < BPL; i++) {
            block_place(row, bc + LPK * i, bt[st][i], bo[st][i]);
            [[unroll]] for (uint t = 0u; t < NT; t++)
                kt[st][i][t] = texelFetch(k_tex, int(min(bt[st][i] + t, last_k)));
        }
    }
    for (uint j0 = lo; j0 < key_end; j0 += SG) {
        // ---- this block's V texels, then its K blocks in place
        uvec4 vt[NS][BPL][NT];
        [[unroll]] for (uint st = 0u; st < NS; st++)
            [[unroll]] for (uint i = 0u; i < BPL; i++)
                [[unroll]] for (uint t = 0u; t < NT; t++)
                    vt[st][i][t] = texelFetch(v_tex, int(min(bt[st][i] + t, last_v)));
        // ---- partial scores of the steps' keys over this lane's blocks, a
        // quad of q at a time against every step (each q value loaded once)
        float sp[NS * R];
        [[unroll]] for (uint st = 0u; st < NS; st++)
            [[unroll]] for (uint r = 0u; r < R; r++)
                sp[st * R + r] = 0.0;
        [[unroll]] for (uint i = 0u; i < BPL; i++) {
            uint ka[NS][NA];
            float kd[NS], km[NS];
            [[unroll]] for (uint st = 0u; st < NS; st++)
                align_block(kt[st][i], bo[st][i], ka[st], kd[st], km[st]);
            float part[NS][R];
            [[unroll]] for (uint st = 0u; st < NS; st++)
                [[unroll]] for (uint r = 0u; r < R; r++)
                    part[st][r] = 0.0;
#if !NIBBLES
            [[unroll]] for (uint c = 0u; c < 8u; c++)
                [[unroll]] for (uint st = 0u; st < NS; st++) {
                    vec4 x = q8_values(ka[st][c]);
                    [[unroll]] for (uint r = 0u; r < R; r++)
                        part[st][r] = fma4(q[r][i][c], x, part[st][r]);
                }
#else
            [[unroll]] for (uint c = 0u; c < 4u; c++)
                [[unroll]] for (uint st = 0u; st < NS; st++) {
                    vec4 xl, xh;
                    nibble_values(ka[st][QS_A + c], FIFTH ? ka[st][QH_A] : 0u, c, xl, xh);
                    [[unroll]] for (uint r = 0u; r < R; r++)
                        part[st][r] = fma4(q[r][i][4u + c], xh, fma4(q[r][i][c], xl, part[st][r]));
                }
#endif
            [[unroll]] for (uint st = 0u; st < NS; st++)
                [[unroll]] for (uint r = 0u; r < R; r++)
#if HAS_OFFSET
                    sp[st * R + r] = fma(kd[st], fma(-OFFSET, qsum[r][i], part[st][r]), sp[st * R + r]);
#elif HAS_MIN
                    sp[st * R + r] = fma(km[st], qsum[r][i], fma(kd[st], part[st][r], sp[st * R + r]));
#else
                    sp[st * R + r] = fma(kd[st], part[st][r], sp[st * R + r]);
#endif
        }
        // ---- butterfly across a key's lanes: lane l ends with the score of
        // its key j0 + kl in slot 0 (steps written out, as in
        // kv_decode_sg.comp)
        BUTTERFLY(32u)
        BUTTERFLY(16u)
        BUTTERFLY(8u)
        BUTTERFLY(4u)
        BUTTERFLY(2u)
        BUTTERFLY(1u)
        // ---- scale and modifiers; causal, window and range masks only
        // where some key may be hidden
        const uint j = j0 + kl;
        const bool edge = j0 + SG > key_full || (M_WINDOW && j0 < first_all);
        float s[R];
        [[unroll]] for (uint r = 0u; r < R; r++) {
            s[r] = kv_modify(sp[r] * pc.scale_log2, rw[r], j);
            if (edge && (kv_hidden(rw[r], j) || j >= key_end))
                s[r] = NEG_INF;
        }
        // ---- online softmax with a lazy max (see the top); a row that has
        // seen no visible key keeps m = -inf, and m_safe = 0 keeps
        // exp2(-inf - -inf) (NaN) away
        float pk[NS][R];
        [[unroll]] for (uint r = 0u; r < R; r++) {
            float bm = lanes_max(s[r]);
            if (bm > m[r] + LAZY) { // the same in every lane
                float alpha = exp2(m[r] - bm); // 0 while m is -inf
                m[r] = bm;
                l[r] *= alpha;
                [[unroll]] for (uint i = 0u; i < BPL; i++) {
                    [[unroll]] for (uint c = 0u; c < 8u; c++)
                        o[r][i][c] *= alpha;
#if HAS_OFFSET
                    pdsum[r][i] *= alpha;
#endif
#if HAS_MIN
                    pmsum[r][i] *= alpha;
#endif
                }
            }
            float m_safe = m[r] == NEG_INF ? 0.0 : m[r];
            float p = exp2(s[r] - m_safe);
            l[r] += p; // per-lane partial sums, added up at the end
            [[unroll]] for (uint st = 0u; st < NS; st++)
                pk[st][r] = subgroupShuffleXor(p, st);
        }
        // ---- the next block's K texels (rows clamped: the last trip
        // fetches real keys it does not use); V's places kept for P.V
        uint vo[NS][BPL];
        my_row = key_row_fast(b, kv_head, min(j0 + SG + kl, key_end - 1u), inv_bs);
        [[unroll]] for (uint st = 0u; st < NS; st++) {
            uint row = subgroupShuffleXor(my_row, st);
            [[unroll]] for (uint i = 0u; i < BPL; i++) {
                vo[st][i] = bo[st][i];
                block_place(row, bc + LPK * i, bt[st][i], bo[st][i]);
                [[unroll]] for (uint t = 0u; t < NT; t++)
                    kt[st][i][t] = texelFetch(k_tex, int(min(bt[st][i] + t, last_k)));
            }
        }
        // ---- O += P V over this lane's blocks, a quad of every step's
        // values at a time (each output value loaded and stored once); a
        // hidden key's scale never multiplies
        [[unroll]] for (uint i = 0u; i < BPL; i++) {
            uint va[NS][NA];
            float pd[NS][R];
            [[unroll]] for (uint st = 0u; st < NS; st++) {
                float d, mn;
                align_block(vt[st][i], vo[st][i], va[st], d, mn);
                [[unroll]] for (uint r = 0u; r < R; r++) {
                    pd[st][r] = pk[st][r] == 0.0 ? 0.0 : pk[st][r] * d;
#if HAS_OFFSET
                    pdsum[r][i] += pd[st][r];
#endif
#if HAS_MIN
                    pmsum[r][i] += pk[st][r] == 0.0 ? 0.0 : pk[st][r] * mn;
#endif
                }
            }
#if !NIBBLES
            [[unroll]] for (uint c = 0u; c < 8u; c++) {
                vec4 x[NS];
                [[unroll]] for (uint st = 0u; st < NS; st++)
                    x[st] = q8_values(va[st][c]);
                [[unroll]] for (uint r = 0u; r < R; r++) {
                    vec4 acc = o[r][i][c];
                    [[unroll]] for (uint st = 0u; st < NS; st++)
                        acc = fma(vec4(pd[st][r]), x[st], acc);
                    o[r][i][c] = acc;
                }
            }
#else
            [[unroll]] for (uint c = 0u; c < 4u; c++) {
                vec4 xl[NS], xh[NS];
                [[unroll]] for (uint st = 0u; st < NS; st++)
                    nibble_values(va[st][QS_A + c], FIFTH ? va[st][QH_A] : 0u, c, xl[st], xh[st]);
                [[unroll]] for (uint r = 0u; r < R; r++) {
                    vec4 al = o[r][i][c], ah = o[r][i][4u + c];
                    [[unroll]] for (uint st = 0u; st < NS; st++) {
                        al = fma(vec4(pd[st][r]), xl[st], al);
                        ah = fma(vec4(pd[st][r]), xh[st], ah);
                    }
                    o[r][i][c] = al;
                    o[r][i][4u + c] = ah;
                }
            }
#endif
        }
    }

    // ---- the slices of a block column added across the lanes of its keys
    // (less the offset times the sum of p d, plus the sum of p m); lane
    // ks stores quads c of its column where c % KPS == ks. One split:
    // normalise and store (no visible key: l = 0 -> zeros); several: the
    // unnormalised row, its max and its sum
    const uint s_off = split_step(split, D);
    [[unroll]] for (uint r = 0u; r < R; r++) {
        float total = subgroupAdd(l[r]);
        float inv = 0.0;
        if (pc.splits == 1u && row0 + r <= last_row)
            inv = kv_finish(rw[r], b, m[r], total, lane == 0u);
        [[unroll]] for (uint i = 0u; i < BPL; i++)
            [[unroll]] for (uint c = 0u; c < 8u; c++) {
                vec4 oc = o[r][i][c];
#if HAS_OFFSET
                oc = fma(vec4(-OFFSET), vec4(pdsum[r][i]), oc);
#endif
#if HAS_MIN
                oc += vec4(pmsum[r][i]);
#endif
                COLUMN_SUM(1u, oc)
                COLUMN_SUM(2u, oc)
                COLUMN_SUM(4u, oc)
                COLUMN_SUM(8u, oc)
                COLUMN_SUM(16u, oc)
                COLUMN_SUM(32u, oc)
                if (c % KPS != ks || row0 + r > last_row)
                    continue;
                uint quad = (bc + LPK * i) * 8u + c;
                if (pc.splits == 1u) {
                    o_store4(rw[r].o + quad, oc * inv);
                } else {
                    uint base = rw[r].split + s_off + 4u * quad;
                    [[unroll]] for (uint e = 0u; e < 4u; e++)
                        split_data[base + e] = oc[e];
                }
            }
        if (pc.splits > 1u && lane == 0u && row0 + r <= last_row) {
            uint base = rw[r].split + s_off;
            split_data[base + D] = m[r];
            split_data[base + D + 1u] = total;
        }
    }
}
