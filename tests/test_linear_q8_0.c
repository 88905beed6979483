/* The linear op with q8_0 weights (ggml's blocks of 32 along K, f32 bias)
 * against vkattn_ref_linear over the same blocks, under the four kernel
 * policies: GEMM and GEMV shapes, x in f32, f16 and bf16, rank 2 and 3,
 * padded x rows and aligned offsets, weights larger than one binding (the
 * windows then start inside the tensor; forced with a shrunk binding range
 * through the context's internals), tuning, and every refusal. The
 * error against the unquantized weights is printed (and bounded). */
#include "test_policy.h"
#include "test_util.h"

#include "core/context.h"
#include "vkattn/reference.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

typedef struct q8_case {
    int64_t B, T, N, K;
    bool rank3, bias;
    vkattn_dtype xdt;
    int64_t xpad;  /* extra x elements per row (multiples of 4) */
    uint64_t woff; /* bytes before w (multiples of the device's alignment) */
} q8_case;

static double tol_of(vkattn_dtype dt)
{
    return dt == VKATTN_DTYPE_F32   ? TEST_TOL_F32
           : dt == VKATTN_DTYPE_F16 ? TEST_TOL_F16
                                    : TEST_TOL_BF16;
}

static uint64_t block_align(vkattn_context *ctx)
{
    uint64_t a = vkattn_context_device_info(ctx)->min_storage_buffer_offset_alignment;
    return a < 16 ? 16 : a;
}

/* Runs one case; returns the largest error of the GPU result against the
 * reference over the unquantized weights (relative to max |y|, at least 1). */
