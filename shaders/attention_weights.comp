// Attention weights (the softmax probabilities), for inspection: a separate,
// simple kernel that runs only when weights are asked for, so the fast
// kernels never do any of this work.
//
// A workgroup owns one query row of one head (grid x: query, y: head, z:
// batch); its invocations take the keys in turn. Two passes over the keys:
// the first finds each invocation's max and sum (online, fp32, log2 domain,
// as the fast kernels do), merged through shared memory; the second writes
// exp2(score - max) / sum. Rank-3 weights (mean over heads) come from one
// dispatch per head, each adding its share (flag ACCUMULATE after the first),
// so no atomics and no scratch memory are needed.
//
// With GIVEN_LSE (the MHA layer's appended rows) the row's log-denominator
// comes from outside, for keys that are one part of a larger softmax: no
// first pass, each weight exp2(score - given); no sinks (the given value
// holds them). A given -inf means no other key is visible: the row takes
// its own softmax over this call's keys.
//
// Loops are short on purpose: lavapipe stops every loop of an invocation
// after 65535 iterations in total (LP_MAX_TGSI_LOOP_ITERATIONS), so the dot
// product advances eight vec4 chunks per iteration where it can.
#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
#include "attention_io.glsl"
#include "attention_elem.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WORKGROUP_SIZE = 64u;
layout(constant_id = 1) const uint D = 128u; // q/k head dimension
// not a multiple of 8: zero-padded, rows read element by element (offsets
// and strides then count elements; attention_elem.glsl)
const uint DP = (D + 7u) / 8u * 8u;
const bool ELEM = DP != D;
const uint DC = DP / 4u;
const uint STEP = DC % 8u == 0u ? 8u : 2u; // DC is even

layout(push_constant) uniform Push {
    uint q_off, q_sb, q_sh, q_st; // vec4s
    uint k_off, k_sb, k_sh, k_st; // vec4s
    uint m_off, m_sb, m_sh, m_sq, m_sk; // elements
    uint p_off, p_sb, p_sk;             // elements
    uint w_off, w_sb, w_sh, w_sq, w_sk; // elements (w_sh 0 for rank 3)
    // q_len and heads (unused here: the grid holds them) are, with
    // GIVEN_LSE, the given LSE's batch and head strides (queries at 1)
    uint q_len, kv_len;
    uint group;      // query heads per KV head
    uint heads;      // query heads in this dispatch (grid y)
    uint head_first; // group position of the dispatch's first head (h0 % group)
    int causal_shift; // local query i sits at position i + causal_shift
    // bits 0-7: flags; bits 8-15 and 16-23: the first element of the sinks
    // (or given LSE) and slopes windows (which start at the dispatch's first
    // head)
    uint flags;
    float scale_log2;
    float head_weight; // 1 / Hq for rank 3, 1 for rank 4
    uint g_sb;         // the head mask's batch stride (its first element: flags bits 24-31)
} pc;

// Score modifiers as in attention_main.glsl (the same ids and bits).
layout(constant_id = 8) const uint MODS = 0u;
layout(constant_id = 9) const uint WINDOW = 0u;
layout(constant_id = 10) const float SOFTCAP = 0.0;
const bool HAS_WINDOW = (MODS & 1u) != 0u;
const bool HAS_SOFTCAP = (MODS & 2u) != 0u;
const bool HAS_SINKS = (MODS & 4u) != 0u;
const bool HAS_ALIBI = (MODS & 8u) != 0u;
const bool GIVEN_LSE = (MODS & 16u) != 0u;     // the row's LSE in sinks_buffer
const bool HAS_HEAD_GATE = (MODS & 32u) != 0u; // head_mask scales each head's weights

#ifdef KV_ANY
// k in storage `any` (attention_io.glsl): its vkattn_dtype value (quantized k)
layout(constant_id = 11) const uint k_dtype = 0u;
#endif
DECLARE_IN4(0, q, Q_DT)
DECLARE_IN4(1, k, KV_DT)
DECLARE_ELEM_IN(0, q, Q_DT)
DECLARE_ELEM_IN(1, k, KV_DT)
DECLARE_MASKS(2, 3)
layout(set = 0, binding = 4, std430) buffer weights_buffer { float w_data[]; };
layout(set = 0, binding = 5, std430) readonly buffer sinks_buffer { float sinks_data[]; };
layout(set = 0, binding = 6, std430) readonly buffer slopes_buffer { float slopes_data[]; };
layout(set = 0, binding = 7, std430) readonly buffer gate_buffer { float gate_data[]; };

shared float red_m[WORKGROUP_SIZE];
shared float red_l[WORKGROUP_SIZE];

