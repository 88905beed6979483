// Shared interface of the linear kernels (linear_sg.comp, linear_sh.comp,
// linear_gemv.comp): push constants, operand fetches and the head-split store
// epilogue. Variant defines:
//   INPUT_MODE  0: x and w through uniform texel buffers (rgba32f / rgba16f)
//               1: x and w through storage buffers, 4 elements per load
//               2: x and w through storage buffers, one element per load
//                  (K, a row stride or an offset is not a multiple of 4)
//               3: texel buffers where f16 tensors are tex16 views
//                  (rgba32ui, 8 halves per fetch, tensor_io.glsl): CPU
//                  drivers pay per fetch, not per byte, so this halves
//                  the fetches of f16 operands (rows and K multiples of 8)
//   X_DT, W_DT  storage of x (and y) / of w (and b): f32, f16, f16p or bf16
//               (bf16: modes 1, 2 and 3; Y_BF16 with Y_PACKED when y is);
//               W_DT q8_0 (mode 1 only) with B_DT, the bias's storage (f32)
// Kernels read operands as quads (x_fetch4: elements k..k+3 of a row) and,
// in their unrolled main loops, as pairs of quads (x_fetch8: k..k+7, one
// fetch in mode 3).
// All element indices are in elements relative to the binding, computed with
// wrapping uint arithmetic: the C side passes each tensor's base so that
// base + (the element's address within its tensor) lands in the window bound
// for this dispatch.
//
// A segment may append to a KV cache pool instead (bit s of the
// specialization constant POOL_SEGMENTS, so the plain path compiles without
// any of this): row m = b*T + t is token meta[b] + t of batch row b's
// sequence, stored in block meta[2*batch + b*table_width + token / block_size]
// of the pool [blocks, Hkv, block_size, Dh] (layout: src/ops/kvcache/kvcache.h). Its
// Segment then holds sb = the block stride, sh = the head stride within a
// block, st = block_size (token rows are hd apart).
#ifndef VKATTN_LINEAR_IO_GLSL
#define VKATTN_LINEAR_IO_GLSL

#extension GL_EXT_control_flow_attributes : require
#include "tensor_io.glsl"

struct Segment {
    uint base; // element of dst[0, 0, 0, 0] (wrapping, see above)
    uint sb, sh, st; // strides of batch, head, row (the dim stride is 1); pools: see above
    uint hd;   // head_dim
};

layout(push_constant) uniform Push {
    uint x_base, x_sb, x_st; // x[b, t, k] = x_base + b*x_sb + t*x_st + k
    uint w_base, w_sn;       // w[n, k]    = w_base + n*w_sn + k
    uint b_base;             // b[n]       = b_base + n
    uint T;                  // rows per batch: row m is (m / T, m % T)
    uint m0, m_end;          // rows of this dispatch
    uint n0, n_end;          // output columns of this dispatch
    uint K;
    uint flags;              // bit 0: bias present
    uint seg_end0, seg_end1; // first column of segments 1 and 2
    uint batch, table_width; // the KV cache step's metadata layout
    Segment seg[3];
} pc;                        // 128 bytes: the minimum every device allows

// ---- KV cache pools: which segments append to one (id 6: the families use
// ids 0..5), and the step's metadata (binding 6; a dummy without pools)
layout(constant_id = 6) const uint POOL_SEGMENTS = 0u;
layout(set = 0, binding = 6) readonly buffer meta_buffer { uint meta[]; };

