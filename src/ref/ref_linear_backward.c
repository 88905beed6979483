/* CPU reference of the linear op's gradients (vkattn_ref_linear_backward):
 * dx = dy W, dw = dy^T x, db = the column sums of dy, in double; and the
 * dense double products the MHA layer's backward shares. */
#include "ref/ref_backward.h"

#include "spec/dtype.h"
#include "spec/error_text.h"

#include <stdlib.h>
#include <string.h>

/* ---- dense double matrices */

/* The element offset of the n-th element, in row-major order of its
 * shape, of a resolved tensor. */
static int64_t offset_of(const vkattn_host_tensor *t, int64_t n)
{
    int64_t at = 0;
    for (uint32_t i = t->rank; i-- > 0;) {
        at += (n % t->shape[i]) * t->strides[i];
        n /= t->shape[i];
    }
    return at;
}

static int64_t elements_of(const vkattn_host_tensor *t)
{
    int64_t n = 1;
    for (uint32_t i = 0; i < t->rank; i++)
        n *= t->shape[i];
    return n;
}

void vka_ref_gather_dense(const vkattn_host_tensor *t, double *dst)
{
    const int64_t n = elements_of(t);
    for (int64_t e = 0; e < n; e++)
        dst[e] = vka_host_load(t, offset_of(t, e));
}

void vka_ref_scatter_dense(const vkattn_host_tensor *t, const double *src)
{
    const int64_t n = elements_of(t);
    for (int64_t e = 0; e < n; e++)
        vka_host_store(t, offset_of(t, e), src[e]);
}

void vka_ref_gemm_nt(const double *a, const double *b, const double *bias, int64_t m, int64_t n,
                     int64_t k, double *y)
{
    for (int64_t r = 0; r < m; r++)
        for (int64_t c = 0; c < n; c++) {
            const double *ar = a + r * k, *br = b + c * k;
            double s = bias ? bias[c] : 0.0;
            for (int64_t e = 0; e < k; e++)
                s += ar[e] * br[e];
            y[r * n + c] = s;
        }
}

void vka_ref_gemm_nn(const double *g, const double *b, int64_t m, int64_t n, int64_t k,
                     bool accumulate, double *y)
{
    for (int64_t r = 0; r < m; r++) {
        double *yr = y + r * k;
        if (!accumulate)
            memset(yr, 0, (size_t)k * sizeof *yr);
        for (int64_t c = 0; c < n; c++) {
            const double gv = g[r * n + c], *br = b + c * k;
            for (int64_t e = 0; e < k; e++)
                yr[e] += gv * br[e];
        }
    }
}

void vka_ref_gemm_tn(const double *g, const double *a, int64_t m, int64_t n, int64_t k, double *y)
{
    memset(y, 0, (size_t)(n * k) * sizeof *y);
    for (int64_t r = 0; r < m; r++)
        for (int64_t c = 0; c < n; c++) {
            const double gv = g[r * n + c], *ar = a + r * k;
            double *yr = y + c * k;
            for (int64_t e = 0; e < k; e++)
                yr[e] += gv * ar[e];
        }
}

void vka_ref_col_sums(const double *g, int64_t m, int64_t n, double *y)
{
    memset(y, 0, (size_t)n * sizeof *y);
    for (int64_t r = 0; r < m; r++)
        for (int64_t c = 0; c < n; c++)
            y[c] += g[r * n + c];
}

/* ---- vkattn_ref_linear_backward */

/* An input operand (x or w): present, rank `rank_a` or `rank_b`, f32, f16
 * or bf16 (q8_0 refused by name: it is not trained), dimensions >= 1. */
