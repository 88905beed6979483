/* vkattn attention: scaled dot-product attention on .npy tensors. */
#include "cli_grads.h"
#include "cli_job.h"
#include "cli_kv_inputs.h"
#include "cli_messages.h"
#include "cli_mha_heads.h"
#include "cli_mods.h"
#include "cli_offsets.h"
#include "cli_rope.h"
#include "cli_viz.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char help_text[] =
    "usage: vkattn attention --q Q.npy --k K.npy --v V.npy --out O.npy [options]\n"
    "Attention of float32 .npy tensors on the device: Q [B,Hq,Tq,Dk], K [B,Hkv,Tk,Dk],\n"
    "V [B,Hkv,Tk,Dv] (Hq a multiple of Hkv: MHA, GQA or MQA; Dk and Dv up to 576, Dv\n"
    "may differ from Dk; multiples of 8 up to 256 are fastest); writes O [B,Hq,Tq,Dv]\n"
    "float32. Q may be [Hq,Tq,Dk]: the same queries for every batch row of K and V. Outputs are "
    "all or nothing: checked before any work, placed only\n"
    "when everything succeeded; earlier files at their paths stay otherwise.\n"
    "  --mask M.npy          float32 (additive, -inf hides) or bool/uint8 mask, shaped\n"
    "                        [Tq,Tk], [B*Hq,Tq,Tk] or [B,Hq,Tq,Tk]; any dimension may\n"
    "                        be 1 (broadcast). Boolean True attends (SDPA's attn_mask)\n"
    "  --mask-true-blocks    a boolean --mask's True hides (nn.MultiheadAttention's)\n"
    "  --key-padding P.npy   uint8/bool [B,Tk]: 1 = token, 0 = padding\n"
    "  --causal              key j visible to query i iff j <= i + Tk - Tq (bottom-right)\n"
    "  --scale S             score scale (default 1/sqrt(Dk))\n"
    "  --dtype f32|f16|bf16  storage type on the device (default f32; math is fp32)\n"
    "  --input-bf16          the tensors are uint16 .npy of bf16 bits (torch's\n"
    "                        t.view(torch.int16).numpy().view('<u2')), widened exactly;\n"
    "                        a float file is refused (masks, positions keep their dtypes)\n"
    "  --weights-out W.npy   also write the attention probabilities, float32\n"
    "                        [B,Tq,Tk] averaged over heads, or with --per-head [B,Hq,Tq,Tk]\n"
    "  --per-head            see --weights-out\n"
    "  --head-mask M.npy     float32 [Hq] or [B,Hq]: head h's output of batch row b (and\n"
    "                        its weights) scaled by M[b,h]; 0 removes the head (Hugging\n"
    "                        Face's head_mask); kept in f32 on the device\n"
    "  --weights-png W.png   also draw the attention probabilities of batch row 0, one\n"
    "                        heatmap per head (.png or .svg; keys hidden by the masks,\n"
    "                        --causal or --window drawn grey; see vkattn viz --help)\n"
    "  --lse-out L.npy       also write the log-sum-exp of every row, float32 [B,Hq,Tq]\n"
    "                        (natural log of the softmax denominator, sinks included;\n"
    "                        -inf for a row with nothing visible)\n"
    "  --layout bhtd|bthd    how Q, K, V and O are laid out: [B,H,T,D] (default) or\n"
    "                        [B,T,H,D] (most model code's); read and written through\n"
    "                        strides, never transposed (--weights-out, --lse-out keep\n"
    "                        their shapes)\n"
    "  --check               compare with the CPU reference (double accumulation), print\n"
    "                        the max elementwise error |got-exp|/(1+|exp|); exit 1 above\n"
    "                        2e-4 (f32) / 1.5e-2 (f16)\n";
/* after cli_mods_help */
static const char help_rope[] =
    "Rotary position embeddings, applied to Q and K (not V) before the attention:\n";
