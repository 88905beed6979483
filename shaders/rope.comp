// Rotary position embeddings (src/ops/rope/): out = RoPE(x) for one box of
// (batch, head, token) rows of [B, H, T, D] tensors with free strides.
// Variant: DT = f32 / f16 / f16p / bf16, the storage of x and out (tensor_io.glsl).
// One invocation owns one item of one row: item j < R/2 rotates pair j and
// writes exactly the two elements it read; the items past it copy the
// pass-through dims R..D-1 two at a time (out of place only). So in place
// (out bound over x) every element is read and then written by one
// invocation, with no race. f16p elements of different owners may share a
// 32-bit word: stores clear and set their own half atomically.
#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
#include "tensor_io.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WORKGROUP_SIZE = 64u;

const uint FLAG_GPTJ = 1u;      // pairs (2i, 2i+1), else (i, i + R/2)
const uint FLAG_POSITIONS = 2u; // positions from the tensor, else base + t
const uint FLAG_IN_PLACE = 4u;  // read out (x is not bound apart)
const int MAX_POSITION = 16777215; // VKATTN_ROPE_MAX_POSITION

layout(push_constant) uniform Push {
    uint x_first, o_first;     // element of the box's first row, in each binding
    uint pos_first, pos_t;     // positions: element of [b0, t0]; its row length T
    uint xs_b, xs_h, xs_t;     // strides of x within the box (elements)
    uint os_b, os_h, os_t;     // strides of out
    uint nb, nh, nt, per_row;  // box counts; items per row
    uint half_dims, head_dim;  // R/2, D
    uint flags;
    uint position_base;        // position_offset + t0 (no positions tensor)
} pc;

// (an extra expansion step, so DT is replaced before DECLARE_ELEMS pastes it)
#define DECLARE_DT(binding_, access_, dt_, name_) DECLARE_ELEMS(binding_, access_, dt_, name_)
DECLARE_DT(0, readonly, DT, x)
DECLARE_DT(1, , DT, o)
// float[level][digit][R/2][2] (cos, sin): src/spec/rope.h
layout(set = 0, binding = 2, std430) readonly buffer table_buffer { vec2 table[]; };
layout(set = 0, binding = 3, std430) readonly buffer positions_buffer { int positions[]; };

#define LOAD_f32(buf_, i_) buf_[i_]
#define LOAD_f16(buf_, i_) float(buf_[i_])
#define LOAD_f16p(buf_, i_) unpackHalf2x16(buf_[(i_) >> 1])[(i_) & 1u]
#define LOAD_bf16(buf_, i_) BF16_PAIR(buf_[(i_) >> 1])[(i_) & 1u]
#define LOAD_(buf_, i_, dt_) LOAD_##dt_(buf_, i_)
#define LOAD(buf_, i_, dt_) LOAD_(buf_, i_, dt_)

#define STORE_f32(i_, v_) o[i_] = (v_)
#define STORE_f16(i_, v_) o[i_] = float16_t(v_)
// This invocation owns only its half of the word (as linear_io.glsl's
// Y_STORE_f16p): clear and set its 16 bits atomically.
#define STORE_f16p(i_, v_)                                             \
    do {                                                               \
        uint sh_ = ((i_) & 1u) * 16u;                                  \
        uint bits_ = (packHalf2x16(vec2(v_, 0.0)) & 0xffffu) << sh_;   \
        atomicAnd(o[(i_) >> 1], ~(0xffffu << sh_));                    \
        atomicOr(o[(i_) >> 1], bits_);                                 \
    } while (false)
// bf16 halves of a word likewise (rounded to nearest even: BF16_BITS).
#define STORE_bf16(i_, v_)                                             \
    do {                                                               \
        uint sh_ = ((i_) & 1u) * 16u;                                  \
        uint bits_ = BF16_BITS(v_) << sh_;                             \
        atomicAnd(o[(i_) >> 1], ~(0xffffu << sh_));                    \
        atomicOr(o[(i_) >> 1], bits_);                                 \
    } while (false)
#define STORE_(i_, v_, dt_) STORE_##dt_(i_, v_)
#define STORE(i_, v_, dt_) STORE_(i_, v_, dt_)

float load(uint xi, uint oi) {
    if ((pc.flags & FLAG_IN_PLACE) != 0u)
        return LOAD(o, oi, DT);
    return LOAD(x, xi, DT);
}

// (cos, sin) of position p times frequency i: the complex product of one
// table entry per base-64 digit of p, so fp32 keeps the angle exact.
vec2 rotation(uint p, uint i) {
    vec2 cs = vec2(1.0, 0.0);
    [[unroll]] for (uint level = 0u; level < 4u; level++) {
        uint digit = (p >> (6u * level)) & 63u;
        vec2 e = table[(level * 64u + digit) * pc.half_dims + i];
        cs = vec2(cs.x * e.x - cs.y * e.y, cs.x * e.y + cs.y * e.x);
    }
    return cs;
}

void main() {
    uint id = linear_invocation(WORKGROUP_SIZE);
    uint j = id % pc.per_row;
    uint row = id / pc.per_row;
    uint t = row % pc.nt;
    row /= pc.nt;
    uint h = row % pc.nh;
    uint b = row / pc.nh;
    if (b >= pc.nb)
        return;
    uint xr = pc.x_first + b * pc.xs_b + h * pc.xs_h + t * pc.xs_t;
    uint orow = pc.o_first + b * pc.os_b + h * pc.os_h + t * pc.os_t;
    if (j < pc.half_dims) {
        bool gptj = (pc.flags & FLAG_GPTJ) != 0u;
        uint ix = gptj ? 2u * j : j;
        uint iy = gptj ? 2u * j + 1u : j + pc.half_dims;
        uint p = pc.position_base + t;
        if ((pc.flags & FLAG_POSITIONS) != 0u)
            p = uint(clamp(positions[pc.pos_first + b * pc.pos_t + t], 0, MAX_POSITION));
        vec2 cs = rotation(p, j);
        float u = load(xr + ix, orow + ix), v = load(xr + iy, orow + iy);
        STORE(orow + ix, u * cs.x - v * cs.y, DT);
        STORE(orow + iy, u * cs.y + v * cs.x, DT);
    } else { // out of place: the pass-through dims, two per item
        uint d = 2u * j; // = R + 2 (j - R/2)
        STORE(orow + d, LOAD(x, xr + d, DT), DT);
        if (d + 1u < pc.head_dim)
            STORE(orow + d + 1u, LOAD(x, xr + d + 1u, DT), DT);
    }
}
