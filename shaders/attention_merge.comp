// Merge of two attention results over disjoint key sets by their LSE
// (vkattn_cmd_attention_merge): out = (w_a out_a + w_b out_b) / (w_a + w_b)
// with w = exp(lse - max(lse_a, lse_b)), lse = max + log(w_a + w_b); a row
// with both LSEs -inf gives zeros and -inf, never NaN.
//
// One invocation per row (batch, head, query): it reads both LSEs before it
// writes, and each output quad only after reading that quad of both inputs,
// so out may be out_a or out_b and lse may be lse_a or lse_b (in place).
// Variant: O_DT, the storage of all three outputs-shaped tensors.
#version 450
#extension GL_GOOGLE_include_directive : require
#include "attention_io.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WORKGROUP_SIZE = 64u;
layout(constant_id = 1) const uint D = 128u; // head dimension, a multiple of 4

const uint DC = D / 4u;
const uint FLAG_LSE_OUT = 1u;

layout(push_constant) uniform Push {
    uint a_off, a_sb, a_sh, a_st; // out_a: offset, batch, head, token strides (vec4s)
    uint b_off, b_sb, b_sh, b_st; // out_b
    uint o_off, o_sb, o_sh, o_st; // out
    uint la_off, la_sb, la_sh, la_st; // lse_a (elements)
    uint lb_off, lb_sb, lb_sh, lb_st; // lse_b
    uint l_off, l_sb, l_sh, l_st;     // lse
    uint q_len;
    uint flags;
} pc;

DECLARE_IN4(0, a, O_DT)
DECLARE_IN4(1, b, O_DT)
DECLARE_OUT4(2, o, O_DT)
layout(set = 0, binding = 3, std430) readonly buffer lse_a_buffer { float lse_a[]; };
layout(set = 0, binding = 4, std430) readonly buffer lse_b_buffer { float lse_b[]; };
layout(set = 0, binding = 5, std430) writeonly buffer lse_buffer { float lse_o[]; };

void main() {
    const uint i = gl_GlobalInvocationID.x, h = gl_WorkGroupID.y, batch = gl_WorkGroupID.z;
    if (i >= pc.q_len)
        return;
    float la = lse_a[pc.la_off + batch * pc.la_sb + h * pc.la_sh + i * pc.la_st];
    float lb = lse_b[pc.lb_off + batch * pc.lb_sb + h * pc.lb_sh + i * pc.lb_st];
    float mx = max(la, lb);
    float m_safe = mx == NEG_INF ? 0.0 : mx; // both empty: weights 0, no NaN
    float wa = exp(la - m_safe), wb = exp(lb - m_safe);
    float sum = wa + wb;
    float inv = sum > 0.0 ? 1.0 / sum : 0.0;
    wa *= inv;
    wb *= inv;
    const uint ra = pc.a_off + batch * pc.a_sb + h * pc.a_sh + i * pc.a_st;
    const uint rb = pc.b_off + batch * pc.b_sb + h * pc.b_sh + i * pc.b_st;
    const uint ro = pc.o_off + batch * pc.o_sb + h * pc.o_sh + i * pc.o_st;
    for (uint c = 0u; c < DC; c++) {
        vec4 va = a_load4(ra + c), vb = b_load4(rb + c);
        // a weight of 0 never multiplies the other side's values (0 * inf)
        vec4 r = vec4(0.0);
        if (wa > 0.0)
            r += wa * va;
        if (wb > 0.0)
            r += wb * vb;
        o_store4(ro + c, r);
    }
    if ((pc.flags & FLAG_LSE_OUT) != 0u)
        lse_o[pc.l_off + batch * pc.l_sb + h * pc.l_sh + i * pc.l_st] =
            sum > 0.0 ? m_safe + log(sum) : NEG_INF;
}