/* after cli_rope_help */
static const char help_positions[] =
    "  --positions P.npy     int32 or int64 [B,Tq]: Q's positions (default: aligned with\n"
    "                        K's as --causal is, row i at i + Tk - Tq; with\n"
    "                        --causal-top-left at i)\n"
    "  --k-positions KP.npy  int32 or int64 [B,Tk]: K's positions (default: row j at j)\n";

enum { Q, K, V, MASK, PAD, POS, KPOS, SINKS, SLOPES, HMASK, QOFF, KOFF, GRAD, N_INPUTS };

/* One run: what attention adds to cli_job. */
typedef struct attention_job {
    cli_job job;
    float scale; /* --scale; 0: 1/sqrt(Dk) */
    bool bthd;   /* --layout bthd: Q, K, V, O stored [B, T, H, D] */
    /* --q [Hq, Tq, Dk] (loaded as [1, Hq, Tq, Dk]): one query for every
     * batch row of K and V, passed to the library as rank 3 */
    bool q_broadcast;
    cli_rope_options rope;
    cli_mods mods;
    cli_kv_inputs kv;    /* --k-dtype, --v-dtype, --quantize-kv */
    cli_offsets offsets; /* --q-offsets, --k-offsets: packed sequences */
    cli_grads grads;     /* --dropout, --seed, --grads (with --grad-out) */
    cli_input in[N_INPUTS];
    vkattn_buffer *bufs[N_INPUTS];
    vkattn_buffer *rotated[2]; /* with --rope-theta: Q and K rotated */
    float *host_rotated[2];    /* ... and the CPU reference's */
    const char *weights_png;   /* --weights-png */
    cli_viz_picture png;       /* ... drawn after the run, written last */
} attention_job;

/* B: K's batch (Q's too, unless Q is broadcast). */
static int64_t batch_of(const attention_job *a) { return a->in[K].array.shape[0]; }

/* A rank-4 view of a broadcast Q ([1, Hq, Tq, Dk]) as the rank-3 tensor
 * the library broadcasts. */
#define DROP_BATCH(t)                                                    \
    do {                                                                 \
        (t).rank = 3;                                                    \
        memmove((t).shape, (t).shape + 1, 3 * sizeof(t).shape[0]);       \
        memmove((t).strides, (t).strides + 1, 3 * sizeof(t).strides[0]); \
        (t).shape[3] = (t).strides[3] = 0;                               \
    } while (0)

static int own_option(void *user, const char *flag, const char *value)
{
    attention_job *a = user;
    int rope = cli_rope_option(&a->rope, flag, value);
    if (rope != 0)
        return rope;
    int mod = cli_mods_option(&a->mods, flag, value);
    if (mod != 0)
        return mod;
    int kv = cli_kv_inputs_option(&a->kv, flag, value);
    if (kv != 0)
        return kv;
    int grads = cli_train_option(&a->grads.train, flag, value);
    if (grads != 0)
        return grads;
    if (strcmp(flag, "--scale") == 0)
        return cli_parse_float(flag, value, &a->scale) != 0 ? -1 : 1;
    if (strcmp(flag, "--weights-png") == 0) {
        a->weights_png = value;
        return 1;
    }
    if (strcmp(flag, "--layout") == 0) {
        if (strcmp(value, "bhtd") && strcmp(value, "bthd")) {
            cli_error("attention: --layout \"%s\": expected bhtd ([B,H,T,D]) or bthd ([B,T,H,D])",
                      value);
            return -1;
        }
        a->bthd = strcmp(value, "bthd") == 0;
        return 1;
    }
    return 0;
}

static bool own_switch(void *user, const char *flag)
{
    attention_job *a = user;
    return cli_kv_inputs_switch(&a->kv, flag);
}

/* --k-offsets only with --q-offsets, and with them nothing that has no
 * packed form. 0, or -1 after printing. */