static double run_case(vkattn_context *ctx, const q8_case *c, uint64_t seed)
{
    int64_t M = c->B * c->T, N = c->N, K = c->K, xs = K + c->xpad;
    test_rng rng = test_rng_seed(seed);
    float *x = test_random_array(&rng, (size_t)(M * K), 1.0f, c->xdt);
    float *w = test_random_array(&rng, (size_t)(N * K), 0.5f, VKATTN_DTYPE_F32);
    float *b = c->bias ? test_random_array(&rng, (size_t)N, 1.0f, VKATTN_DTYPE_F32) : NULL;
    uint64_t wbytes = vkattn_dtype_row_bytes(VKATTN_DTYPE_Q8_0, (uint64_t)(N * K));
    uint8_t *wq = test_alloc((size_t)(c->woff + wbytes));
    memset(wq, 0xA5, (size_t)c->woff);
    char err[256];
    assert_int_equal(vkattn_ref_quantize_q8_0(w, (uint64_t)(N * K), wq + c->woff, err, sizeof err),
                     VKATTN_SUCCESS);

    /* the reference over the same blocks, and over the f32 weights */
    float *want = test_alloc((size_t)(M * N) * sizeof *want);
    float *exact = test_alloc((size_t)(M * N) * sizeof *exact);
    int64_t xshape[2] = {M, K}, wshape[2] = {N, K}, yshape[2] = {M, N};
    vkattn_ref_linear_args ra = {
        vkattn_host_tensor_make(x, VKATTN_DTYPE_F32, 2, xshape),
        vkattn_host_tensor_make(wq + c->woff, VKATTN_DTYPE_Q8_0, 2, wshape),
        b ? vkattn_host_tensor_make(b, VKATTN_DTYPE_F32, 1, &N) : (vkattn_host_tensor){0},
        vkattn_host_tensor_make(want, VKATTN_DTYPE_F32, 2, yshape),
    };
    if (vkattn_ref_linear(&ra, err, sizeof err) != VKATTN_SUCCESS)
        fail_msg("reference: %s", err);
    ra.w = vkattn_host_tensor_make(w, VKATTN_DTYPE_F32, 2, wshape);
    ra.y = vkattn_host_tensor_make(exact, VKATTN_DTYPE_F32, 2, yshape);
    if (vkattn_ref_linear(&ra, err, sizeof err) != VKATTN_SUCCESS)
        fail_msg("reference: %s", err);

    /* x with padded rows, w after woff bytes of other data */
    size_t xes = vkattn_dtype_size(c->xdt);
    uint8_t *xb = test_alloc((size_t)(M * xs) * xes);
    for (int64_t m = 0; m < M; m++)
        for (int64_t k = 0; k < xs; k++)
            test_store(xb, c->xdt, (size_t)(m * xs + k), k < K ? x[m * K + k] : 1e30f);
    vkattn_buffer *bx = test_buffer_with(ctx, xb, (uint64_t)(M * xs) * xes);
    vkattn_buffer *bw = test_buffer_with(ctx, wq, c->woff + wbytes);
    vkattn_buffer *bb = b ? test_buffer_of(ctx, VKATTN_DTYPE_F32, b, (size_t)N) : NULL;
    vkattn_buffer *by = test_buffer_with(ctx, NULL, (uint64_t)(M * N) * xes);
    vkattn_tensor tx, ty;
    if (c->rank3) {
        tx = vkattn_tensor_make(bx, 0, c->xdt, 3, (int64_t[]){c->B, c->T, K});
        memcpy(tx.strides, (int64_t[]){c->T * xs, xs, 1}, sizeof(int64_t[3]));
        ty = vkattn_tensor_make(by, 0, c->xdt, 3, (int64_t[]){c->B, c->T, N});
    } else {
        tx = vkattn_tensor_make(bx, 0, c->xdt, 2, xshape);
        tx.strides[0] = xs;
        ty = vkattn_tensor_make(by, 0, c->xdt, 2, yshape);
    }
    vkattn_linear_args a = {
        tx,
        vkattn_tensor_make(bw, c->woff, VKATTN_DTYPE_Q8_0, 2, wshape),
        bb ? vkattn_tensor_make(bb, 0, VKATTN_DTYPE_F32, 1, &N) : (vkattn_tensor){0},
        ty,
    };
    TEST_OK(ctx, vkattn_linear(ctx, &a));
    float *got = test_alloc((size_t)(M * N) * sizeof *got);
    test_download_as(ctx, by, c->xdt, got, (size_t)(M * N));
    char what[160];
    snprintf(what, sizeof what,
             "q8_0 linear %lldx%lldx%lld (B %lld) x %s bias %d pad %lld woff %llu", (long long)M,
             (long long)N, (long long)K, (long long)c->B, vkattn_dtype_name(c->xdt), (int)c->bias,
             (long long)c->xpad, (unsigned long long)c->woff);
    /* y is rounded to x's dtype: compare against the reference rounded too */
    test_round_to(c->xdt, want, (size_t)(M * N));
    test_assert_close(got, want, (size_t)(M * N), tol_of(c->xdt), what);
    test_error e = test_compare(got, exact, (size_t)(M * N));
    TEST_DESTROY_BUFFERS(bx, bw, bb, by);
    free(x), free(w), free(b), free(wq), free(want), free(exact), free(xb), free(got);
    return e.max_rel;
}

static const vkattn_dtype xdts[3] = {VKATTN_DTYPE_F32, VKATTN_DTYPE_F16, VKATTN_DTYPE_BF16};

/* GEMM shapes: odd M and N, K from one pair of blocks up. */
static void test_gemm(void **state)
{
    test_gpu *g = *state;
    static const int64_t Ms[] = {9, 17, 64, 130};
    static const int64_t Ns[] = {1, 7, 66, 300};
    static const int64_t Ks[] = {64, 128, 576};
    uint64_t align = block_align(g->ctx);
    double worst = 0;
    for (int i = 0; i < 12; i++) {
        q8_case c = {.B = 1, .T = Ms[i % 4], .N = Ns[(i / 2) % 4], .K = Ks[i % 3]};
        c.rank3 = i % 3 == 1 && c.T % 2 == 0;
        if (c.rank3)
            c.B = 2, c.T /= 2;
        c.bias = i % 2 == 0;
        c.xdt = xdts[i % 3];
        c.xpad = i % 4 == 3 ? 8 : 0;
        c.woff = i % 5 == 2 ? align : 0;
        double e = run_case(g->ctx, &c, 300 + (uint64_t)i);
        worst = e > worst ? e : worst;
    }
    /* quantization error of weights in [-0.5, 0.5): well under 1% of |y| */
    print_message("q8_0 GEMM: largest error against f32 weights %.3g\n", worst);
    assert_true(worst < 1e-2);
}

