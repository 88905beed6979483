/* vkattn attention --dropout / --seed / --grad-out / --grads as a user
 * runs them: the gradient files against vkattn_ref_attention_backward
 * called here on the same inputs (GQA, causal, dropout, f32 2e-4; f16 and
 * bf16 storage 2e-2), the dropout's output against the reference forward,
 * the same seed giving the same bits and another seed other ones, --check
 * passing, and every wrong combination refused naming the flags with no
 * output file left. */
#include "npy/npy.h"
#include "test_cli_util.h"
#include "test_util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { B = 2, HQ = 4, HKV = 2, TQ = 9, TK = 13, D = 16 };
static const int64_t qsh[4] = {B, HQ, TQ, D}, ksh[4] = {B, HKV, TK, D};

static int group_setup(void **state)
{
    if (cli_setup(state) != 0)
        return -1;
    cli_write_f32("Q.npy", 4, qsh, 41, -1.5f, 1.5f);
    cli_write_f32("K.npy", 4, ksh, 42, -1.5f, 1.5f);
    cli_write_f32("V.npy", 4, ksh, 43, -1, 1);
    cli_write_f32("DO.npy", 4, qsh, 44, -1, 1);
    const int64_t bad[4] = {B, HQ, TQ + 1, D};
    cli_write_f32("DObad.npy", 4, bad, 45, -1, 1);
    return 0;
}

/* The reference's gradients of the files Q, K, V, DO (causal, dropout p
 * with seed) compared with PREFIX.d?.npy within tol (the inputs rounded to
 * `dt` first, as the tool stores them). */
static void expect_grads(const char *prefix, float p, uint64_t seed, vkattn_dtype dt, double tol)
{
    npy_array q = cli_read_npy("Q.npy"), k = cli_read_npy("K.npy"), v = cli_read_npy("V.npy"),
              g = cli_read_npy("DO.npy");
    float *in[4] = {q.data, k.data, v.data, g.data};
    const size_t n[4] = {(size_t)B * HQ * TQ * D, (size_t)B * HKV * TK * D,
                         (size_t)B * HKV * TK * D, (size_t)B * HQ * TQ * D};
    for (int i = 0; i < 4; i++)
        test_round_to(dt, in[i], n[i]);
    float *want[3], *out = test_alloc(n[0] * 4);
    for (int i = 0; i < 3; i++)
        want[i] = test_alloc(n[i] * 4);
    vkattn_ref_attention_backward_args b = {
        .forward = {.q = vkattn_host_tensor_make(q.data, VKATTN_DTYPE_F32, 4, qsh),
                    .k = vkattn_host_tensor_make(k.data, VKATTN_DTYPE_F32, 4, ksh),
                    .v = vkattn_host_tensor_make(v.data, VKATTN_DTYPE_F32, 4, ksh),
                    .out = vkattn_host_tensor_make(out, VKATTN_DTYPE_F32, 4, qsh),
                    .causal = true,
                    .dropout_p = p,
                    .dropout_seed = seed},
        .dout = vkattn_host_tensor_make(g.data, VKATTN_DTYPE_F32, 4, qsh),
        .dq = vkattn_host_tensor_make(want[0], VKATTN_DTYPE_F32, 4, qsh),
        .dk = vkattn_host_tensor_make(want[1], VKATTN_DTYPE_F32, 4, ksh),
        .dv = vkattn_host_tensor_make(want[2], VKATTN_DTYPE_F32, 4, ksh)};
    char err[512];
    if (vkattn_ref_attention_backward(&b, err, sizeof err) != VKATTN_SUCCESS)
        fail_msg("reference backward: %s", err);
    static const char *const names[3] = {"dq", "dk", "dv"};
    for (int i = 0; i < 3; i++) {
        char file[128];
        snprintf(file, sizeof file, "%s.%s.npy", prefix, names[i]);
        npy_array got = cli_read_npy(file);
        assert_int_equal(got.rank, 4);
        assert_true((size_t)(got.shape[0] * got.shape[1] * got.shape[2] * got.shape[3]) == n[i]);
        test_assert_close(got.data, want[i], n[i], tol, file);
        npy_free(&got);
    }
    /* the forward's output with that dropout */
    if (vkattn_ref_attention(&b.forward, err, sizeof err) != VKATTN_SUCCESS)
        fail_msg("reference forward: %s", err);
    char file[128];
    snprintf(file, sizeof file, "%s.out.npy", prefix);
    npy_array o = cli_read_npy(file);
    test_assert_close(o.data, out, n[0], dt == VKATTN_DTYPE_F32 ? 2e-4 : 2e-2, file);
    npy_free(&o);
    for (int i = 0; i < 3; i++)
        free(want[i]);
    free(out);
    npy_free(&q), npy_free(&k), npy_free(&v), npy_free(&g);
}

