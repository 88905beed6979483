/* CPU reference of y = x W^T + b (torch.nn.Linear layout), double sums. */
#include "ref/ref.h"

#include "spec/dtype.h"
#include "spec/error_text.h"

#include <stdlib.h>
#include <string.h>

/* Presence, rank, dtype and dimensions of one float operand. */
static vkattn_result check_operand(const vkattn_host_tensor *t, const char *prefix,
                                   const char *name, uint32_t rank_a, uint32_t rank_b,
                                   const char *layout, char *error, size_t error_size)
{
    if (!t->data) {
        vka_error_format(error, error_size, "%s%s.data is NULL: %s is required", prefix, name,
                         name);
        return VKATTN_ERROR_INVALID_ARGUMENT;
    }
    if (t->rank != rank_a && t->rank != rank_b) {
        vka_error_format(error, error_size, "%s%s.rank is %u: %s is %s", prefix, name, t->rank,
                         name, layout);
        return VKATTN_ERROR_INVALID_ARGUMENT;
    }
    if (!vka_dtype_is_float(t->dtype) && t->dtype != VKATTN_DTYPE_BF16) {
        char b[VKA_DTYPE_TEXT];
        vka_error_format(error, error_size, "%s%s.dtype %s is not supported: f32, f16 or bf16",
                         prefix, name, vka_dtype_text(t->dtype, b));
        return VKATTN_ERROR_UNSUPPORTED_DTYPE;
    }
    for (uint32_t i = 0; i < t->rank; i++) {
        if (t->shape[i] < 1) {
            vka_error_format(error, error_size,
                             "%s%s.shape[%u] is %lld: every dimension must be >= 1", prefix, name,
                             i, (long long)t->shape[i]);
            return VKATTN_ERROR_INVALID_ARGUMENT;
        }
    }
    return VKATTN_SUCCESS;
}

static vkattn_result check_dim(const vkattn_host_tensor *t, const char *prefix, const char *name,
                               uint32_t i, const vkattn_host_tensor *ref, const char *ref_name,
                               uint32_t j, char *error, size_t error_size)
{
    if (t->shape[i] == ref->shape[j])
        return VKATTN_SUCCESS;
    vka_error_format(error, error_size, "%s%s.shape[%u] %lld differs from %s%s.shape[%u] %lld",
                     prefix, name, i, (long long)t->shape[i], prefix, ref_name, j,
                     (long long)ref->shape[j]);
    return VKATTN_ERROR_SHAPE_MISMATCH;
}

vkattn_result vka_ref_linear_prepare(const vkattn_ref_linear_args *args, const char *prefix,
                                     vka_ref_linear_plan *plan, char *error, size_t error_size)
{
    if (!prefix)
        prefix = "";
    if (!args) {
        vka_error_format(error, error_size, "args is NULL");
        return VKATTN_ERROR_INVALID_ARGUMENT;
    }
    const vkattn_host_tensor *x = &args->x, *w = &args->w, *b = &args->b, *y = &args->y;
    VKA_TRY(check_operand(x, prefix, "x", 2, 3, "rank 2 [M, K] or rank 3 [B, T, K]", error,
                          error_size));
    bool w_q8 = w->dtype == VKATTN_DTYPE_Q8_0;
    vkattn_host_tensor w_shape = *w; /* q8_0: checked as a float operand, then below */
    if (w_q8)
        w_shape.dtype = VKATTN_DTYPE_F32;
    VKA_TRY(check_operand(&w_shape, prefix, "w", 2, 2, "rank 2 [N, K]", error, error_size));
    if (b->data)
        VKA_TRY(check_operand(b, prefix, "b", 1, 1, "rank 1 [N]", error, error_size));
    VKA_TRY(check_operand(y, prefix, "y", 2, 3, "rank 2 [M, N] or rank 3 [B, T, N]", error,
                          error_size));
    uint32_t r = x->rank;
    if (y->rank != r) {
        vka_error_format(error, error_size, "%sy.rank %u differs from %sx.rank %u", prefix, y->rank,
                         prefix, r);
        return VKATTN_ERROR_SHAPE_MISMATCH;
    }
    VKA_TRY(check_dim(w, prefix, "w", 1, x, "x", r - 1, error, error_size));
    if (b->data)
        VKA_TRY(check_dim(b, prefix, "b", 0, w, "w", 0, error, error_size));
    for (uint32_t i = 0; i + 1 < r; i++)
        VKA_TRY(check_dim(y, prefix, "y", i, x, "x", i, error, error_size));
    VKA_TRY(check_dim(y, prefix, "y", r - 1, w, "w", 0, error, error_size));

    vka_ref_linear_plan p;
    memset(&p, 0, sizeof p);
    char name[64];
    vka_error_format(name, sizeof name, "%sx", prefix);
    VKA_TRY(vka_host_tensor_resolve(x, name, false, &p.x, error, error_size));
    vka_error_format(name, sizeof name, "%sw", prefix);
    if (w_q8) {
        /* ggml's rows of blocks: contiguous, K whole blocks */
        bool dense = (w->strides[0] == 0 && w->strides[1] == 0) ||
                     (w->strides[0] == w->shape[1] && w->strides[1] == 1);
        if (w->shape[1] % 32 || !dense) {
            vka_error_format(error, error_size,
                             "%s: q8_0 weights are contiguous rows of 32-value blocks: K %lld must "
                             "be a multiple of 32 and the strides {K, 1} (given {%lld, %lld})",
                             name, (long long)w->shape[1], (long long)w->strides[0],
                             (long long)w->strides[1]);
            return VKATTN_ERROR_INVALID_ARGUMENT;
        }
        p.w = *w;
        p.w.strides[0] = w->shape[1];
        p.w.strides[1] = 1;
    } else {
        VKA_TRY(vka_host_tensor_resolve(w, name, false, &p.w, error, error_size));
    }
    if (b->data) {
        vka_error_format(name, sizeof name, "%sb", prefix);
        VKA_TRY(vka_host_tensor_resolve(b, name, false, &p.b, error, error_size));
    }
    vka_error_format(name, sizeof name, "%sy", prefix);
    VKA_TRY(vka_host_tensor_resolve(y, name, true, &p.y, error, error_size));

    p.rows_outer = r == 3 ? x->shape[0] : 1;
    p.rows_inner = x->shape[r - 2];
    p.in_features = x->shape[r - 1];
    p.out_features = w->shape[0];
    /* Convert W to double a block of rows at a time (about 512 KiB), so the
     * conversion is paid once per block while memory stays small. */
    int64_t block = 65536 / p.in_features;
    if (block < 1)
        block = 1;
    if (block > p.out_features)
        block = p.out_features;
    p.block_rows = block;
    size_t total;
    bool ok = vka_size_mul((size_t)block + 1, (size_t)p.in_features, &total) &&
              total <= SIZE_MAX / sizeof(double);
    if (!ok || (uint64_t)p.in_features > SIZE_MAX) {
        vka_error_format(error, error_size,
                         "%sx.shape[%u] (in_features) %lld: scratch memory size overflows", prefix,
                         r - 1, (long long)p.in_features);
        return VKATTN_ERROR_OUT_OF_HOST_MEMORY;
    }
    p.scratch_doubles = total;
    *plan = p;
    return VKATTN_SUCCESS;
}

