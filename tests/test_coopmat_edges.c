/* The coopmat family's tiles at their edges: GEMMs whose M, N and K are
 * one short of, equal to and one past the workgroup tile (BM = 4 CM_M,
 * BN = 4 CM_N, K steps of 32) and attention whose Tq and Tk fall one short
 * and one past its row and key blocks (BR = 2 CM_M, BC = 2 max(CM_N,
 * CM_K)), head dims that leave a partial matrix (Dk 40, Dv 24), both causal
 * alignments; each against the CPU reference, f32 and f16. Sizes come from
 * the device's matrix shape. Runs where the device offers cooperative
 * matrices (lavapipe26cm); elsewhere the context is refused, which the test
 * checks too, unless VKATTN_TEST_REQUIRE_COOPMAT is set, which turns the
 * refusal into a failure. */
#include "sanitizer_pin.h"
#include "test_util.h"

#include <stdio.h>
#include <stdlib.h>

static void check_linear(vkattn_context *ctx, int64_t M, int64_t N, int64_t K, vkattn_dtype dt,
                         uint64_t seed)
{
    test_rng rng = test_rng_seed(seed);
    float *x = test_random_array(&rng, (size_t)(M * K), 1.0f, dt);
    float *w = test_random_array(&rng, (size_t)(N * K), 0.5f, dt);
    float *b = test_random_array(&rng, (size_t)N, 1.0f, dt);
    float *want = test_alloc((size_t)(M * N) * 4), *got = test_alloc((size_t)(M * N) * 4);
    vkattn_ref_linear_args r = {
        .x = vkattn_host_tensor_make(x, VKATTN_DTYPE_F32, 2, (int64_t[]){M, K}),
        .w = vkattn_host_tensor_make(w, VKATTN_DTYPE_F32, 2, (int64_t[]){N, K}),
        .b = vkattn_host_tensor_make(b, VKATTN_DTYPE_F32, 1, &N),
        .y = vkattn_host_tensor_make(want, VKATTN_DTYPE_F32, 2, (int64_t[]){M, N})};
    assert_int_equal(vkattn_ref_linear(&r, NULL, 0), VKATTN_SUCCESS);
    vkattn_buffer *bx = test_buffer_of(ctx, dt, x, (size_t)(M * K));
    vkattn_buffer *bw = test_buffer_of(ctx, dt, w, (size_t)(N * K));
    vkattn_buffer *bb = test_buffer_of(ctx, dt, b, (size_t)N);
    vkattn_buffer *by = test_buffer_with(ctx, NULL, (uint64_t)(M * N) * vkattn_dtype_size(dt));
    vkattn_linear_args a = {vkattn_tensor_make(bx, 0, dt, 2, (int64_t[]){M, K}),
                            vkattn_tensor_make(bw, 0, dt, 2, (int64_t[]){N, K}),
                            vkattn_tensor_make(bb, 0, dt, 1, &N),
                            vkattn_tensor_make(by, 0, dt, 2, (int64_t[]){M, N})};
    TEST_OK(ctx, vkattn_linear(ctx, &a));
    test_download_as(ctx, by, dt, got, (size_t)(M * N));
    char what[128];
    snprintf(what, sizeof what, "coopmat linear %lldx%lldx%lld %s", (long long)M, (long long)N,
             (long long)K, vkattn_dtype_name(dt));
    test_assert_close(got, want, (size_t)(M * N),
                      dt == VKATTN_DTYPE_F32 ? TEST_TOL_F32 : TEST_TOL_F16, what);
    TEST_DESTROY_BUFFERS(bx, bw, bb, by);
    free(x), free(w), free(b), free(want), free(got);
}

