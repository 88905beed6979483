// The MHA layer's backward through its heads epilogue (src/ops/mha/
// mha_backward.c): one workgroup per head row (token t of batch row b, head
// h) takes the attention backward's gradient g of the row ([B, H, T, D],
// f32), undoes RoPE (the transposed rotation: the same angles as the
// forward's epilogue, shaders/linear_io.glsl) and QK-norm (RMSNorm's
// backward from the recomputed projection x before the norm), and stores
// the gradient of the projection's output merged into its [B*T, width] row
// (columns col0 + h*D + d), f32. With the norm it also stores the row's
// share of the norm weights' gradient, g * x * r, at [(row * H + h) * D + d]
// (summed over rows and heads afterwards by a column sum). Without norm and
// RoPE it is the merge of the heads alone (V's gradient).
//   y = x r w, r = 1 / sqrt(mean(x^2) + eps):
//   dx = r (g w) - x r^3 sum(g w x) / D,   dw += g x r
#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require

layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG = 64u; // a power of two
const uint MAX_D = 576u;
const uint FLAG_NORM = 1u, FLAG_ROPE = 2u, FLAG_GPTJ = 4u, FLAG_POSITIONS = 8u;

layout(push_constant) uniform Push {
    uint D, H, T;
    uint g_off, g_sb, g_sh, g_st; // g: elements
    uint x_off, x_sr;             // x: [B*T, width] rows
    uint o_off, o_sr, col0;       // out: [B*T, width] rows, the segment's first column
    uint p_off;                   // the norm weights' partial gradients
    uint norm_off, table_off;     // params: norm weights [D], the angle table
    uint pos_off;                 // positions int32 [B, T]
    uint rope_dims;
    uint flags;
    float eps;
} pc;

layout(set = 0, binding = 0, std430) readonly buffer g_buffer { float g_data[]; };
layout(set = 0, binding = 1, std430) readonly buffer x_buffer { float x_data[]; };
layout(set = 0, binding = 2, std430) readonly buffer params_buffer { float params[]; };
layout(set = 0, binding = 3, std430) readonly buffer positions_buffer { int positions[]; };
layout(set = 0, binding = 4, std430) writeonly buffer out_buffer { float out_data[]; };
layout(set = 0, binding = 5, std430) writeonly buffer partial_buffer { float partial[]; };

shared float gs[MAX_D];
shared float red[WG];

// (cos, sin) of position * inv_freq[i]: as epi_angle of linear_io.glsl.
vec2 angle(uint pos, uint i) {
    const uint rot = pc.rope_dims / 2u;
    vec2 r = vec2(1.0, 0.0);
    [[unroll]] for (uint l = 0u; l < 4u; l++) {
        uint digit = (pos >> (6u * l)) & 63u;
        uint e = pc.table_off + ((l * 64u + digit) * rot + i) * 2u;
        vec2 f = vec2(params[e], params[e + 1u]);
        r = vec2(r.x * f.x - r.y * f.y, r.x * f.y + r.y * f.x);
    }
    return r;
}

// The workgroup's sum of v (every invocation gets it).
float reduce(float v) {
    const uint lid = gl_LocalInvocationID.x;
    red[lid] = v;
    barrier();
    for (uint s = WG / 2u; s > 0u; s >>= 1) {
        if (lid < s) red[lid] += red[lid + s];
        barrier();
    }
    float total = red[0];
    barrier();
    return total;
}

void main() {
    const uint lid = gl_LocalInvocationID.x;
    const uint t = gl_WorkGroupID.x, h = gl_WorkGroupID.y, b = gl_WorkGroupID.z;
    const uint row = b * pc.T + t;
    const uint g_at = pc.g_off + b * pc.g_sb + h * pc.g_sh + t * pc.g_st;
    for (uint d = lid; d < pc.D; d += WG)
        gs[d] = g_data[g_at + d];
    barrier();
    if ((pc.flags & FLAG_ROPE) != 0u) {
        // y0 = x0 c - x1 s, y1 = x0 s + x1 c: dx0 = g0 c + g1 s, dx1 = g1 c - g0 s
        int p = (pc.flags & FLAG_POSITIONS) != 0u ? positions[pc.pos_off + row] : int(t);
        uint pos = uint(clamp(p, 0, 16777215));
        const uint rot = pc.rope_dims / 2u;
        for (uint k = lid; k < rot; k += WG) {
            uint d0 = (pc.flags & FLAG_GPTJ) != 0u ? 2u * k : k;
            uint d1 = (pc.flags & FLAG_GPTJ) != 0u ? 2u * k + 1u : k + rot;
            vec2 cs = angle(pos, k);
            float g0 = gs[d0], g1 = gs[d1];
            gs[d0] = g0 * cs.x + g1 * cs.y;
            gs[d1] = g1 * cs.x - g0 * cs.y;
        }
        barrier();
    }
    const uint o_at = pc.o_off + row * pc.o_sr + pc.col0 + h * pc.D;
    if ((pc.flags & FLAG_NORM) == 0u) {
        for (uint d = lid; d < pc.D; d += WG)
            out_data[o_at + d] = gs[d];
        return;
    }
    const uint x_at = pc.x_off + row * pc.x_sr + pc.col0 + h * pc.D;
    float ss = 0.0, gwx = 0.0;
    for (uint d = lid; d < pc.D; d += WG) {
        float x = x_data[x_at + d];
        ss = fma(x, x, ss);
        gwx = fma(gs[d] * params[pc.norm_off + d], x, gwx);
    }
    ss = reduce(ss);
    gwx = reduce(gwx);
    float r = inversesqrt(ss / float(pc.D) + pc.eps);
    float c = r * r * r * gwx / float(pc.D);
    const uint p_at = pc.p_off + (row * pc.H + h) * pc.D;
    for (uint d = lid; d < pc.D; d += WG) {
        float x = x_data[x_at + d], g = gs[d];
        out_data[o_at + d] = r * g * params[pc.norm_off + d] - x * c;
        partial[p_at + d] = g * x * r;
    }
}