/* Rows [n0, n0 + nb) of q8_0 weights as the kernels read them: d * q in
 * f32 (d the block's f16 scale). */
static void load_q8_0_rows(const vkattn_host_tensor *w, int64_t n0, int64_t nb, int64_t K,
                           double *out)
{
    const uint8_t *data = w->data;
    for (int64_t n = 0; n < nb; n++)
        for (int64_t c0 = 0; c0 < K; c0 += 32) {
            const uint8_t *blk = data + ((n0 + n) * K + c0) / 32 * 34;
            uint16_t bits;
            memcpy(&bits, blk, 2);
            float d = vkattn_f16_to_f32(bits);
            for (int j = 0; j < 32; j++)
                out[n * K + c0 + j] = (double)(d * (float)(int8_t)blk[2 + j]);
        }
}

void vka_ref_linear_run(const vka_ref_linear_plan *p, double *scratch)
{
    const vkattn_host_tensor *x = &p->x, *w = &p->w, *b = &p->b, *y = &p->y;
    const int64_t K = p->in_features, N = p->out_features;
    const uint32_t r = x->rank;
    double *xrow = scratch;
    double *wblock = scratch + K;
    for (int64_t n0 = 0; n0 < N; n0 += p->block_rows) {
        int64_t nb = N - n0 < p->block_rows ? N - n0 : p->block_rows;
        if (w->dtype == VKATTN_DTYPE_Q8_0)
            load_q8_0_rows(w, n0, nb, K, wblock);
        else
            for (int64_t n = 0; n < nb; n++)
                for (int64_t c = 0; c < K; c++)
                    wblock[n * K + c] =
                        vka_host_load(w, (n0 + n) * w->strides[0] + c * w->strides[1]);
        for (int64_t bo = 0; bo < p->rows_outer; bo++) {
            for (int64_t t = 0; t < p->rows_inner; t++) {
                int64_t xbase = t * x->strides[r - 2], ybase = t * y->strides[r - 2];
                if (r == 3) {
                    xbase += bo * x->strides[0];
                    ybase += bo * y->strides[0];
                }
                for (int64_t c = 0; c < K; c++)
                    xrow[c] = vka_host_load(x, xbase + c * x->strides[r - 1]);
                for (int64_t n = 0; n < nb; n++) {
                    const double *wr = wblock + n * K;
                    double sum = 0.0;
                    for (int64_t c = 0; c < K; c++)
                        sum += xrow[c] * wr[c];
                    if (b->data)
                        sum += vka_host_load(b, (n0 + n) * b->strides[0]);
                    vka_host_store(y, ybase + (n0 + n) * y->strides[r - 1], sum);
                }
            }
        }
    }
}

vkattn_result vkattn_ref_linear(const vkattn_ref_linear_args *args, char *error, size_t error_size)
{
    vka_ref_linear_plan plan;
    VKA_TRY(vka_ref_linear_prepare(args, "args->", &plan, error, error_size));
    double *scratch = vka_ref_scratch(plan.scratch_doubles, error, error_size);
    if (!scratch)
        return VKATTN_ERROR_OUT_OF_HOST_MEMORY;
    vka_ref_linear_run(&plan, scratch);
    free(scratch);
    return VKATTN_SUCCESS;
}
