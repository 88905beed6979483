/* vkattn mha --weights FILE.safetensors [--prefix P] [--names torch|hf]
 * (issue 16): the layer's weights by name from a model file give the same
 * output, bit for bit, as the same layer given as .npy files - with Hugging
 * Face names under a prefix among other layers' tensors, nn.MultiheadAttention's
 * packed and separate projections, F16 and BF16 tensors - and every bad file
 * or flag is refused naming the file and tensor, without an output file.
 * Also mha --weight-dtype (issue 15): the weights kept in f16, bf16 or q8_0. */
#include "npy/npy.h"
#include "test_cli_util.h"
#include "test_safetensors.h"
#include "test_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef VKATTN_CLI_PATH
#error "VKATTN_CLI_PATH must name the vkattn executable"
#endif

/* x [2, 6, 64]; 4 query heads of 16; GQA: 2 key/value heads; cross
 * attention: c [2, 9, 48]. */
enum { B = 2, T = 6, TC = 9, DM = 64, DKV = 48, HEADS = 4, KV_HEADS = 2, DH = 16 };

#define PREFIX "model.layers.0.self_attn."

/* The .npy file `name` as a tensor of the file under `st_name` (F32). */
static test_st_tensor from_npy(npy_array *keep, const char *name, const char *st_name)
{
    *keep = cli_read_npy(name);
    test_st_tensor t = {st_name, "F32", keep->rank, {0}, keep->data, keep->nbytes};
    for (uint32_t d = 0; d < keep->rank; d++)
        t.shape[d] = keep->shape[d];
    return t;
}

/* Rounds a tensor's f32 data to F16 or BF16 in `bits`, makes the tensor
 * that dtype, and writes the widened values as `widened` (.npy), the
 * values the layer gets from the file. */
static void to_half(test_st_tensor *t, const char *dtype, uint16_t *bits, const char *widened)
{
    size_t n = t->nbytes / 4;
    const float *f = t->data;
    float *w = malloc(n * sizeof *w);
    assert_non_null(w);
    bool bf = strcmp(dtype, "BF16") == 0;
    for (size_t i = 0; i < n; i++) {
        bits[i] = bf ? vkattn_f32_to_bf16(f[i]) : vkattn_f32_to_f16(f[i]);
        w[i] = bf ? vkattn_bf16_to_f32(bits[i]) : vkattn_f16_to_f32(bits[i]);
    }
    cli_write_npy(widened, NPY_F32, t->rank, t->shape, w);
    free(w);
    t->dtype = dtype;
    t->data = bits;
    t->nbytes = n * 2;
}

static int group_setup(void **state)
{
    if (cli_setup(state) != 0)
        return -1;
    int64_t x[3] = {B, T, DM}, c[3] = {B, TC, DM}, cx[3] = {B, TC, DKV}, wq[2] = {HEADS * DH, DM},
            wkv[2] = {KV_HEADS * DH, DM}, wkv4[2] = {HEADS * DH, DM}, wx[2] = {HEADS * DH, DKV},
            wo[2] = {DM, HEADS * DH}, bq[1] = {HEADS * DH}, bkv[1] = {KV_HEADS * DH}, bo[1] = {DM};
    cli_write_f32("X.npy", 3, x, 10, -1, 1);
    cli_write_f32("C.npy", 3, c, 17, -1, 1);
    cli_write_f32("CX.npy", 3, cx, 18, -1, 1);
    cli_write_f32("WQ.npy", 2, wq, 11, -0.3f, 0.3f);
    cli_write_f32("WK.npy", 2, wkv, 12, -0.3f, 0.3f);
    cli_write_f32("WV.npy", 2, wkv, 13, -0.3f, 0.3f);
    cli_write_f32("WK4.npy", 2, wkv4, 22, -0.3f, 0.3f);
    cli_write_f32("WV4.npy", 2, wkv4, 23, -0.3f, 0.3f);
    cli_write_f32("WKX.npy", 2, wx, 32, -0.3f, 0.3f);
    cli_write_f32("WVX.npy", 2, wx, 33, -0.3f, 0.3f);
    cli_write_f32("WO.npy", 2, wo, 14, -0.3f, 0.3f);
    cli_write_f32("W1.npy", 2, wq, 41, -0.3f, 0.3f);
    cli_write_f32("BQ.npy", 1, bq, 15, -0.5f, 0.5f);
    cli_write_f32("BK.npy", 1, bkv, 16, -0.5f, 0.5f);
    cli_write_f32("BV.npy", 1, bkv, 19, -0.5f, 0.5f);
    cli_write_f32("BK4.npy", 1, bq, 26, -0.5f, 0.5f);
    cli_write_f32("BV4.npy", 1, bq, 29, -0.5f, 0.5f);
    cli_write_f32("BO.npy", 1, bo, 20, -0.5f, 0.5f);
    return 0;
}