static int check_packed_options(const attention_job *a)
{
    const cli_input *in = a->in;
    const cli_offsets_conflict conflicts[] = {
        {"--mask", in[MASK].path != NULL, cli_offsets_no_mask},
        {"--key-padding", in[PAD].path != NULL, cli_offsets_no_padding},
        {"--weights-out", a->job.weights_path != NULL, cli_offsets_no_weights},
        {"--weights-png", a->weights_png != NULL, cli_offsets_no_weights},
        {"--rope-theta without --positions and --k-positions",
         a->rope.rope.theta != 0 && !(in[POS].path && in[KPOS].path),
         "the default positions would number the packed tokens as one sequence; give each "
         "sequence's own, int32 [1,sum Tq] and [1,sum Tk]"},
    };
    return cli_offsets_check_given("attention", &in[QOFF], &in[KOFF], conflicts,
                                   (int)(sizeof conflicts / sizeof conflicts[0]));
}

/* CLI_ARGS_OK, or the exit status. */
static int parse_options(attention_job *a, int argc, char **argv)
{
    char help[16384];
    snprintf(help, sizeof help, "%s%s%s%s%s%s%s%s", help_text, cli_kv_inputs_help, cli_offsets_help,
             cli_mods_help, help_rope, cli_rope_help, help_positions, cli_grads_help);
    int code = cli_job_parse(&a->job, argc, argv, help, own_option, a);
    if (code != CLI_ARGS_OK)
        return code;
    const cli_input *in = a->in;
    if (a->job.seq_first) {
        cli_error("attention: --seq-first is for mha's [T,B,E] activations; attention takes "
                  "--layout bthd for [B,T,H,D] tensors");
        return 2;
    }
    if (cli_mods_check_given(&a->mods, &a->job, &in[SLOPES]) != 0 ||
        cli_kv_inputs_check(&a->kv, a->job.dtype, a->rope.rope.theta != 0, a->job.input_bf16) != 0)
        return 2;
    const char *positions = in[POS].path ? "--positions" : in[KPOS].path ? "--k-positions" : NULL;
    if (cli_rope_check_given(&a->rope, "attention", positions) != 0)
        return 2;
    /* what the backward (all of these) and the dropout pass (the first
     * three) do not take yet */
    const cli_grads_conflict conflicts[] = {
        {"--q-offsets", in[QOFF].path != NULL},
        {"--head-mask", in[HMASK].path != NULL},
        {"--k-dtype/--v-dtype", a->kv.name[0] || a->kv.name[1]},
        {"--rope-theta", a->grads.train.prefix && a->rope.rope.theta != 0},
        {"--layout bthd", a->grads.train.prefix && a->bthd},
    };
    if (cli_grads_check(&a->grads, in[GRAD].path, conflicts,
                        (int)(sizeof conflicts / sizeof conflicts[0])) != 0)
        return 2;
    static const int required[] = {Q, K, V};
    a->job.own_outputs[a->job.n_own_outputs++] =
        (cli_path_use){"--weights-png", a->weights_png, true};
    static const char *const grad_flags[3] = {"--grads (dq)", "--grads (dk)", "--grads (dv)"};
    for (int i = 0; i < 3; i++)
        a->job.own_outputs[a->job.n_own_outputs++] =
            (cli_path_use){grad_flags[i], a->grads.train.prefix ? a->grads.paths[i] : NULL, true};
    if (cli_job_check_required(&a->job, required, 3, NULL) != 0 ||
        (a->weights_png && cli_viz_check_output("attention", "--weights-png", a->weights_png) != 0))
        return 2;
    return check_packed_options(a) != 0 ? 2 : CLI_ARGS_OK;
}

/* --rope-dims against the head dim, the positions files' shapes, and
 * bottom-right aligned Q positions that would fall below 0. */
static int check_rope_inputs(const attention_job *a)
{
    const cli_input *in = a->in;
    const int64_t *qs = in[Q].array.shape, *ks = in[K].array.shape;
    if (a->rope.rope.theta == 0)
        return 0;
    if (cli_rope_check_head_dim(&a->rope, qs[3], "the last dimension of --q") != 0 ||
        (in[POS].path && cli_check_positions_shape(&in[POS], batch_of(a), qs[2], "--q's tokens")) ||
        (in[KPOS].path && cli_check_positions_shape(&in[KPOS], ks[0], ks[2], "--k's tokens")))
        return -1;
    if (!in[POS].path && qs[2] > ks[2] && !a->job.causal_top_left) {
        cli_error("--rope-theta: --q has %lld tokens and --k %lld, so Q's default positions "
                  "(row i at i + Tk - Tq) would start below 0: give them with --positions",
                  (long long)qs[2], (long long)ks[2]);
        return -1;
    }
    return 0;
}

