/* vkattn mha: one multi-head attention layer (torch.nn.MultiheadAttention
 * weights layout) on .npy inputs. */
#include "cli_job.h"
#include "cli_messages.h"
#include "cli_mha_heads.h"
#include "cli_mha_steps.h"
#include "cli_mods.h"
#include "cli_report.h"
#include "cli_rope.h"
#include "cli_viz.h"
#include "cli_weights.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char help_text[] =
    "usage: vkattn mha --x X.npy --heads H --wq WQ.npy --wk WK.npy --wv WV.npy --wo WO.npy\n"
    "                  --out Y.npy [options]\n"
    "One attention layer on the device, float32 .npy in and out, torch.nn.Linear weight\n"
    "layout (y = x W^T + b): X [B,Tq,Dm]; WQ [H*Dh,Dm]; WK [G*Dh,Dkv]; WV [G*Dv,Dvin];\n"
    "WO [Dm,H*Dv]; Y [B,Tq,Dm]. Dh is WQ's rows / H (usually Dm / H), Dv WV's rows / G\n"
    "(usually Dh; any of 1..576 each). Outputs are all or nothing: checked before any\n"
    "work, placed only when everything succeeded; earlier files at their paths stay.\n"
    "  --seq-first           X, C and Y are [T,B,E] (nn.MultiheadAttention's default\n"
    "                        batch_first=False), read and written through strides;\n"
    "                        masks, padding and weights keep their batch-first shapes\n"
    "  --kv C.npy            keys/values come from C [B,Tk,Dkv] (cross-attention);\n"
    "                        default: self-attention (C = X)\n"
    "  --key K.npy --value V.npy   keys from K [B,Tk,Dkv] and values from V [B,Tk,Dvin]\n"
    "                        (torch's key and value, kdim and vdim), instead of --kv;\n"
    "                        --key alone is --kv\n"
    "  --bias-k BK.npy --bias-v BV.npy   torch's add_bias_kv: float32 [G*Dh] and [G*Dv]\n"
    "                        (or torch's [1,1,E]) appended to every KV head's keys and\n"
    "                        values as one more key, visible to every query whatever\n"
    "                        --causal, --mask or --key-padding say (those keep Tk\n"
    "                        columns), in the forward and the --prefill steps;\n"
    "                        --weights-out gets their columns after the Tk keys'\n"
    "                        (as torch's); not with --prune-heads or RoPE\n"
    "  --add-zero-attn       torch's add_zero_attn: then a key and value of zeros\n"
    "  --kv-heads G          key/value heads (GQA; 1 = MQA; default H)\n"
    "  --bq/--bk/--bv/--bo B.npy   biases [H*Dh], [G*Dh], [G*Dv], [Dm] (missing ones: 0)\n"
    "  --weights F.safetensors  the weights and biases by name from a .safetensors file\n"
    "                        (F32, F16 or BF16 tensors), instead of --wq..--bo\n"
    "  --prefix P            ... each name starting with P (\"layers.0.self_attn.\"; also\n"
    "                        the names --save-weights writes)\n"
    "  --names torch|hf      ... as nn.MultiheadAttention names them (in_proj_weight\n"
    "                        [3E,E] or q/k/v_proj_weight, in_proj_bias, out_proj.weight,\n"
    "                        out_proj.bias) or as Hugging Face models do (q_proj, k_proj,\n"
    "                        v_proj, o_proj with .weight/.bias); default: hf when\n"
    "                        <P>q_proj.weight exists, else torch\n"
    "  --causal              query i sees key j iff j <= i + Tk - Tq (bottom-right)\n"
    "  --mask M.npy          float32 (additive, -inf hides) or bool/uint8 mask, shaped\n"
    "                        [Tq,Tk], [B*H,Tq,Tk] or [B,H,Tq,Tk]; any dimension may\n"
    "                        be 1 (broadcast). Boolean True attends (SDPA's attn_mask)\n"
    "  --mask-true-blocks    a boolean --mask's True hides (nn.MultiheadAttention's)\n"
    "  --key-padding P.npy   uint8/bool [B,Tk]: 1 = token, 0 = padding\n"
    "  --dtype f32|f16|bf16  storage of weights and activations on the device (default f32)\n"
    "  --input-bf16          the tensors are uint16 .npy of bf16 bits (torch's\n"
    "                        t.view(torch.int16).numpy().view('<u2')), widened exactly;\n"
    "                        a float file is refused (masks, positions keep their dtypes)\n"
    "  --weights-out W.npy   also write attention probabilities [B,Tq,Tk] (head average)\n"
    "  --per-head            ... or [B,H,Tq,Tk] per head\n"
    "  --weights-png W.png   also draw the attention probabilities of batch row 0, one\n"
    "                        heatmap per head (.png or .svg; see vkattn viz --help)\n"
    "  --check               compare with the CPU reference; exit 1 above 2e-4 / 1.5e-2\n"
    "  --head-mask M.npy     float32 [H] or [B,H]: head h's attention output of batch row\n"
    "                        b scaled by M[b,h] before the output projection (0 removes\n"
    "                        the head: Hugging Face's head_mask); in the forward pass\n"
    "                        and the --prefill steps\n"
    "  --prune-heads 0,5,7   remove these query heads from the layer for good before it\n"
    "                        runs: their rows of WQ and columns of WO go (and the KV\n"
    "                        heads whose whole group goes), so the projections shrink;\n"
    "                        --weights-out and --per-head then hold the kept heads,\n"
    "                        --head-mask still has H columns (the removed ones unused),\n"
    "                        and --check compares with the unpruned layer with those\n"
    "                        heads masked (which the pruned one equals)\n"
    "  --save-weights F.safetensors   write the layer's projection weights and biases\n"
    "                        as it runs them (after --prune-heads: the smaller ones),\n"
    "                        Hugging Face names under --prefix (q_proj.weight ..\n"
    "                        o_proj.bias), f32/f16/bf16 as the device keeps them, q8_0\n"
    "                        dequantized to F32 (exact); metadata num_heads, num_kv_heads,\n"
    "                        head_dim, v_head_dim, kept_heads. --weights reads it back\n"
    "  --head-report         print each head's importance for these inputs: the RMS\n"
    "                        change of Y when that head alone is masked (its share of\n"
    "                        Y), ranked, least important last; runs H+1 forward passes\n"
    "                        (not with --prefill or --head-mask)\n"
    "  --head-report-json F  ... and write the ranking as JSON (alone: JSON only)\n"
    "  --report              print the layer's parameters (Q, K, V, O, biases, packed\n"
    "                        or not), weight bytes per dtype and KV-cache bytes per\n"
    "                        token and for --context tokens per dtype, beside the same\n"
    "                        layer as MHA, GQA and MQA (vkattn info --layer prints it\n"
    "                        for any shape)\n"
    "  --context N           the context length of --report (default 4096)\n"
    "  --prefill N           decode through a KV cache (needs --causal, self-attention):\n"
    "                        the first N tokens of every sequence of X are one prefill\n"
    "                        step, the rest go one token per step through the decode\n"
    "                        path; Y holds all rows (equal to the full causal forward);\n"
    "                        the steps use the layer's score modifiers\n"
    "  --paged-block S       with --prefill: a paged cache of S-token blocks (with\n"
    "                        --window, blocks that fall out of the window are released)\n"
    "  --kv-splits K         with --prefill: split count of decode steps (default auto)\n"
    "  --kv-dtype T          with --prefill: the cache's dtype, --dtype's (default), any\n"
    "                        of f32, f16, bf16 (K and V rounded to nearest even as they\n"
    "                        are appended) or q8_0, q4_0, q4_1, q5_0, q5_1, iq4_nl\n"
    "                        (ggml's blocks, quantized as they are appended, as ggml's\n"
    "                        reference quantizers do; rows padded to whole 32-value\n"
    "                        blocks); --check\n"
    "                        rounds or quantizes the reference's K and V the same way\n"
    "  --weight-dtype T      storage of the projection weights on the device: --dtype's\n"
    "                        (default), f16, bf16 or q8_0 (ggml's blocks along\n"
    "                        in_features, which must be multiples of 64; quantized once\n"
    "                        when loaded; --check quantizes the reference's the same way);\n"
    "                        f32 only with --dtype f32\n"
    "  --scale S             attention score scale, finite > 0 (default 1/sqrt(Dh))\n"
    "  --q-norm WQN.npy --k-norm WKN.npy   QK-norm: per-head RMSNorm of Q and K (after\n"
    "                        the projection, before RoPE) with float32 weights [Dh]\n"
    "  --norm-eps E          the RMSNorm epsilon, finite > 0 (default 1e-6)\n";
