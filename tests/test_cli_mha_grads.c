/* vkattn mha --dropout / --seed / --grad-out / --grads as a user runs them:
 * every gradient file (dx, dkv, dvalue, the projections' weights and
 * biases, QK-norm weights, sinks) against vkattn_ref_mha_backward called
 * here on the same inputs (self-attention with biases, GQA, causal; with
 * dropout; f16 storage; RoPE with QK-norm and sinks; cross-attention with
 * --kv and with --key/--value; weights from --weights without biases),
 * the dropout's Y against the reference forward, --check's report, and the
 * refusals (ours and the layer's) naming the flags with no file left. */
#include "npy/npy.h"
#include "test_cli_util.h"
#include "test_util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { B = 2, T = 7, TK = 9, DM = 32, H = 4, G = 2, DH = 8, DKV = 24, DVIN = 20 };

static int group_setup(void **state)
{
    if (cli_setup(state) != 0)
        return -1;
    const int64_t xs[3] = {B, T, DM}, cs[3] = {B, TK, DKV}, vs[3] = {B, TK, DVIN};
    cli_write_f32("X.npy", 3, xs, 1, -1, 1);
    cli_write_f32("DY.npy", 3, xs, 2, -1, 1);
    cli_write_f32("C.npy", 3, cs, 3, -1, 1);
    cli_write_f32("V.npy", 3, vs, 4, -1, 1);
    const int64_t bad[3] = {B, T + 1, DM};
    cli_write_f32("DYbad.npy", 3, bad, 5, -1, 1);
    /* q8_0 weights need in_features a multiple of 64 */
    const int64_t x64[3] = {B, T, 64}, w64[2] = {64, 64};
    cli_write_f32("X64.npy", 3, x64, 6, -1, 1);
    cli_write_f32("DY64.npy", 3, x64, 7, -1, 1);
    cli_write_f32("W64.npy", 2, w64, 8, -0.2f, 0.2f);
    /* self-attention weights [out, in], and cross-attention's */
    const int64_t wq[2] = {H * DH, DM}, wk[2] = {G * DH, DM}, wo[2] = {DM, H * DH};
    const int64_t ck[2] = {G * DH, DKV}, cv[2] = {G * DH, DVIN};
    const float a = 0.3f;
    cli_write_f32("WQ.npy", 2, wq, 11, -a, a);
    cli_write_f32("WK.npy", 2, wk, 12, -a, a);
    cli_write_f32("WV.npy", 2, wk, 13, -a, a);
    cli_write_f32("WO.npy", 2, wo, 14, -a, a);
    cli_write_f32("CK.npy", 2, ck, 15, -a, a);
    cli_write_f32("CV.npy", 2, ck, 16, -a, a);
    cli_write_f32("VV.npy", 2, cv, 17, -a, a);
    const int64_t bq[1] = {H * DH}, bk[1] = {G * DH}, bo[1] = {DM}, dh[1] = {DH}, h[1] = {H};
    cli_write_f32("BQ.npy", 1, bq, 21, -a, a);
    cli_write_f32("BK.npy", 1, bk, 22, -a, a);
    cli_write_f32("BV.npy", 1, bk, 23, -a, a);
    cli_write_f32("BO.npy", 1, bo, 24, -a, a);
    cli_write_f32("QN.npy", 1, dh, 25, 0.5f, 1.5f);
    cli_write_f32("KN.npy", 1, dh, 26, 0.5f, 1.5f);
    cli_write_f32("S.npy", 1, h, 27, -1, 1);
    const float hm[H] = {1, 0.5f, 1, 0};
    cli_write_npy("HM.npy", NPY_F32, 1, h, hm);
    return 0;
}

/* One layer of the test: which inputs it has (file names in cli_tmp,
 * NULL: none) and its options. */
typedef struct layer_case {
    const char *kv, *value;          /* --kv / --key, --value */
    const char *wk, *wv;             /* WK.npy, WV.npy or the cross ones */
    bool bias, qk_norm, sinks, rope; /* --bq..--bo, --q-norm/--k-norm, --sinks, --rope-theta */
    float dropout;
    uint64_t seed;
    vkattn_dtype dtype;
} layer_case;