/* The inputs as the device will store them, so that the CPU reference sees
 * the same values. */
static int load_inputs(void *user)
{
    attention_job *a = user;
    static const uint32_t ranks[N_INPUTS] = {
        0, 4, 4, 0, 2, CLI_POSITIONS_RANK, CLI_POSITIONS_RANK, CLI_HEADS_RANK, CLI_HEADS_RANK,
        0, 0, 0, 4};
    cli_input *kv[2] = {&a->in[K], &a->in[V]};
    cli_kv_inputs_prepare(&a->kv, kv);
    if (cli_job_load(&a->job, ranks, PAD) != 0 || cli_kv_inputs_load(&a->kv, kv) != 0 ||
        cli_offsets_load(&a->in[QOFF], &a->in[KOFF], &a->offsets) != 0)
        return -1;
    if (a->offsets.sequences &&
        (cli_offsets_check_packed(&a->in[Q], a->bthd ? "[1,sum Tq,Hq,Dk]" : "[1,Hq,sum Tq,Dk]") ||
         cli_offsets_check_packed(&a->in[K], a->bthd ? "[1,sum Tk,Hkv,Dk]" : "[1,Hkv,sum Tk,Dk]")))
        return -1;
    npy_array *q = &a->in[Q].array;
    if (q->rank != 3 && q->rank != 4) {
        cli_error("--q %s: %u dimensions; Q is [B,Hq,Tq,Dk], or [Hq,Tq,Dk] for the same "
                  "queries in every batch row%s",
                  a->in[Q].path, q->rank,
                  a->bthd ? " (--layout bthd: [B,Tq,Hq,Dk] or [Tq,Hq,Dk])" : "");
        return -1;
    }
    if (q->rank == 3) {
        if (a->grads.train.prefix || a->grads.train.dropout != 0.0f) {
            cli_error("--q %s: a Q of 3 dimensions (broadcast over the batch) does not take "
                      "%s yet: give Q [B,Hq,Tq,Dk]",
                      a->in[Q].path, a->grads.train.prefix ? "--grads" : "--dropout");
            return -1;
        }
        if (a->rope.rope.theta != 0) {
            cli_error("--q %s: a Q of 3 dimensions (broadcast over the batch) does not take "
                      "--rope-theta: give Q [B,Hq,Tq,Dk]",
                      a->in[Q].path);
            return -1;
        }
        a->q_broadcast = true;
        memmove(q->shape + 1, q->shape, 3 * sizeof q->shape[0]);
        q->shape[0] = 1;
        q->rank = 4;
    }
    for (int k = Q; a->bthd && k <= V; k++)
        cli_input_swap_dims(&a->in[k], 1, 2);
    if (check_rope_inputs(a) != 0)
        return -1;
    if (a->in[GRAD].path) { /* O's shape [B,Hq,Tq,Dv] */
        const int64_t os[4] = {batch_of(a), q->shape[1], q->shape[2], a->in[V].array.shape[3]};
        static const char *const what[4] = {"K's batch", "Q's heads", "Q's tokens", "V's head dim"};
        for (uint32_t d = 0; d < 4; d++)
            if (cli_expect_dim(&a->in[GRAD], d, os[d], what[d]) != 0)
                return -1;
    }
    int64_t hq = a->in[Q].array.shape[1];
    /* packed: a head mask's rows are the sequences' */
    int64_t rows = a->offsets.sequences ? (int64_t)a->offsets.sequences : batch_of(a);
    if (cli_mods_check_heads(&a->in[SINKS], hq, "dimension 1 of --q") != 0 ||
        cli_mods_check_heads(&a->in[SLOPES], hq, "dimension 1 of --q") != 0 ||
        cli_check_head_mask(&a->in[HMASK], hq, rows, "dimension 1 of --q"))
        return -1;
    /* the mask stays f32 on the device (cli_job_upload): not rounded; K and
     * V are in their own dtypes (cli_kv_inputs_load) */
    for (int k = 0; k < N_INPUTS; k++)
        if (k != PAD && k != MASK && k != K && k != V &&
            cli_round_to_dtype(&a->in[k], a->job.dtype) != 0)
            return -1;
    return 0;
}

