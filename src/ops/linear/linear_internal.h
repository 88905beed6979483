/* Linear internals, shared by the op's own files only: the checked problem
 * (linear_api.c), its kernel configuration (linear_config.c: families,
 * input bindings, tile presets, the built-in choice and the tuning table),
 * its recording (linear_record.c: the split into dispatches whose binding
 * windows fit the device's limits) and its tuner (linear_tune.c). */
#ifndef VKA_LINEAR_INTERNAL_H
#define VKA_LINEAR_INTERNAL_H

#include "ops/linear/linear.h"
#include "core/buffer.h"
#include "core/host.h"
#include "core/limits.h"
#include "core/record.h"
#include "core/submit.h"
#include "core/tensor.h"
#include "core/windows.h"
#include "spec/dtype.h"
#include "spec/error_text.h"
#include "spec/size_math.h"

/* A validated problem: strides resolved, all sizes >= 1. Row m of x is
 * (batch m / T, row m % T). */
typedef struct vka_linear_problem {
    vkattn_tensor x, w, b; /* b.buffer NULL: no bias */
    uint32_t segment_count;
    /* A segment's destination; for a pool segment, the whole pool as a rank-1
     * tensor (bound whole: the rows' places are only known on the GPU). */
    vkattn_tensor dst[VKA_LINEAR_MAX_SEGMENTS];
    uint32_t pool_segments;                          /* bit s: segment s appends to a pool */
    const vkattn_kv_cache *cache;                    /* with pool segments, else NULL */
    vka_binding meta;                                /* the step's metadata (recording only) */
    uint32_t batch;                                  /* rows of the metadata (= B) */
    uint64_t seg_start[VKA_LINEAR_MAX_SEGMENTS + 1]; /* first column; [count] = N */
    uint64_t head_dim[VKA_LINEAR_MAX_SEGMENTS];
    uint64_t B, T, M, N, K;
    uint64_t x_sb, x_st, w_sn; /* element strides */
    /* the heads epilogue (heads.segments 0: none); positions resolved */
    vka_linear_heads heads;
    uint64_t params_floats; /* floats of heads.params from its offset */
} vka_linear_problem;

/* With the heads epilogue, tiles cover whole heads: true for a problem
 * whose segments need it. */
static inline bool vka_linear_has_heads(const vka_linear_problem *p)
{
    return p->heads.segments != 0;
}

/* Kernel families (shaders/linear_*.comp). */
enum {
    LINEAR_FAM_SG,      /* GEMM, subgroup shuffles (CPU drivers) */
    LINEAR_FAM_SH,      /* GEMM, shared-memory tiles (GPUs, no shuffles) */
    LINEAR_FAM_GEMV_SG, /* few rows, K split over a subgroup */
    LINEAR_FAM_GEMV_SH, /* few rows, K split over a workgroup */
    LINEAR_FAM_CM,      /* GEMM on cooperative matrices (matrix units) */
    LINEAR_FAM_COUNT
};

/* How x and w are read (the preferred binding; the recording falls back
 * down this list where alignment or the device's limits require). */
enum {
    LINEAR_INPUT_TEXEL_PACKED = 0, /* texel buffers, f16 operands 8 halves per fetch */
    LINEAR_INPUT_TEXEL = 1,        /* texel buffers, rgba32f / rgba16f */
    LINEAR_INPUT_STORAGE = 2,      /* storage buffers */
    LINEAR_INPUT_COUNT
};

/* Up to this many rows go to the GEMV families (bandwidth-bound on W). */
#define LINEAR_GEMV_MAX_ROWS 8u

/* A kernel configuration: the unit the built-in heuristic picks and the
 * tuner stores (tuning words: family, input, preset; encoding version
 * LINEAR_CONFIG_VERSION). */
typedef struct vka_linear_config {
    uint32_t family, input, preset;
} vka_linear_config;
#define LINEAR_CONFIG_VERSION 1u

/* Whether `c` can run `p` on this device (family allowed by the device and
 * the context's flags, rows within the family's reach, tiles within the
 * device's workgroup and shared-memory limits). */
bool vka_linear_config_valid(const vkattn_context *ctx, const vka_linear_problem *p,
                             const vka_linear_config *c);
/* The built-in choice for this device and shape. */
void vka_linear_config_default(const vkattn_context *ctx, const vka_linear_problem *p,
                               vka_linear_config *c);
/* The tuned configuration of p's shape class if the table has a valid one,
 * else the built-in choice. */
void vka_linear_config_choose(const vkattn_context *ctx, const vka_linear_problem *p,
                              vka_linear_config *c);
/* p's shape class (see linear_config.c for the meaning of the values). */
void vka_linear_tuning_key(const vka_linear_problem *p, uint32_t op_key[7]);
/* The candidates the tuner times for p, valid on this device; returns the
 * count (at most `max`). */
uint32_t vka_linear_config_candidates(const vkattn_context *ctx, const vka_linear_problem *p,
                                      vka_linear_config *out, uint32_t max);

/* What a configuration becomes for one problem: the kernel family, its
 * specialization constants and the work one workgroup covers. */
typedef struct vka_linear_plan {
    uint32_t family, input;
    /* the family's (0..5), pools (6), heads epilogue (7..15), the
     * cooperative-matrix shape (16..18, LINEAR_FAM_CM) */
    uint32_t spec[19];
    uint32_t spec_count;
    uint32_t epi_rows, epi_cols; /* the heads epilogue's staged tile */
    uint64_t tile_m, tile_n;     /* rows / columns of y per workgroup */
    bool rows_in_x;              /* grid x = row blocks (else column blocks) */
    uint64_t max_rows, max_cols; /* per dispatch, from maxComputeWorkGroupCount */
} vka_linear_plan;

void vka_linear_plan_make(const vkattn_context *ctx, const vka_linear_problem *p,
                          const vka_linear_config *c, vka_linear_plan *plan);

/* Records the dispatches (and barriers between them) of a validated problem
 * with configuration `c` (NULL: the tuned or built-in choice). Fails without
 * recording anything when no split fits the device. */
vkattn_result vka_linear_record(vkattn_context *ctx, VkCommandBuffer cmd,
                                const vka_linear_problem *p, const vka_linear_config *c);

/* Validates a plain vkattn_linear_args into a problem (one segment). */
vkattn_result vka_linear_problem_plain(vkattn_context *ctx, const vkattn_linear_args *args,
                                       vka_linear_problem *p);

#endif
