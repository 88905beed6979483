// Tensor storage: the vocabulary every kernel's tensor bindings are written
// in. A kernel variant is compiled with one storage type per tensor (chosen
// by -D defines in shaders/variants.cmake):
//   f32    storage buffer of float
//   f16    storage buffer of float16_t             (needs 16-bit storage:
//          NEEDS_16BIT_STORAGE)
//   f16p   storage buffer of uint, two halves per word (every device; the
//          bytes are the same as f16: little-endian halves, low half first)
//   bf16   storage buffer of uint, two bfloat16 per word, low one first
//          (every device: a bf16 is the top half of an f32, so no 16-bit
//          storage is ever needed)
//   tex32  uniform texel buffer read as floats: an rgba32f view of f32 data,
//          four elements per texel (linear_io.glsl's mode 0 reads rgba16f
//          views of f16 data the same way)
//   tex16  uniform texel buffer, an rgba32ui view of f16 data: eight halves
//          per texel (UNPACK_HALVES8)
//   texbf16 the same rgba32ui view of bf16 data: eight bfloat16 per texel
//          (UNPACK_BF16x8)
//   texq   the same view of quantized blocks (q8_0, q4_0): raw texels that the
//          kernel picks its blocks' words from
// The storage names are tokens pasted into macro names, so they must never
// be #defined themselves. Arithmetic stays fp32 in every case.
//
// This file declares bindings (DECLARE_ELEMS, DECLARE_QUADS, DECLARE_TEXELS)
// and unpacks halves; it also gives element access (DECLARE_RO / DECLARE_WO,
// below). attention_io.glsl and linear_io.glsl build their quad access on
// the same declarations. Helpers here are macros, not functions, so using
// them adds no call to a kernel (but BF16_BITS, which needs a local: a
// function glslang inlines).
#ifndef VKATTN_TENSOR_IO_GLSL
#define VKATTN_TENSOR_IO_GLSL

#if defined(NEEDS_16BIT_STORAGE)
#extension GL_EXT_shader_16bit_storage : require
#endif
#extension GL_EXT_samplerless_texture_functions : require

// ---- declarations by storage type
// One entry of a storage buffer read an element at a time (ELEM_) or a quad,
// four consecutive elements, at a time (QUAD_); the sampler of a texel buffer.
#define ELEM_f32 float
#define ELEM_f16 float16_t
#define ELEM_f16p uint  // elements 2i and 2i + 1
#define ELEM_bf16 uint  // elements 2i and 2i + 1
#define QUAD_f32 vec4
#define QUAD_f16 f16vec4
#define QUAD_f16p uvec2 // elements 4i .. 4i + 3
#define QUAD_bf16 uvec2 // elements 4i .. 4i + 3
// Texel buffers are declared without a sampler (textureBuffer, read with
// texelFetch through GL_EXT_samplerless_texture_functions): a samplerBuffer
// compiles to an OpTypeSampledImage of Dim Buffer, which SPIR-V 1.6 forbids
// and validation layers on Vulkan 1.3+ devices warn about.
#define SAMPLER_tex32 textureBuffer
#define SAMPLER_tex16 utextureBuffer
#define SAMPLER_texbf16 utextureBuffer
#define SAMPLER_texq utextureBuffer

// A storage buffer `name_##_buffer { type_ member_[]; }`; access_ is
// readonly, writeonly or empty (read and written).
#define DECLARE_BUFFER(binding_, access_, type_, name_, member_)                         \
    layout(set = 0, binding = binding_, std430) access_ buffer name_##_buffer { type_ member_[]; };