// ---- inputs x (binding 0) and w (binding 1): name_fetch4(e, k) (elements
// e.. e+3, which are k.. k+3 of their row) and name_fetch8(e, k, a, b)
// (elements e.. e+7), by storage type (tensor_io.glsl):
//   tex32  mode 0 (rgba32f / rgba16f views) and mode 3's f32 operands
//   tex16  mode 3's f16 operands (the build defines X_PACKED / W_PACKED);
//          e a multiple of 4 picks the texel's first or second quad
//   texbf16 the same for mode 3's bf16 operands (X_PACKED_BF16 / W_PACKED_BF16)
//   f32, f16, f16p  mode 1 (quads)
// Mode 2 reads elements one at a time instead (below).
#define DECLARE_FETCH_tex32(binding_, name_)                                          \
    DECLARE_TEXELS(binding_, tex32, name_)                                            \
    vec4 name_##_fetch4(uint e, uint k) { return texelFetch(name_##_tex, int(e >> 2)); } \
    void name_##_fetch8(uint e, uint k, out vec4 a, out vec4 b) {                     \
        a = texelFetch(name_##_tex, int(e >> 2));                                     \
        b = texelFetch(name_##_tex, int(e >> 2) + 1);                                 \
    }
#define DECLARE_FETCH_tex16(binding_, name_)                                          \
    DECLARE_TEXELS(binding_, tex16, name_)                                            \
    vec4 name_##_fetch4(uint e, uint k) {                                             \
        uvec4 t = texelFetch(name_##_tex, int(e >> 3));                               \
        uvec2 h = (e & 4u) == 0u ? t.xy : t.zw;                                       \
        return UNPACK_HALVES4(h);                                                     \
    }                                                                                 \
    void name_##_fetch8(uint e, uint k, out vec4 a, out vec4 b) {                     \
        uvec4 t = texelFetch(name_##_tex, int(e >> 3));                               \
        UNPACK_HALVES8(t, a, b);                                                      \
    }
#define DECLARE_FETCH_texbf16(binding_, name_)                                        \
    DECLARE_TEXELS(binding_, texbf16, name_)                                          \
    vec4 name_##_fetch4(uint e, uint k) {                                             \
        uvec4 t = texelFetch(name_##_tex, int(e >> 3));                               \
        return UNPACK_BF16x4((e & 4u) == 0u ? t.xy : t.zw);                           \
    }                                                                                 \
    void name_##_fetch8(uint e, uint k, out vec4 a, out vec4 b) {                     \
        uvec4 t = texelFetch(name_##_tex, int(e >> 3));                               \
        UNPACK_BF16x8(t, a, b);                                                     \
    }
#define DECLARE_FETCH_f32(binding_, name_)                                            \
    DECLARE_QUADS(binding_, readonly, f32, name_, name_)                              \
    vec4 name_##_fetch4(uint e, uint k) { return name_[e >> 2]; }
#define DECLARE_FETCH_f16(binding_, name_)                                            \
    DECLARE_QUADS(binding_, readonly, f16, name_, name_)                              \
    vec4 name_##_fetch4(uint e, uint k) { return vec4(name_[e >> 2]); }
#define DECLARE_FETCH_f16p(binding_, name_)                                           \
    DECLARE_QUADS(binding_, readonly, f16p, name_, name_)                             \
    vec4 name_##_fetch4(uint e, uint k) {                                             \
        uvec2 v = name_[e >> 2];                                                      \
        return UNPACK_HALVES4(v);                                                     \
    }
#define DECLARE_FETCH_bf16(binding_, name_)                                           \
    DECLARE_QUADS(binding_, readonly, bf16, name_, name_)                             \
    vec4 name_##_fetch4(uint e, uint k) {                                             \
        uvec2 v = name_[e >> 2];                                                      \
        return UNPACK_BF16x4(v);                                                      \
    }
// q8_0 (w only, mode 1): ggml's blocks of 32 along K (tensor_io.glsl); rows
// are whole pairs of blocks, so e (a multiple of 4) is quad e / 4.
#define DECLARE_FETCH_q8_0(binding_, name_)                                          \
    DECLARE_Q8_0_QUADS(binding_, name_)                                              \
    vec4 name_##_fetch4(uint e, uint k) { return name_##_quad(e >> 2); }             \
    /* The whole block of element e (a multiple of 32): its scale and its 32 */    \
    /* int8 as 8 words, from the 9 words its 34 bytes touch (the GEMV reads */       \
    /* blocks this way: 9 loads per 32 weights instead of 20 by quads). */         \
    void name_##_block(uint e, out float d, out uint q[8]) {                         \
        uint b = (e >> 5) * 34u, w0 = b >> 2;                                        \
        uint ws[9];                                                                  \
        [[unroll]] for (uint i = 0u; i < 9u; i++) ws[i] = name_##_words[w0 + i];     \
        bool upper = (b & 2u) != 0u;                                                 \
        d = unpackHalf2x16(upper ? ws[0] >> 16u : ws[0]).x;                          \
        [[unroll]] for (uint i = 0u; i < 8u; i++)                                    \
            q[i] = upper ? ws[i + 1u] : (ws[i] >> 16u) | (ws[i + 1u] << 16u);        \
    }
