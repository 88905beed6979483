/* Attention internals, shared by the op's own files only: the checked
 * problem (attention_api.c), the kernel configuration (attention_config.c),
 * the cut of a call into dispatches whose bindings fit the device's windows
 * (attention_chunks.c) and its recording (attention_record.c). */
#ifndef VKA_ATTENTION_INTERNAL_H
#define VKA_ATTENTION_INTERNAL_H

#include "ops/attention/attention.h"
#include "spec/attention_shapes.h"
#include "core/buffer.h"
#include "core/context.h"
#include "core/host.h"
#include "core/kernel.h"
#include "core/limits.h"
#include "core/pipeline.h"
#include "core/record.h"
#include "core/submit.h"
#include "core/tensor.h"
#include "core/windows.h"
#include "spec/dtype.h"
#include "spec/error_text.h"
#include "spec/score_mods.h"
#include "spec/size_math.h"

/* Flags of both push-constant blocks (mirrors shaders/attention_io.glsl). */
enum {
    ATT_FLAG_CAUSAL = 1u,
    ATT_FLAG_MASK = 2u,
    ATT_FLAG_MASK_F16 = 4u,
    ATT_FLAG_KEY_PADDING = 8u,
    ATT_FLAG_WEIGHTS_ACCUMULATE = 16u,
    ATT_FLAG_ONE_HEAD = 32u,     /* main kernels: one query head of each group */
    ATT_FLAG_MASK_BOOL = 64u,    /* the mask is u8: nonzero visible */
    ATT_FLAG_MASK_BLOCKS = 128u, /* with MASK_BOOL: nonzero hidden */
};

/* Score modifier bits of the MODS specialization constant (mirrors
 * shaders/attention_main.glsl and attention_weights.comp). */
enum {
    ATT_MOD_WINDOW = 1u,
    ATT_MOD_SOFTCAP = 2u,
    ATT_MOD_SINKS = 4u,
    ATT_MOD_ALIBI = 8u,
    ATT_MOD_LSE = 16u,       /* the weights kernel: the row's LSE is given */
    ATT_MOD_HEAD_GATE = 32u, /* the weights kernel: head_mask scales each head */
};
/* The modifiers' specialization constants follow the kernels' own at this
 * id (MODS, WINDOW, SOFTCAP). */
#define ATT_SPEC_MODS_ID 8u
/* The `any` variants' k and v dtypes (attention_main.glsl's k_dtype,
 * v_dtype) at this id and the next. */
#define ATT_SPEC_KV_DTYPE_ID 11u

/* A validated call: tensors with resolved strides (absent optional ones have
 * buffer NULL) and the sizes. */
typedef struct vka_att_problem {
    /* mask: always rank 4 [B, Hq, Tq, Tk], size 1 and stride 0 in the
     * dimensions it broadcasts (vka_mask_view4) */
    vkattn_tensor q, k, v, out, mask, key_padding, weights;
    vkattn_tensor sinks, alibi_slopes, lse; /* optional (buffer NULL) */
    vkattn_tensor head_mask;                /* optional: f32 [Hq] or [B, Hq] */
    vka_attention_dims dims;
    bool causal;
    float scale;      /* softmax scale (the main kernels' scores: natural domain) */
    float scale_log2; /* softmax scale * log2(e) (the weights kernel's: log2 domain) */
    vka_score_mods mods;
    bool mask_true_blocks; /* a u8 mask's nonzero values hide keys */
    /* The window the kernels apply: 0 where args->window is 0 or reaches
     * every key of every query (W >= Tq + Tk). */
    uint32_t window;
    /* vka_att_cmd_weights_given: the weights kernel reads each row's
     * log-denominator from lse instead of computing it (no main pass). */
    bool weights_given_lse;
} vka_att_problem;

/* Whether the main kernels read and write rows element by element (a head
 * dim that is not a multiple of 8; their ELEM), and whether the weights
 * kernel does (Dk only). */