/* Runs `mha --x X.npy --heads 4 <opts> --check --out <out>` and fails the
 * test unless it succeeds. */
static void run_mha(const char *opts, const char *out)
{
    char args[4096];
    snprintf(args, sizeof args, "mha --x %s --heads %d %s --check --out %s", cli_path_of("X.npy"),
             HEADS, opts, cli_path_of(out));
    cli_expect_success(args);
}

/* "--wq <WQ.npy> --wk ..." for the files named, in cli_tmp. */
static void npy_weights(char *buf, size_t size, const char *const names[8])
{
    static const char *const flags[8] = {"--wq", "--wk", "--wv", "--wo",
                                         "--bq", "--bk", "--bv", "--bo"};
    size_t o = 0;
    for (int k = 0; k < 8; k++)
        if (names[k])
            o += (size_t)snprintf(buf + o, size - o, " %s %s", flags[k], cli_path_of(names[k]));
}

/* Hugging Face names under a prefix, among another layer's tensors: the
 * same output as the .npy files, whether the names are given or found. */
static void test_hf_names(void **state)
{
    (void)state;
    npy_array a[10];
    test_st_tensor t[10] = {
        from_npy(&a[0], "W1.npy", "model.layers.1.self_attn.q_proj.weight"),
        from_npy(&a[1], "WQ.npy", PREFIX "q_proj.weight"),
        from_npy(&a[2], "WK.npy", PREFIX "k_proj.weight"),
        from_npy(&a[3], "WV.npy", PREFIX "v_proj.weight"),
        from_npy(&a[4], "WO.npy", PREFIX "o_proj.weight"),
        from_npy(&a[5], "BQ.npy", PREFIX "q_proj.bias"),
        from_npy(&a[6], "BK.npy", PREFIX "k_proj.bias"),
        from_npy(&a[7], "BV.npy", PREFIX "v_proj.bias"),
        from_npy(&a[8], "BO.npy", PREFIX "o_proj.bias"),
        from_npy(&a[9], "WK.npy", "model.layers.1.self_attn.k_proj.weight"),
    };
    test_write_safetensors(cli_path_of("hf.safetensors"), t, 10);
    /* layer 1: its own q_proj, the rest borrowed (a different layer) */
    test_st_tensor t1[4] = {t[0], t[9], t[3], t[4]};
    t1[2].name = "model.layers.1.self_attn.v_proj.weight";
    t1[3].name = "model.layers.1.self_attn.o_proj.weight";
    test_write_safetensors(cli_path_of("hf1.safetensors"), t1, 4);
    for (int k = 0; k < 10; k++)
        npy_free(&a[k]);

    char opts[2048];
    static const char *const files[8] = {"WQ.npy", "WK.npy", "WV.npy", "WO.npy",
                                         "BQ.npy", "BK.npy", "BV.npy", "BO.npy"};
    npy_weights(opts, sizeof opts, files);
    strcat(opts, " --kv-heads 2 --causal");
    run_mha(opts, "Y_npy.npy");
    const char *variants[3] = {"", "--names hf", "--names hf --dtype f32"};
    for (int v = 0; v < 3; v++) {
        snprintf(opts, sizeof opts, "--kv-heads 2 --causal --weights %s --prefix " PREFIX " %s",
                 cli_path_of("hf.safetensors"), variants[v]);
        run_mha(opts, "Y_st.npy");
        cli_compare_outputs("Y_npy.npy", "Y_st.npy", 0, false, "hf names vs .npy files");
    }
    /* another prefix, another layer: the prefix is what selects */
    snprintf(opts, sizeof opts,
             "--kv-heads 2 --causal --weights %s --prefix model.layers.1.self_attn.",
             cli_path_of("hf.safetensors"));
    char err[4096];
    char args[4096];
    snprintf(args, sizeof args, "mha --x %s --heads %d %s --out %s", cli_path_of("X.npy"), HEADS,
             opts, cli_path_of("Y_l1.npy"));
    /* layer 1 of hf.safetensors has q_proj and k_proj only */
    assert_int_equal(cli_run_with("", args, err, sizeof err), 1);
    assert_non_null(strstr(err, "no tensor \"model.layers.1.self_attn.v_proj.weight\""));
    snprintf(opts, sizeof opts,
             "--kv-heads 2 --causal --weights %s --prefix model.layers.1.self_attn.",
             cli_path_of("hf1.safetensors"));
    run_mha(opts, "Y_l1.npy");
    cli_compare_outputs("Y_npy.npy", "Y_l1.npy", 0, true, "another layer's weights");
}

