/* Attention internals (attention*.c): the checked problem, kernel choice and
 * tile sizes, and the split of a call into dispatches whose bindings fit the
 * device's windows. */
#ifndef VKATTN_ATTENTION_PLAN_H
#define VKATTN_ATTENTION_PLAN_H

#include "spec/attention_shapes.h"
#include "core/internal.h"

/* Flags of both push-constant blocks (mirrors shaders/attention_io.glsl). */
enum {
    ATT_FLAG_CAUSAL = 1u,
    ATT_FLAG_MASK = 2u,
    ATT_FLAG_MASK_F16 = 4u,
    ATT_FLAG_KEY_PADDING = 8u,
    ATT_FLAG_WEIGHTS_ACCUMULATE = 16u,
};

/* A validated call: tensors with resolved strides (absent optional ones have
 * buffer NULL) and the sizes. */
typedef struct att_problem {
    vkattn_tensor q, k, v, out, mask, key_padding, weights;
    vkattn_attention_dims dims;
    bool causal;
    float scale_log2; /* softmax scale * log2(e) */
} att_problem;

/* Checks everything about `args` (shapes, dtypes, strides, offsets, bounds,
 * overlaps, what the device's binding windows can hold) and fills `p`.
 * Nothing is recorded. (attention_validate.c) */
vkattn_result att_validate(vkattn_context *ctx, const vkattn_attention_args *args,
                           att_problem *p);

/* ---- kernel configuration (attention_config.c) */

/* Kernel families (values are stored in tuning data: never renumber). */
enum { ATT_FAMILY_SUBGROUP = 1, ATT_FAMILY_SHARED = 2 };
#define ATT_SPEC_MAX 8

/* What a call runs: the kernel family, texel or storage inputs (texel
 * falls back to storage where a window does not fit), and a tile preset of
 * the family (see attention_config.c). */
typedef struct att_config {
    uint32_t family;
    bool texel;
    uint32_t preset;
} att_config;

/* Version of the meaning of stored attention tuning words (the families and
 * presets of attention_config.c): raise it whenever a preset is added,
 * removed or changed, so that a tuning file written before picks the
 * built-in choice instead of other tiles. */
#define ATT_CONFIG_VERSION 1u

/* The stored tuning winner for the problem's shape class when there is a
 * valid one, else the built-in choice for the device. */
void att_config_choose(vkattn_context *ctx, const att_problem *p, att_config *cfg);
/* The built-in choice: the device's family and binding, a preset by size. */
void att_config_default(const vkattn_context *ctx, const att_problem *p, att_config *cfg);
/* Whether the device can run `cfg` (family supported, preset in range). */
bool att_config_valid(const vkattn_context *ctx, const att_config *cfg);
/* Candidate configs for the tuner (valid on this device), at most `max`. */
uint32_t att_config_candidates(const vkattn_context *ctx, const att_problem *p, att_config *out,
                               uint32_t max);
/* The tuning key of the problem's shape class. */
void att_tuning_key(const att_problem *p, uint32_t key[7]);
/* Specialization constants of the main kernel for `cfg` (count returned)
 * and the tile rows one workgroup covers. */
uint32_t att_config_spec(const vkattn_context *ctx, const att_problem *p, const att_config *cfg,
                         uint32_t spec[ATT_SPEC_MAX], uint32_t *rows_per_group);

/* Records the dispatches of a validated problem, with the chosen config or
 * a given one. (attention.c) */
vkattn_result att_record(vkattn_context *ctx, VkCommandBuffer cmd, const att_problem *p);
vkattn_result att_record_with(vkattn_context *ctx, VkCommandBuffer cmd, const att_problem *p,
                              const att_config *cfg);

/* ---- shared-memory tiles (attention_plan.c) */

/* A tile of the shared-memory kernels (attention_sm.comp,
 * kv_attention_sm.comp): TPR invocations per row (a power of two giving each
 * at most 4 output vec4s, and at least 8 so that a row's keys are spread
 * over several invocations), BR rows, BC keys (up to 4 per invocation),
 * within the device's invocation limit and shared memory. BR starts at the
 * workgroup's rows (halved with `half_rows`, at most `max_rows`), BC at 4 TPR
 * (halved with `half_keys`); `key_extra_bytes` is shared memory per key
 * besides K and V (the KV kernels keep each key's pool row). */
