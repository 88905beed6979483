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
} pc;

layout(set = 0, binding = 0, std430) readonly buffer meta_buffer { uint meta[]; };
DECLARE_IN4(1, q, Q_DT)
DECLARE_IN4(2, k, KV_DT)
DECLARE_IN4(3, v, KV_DT)
DECLARE_OUT4(4, o, O_DT)
// Split partial results, rows of D + 2 floats (see split_base).
layout(set = 0, binding = 5, std430) writeonly buffer split_buffer { float split_data[]; };

const uint SPLIT_ROWS = 64u; // VKATTN_KV_MAX_SPLIT_ROWS

uint seq_length(uint b) { return meta[pc.batch + b]; }

// Token row of key j in the pools (multiply by D / 4 for its first vec4).
// The K and V pools have the same layout, so one row serves both.
uint key_row(uint b, uint kv_head, uint j) {
    uint block = meta[2u * pc.batch + b * pc.table_width + j / pc.block_size];
    return (block * pc.kv_heads + kv_head) * pc.block_size + j % pc.block_size;
}

// Keys [lo, hi) of split `split` of a sequence of `len` keys: equal ranges,
// multiples of split_align, the last ones possibly short or empty.
void split_range(uint len, uint split, out uint lo, out uint hi) {
    uint per = (len + pc.splits - 1u) / pc.splits;
    per = (per + pc.split_align - 1u) / pc.split_align * pc.split_align;
    lo = min(split * per, len);
    hi = min(lo + per, len);
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
    int last;   // last visible key
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
    return r;
}

// Offset of split `s` from a row's split 0.
uint split_step(uint s, uint d) { return s * pc.tokens * (d + 2u); }

#endif