/* nn.MultiheadAttention's state_dict: in_proj_weight [3E, E] and
 * in_proj_bias [3E] packed; out_proj.weight, out_proj.bias. */
static void test_torch_packed(void **state)
{
    (void)state;
    npy_array q = cli_read_npy("WQ.npy"), k = cli_read_npy("WK4.npy"), v = cli_read_npy("WV4.npy");
    npy_array bq = cli_read_npy("BQ.npy"), bk = cli_read_npy("BK4.npy"),
              bv = cli_read_npy("BV4.npy");
    size_t wn = q.nbytes, bn = bq.nbytes;
    unsigned char *w = malloc(3 * wn), *b = malloc(3 * bn);
    assert_true(w && b);
    memcpy(w, q.data, wn);
    memcpy(w + wn, k.data, wn);
    memcpy(w + 2 * wn, v.data, wn);
    memcpy(b, bq.data, bn);
    memcpy(b + bn, bk.data, bn);
    memcpy(b + 2 * bn, bv.data, bn);
    npy_array o, bo;
    test_st_tensor t[4] = {
        {"in_proj_weight", "F32", 2, {3 * HEADS * DH, DM}, w, 3 * wn},
        {"in_proj_bias", "F32", 1, {3 * HEADS * DH}, b, 3 * bn},
        from_npy(&o, "WO.npy", "out_proj.weight"),
        from_npy(&bo, "BO.npy", "out_proj.bias"),
    };
    test_write_safetensors(cli_path_of("torch.safetensors"), t, 4);
    /* nested in a bigger model: "encoder.attn." */
    t[0].name = "encoder.attn.in_proj_weight";
    t[1].name = "encoder.attn.in_proj_bias";
    t[2].name = "encoder.attn.out_proj.weight";
    t[3].name = "encoder.attn.out_proj.bias";
    test_write_safetensors(cli_path_of("torch_nested.safetensors"), t, 4);
    free(w);
    free(b);
    npy_array all[8] = {q, k, v, bq, bk, bv, o, bo};
    for (int i = 0; i < 8; i++)
        npy_free(&all[i]);

    char opts[2048];
    static const char *const files[8] = {"WQ.npy", "WK4.npy", "WV4.npy", "WO.npy",
                                         "BQ.npy", "BK4.npy", "BV4.npy", "BO.npy"};
    npy_weights(opts, sizeof opts, files);
    run_mha(opts, "Y_npy.npy");
    const char *variants[3] = {"", "--names torch", "--prefix encoder.attn."};
    for (int i = 0; i < 3; i++) {
        snprintf(opts, sizeof opts, "--weights %s %s",
                 cli_path_of(i == 2 ? "torch_nested.safetensors" : "torch.safetensors"),
                 variants[i]);
        run_mha(opts, "Y_st.npy");
        cli_compare_outputs("Y_npy.npy", "Y_st.npy", 0, false, "torch packed vs .npy files");
    }
}

/* kdim != embed_dim: q/k/v_proj_weight separate (torch), cross-attention;
 * no biases; then a vdim of its own (--key, --value). */