#define DECLARE_FETCH_(binding_, name_, dt_) DECLARE_FETCH_##dt_(binding_, name_)
#define DECLARE_FETCH(binding_, name_, dt_) DECLARE_FETCH_(binding_, name_, dt_)

#if INPUT_MODE == 0 || INPUT_MODE == 3
#if defined(X_PACKED_BF16)
DECLARE_FETCH(0, x, texbf16)
#elif defined(X_PACKED)
DECLARE_FETCH(0, x, tex16)
#else
DECLARE_FETCH(0, x, tex32)
#endif
#if defined(W_Q8_0)
// q8_0 weights as 16-byte rgba32ui texels (the GEMV's groups of 8 blocks:
// 272 bytes, 17 texels, rows a multiple of 256 values long)
DECLARE_TEXELS(1, tex16, w)
uvec4 w_texel(uint t) { return texelFetch(w_tex, int(t)); }
#elif defined(W_PACKED_BF16)
DECLARE_FETCH(1, w, texbf16)
#elif defined(W_PACKED)
DECLARE_FETCH(1, w, tex16)
#else
DECLARE_FETCH(1, w, tex32)
#endif
#elif INPUT_MODE == 1
DECLARE_FETCH(0, x, X_DT)
DECLARE_FETCH(1, w, W_DT)
#else
DECLARE_RO(0, xs, X_DT)
DECLARE_RO(1, ws, W_DT)
// Elements k.. k+3 of a row, zeros past K (rows need not be 4-aligned here).
vec4 x_fetch4(uint e, uint k) {
    vec4 v = vec4(0.0);
    [[unroll]] for (uint j = 0u; j < 4u; j++)
        if (k + j < pc.K) v[j] = xs_load(e + j);
    return v;
}
vec4 w_fetch4(uint e, uint k) {
    vec4 v = vec4(0.0);
    [[unroll]] for (uint j = 0u; j < 4u; j++)
        if (k + j < pc.K) v[j] = ws_load(e + j);
    return v;
}
#endif
#if INPUT_MODE == 1 || INPUT_MODE == 2
void x_fetch8(uint e, uint k, out vec4 a, out vec4 b) { a = x_fetch4(e, k); b = x_fetch4(e + 4u, k + 4u); }
void w_fetch8(uint e, uint k, out vec4 a, out vec4 b) { a = w_fetch4(e, k); b = w_fetch4(e + 4u, k + 4u); }
#endif

// ---- bias (binding 2, storage in w's dtype; f32 with q8_0 weights)
#if defined(B_DT)
DECLARE_RO(2, bias, B_DT)
#else
DECLARE_RO(2, bias, W_DT)
#endif

// Columns past the end (clamped callers aside) read no bias: it is outside the window.
float bias_at(uint n) {
    return (pc.flags & 1u) != 0u && n < pc.n_end ? bias_load(pc.b_base + n) : 0.0;
}

// Element address of row m of x (k = 0).
uint x_row(uint m) {
    uint b = m / pc.T;
    return pc.x_base + b * pc.x_sb + (m - b * pc.T) * pc.x_st;
}

uint w_row(uint n) { return pc.w_base + n * pc.w_sn; }

// ---- outputs: one binding per segment (3, 4, 5), storage in x's dtype
// (f16p is read and written: Y_STORE_f16p's atomics)
#define DECLARE_Y_f32(binding_, name_) DECLARE_ELEMS(binding_, writeonly, f32, name_)
#define DECLARE_Y_f16(binding_, name_) DECLARE_ELEMS(binding_, writeonly, f16, name_)
#define DECLARE_Y_f16p(binding_, name_) DECLARE_ELEMS(binding_, , f16p, name_)
#define DECLARE_Y_bf16(binding_, name_) DECLARE_ELEMS(binding_, , bf16, name_)
#define DECLARE_Y_(binding_, name_, dt_) DECLARE_Y_##dt_(binding_, name_)
#define DECLARE_Y(binding_, name_, dt_) DECLARE_Y_(binding_, name_, dt_)
DECLARE_Y(3, y0, X_DT)
DECLARE_Y(4, y1, X_DT)
DECLARE_Y(5, y2, X_DT)