/* after cli_mods_help */
static const char help_rope[] =
    "Rotary position embeddings of Q and K (self-attention only; V is never rotated):\n";
/* after cli_rope_help */
static const char help_positions[] =
    "  --positions P.npy     int32 or int64 [B,Tq]: each token's position (default 0..Tq-1;\n"
    "                        not with --prefill, whose steps are at cache length + t)\n";

#include "cli_mha_job.h"

/* Shapes of the weight files against the layer's sizes (head dims dh of
 * Q and K, dv of V), naming the file. */
static int check_weight_shapes(cli_input *in, int64_t dm, int64_t dkv, int64_t dvin, int64_t hq,
                               int64_t hkv, int64_t dh, int64_t dv)
{
    if (cli_expect_dim(&in[WQ], 1, dm, "embed_dim (X's last dimension)") ||
        cli_expect_dim(&in[WK], 0, hkv * dh, "kv_heads * head_dim") ||
        cli_expect_dim(&in[WK], 1, dkv, "kv_dim") ||
        cli_expect_dim(&in[WV], 0, hkv * dv, "kv_heads * v_head_dim") ||
        cli_expect_dim(&in[WV], 1, dvin,
                       in[VALUE].path ? "value_dim (--value's last dimension)" : "kv_dim") ||
        cli_expect_dim(&in[WO], 0, dm, "embed_dim") ||
        cli_expect_dim(&in[WO], 1, hq * dv, "heads * v_head_dim"))
        return -1;
    int64_t bias_len[4] = {hq * dh, hkv * dh, hkv * dv, dm};
    const char *bias_what[4] = {"heads * head_dim", "kv_heads * head_dim", "kv_heads * v_head_dim",
                                "embed_dim"};
    for (int k = 0; k < 4; k++)
        if (in[BQ + k].path && cli_expect_dim(&in[BQ + k], 0, bias_len[k], bias_what[k]))
            return -1;
    return 0;
}