static void test_torch_separate(void **state)
{
    (void)state;
    npy_array a[4];
    test_st_tensor t[4] = {
        from_npy(&a[0], "WO.npy", "out_proj.weight"),
        from_npy(&a[1], "WQ.npy", "q_proj_weight"),
        from_npy(&a[2], "WKX.npy", "k_proj_weight"),
        from_npy(&a[3], "WVX.npy", "v_proj_weight"),
    };
    test_write_safetensors(cli_path_of("cross.safetensors"), t, 4);
    for (int k = 0; k < 4; k++)
        npy_free(&a[k]);
    char opts[2048];
    static const char *const files[8] = {"WQ.npy", "WKX.npy", "WVX.npy", "WO.npy"};
    npy_weights(opts, sizeof opts, files);
    size_t n = strlen(opts);
    snprintf(opts + n, sizeof opts - n, " --kv %s", cli_path_of("CX.npy"));
    run_mha(opts, "Y_npy.npy");
    snprintf(opts, sizeof opts, "--weights %s --kv %s", cli_path_of("cross.safetensors"),
             cli_path_of("CX.npy"));
    run_mha(opts, "Y_st.npy");
    cli_compare_outputs("Y_npy.npy", "Y_st.npy", 0, false, "torch separate vs .npy files");

    /* and vdim 32 apart from kdim 48: --key and --value, v_proj_weight [64, 32] */
    int64_t vin[3] = {B, TC, 32}, wvv[2] = {HEADS * DH, 32};
    cli_write_f32("VX32.npy", 3, vin, 34, -1, 1);
    cli_write_f32("WV32.npy", 2, wvv, 35, -0.3f, 0.3f);
    t[3] = from_npy(&a[3], "WV32.npy", "v_proj_weight");
    for (int k = 0; k < 3; k++)
        t[k] = from_npy(&a[k], k == 0 ? "WO.npy" : k == 1 ? "WQ.npy" : "WKX.npy", t[k].name);
    test_write_safetensors(cli_path_of("vdim.safetensors"), t, 4);
    for (int k = 0; k < 4; k++)
        npy_free(&a[k]);
    static const char *const vfiles[8] = {"WQ.npy", "WKX.npy", "WV32.npy", "WO.npy"};
    npy_weights(opts, sizeof opts, vfiles);
    n = strlen(opts);
    snprintf(opts + n, sizeof opts - n, " --key %s --value %s", cli_path_of("CX.npy"),
             cli_path_of("VX32.npy"));
    run_mha(opts, "YV_npy.npy");
    snprintf(opts, sizeof opts, "--weights %s --names torch --key %s --value %s",
             cli_path_of("vdim.safetensors"), cli_path_of("CX.npy"), cli_path_of("VX32.npy"));
    run_mha(opts, "YV_st.npy");
    cli_compare_outputs("YV_npy.npy", "YV_st.npy", 0, false, "torch kdim/vdim vs .npy files");
    cli_compare_outputs("YV_st.npy", "Y_st.npy", 0, true, "vdim 32 values vs --kv's");
}

/* BF16 and F16 tensors: the layer gets their exact values, on f32 and
 * bf16 devices alike. */
static void test_half_tensors(void **state)
{
    (void)state;
    npy_array a[4];
    test_st_tensor t[4] = {
        from_npy(&a[0], "WQ.npy", "q_proj.weight"),
        from_npy(&a[1], "WK.npy", "k_proj.weight"),
        from_npy(&a[2], "WV.npy", "v_proj.weight"),
        from_npy(&a[3], "WO.npy", "o_proj.weight"),
    };
    uint16_t *bits[4];
    static const char *const dtypes[4] = {"BF16", "F16", "BF16", "F16"};
    static const char *const widened[8] = {"WQh.npy", "WKh.npy", "WVh.npy", "WOh.npy"};
    for (int k = 0; k < 4; k++) {
        bits[k] = malloc(t[k].nbytes / 2);
        assert_non_null(bits[k]);
        to_half(&t[k], dtypes[k], bits[k], widened[k]);
    }
    test_write_safetensors(cli_path_of("half.safetensors"), t, 4);
    for (int k = 0; k < 4; k++) {
        free(bits[k]);
        npy_free(&a[k]);
    }
    const char *dtype[2] = {"f32", "bf16"};
    for (int d = 0; d < 2; d++) {
        char opts[2048];
        npy_weights(opts, sizeof opts, widened);
        size_t n = strlen(opts);
        snprintf(opts + n, sizeof opts - n, " --kv-heads 2 --dtype %s", dtype[d]);
        run_mha(opts, "Y_npy.npy");
        snprintf(opts, sizeof opts, "--kv-heads 2 --dtype %s --weights %s", dtype[d],
                 cli_path_of("half.safetensors"));
        run_mha(opts, "Y_st.npy");
        cli_compare_outputs("Y_npy.npy", "Y_st.npy", 0, false, "F16/BF16 tensors vs widened");
    }
}

/* --weight-dtype: the layer keeps its weights in f16, bf16 or q8_0 while
 * its activations are f32 or bf16; --check (run_mha) holds each to the
 * reference, which converts the weights the same way, through the forward
 * and the decode steps; q8_0 stays within 5e-2 of the f32 weights. */
