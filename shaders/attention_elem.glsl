// Element access for head dims that are not multiples of 8 (attention_sg,
// attention_sm and attention_weights .comp): rows read one element at a
// time, zero-padded to the next multiple of 8 inside the kernel (zeros in q
// and k add nothing to a score, zero v columns are never stored), and the
// output written one element at a time. The push constants then count
// elements, not quads, so rows may start anywhere (the host relaxes the
// stride and offset rules for these calls only). Outputs kept as pairs in
// 32-bit words (f16p, bf16) cannot be written one element at a time: the
// host refuses those with a v head dim that is not a multiple of 8.
#ifndef VKATTN_ATTENTION_ELEM_GLSL
#define VKATTN_ATTENTION_ELEM_GLSL

#include "attention_io.glsl"

// name_elem(e): element e of the binding. Storage inputs get a second,
// element-typed view of the same binding (aliased, as the quads' view is
// kept), so every load is a scalar one and stays in bounds.
#define ELEM_IN_f32(binding_, name_)                                             \
    DECLARE_ELEMS(binding_, readonly, f32, name_##_e)                            \
    float name_##_elem(uint e) { return name_##_e[e]; }
#define ELEM_IN_f16(binding_, name_)                                             \
    DECLARE_ELEMS(binding_, readonly, f16, name_##_e)                            \
    float name_##_elem(uint e) { return float(name_##_e[e]); }
#define ELEM_IN_f16p(binding_, name_)                                            \
    DECLARE_ELEMS(binding_, readonly, f16p, name_##_e)                           \
    float name_##_elem(uint e) { return unpackHalf2x16(name_##_e[e >> 1u])[e & 1u]; }
#define ELEM_IN_bf16(binding_, name_)                                            \
    DECLARE_ELEMS(binding_, readonly, bf16, name_##_e)                           \
    float name_##_elem(uint e) { return BF16_PAIR(name_##_e[e >> 1u])[e & 1u]; }
// any (attention_io.glsl): the words DECLARE_IN4_any declared, float dtypes
// only (quantized rows are whole blocks, never element-wise)
#define ELEM_IN_any(binding_, name_)                                             \
    float name_##_elem(uint e) {                                                 \
        if (name_##_dtype == 0u)                                                 \
            return uintBitsToFloat(name_##_words[e]);                            \
        uint w = name_##_words[e >> 1u];                                         \
        return name_##_dtype == 1u ? unpackHalf2x16(w)[e & 1u] : BF16_PAIR(w)[e & 1u]; \
    }
// (texel inputs never take this path: the host binds storage buffers)
#define ELEM_IN_tex32(binding_, name_) \
    float name_##_elem(uint e) { return texelFetch(name_##_tex, int(e >> 2u))[e & 3u]; }
#define ELEM_IN_tex16(binding_, name_)                                           \
    float name_##_elem(uint e) {                                                 \
        uvec4 w = texelFetch(name_##_tex, int(e >> 3u));                         \
        return unpackHalf2x16(w[(e >> 1u) & 3u])[e & 1u];                        \
    }

// name_elem4(row, quad, n) / name_elem8(row, octet, n, lo, hi): elements
// 4 quad.. / 8 octet.. of the row starting at element `row`, those at or past
// the row's length n read as 0. Without branches (lavapipe compiles ifs in
// unrolled code slowly): the padding reads the row's last element, in
// bounds, and a select (not a product: inf * 0) puts the zero in.
#define ELEM_ROWS(name_)                                                        \
    vec4 name_##_elem4(uint row, uint quad, uint n) {                           \
        vec4 x;                                                                 \
        [[unroll]] for (uint u = 0u; u < 4u; u++) {                             \
            uint i = 4u * quad + u;                                             \
            float e = name_##_elem(row + min(i, n - 1u));                       \
            x[u] = i < n ? e : 0.0;                                             \
        }                                                                       \
        return x;                                                               \
    }                                                                           \
    void name_##_elem8(uint row, uint oct, uint n, out vec4 lo, out vec4 hi) {  \
        lo = name_##_elem4(row, 2u * oct, n);                                   \
        hi = name_##_elem4(row, 2u * oct + 1u, n);                              \
    }

#define DECLARE_ELEM_IN_(binding_, name_, dt_) ELEM_IN_##dt_(binding_, name_) ELEM_ROWS(name_)
#define DECLARE_ELEM_IN(binding_, name_, dt_) DECLARE_ELEM_IN_(binding_, name_, dt_)

// name_store1(e, x): element e of the output (an element-typed view of
// its binding, as for the inputs)
#define ELEM_OUT_f32(binding_, name_)                                            \
    DECLARE_ELEMS(binding_, writeonly, f32, name_##_e)                           \
    void name_##_store1(uint e, float x) { name_##_e[e] = x; }
#define ELEM_OUT_f16(binding_, name_)                                            \
    DECLARE_ELEMS(binding_, writeonly, f16, name_##_e)                           \
    void name_##_store1(uint e, float x) { name_##_e[e] = float16_t(x); }
// (refused by the host: see above)
#define ELEM_OUT_f16p(binding_, name_) \
    void name_##_store1(uint e, float x) {}
#define ELEM_OUT_bf16(binding_, name_) \
    void name_##_store1(uint e, float x) {}
#define DECLARE_ELEM_OUT_(binding_, name_, dt_) ELEM_OUT_##dt_(binding_, name_)
#define DECLARE_ELEM_OUT(binding_, name_, dt_) DECLARE_ELEM_OUT_(binding_, name_, dt_)

#endif
