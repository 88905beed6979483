// Split-KV combine: merges the partial results the split pass of
// kv_attention_sg.comp / kv_attention_sm.comp left in the split scratch into
// the normalised output. One invocation per output vec4 of (batch row,
// query head, query); the splits are merged in a fixed order, so a fixed
// split count gives the same bits every run. Variant: O_DT (out storage).
// The sinks join the merged denominator here (MODS bit 8; f32 [Hq] at
// binding 2) and the LSE is written from the merged max and sum (bit 16;
// f32 [B, Hq, T] at binding 3), the bits of kv_attention_main.glsl's MODS.
// D is the v head dim: rows of D values (then max and sum); with ELEM the
// output's push constants count elements and a D that is not a multiple of
// 8 is written an element at a time (see kv_attention_sg.comp).
#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
#include "attention_elem.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WORKGROUP_SIZE = 64u;
layout(constant_id = 1) const uint D = 128u; // v head dimension
layout(constant_id = 2) const uint MODS = 0u;
layout(constant_id = 3) const bool ELEM = false;
const bool M_SINKS = (MODS & 8u) != 0u;
const bool M_LSE = (MODS & 16u) != 0u;

const uint DC = (D + 7u) / 8u * 2u; // quads of the row padded to 8
const uint SPLIT_ROWS = 64u; // VKATTN_KV_MAX_SPLIT_ROWS

layout(push_constant) uniform Push {
    uint o_off, o_sb, o_sh, o_st; // out: offset, batch, head, token strides (vec4s; ELEM: elements)
    uint batch, heads, tokens;    // B, Hq, T
    uint s_heads;                 // query heads of the split scratch's layout
    uint splits;
    uint sinks_off;                       // first element of the sinks
    uint lse_off, lse_sb, lse_sh, lse_st; // LSE: offset, batch, head, token strides
} pc;

layout(set = 0, binding = 0, std430) readonly buffer split_buffer { float split_data[]; };
DECLARE_OUT4(1, o, O_DT)
DECLARE_ELEM_OUT(1, o, O_DT)
KV_DECLARE_SINKS(2)
KV_DECLARE_LSE(3)

void main() {
    uint id = (gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x) * WORKGROUP_SIZE +
              gl_LocalInvocationID.x;
    uint c = id % DC, rest = id / DC;
    uint i = rest % pc.tokens;
    rest /= pc.tokens;
    uint h = rest % pc.heads, b = rest / pc.heads;
    if (b >= pc.batch)
        return;
    // [batch row][query head][split * T + query] rows of D + 2 floats
    uint row = ((b * pc.s_heads + h) * SPLIT_ROWS + i) * (D + 2u);
    uint step = pc.tokens * (D + 2u);
    float mx = NEG_INF;
    for (uint s = 0u; s < pc.splits; s++)
        mx = max(mx, split_data[row + s * step + D]);
    // no split saw a visible key: weights 0, sum 0 -> zeros, never NaN
    float m_safe = mx == NEG_INF ? 0.0 : mx;
    vec4 acc = vec4(0.0);
    float sum = 0.0;
    for (uint s = 0u; s < pc.splits; s++) {
        uint at = row + s * step;
        float w = exp2(split_data[at + D] - m_safe);
        sum += w * split_data[at + D + 1u];
        [[unroll]] for (uint e = 0u; e < 4u; e++)
            if (4u * c + e < D) // past D: the row's max and sum, or the next row
                acc[e] += w * split_data[at + 4u * c + e];
    }
    // sum = 0 only when no split saw a visible key: zeros, LSE -inf
    float inv = sum > 0.0 ? 1.0 / sum : 0.0;
    float lse = sum > 0.0 ? mx + log2(sum) : NEG_INF;
    if (M_SINKS && sum > 0.0) {
        float sink = kv_sinks[pc.sinks_off + h] * LOG2E;
        float m2 = max(mx, sink);
        float a = exp2(mx - m2), den = sum * a + exp2(sink - m2);
        inv = a / den;
        lse = m2 + log2(den);
    }
    if (M_LSE && c == 0u)
        kv_lse[pc.lse_off + b * pc.lse_sb + h * pc.lse_sh + i * pc.lse_st] =
            lse == NEG_INF ? NEG_INF : lse * LN2;
    uint o_row = pc.o_off + b * pc.o_sb + h * pc.o_sh + i * pc.o_st;
    if (!ELEM) {
        o_store4(o_row + c, acc * inv);
    } else if (D % 8u == 0u) { // out keeps whole aligned quads (the host checks)
        o_store4(o_row / 4u + c, acc * inv);
    } else {
        [[unroll]] for (uint e = 0u; e < 4u; e++)
            if (4u * c + e < D)
                o_store1(o_row + 4u * c + e, acc[e] * inv);
    }
}
