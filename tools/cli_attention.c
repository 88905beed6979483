/* vkattn attention: scaled dot-product attention on .npy tensors. */
#include "cli.h"
#include "cli_io.h"

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

int cli_attention(int argc, char **argv)
{
    cli_device_options o = {.tunable = true};
    cli_input in[N_INPUTS] = {{"--q"}, {"--k"}, {"--v"}, {"--mask"}, {"--key-padding"}};
    const char *out_path = NULL, *weights_path = NULL;
    bool causal = false, per_head = false, check = false;
    float scale = 0.0f;
    vkattn_dtype dtype = VKATTN_DTYPE_F32;
    for (int i = 1; i < argc; i++) {
        int used = cli_parse_device_option(argc, argv, &i, &o);
        if (used < 0)
            return 2;
        if (used)
            continue;
        const char *a = argv[i];
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            printf("%s%s", help_text, cli_device_options_help);
            return 0;
        }
        if (strcmp(a, "--causal") == 0) {
            causal = true;
            continue;
        }
        if (strcmp(a, "--per-head") == 0) {
            per_head = true;
            continue;
        }
        if (strcmp(a, "--check") == 0) {
            check = true;
            continue;
        }
        if (i + 1 >= argc) {
            cli_error("attention: %s needs a value (see vkattn attention --help)", a);
            return 2;
        }
        const char *val = argv[++i];
        bool known = false;
        for (int k = 0; k < N_INPUTS; k++)
            if (strcmp(a, in[k].flag) == 0) {
                in[k].path = val;
                known = true;
            }
        if (known)
            continue;
        if (strcmp(a, "--out") == 0)
            out_path = val;
        else if (strcmp(a, "--weights-out") == 0)
            weights_path = val;
        else if (strcmp(a, "--scale") == 0) {
            if (cli_parse_float(a, val, &scale) != 0)
                return 2;
        } else if (strcmp(a, "--dtype") == 0) {
            if (cli_parse_dtype(val, &dtype) != 0)
                return 2;
        } else {
            cli_error("attention: unknown option \"%s\" (see vkattn attention --help)", a);
            return 2;
        }
    }
    for (int k = 0; k < 3; k++)
        if (!in[k].path) {
            cli_error("attention: %s is required (see vkattn attention --help)", in[k].flag);
            return 2;
        }
    if (!out_path) {
        cli_error("attention: --out is required");
        return 2;
    }
    if (per_head && !weights_path) {
        cli_error("attention: --per-head needs --weights-out");
        return 2;
    }

    int status = 1;
    vkattn_context *ctx = NULL;
    vkattn_buffer *bufs[N_INPUTS] = {0}, *bout = NULL, *bw = NULL;
    float *out = NULL, *weights = NULL, *ref = NULL, *ref_w = NULL;
    for (int k = 0; k < 3; k++)
        if (cli_load_f32(&in[k], 4) != 0)
            goto done;
    if (in[MASK].path && cli_load_f32(&in[MASK], 0) != 0)
        goto done;
    if (in[PAD].path && cli_load_mask_u8(&in[PAD]) != 0)
        goto done;
    for (int k = 0; k < N_INPUTS; k++)
        if (k != PAD)
            cli_round_to_dtype(&in[k].array, dtype);

    ctx = cli_open(&o);
    if (!ctx)
        goto done;
    const int64_t *qs = in[Q].array.shape, *ks = in[K].array.shape;
    int64_t out_n = cli_numel(&in[Q].array);
    /* weights: [B, Tq, Tk] averaged over heads, or [B, Hq, Tq, Tk] */
    uint32_t wrank = per_head ? 4 : 3;
    int64_t wshape[4] = {qs[0], qs[1], qs[2], ks[2]};
    if (!per_head) {
        wshape[1] = qs[2];
        wshape[2] = ks[2];
    }
    int64_t w_n = 1;
    for (uint32_t k = 0; k < wrank; k++)
        w_n *= wshape[k];
    vkattn_attention_args args = {.causal = causal, .scale = scale};
    vkattn_tensor *slots[N_INPUTS] = {&args.q, &args.k, &args.v, &args.mask, &args.key_padding};
    for (int k = 0; k < N_INPUTS; k++) {
        if (!in[k].path)
            continue;
        /* masks stay f32 on the device: they are additive, and -inf must survive */
        vkattn_dtype dt = k == MASK ? VKATTN_DTYPE_F32 : dtype;
        if (!(bufs[k] = cli_upload(ctx, &in[k].array, dt)))
            goto done;
        *slots[k] = cli_tensor(bufs[k], &in[k].array, dt);
    }
    vkattn_buffer_desc od = {.size = (uint64_t)out_n * vkattn_dtype_size(dtype)};
    if (vkattn_buffer_create(ctx, &od, &bout) != VKATTN_SUCCESS) {
        cli_report_error(ctx, VKATTN_ERROR_OUT_OF_DEVICE_MEMORY, in, N_INPUTS);
        goto done;
    }
    args.out = vkattn_tensor_make(bout, 0, dtype, 4, qs);
    if (weights_path) {
        vkattn_buffer_desc wd = {.size = (uint64_t)w_n * 4};
        if (vkattn_buffer_create(ctx, &wd, &bw) != VKATTN_SUCCESS) {
            cli_report_error(ctx, VKATTN_ERROR_OUT_OF_DEVICE_MEMORY, in, N_INPUTS);
            goto done;
        }
        args.weights = vkattn_tensor_make(bw, 0, VKATTN_DTYPE_F32, wrank, wshape);
    }
    vkattn_result r = VKATTN_SUCCESS;
    if (o.tune)
        r = vkattn_attention_tune(ctx, &(vkattn_attention_tune_args){
                                           (uint32_t)qs[0], (uint32_t)qs[1], (uint32_t)ks[1],
                                           (uint32_t)qs[2], (uint32_t)ks[2], (uint32_t)qs[3],
                                           causal, dtype, dtype});
    if (o.tune && r == VKATTN_SUCCESS)
        r = cli_save_tuning(ctx, &o);
    if (r == VKATTN_SUCCESS)
        r = vkattn_attention(ctx, &args);
    if (r != VKATTN_SUCCESS) {
        cli_report_error(ctx, r, in, N_INPUTS);
        goto done;
    }
    if (!(out = cli_download_f32(ctx, bout, out_n, dtype)))
        goto done;
    if (bw && !(weights = cli_download_f32(ctx, bw, w_n, VKATTN_DTYPE_F32)))
        goto done;

    if (check) {
        ref = malloc((size_t)out_n * 4);
        ref_w = weights ? malloc((size_t)w_n * 4) : NULL;
        vkattn_ref_attention_args ra = {.causal = causal, .scale = scale};
        vkattn_host_tensor *rslots[N_INPUTS] = {&ra.q, &ra.k, &ra.v, &ra.mask, &ra.key_padding};
        for (int k = 0; k < N_INPUTS; k++)
            if (in[k].path)
                *rslots[k] = vkattn_host_tensor_make(in[k].array.data,
                                                     k == PAD ? VKATTN_DTYPE_U8 : VKATTN_DTYPE_F32,
                                                     in[k].array.rank, in[k].array.shape);
        ra.out = vkattn_host_tensor_make(ref, VKATTN_DTYPE_F32, 4, qs);
        if (ref_w)
            ra.weights = vkattn_host_tensor_make(ref_w, VKATTN_DTYPE_F32, wrank, wshape);
        char err[512];
        if (!ref || (weights && !ref_w) || vkattn_ref_attention(&ra, err, sizeof err) != VKATTN_SUCCESS) {
            cli_error("CPU reference failed: %s", ref ? err : "out of memory");
            goto done;
        }
        if (cli_check_report(out, ref, out_n, weights, ref_w, w_n, dtype) != 0)
            goto done;
    }
    /* the caches before the outputs: a path that cannot be written fails
     * the command without an output file */
    if (cli_save_pipeline_cache(ctx, &o) != 0)
        goto done;
    if (cli_write_outputs(out_path, 4, qs, out, weights_path, wrank, wshape, weights) != 0)
        goto done;
    status = 0;
done:
    for (int k = 0; k < N_INPUTS; k++) {
        vkattn_buffer_destroy(bufs[k]);
        npy_free(&in[k].array);
    }
    vkattn_buffer_destroy(bout);
    vkattn_buffer_destroy(bw);
    free(out);
    free(weights);
    free(ref);
    free(ref_w);
    if (cli_close(ctx, &o))
        status = 1;
    return status;
}