static void run_grads(const char *prefix, const char *extra)
{
    char args[1024];
    snprintf(args, sizeof args,
             "attention --q %s --k %s --v %s --out %s/%s.out.npy --causal --grad-out %s "
             "--grads %s/%s %s",
             cli_path_of("Q.npy"), cli_path_of("K.npy"), cli_path_of("V.npy"), cli_tmp, prefix,
             cli_path_of("DO.npy"), cli_tmp, prefix, extra);
    cli_expect_success(args);
}

static void test_gradients(void **state)
{
    (void)state;
    run_grads("g", "--check");
    expect_grads("g", 0.0f, 0, VKATTN_DTYPE_F32, 2e-4);
    run_grads("gd", "--dropout 0.25 --seed 12345678901 --check");
    expect_grads("gd", 0.25f, 12345678901ull, VKATTN_DTYPE_F32, 2e-4);
    run_grads("gd16", "--dropout 0.25 --seed 12345678901 --dtype f16 --check");
    expect_grads("gd16", 0.25f, 12345678901ull, VKATTN_DTYPE_F16, 2e-2);
    run_grads("gb16", "--dtype bf16 --check");
    expect_grads("gb16", 0.0f, 0, VKATTN_DTYPE_BF16, 2e-2);
    /* the seed is the mask: the same bits again, other bits with another */
    run_grads("gd2", "--dropout 0.25 --seed 12345678901");
    cli_compare_outputs("gd.dq.npy", "gd2.dq.npy", 0, false, "same seed, dq");
    cli_compare_outputs("gd.out.npy", "gd2.out.npy", 0, false, "same seed, out");
    run_grads("gd3", "--dropout 0.25 --seed 5");
    cli_compare_outputs("gd.out.npy", "gd3.out.npy", 0, true, "another seed, out");
}

static void expect_refused(const char *args, const char *needle, const char *no_file)
{
    char err[2048];
    int code = cli_run_with("", args, err, sizeof err);
    if (code == 0 || !strstr(err, needle))
        fail_msg("vkattn %s: exit %d, stderr \"%s\" (expected a refusal naming \"%s\")", args, code,
                 err, needle);
    if (no_file && cli_exists(cli_path_of(no_file)))
        fail_msg("vkattn %s: left %s behind", args, no_file);
}

static void test_refusals(void **state)
{
    (void)state;
    char base[1024], args[2048];
    snprintf(base, sizeof base, "attention --q %s --k %s --v %s --out %s/r.out.npy",
             cli_path_of("Q.npy"), cli_path_of("K.npy"), cli_path_of("V.npy"), cli_tmp);
    snprintf(args, sizeof args, "%s --grads %s/r", base, cli_tmp);
    expect_refused(args, "--grads needs --grad-out", "r.out.npy");
    snprintf(args, sizeof args, "%s --grad-out %s", base, cli_path_of("DO.npy"));
    expect_refused(args, "--grad-out needs --grads", "r.out.npy");
    snprintf(args, sizeof args, "%s --seed 3", base);
    expect_refused(args, "--seed is the dropout's", "r.out.npy");
    snprintf(args, sizeof args, "%s --dropout 1", base);
    expect_refused(args, "--dropout 1", "r.out.npy");
    snprintf(args, sizeof args, "%s --dropout 0.1 --seed -4", base);
    expect_refused(args, "--seed \"-4\"", "r.out.npy");
    snprintf(args, sizeof args, "%s --grad-out %s --grads %s/r --layout bthd", base,
             cli_path_of("DO.npy"), cli_tmp);
    expect_refused(args, "--layout bthd with --grads", "r.dq.npy");
    snprintf(args, sizeof args, "%s --grad-out %s --grads %s/r", base, cli_path_of("DObad.npy"),
             cli_tmp);
    expect_refused(args, "--grad-out", "r.dq.npy");
    assert_false(cli_exists(cli_path_of("r.out.npy")));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gradients),
        cmocka_unit_test(test_refusals),
    };
    return cmocka_run_group_tests(tests, group_setup, cli_teardown);
}