// Tensor name_ of storage type dt_ as elements (member name_[]), as quads
// (member member_[]), or as a texel buffer (name_##_tex).
#define DECLARE_ELEMS(binding_, access_, dt_, name_)                                     \
    DECLARE_BUFFER(binding_, access_, ELEM_##dt_, name_, name_)
#define DECLARE_QUADS(binding_, access_, dt_, name_, member_)                            \
    DECLARE_BUFFER(binding_, access_, QUAD_##dt_, name_, member_)
#define DECLARE_TEXELS(binding_, dt_, name_)                                             \
    layout(set = 0, binding = binding_) uniform SAMPLER_##dt_ name_##_tex;

// ---- halves packed in 32-bit words, low half first
// HALVES4: the four halves of two words; UNPACK_HALVES4: those of a uvec2
// (f16p quad); UNPACK_HALVES8: the eight of a uvec4 (tex16 texel) into two
// quads (a statement).
#define HALVES4(w0_, w1_) vec4(unpackHalf2x16(w0_), unpackHalf2x16(w1_))
#define UNPACK_HALVES4(w_) HALVES4((w_).x, (w_).y)
#define UNPACK_HALVES8(w_, lo_, hi_)                                                     \
    lo_ = HALVES4((w_).x, (w_).y);                                                       \
    hi_ = HALVES4((w_).z, (w_).w)

// ---- bfloat16 in 32-bit words, low one first. BF16_PAIR: the two values
// of a word; BF16_BITS(x): x rounded to nearest even (NaN stays a quiet NaN
// of its sign), exactly as vkattn_f32_to_bf16 on the host; BF16_PACK4 /
// UNPACK_BF16x4: a quad to and from a uvec2.
#define BF16_PAIR(w_) vec2(uintBitsToFloat((w_) << 16), uintBitsToFloat((w_) & 0xffff0000u))
#define UNPACK_BF16x4(w_) vec4(BF16_PAIR((w_).x), BF16_PAIR((w_).y))
#define UNPACK_BF16x8(w_, lo_, hi_)                                                      \
    lo_ = vec4(BF16_PAIR((w_).x), BF16_PAIR((w_).y));                                    \
    hi_ = vec4(BF16_PAIR((w_).z), BF16_PAIR((w_).w))
uint BF16_BITS(float x) {
    uint u = floatBitsToUint(x);
    return isnan(x) ? (u >> 16) | 0x40u : (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
}
#define BF16_PACK2(a_, b_) (BF16_BITS(a_) | (BF16_BITS(b_) << 16))
#define BF16_PACK4(v_) uvec2(BF16_PACK2((v_).x, (v_).y), BF16_PACK2((v_).z, (v_).w))

// ---- element access (storage buffers). Element indices are relative to the
// start of the binding.
// Read-only tensors: name_load(i).
#define DECLARE_RO_f32(binding_, name_)                                             \
    DECLARE_ELEMS(binding_, readonly, f32, name_)                                   \
    float name_##_load(uint i) { return name_[i]; }

#define DECLARE_RO_f16(binding_, name_)                                                 \
    DECLARE_ELEMS(binding_, readonly, f16, name_)                                       \
    float name_##_load(uint i) { return float(name_[i]); }

#define DECLARE_RO_f16p(binding_, name_)                                           \
    DECLARE_ELEMS(binding_, readonly, f16p, name_)                                 \
    float name_##_load(uint i) { return unpackHalf2x16(name_[i >> 1])[i & 1u]; }

#define DECLARE_RO_bf16(binding_, name_)                                           \
    DECLARE_ELEMS(binding_, readonly, bf16, name_)                                 \
    float name_##_load(uint i) { return BF16_PAIR(name_[i >> 1])[i & 1u]; }
// Written tensors (declared read-write): name_store_pair(p, v, keep) writes
// elements 2p and 2p+1; keep.x / keep.y false leaves that element untouched
// (a tensor that starts or ends inside a 32-bit word shares it with its
// neighbour: f16p reads the word back).
#define DECLARE_WO_f32(binding_, name_)                                    \
    DECLARE_ELEMS(binding_, , f32, name_)                                  \
    void name_##_store_pair(uint p, vec2 v, bvec2 write) {                    \
        if (write.x) name_[2u * p] = v.x;                                     \
        if (write.y) name_[2u * p + 1u] = v.y;                                \
    }

#define DECLARE_WO_f16(binding_, name_)                                        \
    DECLARE_ELEMS(binding_, , f16, name_)                                      \
    void name_##_store_pair(uint p, vec2 v, bvec2 write) {                        \
        if (write.x) name_[2u * p] = float16_t(v.x);                              \
        if (write.y) name_[2u * p + 1u] = float16_t(v.y);                         \
    }

#define DECLARE_WO_f16p(binding_, name_)                                   \
    DECLARE_ELEMS(binding_, , f16p, name_)                                 \
    void name_##_store_pair(uint p, vec2 v, bvec2 write) {                    \
        uint packed = packHalf2x16(v);                                        \
        if (!all(write)) {                                                    \
            uint old = name_[p];                                              \
            if (!write.x) packed = (packed & 0xffff0000u) | (old & 0xffffu);  \
            if (!write.y) packed = (packed & 0xffffu) | (old & 0xffff0000u);  \
        }                                                                     \
        if (any(write)) name_[p] = packed;                                    \
    }

