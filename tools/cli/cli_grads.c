/* vkattn attention's training options (cli_grads.h). */
#include "cli_grads.h"

#include "cli.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char cli_grads_help[] =
    "Training:\n"
    "  --dropout P           drop each attention probability with probability P in [0,1)\n"
    "                        and scale the kept ones by 1/(1-P) (the LSE and --weights-out\n"
    "                        stay those before dropout); the mask is Philox4x32-10 of\n"
    "                        (seed, batch, head, query, key), the same on every device\n"
    "  --seed S              the dropout's seed, an integer in [0, 2^64) (default 0)\n"
    "  --grad-out DO.npy     float32 [B,Hq,Tq,Dv]: the loss's gradient of O; with --grads\n"
    "  --grads PREFIX        run the backward too and write PREFIX.dq.npy, PREFIX.dk.npy,\n"
    "                        PREFIX.dv.npy (float32, Q's, K's and V's shapes); --check\n"
    "                        compares them with the CPU reference's backward (2e-4 f32,\n"
    "                        2e-2 f16/bf16)\n";

int cli_train_option(cli_train *t, const char *flag, const char *value)
{
    if (strcmp(flag, "--dropout") == 0) {
        if (cli_parse_float(flag, value, &t->dropout) != 0)
            return -1;
        if (!(t->dropout >= 0.0f && t->dropout < 1.0f)) {
            cli_error("--dropout %s: the probability must be in [0, 1)", value);
            return -1;
        }
        return 1;
    }
    if (strcmp(flag, "--seed") == 0) {
        char *end = NULL;
        errno = 0;
        unsigned long long s = strtoull(value, &end, 0);
        if (!*value || *end || errno || value[0] == '-') {
            cli_error("--seed \"%s\": expected an integer in [0, 2^64)", value);
            return -1;
        }
        t->seed = s;
        t->seed_given = true;
        return 1;
    }
    if (strcmp(flag, "--grads") == 0) {
        t->prefix = value;
        return 1;
    }
    return 0;
}

int cli_train_check(const cli_train *t, const char *command, const char *grad_out,
                    const char *grad_out_text, const cli_grads_conflict *conflicts, int n)
{
    if (t->seed_given && t->dropout == 0.0f) {
        cli_error("%s: --seed is the dropout's: give --dropout P too", command);
        return -1;
    }
    if (!t->prefix != !grad_out) {
        cli_error("%s: %s needs %s", command, t->prefix ? "--grads" : "--grad-out",
                  t->prefix ? grad_out_text : "--grads PREFIX (where the gradients go)");
        return -1;
    }
    if (!t->prefix && t->dropout == 0.0f)
        return 0;
    for (int i = 0; i < n; i++)
        if (conflicts[i].given) {
            cli_error("%s: %s with %s: %s", command, conflicts[i].flag,
                      t->prefix ? "--grads" : "--dropout",
                      conflicts[i].why ? conflicts[i].why
                      : t->prefix      ? "the backward does not take it yet"
                                       : "the dropout pass does not take it yet");
            return -1;
        }
    return 0;
}

int cli_grads_check(cli_grads *g, const char *grad_out, const cli_grads_conflict *conflicts, int n)
{
    if (cli_train_check(&g->train, "attention", grad_out,
                        "--grad-out DO.npy (the loss's gradient of O)", conflicts, n) != 0)
        return -1;
    if (!g->train.prefix)
        return 0;
    static const char *const names[3] = {"dq", "dk", "dv"};
    for (int i = 0; i < 3; i++)
        if (snprintf(g->paths[i], sizeof g->paths[i], "%s.%s.npy", g->train.prefix, names[i]) >=
            (int)sizeof g->paths[i]) {
            cli_error("--grads \"%s\": the prefix is too long", g->train.prefix);
            return -1;
        }
    return 0;
}

void cli_grads_attention(const cli_grads *g, vkattn_attention_args *a)
{
    a->dropout_p = g->train.dropout;
    a->dropout_seed = g->train.seed;
}

void cli_grads_reference(const cli_grads *g, vkattn_ref_attention_args *r)
{
    r->dropout_p = g->train.dropout;
    r->dropout_seed = g->train.seed;
}