static void check_attention(vkattn_context *ctx, int64_t Tq, int64_t Tk, bool causal,
                            vkattn_causal_align align, vkattn_dtype dt, uint64_t seed)
{
    enum { B = 1, HQ = 4, HKV = 2, DK = 40, DV = 24 };
    test_rng rng = test_rng_seed(seed);
    size_t nq = (size_t)(B * HQ * Tq * DK), nk = (size_t)(B * HKV * Tk * DK);
    size_t nv = (size_t)(B * HKV * Tk * DV), no = (size_t)(B * HQ * Tq * DV);
    float *q = test_random_array(&rng, nq, 1.0f, dt), *k = test_random_array(&rng, nk, 1.0f, dt);
    float *v = test_random_array(&rng, nv, 1.0f, dt);
    float *want = test_alloc(no * 4), *got = test_alloc(no * 4);
    int64_t qs[4] = {B, HQ, Tq, DK}, ks[4] = {B, HKV, Tk, DK}, vs[4] = {B, HKV, Tk, DV},
            os[4] = {B, HQ, Tq, DV};
    vkattn_ref_attention_args r = {.q = vkattn_host_tensor_make(q, VKATTN_DTYPE_F32, 4, qs),
                                   .k = vkattn_host_tensor_make(k, VKATTN_DTYPE_F32, 4, ks),
                                   .v = vkattn_host_tensor_make(v, VKATTN_DTYPE_F32, 4, vs),
                                   .out = vkattn_host_tensor_make(want, VKATTN_DTYPE_F32, 4, os),
                                   .causal = causal,
                                   .causal_align = align};
    assert_int_equal(vkattn_ref_attention(&r, NULL, 0), VKATTN_SUCCESS);
    vkattn_buffer *bq = test_buffer_of(ctx, dt, q, nq), *bk = test_buffer_of(ctx, dt, k, nk);
    vkattn_buffer *bv = test_buffer_of(ctx, dt, v, nv);
    vkattn_buffer *bo = test_buffer_with(ctx, NULL, no * vkattn_dtype_size(dt));
    vkattn_attention_args a = {.q = vkattn_tensor_make(bq, 0, dt, 4, qs),
                               .k = vkattn_tensor_make(bk, 0, dt, 4, ks),
                               .v = vkattn_tensor_make(bv, 0, dt, 4, vs),
                               .out = vkattn_tensor_make(bo, 0, dt, 4, os),
                               .causal = causal,
                               .causal_align = align};
    TEST_OK(ctx, vkattn_attention(ctx, &a));
    test_download_as(ctx, bo, dt, got, no);
    char what[160];
    snprintf(what, sizeof what, "coopmat attention Tq %lld Tk %lld causal %d align %d %s",
             (long long)Tq, (long long)Tk, (int)causal, (int)align, vkattn_dtype_name(dt));
    test_assert_close(got, want, no, dt == VKATTN_DTYPE_F32 ? TEST_TOL_F32 : TEST_TOL_F16, what);
    TEST_DESTROY_BUFFERS(bq, bk, bv, bo);
    free(q), free(k), free(v), free(want), free(got);
}

static void test_tile_edges(void **state)
{
    (void)state;
    /* the probe opens the driver before test_gpu_open would pin it: pinned
     * here, so that a leftover of the driver's refusal path stays nameable
     * (and suppressed by lsan.supp) in the sanitizer build */
    vkattn_pin_vulkan_libraries();
    vkattn_context *probe = NULL;
    vkattn_context_desc desc = {.flags = VKATTN_CONTEXT_COOPMAT_KERNELS};
    vkattn_result r = vkattn_context_create(&desc, &probe);
    if (r != VKATTN_SUCCESS) {
        const char *require = getenv("VKATTN_TEST_REQUIRE_COOPMAT");
        if (require && *require)
            fail_msg("VKATTN_TEST_REQUIRE_COOPMAT: the coopmat family was refused (%s)",
                     vkattn_result_name(r));
        assert_int_equal(r, VKATTN_ERROR_UNSUPPORTED);
        print_message("no cooperative matrices here: the context was refused, as it must be\n");
        return;
    }
    vkattn_context_destroy(probe);
    test_gpu *g = test_gpu_open(VKATTN_CONTEXT_COOPMAT_KERNELS);
    const vkattn_device_info *info = vkattn_context_device_info(g->ctx);
    assert_true(info->coopmat_kernels);
    const vkattn_coopmat_shape s = info->coopmat_shape;
    const int64_t bm = 4 * s.m, bn = 4 * s.n, kn = s.n > s.k ? s.n : s.k;
    const int64_t br = 2 * s.m, bc = 2 * kn;
    uint64_t seed = 1;
    const vkattn_dtype dts[2] = {VKATTN_DTYPE_F32, VKATTN_DTYPE_F16};
    for (int d = 0; d < 2; d++) {
        const int64_t ms[] = {bm - 1, bm, bm + 1, 2 * bm + 1};
        const int64_t ns[] = {bn - 1, bn + 1};
        const int64_t ks[] = {31, 33};
        for (size_t i = 0; i < sizeof ms / sizeof ms[0]; i++)
            check_linear(g->ctx, ms[i], ns[i % 2], ks[(i / 2) % 2], dts[d], seed++);
        const int64_t tqs[] = {br - 1, br + 1}, tks[] = {bc - 1, bc + 1, 2 * bc + 1};
        for (size_t i = 0; i < 2; i++)
            for (size_t j = 0; j < 3; j++)
                check_attention(g->ctx, tqs[i], tks[j], (i + j) % 2 == 1,
                                j == 2 ? VKATTN_CAUSAL_TOP_LEFT : VKATTN_CAUSAL_BOTTOM_RIGHT,
                                dts[d], seed++);
    }
    test_gpu_close(g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_tile_edges)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