/* With --rope-theta: Q and K rotated out of place into buffers of their own
 * (the inputs stay as given), and args pointed at them. Q's positions
 * default to the causal alignment: row i at i + Tk - Tq (bottom-right) or
 * at i (top-left). */
static vkattn_result rotate(attention_job *a, vkattn_attention_args *args,
                            const vkattn_tensor *positions)
{
    if (a->rope.rope.theta == 0)
        return VKATTN_SUCCESS;
    vkattn_context *ctx = a->job.ctx;
    vkattn_tensor *x[2] = {&args->q, &args->k};
    uint32_t offset = a->job.causal_top_left ? 0 : (uint32_t)(args->k.shape[2] - args->q.shape[2]);
    for (int k = 0; k < 2; k++) {
        const npy_array *in = &a->in[k == 0 ? Q : K].array;
        vkattn_buffer_desc d = {.size = (uint64_t)cli_numel(in) * vkattn_dtype_size(a->job.dtype)};
        vkattn_result r = vkattn_buffer_create(ctx, &d, &a->rotated[k]);
        vkattn_tensor out = cli_tensor(a->rotated[k], in, a->job.dtype);
        vkattn_rope_args ra = {.x = *x[k],
                               .out = out,
                               .rope = a->rope.rope,
                               .positions = positions[k],
                               .position_offset = k == 0 && !positions[0].buffer ? offset : 0};
        if (r == VKATTN_SUCCESS)
            r = vkattn_rope(ctx, &ra);
        if (r != VKATTN_SUCCESS)
            return r;
        *x[k] = out;
    }
    return VKATTN_SUCCESS;
}

/* Inputs and outputs on the device; with --tune, the kernel choices for these
 * shapes first; the attention; its outputs read back. */