static int own_option(void *user, const char *flag, const char *value)
{
    mha_job *m = user;
    int rope = cli_rope_option(&m->rope, flag, value);
    if (rope != 0)
        return rope;
    int mod = cli_mods_option(&m->mods, flag, value);
    if (mod != 0)
        return mod;
    int train = cli_train_option(&m->grads.train, flag, value);
    if (train != 0)
        return train;
    const char **text = strcmp(flag, "--prefix") == 0             ? &m->prefix
                        : strcmp(flag, "--kv-dtype") == 0         ? &m->kv_dtype
                        : strcmp(flag, "--weight-dtype") == 0     ? &m->weight_dtype
                        : strcmp(flag, "--prune-heads") == 0      ? &m->prune_text
                        : strcmp(flag, "--save-weights") == 0     ? &m->save_weights
                        : strcmp(flag, "--head-report-json") == 0 ? &m->report_json
                        : strcmp(flag, "--weights-png") == 0      ? &m->weights_png
                                                                  : NULL;
    if (text) {
        *text = value;
        return 1;
    }
    if (strcmp(flag, "--names") == 0)
        return cli_parse_weight_names(value, &m->names) != 0 ? -1 : 1;
    float *real = strcmp(flag, "--scale") == 0      ? &m->scale
                  : strcmp(flag, "--norm-eps") == 0 ? &m->norm_eps
                                                    : NULL;
    if (real)
        return cli_parse_positive(flag, value, real) != 0 ? -1 : 1;
    uint32_t *count = strcmp(flag, "--heads") == 0         ? &m->heads
                      : strcmp(flag, "--kv-heads") == 0    ? &m->kv_heads
                      : strcmp(flag, "--prefill") == 0     ? &m->prefill
                      : strcmp(flag, "--paged-block") == 0 ? &m->paged_block
                      : strcmp(flag, "--kv-splits") == 0   ? &m->kv_splits
                      : strcmp(flag, "--context") == 0     ? &m->context
                                                           : NULL;
    if (!count)
        return 0;
    return cli_parse_uint(flag, value, count) != 0 ? -1 : 1;
}

/* --head-report and --report, the options without a value. */
static bool own_switch(void *user, const char *flag)
{
    mha_job *m = user;
    bool *b = strcmp(flag, "--head-report") == 0     ? &m->head_report
              : strcmp(flag, "--report") == 0        ? &m->report
              : strcmp(flag, "--add-zero-attn") == 0 ? &m->add_zero_attn
                                                     : NULL;
    if (b)
        *b = true;
    return b != NULL;
}

/* The cache's dtype: --kv-dtype, else --dtype's. */
static vkattn_dtype kv_dtype_of(const mha_job *m)
{
    return cli_dtype_named(m->kv_dtype, m->job.dtype);
}