#define DECLARE_WO_bf16(binding_, name_)                                   \
    DECLARE_ELEMS(binding_, , bf16, name_)                                 \
    void name_##_store_pair(uint p, vec2 v, bvec2 write) {                    \
        uint packed = BF16_PACK2(v.x, v.y);                                   \
        if (!all(write)) {                                                    \
            uint old = name_[p];                                              \
            if (!write.x) packed = (packed & 0xffff0000u) | (old & 0xffffu);  \
            if (!write.y) packed = (packed & 0xffffu) | (old & 0xffff0000u);  \
        }                                                                     \
        if (any(write)) name_[p] = packed;                                    \
    }
// DECLARE_RO(binding, name, f32|f16|f16p|bf16) picks the macro above by storage type.
#define DECLARE_RO_(binding_, name_, dt_) DECLARE_RO_##dt_(binding_, name_)
#define DECLARE_RO(binding_, name_, dt_) DECLARE_RO_(binding_, name_, dt_)
#define DECLARE_WO_(binding_, name_, dt_) DECLARE_WO_##dt_(binding_, name_)
#define DECLARE_WO(binding_, name_, dt_) DECLARE_WO_(binding_, name_, dt_)

// ---- quantized tensors: ggml's blocks of 32 values packed back to back
// with no padding (layouts: vkattn_dtype in vkattn.h): q8_0 (34 bytes: an
// f16 scale d, then 32 int8 q), q4_0 (18: d, 16 bytes of nibbles, value i in
// the low nibble of byte i and value i + 16 in its high nibble; d (q - 8)),
// q4_1 (20: d, an f16 minimum m, nibbles; d q + m), q5_0 (22: d, 32 fifth
// bits qh, nibbles; d (q - 16)), q5_1 (24: d, m, qh, nibbles; d q + m) and
// iq4_nl (18: d, nibbles indexing its levels T, iq4nl_levels4; d T[q]). They are read as
// 32-bit words, so neither 8- nor 16-bit storage is needed. name_##_quad(i)
// is values 4i..4i+3 of the binding: quad i & 7 of block i >> 3. Blocks are
// an even number of bytes and every field starts on an even byte:
// name_##_bytes4 reads the four bytes at an even offset (a second word only
// when it straddles one). Bindings hold an even number of blocks (or more
// words), so the last block ends on a word and nothing past it is read.
// <FORMAT>_QUAD_FN(name_, fn_) defines that reader as fn_ over the words of
// a binding Q_DECLARE_WORDS declared, so one binding can be read in every
// format (attention_io.glsl's `any` storage).
// Bytes of one block of format qf, in the order of the kernels' QF define
// (src/spec/dtype.h's vka_quant_index): 0 q8_0, 1 q4_0, 2 q4_1, 3 q5_0,
// 4 q5_1, 5 iq4_nl.
#define QUANT_BLOCK_BYTES(qf) \
    ((qf) == 0 ? 34u : (qf) == 2 ? 20u : (qf) == 3 ? 22u : (qf) == 4 ? 24u : 18u)

#define Q_DECLARE_WORDS(binding_, name_)                                             \
    layout(set = 0, binding = binding_, std430) readonly buffer name_##_buffer {    \
        uint name_##_words[];                                                        \
    };                                                                               \
    uint name_##_bytes4(uint b) {                                                    \
        uint w = name_##_words[b >> 2u];                                             \
        return (b & 2u) == 0u ? w : (w >> 16u) | (name_##_words[(b >> 2u) + 1u] << 16u); \
    }                                                                                \
    float name_##_scale(uint b) {                                                    \
        return unpackHalf2x16(name_##_words[b >> 2u] >> ((b & 2u) * 8u)).x;          \
    }

#define Q8_0_QUAD_FN(name_, fn_)           \
    vec4 fn_(uint i) {                                                               \
        uint b = (i >> 3u) * 34u;                                                    \
        uint w = name_##_bytes4(b + 2u + (i & 7u) * 4u);                             \
        ivec4 q = ivec4(int(w << 24u), int(w << 16u), int(w << 8u), int(w)) >> 24;   \
        return name_##_scale(b) * vec4(q);                                           \
    }