/* Few rows (the GEMV kernels, the decode projections). */
static void test_gemv(void **state)
{
    test_gpu *g = *state;
    double worst = 0;
    for (int i = 0; i < 9; i++) {
        q8_case c = {.B = 1, .T = 1 + i % 8, .N = i % 2 ? 300 : 66, .K = i % 3 ? 1024 : 192};
        c.bias = i % 3 != 0;
        c.xdt = xdts[i % 3];
        double e = run_case(g->ctx, &c, 400 + (uint64_t)i);
        worst = e > worst ? e : worst;
    }
    print_message("q8_0 GEMV: largest error against f32 weights %.3g\n", worst);
    assert_true(worst < 1e-2);
}

/* Weights larger than maxStorageBufferRange: the op splits N, and windows
 * start at block boundaries inside the tensor. Only where that range is
 * small enough to exceed cheaply (lavapipe: 128 MiB). */
static void test_larger_than_one_binding(void **state)
{
    test_gpu *g = *state;
    uint64_t range = test_binding_range_at_most(g->ctx, 128u << 20);
    int64_t K = 4096, per_row = (int64_t)vkattn_dtype_row_bytes(VKATTN_DTYPE_Q8_0, 4096);
    q8_case c = {.B = 1, .T = 2, .K = K, .N = (int64_t)range / per_row + 37, .bias = true};
    c.xdt = VKATTN_DTYPE_F32;
    run_case(g->ctx, &c, 500);
}

/* The same split on any device: the context's binding range shrunk to a
 * few KiB (an internal field), so N is cut into many dispatches whose
 * weight windows start at block boundaries inside the tensor. */
static void test_windows_inside_the_tensor(void **state)
{
    test_gpu *g = *state;
    uint64_t saved = g->ctx->info.max_storage_buffer_range,
             saved_texels = g->ctx->info.max_texel_buffer_elements;
    g->ctx->info.max_storage_buffer_range = 8192;
    g->ctx->info.max_texel_buffer_elements = 512; /* 8 KiB of rgba32ui */
    for (int i = 0; i < 3; i++) {
        q8_case c = {.B = 1, .T = 1 + 2 * i, .N = 150 + 7 * i, .K = i == 1 ? 192 : 256};
        c.bias = true;
        c.xdt = xdts[i];
        run_case(g->ctx, &c, 550 + (uint64_t)i);
    }
    g->ctx->info.max_storage_buffer_range = saved;
    g->ctx->info.max_texel_buffer_elements = saved_texels;
}

/* vkattn_linear_tune takes q8_0 weights; the tuned choice then runs. */
static void test_tune(void **state)
{
    test_gpu *g = *state;
    vkattn_linear_tune_args t = {
        .m = 2, .n = 64, .k = 128, .x_dtype = VKATTN_DTYPE_F16, .w_dtype = VKATTN_DTYPE_Q8_0};
    TEST_OK(g->ctx, vkattn_linear_tune(g->ctx, &t));
    q8_case c = {.B = 1, .T = 2, .N = 64, .K = 128, .xdt = VKATTN_DTYPE_F16, .bias = true};
    run_case(g->ctx, &c, 600);
    t.k = 96;
    TEST_FAILS(g->ctx, VKATTN_ERROR_INVALID_ARGUMENT, "q8_0 weights need k a multiple of 64",
               vkattn_linear_tune(g->ctx, &t));
}

