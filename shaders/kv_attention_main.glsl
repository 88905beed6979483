// What both KV-cache attention kernels share (kv_attention_sg.comp,
// kv_attention_sm.comp): push constants, bindings, the block-table lookup,
// the split of a sequence's keys, and the mapping of a tile row to its
// (query, head).
//
// Grid: x = row tile * splits + split, y = KV head, z = batch row. A batch
// row b holds the T queries of sequence sequences[b], whose length L comes
// from the step metadata (src/ops/kvcache/kvcache.h); its keys are read from the K and
// V pools [num_blocks, Hkv, block_size, Dh] through its block table. Rows of
// a KV head are packed as row = query * group + head_in_group (GQA packing:
// each K/V element a workgroup reads serves every query head of the group).
// Query i sees key j iff j <= i + L - T (causal, bottom-right aligned).
//
// One split (pc.splits == 1) writes the normalised output. Several split
// the keys of every (row, KV head) into pc.splits ranges; each writes its
// unnormalised output with its running max (log2 domain, scale folded in)
// and sum to the split scratch, and kv_attention_combine.comp merges them.
//
// Score modifiers (specialization constant MODS, bits MOD_*: the plain
// kernel compiles none of them): a sliding window W (query at position p
// sees keys j > p - W; the key range of a tile, and so its splits, starts at
// its first row's window, so keys before it are never read), a logit softcap
// (C tanh(s / C) on the scaled score), ALiBi (-slope_h |p - j|, slopes f32
// [Hq] at binding 6), sinks (a logit per query head, f32 [Hq] at binding 7,
// joined at the final denominator: here with one split, in the combine pass
// with several) and the LSE output (f32 [B, Hq, T] at binding 8, natural
// log; -inf for a row with nothing visible), and an additive mask (f32 or
// f16 [B or 1, T, K] at binding 9, read as 32-bit words whatever its dtype
// like attention_io.glsl's masks: element b, i, j at mask_off + b mask_sb +
// i mask_st + j mask_sk; added after the softcap, before ALiBi; only keys
// j <= the row's position are read). Absent tensors are bound to a dummy
// and never read.
#ifndef VKATTN_KV_ATTENTION_MAIN_GLSL
#define VKATTN_KV_ATTENTION_MAIN_GLSL

#include "attention_io.glsl"

layout(push_constant) uniform Push {
    // q, out: offset, batch, head and token strides, in vec4s
    uint q_off, q_sb, q_sh, q_st;
    uint o_off, o_sb, o_sh, o_st;
    uint batch;       // rows of the step (the metadata's layout depends on it)
    uint tokens;      // T: queries per batch row
    uint group;       // query heads per KV head
    uint kv_heads;    // Hkv
    uint block_size;  // tokens per block (a contiguous cache: its capacity)
    uint table_width; // blocks per table row
    uint splits;      // key ranges per (batch row, KV head); 1: no split
    uint split_align; // split lengths are multiples of this (the key block)
    uint s_heads;     // query heads of the split scratch's layout
    float scale_log2; // scale * log2(e): scores live in the log2 domain
    // score modifiers (read only where MODS asks for them)
    uint window;        // W
    float softcap_log2; // C * log2(e)
    uint slopes_off, sinks_off; // first element of the slopes and sinks
    uint lse_off, lse_sb, lse_sh, lse_st; // LSE: offset, batch, head, token strides
    uint mask_off, mask_sb, mask_st, mask_sk; // mask: offset, batch, query, key strides (elements)
} pc;