/* CLI_ARGS_OK, or the exit status. */
static int parse_options(mha_job *m, int argc, char **argv)
{
    char help[16384];
    snprintf(help, sizeof help, "%s%s%s%s%s%s%s", help_text, cli_mha_packed_help, cli_mods_help,
             help_rope, cli_rope_help, help_positions, cli_mha_grads_help);
    int code = cli_job_parse(&m->job, argc, argv, help, own_option, m);
    if (code != CLI_ARGS_OK)
        return code;
    if (cli_mha_key_value_options(m) != 0 || cli_mha_packed_check_given(m) != 0 ||
        cli_mha_check_layer_options(m) != 0)
        return 2;
    if (cli_mha_check_weight_source(m) != 0 || cli_mha_grads_check(m) != 0)
        return 2;
    cli_job *j = &m->job;
    const cli_path_use own[3] = {{"--save-weights", m->save_weights, true},
                                 {"--head-report-json", m->report_json, true},
                                 {"--weights-png", m->weights_png, true}};
    for (int k = 0; k < 3; k++)
        j->own_outputs[j->n_own_outputs++] = own[k];
    static const int required[] = {X, WQ, WK, WV, WO};
    int n_required = m->in[WEIGHTS].path ? 1 : 5;
    if (cli_job_check_required(&m->job, required, n_required, !m->heads ? "--heads" : NULL) != 0)
        return 2;
    if (cli_mha_check_weight_dtype(m) != 0 || cli_mha_check_head_options(m) != 0)
        return 2;
    if ((m->paged_block || m->kv_splits || m->kv_dtype) && !m->prefill) {
        cli_error("mha: %s needs --prefill", m->paged_block ? "--paged-block"
                                             : m->kv_splits ? "--kv-splits"
                                                            : "--kv-dtype");
        return 2;
    }
    if (m->kv_dtype && cli_dtype_named(m->kv_dtype, (vkattn_dtype)-1) == (vkattn_dtype)-1) {
        cli_error("mha: --kv-dtype \"%s\": expected f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, "
                  "q5_1 or iq4_nl",
                  m->kv_dtype);
        return 2;
    }
    const cli_input *in = m->in;
    bool not_decode = in[KV].path || in[VALUE].path || in[MASK].path || in[PAD].path ||
                      m->job.weights_path || m->weights_png;
    if (m->prefill && (!m->job.causal || not_decode)) {
        cli_error("mha: --prefill decodes causal self-attention through a KV cache: it needs "
                  "--causal and takes no --kv, --key, --value, --mask, --key-padding, "
                  "--weights-out or --weights-png");
        return 2;
    }
    return CLI_ARGS_OK;
}

/* The inputs, the weights and activations as the device will store them (so
 * that the CPU reference sees the same values), and the layer's sizes from
 * their shapes, each checked against the others. */
/* --bias-k and --bias-v: both or neither, each [width] or torch's [1, 1,
 * width] (any shape of that many values, read as one row per KV head). */
static int check_bias_rows(const cli_input *in, int64_t k_width, int64_t v_width)
{
    if (!in[BIAS_K].path != !in[BIAS_V].path) {
        cli_error("%s needs %s too (torch's bias_k and bias_v come together)",
                  in[BIAS_K].path ? "--bias-k" : "--bias-v",
                  in[BIAS_K].path ? "--bias-v" : "--bias-k");
        return -1;
    }
    const int64_t widths[2] = {k_width, v_width};
    for (int t = 0; t < 2 && in[BIAS_K].path; t++) {
        const cli_input *b = &in[BIAS_K + t];
        int64_t n = 1;
        for (uint32_t d = 0; d < b->array.rank; d++)
            n *= b->array.shape[d];
        if (n != widths[t] || b->array.shape[b->array.rank - 1] != widths[t]) {
            cli_error("%s %s: %lld values in its last dimension of %lld, expected [%lld] or "
                      "[1,1,%lld] (KV heads x %s)",
                      b->flag, b->path, (long long)n, (long long)b->array.shape[b->array.rank - 1],
                      (long long)widths[t], (long long)widths[t], t ? "Dv" : "Dh");
            return -1;
        }
    }
    return 0;
}

