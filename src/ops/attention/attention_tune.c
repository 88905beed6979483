/* vkattn_attention_tune: times the attention op's candidate configurations
 * (kernel family x input binding x tile preset, attention_config.c) for one
 * shape class on scratch tensors of random data and stores the fastest in
 * the context's tuning table. */
#include "ops/attention/attention_internal.h"
#include "spec/dtype.h"
#include "spec/error_text.h"
#include "core/tuner.h"
#include "core/tuning_table.h"

#include <stdio.h>

#define MAX_CANDIDATES 12

static vkattn_result record_candidate(vkattn_context *ctx, VkCommandBuffer cmd, const void *problem,
                                      const void *candidate)
{
    return vka_att_record_with(ctx, cmd, problem, candidate);
}

vkattn_result vkattn_attention_tune(vkattn_context *ctx, const vkattn_attention_tune_args *args)
{
    VKA_TRY(vka_check_entry(ctx, "vkattn_attention_tune", false, VK_NULL_HANDLE, args));
    const uint32_t batch = args->batch, num_heads = args->num_heads;
    const uint32_t num_kv_heads = args->num_kv_heads, q_len = args->q_len, kv_len = args->kv_len;
    const uint32_t head_dim = args->head_dim;
    const bool causal = args->causal;
    const vkattn_dtype q_dtype = args->q_dtype, kv_dtype = args->kv_dtype;
    if (!batch || !num_heads || !num_kv_heads || !q_len || !kv_len || !head_dim)
        return vka_fail(ctx, VKATTN_ERROR_INVALID_ARGUMENT,
                        "vkattn_attention_tune: args->batch %u, num_heads %u, num_kv_heads %u, "
                        "q_len %u, kv_len %u and head_dim %u must all be >= 1",
                        batch, num_heads, num_kv_heads, q_len, kv_len, head_dim);
    char b1[VKA_DTYPE_TEXT], b2[VKA_DTYPE_TEXT];
    bool q_ok = vka_dtype_is_float(q_dtype) || q_dtype == VKATTN_DTYPE_BF16;
    bool kv_ok = vka_dtype_is_float(kv_dtype) || kv_dtype == VKATTN_DTYPE_BF16;
    if (!q_ok || !kv_ok)
        return vka_fail(
            ctx, VKATTN_ERROR_UNSUPPORTED_DTYPE,
            "vkattn_attention_tune: args->q_dtype %s and kv_dtype %s must be f32, f16 or bf16",
            vka_dtype_text(q_dtype, b1), vka_dtype_text(kv_dtype, b2));
    /* shapes beyond what vka_att_validate accepts are reported by it, by name */
    const uint32_t v_head_dim = args->v_head_dim ? args->v_head_dim : head_dim;
    int64_t qs[4] = {batch, num_heads, q_len, head_dim};
    int64_t ks[4] = {batch, num_kv_heads, kv_len, head_dim};
    int64_t vs[4] = {batch, num_kv_heads, kv_len, v_head_dim};
    int64_t os[4] = {batch, num_heads, q_len, v_head_dim};
    /* element counts saturate past 2^64: the buffers then refuse them */
    uint64_t nq, nk, nv, no, out_bytes;
    vka_product_u64((const uint64_t[]){batch, num_heads, q_len, head_dim}, 4, &nq);
    vka_product_u64((const uint64_t[]){batch, num_kv_heads, kv_len, head_dim}, 4, &nk);
    vka_product_u64((const uint64_t[]){batch, num_kv_heads, kv_len, v_head_dim}, 4, &nv);
    vka_product_u64((const uint64_t[]){batch, num_heads, q_len, v_head_dim}, 4, &no);
    vka_mul_u64(no, vkattn_dtype_size(q_dtype), &out_bytes);
    vkattn_buffer *bq = NULL, *bk = NULL, *bv = NULL, *bo = NULL;
    vka_att_problem p;
    vka_att_config candidates[MAX_CANDIDATES];
    vkattn_result r = vka_tuner_random_buffer(ctx, nq, q_dtype, 1, &bq);
    if (r == VKATTN_SUCCESS)
        r = vka_tuner_random_buffer(ctx, nk, kv_dtype, 2, &bk);
    if (r == VKATTN_SUCCESS)
        r = vka_tuner_random_buffer(ctx, nv, kv_dtype, 3, &bv);
    if (r == VKATTN_SUCCESS) {
        vkattn_buffer_desc d = {.size = out_bytes};
        r = vkattn_buffer_create(ctx, &d, &bo);
    }
    if (r == VKATTN_SUCCESS) {
        vkattn_attention_args a = {
            .q = vkattn_tensor_make(bq, 0, q_dtype, 4, qs),
            .k = vkattn_tensor_make(bk, 0, kv_dtype, 4, ks),
            .v = vkattn_tensor_make(bv, 0, kv_dtype, 4, vs),
            .out = vkattn_tensor_make(bo, 0, q_dtype, 4, os),
            .causal = causal,
        };
        r = vka_att_validate(ctx, &a, &p);
    }
    if (r == VKATTN_SUCCESS) {
        uint32_t count = vka_att_config_candidates(ctx, &p, candidates, MAX_CANDIDATES);
        /* long problems run for seconds on CPU drivers: fewer repetitions */
        double pairs = (double)batch * num_heads * q_len * (double)kv_len * (causal ? 0.5 : 1.0);
        uint32_t best = 0;
        float best_ms = 0;
        vka_tune_report report = {args->progress, args->progress_user, "attention", ""};
        char dv[16] = "";
        if (v_head_dim != head_dim)
            snprintf(dv, sizeof dv, "/%u", v_head_dim);
        snprintf(report.shape, sizeof report.shape, "b=%u hq=%u hkv=%u tq=%u tk=%u d=%u%s%s %s/%s",
                 batch, num_heads, num_kv_heads, q_len, kv_len, head_dim, dv,
                 causal ? " causal" : "", vkattn_dtype_name(q_dtype), vkattn_dtype_name(kv_dtype));
        r = vka_tuner_measure(ctx, count, 4.0 * pairs * head_dim > 2e10 ? 3 : 5, record_candidate,
                              &p, candidates, sizeof candidates[0], &best, &best_ms, &report);
        if (r == VKATTN_SUCCESS) {
            vka_tuning_key key = {.op = VKA_TUNE_ATTENTION};
            vka_att_tuning_key(&p, key.values);
            const vka_att_config *c = &candidates[best];
            vka_tuning_config cfg = {{c->family, c->texel, c->preset}};
            r = vka_tuning_set(ctx, &key, ATT_CONFIG_VERSION, &cfg, best_ms);
        }
    }
    vkattn_buffer_destroy(bq);
    vkattn_buffer_destroy(bk);
    vkattn_buffer_destroy(bv);
    vkattn_buffer_destroy(bo);
    return r;
}