static int run(void *user)
{
    attention_job *a = user;
    cli_job *j = &a->job;
    const int64_t *qs = a->in[Q].array.shape, *ks = a->in[K].array.shape;
    /* out [B, Hq, Tq, Dv]: v's head dim may differ from q's and k's */
    const int64_t os[4] = {batch_of(a), qs[1], qs[2], a->in[V].array.shape[3]};
    cli_job_shape_outputs(j, 4, os, qs[1], qs[2], ks[2]);
    if (a->weights_png) /* the picture needs every head's */
        cli_viz_shape_weights(j, batch_of(a), qs[1], qs[2], ks[2]);
    if (a->bthd) /* O is written as stored: [B, Tq, Hq, Dv] */
        cli_swap_dims(j->out.shape, 1, 2);
    vkattn_attention_args args = {.scale = a->scale,
                                  .bool_mask = cli_job_bool_mask(j),
                                  .sequences = a->offsets.sequences,
                                  .q_offsets = a->offsets.q,
                                  .k_offsets = a->offsets.k};
    cli_mods_attention(&a->mods, j, &args);
    cli_grads_attention(&a->grads, &args);
    vkattn_tensor positions[2] = {{0}}, dout = {0};
    vkattn_tensor *slots[N_INPUTS] = {
        &args.q,       NULL,          NULL,        &args.mask,         &args.key_padding,
        &positions[0], &positions[1], &args.sinks, &args.alibi_slopes, &args.head_mask,
        NULL,          NULL,          &dout};
    if (cli_job_upload(j, slots, MASK) != 0 ||
        !(a->bufs[K] = cli_kv_inputs_upload(&a->kv, 0, j->ctx, &a->in[K].array, &args.k)) ||
        !(a->bufs[V] = cli_kv_inputs_upload(&a->kv, 1, j->ctx, &a->in[V].array, &args.v)) ||
        cli_job_create_outputs(j, &args.out, &args.weights, &args.lse) != 0)
        return -1;
    vkattn_result lse_r = cli_grads_lse(&a->grads, j->ctx, &args);
    if (lse_r != VKATTN_SUCCESS) {
        cli_report_error(j->ctx, lse_r, a->in, N_INPUTS);
        return -1;
    }
    if (a->bthd) {
        vkattn_tensor *t[4] = {&args.q, &args.k, &args.v, &args.out};
        memcpy(args.out.shape, os, sizeof args.out.shape);
        for (int k = 0; k < 4; k++)
            cli_swapped_strides(t[k]->shape, 4, 1, 2, t[k]->strides);
    }
    if (a->q_broadcast)
        DROP_BATCH(args.q);
    vkattn_result r = rotate(a, &args, positions);
    /* packed: tuned for as many rows as sequences, each the longest */
    int64_t rows = batch_of(a), tq = qs[2], tk = ks[2];
    if (a->offsets.sequences) {
        rows = a->offsets.sequences;
        cli_offsets_longest(&a->offsets, qs[2], ks[2], &tq, &tk);
    }
    if (j->device.tune && r == VKATTN_SUCCESS)
        r = vkattn_attention_tune(
            j->ctx, &(vkattn_attention_tune_args){
                        (uint32_t)rows, (uint32_t)qs[1], (uint32_t)ks[1], (uint32_t)tq,
                        (uint32_t)tk, (uint32_t)qs[3], args.causal, j->dtype, j->dtype,
                        cli_tune_progress(&j->device), NULL, (uint32_t)args.v.shape[3]});
    if (j->device.tune && r == VKATTN_SUCCESS)
        r = cli_save_tuning(j->ctx, &j->device);
    if (r == VKATTN_SUCCESS)
        r = vkattn_attention(j->ctx, &args);
    if (r == VKATTN_SUCCESS)
        r = cli_grads_run(&a->grads, j->ctx, &args, dout, j->dtype);
    if (r != VKATTN_SUCCESS) {
        cli_report_error(j->ctx, r, a->in, N_INPUTS);
        return -1;
    }
    if (cli_job_download(j) != 0)
        return -1;
    return a->weights_png ? cli_viz_draw_job_weights(j, a->weights_png,
                                                     "vkattn attention: weights of batch row 0",
                                                     MASK, PAD, a->mods.window, &a->png)
                          : 0;
}

/* rotate() on the host with vkattn_ref_rope, for the reference. */
static vkattn_result rotate_on_host(attention_job *a, vkattn_ref_attention_args *ra,
                                    const vkattn_host_tensor *positions, char *err, size_t size)
{
    if (a->rope.rope.theta == 0)
        return VKATTN_SUCCESS;
    vkattn_host_tensor *x[2] = {&ra->q, &ra->k};
    uint32_t offset = a->job.causal_top_left ? 0 : (uint32_t)(ra->k.shape[2] - ra->q.shape[2]);
    for (int k = 0; k < 2; k++) {
        const npy_array *in = &a->in[k == 0 ? Q : K].array;
        if (!(a->host_rotated[k] = malloc((size_t)cli_numel(in) * 4))) {
            snprintf(err, size, "out of memory");
            return VKATTN_ERROR_OUT_OF_HOST_MEMORY;
        }
        vkattn_host_tensor out =
            vkattn_host_tensor_make(a->host_rotated[k], VKATTN_DTYPE_F32, in->rank, in->shape);
        vkattn_ref_rope_args rr = {.x = *x[k],
                                   .out = out,
                                   .rope = a->rope.rope,
                                   .positions = positions[k],
                                   .position_offset = k == 0 && !positions[0].data ? offset : 0};
        vkattn_result r = vkattn_ref_rope(&rr, err, size);
        if (r != VKATTN_SUCCESS)
            return r;
        *x[k] = out;
    }
    return VKATTN_SUCCESS;
}