static int load_inputs(void *user)
{
    mha_job *m = user;
    static const uint32_t ranks[N_INPUTS] = {[X] = 3,
                                             [KV] = 3,
                                             [WQ] = 2,
                                             [WK] = 2,
                                             [WV] = 2,
                                             [WO] = 2,
                                             [BQ] = 1,
                                             [BK] = 1,
                                             [BV] = 1,
                                             [BO] = 1,
                                             [MASK] = 0,
                                             [PAD] = 2,
                                             [POS] = CLI_POSITIONS_RANK,
                                             [QN] = 1,
                                             [KN] = 1,
                                             [SINKS] = CLI_HEADS_RANK,
                                             [SLOPES] = CLI_HEADS_RANK,
                                             [HMASK] = 0,
                                             [VALUE] = 3,
                                             [KEY] = 3,
                                             [BIAS_K] = 0,
                                             [BIAS_V] = 0,
                                             [WEIGHTS] = 0,
                                             [GRAD] = 3};
    cli_input *in = m->in;
    if (in[WEIGHTS].path && cli_load_weight_file(in[WEIGHTS].path, m->prefix, m->names, &in[WQ],
                                                 &in[BIAS_K], m->weight_labels))
        return -1;
    if (cli_job_load(&m->job, ranks, PAD) != 0 || cli_mha_packed_load(m) != 0)
        return -1;
    /* a NaN or inf weight would turn every output NaN with exit 0 */
    const int weights[] = {WQ, WK, WV, WO, BQ, BK, BV, BO, QN, KN, BIAS_K, BIAS_V};
    for (size_t k = 0; k < sizeof weights / sizeof weights[0]; k++)
        if (in[weights[k]].path &&
            cli_check_finite(&in[weights[k]], "weights and biases must be finite") != 0)
            return -1;
    if (m->job.seq_first) { /* [T, B, E] files: work with [B, T, E] views */
        cli_input_swap_dims(&in[X], 0, 1);
        if (in[KV].path)
            cli_input_swap_dims(&in[KV], 0, 1);
        if (in[VALUE].path)
            cli_input_swap_dims(&in[VALUE], 0, 1);
    }
    /* with --weight-dtype the layer and the reference convert the
     * projection weights themselves (never through --dtype first) */
    for (int k = 0; k < N_INPUTS; k++)
        if (k != PAD && k != MASK && !(m->weight_dtype && k >= WQ && k <= BO) &&
            cli_round_to_dtype(&in[k], m->job.dtype) != 0)
            return -1;
    const int64_t *xs = in[X].array.shape;
    int64_t dm = xs[2], dkv = in[KV].path ? in[KV].array.shape[2] : in[WK].array.shape[1];
    int64_t dvin = in[VALUE].path ? in[VALUE].array.shape[2] : dkv;
    int64_t hq = m->heads, hkv = m->kv_heads ? m->kv_heads : m->heads;
    int64_t wq_rows = in[WQ].array.shape[0];
    if (wq_rows % hq != 0) {
        cli_error("--wq %s: %lld rows do not split into --heads %lld heads", in[WQ].path,
                  (long long)wq_rows, (long long)hq);
        return -1;
    }
    int64_t dh = wq_rows / hq;
    /* V's head dim from --wv's rows (DeepSeek's MLA: 128 beside Q/K's 192) */
    int64_t wv_rows = in[WV].array.shape[0];
    if (wv_rows % hkv != 0) {
        cli_error("--wv %s: %lld rows do not split into %lld KV heads", in[WV].path,
                  (long long)wv_rows, (long long)hkv);
        return -1;
    }
    int64_t dv = wv_rows / hkv;
    if (check_weight_shapes(in, dm, dkv, dvin, hq, hkv, dh, dv) != 0)
        return -1;
    for (int k = KV; k <= VALUE; k += VALUE - KV)
        if (in[k].path && in[k].array.shape[0] != xs[0]) {
            cli_error("%s %s: batch %lld differs from --x's %lld", in[k].flag, in[k].path,
                      (long long)in[k].array.shape[0], (long long)xs[0]);
            return -1;
        }
    if (in[VALUE].path && in[VALUE].array.shape[1] != in[KV].array.shape[1]) {
        cli_error("--value %s: %lld tokens, but --key %s has %lld", in[VALUE].path,
                  (long long)in[VALUE].array.shape[1], in[KV].path,
                  (long long)in[KV].array.shape[1]);
        return -1;
    }
    if (cli_rope_check_head_dim(&m->rope, dh, "rows of --wq / --heads") != 0 ||
        (in[QN].path && (cli_expect_dim(&in[QN], 0, dh, "head_dim (rows of --wq / --heads)") ||
                         cli_expect_dim(&in[KN], 0, dh, "head_dim (rows of --wq / --heads)"))) ||
        (in[POS].path && cli_check_positions_shape(&in[POS], xs[0], xs[1], "--x's tokens")) ||
        cli_mods_check_heads(&in[SINKS], hq, "--heads") != 0 ||
        cli_mods_check_heads(&in[SLOPES], hq, "--heads") != 0 ||
        check_bias_rows(in, hkv * dh, hkv * dv) != 0 || cli_mha_grads_check_input(m) != 0)
        return -1;
    m->desc = (vkattn_mha_desc){
        .embed_dim = (uint32_t)dm,
        .num_heads = m->heads,
        .num_kv_heads = m->kv_heads,
        .head_dim = wq_rows == dm ? 0 : (uint32_t)dh,
        .v_head_dim = dv == dh ? 0 : (uint32_t)dv,
        .kv_dim = (uint32_t)dkv,
        .value_dim = (uint32_t)dvin,
        .bias = in[BQ].path || in[BK].path || in[BV].path || in[BO].path,
        .dtype = m->job.dtype,
        .weight_dtype = cli_dtype_named(m->weight_dtype, m->job.dtype),
        .scale = m->scale,
        .rope = m->rope.rope,
        .qk_norm = in[QN].path != NULL,
        .norm_eps = m->norm_eps,
    };
    cli_mods_desc(&m->mods, &in[SINKS], &in[SLOPES], &m->desc);
    m->desc.add_bias_kv = in[BIAS_K].path != NULL;
    m->desc.add_zero_attn = m->add_zero_attn;
    /* packed: a head mask's rows are the sequences' */
    int64_t rows = m->offsets.sequences ? (int64_t)m->offsets.sequences : xs[0];
    if (cli_check_head_mask(&in[HMASK], hq, rows, "--heads") != 0)
        return -1;
    if (m->keep &&
        cli_prune_head_mask(in[HMASK].path ? &in[HMASK].array : NULL, "--head-mask", in[HMASK].path,
                            m->heads, m->keep, m->kept, &m->mask_pruned, &m->mask_masked) != 0)
        return -1;
    return 0;
}