static inline bool vka_att_elem(const vka_att_problem *p)
{
    return p->dims.head_dim % 8 != 0 || p->dims.v_head_dim % 8 != 0;
}
static inline bool vka_att_weights_elem(const vka_att_problem *p)
{
    return p->dims.head_dim % 8 != 0;
}

/* Whether the kernels read k and v as storage `any` (32-bit words in the
 * dtypes of specialization constants): k and v of different dtypes, or
 * quantized. */
static inline bool vka_att_kv_any(const vka_att_problem *p)
{
    return p->dims.kv_dtype != p->dims.v_dtype || vka_dtype_is_quantized(p->dims.kv_dtype);
}

/* The batch stride of a checked head mask (0: one row for every batch row). */
uint32_t vka_att_head_mask_batch_stride(const vkattn_tensor *gate);

/* The ALiBi slopes the kernels read: the caller's, the standard ones of
 * alibi_max_bias (a constant table of the context), or none (buffer
 * NULL). (attention_record.c) */
vkattn_result vka_att_slopes_tensor(vkattn_context *ctx, const vka_att_problem *p,
                                    vkattn_tensor *out);

/* The forward's dropout (attention_backward.c): args->dropout_p checked
 * against what its pass takes (p: the checked problem), and the pass
 * recorded after the main one, which wrote out and the LSE: out
 * overwritten with sum_j p'(i, j) v_j. */
vkattn_result vka_att_dropout_check(vkattn_context *ctx, const vkattn_attention_args *args,
                                    const vka_att_problem *p);
vkattn_result vka_att_record_dropout(vkattn_context *ctx, VkCommandBuffer cmd,
                                     const vka_att_problem *p, float dropout_p, uint64_t seed);

/* The MODS bits of a problem. */
uint32_t vka_att_mod_bits(const vka_att_problem *p);

/* Checks everything about `args` (shapes, dtypes, strides, offsets, bounds,
 * overlaps, what the device's binding windows can hold) and fills `p`.
 * Nothing is recorded. (attention_api.c) */
vkattn_result vka_att_validate(vkattn_context *ctx, const vkattn_attention_args *args,
                               vka_att_problem *p);
/* The same with every name in messages starting with `pre` instead of
 * "args->" (the backward's "args->forward."). */
vkattn_result vka_att_validate_as(vkattn_context *ctx, const vkattn_attention_args *args,
                                  const char *pre, vka_att_problem *p);

/* Packed ragged batches (args->sequences > 0; attention_packed.c): the
 * whole call and every sequence's are checked (`whole`: the packed tensors
 * resolved as one batch row); recording checks each sequence again and
 * records it, a barrier between sequences. */
vkattn_result vka_att_packed_validate(vkattn_context *ctx, const vkattn_attention_args *args,
                                      vka_att_problem *whole);
vkattn_result vka_att_packed_record(vkattn_context *ctx, VkCommandBuffer cmd,
                                    const vkattn_attention_args *args,
                                    const vka_att_problem *whole);

/* ---- kernel configuration (attention_config.c) */

/* Kernel families (values are stored in tuning data: never renumber). */
enum { ATT_FAMILY_SUBGROUP = 1, ATT_FAMILY_SHARED = 2, ATT_FAMILY_COOPMAT = 3 };
#define ATT_SPEC_MAX 8

/* What a call runs: the kernel family, texel or storage inputs (texel
 * falls back to storage where a window does not fit), and a tile preset of
 * the family (see attention_config.c). */
typedef struct vka_att_config {
    uint32_t family;
    bool texel;
    uint32_t preset;
} vka_att_config;

/* Version of the meaning of stored attention tuning words (the families and
 * presets of attention_config.c): raise it whenever a preset is added,
 * removed or changed, so that a tuning file written before picks the
 * built-in choice instead of other tiles. */
#define ATT_CONFIG_VERSION 1u

/* The stored tuning winner for the problem's shape class when there is a
 * valid one, else the built-in choice for the device. */
void vka_att_config_choose(vkattn_context *ctx, const vka_att_problem *p, vka_att_config *cfg);
/* The built-in choice: the device's family and binding, a preset by size. */
void vka_att_config_default(const vkattn_context *ctx, const vka_att_problem *p,
                            vka_att_config *cfg);