// Visible keys of the row: [first, last]; pos its aligned position.
float score(uint q_row, uint k_row, uint mask_row, uint batch, int first, int last, int pos,
            float slope2, uint j) {
    bool visible = int(j) <= last && int(j) >= first;
    if ((pc.flags & FLAG_KEY_PADDING) != 0u)
        visible = visible && padding_visible(pc.p_off + batch * pc.p_sb + j * pc.p_sk);
    if (!visible)
        return NEG_INF;
    float acc = 0.0;
    uint kr = k_row + j * pc.k_st;
    for (uint c = 0u; c < DC; c += STEP)
        [[unroll]] for (uint u = 0u; u < STEP; u++)
            if (ELEM) // (an if, not ?:, so that only one kind of load is made)
                acc += dot(q_elem4(q_row, c + u, D), k_elem4(kr, c + u, D));
            else
                acc += dot(q_load4(q_row + c + u), k_load4(kr + c + u));
    acc *= pc.scale_log2;
    if (HAS_SOFTCAP)
        acc = softcap_log2(acc, SOFTCAP * LOG2E);
    if ((pc.flags & FLAG_MASK) != 0u)
        acc += mask_load(mask_row + j * pc.m_sk, pc.flags) * LOG2E;
    if (HAS_ALIBI)
        acc += alibi_log2(slope2, pos, j);
    return acc;
}

void main() {
    const uint lid = gl_LocalInvocationID.x;
    const uint i = gl_WorkGroupID.x, h = gl_WorkGroupID.y, batch = gl_WorkGroupID.z;
    const int pos = int(i) + pc.causal_shift;
    const int last = (pc.flags & FLAG_CAUSAL) != 0u ? pos
                     : HAS_WINDOW ? min(pos + int(WINDOW) - 1, int(pc.kv_len) - 1)
                                  : int(pc.kv_len) - 1;
    const int first = HAS_WINDOW ? pos - int(WINDOW) + 1 : 0;
    float slope2 = 0.0, sink2 = NEG_INF;
    if (HAS_ALIBI)
        slope2 = slopes_data[((pc.flags >> 16u) & 0xffu) + h] * LOG2E;
    if (HAS_SINKS)
        sink2 = sinks_data[((pc.flags >> 8u) & 0xffu) + h] * LOG2E;
    const uint q_row = pc.q_off + batch * pc.q_sb + h * pc.q_sh + i * pc.q_st;
    const uint kv = (pc.head_first + h) / pc.group;
    const uint k_row = pc.k_off + batch * pc.k_sb + kv * pc.k_sh;
    const uint mask_row = pc.m_off + batch * pc.m_sb + h * pc.m_sh + i * pc.m_sq;

    float m = NEG_INF, l = 0.0, m_safe = 0.0, given = NEG_INF;
    if (GIVEN_LSE) // (one row per workgroup: uniform, and so is the branch below)
        given = sinks_data[((pc.flags >> 8u) & 0xffu) + batch * pc.q_len + h * pc.heads + i];
    if (given != NEG_INF) {
        m_safe = given * LOG2E;
        l = 1.0;
    } else { // a given -inf: nothing else is visible, the call's own softmax
        // ---- pass 1: this invocation's max and sum, then the row's
        for (uint j = lid; j < pc.kv_len; j += WORKGROUP_SIZE) {
            float s = score(q_row, k_row, mask_row, batch, first, last, pos, slope2, j);
            float m_new = max(m, s);
            float m_safe = m_new == NEG_INF ? 0.0 : m_new; // no exp2(-inf - -inf)
            l = l * exp2(m - m_safe) + exp2(s - m_safe);
            m = m_new;
        }
        red_m[lid] = m;
        red_l[lid] = l;
        barrier();
        m = NEG_INF;
        [[unroll]] for (uint u = 0u; u < WORKGROUP_SIZE; u++)
            m = max(m, red_m[u]);
        m_safe = m == NEG_INF ? 0.0 : m;
        l = 0.0;
        [[unroll]] for (uint u = 0u; u < WORKGROUP_SIZE; u++)
            l += red_l[u] * exp2(red_m[u] - m_safe);
        if (HAS_SINKS && l > 0.0) { // the sink joins the denominator (rescaled)
            float mm = max(m, sink2);
            l = l * exp2(m - mm) + exp2(sink2 - mm);
            m_safe = mm;
        }
    }

    // ---- pass 2: the probabilities (no visible key: all 0)
    float weight = pc.head_weight;
    if (HAS_HEAD_GATE)
        weight *= gate_data[(pc.flags >> 24u) + batch * pc.g_sb + h];
    const float scale = l > 0.0 ? weight / l : 0.0;
    const uint w_row = pc.w_off + batch * pc.w_sb + h * pc.w_sh + i * pc.w_sq;
    const bool add = (pc.flags & FLAG_WEIGHTS_ACCUMULATE) != 0u;
    for (uint j = lid; j < pc.kv_len; j += WORKGROUP_SIZE) {
        float p = exp2(score(q_row, k_row, mask_row, batch, first, last, pos, slope2, j) - m_safe) *
                  scale;
        uint e = w_row + j * pc.w_sk;
        w_data[e] = add ? w_data[e] + p : p;
    }
}