/* Every refusal names the parameter; nothing runs. */
static void test_errors(void **state)
{
    vkattn_context *ctx = ((test_gpu *)*state)->ctx;
    uint64_t align = block_align(ctx);
    const vkattn_dtype F32 = VKATTN_DTYPE_F32, Q8 = VKATTN_DTYPE_Q8_0;
    vkattn_buffer *buf = test_buffer_with(ctx, NULL, 1 << 16);
    /* x [4, 64] at 0, w [6, 64] q8_0 at 4 align (408 bytes), b [6] at 8192,
     * y [4, 6] at 12288 */
    vkattn_linear_args ok = {
        vkattn_tensor_make(buf, 0, F32, 2, (int64_t[]){4, 64}),
        vkattn_tensor_make(buf, 4 * align, Q8, 2, (int64_t[]){6, 64}),
        vkattn_tensor_make(buf, 8192, F32, 1, (int64_t[]){6}),
        vkattn_tensor_make(buf, 12288, F32, 2, (int64_t[]){4, 6}),
    };
    TEST_OK(ctx, vkattn_linear(ctx, &ok));
    vkattn_linear_args a;
#define CASE(code, needle, change) \
    TEST_FAILS_CHANGED(ctx, a, ok, change, code, needle, vkattn_linear(ctx, &a))
    const vkattn_result INV = VKATTN_ERROR_INVALID_ARGUMENT, DT = VKATTN_ERROR_UNSUPPORTED_DTYPE;
    CASE(DT, "args->w.dtype is q4_0: quantized weights are q8_0", a.w.dtype = VKATTN_DTYPE_Q4_0);
    CASE(DT, "args->b.dtype is f16: with q8_0 weights the bias is f32",
         a.b.dtype = VKATTN_DTYPE_F16);
    CASE(INV, "args->w.shape[1] is 32: a q8_0 tensor's last dimension must be a multiple of 64",
         (a.w.shape[1] = 32, a.x.shape[1] = 32));
    CASE(INV, "args->w.strides[0] is 128: q8_0 tensors are contiguous",
         (a.w.strides[0] = 128, a.w.strides[1] = 1));
    CASE(INV, "args->w.offset 8 is not a multiple of", a.w.offset = 8);
    CASE(VKATTN_ERROR_OUT_OF_RANGE, "args->w (q8_0, 384 values: 408 bytes) from offset",
         a.w.offset = (1 << 16) - align);
    CASE(INV, "with q8_0 weights x's rows are read 4 elements at a time",
         (a.x.strides[0] = 66, a.x.strides[1] = 1));
    CASE(INV, "args->y (bytes", a.y.offset = 4 * align);
    vkattn_buffer_destroy(buf);
#undef CASE
    /* the reference refuses what it cannot read as blocks */
    float x[64] = {0}, y[1];
    uint8_t wq[68] = {0};
    char err[256];
    vkattn_ref_linear_args ra = {
        vkattn_host_tensor_make(x, F32, 2, (int64_t[]){1, 48}),
        vkattn_host_tensor_make(wq, Q8, 2, (int64_t[]){1, 48}),
        {0},
        vkattn_host_tensor_make(y, F32, 2, (int64_t[]){1, 1}),
    };
    assert_int_equal(vkattn_ref_linear(&ra, err, sizeof err), INV);
    assert_non_null(strstr(err, "K 48 must be a multiple of 32"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gemm),
        cmocka_unit_test(test_gemv),
        cmocka_unit_test(test_larger_than_one_binding),
        cmocka_unit_test(test_windows_inside_the_tensor),
    };
    const struct CMUnitTest once[] = {
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_tune),
    };
    int failed =
        cmocka_run_group_tests_name("linear_q8_0_once", once, test_gpu_setup, test_gpu_teardown);
    /* q8_0 weights take texels in the GEMV kernels only (groups of 8 blocks
     * when K is a multiple of 256): the texel policies run the GEMV cases,
     * the storage policies everything */
    const struct CMUnitTest texel_tests[] = {
        cmocka_unit_test(test_gemv),
        cmocka_unit_test(test_windows_inside_the_tensor),
    };
    for (uint32_t p = 0; p < TEST_POLICY_COUNT; p++)
        failed +=
            test_policies[p].flags & VKATTN_CONTEXT_NO_TEXEL_BUFFERS
                ? test_policy_run_group("linear_q8_0", p, tests, sizeof tests / sizeof tests[0])
                : test_policy_run_group("linear_q8_0_texel", p, texel_tests,
                                        sizeof texel_tests / sizeof texel_tests[0]);
    return failed;
}
