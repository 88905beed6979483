// Bindings, push constants and masking helpers shared by the attention
// kernels (attention_*.comp, kv_attention_*.comp).
//
// q, k, v (and out) are read and written four elements at a time: the API
// requires contiguous rows, strides that are multiples of 4 and offsets that
// are multiples of 16 bytes, so every row starts on a 4-element boundary and
// indices in these helpers count vec4s ("quads") from the binding's start.
// Input storage, chosen per variant by -D Q_DT=... KV_DT=... O_DT=...
// (the storage types of tensor_io.glsl): tex32, tex16, texbf16, f32, f16,
// f16p or bf16 for inputs, f32, f16, f16p or bf16 for the output. A tex16
// (texbf16) view starts on a 16-byte texel, so quad i is half of texel i / 2
// (one fetch brings eight halves: the format is chosen for lavapipe,
// figures: docs/kernels.md). load8(i) reads quads i and i + 1 (the subgroup
// kernels' unit); with tex16 and texbf16 i must be even: the host binds them
// to those kernels only when every row and stride falls on 8 elements.
#ifndef VKATTN_ATTENTION_IO_GLSL
#define VKATTN_ATTENTION_IO_GLSL

#include "tensor_io.glsl"

// ---- inputs: name_load4(i) (quad i), name_load8(i, lo, hi) (quads i, i + 1)
#define DECLARE_IN4_tex32(binding_, name_)                                          \
    DECLARE_TEXELS(binding_, tex32, name_)                                          \
    vec4 name_##_load4(uint i) { return texelFetch(name_##_tex, int(i)); }         \
    void name_##_load8(uint i, out vec4 lo, out vec4 hi) {                          \
        lo = texelFetch(name_##_tex, int(i));                                        \
        hi = texelFetch(name_##_tex, int(i + 1u));                                   \
    }

#define DECLARE_IN4_tex16(binding_, name_)                                          \
    DECLARE_TEXELS(binding_, tex16, name_)                                          \
    vec4 name_##_load4(uint i) {                                                     \
        uvec4 w = texelFetch(name_##_tex, int(i >> 1u));                             \
        uvec2 h = (i & 1u) != 0u ? w.zw : w.xy;                                      \
        return UNPACK_HALVES4(h);                                                    \
    }                                                                                \
    void name_##_load8(uint i, out vec4 lo, out vec4 hi) {                          \
        uvec4 w = texelFetch(name_##_tex, int(i >> 1u));                             \
        UNPACK_HALVES8(w, lo, hi);                                                   \
    }

#define DECLARE_IN4_texbf16(binding_, name_)                                        \
    DECLARE_TEXELS(binding_, texbf16, name_)                                        \
    vec4 name_##_load4(uint i) {                                                     \
        uvec4 w = texelFetch(name_##_tex, int(i >> 1u));                             \
        return UNPACK_BF16x4((i & 1u) != 0u ? w.zw : w.xy);                          \
    }                                                                                \
    void name_##_load8(uint i, out vec4 lo, out vec4 hi) {                          \
        uvec4 w = texelFetch(name_##_tex, int(i >> 1u));                             \
        UNPACK_BF16x8(w, lo, hi);                                                    \
    }

// Raw texels of quantized blocks (kv_decode_q_sg.comp): no quad access.
#define DECLARE_IN4_texq(binding_, name_) DECLARE_TEXELS(binding_, texq, name_)

#define DECLARE_IN4_f32(binding_, name_)                                            \
    DECLARE_QUADS(binding_, readonly, f32, name_, name_##_data)                     \
    vec4 name_##_load4(uint i) { return name_##_data[i]; }                         \
    void name_##_load8(uint i, out vec4 lo, out vec4 hi) {                          \
        lo = name_##_data[i];                                                        \
        hi = name_##_data[i + 1u];                                                   \
    }

#define DECLARE_IN4_f16(binding_, name_)                                            \
    DECLARE_QUADS(binding_, readonly, f16, name_, name_##_data)                     \
    vec4 name_##_load4(uint i) { return vec4(name_##_data[i]); }                   \
    void name_##_load8(uint i, out vec4 lo, out vec4 hi) {                          \
        lo = vec4(name_##_data[i]);                                                  \
        hi = vec4(name_##_data[i + 1u]);                                             \
    }

#define DECLARE_IN4_f16p(binding_, name_)                                           \
    DECLARE_QUADS(binding_, readonly, f16p, name_, name_##_data)                    \
    vec4 name_##_load4(uint i) {                                                     \
        uvec2 w = name_##_data[i];                                                   \
        return UNPACK_HALVES4(w);                                                    \
    }                                                                                \
    void name_##_load8(uint i, out vec4 lo, out vec4 hi) {                          \
        lo = name_##_load4(i);                                                       \
        hi = name_##_load4(i + 1u);                                                  \
    }

#define DECLARE_IN4_bf16(binding_, name_)                                           \
    DECLARE_QUADS(binding_, readonly, bf16, name_, name_##_data)                    \
    vec4 name_##_load4(uint i) { return UNPACK_BF16x4(name_##_data[i]); }          \
    void name_##_load8(uint i, out vec4 lo, out vec4 hi) {                          \
        lo = name_##_load4(i);                                                       \
        hi = name_##_load4(i + 1u);                                                  \
    }

// ---- quantized K/V (KV caches only): ggml's blocks, read a quad at a time
// by tensor_io.glsl's DECLARE_<FORMAT>_QUADS (quad i is values 4i..4i+3 of
// the binding; the host binds whole pools that end on a word).
#define DECLARE_IN4_QUANT(binding_, name_, format_)                                 \
    DECLARE_##format_##_QUADS(binding_, name_)                                       \
    vec4 name_##_load4(uint i) { return name_##_quad(i); }                           \
    void name_##_load8(uint i, out vec4 lo, out vec4 hi) {                          \
        lo = name_##_quad(i);                                                        \
        hi = name_##_quad(i + 1u);                                                   \
    }
#define DECLARE_IN4_q8_0(binding_, name_) DECLARE_IN4_QUANT(binding_, name_, Q8_0)
#define DECLARE_IN4_q4_0(binding_, name_) DECLARE_IN4_QUANT(binding_, name_, Q4_0)
#define DECLARE_IN4_q4_1(binding_, name_) DECLARE_IN4_QUANT(binding_, name_, Q4_1)
#define DECLARE_IN4_q5_0(binding_, name_) DECLARE_IN4_QUANT(binding_, name_, Q5_0)
#define DECLARE_IN4_q5_1(binding_, name_) DECLARE_IN4_QUANT(binding_, name_, Q5_1)
#define DECLARE_IN4_iq4_nl(binding_, name_) DECLARE_IN4_QUANT(binding_, name_, IQ4_NL)

// ---- any: k and v bound as 32-bit words, each read in the dtype of a
// specialization constant name_##_dtype (a vkattn_dtype value: 0 f32, 1 f16,
// 4 bf16, 5.. ggml's blocks), which the kernel declares (attention_main.glsl,
// KV_ANY). The driver folds the other dtypes' branches away when it
// specializes the pipeline. One variant serves k and v of different dtypes
// and quantized k and v; f16 is unpacked from words, so no 16-bit storage.
#define DECLARE_IN4_any(binding_, name_)                                            \
    Q_DECLARE_WORDS(binding_, name_)                                                 \
    Q8_0_QUAD_FN(name_, name_##_q8_0)                                                \
    Q4_0_QUAD_FN(name_, name_##_q4_0)                                                \
    Q4_1_QUAD_FN(name_, name_##_q4_1)                                                \
    Q5_0_QUAD_FN(name_, name_##_q5_0)                                                \
    Q5_1_QUAD_FN(name_, name_##_q5_1)                                                \
    IQ4_NL_QUAD_FN(name_, name_##_iq4_nl)                                            \
    vec4 name_##_load4(uint i) {                                                     \
        if (name_##_dtype == 0u)                                                     \
            return uintBitsToFloat(uvec4(name_##_words[4u * i], name_##_words[4u * i + 1u], \
                                         name_##_words[4u * i + 2u],                 \
                                         name_##_words[4u * i + 3u]));               \
        if (name_##_dtype == 1u)                                                     \
            return UNPACK_HALVES4(uvec2(name_##_words[2u * i], name_##_words[2u * i + 1u])); \
        if (name_##_dtype == 4u)                                                     \
            return UNPACK_BF16x4(uvec2(name_##_words[2u * i], name_##_words[2u * i + 1u])); \
        if (name_##_dtype == 5u)                                                     \
            return name_##_q8_0(i);                                                  \
        if (name_##_dtype == 6u)                                                     \
            return name_##_q4_0(i);                                                  \
        if (name_##_dtype == 7u)                                                     \
            return name_##_q4_1(i);                                                  \
        if (name_##_dtype == 8u)                                                     \
            return name_##_q5_0(i);                                                  \
        if (name_##_dtype == 9u)                                                     \
            return name_##_q5_1(i);                                                  \
        return name_##_iq4_nl(i);                                                    \
    }                                                                                \
    void name_##_load8(uint i, out vec4 lo, out vec4 hi) {                          \
        lo = name_##_load4(i);                                                       \
        hi = name_##_load4(i + 1u);                                                  \
    }

// ---- outputs: name_store4(i, v). One invocation writes all four elements of
// a quad, so packed halves never need a read-modify-write.
#define DECLARE_OUT4_f32(binding_, name_)                                           \
    DECLARE_QUADS(binding_, writeonly, f32, name_, name_##_data)                    \
    void name_##_store4(uint i, vec4 v) { name_##_data[i] = v; }

#define DECLARE_OUT4_f16(binding_, name_)                                           \
    DECLARE_QUADS(binding_, writeonly, f16, name_, name_##_data)                    \
    void name_##_store4(uint i, vec4 v) { name_##_data[i] = f16vec4(v); }

#define DECLARE_OUT4_bf16(binding_, name_)                                          \
    DECLARE_QUADS(binding_, writeonly, bf16, name_, name_##_data)                   \
    void name_##_store4(uint i, vec4 v) { name_##_data[i] = BF16_PACK4(v); }

#define DECLARE_OUT4_f16p(binding_, name_)                                          \
    DECLARE_QUADS(binding_, writeonly, f16p, name_, name_##_data)                   \
    void name_##_store4(uint i, vec4 v) {                                            \
        name_##_data[i] = uvec2(packHalf2x16(v.xy), packHalf2x16(v.zw));             \
    }

#define DECLARE_IN4_(binding_, name_, dt_) DECLARE_IN4_##dt_(binding_, name_)
#define DECLARE_IN4(binding_, name_, dt_) DECLARE_IN4_(binding_, name_, dt_)
#define DECLARE_OUT4_(binding_, name_, dt_) DECLARE_OUT4_##dt_(binding_, name_)
#define DECLARE_OUT4(binding_, name_, dt_) DECLARE_OUT4_(binding_, name_, dt_)

// Flags (push constant `flags`), mirrored in src/ops/attention/attention_internal.h.
const uint FLAG_CAUSAL = 1u;
const uint FLAG_MASK = 2u;
const uint FLAG_MASK_F16 = 4u;
const uint FLAG_KEY_PADDING = 8u;
const uint FLAG_WEIGHTS_ACCUMULATE = 16u; // weights kernel: add to what is there
const uint FLAG_MASK_BOOL = 64u;   // the mask is u8 (boolean): nonzero visible
const uint FLAG_MASK_BLOCKS = 128u; // with FLAG_MASK_BOOL: nonzero hidden
// The mask's dtype is the pair (FLAG_MASK_F16, FLAG_MASK_BOOL): neither f32,
// F16 f16, BOOL u8, both bf16.
const uint MASK_DTYPE_BITS = FLAG_MASK_F16 | FLAG_MASK_BOOL;

// The mask and the key padding are read as 32-bit words whatever their
// dtype (f32, f16 or u8), so they need neither 16-bit or 8-bit storage nor
// a variant of their own; their element offsets and strides are free (0 for
// a broadcast dimension). mask_load gives the additive value of element e:
// a float mask's own, a boolean one's 0 (visible) or -inf (hidden), by the
// push constant flags.
#define DECLARE_MASKS(mask_binding_, padding_binding_)                               \
    layout(set = 0, binding = mask_binding_, std430) readonly buffer mask_buffer {   \
        uint mask_words[];                                                             \
    };                                                                                 \
    layout(set = 0, binding = padding_binding_, std430) readonly buffer padding_buffer { \
        uint padding_words[];                                                          \
    };                                                                                 \
    float mask_load(uint e, uint flags) {                                              \
        uint dt = flags & MASK_DTYPE_BITS;                                             \
        if (dt == FLAG_MASK_BOOL) {                                                    \
            bool set = ((mask_words[e >> 2u] >> ((e & 3u) * 8u)) & 0xffu) != 0u;        \
            return set != ((flags & FLAG_MASK_BLOCKS) != 0u) ? 0.0 : NEG_INF;          \
        }                                                                              \
        if (dt == MASK_DTYPE_BITS)                                                     \
            return BF16_PAIR(mask_words[e >> 1u])[e & 1u];                             \
        return dt == FLAG_MASK_F16 ? unpackHalf2x16(mask_words[e >> 1u])[e & 1u]       \
                                   : uintBitsToFloat(mask_words[e]);                   \
    }                                                                                  \
    bool padding_visible(uint e) {                                                     \
        return ((padding_words[e >> 2u] >> ((e & 3u) * 8u)) & 0xffu) != 0u;            \
    }

const float LOG2E = 1.4426950408889634;
#define NEG_INF uintBitsToFloat(0xff800000u)

// ---- score modifiers (window, softcap, sinks, ALiBi; see "attention
// semantics" in include/vkattn/ops.h), for any kernel that applies them. The
// helpers work in either domain: the attention kernels keep scores in the
// natural domain (exp(s - m) as exp2((s - m) * log2(e)), accurate near the
// max whatever |s|), the weights and KV kernels in the log2 domain (the
// softmax scale and log2(e) folded in).
const float LN2 = 0.6931471805599453;

// Softcap of a score s: the natural score x becomes c * tanh(x / c); in the
// log2 domain (s = x * log2(e)) cap2 is c * log2(e), in the natural one c.
// As c * (1 - e) / (1 + e) with e = exp(-2|s| / c), which only shrinks (a
// large |s| gives exactly +-c, never inf / inf), and the sign of s: one
// exp2 and one division per score (the constant factor folds away when cap2
// is a specialization constant, and is loop-invariant when it is not).
float softcap_log2(float s, float cap2) {
    float e = exp2(abs(s) * (-2.0 * LOG2E / cap2));
    float r = (cap2 - cap2 * e) / (1.0 + e);
    return uintBitsToFloat(floatBitsToUint(r) | (floatBitsToUint(s) & 0x80000000u));
}

// ALiBi bias of key j for a query at aligned position pos, in the log2
// domain with slope2 = slope * log2(e), in the natural one with the slope.
float alibi_log2(float slope2, int pos, uint j) { return -slope2 * abs(float(pos - int(j))); }

// The end of a row: m its running max and l its denominator relative to m
// (natural domain; l = 0: nothing visible), sink the row's sink logit
// (-inf: none). Returns what the unnormalised output is multiplied by (0 for
// an empty row) and sets lse to the natural log of the whole denominator
// (-inf for an empty row). The max is rescaled to max(m, sink) first, so a
// large sink never overflows.
float attention_finish(float m, float l, float sink, out float lse) {
    if (!(l > 0.0)) {
        lse = NEG_INF;
        return 0.0;
    }
    float mm = max(m, sink);
    float f = exp2((m - mm) * LOG2E);
    float denom = l * f + exp2((sink - mm) * LOG2E);
    lse = mm + log2(denom) * LN2;
    return f / denom;
}

// ---- KV-cache attention's score modifiers (kv_attention_*.comp, kv_decode_sg.comp,
// kv_attention_combine.comp): f32 tensors read and written as floats.
#define KV_DECLARE_SLOPES(binding_)                                                    \
    layout(set = 0, binding = binding_, std430) readonly buffer kv_slopes_buffer {     \
        float kv_slopes[];                                                             \
    };
#define KV_DECLARE_SINKS(binding_)                                                     \
    layout(set = 0, binding = binding_, std430) readonly buffer kv_sinks_buffer {      \
        float kv_sinks[];                                                              \
    };
#define KV_DECLARE_LSE(binding_)                                                       \
    layout(set = 0, binding = binding_, std430) writeonly buffer kv_lse_buffer {       \
        float kv_lse[];                                                                \
    };
#define KV_DECLARE_MODS(slopes_, sinks_, lse_)                                         \
    KV_DECLARE_SLOPES(slopes_) KV_DECLARE_SINKS(sinks_) KV_DECLARE_LSE(lse_)

#endif