/* Whether the device can run `cfg` (family supported, preset in range). */
bool vka_att_config_valid(const vkattn_context *ctx, const vka_att_config *cfg);
/* Candidate configs for the tuner (valid on this device), at most `max`. */
uint32_t vka_att_config_candidates(const vkattn_context *ctx, const vka_att_problem *p,
                                   vka_att_config *out, uint32_t max);
/* The tuning key of the problem's shape class. */
void vka_att_tuning_key(const vka_att_problem *p, uint32_t key[7]);
/* Whether the coopmat family's smallest tile fits the problem's head dims
 * in the device's shared memory (and the family may run at all). */
bool vka_att_coopmat_fits(const vkattn_context *ctx, const vka_att_problem *p);
/* Specialization constants of the main kernel for `cfg` (count returned)
 * and the tile rows one workgroup covers. */
uint32_t vka_att_config_spec(const vkattn_context *ctx, const vka_att_problem *p,
                             const vka_att_config *cfg, uint32_t spec[ATT_SPEC_MAX],
                             uint32_t *rows_per_group);

/* Records the dispatches of a validated problem, with the chosen config or
 * a given one. (attention.c) */
vkattn_result vka_att_record(vkattn_context *ctx, VkCommandBuffer cmd, const vka_att_problem *p);
vkattn_result vka_att_record_with(vkattn_context *ctx, VkCommandBuffer cmd,
                                  const vka_att_problem *p, const vka_att_config *cfg);
/* Records only the weights kernel of a problem (with weights_given_lse). */
vkattn_result vka_att_record_weights_only(vkattn_context *ctx, VkCommandBuffer cmd,
                                          const vka_att_problem *p);

/* ---- cutting a call into dispatches (attention_chunks.c) */

/* Whether a [.., D] tensor's rows all start on eight elements, which the
 * subgroup kernels need to read f16 through texel views a texel at a time
 * (f32: always true). */
bool vka_att_octet_aligned(const vkattn_tensor *t);
/* Whether the call's dtypes have texel views (bf16 has none: storage only). */
bool vka_att_texel_ok(const vka_att_problem *p);

/* How one call is cut into dispatches: each covers nb batches x ng KV heads x
 * nh query heads per KV head (the whole group or 1) x nq queries. */
typedef struct vka_att_chunks {
    uint32_t nb, ng, nh, nq;
    bool texel; /* q, k, v through texel buffers */
} vka_att_chunks;

/* Chunks for the fast kernel, `rows_per_group` rows per workgroup: the
 * fewest dispatches whose windows (and grid) fit, with texel inputs where
 * `texel` asks for them, they fit and (`octets`: a subgroup kernel) f16 rows
 * fall on eight elements. Fails (UNSUPPORTED) only when a single head's K or
 * V, or a single mask / key-padding row, exceeds a window; vka_att_validate
 * reports those first with a clearer message. */
vkattn_result vka_att_plan_main(vkattn_context *ctx, const vka_att_problem *p,
                                uint32_t rows_per_group, bool texel, bool octets,
                                vka_att_chunks *out);
/* Chunks for the weights kernel (ng unused: KV heads follow the query heads;
 * nh counts query heads: all Hq, or 1, and always 1 for rank-3 weights,
 * whose heads are added up one dispatch at a time). */
vkattn_result vka_att_plan_weights(vkattn_context *ctx, const vka_att_problem *p,
                                   vka_att_chunks *out);

/* The box of one tensor for a chunk starting at batch b0, query head h0 (KV
 * head h0 / group), query i0 with the chunk's counts. `which` names the
 * tensor: 'q', 'k', 'v', 'o' (out), 'm' (mask), 'p' (key padding), 'w'
 * (weights), 'l' (LSE). */
vka_box vka_att_chunk_box(const vka_att_problem *p, char which, uint32_t b0, uint32_t nb,
                          uint32_t h0, uint32_t nh, uint32_t i0, uint32_t nq);

#endif