#define Y_STORE_f32(name_, a, v) name_[a] = v
#define Y_STORE_f16(name_, a, v) name_[a] = float16_t(v)
// Packed halves: this invocation owns only its half of the word, another
// invocation may own the other one: clear and set our 16 bits atomically.
#define Y_STORE_f16p(name_, a, v)                                    \
    do {                                                             \
        uint sh_ = (a & 1u) * 16u;                                   \
        uint bits_ = (packHalf2x16(vec2(v, 0.0)) & 0xffffu) << sh_;  \
        atomicAnd(name_[a >> 1], ~(0xffffu << sh_));                 \
        atomicOr(name_[a >> 1], bits_);                              \
    } while (false)
#define Y_STORE_bf16(name_, a, v)                                    \
    do {                                                             \
        uint sh_ = (a & 1u) * 16u;                                   \
        uint bits_ = BF16_BITS(v) << sh_;                            \
        atomicAnd(name_[a >> 1], ~(0xffffu << sh_));                 \
        atomicOr(name_[a >> 1], bits_);                              \
    } while (false)
// Two values of a packed output word (Y_PACKED), low one first.
#if defined(Y_BF16)
#define Y_PACK2(v_) BF16_PACK2((v_).x, (v_).y)
#else
#define Y_PACK2(v_) packHalf2x16(v_)
#endif
#define Y_STORE_(name_, a, v, dt_) Y_STORE_##dt_(name_, a, v)
#define Y_STORE(name_, a, v, dt_) Y_STORE_(name_, a, v, dt_)

void y_store(uint s, uint a, float v) {
    if (s == 0u) Y_STORE(y0, a, v, X_DT);
    else if (s == 1u) Y_STORE(y1, a, v, X_DT);
    else Y_STORE(y2, a, v, X_DT);
}

// Where output column n goes: its segment, the column's part of the address
// (base + head * sh + dim), and its bias.
struct Column {
    uint s;
    uint addr;
    float bias;
};

Column column(uint n) {
    uint s = n < pc.seg_end0 ? 0u : (n < pc.seg_end1 ? 1u : 2u);
    uint c = n - (s == 0u ? 0u : (s == 1u ? pc.seg_end0 : pc.seg_end1));
    uint hd = pc.seg[s].hd;
    uint h = c / hd;
    return Column(s, pc.seg[s].base + h * pc.seg[s].sh + (c - h * hd), bias_at(n));
}

// The row's part of a store address in segment s: batch and row strides, or
// for a pool segment the token's block and its row in the block.
uint row_addr(uint s, uint b, uint t) {
    if ((POOL_SEGMENTS & (1u << s)) == 0u)
        return b * pc.seg[s].sb + t * pc.seg[s].st;
    uint bs = pc.seg[s].st;
    uint token = meta[b] + t;
    uint i = token / bs;
    uint block = meta[2u * pc.batch + b * pc.table_width + i];
    return block * pc.seg[s].sb + (token - i * bs) * pc.seg[s].hd;
}

// Stores v + bias to row m of columns c0 and c1 (the second when has1).
// Under packed f16 a whole word is written only when it holds exactly these
// two elements, which then have no other writer.
void y_store_pair_at(uint m, Column c0, Column c1, vec2 v, bool has1) {
    uint b = m / pc.T;
    uint t = m - b * pc.T;
    uint r0 = row_addr(c0.s, b, t);
    uint a0 = c0.addr + r0;
    v += vec2(c0.bias, c1.bias);
    if (!has1) {
        y_store(c0.s, a0, v.x);
        return;
    }
    uint a1 = c1.addr + (c1.s == c0.s ? r0 : row_addr(c1.s, b, t));
#if defined(Y_PACKED)
    if (c1.s == c0.s && a1 == a0 + 1u && (a0 & 1u) == 0u) {
        uint word = Y_PACK2(v);
        if (c0.s == 0u) y0[a0 >> 1] = word;
        else if (c0.s == 1u) y1[a0 >> 1] = word;
        else y2[a0 >> 1] = word;
        return;
    }
#endif
    y_store(c0.s, a0, v.x);
    y_store(c1.s, a1, v.y);
}

