/* vkattn mha: one multi-head attention layer (torch.nn.MultiheadAttention
 * weights layout) on .npy inputs. */
#include "cli.h"
#include "cli_io.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char help_text[] =
    "usage: vkattn mha --x X.npy --heads H --wq WQ.npy --wk WK.npy --wv WV.npy --wo WO.npy\n"
    "                  --out Y.npy [options]\n"
    "One attention layer on the device, float32 .npy in and out, torch.nn.Linear weight\n"
    "layout (y = x W^T + b): X [B,Tq,Dm]; WQ [H*Dh,Dm]; WK, WV [G*Dh,Dkv]; WO [Dm,H*Dh];\n"
    "Y [B,Tq,Dm]. Dh is WQ's rows / H (usually Dm / H). Nothing is written unless\n"
    "everything succeeds.\n"
    "  --kv C.npy            keys/values come from C [B,Tk,Dkv] (cross-attention);\n"
    "                        default: self-attention (C = X)\n"
    "  --kv-heads G          key/value heads (GQA; 1 = MQA; default H)\n"
    "  --bq/--bk/--bv/--bo B.npy   biases [H*Dh], [G*Dh], [G*Dh], [Dm] (missing ones: 0)\n"
    "  --causal              query i sees key j iff j <= i + Tk - Tq\n"
    "  --mask M.npy          additive float32 mask [Tq,Tk] or [B,H,Tq,Tk]\n"
    "  --key-padding P.npy   uint8/bool [B,Tk]: 1 = token, 0 = padding\n"
    "  --dtype f32|f16       storage of weights and activations on the device (default f32)\n"
    "  --weights-out W.npy   also write attention probabilities [B,Tq,Tk] (head average)\n"
    "  --per-head            ... or [B,H,Tq,Tk] per head\n"
    "  --check               compare with the CPU reference; exit 1 above 2e-4 / 1.5e-2\n"
    "  --prefill N           decode through a KV cache (needs --causal, self-attention):\n"
    "                        the first N tokens of every sequence of X are one prefill\n"
    "                        step, the rest go one token per step through the decode\n"
    "                        path; Y holds all rows (equal to the full causal forward)\n"
    "  --paged-block S       with --prefill: a paged cache of S-token blocks\n"
    "  --kv-splits K         with --prefill: split count of decode steps (default auto)\n";

enum { X, KV, WQ, WK, WV, WO, BQ, BK, BV, BO, MASK, PAD, N_INPUTS };

/* Shapes of the weight files against the layer's sizes, naming the file. */
static int check_weight_shapes(cli_input *in, int64_t dm, int64_t dkv, int64_t hq, int64_t hkv,
                               int64_t dh)
{
    if (cli_expect_dim(&in[WQ], 1, dm, "embed_dim (X's last dimension)") ||
        cli_expect_dim(&in[WK], 0, hkv * dh, "kv_heads * head_dim") ||
        cli_expect_dim(&in[WK], 1, dkv, "kv_dim") ||
        cli_expect_dim(&in[WV], 0, hkv * dh, "kv_heads * head_dim") ||
        cli_expect_dim(&in[WV], 1, dkv, "kv_dim") ||
        cli_expect_dim(&in[WO], 0, dm, "embed_dim") ||
        cli_expect_dim(&in[WO], 1, hq * dh, "heads * head_dim"))
        return -1;
    int64_t bias_len[4] = {hq * dh, hkv * dh, hkv * dh, dm};
    const char *bias_what[4] = {"heads * head_dim", "kv_heads * head_dim", "kv_heads * head_dim",
                                "embed_dim"};
    for (int k = 0; k < 4; k++)
        if (in[BQ + k].path && cli_expect_dim(&in[BQ + k], 0, bias_len[k], bias_what[k]))
            return -1;
    return 0;
}

/* --prefill: the first `prefill` tokens of every sequence as one step into a
 * KV cache, then one step per remaining token; views of x and y select the
 * tokens of each step. With --tune the steps are tuned first (the prefill
 * step and the decode steps at the full length) and the tuning saved. */
