/* Shape and dtype rules of attention, shared by the CPU reference and the GPU
 * op (see attention_shapes.h). */
#include "spec/attention_shapes.h"

#include "spec/dtype.h"
#include "spec/error_text.h"

#include <math.h>

typedef struct check_state {
    const char *prefix;
    char *error;
    size_t error_size;
} check_state;

/* Rank and per-dimension limits of one present tensor. */
static vkattn_result check_rank(const check_state *st, const vka_shape_view *t, const char *name,
                                uint32_t rank_a, uint32_t rank_b, const char *layout)
{
    if (t->rank != rank_a && t->rank != rank_b) {
        vka_error_format(st->error, st->error_size, "%s%s.rank is %u: %s is %s", st->prefix, name,
                         t->rank, name, layout);
        return VKATTN_ERROR_INVALID_ARGUMENT;
    }
    for (uint32_t i = 0; i < t->rank; i++) {
        if (t->shape[i] < 1 || t->shape[i] > (int64_t)UINT32_MAX) {
            vka_error_format(st->error, st->error_size,
                             "%s%s.shape[%u] is %lld: every dimension must be in 1..%lu",
                             st->prefix, name, i, (long long)t->shape[i],
                             (unsigned long)UINT32_MAX);
            return VKATTN_ERROR_INVALID_ARGUMENT;
        }
    }
    return VKATTN_SUCCESS;
}

/* `t` must have one of two dtypes (b may equal a). */
static vkattn_result check_dtype(const check_state *st, const vka_shape_view *t, const char *name,
                                 vkattn_dtype a, vkattn_dtype b, const char *allowed)
{
    if (t->dtype == a || t->dtype == b)
        return VKATTN_SUCCESS;
    char buf[VKA_DTYPE_TEXT];
    vka_error_format(st->error, st->error_size, "%s%s.dtype %s is not supported: %s is %s",
                     st->prefix, name, vka_dtype_text(t->dtype, buf), name, allowed);
    return VKATTN_ERROR_UNSUPPORTED_DTYPE;
}

/* `t` must be f32, f16 or bf16. */
static vkattn_result check_float(const check_state *st, const vka_shape_view *t, const char *name)
{
    if (t->dtype == VKATTN_DTYPE_BF16)
        return VKATTN_SUCCESS;
    return check_dtype(st, t, name, VKATTN_DTYPE_F32, VKATTN_DTYPE_F16, "f32, f16 or bf16");
}

/* k or v: f32, f16, bf16, or one of ggml's block formats when its head
 * dim (shape[3], `dim_name`) is whole blocks. */
static vkattn_result check_kv(const check_state *st, const vka_shape_view *t, const char *name,
                              const char *dim_name)
{
    if (vka_dtype_is_quantized(t->dtype)) {
        if (t->shape[3] % VKA_QUANT_BLOCK == 0)
            return VKATTN_SUCCESS;
        vka_error_format(st->error, st->error_size,
                         "%s%s.shape[3] (%s) %lld does not suit a %s %s: it must be a multiple "
                         "of %u (whole blocks)",
                         st->prefix, name, dim_name, (long long)t->shape[3],
                         vkattn_dtype_name(t->dtype), name, VKA_QUANT_BLOCK);
        return VKATTN_ERROR_INVALID_ARGUMENT;
    }
    if (t->dtype == VKATTN_DTYPE_BF16)
        return VKATTN_SUCCESS;
    return check_dtype(st, t, name, VKATTN_DTYPE_F32, VKATTN_DTYPE_F16,
                       "f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1 or iq4_nl");
}

vkattn_result vka_quant_strides_check(const char *name, vkattn_dtype dtype, uint32_t rank,
                                      const int64_t *shape, const int64_t *strides, char *error,
                                      size_t error_size)
{
    uint32_t l = rank - 1;
    if (shape[l] > 1 && strides[l] != 1) {
        vka_error_format(error, error_size,
                         "%s.strides[%u] is %lld: a %s tensor's rows are contiguous blocks "
                         "(stride 1)",
                         name, l, (long long)strides[l], vkattn_dtype_name(dtype));
        return VKATTN_ERROR_INVALID_ARGUMENT;
    }
    for (uint32_t d = 0; d < l; d++)
        if (shape[d] > 1 && strides[d] % VKA_QUANT_BLOCK) {
            vka_error_format(error, error_size,
                             "%s.strides[%u] is %lld: a %s tensor's strides count values and "
                             "must be multiples of %u (whole blocks)",
                             name, d, (long long)strides[d], vkattn_dtype_name(dtype),
                             VKA_QUANT_BLOCK);
            return VKATTN_ERROR_INVALID_ARGUMENT;
        }
    return VKATTN_SUCCESS;
}