vkattn_result cli_grads_lse(cli_grads *g, vkattn_context *ctx, vkattn_attention_args *args)
{
    if (args->lse.buffer || (!g->train.prefix && g->train.dropout == 0.0f))
        return VKATTN_SUCCESS;
    const int64_t shape[3] = {args->out.shape[0], args->out.shape[1], args->out.shape[2]};
    vkattn_buffer_desc d = {.size = (uint64_t)(shape[0] * shape[1] * shape[2]) * 4};
    vkattn_result r = vkattn_buffer_create(ctx, &d, &g->lse);
    if (r == VKATTN_SUCCESS)
        args->lse = vkattn_tensor_make(g->lse, 0, VKATTN_DTYPE_F32, 3, shape);
    return r;
}

vkattn_result cli_grads_run(cli_grads *g, vkattn_context *ctx, const vkattn_attention_args *args,
                            vkattn_tensor dout, vkattn_dtype dtype)
{
    if (!g->train.prefix)
        return VKATTN_SUCCESS;
    const vkattn_tensor *like[3] = {&args->q, &args->k, &args->v};
    vkattn_tensor grads[3];
    for (int i = 0; i < 3; i++) {
        int64_t n = 1;
        for (int d = 0; d < 4; d++)
            n *= g->shapes[i][d] = like[i]->shape[d];
        vkattn_buffer_desc d = {.size = (uint64_t)n * vkattn_dtype_size(dtype)};
        vkattn_result r = vkattn_buffer_create(ctx, &d, &g->buffers[i]);
        if (r != VKATTN_SUCCESS)
            return r;
        grads[i] = vkattn_tensor_make(g->buffers[i], 0, dtype, 4, g->shapes[i]);
    }
    vkattn_attention_backward_args b = {
        .forward = *args, .dout = dout, .dq = grads[0], .dk = grads[1], .dv = grads[2]};
    vkattn_result r = vkattn_attention_backward(ctx, &b);
    for (int i = 0; i < 3 && r == VKATTN_SUCCESS; i++) {
        int64_t n = g->shapes[i][0] * g->shapes[i][1] * g->shapes[i][2] * g->shapes[i][3];
        if (!(g->got[i] = cli_download_f32(ctx, g->buffers[i], n, dtype)))
            r = VKATTN_ERROR_OUT_OF_HOST_MEMORY;
    }
    return r;
}

int cli_grads_check_reference(cli_grads *g, const vkattn_ref_attention_args *ref,
                              vkattn_host_tensor dout, vkattn_dtype dtype)
{
    if (!g->train.prefix)
        return 0;
    vkattn_host_tensor t[3];
    int64_t n[3];
    for (int i = 0; i < 3; i++) {
        n[i] = g->shapes[i][0] * g->shapes[i][1] * g->shapes[i][2] * g->shapes[i][3];
        if (!(g->ref[i] = malloc((size_t)n[i] * sizeof(float)))) {
            cli_error("--check: out of memory for the reference's gradients");
            return 1;
        }
        t[i] = vkattn_host_tensor_make(g->ref[i], VKATTN_DTYPE_F32, 4, g->shapes[i]);
    }
    vkattn_ref_attention_backward_args b = {
        .forward = *ref, .dout = dout, .dq = t[0], .dk = t[1], .dv = t[2]};
    char err[512];
    if (vkattn_ref_attention_backward(&b, err, sizeof err) != VKATTN_SUCCESS) {
        cli_error("CPU reference backward failed: %s", err);
        return 1;
    }
    static const char *const names[3] = {"dq", "dk", "dv"};
    const double tol = dtype == VKATTN_DTYPE_F32 ? 2e-4 : 2e-2;
    int status = 0;
    for (int i = 0; i < 3; i++) {
        bool nonfinite = false;
        double e = cli_max_rel_error(g->got[i], g->ref[i], n[i], &nonfinite);
        printf("%s: max error %.3g (tolerance %.3g)%s\n", names[i], e, tol,
               nonfinite ? ", NOT FINITE" : "");
        if (nonfinite || !(e <= tol))
            status = 1;
    }
    if (status)
        cli_error("--check: the gradients differ from the CPU reference's beyond the tolerance");
    return status;
}

int cli_grads_write(const cli_grads *g, const char *const staged[3])
{
    if (!g->train.prefix)
        return 0;
    cli_output_file files[3];
    for (int i = 0; i < 3; i++)
        files[i] = (cli_output_file){staged[i], 4, g->shapes[i], g->got[i]};
    return cli_write_outputs(files, 3);
}

void cli_grads_free(cli_grads *g)
{
    vkattn_buffer_destroy(g->lse);
    for (int i = 0; i < 3; i++) {
        vkattn_buffer_destroy(g->buffers[i]);
        free(g->got[i]);
        free(g->ref[i]);
    }
}