static vkattn_result run_steps(vkattn_context *ctx, vkattn_mha *layer, const vkattn_mha_forward_args *fa,
                               vkattn_dtype dtype, uint32_t prefill, uint32_t paged_block,
                               uint32_t kv_splits, const cli_device_options *o)
{
    const vkattn_mha_desc *d = vkattn_mha_config(layer);
    uint32_t batch = (uint32_t)fa->x.shape[0], tq = (uint32_t)fa->x.shape[1];
    vkattn_kv_cache_desc cd = {.num_kv_heads = d->num_kv_heads, .num_heads = d->num_heads,
                               .head_dim = d->head_dim, .dtype = dtype, .max_sequences = batch,
                               .capacity = tq, .block_size = paged_block};
    vkattn_kv_cache *cache = NULL;
    vkattn_result r = vkattn_kv_cache_create(ctx, &cd, &cache);
    uint32_t *seqs = calloc(batch, sizeof *seqs);
    if (!seqs)
        r = VKATTN_ERROR_OUT_OF_HOST_MEMORY;
    for (uint32_t b = 0; seqs && b < batch; b++)
        seqs[b] = b;
    if (r == VKATTN_SUCCESS && o->tune) {
        r = vkattn_mha_step_tune(layer, &(vkattn_mha_step_tune_args){cache, batch, prefill, prefill});
        if (r == VKATTN_SUCCESS && tq > prefill)
            r = vkattn_mha_step_tune(layer, &(vkattn_mha_step_tune_args){cache, batch, 1, tq});
        if (r == VKATTN_SUCCESS)
            r = cli_save_tuning(ctx, o);
    }
    size_t es = vkattn_dtype_size(dtype);
    for (uint32_t t = 0; r == VKATTN_SUCCESS && t < tq; t = t ? t + 1 : prefill) {
        uint32_t n = t ? 1 : prefill;
        vkattn_mha_step_args sa = {.cache = cache, .batch = batch, .sequences = seqs, .x = fa->x,
                                   .y = fa->y, .kv_splits = kv_splits};
        /* [B, n, Dm] views of the full [B, Tq, Dm] tensors at token t */
        for (int k = 0; k < 2; k++) {
            vkattn_tensor *v = k ? &sa.y : &sa.x;
            v->strides[0] = (int64_t)tq * d->embed_dim;
            v->strides[1] = d->embed_dim;
            v->strides[2] = 1;
            v->shape[1] = n;
            v->offset += (uint64_t)t * d->embed_dim * es;
        }
        r = vkattn_mha_step(layer, &sa);
    }
    free(seqs);
    vkattn_kv_cache_destroy(cache);
    return r;
}

