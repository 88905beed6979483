/* vkattn attention: scaled dot-product attention on .npy tensors. */
#include "cli_job.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char help_text[] =
    "usage: vkattn attention --q Q.npy --k K.npy --v V.npy --out O.npy [options]\n"
    "Attention of float32 .npy tensors on the device: Q [B,Hq,Tq,D], K and V [B,Hkv,Tk,D]\n"
    "(Hq a multiple of Hkv: MHA, GQA or MQA; D a multiple of 8 up to 256); writes O\n"
    "[B,Hq,Tq,D] float32. Nothing is written unless everything succeeds.\n"
    "  --mask M.npy          additive float32 mask [Tq,Tk] or [B,Hq,Tq,Tk] (-inf hides)\n"
    "  --key-padding P.npy   uint8/bool [B,Tk]: 1 = token, 0 = padding\n"
    "  --causal              key j visible to query i iff j <= i + Tk - Tq\n"
    "  --scale S             score scale (default 1/sqrt(D))\n"
    "  --dtype f32|f16       storage type on the device (default f32; math is fp32)\n"
    "  --weights-out W.npy   also write the attention probabilities, float32\n"
    "                        [B,Tq,Tk] averaged over heads, or with --per-head [B,Hq,Tq,Tk]\n"
    "  --per-head            see --weights-out\n"
    "  --check               compare with the CPU reference (double accumulation), print\n"
    "                        the max relative error; exit 1 above 2e-4 (f32) / 1.5e-2 (f16)\n";

enum { Q, K, V, MASK, PAD, N_INPUTS };

/* One run: what attention adds to cli_job. */
typedef struct attention_job {
    cli_job job;
    float scale; /* --scale; 0: 1/sqrt(D) */
    cli_input in[N_INPUTS];
    vkattn_buffer *bufs[N_INPUTS];
} attention_job;

static int own_option(void *user, const char *flag, const char *value)
{
    attention_job *a = user;
    if (strcmp(flag, "--scale") == 0)
        return cli_parse_float(flag, value, &a->scale) != 0 ? -1 : 1;
    return 0;
}

/* CLI_ARGS_OK, or the exit status. */
static int parse_options(attention_job *a, int argc, char **argv)
{
    int code = cli_job_parse(&a->job, argc, argv, help_text, own_option, a);
    if (code != CLI_ARGS_OK)
        return code;
    static const int required[] = {Q, K, V};
    return cli_job_check_required(&a->job, required, 3, NULL) != 0 ? 2 : CLI_ARGS_OK;
}

/* The inputs as the device will store them, so that the CPU reference sees
 * the same values. */
static int load_inputs(void *user)
{
    attention_job *a = user;
    static const uint32_t ranks[N_INPUTS] = {4, 4, 4, 0, 2};
    if (cli_job_load(&a->job, ranks, PAD) != 0)
        return -1;
    /* the mask stays f32 on the device (cli_job_upload): not rounded */
    for (int k = 0; k < N_INPUTS; k++)
        if (k != PAD && k != MASK && cli_round_to_dtype(&a->in[k], a->job.dtype) != 0)
            return -1;
    return 0;
}

/* Inputs and outputs on the device; with --tune, the kernel choices for these
 * shapes first; the attention; its outputs read back. */
static int run(void *user)
{
    attention_job *a = user;
    cli_job *j = &a->job;
    const int64_t *qs = a->in[Q].array.shape, *ks = a->in[K].array.shape;
    cli_job_shape_outputs(j, 4, qs, qs[1], qs[2], ks[2]);
    vkattn_attention_args args = {.causal = j->causal, .scale = a->scale};
    vkattn_tensor *slots[N_INPUTS] = {&args.q, &args.k, &args.v, &args.mask, &args.key_padding};
    if (cli_job_upload(j, slots, MASK) != 0 ||
        cli_job_create_outputs(j, &args.out, &args.weights) != 0)
        return -1;
    vkattn_result r = VKATTN_SUCCESS;
    if (j->device.tune)
        r = vkattn_attention_tune(
            j->ctx, &(vkattn_attention_tune_args){(uint32_t)qs[0], (uint32_t)qs[1], (uint32_t)ks[1],
                                                  (uint32_t)qs[2], (uint32_t)ks[2], (uint32_t)qs[3],
                                                  j->causal, j->dtype, j->dtype});
    if (j->device.tune && r == VKATTN_SUCCESS)
        r = cli_save_tuning(j->ctx, &j->device);
    if (r == VKATTN_SUCCESS)
        r = vkattn_attention(j->ctx, &args);
    if (r != VKATTN_SUCCESS) {
        cli_report_error(j->ctx, r, a->in, N_INPUTS);
        return -1;
    }
    return cli_job_download(j);
}

/* --check: the CPU reference on the same inputs. */
static int check(void *user)
{
    attention_job *a = user;
    vkattn_ref_attention_args ra = {.causal = a->job.causal, .scale = a->scale};
    vkattn_host_tensor *slots[N_INPUTS] = {&ra.q, &ra.k, &ra.v, &ra.mask, &ra.key_padding};
    cli_job_host_inputs(&a->job, slots);
    if (cli_job_reference(&a->job, &ra.out, &ra.weights) != 0)
        return -1;
    char err[512];
    if (vkattn_ref_attention(&ra, err, sizeof err) != VKATTN_SUCCESS) {
        cli_error("CPU reference failed: %s", err);
        return -1;
    }
    return cli_job_compare(&a->job);
}

int cli_attention(int argc, char **argv)
{
    attention_job a = {.in = {{"--q"}, {"--k"}, {"--v"}, {"--mask"}, {"--key-padding"}}};
    a.job = (cli_job){.command = "attention",
                      .inputs = a.in,
                      .bufs = a.bufs,
                      .n_inputs = N_INPUTS,
                      .device = {.tunable = true}};
    int code = parse_options(&a, argc, argv);
    if (code != CLI_ARGS_OK)
        return code;
    return cli_job_end(&a.job, cli_job_run(&a.job, load_inputs, run, check, &a));
}
