// The head mask (HF's head_mask): x[b, h, t, :] *= gate[b, h], in place, for
// x [B, H, T, D] of any strides - the attention output before its heads are
// merged (or as merged rows: the strides say which), once attention has
// written it. gate is f32 read as floats (gate[g_off + b g_sb + h g_sh]).
// Variant: DT = f32 / f16 / f16p / bf16 (x's storage).
//   ELEM 0: one invocation per quad of a row (D and the strides multiples of
//           4, offsets on quads: the only mode for pairs kept in 32-bit
//           words, so no word has two writers)
//   ELEM 1: one invocation per element (f32 and f16 storage only)
#version 450
#extension GL_GOOGLE_include_directive : require
#include "tensor_io.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WORKGROUP_SIZE = 64u;
layout(constant_id = 1) const bool ELEM = false;

layout(push_constant) uniform Push {
    uint x_off, x_sb, x_sh, x_st; // x: first unit, strides (quads or elements)
    uint g_off, g_sb, g_sh;       // gate: first element, strides (0: broadcast)
    uint batch, heads, tokens;
    uint units; // per row: quads or elements
} pc;

layout(set = 0, binding = 1, std430) readonly buffer gate_buffer { float gate[]; };

// x read and written in place, by quads (all storages) or by elements.
#define RW_QUADS_f32                                                                   \
    layout(set = 0, binding = 0, std430) buffer x_buffer { vec4 xq[]; };             \
    vec4 load_quad(uint i) { return xq[i]; }                                           \
    void store_quad(uint i, vec4 v) { xq[i] = v; }
#define RW_QUADS_f16                                                                   \
    layout(set = 0, binding = 0, std430) buffer x_buffer { f16vec4 xq[]; };          \
    vec4 load_quad(uint i) { return vec4(xq[i]); }                                     \
    void store_quad(uint i, vec4 v) { xq[i] = f16vec4(v); }
#define RW_QUADS_f16p                                                                  \
    layout(set = 0, binding = 0, std430) buffer x_buffer { uvec2 xq[]; };            \
    vec4 load_quad(uint i) { return UNPACK_HALVES4(xq[i]); }                           \
    void store_quad(uint i, vec4 v) { xq[i] = uvec2(packHalf2x16(v.xy), packHalf2x16(v.zw)); }
#define RW_QUADS_bf16                                                                  \
    layout(set = 0, binding = 0, std430) buffer x_buffer { uvec2 xq[]; };            \
    vec4 load_quad(uint i) { return UNPACK_BF16x4(xq[i]); }                            \
    void store_quad(uint i, vec4 v) { xq[i] = BF16_PACK4(v); }
#define RW_ELEMS_f32                                                                   \
    layout(set = 0, binding = 0, std430) buffer x_e_buffer { float xe[]; };          \
    void scale_elem(uint i, float g) { xe[i] *= g; }
#define RW_ELEMS_f16                                                                   \
    layout(set = 0, binding = 0, std430) buffer x_e_buffer { float16_t xe[]; };      \
    void scale_elem(uint i, float g) { xe[i] = float16_t(float(xe[i]) * g); }
// (never used: the host takes quads for pairs in words)
#define RW_ELEMS_f16p void scale_elem(uint i, float g) {}
#define RW_ELEMS_bf16 void scale_elem(uint i, float g) {}
#define RW_(kind_, dt_) RW_##kind_##_##dt_
#define RW(kind_, dt_) RW_(kind_, dt_)
RW(QUADS, DT)
RW(ELEMS, DT)

void main() {
    uint u = linear_invocation(WORKGROUP_SIZE);
    uint c = u % pc.units;
    uint rest = u / pc.units;
    uint t = rest % pc.tokens;
    rest /= pc.tokens;
    uint h = rest % pc.heads;
    uint b = rest / pc.heads;
    if (b >= pc.batch)
        return;
    float g = gate[pc.g_off + b * pc.g_sb + h * pc.g_sh];
    uint at = pc.x_off + b * pc.x_sb + h * pc.x_sh + t * pc.x_st + c;
    if (ELEM)
        scale_elem(at, g);
    else
        store_quad(at, load_quad(at) * g);
}