layout(constant_id = 5) const uint MODS = 0u;
// The pools' token rows in values (7: K's, 8: V's): the head dims padded to
// multiples of 8 in a float cache, to whole 32-value blocks in a quantized
// one (src/spec/kv_cache_desc.c); the kernels read the first DKP / DVP
// values of each, so the rows' zero padding is never read. KRQ, VRQ: in
// quads.
layout(constant_id = 7) const uint K_ROW = 128u;
layout(constant_id = 8) const uint V_ROW = 128u;
const uint KRQ = K_ROW / 4u, VRQ = V_ROW / 4u;
const uint MOD_WINDOW = 1u, MOD_SOFTCAP = 2u, MOD_ALIBI = 4u, MOD_SINKS = 8u, MOD_LSE = 16u;
const uint MOD_MASK = 32u, MOD_MASK_F16 = 64u; // the mask; its dtype is f16
const bool M_WINDOW = (MODS & MOD_WINDOW) != 0u;
const bool M_SOFTCAP = (MODS & MOD_SOFTCAP) != 0u;
const bool M_ALIBI = (MODS & MOD_ALIBI) != 0u;
const bool M_SINKS = (MODS & MOD_SINKS) != 0u;
const bool M_LSE = (MODS & MOD_LSE) != 0u;
const bool M_MASK = (MODS & MOD_MASK) != 0u;
const bool M_MASK_F16 = (MODS & MOD_MASK_F16) != 0u;

layout(set = 0, binding = 0, std430) readonly buffer meta_buffer { uint meta[]; };
DECLARE_IN4(1, q, Q_DT)
DECLARE_IN4(2, k, KV_DT)
DECLARE_IN4(3, v, KV_DT)
DECLARE_OUT4(4, o, O_DT)
// Split partial results, rows of D + 2 floats (see split_base).
layout(set = 0, binding = 5, std430) writeonly buffer split_buffer { float split_data[]; };
KV_DECLARE_MODS(6, 7, 8)
layout(set = 0, binding = 9, std430) readonly buffer kv_mask_buffer { uint kv_mask_words[]; };

// Element e of the mask (words: no 16-bit storage needed for an f16 mask).
float kv_mask_load(uint e) {
    return M_MASK_F16 ? unpackHalf2x16(kv_mask_words[e >> 1u])[e & 1u]
                      : uintBitsToFloat(kv_mask_words[e]);
}

const uint SPLIT_ROWS = 64u; // VKATTN_KV_MAX_SPLIT_ROWS

uint seq_length(uint b) { return meta[pc.batch + b]; }

// Token row of key j in the pools (multiply by KRQ / VRQ for its first vec4).
// The K and V pools have the same layout, so one row serves both.
uint key_row(uint b, uint kv_head, uint j) {
    uint block = meta[2u * pc.batch + b * pc.table_width + j / pc.block_size];
    return (block * pc.kv_heads + kv_head) * pc.block_size + j % pc.block_size;
}

// key_row without integer division, for the decode kernels (CPU drivers
// have no vector divide: it becomes one scalar divide per lane): the
// quotient through a float reciprocal inv_bs = 1 / block_size, off by at
// most one for any key index below 2^24 (a float holds it exactly), then
// corrected.
uint key_row_fast(uint b, uint kv_head, uint j, float inv_bs) {
    uint i = uint(float(j) * inv_bs);
    i = i * pc.block_size > j ? i - 1u : i;
    i = (i + 1u) * pc.block_size <= j ? i + 1u : i;
    uint block = meta[2u * pc.batch + b * pc.table_width + i];
    return (block * pc.kv_heads + kv_head) * pc.block_size + (j - i * pc.block_size);
}

// Keys [lo, hi) of split `split` of the keys [first, len) of a sequence:
// equal ranges, multiples of split_align, the last ones possibly short or
// empty.
void split_range(uint first, uint len, uint split, out uint lo, out uint hi) {
    uint n = len - first;
    uint per = (n + pc.splits - 1u) / pc.splits;
    per = (per + pc.split_align - 1u) / pc.split_align * pc.split_align;
    lo = first + min(split * per, n);
    hi = min(lo + per, len);
}

// The window's first key of the rows [first_row, last_row] (rows are
// ordered by query): `first` for the first row (keys before it are hidden
// from every row, never read), `first_all` for the last (keys from it on
// are within every row's window). Without a window both are 0.
void window_range(uint first_row, uint last_row, int shift, out uint first, out uint first_all) {
    first = 0u;
    first_all = 0u;
    if (M_WINDOW) {
        first = uint(max(int(first_row / pc.group) + shift - int(pc.window) + 1, 0));
        first_all = uint(max(int(last_row / pc.group) + shift - int(pc.window) + 1, 0));
    }
}