static void test_weight_dtypes(void **state)
{
    (void)state;
    static const char *const files[8] = {"WQ.npy", "WK.npy", "WV.npy", "WO.npy",
                                         "BQ.npy", "BK.npy", "BV.npy", "BO.npy"};
    char w[2048], opts[2600];
    npy_weights(w, sizeof w, files);
    snprintf(opts, sizeof opts, "%s --kv-heads 2 --causal", w);
    run_mha(opts, "Y_f32w.npy");
    static const char *const runs[][2] = {
        {"q8_0", "f32"}, {"q8_0", "bf16"}, {"bf16", "f32"}, {"f16", "bf16"}};
    for (size_t r = 0; r < sizeof runs / sizeof runs[0]; r++) {
        for (int prefill = 0; prefill < 2; prefill++) {
            snprintf(opts, sizeof opts, "%s --kv-heads 2 --causal --weight-dtype %s --dtype %s%s",
                     w, runs[r][0], runs[r][1], prefill ? " --prefill 3" : "");
            run_mha(opts, "Y_wd.npy");
        }
        if (strcmp(runs[r][1], "f32") == 0)
            cli_compare_outputs("Y_f32w.npy", "Y_wd.npy", 5e-2, false, runs[r][0]);
    }
}

/* A file `name` holding the hf layer (no biases) with tensor `bad` (by
 * index) renamed, retyped or reshaped as given (NULL / 0: kept); bad < 0:
 * an extra one-element tensor `new_name` instead. */
static void write_bad_layer(const char *name, int bad, const char *new_name, const char *dtype,
                            uint32_t rank, const int64_t *shape)
{
    npy_array a[4];
    test_st_tensor t[5] = {
        from_npy(&a[0], "WQ.npy", "q_proj.weight"),
        from_npy(&a[1], "WK.npy", "k_proj.weight"),
        from_npy(&a[2], "WV.npy", "v_proj.weight"),
        from_npy(&a[3], "WO.npy", "o_proj.weight"),
    };
    int n = 4;
    if (bad >= 0) {
        if (new_name)
            t[bad].name = new_name;
        if (dtype)
            t[bad].dtype = dtype;
        if (rank) {
            t[bad].rank = rank;
            size_t elems = 1;
            for (uint32_t d = 0; d < rank; d++)
                elems *= (size_t)(t[bad].shape[d] = shape[d]);
            size_t esize = dtype && strcmp(dtype, "I64") == 0 ? 8 : 4;
            assert_true(elems * esize <= t[bad].nbytes);
            t[bad].nbytes = elems * esize;
        }
    } else { /* an extra torch tensor */
        t[n++] = (test_st_tensor){new_name, "F32", 1, {1}, a[0].data, 4};
    }
    test_write_safetensors(cli_path_of(name), t, n);
    for (int k = 0; k < 4; k++)
        npy_free(&a[k]);
}

/* Every bad file and flag: the exit status, a message naming what is
 * wrong, and no output file. */
