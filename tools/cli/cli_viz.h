/* Pictures of attention weights in the CLI (tools/viz draws them): the
 * command `vkattn viz`, attention's --weights-png, and the same for any
 * command holding per-head weights (cli_viz_write_weights). */
#ifndef VKATTN_CLI_VIZ_H
#define VKATTN_CLI_VIZ_H

#include "cli_job.h"
#include "viz/viz.h"

/* How to draw: the options `vkattn viz` takes; zeros are the defaults. */
typedef struct cli_viz_options {
    const char *tokens_path;     /* --tokens: one token per line; NULL: indices */
    const char *key_tokens_path; /* --key-tokens: the keys' (cross-attention) */
    const char *title;           /* NULL: "attention weights" */
    bool average;                /* --average: one heatmap of the mean over heads */
    bool pre_averaged;           /* the weights' H is 1 because they are a mean over heads */
    vkattn_viz_reduce reduce;    /* --downsample max|mean */
    uint32_t max_cells;          /* --max-cells; 0: 256 */
} cli_viz_options;

/* What hides keys from queries, to draw them as hidden rather than as
 * weight 0 (see "attention semantics" in include/vkattn/ops.h). Arrays are
 * loaded inputs (cli_load_mask, cli_load_mask_u8) or NULL. */
typedef struct cli_viz_masks {
    bool causal;
    vkattn_causal_align align;
    uint32_t window;
    const cli_input *mask; /* f32 (additive: -inf hides) or u8/bool */
    bool mask_true_blocks;
    const cli_input *key_padding; /* u8 [B, Tk]: 0 hides */
} cli_viz_masks;

/* The masks of a job: causal, --mask and key padding inputs, the window. */
cli_viz_masks cli_viz_job_masks(const cli_job *j, int mask, int key_padding, uint32_t window);

/* Hidden keys of batch row `batch_row` for weights shaped [B, H, Tq, Tk]:
 * *out is NULL when nothing can be hidden, else a malloc'd bool [H, Tq,
 * Tk]. A mask that does not broadcast to the weights is refused, naming
 * its flag and file. 0, or -1 after printing why. */
int cli_viz_hidden(const cli_viz_masks *m, const int64_t shape[4], uint32_t batch_row, bool **out);

/* A picture encoded in memory, written later: commands render before they
 * write any file, so that a bad picture leaves no output behind. */
typedef struct cli_viz_picture {
    void *data;
    size_t size;
} cli_viz_picture;

/* Renders batch row `batch_row` of per-head weights shaped [B, H, Tq, Tk]
 * (hidden: [H, Tq, Tk] of that row, or NULL) in the format of `path`'s
 * extension. Errors name `option` and `path` (and a tokens file). 0, or -1
 * after printing. */
int cli_viz_render(const char *option, const char *path, const cli_viz_options *o,
                   const float *weights, const int64_t shape[4], uint32_t batch_row,
                   const bool *hidden, cli_viz_picture *out);
/* Writes the picture to `path` (whole or not at all) and frees it. 0, or -1
 * after printing. */
int cli_viz_save(const char *option, const char *path, cli_viz_picture *pic);
void cli_viz_picture_free(cli_viz_picture *pic);

/* Render and save at once, with the default options and `tokens_path`
 * (NULL: none) for both axes: for a command that holds per-head weights
 * [B, H, Tq, Tk] (H 1 for a single head) and writes nothing else after.
 * hidden: [H, Tq, Tk] of that row or NULL (cli_viz_hidden). Returns 0 or
 * -1 after printing the error with cli_error. */
int cli_viz_write_weights(const char *path, const float *weights, const int64_t shape[4],
                          uint32_t batch_row, const bool *hidden, const char *tokens_path,
                          const char *title);

/* A job's weights output made per head, [B, H, Tq, Tk], whatever
 * --weights-out and --per-head said (call after cli_job_shape_outputs). */
void cli_viz_shape_weights(cli_job *j, int64_t batch, int64_t heads, int64_t tq, int64_t tk);
/* The per-head weights read back replaced by their mean over heads, [B,
 * Tq, Tk], as --weights-out without --per-head writes them. -1 after
 * printing when out of memory. */
int cli_viz_average_weights(cli_job *j);
/* --weights-png of a job whose weights were read back per head
 * (cli_viz_shape_weights): batch row 0 drawn into *png (written later),
 * keys hidden by its inputs `mask` and `key_padding`, causal and `window`
 * drawn grey; then the weights --weights-out asked for, if any: averaged
 * over heads unless --per-head (none: freed). 0, or -1 after printing. */
int cli_viz_draw_job_weights(cli_job *j, const char *path, const char *title, int mask,
                             int key_padding, uint32_t window, cli_viz_picture *png);
/* A picture's path given with `option`: its extension is .png or .svg (its
 * place among the job's files is cli_job_check_required's). 0, or -1 after
 * printing, naming `command`. */
int cli_viz_check_output(const char *command, const char *option, const char *path);

/* The command (cli_viz.c). */
int cli_viz(int argc, char **argv);

#endif