/* The command line of `c` writing PREFIX.* in cli_tmp, plus `extra`. */
static void mha_args(char *buf, size_t size, const layer_case *c, const char *prefix,
                     const char *extra)
{
    int n = snprintf(buf, size,
                     "mha --x %s --heads %d --kv-heads %d --wq %s --wk %s --wv %s --wo %s "
                     "--causal --out %s/%s.y.npy --grad-out %s --grads %s/%s",
                     cli_path_of("X.npy"), H, G, cli_path_of("WQ.npy"), cli_path_of(c->wk),
                     cli_path_of(c->wv), cli_path_of("WO.npy"), cli_tmp, prefix,
                     cli_path_of("DY.npy"), cli_tmp, prefix);
    if (c->kv)
        n += snprintf(buf + n, size - n, " %s %s", c->value ? "--key" : "--kv", cli_path_of(c->kv));
    if (c->value)
        n += snprintf(buf + n, size - n, " --value %s", cli_path_of(c->value));
    if (c->bias)
        n += snprintf(buf + n, size - n, " --bq %s --bk %s --bv %s --bo %s", cli_path_of("BQ.npy"),
                      cli_path_of("BK.npy"), cli_path_of("BV.npy"), cli_path_of("BO.npy"));
    if (c->qk_norm)
        n += snprintf(buf + n, size - n, " --q-norm %s --k-norm %s", cli_path_of("QN.npy"),
                      cli_path_of("KN.npy"));
    if (c->sinks)
        n += snprintf(buf + n, size - n, " --sinks %s", cli_path_of("S.npy"));
    if (c->rope)
        n += snprintf(buf + n, size - n, " --rope-theta 10000");
    if (c->dropout > 0)
        n += snprintf(buf + n, size - n, " --dropout %g --seed %llu", (double)c->dropout,
                      (unsigned long long)c->seed);
    if (c->dtype != VKATTN_DTYPE_F32)
        n += snprintf(buf + n, size - n, " --dtype %s", vkattn_dtype_name(c->dtype));
    snprintf(buf + n, size - n, " %s", extra);
}

/* A file's data, rounded to `dt` as the tool stores it (weights too:
 * without --weight-dtype they are kept in --dtype). */
static float *load(const char *name, vkattn_dtype dt, npy_array *keep)
{
    *keep = cli_read_npy(name);
    test_round_to(dt, keep->data,
                  (size_t)(keep->shape[0] * (keep->rank > 1 ? keep->shape[1] : 1) *
                           (keep->rank > 2 ? keep->shape[2] : 1)));
    return keep->data;
}

/* --check's measure, max |got - want| / (1 + |want|): a gradient that is
 * zero in exact arithmetic (k_proj.bias: softmax ignores a shift common to
 * a query's scores) is rounding noise, which a measure relative to the
 * largest value would blow up. */
static void expect_close(const float *got, const float *want, size_t n, double tol,
                         const char *what)
{
    double worst = 0;
    size_t at = 0;
    for (size_t i = 0; i < n; i++) {
        double e = fabs((double)got[i] - want[i]) / (1.0 + fabs((double)want[i]));
        if (!(e <= worst)) { /* NaN too */
            worst = isnan(e) ? INFINITY : e;
            at = i;
        }
    }
    if (!(worst <= tol))
        fail_msg("%s: error %.3g at %zu (got %.9g, want %.9g), tolerance %.3g", what, worst, at,
                 (double)got[at], (double)want[at], tol);
}

