/* vkattn_linear_tune: times the linear op's candidate configurations for one
 * shape class on scratch tensors of random data and stores the fastest in
 * the context's tuning table (see linear_config.c for the class and the
 * candidates). */
#include "spec/dtype.h"
#include "spec/error_text.h"
#include "ops/linear/linear_internal.h"
#include "core/tuner.h"
#include "core/tuning_table.h"

#include <stdio.h>

#define MAX_CANDIDATES 12

static vkattn_result record_candidate(vkattn_context *ctx, VkCommandBuffer cmd, const void *problem,
                                      const void *candidate)
{
    return vka_linear_record(ctx, cmd, problem, candidate);
}

vkattn_result vkattn_linear_tune(vkattn_context *ctx, const vkattn_linear_tune_args *args)
{
    VKA_TRY(vka_check_entry(ctx, "vkattn_linear_tune", false, VK_NULL_HANDLE, args));
    const uint32_t m = args->m, n = args->n, k = args->k;
    const vkattn_dtype x_dtype = args->x_dtype, w_dtype = args->w_dtype;
    if (!m || !n || !k)
        return vka_fail(ctx, VKATTN_ERROR_INVALID_ARGUMENT,
                        "vkattn_linear_tune: args->m %u, n %u and k %u must all be >= 1", m, n, k);
    char b1[VKA_DTYPE_TEXT], b2[VKA_DTYPE_TEXT];
    bool x_ok = vka_dtype_is_float(x_dtype) || x_dtype == VKATTN_DTYPE_BF16;
    bool w_ok =
        vka_dtype_is_float(w_dtype) || w_dtype == VKATTN_DTYPE_BF16 || w_dtype == VKATTN_DTYPE_Q8_0;
    if (!x_ok || !w_ok)
        return vka_fail(ctx, VKATTN_ERROR_UNSUPPORTED_DTYPE,
                        "vkattn_linear_tune: args->x_dtype %s and w_dtype %s: x is f32, f16 or "
                        "bf16, w f32, f16, bf16 or q8_0",
                        vka_dtype_text(x_dtype, b1), vka_dtype_text(w_dtype, b2));
    if (w_dtype == VKATTN_DTYPE_Q8_0 && k % 64)
        return vka_fail(ctx, VKATTN_ERROR_INVALID_ARGUMENT,
                        "vkattn_linear_tune: args->k %u: q8_0 weights need k a multiple of 64", k);
    vkattn_buffer *bx = NULL, *bw = NULL, *by = NULL;
    vka_linear_problem p;
    vka_linear_config candidates[MAX_CANDIDATES];
    vkattn_result r = vka_tuner_random_buffer(ctx, (uint64_t)m * k, x_dtype, 1, &bx);
    if (r == VKATTN_SUCCESS)
        r = vka_tuner_random_buffer(ctx, (uint64_t)n * k, w_dtype, 2, &bw);
    if (r == VKATTN_SUCCESS) {
        uint64_t bytes; /* saturates past 2^64: the buffer then refuses it */
        vka_product_u64((const uint64_t[]){m, n, vkattn_dtype_size(x_dtype)}, 3, &bytes);
        vkattn_buffer_desc d = {.size = bytes};
        r = vkattn_buffer_create(ctx, &d, &by);
    }
    if (r == VKATTN_SUCCESS) {
        vkattn_linear_args a = {
            vkattn_tensor_make(bx, 0, x_dtype, 2, (int64_t[]){m, k}),
            vkattn_tensor_make(bw, 0, w_dtype, 2, (int64_t[]){n, k}),
            {0},
            vkattn_tensor_make(by, 0, x_dtype, 2, (int64_t[]){m, n}),
        };
        r = vka_linear_problem_plain(ctx, &a, &p);
    }
    if (r == VKATTN_SUCCESS) {
        uint32_t count = vka_linear_config_candidates(ctx, &p, candidates, MAX_CANDIDATES);
        /* big problems run for seconds: fewer repetitions */
        double flops = 2.0 * m * n * (double)k;
        uint32_t best = 0;
        float best_ms = 0;
        vka_tune_report report = {args->progress, args->progress_user, "linear", ""};
        snprintf(report.shape, sizeof report.shape, "m=%u n=%u k=%u %s/%s", m, n, k,
                 vkattn_dtype_name(x_dtype), vkattn_dtype_name(w_dtype));
        r = vka_tuner_measure(ctx, count, flops > 2e10 ? 3 : 5, record_candidate, &p, candidates,
                              sizeof candidates[0], &best, &best_ms, &report);
        if (r == VKATTN_SUCCESS) {
            vka_tuning_key key = {.op = VKA_TUNE_LINEAR};
            vka_linear_tuning_key(&p, key.values);
            const vka_linear_config *c = &candidates[best];
            vka_tuning_config cfg = {{c->family, c->input, c->preset}};
            r = vka_tuning_set(ctx, &key, LINEAR_CONFIG_VERSION, &cfg, best_ms);
        }
    }
    vkattn_buffer_destroy(bx);
    vkattn_buffer_destroy(bw);
    vkattn_buffer_destroy(by);
    return r;
}