/* `t` must have the dtype of `ref` (they share one). */
static vkattn_result check_same_dtype(const check_state *st, const vka_shape_view *t,
                                      const char *name, const vka_shape_view *ref,
                                      const char *ref_name)
{
    if (t->dtype == ref->dtype)
        return VKATTN_SUCCESS;
    char b1[VKA_DTYPE_TEXT], b2[VKA_DTYPE_TEXT];
    vka_error_format(st->error, st->error_size,
                     "%s%s.dtype %s differs from %s%s.dtype %s: %s and %s share a dtype",
                     st->prefix, name, vka_dtype_text(t->dtype, b1), st->prefix, ref_name,
                     vka_dtype_text(ref->dtype, b2), ref_name, name);
    return VKATTN_ERROR_UNSUPPORTED_DTYPE;
}

/* t.shape[i] must equal `want`, which is ref.shape[j] (named in the message). */
static vkattn_result check_dim(const check_state *st, const vka_shape_view *t, const char *name,
                               uint32_t i, const char *what, const vka_shape_view *ref,
                               const char *ref_name, uint32_t j)
{
    if (t->shape[i] == ref->shape[j])
        return VKATTN_SUCCESS;
    vka_error_format(st->error, st->error_size,
                     "%s%s.shape[%u] (%s) %lld differs from %s%s.shape[%u] (%s) %lld", st->prefix,
                     name, i, what, (long long)t->shape[i], st->prefix, ref_name, j, what,
                     (long long)ref->shape[j]);
    return VKATTN_ERROR_SHAPE_MISMATCH;
}

/* Like check_dim, but a size of 1 broadcasts. */
static vkattn_result check_dim_or_1(const check_state *st, const vka_shape_view *t,
                                    const char *name, uint32_t i, const char *what,
                                    const vka_shape_view *ref, const char *ref_name, uint32_t j)
{
    if (t->shape[i] == 1 || t->shape[i] == ref->shape[j])
        return VKATTN_SUCCESS;
    vka_error_format(st->error, st->error_size,
                     "%s%s.shape[%u] (%s) %lld is neither 1 nor %s%s.shape[%u] (%s) %lld",
                     st->prefix, name, i, what, (long long)t->shape[i], st->prefix, ref_name, j,
                     what, (long long)ref->shape[j]);
    return VKATTN_ERROR_SHAPE_MISMATCH;
}

/* A head dim (t.shape[3]) the attention kernels take. */
static vkattn_result check_head_dim(const check_state *st, const vka_shape_view *t,
                                    const char *name, const char *what)
{
    int64_t d = t->shape[3]; /* (>= 1: check_rank) */
    if (d <= VKA_ATTENTION_HEAD_DIM_MAX)
        return VKATTN_SUCCESS;
    vka_error_format(st->error, st->error_size,
                     "%s%s.shape[3] (%s) %lld is not supported: it must be from 1 to %u",
                     st->prefix, name, what, (long long)d, VKA_ATTENTION_HEAD_DIM_MAX);
    return VKATTN_ERROR_INVALID_ARGUMENT;
}

static const char qkv_layout[] = "rank 4: [B, H, T, D]";

static const char q_layout[] =
    "rank 4: [B, H, T, D], or rank 3: [H, T, D] (broadcast over k's batch)";