enum { N_FILES = 14 };
static const char *const grad_names[N_FILES] = {"dx",
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

/* The reference's gradients of `c` against PREFIX.<name>.npy (shapes and
 * values within tol), the files `c` has no gradient for absent, and Y
 * against the reference forward (with its dropout). */
static void expect_grads(const layer_case *c, const char *prefix, double tol)
{
    vkattn_dtype dt = c->dtype;
    npy_array arr[16];
    int na = 0;
    const bool cross = c->kv != NULL;
    const int64_t dkv = cross ? DKV : DM, dvin = c->value ? DVIN : dkv;
    vkattn_mha_desc desc = {.embed_dim = DM,
                            .num_heads = H,
                            .num_kv_heads = G,
                            .kv_dim = (uint32_t)dkv,
                            .value_dim = (uint32_t)dvin,
                            .bias = c->bias,
                            .dtype = dt,
                            .qk_norm = c->qk_norm,
                            .sinks = c->sinks};
    if (c->rope)
        desc.rope.theta = 10000;
    vkattn_mha_weights w = {.wq = load("WQ.npy", dt, &arr[na++]),
                            .wk = load(c->wk, dt, &arr[na++]),
                            .wv = load(c->wv, dt, &arr[na++]),
                            .wo = load("WO.npy", dt, &arr[na++])};
    if (c->bias) {
        w.bq = load("BQ.npy", dt, &arr[na++]);
        w.bk = load("BK.npy", dt, &arr[na++]);
        w.bv = load("BV.npy", dt, &arr[na++]);
        w.bo = load("BO.npy", dt, &arr[na++]);
    }
    if (c->qk_norm) {
        w.q_norm = load("QN.npy", dt, &arr[na++]);
        w.k_norm = load("KN.npy", dt, &arr[na++]);
    }
    if (c->sinks) /* kept f32 */
        w.sinks = load("S.npy", VKATTN_DTYPE_F32, &arr[na++]);
    const int64_t xs[3] = {B, T, DM}, cs[3] = {B, TK, dkv}, vs[3] = {B, TK, dvin};
    float *x = load("X.npy", dt, &arr[na++]), *dy = load("DY.npy", dt, &arr[na++]);
    float *y = test_alloc((size_t)B * T * DM * 4);
    vkattn_ref_mha_backward_args b = {
        .forward = {.x = vkattn_host_tensor_make(x, VKATTN_DTYPE_F32, 3, xs),
                    .y = vkattn_host_tensor_make(y, VKATTN_DTYPE_F32, 3, xs),
                    .causal = true,
                    .dropout_p = c->dropout,
                    .dropout_seed = c->seed},
        .dy = vkattn_host_tensor_make(dy, VKATTN_DTYPE_F32, 3, xs)};
    if (cross)
        b.forward.kv =
            vkattn_host_tensor_make(load(c->kv, dt, &arr[na++]), VKATTN_DTYPE_F32, 3, cs);
    if (c->value)
        b.forward.value =
            vkattn_host_tensor_make(load(c->value, dt, &arr[na++]), VKATTN_DTYPE_F32, 3, vs);
    /* the gradients' shapes; rank 0: none */
    const int64_t wq_rows = H * DH, wk_rows = G * DH;
    const struct {
        uint32_t rank;
        int64_t shape[3];
    } want[N_FILES] = {
        {3, {B, T, DM}},
        {cross ? 3u : 0u, {B, TK, dkv}},
        {c->value ? 3u : 0u, {B, TK, dvin}},
        {2, {wq_rows, DM}},
        {2, {wk_rows, dkv}},
        {2, {wk_rows, dvin}},
        {2, {DM, wq_rows}},
        {c->bias ? 1u : 0u, {wq_rows}},
        {c->bias ? 1u : 0u, {wk_rows}},
        {c->bias ? 1u : 0u, {wk_rows}},
        {c->bias ? 1u : 0u, {DM}},
        {c->qk_norm ? 1u : 0u, {DH}},
        {c->qk_norm ? 1u : 0u, {DH}},
        {c->sinks ? 1u : 0u, {H}},
    };
    vkattn_host_tensor *slots[N_FILES] = {
        &b.dx,       &b.dkv,          &b.dvalue,       &b.grads.wq,   &b.grads.wk,
        &b.grads.wv, &b.grads.wo,     &b.grads.bq,     &b.grads.bk,   &b.grads.bv,
        &b.grads.bo, &b.grads.q_norm, &b.grads.k_norm, &b.grads.sinks};
    float *ref[N_FILES] = {0};
    size_t n[N_FILES] = {0};
    for (int i = 0; i < N_FILES; i++) {
        if (!want[i].rank)
            continue;
        n[i] = 1;
        for (uint32_t d = 0; d < want[i].rank; d++)
            n[i] *= (size_t)want[i].shape[d];
        ref[i] = test_alloc(n[i] * 4);
        *slots[i] = vkattn_host_tensor_make(ref[i], VKATTN_DTYPE_F32, want[i].rank, want[i].shape);
    }
    char err[512];
    if (vkattn_ref_mha_backward(&desc, &w, &b, err, sizeof err) != VKATTN_SUCCESS)
        fail_msg("reference backward: %s", err);
    for (int i = 0; i < N_FILES; i++) {
        char file[128];
        snprintf(file, sizeof file, "%s.%s.npy", prefix, grad_names[i]);
        if (!want[i].rank) {
            if (cli_exists(cli_path_of(file)))
                fail_msg("%s written, but the layer has no such gradient", file);
            continue;
        }
        npy_array got = cli_read_npy(file);
        assert_int_equal(got.dtype, NPY_F32);
        assert_int_equal(got.rank, want[i].rank);
        for (uint32_t d = 0; d < got.rank; d++)
            assert_int_equal(got.shape[d], want[i].shape[d]);
        expect_close(got.data, ref[i], n[i], tol, file);
        npy_free(&got);
        free(ref[i]);
    }
    /* Y with that dropout */
    if (vkattn_ref_mha(&desc, &w, &b.forward, err, sizeof err) != VKATTN_SUCCESS)
        fail_msg("reference forward: %s", err);
    char file[128];
    snprintf(file, sizeof file, "%s.y.npy", prefix);
    npy_array got = cli_read_npy(file);
    expect_close(got.data, y, (size_t)B * T * DM, dt == VKATTN_DTYPE_F32 ? 2e-4 : 2e-2, file);
    npy_free(&got);
    free(y);
    for (int i = 0; i < na; i++)
        npy_free(&arr[i]);
}

/* Runs `c` with --check, expects a report line per gradient it has, then
 * its files against the reference. */
static void run_case(const layer_case *c, const char *prefix)
{
    char args[4096];
    mha_args(args, sizeof args, c, prefix, "--check");
    cli_expect_success(args);
    char out[8192];
    cli_read_text(cli_path_of("stdout.txt"), out, sizeof out);
    const char *lines[3] = {"dx: max error", "o_proj.weight: max error",
                            c->bias ? "q_proj.bias: max error" : "dx: max error"};
    for (int i = 0; i < 3; i++)
        if (!strstr(out, lines[i]))
            fail_msg("vkattn %s: stdout \"%s\" has no \"%s\"", args, out, lines[i]);
    expect_grads(c, prefix, c->dtype == VKATTN_DTYPE_F32 ? 2e-4 : 2e-2);
}

static void test_self_attention(void **state)
{
    (void)state;
    layer_case c = {.wk = "WK.npy", .wv = "WV.npy", .bias = true};
    run_case(&c, "s");
    c.dropout = 0.2f;
    c.seed = 12345678901ull;
    run_case(&c, "sd");
    cli_compare_outputs("s.dx.npy", "sd.dx.npy", 0, true, "dropout, dx");
    c.dtype = VKATTN_DTYPE_F16;
    run_case(&c, "sd16");
}

static void test_decoder_layer(void **state)
{
    (void)state;
    layer_case c = {.wk = "WK.npy", .wv = "WV.npy", .qk_norm = true, .sinks = true, .rope = true};
    run_case(&c, "r");
}

static void test_cross_attention(void **state)
{
    (void)state;
    layer_case c = {.kv = "C.npy", .wk = "CK.npy", .wv = "CV.npy", .bias = true};
    run_case(&c, "c");
    layer_case kv = {.kv = "C.npy", .value = "V.npy", .wk = "CK.npy", .wv = "VV.npy"};
    run_case(&kv, "kv");
}

/* Weights from --weights without biases: the bias files (staged, since
 * the file could have had them) are not written. */
static void test_weights_file(void **state)
{
    (void)state;
    layer_case c = {.wk = "WK.npy", .wv = "WV.npy"};
    char args[4096], save[512];
    snprintf(save, sizeof save, "--save-weights %s", cli_path_of("L.safetensors"));
    mha_args(args, sizeof args, &c, "w0", save);
    cli_expect_success(args);
    snprintf(args, sizeof args,
             "mha --x %s --heads %d --kv-heads %d --weights %s --causal --out %s/wf.y.npy "
             "--grad-out %s --grads %s/wf --check",
             cli_path_of("X.npy"), H, G, cli_path_of("L.safetensors"), cli_tmp,
             cli_path_of("DY.npy"), cli_tmp);
    cli_expect_success(args);
    expect_grads(&c, "wf", 2e-4);
}

static void expect_refused(const char *args, const char *needle, const char *prefix)
{
    char err[4096];
    int code = cli_run_with("", args, err, sizeof err);
    if (code == 0 || !strstr(err, needle))
        fail_msg("vkattn %s: exit %d, stderr \"%s\" (expected a refusal naming \"%s\")", args, code,
                 err, needle);
    static const char *const some[3] = {"y", "dx", "q_proj.weight"};
    for (int i = 0; prefix && i < 3; i++) {
        char file[128];
        snprintf(file, sizeof file, "%s.%s.npy", prefix, some[i]);
        if (cli_exists(cli_path_of(file)))
            fail_msg("vkattn %s: left %s behind", args, file);
    }
}

static void test_refusals(void **state)
{
    (void)state;
    const layer_case c = {.wk = "WK.npy", .wv = "WV.npy"};
    char base[4096], args[8192];
    mha_args(base, sizeof base, &c, "e", "");
    /* without --grad-out / --grads: cut them off the base command */
    char plain[4096];
    snprintf(plain, sizeof plain, "%s", base);
    *strstr(plain, " --grad-out") = '\0';
    snprintf(args, sizeof args, "%s --grads %s/e", plain, cli_tmp);
    expect_refused(args, "--grads needs --grad-out DY.npy", "e");
    snprintf(args, sizeof args, "%s --grad-out %s", plain, cli_path_of("DY.npy"));
    expect_refused(args, "--grad-out needs --grads", "e");
    snprintf(args, sizeof args, "%s --seed 3", plain);
    expect_refused(args, "--seed is the dropout's", "e");
    snprintf(args, sizeof args, "%s --dropout 1", plain);
    expect_refused(args, "--dropout 1", "e");
    snprintf(args, sizeof args, "%s --prefill 2 --dropout 0.1", plain);
    expect_refused(args, "--prefill with --dropout", "e");
    snprintf(args, sizeof args, "%s --seq-first", base);
    expect_refused(args, "--seq-first with --grads", "e");
    snprintf(args, sizeof args, "%s --prune-heads 1", base);
    expect_refused(args, "--prune-heads with --grads", "e");
    /* DY not Y's shape */
    snprintf(args, sizeof args, "%s", base);
    char *dy = strstr(args, "DY.npy");
    memmove(dy + 5, dy + 2, strlen(dy + 2) + 1);
    memcpy(dy, "DYbad", 5);
    expect_refused(args, "--grad-out", "e");
    /* the layer's own refusals, after its forward: nothing written */
    snprintf(args, sizeof args, "%s --head-mask %s --check", base, cli_path_of("HM.npy"));
    expect_refused(args, "--head-mask is given: the layer's backward has no head mask", "e");
    snprintf(args, sizeof args, "%s --bias-k %s --bias-v %s", base, cli_path_of("BK.npy"),
             cli_path_of("BV.npy"));
    expect_refused(args, "add_bias_kv or add_zero_attn (--bias-k, --add-zero-attn)", "e");
    const char *w64 = cli_path_of("W64.npy");
    snprintf(args, sizeof args,
             "mha --x %s --heads 4 --wq %s --wk %s --wv %s --wo %s --out %s/e.y.npy --grad-out %s "
             "--grads %s/e --weight-dtype q8_0",
             cli_path_of("X64.npy"), w64, w64, w64, w64, cli_tmp, cli_path_of("DY64.npy"), cli_tmp);
    expect_refused(args, "--weight-dtype is q8_0: quantized weights have no backward", "e");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_self_attention),  cmocka_unit_test(test_decoder_layer),
        cmocka_unit_test(test_cross_attention), cmocka_unit_test(test_weights_file),
        cmocka_unit_test(test_refusals),
    };
    return cmocka_run_group_tests(tests, group_setup, cli_teardown);
}
