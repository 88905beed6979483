/* vkattn mha's training options (cli_mha_grads.h). */
#include "cli_mha_grads.h"

#include "cli_mha_job.h"
#include "cli_messages.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char cli_mha_grads_help[] =
    "Training:\n"
    "  --dropout P           drop each attention probability with probability P in [0,1)\n"
    "                        and scale the kept ones by 1/(1-P) (--weights-out stays the\n"
    "                        probabilities before dropout); the mask is Philox4x32-10 of\n"
    "                        (seed, batch, head, query, key), the same on every device\n"
    "  --seed S              the dropout's seed, an integer in [0, 2^64) (default 0)\n"
    "  --grad-out DY.npy     float32 [B,Tq,Dm] (Y's shape): the loss's gradient of Y;\n"
    "                        with --grads\n"
    "  --grads PREFIX        run the layer's backward too and write its gradients, float32,\n"
    "                        each with its tensor's shape: PREFIX.dx.npy, PREFIX.dkv.npy\n"
    "                        (with --kv or --key), PREFIX.dvalue.npy (with --value),\n"
    "                        PREFIX.q_proj.weight.npy, .k_proj.weight, .v_proj.weight,\n"
    "                        .o_proj.weight, with biases .q_proj.bias .. .o_proj.bias,\n"
    "                        with --q-norm .q_norm.weight and .k_norm.weight, with --sinks\n"
    "                        .sinks (Hugging Face's names, as --save-weights writes);\n"
    "                        --check compares them with the CPU reference's backward\n"
    "                        (2e-4 f32, 2e-2 f16/bf16). Not with --prefill, --seq-first,\n"
    "                        --prune-heads or --head-report; the layer's backward takes\n"
    "                        no --seq-offsets, --head-mask, --weight-dtype q8_0, --bias-k\n"
    "                        or --add-zero-attn (refused after the forward)\n";

/* The files' names after PREFIX., and the options they are in messages. */
static const char *const names[CLI_MHA_GRADS] = {"dx",
                                                 "dkv",
                                                 "dvalue",
                                                 "q_proj.weight",
                                                 "k_proj.weight",
                                                 "v_proj.weight",
                                                 "o_proj.weight",
                                                 "q_proj.bias",
                                                 "k_proj.bias",
                                                 "v_proj.bias",
                                                 "o_proj.bias",
                                                 "q_norm.weight",
                                                 "k_norm.weight",
                                                 "sinks"};
static const char *const options[CLI_MHA_GRADS] = {"--grads (dx)",
                                                   "--grads (dkv)",
                                                   "--grads (dvalue)",
                                                   "--grads (q_proj.weight)",
                                                   "--grads (k_proj.weight)",
                                                   "--grads (v_proj.weight)",
                                                   "--grads (o_proj.weight)",
                                                   "--grads (q_proj.bias)",
                                                   "--grads (k_proj.bias)",
                                                   "--grads (v_proj.bias)",
                                                   "--grads (o_proj.bias)",
                                                   "--grads (q_norm.weight)",
                                                   "--grads (k_norm.weight)",
                                                   "--grads (sinks)"};

int cli_mha_grads_check(mha_job *m)
{
    cli_mha_grads *g = &m->grads;
    const cli_input *in = m->in;
    const bool grads = g->train.prefix != NULL;
    /* what the CLI runs around the forward (the layer refuses the rest itself) */
    const cli_grads_conflict conflicts[] = {
        {"--prefill", m->prefill != 0,
         grads ? "the decode steps have no backward (without --prefill the forward is the same)"
               : "the decode steps have no dropout (without --prefill the forward is the same)"},
        {"--seq-first", grads && m->job.seq_first, NULL},
        {"--prune-heads", grads && m->prune_text,
         "the gradients would be the smaller layer's (prune with --save-weights, then train "
         "the saved layer)"},
        {m->head_report ? "--head-report" : "--head-report-json",
         grads && cli_mha_measures_heads(m),
         "it runs a forward per head; measure the heads in a run of its own"},
    };
    if (cli_train_check(&g->train, "mha", in[GRAD].path,
                        "--grad-out DY.npy (the loss's gradient of Y)", conflicts,
                        (int)(sizeof conflicts / sizeof conflicts[0])) != 0)
        return -1;
    if (!grads)
        return 0;
    /* the biases: given as files, or perhaps in --weights */
    bool bias = in[WEIGHTS].path != NULL;
    for (int k = BQ; k <= BO; k++)
        bias = bias || in[k].path;
    for (int i = 0; i < CLI_MHA_GRADS; i++) {
        bool want = i == CLI_MHA_DKV                       ? in[KV].path != NULL
                    : i == CLI_MHA_DVALUE                  ? in[VALUE].path != NULL
                    : i >= CLI_MHA_DBQ && i <= CLI_MHA_DBO ? bias
                    : i == CLI_MHA_DQN || i == CLI_MHA_DKN ? in[QN].path != NULL
                    : i == CLI_MHA_DSINKS                  ? in[SINKS].path != NULL
                                                           : true;
        if (!want)
            continue;
        size_t size = strlen(g->train.prefix) + strlen(names[i]) + sizeof ".npy" + 1;
        if (!(g->paths[i] = malloc(size))) {
            cli_error("mha: --grads: out of memory");
            return -1;
        }
        snprintf(g->paths[i], size, "%s.%s.npy", g->train.prefix, names[i]);
        m->job.own_outputs[m->job.n_own_outputs++] = (cli_path_use){options[i], g->paths[i], true};
    }
    return 0;
}