static vkattn_result check_required(const check_state *st, const vka_attention_shapes *s)
{
    const vka_shape_view *views[4] = {&s->q, &s->k, &s->v, &s->out};
    static const char *const names[4] = {"q", "k", "v", "out"};
    for (int i = 0; i < 4; i++) {
        if (!views[i]->present) {
            vka_error_format(st->error, st->error_size, "%s%s.%s is NULL: %s is required",
                             st->prefix, names[i], s->handle_name ? s->handle_name : "data",
                             names[i]);
            return VKATTN_ERROR_INVALID_ARGUMENT;
        }
        VKA_TRY(check_rank(st, views[i], names[i], i ? 4 : 3, 4, i ? qkv_layout : q_layout));
    }
    VKA_TRY(check_float(st, &s->q, "q"));
    VKA_TRY(check_kv(st, &s->k, "k", "head_dim"));
    VKA_TRY(check_same_dtype(st, &s->out, "out", &s->q, "q"));
    VKA_TRY(check_kv(st, &s->v, "v", "v_head_dim")); /* (k and v may differ) */

    /* Batch, heads (GQA), key length, head dimension. */
    VKA_TRY(check_dim(st, &s->k, "k", 0, "batch", &s->q, "q", 0));
    VKA_TRY(check_dim(st, &s->v, "v", 0, "batch", &s->q, "q", 0));
    VKA_TRY(check_dim(st, &s->v, "v", 1, "num_kv_heads", &s->k, "k", 1));
    if (s->q.shape[1] % s->k.shape[1] != 0) {
        vka_error_format(st->error, st->error_size,
                         "%sk.shape[1] (num_kv_heads) %lld does not divide %sq.shape[1] "
                         "(num_heads) %lld",
                         st->prefix, (long long)s->k.shape[1], st->prefix,
                         (long long)s->q.shape[1]);
        return VKATTN_ERROR_SHAPE_MISMATCH;
    }
    VKA_TRY(check_dim(st, &s->v, "v", 2, "kv_len", &s->k, "k", 2));
    VKA_TRY(check_dim(st, &s->k, "k", 3, "head_dim", &s->q, "q", 3));
    static const char *const out_what[3] = {"batch", "num_heads", "q_len"};
    for (uint32_t i = 0; i < 3; i++)
        VKA_TRY(check_dim(st, &s->out, "out", i, out_what[i], &s->q, "q", i));
    /* v's head dim (Dv) may differ from q's and k's (Dk); out's is Dv. */
    VKA_TRY(check_dim(st, &s->out, "out", 3, "v_head_dim", &s->v, "v", 3));
    VKA_TRY(check_head_dim(st, &s->q, "q", "head_dim"));
    VKA_TRY(check_head_dim(st, &s->v, "v", "v_head_dim"));
    return VKATTN_SUCCESS;
}

/* A mask of rank 2 [Tq, Tk], 3 [B*Hq, Tq, Tk] or 4 [B, Hq, Tq, Tk], any
 * dimension 1 (broadcast); f32, f16 or u8. */
static vkattn_result check_mask(const check_state *st, const vka_attention_shapes *s)
{
    const vka_shape_view *m = &s->mask, *q = &s->q, *k = &s->k;
    VKA_TRY(check_rank(st, m, "mask", m->rank == 3 ? 3 : 2, 4,
                       "rank 2 [Tq, Tk], 3 [B*Hq, Tq, Tk] or 4 [B, Hq, Tq, Tk] (any "
                       "dimension may be 1)"));
    if (m->dtype != VKATTN_DTYPE_U8 && m->dtype != VKATTN_DTYPE_BF16)
        VKA_TRY(check_dtype(st, m, "mask", VKATTN_DTYPE_F32, VKATTN_DTYPE_F16,
                            "f32, f16 or bf16 (additive) or u8 (boolean)"));
    uint32_t r = m->rank;
    VKA_TRY(check_dim_or_1(st, m, "mask", r - 2, "q_len", q, "q", 2));
    VKA_TRY(check_dim_or_1(st, m, "mask", r - 1, "kv_len", k, "k", 2));
    if (r == 4) {
        VKA_TRY(check_dim_or_1(st, m, "mask", 0, "batch", q, "q", 0));
        VKA_TRY(check_dim_or_1(st, m, "mask", 1, "num_heads", q, "q", 1));
    } else if (r == 3) {
        int64_t rows = q->shape[0] * q->shape[1];
        if (m->shape[0] != 1 && m->shape[0] != rows) {
            vka_error_format(st->error, st->error_size,
                             "%smask.shape[0] (batch * num_heads) %lld is neither 1 nor %lld "
                             "(%sq.shape[0] %lld * %sq.shape[1] %lld)",
                             st->prefix, (long long)m->shape[0], (long long)rows, st->prefix,
                             (long long)q->shape[0], st->prefix, (long long)q->shape[1]);
            return VKATTN_ERROR_SHAPE_MISMATCH;
        }
    }
    return VKATTN_SUCCESS;
}

