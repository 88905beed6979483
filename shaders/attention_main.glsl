// What both fast attention kernels share: push constants, bindings, and the
// mapping of a tile row to its (query, head) and addresses.
//
// One dispatch covers a chunk of batches (grid z), KV heads (grid y) and, per
// KV head, `heads` query heads of its group times `q_len` queries. Those are
// packed as rows `row = query * heads + head_in_group` (GQA packing: every
// K/V element a tile loads serves all the heads of its group, and a tile's
// rows span as few queries as possible, which keeps causal bounds tight).
// All offsets are relative to the dispatch's bindings; the host shifts the
// windows so that index 0 of every dimension is the chunk's first. q, k, v
// and out offsets and strides count quads, or elements when a head dim is
// not a multiple of 8 (the kernels' ELEM, attention_elem.glsl).
#ifndef VKATTN_ATTENTION_MAIN_GLSL
#define VKATTN_ATTENTION_MAIN_GLSL

#include "attention_io.glsl"
#include "attention_elem.glsl"

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
    int causal_shift; // local query i sits at position i + causal_shift
    // bits 0-7: flags (FLAG_ONE_HEAD: the dispatch has one query head of
    // each group, else all `group`); bits 8-15, 16-23, 24-31: the first
    // element of the sinks, slopes and LSE windows (below 64: the binding
    // offset alignment is at most 256 bytes)
    uint flags;
    float scale; // the softmax scale: scores live in the natural domain
    uint lse_sb, lse_sh; // LSE batch and head strides (its query stride is 1)
} pc;

const uint FLAG_ONE_HEAD = 32u; // mirrors ATT_FLAG_ONE_HEAD

// Score modifiers, specialization constants so that a plain call compiles
// none of them (ids 8 on: the kernels' own constants come first).
layout(constant_id = 8) const uint MODS = 0u; // MOD_* bits
layout(constant_id = 9) const uint WINDOW = 0u; // sliding window, with MOD_WINDOW
layout(constant_id = 10) const float SOFTCAP = 0.0; // logit softcap, with MOD_SOFTCAP
const bool HAS_WINDOW = (MODS & 1u) != 0u;  // mirrors ATT_MOD_* (attention_internal.h)
const bool HAS_SOFTCAP = (MODS & 2u) != 0u;
const bool HAS_SINKS = (MODS & 4u) != 0u;
const bool HAS_ALIBI = (MODS & 8u) != 0u;
const bool HAS_LSE = (MODS & 16u) != 0u;

#ifdef KV_ANY
// k and v in storage `any` (attention_io.glsl): their vkattn_dtype values
layout(constant_id = 11) const uint k_dtype = 0u;
layout(constant_id = 12) const uint v_dtype = 0u;
#endif
DECLARE_IN4(0, q, Q_DT)
DECLARE_IN4(1, k, KV_DT)
DECLARE_IN4(2, v, KV_DT)
DECLARE_OUT4(3, o, O_DT)
DECLARE_ELEM_IN(0, q, Q_DT)
DECLARE_ELEM_IN(1, k, KV_DT)
DECLARE_ELEM_IN(2, v, KV_DT)
DECLARE_ELEM_OUT(3, o, O_DT)
DECLARE_MASKS(4, 5)
layout(set = 0, binding = 6, std430) readonly buffer sinks_buffer { float sinks_data[]; };
layout(set = 0, binding = 7, std430) readonly buffer slopes_buffer { float slopes_data[]; };
layout(set = 0, binding = 8, std430) writeonly buffer lse_buffer { float lse_data[]; };

// Query heads of each group in this dispatch.
uint dispatch_heads() { return (pc.flags & FLAG_ONE_HEAD) != 0u ? 1u : pc.group; }

// Addresses, position and visibility limits of one tile row.
struct Row {
    uint q;       // vec4 index of the query row
    uint o;       // vec4 index of the output row
    uint mask;    // element index of the mask row (key 0)
    int last;     // last visible key (before padding and the mask)
    int first;    // first visible key (window; else 0)
    int pos;      // the query's aligned position i'
    float slope;  // ALiBi slope
    float sink;   // sink logit; -inf without sinks
    uint lse;     // element index of the row's LSE
};

