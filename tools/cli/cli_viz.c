/* vkattn viz: a picture of attention weights, from a weights .npy file or
 * computed on the device from Q and K. */
#include "cli_messages.h"
#include "cli_mods.h"
#include "cli_viz.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char help_text[] =
    "usage: vkattn viz (--weights W.npy | --q Q.npy --k K.npy [--v V.npy]) --out PIC.png\n"
    "Draws attention weights: one heatmap per head in a grid (queries down, keys across;\n"
    "viridis colours from 0 to the largest weight shown, with a scale bar), or with\n"
    "--average one of their mean. Keys hidden from a query (causal, mask, padding) are\n"
    "drawn grey, not as weight 0. Nothing is written unless everything succeeds.\n"
    "The weights, one of:\n"
    "  --weights W.npy       float32 weights as attention or mha --weights-out writes\n"
    "                        them: [B,Tq,Tk] (averaged over heads) or, with --per-head,\n"
    "                        [B,H,Tq,Tk]\n"
    "  --q Q.npy --k K.npy   float32 Q [B,Hq,Tq,Dk] and K [B,Hkv,Tk,Dk] (Hq a multiple of\n"
    "                        Hkv: MHA, GQA or MQA); the weights are computed on the device\n"
    "  --v V.npy             float32 [B,Hkv,Tk,Dv]; optional: the weights do not depend\n"
    "                        on it\n"
    "What hides keys (with --q/--k it also shapes the weights; with --weights it only\n"
    "marks the hidden cells, so give what the weights were computed with):\n"
    "  --causal              key j visible to query i iff j <= i + Tk - Tq (bottom-right)\n"
    "  --causal-top-left     key j visible to query i iff j <= i (SDPA's is_causal)\n"
    "  --mask M.npy          float32 (additive, -inf hides) or bool/uint8 mask, shaped\n"
    "                        [Tq,Tk], [B*Hq,Tq,Tk] or [B,Hq,Tq,Tk] (1: broadcast);\n"
    "                        boolean True attends\n"
    "  --mask-true-blocks    a boolean --mask's True hides\n"
    "  --key-padding P.npy   uint8/bool [B,Tk]: 1 = token, 0 = padding\n"
    "  --window W            sliding window: key j visible iff i' - j < W (and, without\n"
    "                        causal, j - i' < W), i' = i + Tk - Tq (or i, top-left)\n"
    "With --q/--k only (see vkattn attention --help):\n"
    "  --scale S             score scale (default 1/sqrt(Dk))\n"
    "  --softcap C           logit softcap C > 0\n"
    "  --alibi-max-bias B    ALiBi with the standard slopes of max bias B > 0\n"
    "The picture:\n"
    "  --out PIC.png|.svg    the picture; the extension picks PNG or SVG (required)\n"
    "  --batch b             the batch row to draw (default 0)\n"
    "  --tokens T.txt        one token per line (UTF-8): the queries' labels, and the\n"
    "                        keys' too when Tq == Tk (self-attention); with more keys\n"
    "                        than queries it may hold one per key (the queries are then\n"
    "                        the last Tq); default: token indices\n"
    "  --key-tokens K.txt    one token per key (cross-attention)\n"
    "  --average             one heatmap of the mean over heads, not one per head\n"
    "  --max-cells N         at most N cells per tile side (default 256): longer sides\n"
    "                        are drawn in blocks of ceil(T/N) tokens, and the picture\n"
    "                        says so\n"
    "  --downsample max|mean a block's cell: its largest weight (default; a lone peak\n"
    "                        stays visible) or their mean (hidden keys count as 0)\n"
    "  --title S             the title (default: the weights' file and batch row)\n";

enum { Q, K, V, MASK, PAD, WEIGHTS, TOKENS, KEY_TOKENS, N_INPUTS };

typedef struct viz_job {
    cli_job job;
    cli_input in[N_INPUTS];
    vkattn_buffer *bufs[N_INPUTS];
    cli_mods mods;
    float scale; /* --scale; 0: 1/sqrt(Dk) */
    uint32_t batch;
    cli_viz_options viz;
    char title[512]; /* the default title */
} viz_job;

/* --batch: a whole number >= 0. */
static int parse_row(const char *flag, const char *text, uint32_t *out)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(text, &end, 10);
    if (!*text || *end || errno || text[0] == '-' || text[0] == '+' || text[0] == ' ' ||
        v > UINT32_MAX) {
        cli_error("viz: %s \"%s\": expected a batch row, a whole number >= 0", flag, text);
        return -1;
    }
    *out = (uint32_t)v;
    return 0;
}

/* An option with its value: 1 when taken, 0 when unknown, -1 after
 * printing why the value is wrong. */