static vkattn_result check_optional(const check_state *st, const vka_attention_shapes *s)
{
    const vka_shape_view *q = &s->q, *k = &s->k;
    if (s->mask.present)
        VKA_TRY(check_mask(st, s));
    if (s->key_padding.present) {
        const vka_shape_view *p = &s->key_padding;
        VKA_TRY(check_rank(st, p, "key_padding", 2, 2, "rank 2: [B, Tk]"));
        VKA_TRY(check_dtype(st, p, "key_padding", VKATTN_DTYPE_U8, VKATTN_DTYPE_U8, "u8"));
        VKA_TRY(check_dim(st, p, "key_padding", 0, "batch", q, "q", 0));
        VKA_TRY(check_dim(st, p, "key_padding", 1, "kv_len", k, "k", 2));
    }
    if (s->weights.present) {
        const vka_shape_view *w = &s->weights;
        VKA_TRY(check_rank(st, w, "weights", 3, 4,
                           "rank 3 [B, Tq, Tk] (mean over heads) or rank 4 [B, Hq, Tq, Tk]"));
        VKA_TRY(check_dtype(st, w, "weights", VKATTN_DTYPE_F32, VKATTN_DTYPE_F32, "f32"));
        uint32_t r = w->rank;
        VKA_TRY(check_dim(st, w, "weights", 0, "batch", q, "q", 0));
        if (r == 4)
            VKA_TRY(check_dim(st, w, "weights", 1, "num_heads", q, "q", 1));
        VKA_TRY(check_dim(st, w, "weights", r - 2, "q_len", q, "q", 2));
        VKA_TRY(check_dim(st, w, "weights", r - 1, "kv_len", k, "k", 2));
    }
    return VKATTN_SUCCESS;
}

void vka_query_view4(const vka_attention_dims *dims, int64_t *shape, int64_t *strides)
{
    for (int i = 3; i > 0; i--) {
        shape[i] = shape[i - 1];
        strides[i] = strides[i - 1];
    }
    shape[0] = dims->batch;
    strides[0] = 0;
}

vkattn_result vka_attention_check(const vka_attention_shapes *s, const char *prefix,
                                  vka_attention_dims *dims, char *error, size_t error_size)
{
    check_state st = {prefix ? prefix : "", error, error_size};
    if (!s) {
        vka_error_format(error, error_size, "%sattention shapes are NULL", st.prefix);
        return VKATTN_ERROR_INVALID_ARGUMENT;
    }
    /* q [Hq, Tq, D] broadcast over k's batch: checked as [B, Hq, Tq, D] */
    vka_attention_shapes full;
    int64_t q4[4];
    const bool q_broadcast = s->q.present && s->q.rank == 3 && s->k.present && s->k.rank == 4;
    if (q_broadcast) {
        q4[0] = s->k.shape[0];
        for (int i = 0; i < 3; i++)
            q4[i + 1] = s->q.shape[i];
        full = *s;
        full.q.rank = 4;
        full.q.shape = q4;
        s = &full;
    }
    VKA_TRY(check_required(&st, s));
    VKA_TRY(check_optional(&st, s));
    if (dims) {
        vka_attention_dims d = {0};
        d.batch = (uint32_t)s->q.shape[0];
        d.num_heads = (uint32_t)s->q.shape[1];
        d.num_kv_heads = (uint32_t)s->k.shape[1];
        d.q_len = (uint32_t)s->q.shape[2];
        d.kv_len = (uint32_t)s->k.shape[2];
        d.head_dim = (uint32_t)s->q.shape[3];
        d.v_head_dim = (uint32_t)s->v.shape[3];
        d.q_dtype = s->q.dtype;
        d.kv_dtype = s->k.dtype;
        d.v_dtype = s->v.dtype;
        if (s->mask.present) {
            d.mask_rank = s->mask.rank;
            d.mask_dtype = s->mask.dtype;
        }
        d.key_padding = s->key_padding.present;
        d.weights_rank = s->weights.present ? s->weights.rank : 0;
        d.q_broadcast = q_broadcast;
        *dims = d;
    }
    return VKATTN_SUCCESS;
}