/* The weight and bias files' data (biases not given: NULL), QK-norm
 * weights, sinks and ALiBi slopes. */
static vkattn_mha_weights host_weights(const mha_job *m)
{
    const cli_input *in = m->in;
    vkattn_mha_weights w = {0};
    const float **slots[8] = {&w.wq, &w.wk, &w.wv, &w.wo, &w.bq, &w.bk, &w.bv, &w.bo};
    for (int k = 0; k < 8; k++)
        *slots[k] = in[WQ + k].path ? in[WQ + k].array.data : NULL;
    w.q_norm = in[QN].path ? in[QN].array.data : NULL;
    w.k_norm = in[KN].path ? in[KN].array.data : NULL;
    w.sinks = in[SINKS].path ? in[SINKS].array.data : NULL;
    w.alibi_slopes = in[SLOPES].path ? in[SLOPES].array.data : NULL;
    w.bias_k = in[BIAS_K].path ? in[BIAS_K].array.data : NULL;
    w.bias_v = in[BIAS_V].path ? in[BIAS_V].array.data : NULL;
    return w;
}

/* Keys per sequence: --kv's tokens, or --x's in self-attention. */
static int64_t kv_len(const mha_job *m)
{
    return m->in[KV].path ? m->in[KV].array.shape[1] : m->in[X].array.shape[1];
}

/* Columns of the attention weights: the keys, then torch's appended rows
 * (--bias-k, --add-zero-attn). */
static int64_t weight_columns(const mha_job *m)
{
    return kv_len(m) + (m->in[BIAS_K].path ? 1 : 0) + (m->add_zero_attn ? 1 : 0);
}

/* The layer with its weights, and the activations and outputs on the device. */
static int setup(mha_job *m, vkattn_mha_forward_args *fa)
{
    cli_job *j = &m->job;
    vkattn_mha_weights w = host_weights(m);
    vkattn_result r = vkattn_mha_create(j->ctx, &m->desc, &m->layer);
    if (r == VKATTN_SUCCESS)
        r = vkattn_mha_set_weights(m->layer, &w);
    if (r == VKATTN_SUCCESS && m->keep)
        r = vkattn_mha_prune_heads(m->layer, m->keep, m->kept);
    if (r != VKATTN_SUCCESS) {
        cli_report_error(j->ctx, r, m->in, N_INPUTS);
        return -1;
    }
    /* the layer that runs: after --prune-heads, the smaller one */
    const vkattn_mha_desc *d = vkattn_mha_config(m->layer);
    if (m->report && cli_layer_report(stdout, d, m->context ? m->context : CLI_REPORT_CONTEXT,
                                      "mha --report", cli_command_terms) != 0)
        return -1;
    const int64_t *xs = m->in[X].array.shape;
    int64_t tq = xs[1];
    cli_job_shape_outputs(j, 3, xs, d->num_heads, tq, weight_columns(m));
    if (m->weights_png) /* the picture needs every head's */
        cli_viz_shape_weights(j, xs[0], d->num_heads, tq, weight_columns(m));
    if (m->job.seq_first) /* Y is written as stored: [T, B, E] */
        cli_swap_dims(j->out.shape, 0, 1);
    /* a pruned layer's head mask: the columns of its heads */
    vkattn_tensor *slots[N_INPUTS] = {[X] = &fa->x,
                                      [KV] = &fa->kv,
                                      [VALUE] = &fa->value,
                                      [MASK] = &fa->mask,
                                      [PAD] = &fa->key_padding,
                                      [POS] = &fa->positions,
                                      [HMASK] = m->keep ? NULL : &fa->head_mask};
    if (cli_job_upload(j, slots, MASK) != 0 ||
        cli_job_create_outputs(j, &fa->y, &fa->weights, NULL) != 0)
        return -1;
    if (m->keep && m->in[HMASK].path) {
        if (!(m->mask_buffer = cli_upload(j->ctx, &m->mask_pruned, VKATTN_DTYPE_F32)))
            return -1;
        fa->head_mask = cli_tensor(m->mask_buffer, &m->mask_pruned, VKATTN_DTYPE_F32);
    }
    if (m->job.seq_first) {
        vkattn_tensor *t[4] = {&fa->x, &fa->kv, &fa->value, &fa->y};
        memcpy(fa->y.shape, xs, sizeof(int64_t) * 3);
        for (int k = 0; k < 4; k++)
            if (t[k]->buffer)
                cli_swapped_strides(t[k]->shape, 3, 0, 1, t[k]->strides);
    }
    if (m->prefill && m->prefill > tq) {
        cli_error("--prefill %u: --x has only %lld tokens per sequence", m->prefill, (long long)tq);
        return -1;
    }
    return 0;
}