static vkattn_result check_input(const vkattn_host_tensor *t, const char *name, uint32_t rank_a,
                                 uint32_t rank_b, const char *layout, char *error,
                                 size_t error_size)
{
    if (!t->data) {
        vka_error_format(error, error_size, "args->%s.data is NULL: it is required", name);
        return VKATTN_ERROR_INVALID_ARGUMENT;
    }
    if (t->dtype == VKATTN_DTYPE_Q8_0) {
        vka_error_format(error, error_size,
                         "args->%s.dtype is q8_0: quantized weights are not trained (the backward "
                         "takes f32, f16 or bf16)",
                         name);
        return VKATTN_ERROR_UNSUPPORTED_DTYPE;
    }
    if (!vka_dtype_is_float(t->dtype) && t->dtype != VKATTN_DTYPE_BF16) {
        char b[VKA_DTYPE_TEXT];
        vka_error_format(error, error_size, "args->%s.dtype is %s: it must be f32, f16 or bf16",
                         name, vka_dtype_text(t->dtype, b));
        return VKATTN_ERROR_UNSUPPORTED_DTYPE;
    }
    if (t->rank != rank_a && t->rank != rank_b) {
        vka_error_format(error, error_size, "args->%s.rank is %u: it must be %s", name, t->rank,
                         layout);
        return VKATTN_ERROR_INVALID_ARGUMENT;
    }
    for (uint32_t i = 0; i < t->rank; i++)
        if (t->shape[i] < 1) {
            vka_error_format(error, error_size,
                             "args->%s.shape[%u] is %lld: every dimension must be >= 1", name, i,
                             (long long)t->shape[i]);
            return VKATTN_ERROR_INVALID_ARGUMENT;
        }
    return VKATTN_SUCCESS;
}

/* dy (required) or an output (optional: data NULL): f32, of rank `rank`
 * and shape `want` (`like` says whose: "args->forward.x's"), resolved. */
static vkattn_result check_f32(const vkattn_host_tensor *t, const char *name, bool required,
                               uint32_t rank, const int64_t *want, const char *like,
                               vkattn_host_tensor *out, char *error, size_t error_size)
{
    memset(out, 0, sizeof *out);
    if (!t->data) {
        if (!required)
            return VKATTN_SUCCESS;
        vka_error_format(error, error_size, "args->%s.data is NULL: %s is required", name, name);
        return VKATTN_ERROR_INVALID_ARGUMENT;
    }
    if (t->dtype != VKATTN_DTYPE_F32) {
        char b[VKA_DTYPE_TEXT];
        vka_error_format(error, error_size, "args->%s.dtype is %s: it must be f32", name,
                         vka_dtype_text(t->dtype, b));
        return VKATTN_ERROR_UNSUPPORTED_DTYPE;
    }
    if (t->rank != rank) {
        vka_error_format(error, error_size, "args->%s.rank is %u but it must be %u, as %s", name,
                         t->rank, rank, like);
        return VKATTN_ERROR_SHAPE_MISMATCH;
    }
    for (uint32_t i = 0; i < rank; i++)
        if (t->shape[i] != want[i]) {
            vka_error_format(error, error_size,
                             "args->%s.shape[%u] is %lld but it must be %lld, as %s", name, i,
                             (long long)t->shape[i], (long long)want[i], like);
            return VKATTN_ERROR_SHAPE_MISMATCH;
        }
    char full[32];
    vka_error_format(full, sizeof full, "args->%s", name);
    return vka_host_tensor_resolve(t, full, !required, out, error, error_size);
}

typedef struct linear_bwd_plan {
    vkattn_host_tensor x, w, dy, dx, dw, db; /* resolved; outputs data NULL: not asked */
    int64_t m, n, k;                         /* rows, out_features, in_features */
} linear_bwd_plan;