// Outputs (m, n) and (m, n + 1); n + 1 only when has1.
void y_store_pair(uint m, uint n, vec2 v, bool has1) {
    y_store_pair_at(m, column(n), column(has1 ? n + 1u : n), v, has1);
}

// ---- the heads epilogue (QK-norm and RoPE of the MHA layer; src/ops/linear/
// linear.h). Off (EPI_SEGS 0) the families store straight from registers as
// above. On, a workgroup's column tile covers whole heads (EPI_COLS, a
// multiple of EPI_HD): the family stages EPI_ROWS rows of it in shared
// memory (epi_put), then epi_flush reduces each head's squares and stores
// every pair of dimensions normalised and rotated (a segment without the
// epilogue whose heads have another size, V's beside Q's and K's, is stored
// column by column). Segment s's norm weights
// are params[s * EPI_HD + d]; the angle table follows at 2 * EPI_HD
// (spec/rope.h: [level][digit][ROPE_DIMS / 2] (cos, sin)).
layout(constant_id = 7) const uint EPI_SEGS = 0u;  // bit s: segment s gets the epilogue
layout(constant_id = 8) const uint EPI_HD = 8u;
layout(constant_id = 9) const uint EPI_NORM = 0u;
layout(constant_id = 10) const float EPI_EPS = 1e-6;
layout(constant_id = 11) const uint ROPE_DIMS = 0u; // 0: no rotation
layout(constant_id = 12) const uint ROPE_GPTJ = 0u; // pairs (2i, 2i+1); else (i, i + R/2)
layout(constant_id = 13) const uint POS_SOURCE = 0u; // 0 row t, 1 meta[b] + t, 2 positions
layout(constant_id = 14) const uint EPI_ROWS = 1u;
layout(constant_id = 15) const uint EPI_COLS = 8u;
layout(set = 0, binding = 7) readonly buffer params_buffer { float params[]; };

const uint EPI_HEADS = EPI_COLS / EPI_HD;
const uint EPI_PAIRS = EPI_HD / 2u;   // pairs of dimensions per head
const uint EPI_ROT = ROPE_DIMS / 2u;  // of which rotated
const uint EPI_SLICES = 4u;           // partial sums of squares per head row
shared float epi_stage[EPI_ROWS * EPI_COLS];
shared float epi_part[EPI_ROWS * EPI_HEADS * EPI_SLICES];
shared vec2 epi_cs[EPI_ROWS * EPI_ROT + 1u]; // (cos, sin) per row and rotated pair
shared uint epi_row[EPI_ROWS * 3u];          // a row's part of the address, per segment
shared uint epi_head[EPI_HEADS * 2u];        // a head's part of the address, its segment

void epi_put(uint row, uint col, float v) { epi_stage[row * EPI_COLS + col] = v; }

// Positions past 2^24 - 1 (or negative int32) are clamped.
uint epi_position(uint b, uint t) {
    int p;
    if (POS_SOURCE == 1u) p = int(meta[b] + t);
    else if (POS_SOURCE == 2u) p = int(meta[pc.table_width + b * pc.T + t]);
    else p = int(t);
    return uint(clamp(p, 0, 16777215));
}

// (cos, sin) of position * inv_freq[i]: the complex product of the table's
// entries for the position's four base-64 digits.
vec2 epi_angle(uint pos, uint i) {
    vec2 r = vec2(1.0, 0.0);
    [[unroll]] for (uint l = 0u; l < 4u; l++) {
        uint digit = (pos >> (6u * l)) & 63u;
        uint e = 2u * EPI_HD + ((l * 64u + digit) * EPI_ROT + i) * 2u;
        vec2 f = vec2(params[e], params[e + 1u]);
        r = vec2(r.x * f.x - r.y * f.y, r.x * f.y + r.y * f.x);
    }
    return r;
}

