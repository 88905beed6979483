// What both fast attention kernels share: push constants, bindings, and the
// mapping of a tile row to its (query, head) and addresses.
//
// One dispatch covers a chunk of batches (grid z), KV heads (grid y) and, per
// KV head, `heads` query heads of its group times `q_len` queries. Those are
// packed as rows `row = query * heads + head_in_group` (GQA packing: every
// K/V element a tile loads serves all the heads of its group, and a tile's
// rows span as few queries as possible, which keeps causal bounds tight).
// All offsets are relative to the dispatch's bindings; the host shifts the
// windows so that index 0 of every dimension is the chunk's first.
#ifndef VKATTN_ATTENTION_MAIN_GLSL
#define VKATTN_ATTENTION_MAIN_GLSL

#include "attention_io.glsl"

layout(push_constant) uniform Push {
    // q, k, v, out: offset, batch, head and token strides, in vec4s
    uint q_off, q_sb, q_sh, q_st;
    uint k_off, k_sb, k_sh, k_st;
    uint v_off, v_sb, v_sh, v_st;
    uint o_off, o_sb, o_sh, o_st;
    // additive mask: offset, batch, head, query and key strides, in elements
    uint m_off, m_sb, m_sh, m_sq, m_sk;
    // key padding: offset, batch and key strides, in elements (bytes)
    uint p_off, p_sb, p_sk;
    uint q_len;  // queries in this dispatch
    uint kv_len; // Tk
    uint group;  // query heads per KV head (Hq / Hkv)
    uint heads;  // query heads of each group in this dispatch (group or 1)
    int causal_shift; // causal: local query i sees keys j <= i + causal_shift
    uint flags;
    float scale_log2; // scale * log2(e): scores live in the log2 domain
} pc;

DECLARE_IN4(0, q, Q_DT)
DECLARE_IN4(1, k, KV_DT)
DECLARE_IN4(2, v, KV_DT)
DECLARE_OUT4(3, o, O_DT)
DECLARE_MASKS(4, 5)

// Addresses and visibility limit of one tile row.
struct Row {
    uint q;    // vec4 index of the query row
    uint o;    // vec4 index of the output row
    uint mask; // element index of the mask row (key 0)
    int last;  // last visible key (before padding and the mask)
};

Row row_info(uint row, uint batch, uint kv_head) {
    uint i = row / pc.heads;
    uint h = kv_head * pc.group + row % pc.heads;
    Row r;
    r.q = pc.q_off + batch * pc.q_sb + h * pc.q_sh + i * pc.q_st;
    r.o = pc.o_off + batch * pc.o_sb + h * pc.o_sh + i * pc.o_st;
    r.mask = pc.m_off + batch * pc.m_sb + h * pc.m_sh + i * pc.m_sq;
    r.last = (pc.flags & FLAG_CAUSAL) != 0u ? int(i) + pc.causal_shift : int(pc.kv_len) - 1;
    return r;
}

// Keys [0, end) are all any of the rows [first_row, last_row] can see; keys
// [0, full) are visible to all of them as far as causality goes. Rows are
// ordered by query, so the first and last rows bound the others.
void key_range(uint first_row, uint last_row, out uint end, out uint full) {
    int tk = int(pc.kv_len);
    if ((pc.flags & FLAG_CAUSAL) == 0u) {
        end = pc.kv_len;
        full = pc.kv_len;
        return;
    }
    end = uint(clamp(int(last_row / pc.heads) + pc.causal_shift + 1, 0, tk));
    full = uint(clamp(int(first_row / pc.heads) + pc.causal_shift + 1, 0, tk));
}

// Score of key `j` for a row, in the log2 domain: -inf when hidden.
float masked_score(float s, Row r, uint batch, uint j) {
    bool visible = int(j) <= r.last && j < pc.kv_len;
    if ((pc.flags & FLAG_KEY_PADDING) != 0u)
        visible = visible && padding_visible(pc.p_off + batch * pc.p_sb + j * pc.p_sk);
    if (!visible)
        return NEG_INF;
    if ((pc.flags & FLAG_MASK) != 0u)
        s += mask_load(r.mask + j * pc.m_sk, (pc.flags & FLAG_MASK_F16) != 0u) * LOG2E;
    return s;
}

#endif