static int value_option(viz_job *v, const char *flag, const char *value)
{
    cli_job *j = &v->job;
    for (int k = 0; k < N_INPUTS; k++)
        if (strcmp(flag, v->in[k].flag) == 0) {
            v->in[k].path = value;
            return 1;
        }
    int mod = cli_mods_option(&v->mods, flag, value);
    if (mod != 0)
        return mod;
    if (strcmp(flag, "--out") == 0)
        j->out_path = value;
    else if (strcmp(flag, "--title") == 0)
        v->viz.title = value;
    else if (strcmp(flag, "--batch") == 0)
        return parse_row(flag, value, &v->batch) != 0 ? -1 : 1;
    else if (strcmp(flag, "--max-cells") == 0)
        return cli_parse_uint(flag, value, &v->viz.max_cells) != 0 ? -1 : 1;
    else if (strcmp(flag, "--scale") == 0)
        return cli_parse_positive(flag, value, &v->scale) != 0 ? -1 : 1;
    else if (strcmp(flag, "--downsample") == 0) {
        if (strcmp(value, "max") && strcmp(value, "mean")) {
            cli_error("viz: --downsample \"%s\": expected max or mean", value);
            return -1;
        }
        v->viz.reduce = strcmp(value, "mean") == 0 ? VKATTN_VIZ_REDUCE_MEAN : VKATTN_VIZ_REDUCE_MAX;
    } else
        return 0;
    return 1;
}

/* cli_parse_args' parser: flags without a value, then value_option. */
static int parse_option(void *user, int argc, char **argv, int *i)
{
    viz_job *v = user;
    const char *a = argv[*i];
    bool *flag = strcmp(a, "--causal") == 0             ? &v->job.causal
                 : strcmp(a, "--causal-top-left") == 0  ? &v->job.causal_top_left
                 : strcmp(a, "--mask-true-blocks") == 0 ? &v->job.mask_true_blocks
                 : strcmp(a, "--average") == 0          ? &v->viz.average
                                                        : NULL;
    if (flag) {
        *flag = true;
        return 0;
    }
    if (strncmp(a, "--", 2) != 0 || *i + 1 >= argc) {
        cli_error("viz: %s \"%s\" (see vkattn viz --help)",
                  strncmp(a, "--", 2) != 0 ? "unexpected argument" : "no value after", a);
        return 2;
    }
    int taken = value_option(v, a, argv[++*i]);
    if (taken == 0)
        cli_error("viz: unknown option \"%s\" (see vkattn viz --help)", a);
    return taken > 0 ? 0 : 2;
}

/* The combinations of options that make sense. 0, or -1 after printing. */
static int check_given(const viz_job *v)
{
    const cli_input *in = v->in;
    const cli_job *j = &v->job;
    if (!in[WEIGHTS].path == !in[Q].path) {
        cli_error("viz: give the weights with --weights W.npy or Q and K with --q Q.npy --k "
                  "K.npy%s",
                  in[WEIGHTS].path ? ", not both" : "");
        return -1;
    }
    if (in[Q].path && !in[K].path) {
        cli_error("viz: --q needs --k (the keys)");
        return -1;
    }
    if (in[WEIGHTS].path && (in[K].path || in[V].path)) {
        cli_error("viz: %s is for computing the weights from --q; --weights gives them",
                  in[K].path ? "--k" : "--v");
        return -1;
    }
    const char *computing = v->scale > 0                 ? "--scale"
                            : v->mods.softcap > 0        ? "--softcap"
                            : v->mods.alibi_max_bias > 0 ? "--alibi-max-bias"
                                                         : NULL;
    if (in[WEIGHTS].path && computing) {
        cli_error("viz: %s changes how weights are computed from --q and --k; --weights "
                  "gives them computed",
                  computing);
        return -1;
    }
    const cli_input no_slopes = {"--alibi-slopes"};
    if (cli_mods_check_given(&v->mods, j, &no_slopes) != 0 ||
        cli_job_check_required(j, NULL, 0, NULL) != 0)
        return -1;
    return cli_viz_check_output("viz", "--out", j->out_path);
}

/* The weights file: [B,Tq,Tk] averaged or [B,H,Tq,Tk]; as [B,H,Tq,Tk]. */
static int load_weights(viz_job *v, int64_t shape[4])
{
    cli_input *w = &v->in[WEIGHTS];
    if (cli_load_f32(w, 0) != 0)
        return -1;
    const npy_array *a = &w->array;
    if (a->rank != 3 && a->rank != 4) {
        cli_error("--weights %s: has %u dimensions, expected [B,Tq,Tk] (averaged over heads) "
                  "or [B,H,Tq,Tk] (--per-head)",
                  w->path, a->rank);
        return -1;
    }
    v->viz.pre_averaged = a->rank == 3;
    const int64_t s[4] = {a->shape[0], a->rank == 3 ? 1 : a->shape[1], a->shape[a->rank - 2],
                          a->shape[a->rank - 1]};
    memcpy(shape, s, sizeof s);
    return 0;
}