// Stores the staged rows: stage row r is output row m_base + r * m_step of
// the tile starting at column n_tile. Every invocation of the workgroup calls
// it (it has barriers); `lid` is its index among `wgs`. First what depends
// on a row or a head alone (partial sums of squares, angles, addresses),
// once; then every pair of dimensions, consecutive invocations on
// consecutive pairs.
void epi_flush(uint m_base, uint m_step, uint n_tile, uint lid, uint wgs) {
    barrier();
    if (EPI_NORM != 0u) {
        const uint slice = EPI_HD / EPI_SLICES;
        for (uint u = lid; u < EPI_ROWS * EPI_HEADS * EPI_SLICES; u += wgs) {
            uint at = (u / EPI_SLICES) * EPI_HD + (u % EPI_SLICES) * slice;
            float ss = 0.0;
            for (uint d = 0u; d < slice; d++)
                ss = fma(epi_stage[at + d], epi_stage[at + d], ss);
            epi_part[u] = ss;
        }
    }
    if (EPI_ROT != 0u) {
        for (uint u = lid; u < EPI_ROWS * EPI_ROT; u += wgs) {
            uint r = u / EPI_ROT, m = min(m_base + r * m_step, pc.m_end - 1u);
            uint b = m / pc.T;
            epi_cs[u] = epi_angle(epi_position(b, m - b * pc.T), u - r * EPI_ROT);
        }
    }
    for (uint u = lid; u < EPI_ROWS * 3u; u += wgs) {
        uint m = min(m_base + (u / 3u) * m_step, pc.m_end - 1u);
        uint b = m / pc.T;
        epi_row[u] = row_addr(u % 3u, b, m - b * pc.T);
    }
    for (uint h = lid; h < EPI_HEADS; h += wgs) {
        Column c = column(min(n_tile + h * EPI_HD, pc.n_end - 1u));
        epi_head[2u * h] = c.addr;
        epi_head[2u * h + 1u] = c.s;
    }
    barrier();
    for (uint u = lid; u < EPI_ROWS * EPI_HEADS * EPI_PAIRS; u += wgs) {
        uint unit = u / EPI_PAIRS, k = u - unit * EPI_PAIRS;
        uint r = unit / EPI_HEADS, h = unit - r * EPI_HEADS;
        if (m_base + r * m_step >= pc.m_end || n_tile + h * EPI_HD >= pc.n_end)
            continue;
        uint s = epi_head[2u * h + 1u];
        bool epi = (EPI_SEGS & (1u << s)) != 0u;
        if (!epi && pc.seg[s].hd != EPI_HD) {
            // a segment of heads of its own size (V beside Q and K): its
            // columns one by one, each at its own head's address (the
            // staged values hold their bias already)
            uint m = m_base + r * m_step;
            [[unroll]] for (uint e = 0u; e < 2u; e++) {
                uint n = n_tile + h * EPI_HD + 2u * k + e;
                if (n < pc.n_end) {
                    Column c = column(n);
                    y_store(c.s, c.addr + epi_row[r * 3u + c.s],
                            epi_stage[r * EPI_COLS + h * EPI_HD + 2u * k + e]);
                }
            }
            continue;
        }
        bool rot = epi && k < EPI_ROT;
        uint d0 = 2u * k, d1 = 2u * k + 1u;
        if (rot && ROPE_GPTJ == 0u) {
            d0 = k;
            d1 = k + EPI_ROT;
        }
        uint at = r * EPI_COLS + h * EPI_HD;
        float x = epi_stage[at + d0], y = epi_stage[at + d1];
        if (epi && EPI_NORM != 0u) {
            uint p = unit * EPI_SLICES;
            float ss = 0.0;
            [[unroll]] for (uint i = 0u; i < EPI_SLICES; i++)
                ss += epi_part[p + i];
            float scale = inversesqrt(ss / float(EPI_HD) + EPI_EPS);
            x *= scale * params[s * EPI_HD + d0];
            y *= scale * params[s * EPI_HD + d1];
        }
        if (rot) {
            vec2 cs = epi_cs[r * EPI_ROT + k];
            vec2 xy = vec2(x * cs.x - y * cs.y, x * cs.y + y * cs.x);
            x = xy.x;
            y = xy.y;
        }
        uint a0 = epi_head[2u * h] + epi_row[r * 3u + s] + d0;
        uint a1 = a0 + (d1 - d0);
#if defined(Y_PACKED)
        if (d1 == d0 + 1u && (a0 & 1u) == 0u) {
            uint word = Y_PACK2(vec2(x, y));
            if (s == 0u) y0[a0 >> 1] = word;
            else if (s == 1u) y1[a0 >> 1] = word;
            else y2[a0 >> 1] = word;
            continue;
        }
#endif
        y_store(s, a0, x);
        y_store(s, a1, y);
    }
    barrier();
}

#endif