/* With --tune (without --prefill: the steps tune in cli_mha_run_steps, with their
 * cache), the kernel choices for these shapes first; the layer's forward pass
 * or its decode steps; the outputs read back. */
static int run(void *user)
{
    mha_job *m = user;
    cli_job *j = &m->job;
    vkattn_mha_forward_args fa = {.causal = j->causal || j->causal_top_left,
                                  .causal_align = cli_mods_align(j),
                                  .bool_mask = cli_job_bool_mask(j),
                                  .sequences = m->offsets.sequences,
                                  .q_offsets = m->offsets.q,
                                  .k_offsets = m->offsets.k};
    cli_mha_grads_forward(&m->grads, &fa);
    if (setup(m, &fa) != 0)
        return -1;
    vkattn_result r = VKATTN_SUCCESS;
    if (j->device.tune && !m->prefill) {
        const int64_t *xs = m->in[X].array.shape;
        int64_t rows = xs[0], tq = xs[1], tk = kv_len(m);
        if (m->offsets.sequences) { /* as many rows as sequences, each the longest */
            rows = m->offsets.sequences;
            cli_offsets_longest(&m->offsets, tq, tk, &tq, &tk);
        }
        r = vkattn_mha_tune(m->layer,
                            &(vkattn_mha_tune_args){(uint32_t)rows, (uint32_t)tq, (uint32_t)tk,
                                                    cli_tune_progress(&j->device)});
        if (r == VKATTN_SUCCESS)
            r = cli_save_tuning(j->ctx, &j->device);
    }
    uint32_t heads = vkattn_mha_config(m->layer)->num_heads;
    if (r == VKATTN_SUCCESS && cli_mha_measures_heads(m) &&
        !(m->importance = malloc(heads * sizeof *m->importance)))
        r = VKATTN_ERROR_OUT_OF_HOST_MEMORY;
    if (r == VKATTN_SUCCESS) /* the head report's last forward is the plain one */
        r = m->prefill ? cli_mha_run_steps(j->ctx, m->layer, &fa, j->dtype, kv_dtype_of(m),
                                           m->prefill, m->paged_block, m->kv_splits, &j->device)
            : cli_mha_measures_heads(m) ? vkattn_mha_head_importance(m->layer, &fa, m->importance)
                                        : vkattn_mha_forward(m->layer, &fa);
    if (r != VKATTN_SUCCESS) {
        cli_report_error(j->ctx, r, m->in, N_INPUTS);
        return -1;
    }
    if (cli_mha_grads_run(m, &fa) != 0)
        return -1;
    if (cli_job_download(j) != 0 ||
        (m->weights_png &&
         cli_viz_draw_job_weights(j, m->weights_png, "vkattn mha: weights of batch row 0", MASK,
                                  PAD, m->desc.window, &m->png) != 0))
        return -1;
    /* the weights as the layer ran, read back while it exists; written last */
    return m->save_weights
               ? cli_saved_weights_read(m->layer, m->prefix, m->keep, m->kept, &m->saved)
               : 0;
}

/* --check: the CPU reference on the same inputs and weights (K and V
 * rounded or quantized as the --kv-dtype cache holds them). */
static int check(void *user)
{
    mha_job *m = user;
    vkattn_ref_mha_args ra = {.causal = m->job.causal || m->job.causal_top_left,
                              .causal_align = cli_mods_align(&m->job),
                              .bool_mask = cli_job_bool_mask(&m->job),
                              .sequences = m->offsets.sequences, /* packed against packed */
                              .q_offsets = m->offsets.q,
                              .k_offsets = m->offsets.k};
    ra.kv_cache_dtype = kv_dtype_of(m);
    cli_mha_grads_reference(&m->grads, &ra);
    vkattn_host_tensor *slots[N_INPUTS] = {
        [X] = &ra.x,         [KV] = &ra.kv,         [MASK] = &ra.mask,      [PAD] = &ra.key_padding,
        [VALUE] = &ra.value, [POS] = &ra.positions, [HMASK] = &ra.head_mask};
    cli_job_host_inputs(&m->job, slots);
    if (cli_job_reference(&m->job, &ra.y, &ra.weights, NULL) != 0)
        return -1;
    /* pruned: the unpruned layer with the removed heads masked, its
     * per-head weights gathered to the kept heads afterwards */
    float *all_weights = NULL;
    int64_t ws[4] = {0};
    if (m->keep) {
        const npy_array *hm = &m->mask_masked;
        ra.head_mask = vkattn_host_tensor_make(hm->data, VKATTN_DTYPE_F32, hm->rank, hm->shape);
        if (ra.weights.data) {
            const cli_outputs *r = &m->job.out;
            ws[0] = r->weights_shape[0];
            ws[1] = m->heads;
            ws[2] = m->in[X].array.shape[1];
            ws[3] = weight_columns(m);
            if (!(all_weights = malloc((size_t)(ws[0] * ws[1] * ws[2] * ws[3]) * 4))) {
                cli_error("CPU reference failed: out of memory");
                return -1;
            }
            ra.weights = vkattn_host_tensor_make(all_weights, VKATTN_DTYPE_F32, 4, ws);
        }
    }
    if (m->job.seq_first) {
        vkattn_host_tensor *t[4] = {&ra.x, &ra.kv, &ra.value, &ra.y};
        memcpy(ra.y.shape, ra.x.shape, sizeof ra.y.shape);
        for (int k = 0; k < 4; k++)
            if (t[k]->data)
                cli_swapped_strides(t[k]->shape, 3, 0, 1, t[k]->strides);
    }
    vkattn_mha_weights w = host_weights(m);
    char err[512];
    if (vkattn_ref_mha(&m->desc, &w, &ra, err, sizeof err) != VKATTN_SUCCESS) {
        cli_error("CPU reference failed: %s", err);
        free(all_weights);
        return -1;
    }
    if (all_weights)
        cli_gather_head_weights(all_weights, ws, m->keep, m->kept, !m->job.per_head,
                                m->job.out.ref_weights);
    free(all_weights);
    int status = cli_job_compare(&m->job);
    return cli_mha_grads_check_reference(m, &w, &ra) != 0 ? 1 : status;
}