int cli_mha_grads_check_input(const mha_job *m)
{
    const cli_input *in = m->in;
    if (!in[GRAD].path)
        return 0;
    static const char *const what[3] = {"--x's batch", "--x's tokens",
                                        "embed_dim (--x's last dimension)"};
    for (uint32_t d = 0; d < 3; d++)
        if (cli_expect_dim(&in[GRAD], d, in[X].array.shape[d], what[d]) != 0)
            return -1;
    return 0;
}

void cli_mha_grads_forward(const cli_mha_grads *g, vkattn_mha_forward_args *a)
{
    a->dropout_p = g->train.dropout;
    a->dropout_seed = g->train.seed;
}

void cli_mha_grads_reference(const cli_mha_grads *g, vkattn_ref_mha_args *r)
{
    r->dropout_p = g->train.dropout;
    r->dropout_seed = g->train.seed;
}

/* Each file's shape: the input's or weight's it is the gradient of. Those
 * the layer computes (a path given, and for the biases a layer that has
 * them) get rank > 0. */
static void shape_grads(mha_job *m)
{
    cli_mha_grads *g = &m->grads;
    const cli_input *in = m->in;
    const vkattn_mha_desc *d = vkattn_mha_config(m->layer);
    const int like[CLI_MHA_GRADS] = {X, KV, VALUE, WQ, WK, WV, WO, WQ, WK, WV, WO, QN, KN, -1};
    for (int i = 0; i < CLI_MHA_GRADS; i++) {
        if (!g->paths[i] || (i >= CLI_MHA_DBQ && i <= CLI_MHA_DBO && !d->bias))
            continue;
        if (i == CLI_MHA_DSINKS) {
            g->ranks[i] = 1;
            g->shapes[i][0] = d->num_heads;
            continue;
        }
        const npy_array *a = &in[like[i]].array;
        g->ranks[i] = i >= CLI_MHA_DBQ ? 1 : a->rank; /* a bias: the weight's rows */
        for (uint32_t k = 0; k < g->ranks[i]; k++)
            g->shapes[i][k] = a->shape[k];
    }
}

static int64_t count(const cli_mha_grads *g, int i)
{
    int64_t n = 1;
    for (uint32_t k = 0; k < g->ranks[i]; k++)
        n *= g->shapes[i][k];
    return n;
}

int cli_mha_grads_run(mha_job *m, const vkattn_mha_forward_args *fa)
{
    cli_mha_grads *g = &m->grads;
    if (!g->train.prefix)
        return 0;
    cli_job *j = &m->job;
    const cli_input *in = m->in;
    /* DY in the layer's dtype (rounded to it when loaded) */
    if (!(j->bufs[GRAD] = cli_upload(j->ctx, &in[GRAD].array, j->dtype)))
        return -1;
    vkattn_mha_backward_args b = {.forward = *fa,
                                  .dy = cli_tensor(j->bufs[GRAD], &in[GRAD].array, j->dtype)};
    b.forward.weights = (vkattn_tensor){0}; /* --weights-out is the forward's alone */
    vkattn_tensor *slots[CLI_MHA_GRADS] = {
        &b.dx,       &b.dkv,          &b.dvalue,       &b.grads.wq,   &b.grads.wk,
        &b.grads.wv, &b.grads.wo,     &b.grads.bq,     &b.grads.bk,   &b.grads.bv,
        &b.grads.bo, &b.grads.q_norm, &b.grads.k_norm, &b.grads.sinks};
    shape_grads(m);
    vkattn_result r = VKATTN_SUCCESS;
    for (int i = 0; i < CLI_MHA_GRADS && r == VKATTN_SUCCESS; i++) {
        if (!g->ranks[i])
            continue;
        vkattn_buffer_desc d = {.size = (uint64_t)count(g, i) * 4};
        r = vkattn_buffer_create(j->ctx, &d, &g->buffers[i]);
        if (r == VKATTN_SUCCESS)
            *slots[i] =
                vkattn_tensor_make(g->buffers[i], 0, VKATTN_DTYPE_F32, g->ranks[i], g->shapes[i]);
    }
    if (r == VKATTN_SUCCESS)
        r = vkattn_mha_backward(m->layer, &b);
    if (r != VKATTN_SUCCESS)
        cli_report_error(j->ctx, r, m->in, N_INPUTS);
    int status = r == VKATTN_SUCCESS ? 0 : -1;
    for (int i = 0; i < CLI_MHA_GRADS; i++) {
        if (status == 0 && g->buffers[i] &&
            !(g->got[i] = cli_download_f32(j->ctx, g->buffers[i], count(g, i), VKATTN_DTYPE_F32)))
            status = -1;
        vkattn_buffer_destroy(g->buffers[i]); /* read back: not needed any more */
        g->buffers[i] = NULL;
    }
    return status;
}