void vka_mask_view4(const vka_attention_dims *dims, uint32_t rank, const int64_t *shape,
                    const int64_t *strides, int64_t shape4[4], int64_t strides4[4])
{
    const int64_t full[4] = {dims->batch, dims->num_heads, dims->q_len, dims->kv_len};
    for (int d = 0; d < 4; d++)
        shape4[d] = 1, strides4[d] = 0;
    uint32_t first = 4 - rank; /* the dimension the mask's own first one maps to */
    if (rank == 3) {
        /* row b*Hq + h */
        first = 2;
        if (shape[0] != 1) {
            shape4[0] = full[0], strides4[0] = strides[0] * full[1];
            shape4[1] = full[1], strides4[1] = strides[0];
        }
        shape += 1, strides += 1;
    }
    for (uint32_t d = first; d < 4; d++)
        shape4[d] = shape[d - first], strides4[d] = strides[d - first];
    for (int d = 0; d < 4; d++)
        if (shape4[d] == 1)
            strides4[d] = 0;
}

vkattn_result vka_bool_mask_check(vkattn_bool_mask value, const char *prefix, char *error,
                                  size_t error_size)
{
    if (value == VKATTN_BOOL_MASK_TRUE_ATTENDS || value == VKATTN_BOOL_MASK_TRUE_BLOCKS)
        return VKATTN_SUCCESS;
    vka_error_format(error, error_size,
                     "%sbool_mask is %d: it is VKATTN_BOOL_MASK_TRUE_ATTENDS (0) or "
                     "VKATTN_BOOL_MASK_TRUE_BLOCKS (1)",
                     prefix ? prefix : "", (int)value);
    return VKATTN_ERROR_INVALID_ARGUMENT;
}

vkattn_result vka_attention_scale(float scale, uint32_t head_dim, const char *name, double *out,
                                  char *error, size_t error_size)
{
    if (!isfinite(scale)) {
        vka_error_format(error, error_size,
                         "%s is %g: the scale must be finite (0 means 1/sqrt(head_dim))", name,
                         (double)scale);
        return VKATTN_ERROR_INVALID_ARGUMENT;
    }
    *out = scale != 0.0f ? (double)scale : 1.0 / sqrt((double)head_dim);
    return VKATTN_SUCCESS;
}

vkattn_result vka_head_mask_check(vka_shape_view m, uint32_t batch, uint32_t heads,
                                  const char *name, char *error, size_t error_size)
{
    if (!m.present)
        return VKATTN_SUCCESS;
    char b[VKA_DTYPE_TEXT];
    if (m.dtype != VKATTN_DTYPE_F32) {
        vka_error_format(error, error_size, "%s.dtype is %s: a head mask is f32 ([Hq] or [B, Hq])",
                         name, vka_dtype_text(m.dtype, b));
        return VKATTN_ERROR_UNSUPPORTED_DTYPE;
    }
    if (m.rank != 1 && m.rank != 2) {
        vka_error_format(error, error_size, "%s.rank is %u: a head mask is [Hq] or [B, Hq]", name,
                         m.rank);
        return VKATTN_ERROR_INVALID_ARGUMENT;
    }
    const uint32_t r = m.rank;
    if (m.shape[r - 1] != heads) {
        vka_error_format(error, error_size, "%s.shape[%u] is %lld but there are %u query heads",
                         name, r - 1, (long long)m.shape[r - 1], heads);
        return VKATTN_ERROR_SHAPE_MISMATCH;
    }
    if (r == 2 && m.shape[0] != batch && m.shape[0] != 1) {
        vka_error_format(error, error_size,
                         "%s.shape[0] is %lld: the batch %u, or 1 for every batch row", name,
                         (long long)m.shape[0], batch);
        return VKATTN_ERROR_SHAPE_MISMATCH;
    }
    return VKATTN_SUCCESS;
}
