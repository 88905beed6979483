// What the attention backward kernels share (attention_bwd_dkdv.comp,
// attention_bwd_dq.comp, attention_bwd_dsinks.comp): push constants,
// bindings, and the recomputation of one probability and its score
// gradient from a score, the forward's LSE and the row's dot(dout, out).
// Formulas: "attention backward" in include/vkattn/ops.h.
//
// q, k, v, out and dout are read a quad (4 elements) at a time in one
// storage type (IN_DT), through strides in quads; dq, dk and dv are
// written in another (OUT_DT), contiguous [B, H, T, D], and the LSE read
// contiguous [B, Hq, Tq] (the host checks both). Every tensor starts at
// its binding's start plus the binding offset alignment's remainder
// (pc.quad_offs, mask_offs, small_offs).
#ifndef VKATTN_ATTENTION_BWD_GLSL
#define VKATTN_ATTENTION_BWD_GLSL

#include "attention_io.glsl"
#include "dropout.glsl"

layout(push_constant) uniform Push {
    uint q_sb, q_sh, q_st; // batch, head and token strides in quads
    uint k_sb, k_sh, k_st;
    uint v_sb, v_sh, v_st;
    uint o_sb, o_sh, o_st;
    uint g_sb, g_sh, g_st; // dout
    uint m_sb, m_sh, m_sq, m_sk; // mask strides in elements (0: broadcast)
    uint p_sb, p_sk;             // key padding strides in elements
    uint q_len, kv_len;          // Tq, Tk
    uint heads;                  // Hq / Hkv (bits 0-15), Hkv (16-31)
    uint flags;                  // FLAG_* of attention_io.glsl and BWD_FLAG_*
    float scale;
    uint seed_lo, seed_hi, threshold; // dropout
    // where each binding's tensor starts (the binding offset alignment's
    // remainder, at most 255 bytes): in quads, q, k, v, out, dout, dq (5
    // bits each, from bit 0); in elements, the mask (bits 0-7) and the key
    // padding (8-15), then in quads dk (16-20) and dv (21-25); in
    // elements, lse (0-7), sinks (8-15), slopes (16-23), dsinks (24-31)
    uint quad_offs, mask_offs, small_offs;
} pc;

const uint BWD_FLAG_TOP_LEFT = 256u; // queries at i, else i + Tk - Tq
const uint BWD_FLAG_DROPOUT = 512u;

// Score modifiers, specialization constants as the forward's (ids 8-10).
layout(constant_id = 8) const uint MODS = 0u;
layout(constant_id = 9) const uint WINDOW = 0u;
layout(constant_id = 10) const float SOFTCAP = 0.0;
const bool HAS_WINDOW = (MODS & 1u) != 0u; // mirrors ATT_MOD_* (attention_internal.h)
const bool HAS_SOFTCAP = (MODS & 2u) != 0u;
const bool HAS_SINKS = (MODS & 4u) != 0u;
const bool HAS_ALIBI = (MODS & 8u) != 0u;

DECLARE_IN4(0, q, IN_DT)
DECLARE_IN4(1, k, IN_DT)
DECLARE_IN4(2, v, IN_DT)
DECLARE_IN4(3, o, IN_DT)
DECLARE_IN4(4, g, IN_DT)
layout(set = 0, binding = 5, std430) readonly buffer lse_buffer { float lse_data[]; };
DECLARE_MASKS(6, 7)
layout(set = 0, binding = 8, std430) readonly buffer sinks_buffer { float sinks_data[]; };
layout(set = 0, binding = 9, std430) readonly buffer slopes_buffer { float slopes_data[]; };

uint group_size() { return pc.heads & 0xffffu; }
uint query_heads() { return (pc.heads & 0xffffu) * (pc.heads >> 16u); }