typedef struct att_sm_tile {
    uint32_t tpr, br, bc;
} att_sm_tile;
att_sm_tile att_sm_tile_fit(const vkattn_context *ctx, uint32_t head_dim, uint32_t max_rows,
                            bool half_rows, bool half_keys, uint32_t key_extra_bytes);

/* ---- binding windows (attention_plan.c) */

/* A box of a tensor: first index and count per dimension (rank entries). */
typedef struct att_box {
    uint64_t start[VKATTN_MAX_RANK];
    uint64_t count[VKATTN_MAX_RANK];
} att_box;

/* Elements from the tensor's first element to the box's first (`first`) and
 * from the box's first to its last, inclusive (`extent`). */
void att_box_span(const vkattn_tensor *t, const att_box *box, uint64_t *first, uint64_t *extent);
/* Whether a box fits one storage-buffer binding (and 32-bit indices) /
 * one uniform-texel-buffer binding, with room for the alignment of any start. */
bool att_fits_storage(const vkattn_context *ctx, const vkattn_tensor *t, const att_box *box);
bool att_fits_texel(const vkattn_context *ctx, const vkattn_tensor *t, const att_box *box);
/* Bytes a box spans (for messages). */
uint64_t att_box_bytes(const vkattn_tensor *t, const att_box *box);
/* The largest storage binding used: min(maxStorageBufferRange, 2 GiB). */
uint64_t att_storage_limit(const vkattn_context *ctx);

/* A uniform-texel-buffer binding of [offset, offset + bytes) of `buffer`
 * holding `dtype` data: an rgba32f view (f32) or an rgba32ui view (f16, eight
 * halves a texel; the kernels' "tex16" inputs), with `*first` the quad (four
 * elements) where `offset` falls. `offset` must be on a quad. The window must
 * fit (att_fits_texel). */
vkattn_result att_bind_texel(vkattn_context *ctx, const vkattn_buffer *buffer, uint64_t offset,
                             uint64_t bytes, vkattn_dtype dtype, vkattn_binding *out,
                             uint32_t *first);
/* Whether a [.., D] tensor's rows all start on eight elements, which the
 * subgroup kernels need to read f16 through texel views a texel at a time
 * (f32: always true). */
bool att_octet_aligned(const vkattn_tensor *t);

/* How one call is cut into dispatches: each covers nb batches x ng KV heads x
 * nh query heads per KV head (the whole group or 1) x nq queries. */
typedef struct att_chunks {
    uint32_t nb, ng, nh, nq;
    bool texel; /* q, k, v through texel buffers */
} att_chunks;

/* Chunks for the fast kernel, `rows_per_group` rows per workgroup: the
 * fewest dispatches whose windows (and grid) fit, with texel inputs where
 * `texel` asks for them, they fit and (`octets`: a subgroup kernel) f16 rows
 * fall on eight elements. Fails (UNSUPPORTED) only when a single head's K or
 * V, or a single mask / key-padding row, exceeds a window; att_validate
 * reports those first with a clearer message. */
vkattn_result att_plan_main(vkattn_context *ctx, const att_problem *p, uint32_t rows_per_group,
                            bool texel, bool octets, att_chunks *out);
/* Chunks for the weights kernel (ng unused: KV heads follow the query heads;
 * nh counts query heads: all Hq, or 1, and always 1 for rank-3 weights,
 * whose heads are added up one dispatch at a time). */
vkattn_result att_plan_weights(vkattn_context *ctx, const att_problem *p, att_chunks *out);

/* The box of one tensor for a chunk starting at batch b0, query head h0 (KV
 * head h0 / group), query i0 with the chunk's counts. `which` names the
 * tensor: 'q', 'k', 'v', 'o' (out), 'm' (mask), 'p' (key padding), 'w'
 * (weights). */
att_box att_chunk_box(const att_problem *p, char which, uint32_t b0, uint32_t nb, uint32_t h0,
                      uint32_t nh, uint32_t i0, uint32_t nq);

#endif