#define DECLARE_Q8_0_QUADS(binding_, name_) \
    Q_DECLARE_WORDS(binding_, name_) Q8_0_QUAD_FN(name_, name_##_quad)

#define Q4_0_QUAD_FN(name_, fn_)           \
    vec4 fn_(uint i) {                                                               \
        uint b = (i >> 3u) * 18u;                                                    \
        uint w = name_##_bytes4(b + 2u + (i & 3u) * 4u) >> ((i & 4u) != 0u ? 4u : 0u); \
        uvec4 q = uvec4(w, w >> 8u, w >> 16u, w >> 24u) & 0xfu;                      \
        return name_##_scale(b) * (vec4(q) - 8.0);                                   \
    }
#define DECLARE_Q4_0_QUADS(binding_, name_) \
    Q_DECLARE_WORDS(binding_, name_) Q4_0_QUAD_FN(name_, name_##_quad)

// The low (quad i & 7 < 4) or high nibbles of the four bytes of quad i & 3
// of a block whose nibbles start at byte qs.
#define Q_NIBBLES4(name_, qs, i)                                                     \
    ((uvec4(name_##_bytes4((qs) + ((i) & 3u) * 4u) >> (((i) & 4u) != 0u ? 4u : 0u)) >> \
      uvec4(0u, 8u, 16u, 24u)) & 0xfu)

// Bit 4 of the four values of quad i: bits 4 (i & 7) .. 4 (i & 7) + 3 of qh.
#define Q_FIFTH4(qh, i) \
    (((uvec4((qh) >> (((i) & 7u) * 4u)) >> uvec4(0u, 1u, 2u, 3u)) & 1u) << 4u)

#define Q4_1_QUAD_FN(name_, fn_)           \
    vec4 fn_(uint i) {                                                               \
        uint b = (i >> 3u) * 20u;                                                    \
        uvec4 q = Q_NIBBLES4(name_, b + 4u, i);                                      \
        return name_##_scale(b) * vec4(q) + name_##_scale(b + 2u);                   \
    }
#define DECLARE_Q4_1_QUADS(binding_, name_) \
    Q_DECLARE_WORDS(binding_, name_) Q4_1_QUAD_FN(name_, name_##_quad)

#define Q5_0_QUAD_FN(name_, fn_)           \
    vec4 fn_(uint i) {                                                               \
        uint b = (i >> 3u) * 22u;                                                    \
        uvec4 q = Q_NIBBLES4(name_, b + 6u, i) | Q_FIFTH4(name_##_bytes4(b + 2u), i); \
        return name_##_scale(b) * (vec4(q) - 16.0);                                  \
    }
#define DECLARE_Q5_0_QUADS(binding_, name_) \
    Q_DECLARE_WORDS(binding_, name_) Q5_0_QUAD_FN(name_, name_##_quad)

#define Q5_1_QUAD_FN(name_, fn_)           \
    vec4 fn_(uint i) {                                                               \
        uint b = (i >> 3u) * 24u;                                                    \
        uvec4 q = Q_NIBBLES4(name_, b + 8u, i) | Q_FIFTH4(name_##_words[(b + 4u) >> 2u], i); \
        return name_##_scale(b) * vec4(q) + name_##_scale(b + 2u);                   \
    }
#define DECLARE_Q5_1_QUADS(binding_, name_) \
    Q_DECLARE_WORDS(binding_, name_) Q5_1_QUAD_FN(name_, name_##_quad)

// iq4_nl's sixteen levels (ggml's kvalues_iq4nl: -127, -104, -83, -65, -49,
// -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113) of four nibbles, as int8
// bytes of four words picked by the nibbles' top bits: selects and shifts,
// no indexed array (which the CPU drivers spill to memory).
vec4 iq4nl_levels4(uvec4 n) {
    bvec4 b2 = notEqual(n & 4u, uvec4(0u)), b3 = notEqual(n & 8u, uvec4(0u));
    uvec4 w = mix(mix(uvec4(0xbfad9881u), uvec4(0xf6eaddcfu), b2),
                  mix(uvec4(0x26190d01u), uvec4(0x71594535u), b2), b3);
    return vec4(ivec4(w << (24u - 8u * (n & 3u))) >> 24);
}

#define IQ4_NL_QUAD_FN(name_, fn_)           \
    vec4 fn_(uint i) {                                                               \
        uint b = (i >> 3u) * 18u;                                                    \
        uvec4 q = Q_NIBBLES4(name_, b + 2u, i);                                      \
        return name_##_scale(b) * iq4nl_levels4(q);                                  \
    }
#define DECLARE_IQ4_NL_QUADS(binding_, name_) \
    Q_DECLARE_WORDS(binding_, name_) IQ4_NL_QUAD_FN(name_, name_##_quad)

// Linear invocation index over a 2D grid of 1D workgroups of `wg_size`
// invocations (x is capped by maxComputeWorkGroupCount[0], so large launches
// spill into y). The size is passed in rather than read from
// gl_WorkGroupSize, which glslang folds to its default when the size is a
// specialization constant.
uint linear_invocation(uint wg_size) {
    return (gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x) * wg_size +
           gl_LocalInvocationID.x;
}

#endif