/* The weights on the device: Q and K (V, or K again for a V that does not
 * matter) through vkattn_attention with a per-head weights output. */
static int compute_weights(viz_job *v, int64_t shape[4])
{
    cli_job *j = &v->job;
    const int64_t *qs = v->in[Q].array.shape, *ks = v->in[K].array.shape;
    const int64_t dv = v->in[V].path ? v->in[V].array.shape[3] : ks[3];
    const int64_t os[4] = {qs[0], qs[1], qs[2], dv};
    cli_job_shape_outputs(j, 4, os, qs[1], qs[2], ks[2]);
    cli_viz_shape_weights(j, qs[0], qs[1], qs[2], ks[2]);
    if (!(j->ctx = cli_open(&j->device)))
        return -1;
    vkattn_attention_args args = {.scale = v->scale, .bool_mask = cli_job_bool_mask(j)};
    cli_mods_attention(&v->mods, j, &args);
    vkattn_tensor *slots[N_INPUTS] = {&args.q, &args.k, &args.v, &args.mask, &args.key_padding};
    if (cli_job_upload(j, slots, MASK) != 0 ||
        cli_job_create_outputs(j, &args.out, &args.weights, NULL) != 0)
        return -1;
    if (!v->in[V].path)
        args.v = args.k;
    vkattn_result r = vkattn_attention(j->ctx, &args);
    if (r != VKATTN_SUCCESS) {
        cli_report_error(j->ctx, r, v->in, N_INPUTS);
        return -1;
    }
    if (cli_job_download(j) != 0)
        return -1;
    memcpy(shape, j->out.weights_shape, 4 * sizeof *shape);
    return 0;
}

/* Loads, computes (or reads) the weights, draws batch row --batch, writes
 * the picture. 0, or 1 after printing. */
static int run(viz_job *v)
{
    cli_job *j = &v->job;
    static const uint32_t ranks[N_INPUTS] = {4, 4, 4, 0, 2, 0, 0, 0};
    int64_t shape[4];
    if (cli_job_stage_outputs(j) != 0 || cli_job_load(j, ranks, PAD) != 0 ||
        (v->in[WEIGHTS].path && load_weights(v, shape) != 0))
        return 1;
    const char *source = v->in[WEIGHTS].path ? v->in[WEIGHTS].path : v->in[Q].path;
    int64_t batch = v->in[WEIGHTS].path ? shape[0] : v->in[Q].array.shape[0];
    if (v->batch >= batch) {
        cli_error("viz: --batch %u: %s has %lld batch row%s", v->batch, source, (long long)batch,
                  batch == 1 ? "" : "s");
        return 1;
    }
    if (!v->viz.title) {
        const char *slash = strrchr(source, '/');
        snprintf(v->title, sizeof v->title, "attention weights of %s, batch row %u",
                 slash ? slash + 1 : source, v->batch);
        v->viz.title = v->title;
    }
    v->viz.tokens_path = v->in[TOKENS].path;
    v->viz.key_tokens_path = v->in[KEY_TOKENS].path;
    if (!v->in[WEIGHTS].path && compute_weights(v, shape) != 0)
        return 1;
    const float *weights = v->in[WEIGHTS].path ? v->in[WEIGHTS].array.data : j->out.weights;
    cli_viz_masks masks = cli_viz_job_masks(j, MASK, PAD, v->mods.window);
    bool *hidden = NULL;
    cli_viz_picture pic;
    int status = 1;
    if (cli_viz_hidden(&masks, shape, v->batch, &hidden) == 0 &&
        cli_viz_render("--out", j->out_path, &v->viz, weights, shape, v->batch, hidden, &pic) == 0)
        status = cli_viz_save("--out", cli_job_output_path(j, j->out_path), &pic) != 0;
    free(hidden);
    return status;
}

int cli_viz(int argc, char **argv)
{
    viz_job v = {.in = {{"--q"},
                        {"--k"},
                        {"--v"},
                        {"--mask", .mask = true},
                        {"--key-padding"},
                        {"--weights", .external = true},
                        {"--tokens", .external = true},
                        {"--key-tokens", .external = true}}};
    v.job = (cli_job){.command = "viz", .inputs = v.in, .bufs = v.bufs, .n_inputs = N_INPUTS};
    int code = cli_parse_args(argc, argv, &v.job.device, help_text, parse_option, &v);
    if (code != CLI_ARGS_OK)
        return code;
    if (check_given(&v) != 0)
        return 2;
    return cli_job_end(&v.job, run(&v));
}