uint quad_off(uint t) { return (pc.quad_offs >> (5u * t)) & 31u; }
#define Q_OFF quad_off(0u)
#define K_OFF quad_off(1u)
#define V_OFF quad_off(2u)
#define O_OFF quad_off(3u)
#define G_OFF quad_off(4u)
#define DQ_OFF quad_off(5u)
#define DK_OFF ((pc.mask_offs >> 16u) & 31u)
#define DV_OFF ((pc.mask_offs >> 21u) & 31u)

// Where query i sits for causality, the window and ALiBi.
int query_pos(uint i) {
    return (pc.flags & BWD_FLAG_TOP_LEFT) != 0u ? int(i) : int(i) + int(pc.kv_len) - int(pc.q_len);
}

// Whether key j is visible to query i (at position pos) of batch row b
// by causality, the window, the key padding and a boolean mask.
bool key_visible(int pos, uint b, uint mask_row, uint j) {
    if ((pc.flags & FLAG_CAUSAL) != 0u && int(j) > pos)
        return false;
    if (HAS_WINDOW && (pos - int(j) >= int(WINDOW) ||
                       ((pc.flags & FLAG_CAUSAL) == 0u && int(j) - pos >= int(WINDOW))))
        return false;
    if ((pc.flags & FLAG_KEY_PADDING) != 0u &&
        !padding_visible(((pc.mask_offs >> 8u) & 0xffu) + b * pc.p_sb + j * pc.p_sk))
        return false;
    return true;
}

// The row's constants: its LSE (-inf: nothing visible), ALiBi slope.
float row_lse(uint b, uint h, uint i) {
    return lse_data[(pc.small_offs & 0xffu) + (b * query_heads() + h) * pc.q_len + i];
}
float head_slope(uint h) {
    float s = 0.0;
    if (HAS_ALIBI)
        s = slopes_data[((pc.small_offs >> 16u) & 0xffu) + h];
    return s;
}

// Dr of the formulas: dot(dout_i, out_i) over the row's dvq quads, for
// query i of head h, batch row b.
float row_dr(uint b, uint h, uint i, uint dvq) {
    uint go = G_OFF + b * pc.g_sb + h * pc.g_sh + i * pc.g_st;
    uint oo = O_OFF + b * pc.o_sb + h * pc.o_sh + i * pc.o_st;
    float dr = 0.0;
    for (uint d = 0u; d < dvq; d++)
        dr += dot(g_load4(go + d), o_load4(oo + d));
    return dr;
}

// The dropout scale of (b, h, i, j): 1 / (1 - p) when kept, 0 when dropped,
// 1 without dropout.
float keep_scale(uint b, uint h, uint i, uint j) {
    if ((pc.flags & BWD_FLAG_DROPOUT) == 0u)
        return 1.0;
    uint bits = dropout_bits(uvec2(pc.seed_lo, pc.seed_hi), b, h, i, j);
    if (bits < pc.threshold)
        return 0.0;
    return 1.0 / (1.0 - float(pc.threshold) * (1.0 / 4294967296.0));
}

// From the scaled dot product x of query i (head h, batch b) and key j:
// the probability p (0 where hidden) and the factor c that takes a score
// gradient back to x (the softcap's derivative; 1 without).
void probability(float x, uint b, uint h, uint i, uint j, int pos, uint mask_row, float lse,
                 float slope, out float p, out float c) {
    p = 0.0;
    c = 1.0;
    if (lse == NEG_INF || !key_visible(pos, b, mask_row, j))
        return;
    float s = x;
    if (HAS_SOFTCAP) {
        s = softcap_log2(x, SOFTCAP);
        float t = s / SOFTCAP;
        c = 1.0 - t * t;
    }
    if ((pc.flags & FLAG_MASK) != 0u)
        s += mask_load((pc.mask_offs & 0xffu) + mask_row + j * pc.m_sk, pc.flags);
    if (HAS_ALIBI)
        s += alibi_log2(slope, pos, j);
    if (s == NEG_INF)
        return;
    p = exp2((s - lse) * LOG2E);
}

#endif