static vkattn_result prepare(const vkattn_ref_linear_backward_args *args, linear_bwd_plan *p,
                             char *error, size_t error_size)
{
    if (!args) {
        vka_error_format(error, error_size, "args is NULL");
        return VKATTN_ERROR_INVALID_ARGUMENT;
    }
    const vkattn_host_tensor *x = &args->forward.x, *w = &args->forward.w;
    VKA_TRY(check_input(x, "forward.x", 2, 3, "2 [M, K] or 3 [B, T, K]", error, error_size));
    VKA_TRY(check_input(w, "forward.w", 2, 2, "2 [N, K]", error, error_size));
    const uint32_t r = x->rank;
    if (w->shape[1] != x->shape[r - 1]) {
        vka_error_format(error, error_size,
                         "args->forward.w.shape[1] is %lld but args->forward.x.shape[%u] (K) is "
                         "%lld: w is [N, K]",
                         (long long)w->shape[1], r - 1, (long long)x->shape[r - 1]);
        return VKATTN_ERROR_SHAPE_MISMATCH;
    }
    memset(p, 0, sizeof *p);
    VKA_TRY(vka_host_tensor_resolve(x, "args->forward.x", false, &p->x, error, error_size));
    VKA_TRY(vka_host_tensor_resolve(w, "args->forward.w", false, &p->w, error, error_size));
    int64_t y_shape[3], n_shape[1] = {w->shape[0]};
    memcpy(y_shape, x->shape, sizeof y_shape);
    y_shape[r - 1] = w->shape[0];
    VKA_TRY(check_f32(&args->dy, "dy", true, r, y_shape,
                      "y [.., N] (args->forward.x's rows, w's N)", &p->dy, error, error_size));
    VKA_TRY(check_f32(&args->dx, "dx", false, r, x->shape, "args->forward.x's", &p->dx, error,
                      error_size));
    VKA_TRY(check_f32(&args->dw, "dw", false, 2, w->shape, "args->forward.w's", &p->dw, error,
                      error_size));
    VKA_TRY(check_f32(&args->db, "db", false, 1, n_shape, "[N] (args->forward.w.shape[0])", &p->db,
                      error, error_size));
    p->n = w->shape[0];
    p->k = w->shape[1];
    p->m = x->shape[0] * (r == 3 ? x->shape[1] : 1);
    return VKATTN_SUCCESS;
}

vkattn_result vkattn_ref_linear_backward(const vkattn_ref_linear_backward_args *args, char *error,
                                         size_t error_size)
{
    linear_bwd_plan p;
    VKA_TRY(prepare(args, &p, error, error_size));
    /* x, w, dy and the three results, dense */
    size_t mk, nk, mn, total = 0;
    bool ok = vka_size_mul((size_t)p.m, (size_t)p.k, &mk) &&
              vka_size_mul((size_t)p.n, (size_t)p.k, &nk) &&
              vka_size_mul((size_t)p.m, (size_t)p.n, &mn) && mk <= SIZE_MAX / 4 &&
              nk <= SIZE_MAX / 4 && mn <= SIZE_MAX / 4;
    if (ok)
        total = 2 * mk + 2 * nk + mn + (size_t)p.n;
    double *s = ok ? vka_ref_scratch(total, error, error_size) : NULL;
    if (!s) {
        if (!ok)
            vka_error_format(error, error_size,
                             "args->forward.x: the reference's scratch memory size overflows");
        return VKATTN_ERROR_OUT_OF_HOST_MEMORY;
    }
    double *x = s, *w = x + mk, *dy = w + nk, *dx = dy + mn, *dw = dx + mk, *db = dw + nk;
    vka_ref_gather_dense(&p.x, x);
    vka_ref_gather_dense(&p.w, w);
    vka_ref_gather_dense(&p.dy, dy);
    if (p.dx.data) {
        vka_ref_gemm_nn(dy, w, p.m, p.n, p.k, false, dx);
        vka_ref_scatter_dense(&p.dx, dx);
    }
    if (p.dw.data) {
        vka_ref_gemm_tn(dy, x, p.m, p.n, p.k, dw);
        vka_ref_scatter_dense(&p.dw, dw);
    }
    if (p.db.data) {
        vka_ref_col_sums(dy, p.m, p.n, db);
        vka_ref_scatter_dense(&p.db, db);
    }
    free(s);
    return VKATTN_SUCCESS;
}