int cli_mha(int argc, char **argv)
{
    cli_device_options o = {.tunable = true};
    cli_input in[N_INPUTS] = {{"--x"},  {"--kv"}, {"--wq"}, {"--wk"}, {"--wv"},   {"--wo"},
                              {"--bq"}, {"--bk"}, {"--bv"}, {"--bo"}, {"--mask"}, {"--key-padding"}};
    const char *out_path = NULL, *weights_path = NULL;
    bool causal = false, per_head = false, check = false;
    uint32_t heads = 0, kv_heads = 0, prefill = 0, paged_block = 0, kv_splits = 0;
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
        bool *flag = strcmp(a, "--causal") == 0     ? &causal
                     : strcmp(a, "--per-head") == 0 ? &per_head
                     : strcmp(a, "--check") == 0    ? &check
                                                    : NULL;
        if (flag) {
            *flag = true;
            continue;
        }
        if (i + 1 >= argc) {
            cli_error("mha: %s needs a value (see vkattn mha --help)", a);
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
        else if (strcmp(a, "--heads") == 0) {
            if (cli_parse_uint(a, val, &heads))
                return 2;
        } else if (strcmp(a, "--kv-heads") == 0) {
            if (cli_parse_uint(a, val, &kv_heads))
                return 2;
        } else if (strcmp(a, "--prefill") == 0) {
            if (cli_parse_uint(a, val, &prefill))
                return 2;
        } else if (strcmp(a, "--paged-block") == 0) {
            if (cli_parse_uint(a, val, &paged_block))
                return 2;
        } else if (strcmp(a, "--kv-splits") == 0) {
            if (cli_parse_uint(a, val, &kv_splits))
                return 2;
        } else if (strcmp(a, "--dtype") == 0) {
            if (cli_parse_dtype(val, &dtype))
                return 2;
        } else {
            cli_error("mha: unknown option \"%s\" (see vkattn mha --help)", a);
            return 2;
        }
    }
    const int required[] = {X, WQ, WK, WV, WO};
    for (size_t k = 0; k < sizeof required / sizeof required[0]; k++)
        if (!in[required[k]].path) {
            cli_error("mha: %s is required (see vkattn mha --help)", in[required[k]].flag);
            return 2;
        }
    if (!heads || !out_path) {
        cli_error("mha: %s is required", !heads ? "--heads" : "--out");
        return 2;
    }
    if (per_head && !weights_path) {
        cli_error("mha: --per-head needs --weights-out");
        return 2;
    }
    if ((paged_block || kv_splits) && !prefill) {
        cli_error("mha: %s needs --prefill", paged_block ? "--paged-block" : "--kv-splits");
        return 2;
    }
    if (prefill && (!causal || in[KV].path || in[MASK].path || in[PAD].path || weights_path)) {
        cli_error("mha: --prefill decodes causal self-attention through a KV cache: it needs --causal and "
                  "takes no --kv, --mask, --key-padding or --weights-out");
        return 2;
    }

    int status = 1;
    vkattn_context *ctx = NULL;
    vkattn_mha *layer = NULL;
    vkattn_buffer *bx = NULL, *bkv = NULL, *by = NULL, *bmask = NULL, *bpad = NULL, *bw = NULL;
    float *y = NULL, *weights = NULL, *ref = NULL, *ref_w = NULL;
    static const uint32_t ranks[N_INPUTS] = {3, 3, 2, 2, 2, 2, 1, 1, 1, 1, 0, 2};
    for (int k = 0; k < N_INPUTS; k++)
        if (in[k].path && (k == PAD ? cli_load_mask_u8(&in[k]) : cli_load_f32(&in[k], ranks[k])) != 0)
            goto done;
    for (int k = 0; k < N_INPUTS; k++)
        if (k != PAD && k != MASK)
            cli_round_to_dtype(&in[k].array, dtype);

    const int64_t *xs = in[X].array.shape;
    int64_t dm = xs[2], dkv = in[KV].path ? in[KV].array.shape[2] : in[WK].array.shape[1];
    int64_t hq = heads, hkv = kv_heads ? kv_heads : heads, wq_rows = in[WQ].array.shape[0];
    if (wq_rows % hq != 0) {
        cli_error("--wq %s: %lld rows do not split into --heads %lld heads", in[WQ].path,
                  (long long)wq_rows, (long long)hq);
        goto done;
    }
    int64_t dh = wq_rows / hq;
    if (check_weight_shapes(in, dm, dkv, hq, hkv, dh) != 0)
        goto done;
    if (in[KV].path && in[KV].array.shape[0] != xs[0]) {
        cli_error("--kv %s: batch %lld differs from --x's %lld", in[KV].path,
                  (long long)in[KV].array.shape[0], (long long)xs[0]);
        goto done;
    }

    ctx = cli_open(&o);
    if (!ctx)
        goto done;
    vkattn_mha_desc desc = {
        .embed_dim = (uint32_t)dm, .num_heads = heads, .num_kv_heads = kv_heads,
        .head_dim = wq_rows == dm ? 0 : (uint32_t)dh, .kv_dim = (uint32_t)dkv,
        .bias = in[BQ].path || in[BK].path || in[BV].path || in[BO].path, .dtype = dtype,
    };
    vkattn_result r = vkattn_mha_create(ctx, &desc, &layer);
    vkattn_mha_weights w = {0};
    const float **wslots[8] = {&w.wq, &w.wk, &w.wv, &w.wo, &w.bq, &w.bk, &w.bv, &w.bo};
    for (int k = 0; k < 8; k++)
        *wslots[k] = in[WQ + k].path ? in[WQ + k].array.data : NULL;
    if (r == VKATTN_SUCCESS)
        r = vkattn_mha_set_weights(layer, &w);
    if (r != VKATTN_SUCCESS) {
        cli_report_error(ctx, r, in, N_INPUTS);
        goto done;
    }
    int64_t tq = xs[1], tk = in[KV].path ? in[KV].array.shape[1] : tq, y_n = cli_numel(&in[X].array);
    uint32_t wrank = per_head ? 4 : 3;
    int64_t wshape[4] = {xs[0], per_head ? hq : tq, per_head ? tq : tk, tk}, w_n = 1;
    for (uint32_t k = 0; k < wrank; k++)
        w_n *= wshape[k];
    vkattn_mha_forward_args fa = {.causal = causal};
    if (!(bx = cli_upload(ctx, &in[X].array, dtype)))
        goto done;
    fa.x = cli_tensor(bx, &in[X].array, dtype);
    if (in[KV].path) {
        if (!(bkv = cli_upload(ctx, &in[KV].array, dtype)))
            goto done;
        fa.kv = cli_tensor(bkv, &in[KV].array, dtype);
    }
    if (in[MASK].path) {
        if (!(bmask = cli_upload(ctx, &in[MASK].array, VKATTN_DTYPE_F32)))
            goto done;
        fa.mask = cli_tensor(bmask, &in[MASK].array, VKATTN_DTYPE_F32);
    }
    if (in[PAD].path) {
        if (!(bpad = cli_upload(ctx, &in[PAD].array, VKATTN_DTYPE_U8)))
            goto done;
        fa.key_padding = cli_tensor(bpad, &in[PAD].array, VKATTN_DTYPE_U8);
    }
    vkattn_buffer_desc yd = {.size = (uint64_t)y_n * vkattn_dtype_size(dtype)};
    vkattn_buffer_desc wd = {.size = (uint64_t)w_n * 4};
    if (vkattn_buffer_create(ctx, &yd, &by) != VKATTN_SUCCESS ||
        (weights_path && vkattn_buffer_create(ctx, &wd, &bw) != VKATTN_SUCCESS)) {
        cli_report_error(ctx, VKATTN_ERROR_OUT_OF_DEVICE_MEMORY, in, N_INPUTS);
        goto done;
    }
    fa.y = vkattn_tensor_make(by, 0, dtype, 3, xs);
    if (bw)
        fa.weights = vkattn_tensor_make(bw, 0, VKATTN_DTYPE_F32, wrank, wshape);
    if (prefill && prefill > tq) {
        cli_error("--prefill %u: --x has only %lld tokens per sequence", prefill, (long long)tq);
        goto done;
    }
    if (o.tune && !prefill) { /* steps tune in run_steps, with their cache */
        r = vkattn_mha_tune(layer, &(vkattn_mha_tune_args){(uint32_t)xs[0], (uint32_t)tq, (uint32_t)tk});
        if (r == VKATTN_SUCCESS)
            r = cli_save_tuning(ctx, &o);
    }
    if (r != VKATTN_SUCCESS) {
        cli_report_error(ctx, r, in, N_INPUTS);
        goto done;
    }
    r = prefill ? run_steps(ctx, layer, &fa, dtype, prefill, paged_block, kv_splits, &o)
                : vkattn_mha_forward(layer, &fa);
    if (r != VKATTN_SUCCESS) {
        cli_report_error(ctx, r, in, N_INPUTS);
        goto done;
    }
    if (!(y = cli_download_f32(ctx, by, y_n, dtype)) ||
        (bw && !(weights = cli_download_f32(ctx, bw, w_n, VKATTN_DTYPE_F32))))
        goto done;

    if (check) {
        ref = malloc((size_t)y_n * 4);
        ref_w = weights ? malloc((size_t)w_n * 4) : NULL;
        vkattn_ref_mha_args ra = {.causal = causal};
        ra.x = vkattn_host_tensor_make(in[X].array.data, VKATTN_DTYPE_F32, 3, xs);
        if (in[KV].path)
            ra.kv = vkattn_host_tensor_make(in[KV].array.data, VKATTN_DTYPE_F32, 3, in[KV].array.shape);
        if (in[MASK].path)
            ra.mask = vkattn_host_tensor_make(in[MASK].array.data, VKATTN_DTYPE_F32, in[MASK].array.rank,
                                              in[MASK].array.shape);
        if (in[PAD].path)
            ra.key_padding = vkattn_host_tensor_make(in[PAD].array.data, VKATTN_DTYPE_U8, 2,
                                                     in[PAD].array.shape);
        ra.y = vkattn_host_tensor_make(ref, VKATTN_DTYPE_F32, 3, xs);
        if (ref_w)
            ra.weights = vkattn_host_tensor_make(ref_w, VKATTN_DTYPE_F32, wrank, wshape);
        char err[512];
        if (!ref || (weights && !ref_w) || vkattn_ref_mha(&desc, &w, &ra, err, sizeof err) != VKATTN_SUCCESS) {
            cli_error("CPU reference failed: %s", ref ? err : "out of memory");
            goto done;
        }
        if (cli_check_report(y, ref, y_n, weights, ref_w, w_n, dtype) != 0)
            goto done;
    }
    /* the caches before the outputs: a path that cannot be written fails
     * the command without an output file */
    if (cli_save_pipeline_cache(ctx, &o) != 0)
        goto done;
    if (cli_write_outputs(out_path, 3, xs, y, weights_path, wrank, wshape, weights) != 0)
        goto done;
    status = 0;
done:
    vkattn_mha_destroy(layer);
    vkattn_buffer *bufs[] = {bx, bkv, by, bmask, bpad, bw};
    for (size_t k = 0; k < sizeof bufs / sizeof bufs[0]; k++)
        vkattn_buffer_destroy(bufs[k]);
    for (int k = 0; k < N_INPUTS; k++)
        npy_free(&in[k].array);
    free(y);
    free(weights);
    free(ref);
    free(ref_w);
    if (cli_close(ctx, &o))
        status = 1;
    return status;
}