int cli_mha_grads_check_reference(mha_job *m, const vkattn_mha_weights *w,
                                  const vkattn_ref_mha_args *ref)
{
    cli_mha_grads *g = &m->grads;
    if (!g->train.prefix)
        return 0;
    const npy_array *dy = &m->in[GRAD].array;
    vkattn_ref_mha_backward_args b = {
        .forward = *ref, .dy = vkattn_host_tensor_make(dy->data, VKATTN_DTYPE_F32, 3, dy->shape)};
    /* the forward's weights are its own; a KV cache's rounding is the
     * decode steps' (the layer's 16-bit K and V are within the tolerance) */
    b.forward.weights = (vkattn_host_tensor){0};
    b.forward.kv_cache_dtype = VKATTN_DTYPE_F32;
    vkattn_host_tensor *slots[CLI_MHA_GRADS] = {
        &b.dx,       &b.dkv,          &b.dvalue,       &b.grads.wq,   &b.grads.wk,
        &b.grads.wv, &b.grads.wo,     &b.grads.bq,     &b.grads.bk,   &b.grads.bv,
        &b.grads.bo, &b.grads.q_norm, &b.grads.k_norm, &b.grads.sinks};
    for (int i = 0; i < CLI_MHA_GRADS; i++) {
        if (!g->got[i])
            continue;
        if (!(g->ref[i] = malloc((size_t)count(g, i) * sizeof(float)))) {
            cli_error("--check: out of memory for the reference's gradients");
            return 1;
        }
        *slots[i] = vkattn_host_tensor_make(g->ref[i], VKATTN_DTYPE_F32, g->ranks[i], g->shapes[i]);
    }
    char err[512];
    if (vkattn_ref_mha_backward(&m->desc, w, &b, err, sizeof err) != VKATTN_SUCCESS) {
        char out[1024];
        cli_translate(err, m->in, N_INPUTS, cli_command_terms, out, sizeof out);
        cli_error("CPU reference backward failed: %s", out);
        return 1;
    }
    const double tol = m->job.dtype == VKATTN_DTYPE_F32 ? 2e-4 : 2e-2;
    int status = 0;
    for (int i = 0; i < CLI_MHA_GRADS; i++) {
        if (!g->got[i])
            continue;
        bool nonfinite = false;
        double e = cli_max_rel_error(g->got[i], g->ref[i], count(g, i), &nonfinite);
        printf("%s: max error %.3g (tolerance %.3g)%s\n", names[i], e, tol,
               nonfinite ? ", NOT FINITE" : "");
        if (nonfinite || !(e <= tol))
            status = 1;
    }
    if (status)
        cli_error("--check: the gradients differ from the CPU reference's beyond the tolerance");
    return status;
}

int cli_mha_grads_write(const mha_job *m)
{
    const cli_mha_grads *g = &m->grads;
    cli_output_file files[CLI_MHA_GRADS];
    for (int i = 0; i < CLI_MHA_GRADS; i++)
        files[i] = (cli_output_file){cli_job_output_path(&m->job, g->paths[i]), g->ranks[i],
                                     g->shapes[i], g->got[i]};
    return cli_write_outputs(files, CLI_MHA_GRADS);
}

void cli_mha_grads_free(cli_mha_grads *g)
{
    for (int i = 0; i < CLI_MHA_GRADS; i++) {
        free(g->got[i]);
        free(g->ref[i]);
        free(g->paths[i]);
    }
}