/* After the job's outputs: the head report printed, then the files the job
 * does not write itself (--weights-png, --head-report-json,
 * --save-weights), to their temporaries. 0, or 1 after printing. */
static int finish(mha_job *m)
{
    const vkattn_mha_desc *d = vkattn_mha_config(m->layer);
    uint32_t kv_heads = m->kv_heads ? m->kv_heads : m->heads;
    cli_head_report hr = {m->importance, d->num_heads, m->keep, m->heads, m->heads / kv_heads};
    if (m->head_report)
        cli_print_head_report(stdout, &hr);
    const cli_job *j = &m->job;
    if (m->weights_png &&
        cli_viz_save("--weights-png", cli_job_output_path(j, m->weights_png), &m->png) != 0)
        return 1;
    if (m->report_json) {
        char *json = cli_head_report_json(&hr), err[512];
        const npy_chunk chunk = {json, json ? strlen(json) : 0};
        bool ok = json && npy_write_file(cli_job_output_path(j, m->report_json), &chunk, 1, err,
                                         sizeof err) == 0;
        if (!ok)
            cli_error("--head-report-json %s", json ? err : "out of memory");
        free(json);
        if (!ok)
            return 1;
    }
    if (m->save_weights &&
        cli_saved_weights_write(&m->saved, cli_job_output_path(j, m->save_weights)) != 0)
        return 1;
    return 0;
}

int cli_mha(int argc, char **argv)
{
    mha_job m = {.in = {{"--x"},
                        {"--kv"},
                        {"--wq"},
                        {"--wk"},
                        {"--wv"},
                        {"--wo"},
                        {"--bq"},
                        {"--bk"},
                        {"--bv"},
                        {"--bo"},
                        {"--mask", .mask = true},
                        {"--key-padding"},
                        {"--positions"},
                        {"--q-norm"},
                        {"--k-norm"},
                        {"--sinks", .keep_f32 = true},
                        {"--alibi-slopes", .keep_f32 = true},
                        {"--head-mask", .keep_f32 = true},
                        {"--value"},
                        {"--key"},
                        {"--bias-k", .keep_f32 = true},
                        {"--bias-v", .keep_f32 = true},
                        {"--weights", .external = true},
                        {"--seq-offsets", .external = true, .arg = "q_offsets"},
                        {"--kv-offsets", .external = true, .arg = "k_offsets"},
                        {"--grad-out", .arg = "dy"}}};
    m.job = (cli_job){.command = "mha",
                      .inputs = m.in,
                      .bufs = m.bufs,
                      .n_inputs = N_INPUTS,
                      .device = {.tunable = true},
                      .own_switch = own_switch};
    int code = parse_options(&m, argc, argv);
    if (code != CLI_ARGS_OK) {
        free(m.keep);
        cli_mha_grads_free(&m.grads);
        return code;
    }
    int status = cli_job_run(&m.job, load_inputs, run, check, &m);
    if (status == 0)
        status = finish(&m);
    if (status == 0)
        status = cli_mha_grads_write(&m);
    cli_viz_picture_free(&m.png);
    cli_saved_weights_free(&m.saved);
    vkattn_mha_destroy(m.layer); /* before cli_job_end closes its context */
    vkattn_buffer_destroy(m.mask_buffer);
    status = cli_job_end(&m.job, status);
    cli_mha_grads_free(&m.grads); /* after cli_job_end placed its files */
    for (int k = 0; k < 10; k++)
        free(m.weight_labels[k]);
    free(m.keep);
    free(m.importance);
    npy_free(&m.mask_pruned);
    npy_free(&m.mask_masked);
    return status;
}