Row row_info(uint row, uint batch, uint kv_head) {
    uint heads = dispatch_heads();
    uint i = row / heads;
    uint h = kv_head * pc.group + row % heads;
    Row r;
    r.q = pc.q_off + batch * pc.q_sb + h * pc.q_sh + i * pc.q_st;
    r.o = pc.o_off + batch * pc.o_sb + h * pc.o_sh + i * pc.o_st;
    r.mask = pc.m_off + batch * pc.m_sb + h * pc.m_sh + i * pc.m_sq;
    r.pos = int(i) + pc.causal_shift;
    // (the host passes a window below Tq + Tk, so pos + WINDOW stays an int)
    r.last = (pc.flags & FLAG_CAUSAL) != 0u ? r.pos
             : HAS_WINDOW                   ? min(r.pos + int(WINDOW) - 1, int(pc.kv_len) - 1)
                                            : int(pc.kv_len) - 1;
    r.first = HAS_WINDOW ? r.pos - int(WINDOW) + 1 : 0;
    r.slope = 0.0; // ifs, not ?:, so the loads stay off the dummy bindings
    r.sink = NEG_INF;
    if (HAS_ALIBI)
        r.slope = slopes_data[((pc.flags >> 16u) & 0xffu) + h];
    if (HAS_SINKS)
        r.sink = sinks_data[((pc.flags >> 8u) & 0xffu) + h];
    r.lse = (pc.flags >> 24u) + batch * pc.lse_sb + h * pc.lse_sh + i;
    return r;
}

// Keys [begin, end) are all any of the rows [first_row, last_row] can see;
// keys [0, full) are visible to all of them as far as causality goes. Rows
// are ordered by query, so the first and last rows bound the others: key
// blocks wholly before the first row's window are never visited.
void key_range(uint first_row, uint last_row, out uint begin, out uint end, out uint full) {
    int tk = int(pc.kv_len);
    uint heads = dispatch_heads();
    int first_pos = int(first_row / heads) + pc.causal_shift;
    int last_pos = int(last_row / heads) + pc.causal_shift;
    begin = HAS_WINDOW ? uint(clamp(first_pos - int(WINDOW) + 1, 0, tk)) : 0u;
    if ((pc.flags & FLAG_CAUSAL) == 0u) {
        end = HAS_WINDOW ? uint(clamp(last_pos + int(WINDOW), 0, tk)) : pc.kv_len;
        full = end;
        return;
    }
    end = uint(clamp(last_pos + 1, 0, tk));
    full = uint(clamp(first_pos + 1, 0, tk));
}

// Whether key j is hidden from a row by causality, the window or the end.
bool key_hidden(Row r, uint j) {
    bool hidden = int(j) > r.last || j >= pc.kv_len;
    if (HAS_WINDOW)
        hidden = hidden || int(j) < r.first;
    return hidden;
}

// Score of key `j` for a row (natural domain): -inf when hidden.
float masked_score(float s, Row r, uint batch, uint j) {
    bool visible = !key_hidden(r, j);
    if ((pc.flags & FLAG_KEY_PADDING) != 0u)
        visible = visible && padding_visible(pc.p_off + batch * pc.p_sb + j * pc.p_sk);
    if (!visible)
        return NEG_INF;
    if ((pc.flags & FLAG_MASK) != 0u)
        s += mask_load(r.mask + j * pc.m_sk, pc.flags);
    return s;
}

// The final score of key j from its scaled dot product s (natural domain):
// softcap, then hiding (and the additive mask with `masks`), then ALiBi.
float final_score(float s, Row r, uint batch, uint j, bool masks) {
    if (HAS_SOFTCAP)
        s = softcap_log2(s, SOFTCAP);
    if (masks)
        s = masked_score(s, r, batch, j);
    else if (key_hidden(r, j))
        s = NEG_INF;
    if (HAS_ALIBI)
        s += alibi_log2(r.slope, r.pos, j);
    return s;
}

// Row end: the factor the unnormalised output is multiplied by, and the
// row's LSE written (by the caller's chosen invocation, `store`).
float row_finish(Row r, float m, float l, bool store) {
    if (!HAS_SINKS && !HAS_LSE)
        return l > 0.0 ? 1.0 / l : 0.0;
    float lse;
    float f = attention_finish(m, l, r.sink, lse);
    if (HAS_LSE && store)
        lse_data[r.lse] = lse;
    return f;
}

#endif
