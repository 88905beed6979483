/* vkattn mha's run: its inputs (by index into in[]) and what it adds to
 * cli_job, shared by the command (cli_mha.c) and its option checks
 * (cli_mha_options.c). */
#ifndef VKATTN_CLI_MHA_JOB_H
#define VKATTN_CLI_MHA_JOB_H

#include "cli_job.h"
#include "cli_mha_grads.h"
#include "cli_mha_heads.h"
#include "cli_mods.h"
#include "cli_offsets.h"
#include "cli_rope.h"
#include "cli_viz.h"
#include "cli_weights.h"

enum {
    X,
    KV,
    WQ,
    WK,
    WV,
    WO,
    BQ,
    BK,
    BV,
    BO,
    MASK,
    PAD,
    POS,
    QN,
    KN,
    SINKS,
    SLOPES,
    HMASK,
    VALUE,  /* --value: the values' input apart from the keys' */
    KEY,    /* --key: another name of --kv's input (moved there when parsed) */
    BIAS_K, /* --bias-k, --bias-v: torch's add_bias_kv rows */
    BIAS_V,
    WEIGHTS,
    SEQOFF, /* --seq-offsets, --kv-offsets: packed ragged sequences */
    KVOFF,
    GRAD, /* --grad-out: the loss's gradient of Y (cli_mha_grads.h) */
    N_INPUTS
};

/* One run: what mha adds to cli_job. */
typedef struct mha_job {
    cli_job job;
    uint32_t heads, kv_heads, prefill, paged_block, kv_splits;
    uint32_t context;      /* --context; 0: CLI_REPORT_CONTEXT */
    float scale, norm_eps; /* --scale, --norm-eps; 0: the layer's defaults */
    cli_rope_options rope;
    cli_mods mods;
    const char *prefix;       /* --prefix */
    const char *kv_dtype;     /* --kv-dtype (NULL: the layer's dtype) */
    const char *weight_dtype; /* --weight-dtype (NULL: the layer's dtype) */
    const char *prune_text;   /* --prune-heads: the heads to remove */
    const char *save_weights; /* --save-weights */
    const char *report_json;  /* --head-report-json */
    const char *weights_png;  /* --weights-png */
    bool head_report, report; /* --head-report, --report */
    bool add_zero_attn;       /* --add-zero-attn */
    uint32_t *keep, kept;     /* with --prune-heads: the heads that stay */
    npy_array mask_pruned;    /* ... --head-mask's columns of those heads */
    npy_array mask_masked;    /* ... and for the reference, removed heads 0 */
    vkattn_buffer *mask_buffer;
    float *importance;       /* --head-report: [kept heads] */
    cli_saved_weights saved; /* --save-weights, read back after the run */
    cli_viz_picture png;     /* --weights-png, drawn after the run */
    cli_weight_names names;  /* --names */
    char *weight_labels[10]; /* "<file>:<name>" of the tensors from --weights */
    cli_input in[N_INPUTS];
    vkattn_buffer *bufs[N_INPUTS];
    cli_offsets offsets;  /* --seq-offsets, --kv-offsets (cli_mha_packed.c) */
    cli_mha_grads grads;  /* --dropout, --seed, --grads (with --grad-out) */
    vkattn_mha_desc desc; /* the layer's sizes, from the inputs' shapes */
    vkattn_mha *layer;
} mha_job;

/* Whether the layer's heads get measured (--head-report, or its JSON). */
static inline bool cli_mha_measures_heads(const mha_job *m)
{
    return m->head_report || m->report_json;
}

/* The option checks (cli_mha_options.c): 0, or -1 after printing. */
int cli_mha_check_head_options(mha_job *m);
int cli_mha_check_layer_options(const mha_job *m);
int cli_mha_check_weight_source(const mha_job *m);
int cli_mha_check_weight_dtype(const mha_job *m);
/* --key and --value against --kv; --key's file becomes in[KV]'s (named
 * --key in messages). */
int cli_mha_key_value_options(mha_job *m);

/* --seq-offsets and --kv-offsets (cli_mha_packed.c): after parsing, what
 * packed sequences cannot take; after loading, the offsets and X, C and
 * V as one batch row. 0, or -1 after printing. */
int cli_mha_packed_check_given(const mha_job *m);
int cli_mha_packed_load(mha_job *m);
extern const char cli_mha_packed_help[];

#endif