static void test_errors(void **state)
{
    (void)state;
    write_bad_layer("nok.safetensors", 1, "kk_proj.weight", NULL, 0, NULL);
    write_bad_layer("i64.safetensors", 2, NULL, "I64", 2, (int64_t[2]){KV_HEADS * DH / 2, DM});
    write_bad_layer("shape.safetensors", 0, NULL, NULL, 2, (int64_t[2]){HEADS * DH, DM / 2});
    write_bad_layer("rank3.safetensors", 3, NULL, NULL, 3, (int64_t[3]){DM, 2, 32});
    write_bad_layer("good.safetensors", -1, "unused", NULL, 0, NULL);
    /* torch names with add_bias_kv's bias_k but no bias_v (they come together) */
    npy_array w = cli_read_npy("WQ.npy"), wo = cli_read_npy("WO.npy");
    const size_t kv_bytes = (size_t)KV_HEADS * DH * DM * 4;
    test_st_tensor tb[5] = {
        {"q_proj_weight", "F32", 2, {HEADS * DH, DM}, w.data, w.nbytes},
        {"k_proj_weight", "F32", 2, {KV_HEADS * DH, DM}, w.data, kv_bytes},
        {"v_proj_weight", "F32", 2, {KV_HEADS * DH, DM}, w.data, kv_bytes},
        {"out_proj.weight", "F32", 2, {DM, HEADS * DH}, wo.data, wo.nbytes},
        {"bias_k", "F32", 3, {1, 1, KV_HEADS * DH}, wo.data, KV_HEADS * DH * 4}};
    test_write_safetensors(cli_path_of("biaskv.safetensors"), tb, 5);
    npy_free(&w);
    npy_free(&wo);
    /* truncated: the last tensor runs past the end; garbage header */
    char good_path[512];
    snprintf(good_path, sizeof good_path, "%s", cli_path_of("good.safetensors"));
    FILE *f = fopen(good_path, "rb");
    assert_non_null(f);
    static unsigned char bytes[1 << 16];
    size_t size = fread(bytes, 1, sizeof bytes, f);
    fclose(f);
    assert_true(size > 100 && size < sizeof bytes);
    test_write_bytes(cli_path_of("trunc.safetensors"), bytes, size - 7);
    memcpy(bytes + 8, "{\"x\" ,", 6); /* a key without a value */
    test_write_bytes(cli_path_of("json.safetensors"), bytes, size);
    test_write_bytes(cli_path_of("short.safetensors"), "\x10\0\0", 3);

    static const struct {
        const char *opts;
        int status;
        const char *says;
    } cases[] = {
        {"--weights @nok.safetensors", 1, "no tensor \"k_proj.weight\""},
        {"--weights @nok.safetensors --names torch", 1, "no tensor \"q_proj_weight\""},
        {"--weights @good.safetensors --prefix enc.", 1, "no tensor name starts with --prefix"},
        {"--weights @good.safetensors --prefix q_", 1, "the file has \"q_proj.weight\""},
        {"--weights @i64.safetensors", 1, "\"v_proj.weight\" is I64"},
        {"--weights @shape.safetensors", 1, "shape.safetensors:q_proj.weight"},
        {"--weights @rank3.safetensors", 1, "\"o_proj.weight\" has 3 dimensions"},
        {"--weights @biaskv.safetensors", 1, "--bias-k needs --bias-v too"},
        {"--weights @trunc.safetensors", 1, "are not inside the data section"},
        {"--weights @json.safetensors", 1, "not valid JSON"},
        {"--weights @short.safetensors", 1, "too short"},
        {"--weights @missing.safetensors", 1, "missing.safetensors: cannot open"},
        {"--weights @good.safetensors --wq @WQ.npy", 2, "drop --wq"},
        {"--weights @good.safetensors --bo @BO.npy", 2, "drop --bo"},
        {"--wq @WQ.npy --wk @WK.npy --wv @WV.npy --wo @WO.npy --prefix a.", 2,
         "--prefix needs --weights"},
        {"--weights @good.safetensors --names jax", 2, "--names \"jax\""},
        {"--weights @Y_bad.npy", 2, "--weights"}, /* --out names the same file */
        {"--weights @good.safetensors --weight-dtype q4_0", 2,
         "--weight-dtype \"q4_0\": expected f32, f16, bf16 or q8_0"},
        {"--weights @good.safetensors --dtype f16 --weight-dtype f32", 2,
         "--weight-dtype f32 with --dtype f16"},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        char opts[2048], args[4096], err[4096];
        size_t o = 0;
        for (const char *s = cases[c].opts; *s && o + 600 < sizeof opts;) {
            if (*s == '@') { /* @name: the file in cli_tmp */
                char name[64];
                size_t n = strcspn(s + 1, " ");
                snprintf(name, sizeof name, "%.*s", (int)n, s + 1);
                o += (size_t)snprintf(opts + o, sizeof opts - o, "%s", cli_path_of(name));
                s += 1 + n;
            } else {
                opts[o++] = *s++;
            }
        }
        opts[o] = '\0';
        snprintf(args, sizeof args, "mha --x %s --heads %d --kv-heads 2 %s --out %s",
                 cli_path_of("X.npy"), HEADS, opts, cli_path_of("Y_bad.npy"));
        int status = cli_run_with("", args, err, sizeof err);
        const char *says = cases[c].says;
        if (status != cases[c].status || !strstr(err, says))
            fail_msg("case %zu (%s): exit %d (expected %d), stderr:\n%s\n(expected \"%s\")", c,
                     cases[c].opts, status, cases[c].status, err, says);
        if (cli_exists(cli_path_of("Y_bad.npy")))
            fail_msg("case %zu (%s) left an output file", c, cases[c].opts);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hf_names),       cmocka_unit_test(test_torch_packed),
        cmocka_unit_test(test_torch_separate), cmocka_unit_test(test_half_tensors),
        cmocka_unit_test(test_weight_dtypes),  cmocka_unit_test(test_errors),
    };
    return cmocka_run_group_tests(tests, group_setup, cli_teardown);
}