// Keys [.., end) that any of the rows [first_row, last_row] sees within
// [lo, hi), and [.., full) that all of them see (rows are ordered by query).
void visible_range(uint first_row, uint last_row, int shift, uint lo, uint hi, out uint end,
                   out uint full) {
    end = uint(clamp(int(last_row / pc.group) + shift + 1, int(lo), int(hi)));
    full = uint(clamp(int(first_row / pc.group) + shift + 1, int(lo), int(hi)));
}

// Addresses and visibility limit of one tile row.
struct KvRow {
    uint q;     // vec4 index of the query row
    uint o;     // vec4 index of the output row
    uint split; // float index of the row's split scratch row (split 0)
    int last;   // last visible key (the query's position)
    uint query; // query index in the step
    uint head;  // query head
    float slope; // ALiBi slope in the log2 domain (0 without ALiBi)
    uint mask;   // element of the row's mask key 0 (0 without a mask)
};

// `d` is the head dimension (the kernels' spec constant).
KvRow kv_row_info(uint row, uint b, uint kv_head, int shift, uint d) {
    uint i = row / pc.group;
    uint h = kv_head * pc.group + row % pc.group;
    KvRow r;
    r.q = pc.q_off + b * pc.q_sb + h * pc.q_sh + i * pc.q_st;
    r.o = pc.o_off + b * pc.o_sb + h * pc.o_sh + i * pc.o_st;
    // [batch row][query head][split * T + query] rows of d + 2 floats
    r.split = ((b * pc.s_heads + h) * SPLIT_ROWS + i) * (d + 2u);
    r.last = int(i) + shift;
    r.query = i;
    r.head = h;
    r.slope = M_ALIBI ? kv_slopes[pc.slopes_off + h] * LOG2E : 0.0;
    r.mask = M_MASK ? pc.mask_off + b * pc.mask_sb + i * pc.mask_st : 0u;
    return r;
}

// Score `s` (scaled, log2 domain) of key j for row `rw` with the softcap,
// the mask and ALiBi applied; causal, window and range masking is the
// caller's. Keys past the row's position are hidden by the caller (the
// tiles that hold one always mask), so the mask column is clamped to it:
// every read stays within the row's L columns.
float kv_modify(float s, KvRow rw, uint j) {
    if (M_SOFTCAP)
        s = softcap_log2(s, pc.softcap_log2);
    if (M_MASK)
        s += kv_mask_load(rw.mask + uint(clamp(int(j), 0, max(rw.last, 0))) * pc.mask_sk) * LOG2E;
    if (M_ALIBI)
        s -= rw.slope * abs(float(rw.last - int(j)));
    return s;
}

// Whether key j (< the tile's key_end) is hidden from row `rw`: causal, and
// before the row's window.
bool kv_hidden(KvRow rw, uint j) {
    bool hidden = int(j) > rw.last;
    if (M_WINDOW)
        hidden = hidden || int(j) <= rw.last - int(pc.window);
    return hidden;
}

// The row's result with one split, from its running max `m` (log2 domain)
// and sum `total`: the factor that normalises its accumulated output (0
// when nothing was visible), the sink joined to the denominator; writes
// the LSE when asked for (`writer`: the one invocation that stores it).
float kv_finish(KvRow rw, uint b, float m, float total, bool writer) {
    float lse = m == NEG_INF ? NEG_INF : m + log2(total);
    float inv = total > 0.0 ? 1.0 / total : 0.0;
    if (M_SINKS && m != NEG_INF) {
        float sink = kv_sinks[pc.sinks_off + rw.head] * LOG2E;
        float mx = max(m, sink);
        float a = exp2(m - mx), den = total * a + exp2(sink - mx);
        inv = a / den;
        lse = mx + log2(den);
    }
    if (M_LSE && writer) {
        kv_lse[pc.lse_off + b * pc.lse_sb + rw.head * pc.lse_sh + rw.query * pc.lse_st] =
            lse == NEG_INF ? NEG_INF : lse * LN2;
    }
    return inv;
}

// Offset of split `s` from a row's split 0.
uint split_step(uint s, uint d) { return s * pc.tokens * (d + 2u); }

#endif
