/* What vkattn mha does with whole heads: --prune-heads (the heads removed,
 * the head mask made to match), --head-report (the importance table and
 * its JSON), --save-weights (the layer's weights as .safetensors). */
#ifndef VKATTN_CLI_MHA_HEADS_H
#define VKATTN_CLI_MHA_HEADS_H

#include "cli_io.h"

#include <stdio.h>

/* --prune-heads "0,5,7": the heads to remove, distinct, each below
 * `heads`, not all of them. *keep (malloc'd) receives the other heads in
 * ascending order, *kept their count. 0, or -1 after printing why, naming
 * `flag` and its value. */
int cli_parse_pruned_heads(const char *flag, const char *text, uint32_t heads, uint32_t **keep,
                           uint32_t *kept);

/* A loaded --head-mask against the heads (`heads_what` says where their
 * count comes from) and the batch: f32 [H] or [B, H], B may be 1. 0, or -1
 * after printing, naming the file and its shape. */
int cli_check_head_mask(const cli_input *in, int64_t heads, int64_t batch, const char *heads_what);

/* A head mask (f32 [Hq] or [B, Hq], checked by cli_check_head_mask, or
 * NULL: all ones [Hq]) for the layer as given, turned into (a) `pruned`: the columns of the kept heads, for
 * the pruned layer, and (b) `masked`: the same values with the removed
 * heads' set to 0, for the unpruned reference (the pruned layer equals
 * it). 0, or -1 after printing (out of memory; `flag` names the option).
 * Free both with npy_free. */
int cli_prune_head_mask(const npy_array *mask, const char *flag, const char *path, uint32_t heads,
                        const uint32_t *keep, uint32_t kept, npy_array *pruned, npy_array *masked);

/* The per-head reference weights [B, Hq, Tq, Tk] of the unpruned layer
 * as the pruned layer reports them: the kept heads' [B, kept, Tq, Tk], or
 * (average) their mean [B, Tq, Tk], into `out`. */
void cli_gather_head_weights(const float *all, const int64_t shape[4], const uint32_t *keep,
                             uint32_t kept, bool average, float *out);

/* --head-report: the importance of each (kept) head, ranked. `keep` maps
 * the layer's heads to the numbers of the layer as given (NULL: the
 * same); `group` is query heads per KV head of the layer as given. */
typedef struct cli_head_report {
    const float *importance; /* [count] */
    uint32_t count;
    const uint32_t *keep;
    uint32_t heads; /* of the layer as given */
    uint32_t group;
} cli_head_report;
/* The table, most important head first. */
void cli_print_head_report(FILE *f, const cli_head_report *r);
/* The same as a JSON document (malloc'd; NULL when out of memory). */
char *cli_head_report_json(const cli_head_report *r);

/* The layer's projection weights and biases as --save-weights writes
 * them, Hugging Face's names (q_proj.weight ... o_proj.bias) under
 * `prefix`: f32, f16 and bf16 as the device keeps them, q8_0 dequantized
 * to F32 (exactly); metadata with the head counts and, after pruning, the
 * kept heads (`keep`, NULL: none). Read back from the device now; written
 * by cli_saved_weights_write. */
typedef struct cli_saved_weights {
    uint32_t count; /* tensors: 4, or 8 with biases */
    char *names[8]; /* <prefix>q_proj.weight, ... */
    void *data[8];  /* their bytes */
    size_t nbytes[8];
    int64_t shapes[8][2]; /* [rows, cols] of weights; [n] of biases */
    int dtype;            /* st_dtype of every tensor */
    char values[4][24];   /* num_heads, num_kv_heads, head_dim, v_head_dim */
    char *kept_heads;     /* "0,1,4" after pruning, else NULL */
} cli_saved_weights;
int cli_saved_weights_read(vkattn_mha *layer, const char *prefix, const uint32_t *keep,
                           uint32_t kept, cli_saved_weights *out);
/* Writes them to `path` (.safetensors, whole or not at all). 0, or -1
 * after printing. */
int cli_saved_weights_write(const cli_saved_weights *w, const char *path);
void cli_saved_weights_free(cli_saved_weights *w);

#endif