/* --check: the CPU reference on the same inputs. */
static int check(void *user)
{
    attention_job *a = user;
    /* packed: the same offsets, so that packed is compared with packed */
    vkattn_ref_attention_args ra = {.scale = a->scale,
                                    .bool_mask = cli_job_bool_mask(&a->job),
                                    .sequences = a->offsets.sequences,
                                    .q_offsets = a->offsets.q,
                                    .k_offsets = a->offsets.k};
    cli_mods_reference(&a->mods, &a->job, &ra);
    cli_grads_reference(&a->grads, &ra);
    vkattn_host_tensor positions[2] = {{0}}, dout = {0};
    vkattn_host_tensor *slots[N_INPUTS] = {
        &ra.q,         &ra.k,         &ra.v,     &ra.mask,         &ra.key_padding,
        &positions[0], &positions[1], &ra.sinks, &ra.alibi_slopes, &ra.head_mask,
        NULL,          NULL,          &dout};
    cli_job_host_inputs(&a->job, slots);
    ra.k = cli_kv_inputs_host(&a->kv, 0, &a->in[K].array);
    ra.v = cli_kv_inputs_host(&a->kv, 1, &a->in[V].array);
    if (cli_job_reference(&a->job, &ra.out, &ra.weights, &ra.lse) != 0)
        return -1;
    if (a->bthd) {
        vkattn_host_tensor *t[4] = {&ra.q, &ra.k, &ra.v, &ra.out};
        memcpy(ra.out.shape, ra.q.shape, sizeof ra.out.shape);
        ra.out.shape[0] = batch_of(a);
        for (int k = 0; k < 4; k++)
            cli_swapped_strides(t[k]->shape, 4, 1, 2, t[k]->strides);
    }
    if (a->q_broadcast)
        DROP_BATCH(ra.q);
    char err[512];
    if (rotate_on_host(a, &ra, positions, err, sizeof err) != VKATTN_SUCCESS ||
        vkattn_ref_attention(&ra, err, sizeof err) != VKATTN_SUCCESS) {
        cli_error("CPU reference failed: %s", err);
        return -1;
    }
    int status = cli_job_compare(&a->job);
    return cli_grads_check_reference(&a->grads, &ra, dout, a->job.dtype) != 0 ? 1 : status;
}

int cli_attention(int argc, char **argv)
{
    attention_job a = {.in = {{"--q"},
                              {"--k"},
                              {"--v"},
                              {"--mask", .mask = true},
                              {"--key-padding"},
                              {"--positions"},
                              {"--k-positions"},
                              {"--sinks", .keep_f32 = true},
                              {"--alibi-slopes", .keep_f32 = true},
                              {"--head-mask", .keep_f32 = true},
                              {"--q-offsets", .external = true},
                              {"--k-offsets", .external = true},
                              {"--grad-out"}}};
    a.job = (cli_job){.command = "attention",
                      .inputs = a.in,
                      .bufs = a.bufs,
                      .n_inputs = N_INPUTS,
                      .device = {.tunable = true},
                      .own_switch = own_switch};
    int code = parse_options(&a, argc, argv);
    if (code != CLI_ARGS_OK)
        return code;
    int status = cli_job_run(&a.job, load_inputs, run, check, &a);
    if (status == 0 && a.grads.train.prefix) {
        const char *staged[3];
        for (int i = 0; i < 3; i++)
            staged[i] = cli_job_output_path(&a.job, a.grads.paths[i]);
        status = cli_grads_write(&a.grads, staged);
    }
    if (status == 0 && a.weights_png)
        status =
            cli_viz_save("--weights-png", cli_job_output_path(&a.job, a.weights_png), &a.png) != 0;
    cli_viz_picture_free(&a.png);
    cli_grads_free(&a.grads); /* before cli_job_end closes the context */
    for (int k = 0; k < 2; k++) {
        vkattn_buffer_destroy(a.rotated[k]);
        free(a.host_rotated[k]);
    }
    return cli_job_end(&a.job, status);
}
