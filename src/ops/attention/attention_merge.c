/* vkattn_attention_merge: two attention results over disjoint key sets
 * combined by their LSE (attention_merge.comp) - checks, bindings and
 * dispatches. */
#include "ops/attention/attention_internal.h"
#include "vka_spirv.h"

#include <string.h>

/* Push constants of attention_merge.comp (104 bytes). */
typedef struct merge_push {
    uint32_t a[4], b[4], o[4];   /* out_a, out_b, out: offset, strides (vec4s) */
    uint32_t la[4], lb[4], l[4]; /* lse_a, lse_b, lse: offset, strides (elements) */
    uint32_t q_len, flags;
} merge_push;
_Static_assert(sizeof(merge_push) == 104, "merge_push mirrors attention_merge.comp");

enum { MERGE_FLAG_LSE_OUT = 1u };
#define MERGE_WORKGROUP 64u

#define MERGE_KERNEL(dt)                                                             \
    {                                                                                \
        .name = "attention_merge_" #dt, .spirv = &vka_spirv_attention_merge_##dt,    \
        .binding_count = 6,                                                          \
        .bindings = {VKA_BINDING_STORAGE, VKA_BINDING_STORAGE, VKA_BINDING_STORAGE,  \
                     VKA_BINDING_STORAGE, VKA_BINDING_STORAGE, VKA_BINDING_STORAGE}, \
        .push_size = sizeof(merge_push)                                              \
    }
static const vka_kernel merge_kernels[4] = {
    [VKA_STORAGE_F32] = MERGE_KERNEL(f32),
    [VKA_STORAGE_F16] = MERGE_KERNEL(f16),
    [VKA_STORAGE_F16P] = MERGE_KERNEL(f16p),
    [VKA_STORAGE_BF16] = MERGE_KERNEL(bf16),
};

/* A checked call: resolved tensors (lse buffer NULL when absent). */
typedef struct merge_call {
    vkattn_tensor t[6]; /* out_a, lse_a, out_b, lse_b, out, lse */
    uint32_t batch, heads, q_len, head_dim;
} merge_call;

enum { OUT_A, LSE_A, OUT_B, LSE_B, OUT, LSE };
static const char *const names[6] = {"args->out_a", "args->lse_a", "args->out_b",
                                     "args->lse_b", "args->out",   "args->lse"};

/* The same view of the same memory. */
static bool same_view(const vkattn_tensor *x, const vkattn_tensor *y)
{
    if (x->buffer != y->buffer || x->offset != y->offset || x->dtype != y->dtype ||
        x->rank != y->rank)
        return false;
    for (uint32_t d = 0; d < x->rank; d++)
        if (x->shape[d] != y->shape[d] || x->strides[d] != y->strides[d])
            return false;
    return true;
}

static vkattn_result check_shape(vkattn_context *ctx, const vkattn_tensor *t, const char *name,
                                 uint32_t rank, const int64_t *shape, const char *layout)
{
    if (t->rank != rank)
        return vka_fail(ctx, VKATTN_ERROR_INVALID_ARGUMENT, "%s.rank is %u: it must be %u (%s)",
                        name, t->rank, rank, layout);
    for (uint32_t d = 0; d < rank; d++)
        if (t->shape[d] != shape[d])
            return vka_fail(ctx, VKATTN_ERROR_SHAPE_MISMATCH,
                            "%s.shape[%u] is %lld: it must be %lld, as args->out_a's (%s)", name, d,
                            (long long)t->shape[d], (long long)shape[d], layout);
    return VKATTN_SUCCESS;
}

static vkattn_result check_merge(vkattn_context *ctx, const void *in, void *out)
{
    const vkattn_attention_merge_args *args = in;
    merge_call *c = out;
    memset(c, 0, sizeof *c);
    const vkattn_tensor *given[6] = {&args->out_a, &args->lse_a, &args->out_b,
                                     &args->lse_b, &args->out,   &args->lse};
    for (int i = 0; i < LSE; i++)
        if (!given[i]->buffer)
            return vka_fail(ctx, VKATTN_ERROR_INVALID_ARGUMENT, "%s.buffer is NULL: it is required",
                            names[i]);
    const vkattn_tensor *a = &args->out_a;
    if (a->rank != 4)
        return vka_fail(ctx, VKATTN_ERROR_INVALID_ARGUMENT,
                        "args->out_a.rank is %u: it must be 4 ([B, Hq, Tq, D])", a->rank);
    char b[VKA_DTYPE_TEXT];
    if (a->dtype != VKATTN_DTYPE_F32 && a->dtype != VKATTN_DTYPE_F16 &&
        a->dtype != VKATTN_DTYPE_BF16)
        return vka_fail(ctx, VKATTN_ERROR_UNSUPPORTED_DTYPE,
                        "args->out_a.dtype is %s: it must be f32, f16 or bf16",
                        vka_dtype_text(a->dtype, b));
    for (uint32_t d = 0; d < 4; d++)
        if (a->shape[d] < 1 || a->shape[d] > UINT32_MAX)
            return vka_fail(ctx, VKATTN_ERROR_INVALID_ARGUMENT,
                            "args->out_a.shape[%u] is %lld: it must be in 1..%u", d,
                            (long long)a->shape[d], UINT32_MAX);
    if (a->shape[3] % 4)
        return vka_fail(ctx, VKATTN_ERROR_INVALID_ARGUMENT,
                        "args->out_a.shape[3] (head_dim) is %lld: it must be a multiple of 4",
                        (long long)a->shape[3]);
    const int64_t *sh = a->shape;
    for (int i = OUT_B; i <= OUT; i += OUT - OUT_B) {
        VKA_TRY(check_shape(ctx, given[i], names[i], 4, sh, "[B, Hq, Tq, D]"));
        if (given[i]->dtype != a->dtype) {
            char b2[VKA_DTYPE_TEXT];
            return vka_fail(ctx, VKATTN_ERROR_UNSUPPORTED_DTYPE,
                            "%s.dtype is %s: it must be args->out_a's, %s", names[i],
                            vka_dtype_text(given[i]->dtype, b), vka_dtype_text(a->dtype, b2));
        }
    }
    for (int i = LSE_A; i <= LSE; i += 2) {
        if (!given[i]->buffer)
            continue;
        VKA_TRY(check_shape(ctx, given[i], names[i], 3, sh, "f32 [B, Hq, Tq]"));
        if (given[i]->dtype != VKATTN_DTYPE_F32)
            return vka_fail(ctx, VKATTN_ERROR_UNSUPPORTED_DTYPE, "%s.dtype is %s: it must be f32",
                            names[i], vka_dtype_text(given[i]->dtype, b));
    }
    for (int i = 0; i < 6; i++)
        if (given[i]->buffer)
            VKA_TRY(vka_tensor_resolve(ctx, given[i], names[i], &c->t[i]));
    for (int i = OUT_A; i <= OUT; i += 2)
        VKA_TRY(vka_tensor_check_rows(ctx, &c->t[i], names[i], 4, 16));
    VKA_TRY(vka_tensor_check_output(ctx, &c->t[OUT], names[OUT]));
    if (c->t[LSE].buffer)
        VKA_TRY(vka_tensor_check_output(ctx, &c->t[LSE], names[LSE]));
    /* out may be out_a or out_b and lse may be lse_a or lse_b, exactly (the
     * kernel reads a row's inputs before it writes them); nothing else may
     * overlap an output. */
    for (int o = OUT; o <= LSE; o++)
        for (int i = 0; i < 6; i++) {
            if (i == o || (o == LSE && i == OUT))
                continue;
            bool partner = o == OUT ? (i == OUT_A || i == OUT_B) : (i == LSE_A || i == LSE_B);
            if (partner && same_view(&c->t[o], &c->t[i]))
                continue;
            VKA_TRY(vka_tensor_check_disjoint(ctx, &c->t[o], names[o], &c->t[i], names[i]));
        }
    c->batch = (uint32_t)sh[0], c->heads = (uint32_t)sh[1];
    c->q_len = (uint32_t)sh[2], c->head_dim = (uint32_t)sh[3];
    return VKATTN_SUCCESS;
}

/* The box of batches [b0, b0 + nb) of tensor i. */
static vka_box batch_box(const merge_call *c, int i, uint32_t b0, uint32_t nb)
{
    vka_box box = {{0}, {1, 1, 1, 1}};
    box.start[0] = b0, box.count[0] = nb;
    box.count[1] = c->heads, box.count[2] = c->q_len;
    if (i % 2 == 0)
        box.count[3] = c->head_dim;
    return box;
}

static bool batches_fit(vkattn_context *ctx, const merge_call *c, uint32_t nb)
{
    for (int i = 0; i < 6; i++) {
        vka_box box = batch_box(c, i, 0, nb);
        if (c->t[i].buffer && !vka_box_fits_storage(ctx, &c->t[i], &box))
            return false;
    }
    return nb <= ctx->info.max_workgroup_count[2];
}

static vkattn_result record_merge(vkattn_context *ctx, VkCommandBuffer cmd, const void *call)
{
    const merge_call *c = call;
    uint32_t nb = batches_fit(ctx, c, c->batch) ? c->batch : 1;
    uint32_t wg = vka_workgroup_size(ctx, MERGE_WORKGROUP);
    uint32_t gx = vka_div_up(c->q_len, wg);
    if (!batches_fit(ctx, c, nb) || gx > ctx->info.max_workgroup_count[0] ||
        c->heads > ctx->info.max_workgroup_count[1])
        return vka_fail(ctx, VKATTN_ERROR_UNSUPPORTED,
                        "vkattn_attention_merge: one batch of [%u, %u, %u] rows does not fit the "
                        "device's bindings or grid",
                        c->heads, c->q_len, c->head_dim);
    const vka_kernel *kernel = &merge_kernels[vka_storage_kind(ctx, c->t[OUT].dtype)];
    uint32_t spec[2] = {wg, c->head_dim};
    vka_pipeline *pipeline;
    VKA_TRY(vka_pipeline_get(ctx, kernel, spec, 2, &pipeline));
    merge_push push = {.q_len = c->q_len, .flags = c->t[LSE].buffer ? MERGE_FLAG_LSE_OUT : 0};
    uint32_t *fields[6] = {push.a, push.la, push.b, push.lb, push.o, push.l};
    static const int binding_of[6] = {0, 3, 1, 4, 2, 5}; /* the kernel's bindings */
    for (uint32_t b0 = 0; b0 < c->batch; b0 += nb) {
        uint32_t n = c->batch - b0 < nb ? c->batch - b0 : nb;
        vka_binding bind[6];
        for (int i = 0; i < 6; i++) {
            const vkattn_tensor *t = &c->t[i];
            uint32_t *f = fields[i];
            vka_binding *bi = &bind[binding_of[i]];
            if (!t->buffer) {
                VKA_TRY(vka_bind_dummy(ctx, VK_FORMAT_UNDEFINED, bi));
                f[0] = f[1] = f[2] = f[3] = 0;
                continue;
            }
            vka_box box = batch_box(c, i, b0, n);
            uint64_t first, extent;
            vka_box_span(t, &box, &first, &extent);
            size_t es = vkattn_dtype_size(t->dtype), unit = i % 2 == 0 ? 4 : 1;
            VKA_TRY(vka_bind_window(ctx, t->buffer, t->offset + first * es, extent * es, unit * es,
                                    bi, &f[0]));
            for (uint32_t d = 0; d < 3; d++)
                f[1 + d] = box.count[d] > 1 ? (uint32_t)(t->strides[d] / (int64_t)unit) : 0;
        }
        /* No LSE output: its writable binding takes the output's window,
         * never the shared dummy (see attention_record.c) */
        if (!c->t[LSE].buffer)
            bind[binding_of[LSE]] = bind[binding_of[OUT]];
        if (b0 > 0)
            vka_cmd_compute_barrier(ctx, cmd); /* windows of strided layouts may overlap */
        VKA_TRY(vka_cmd_dispatch(ctx, cmd, pipeline, bind, &push, gx, c->heads, n));
    }
    return VKATTN_SUCCESS;
}

/* vkattn_cmd_attention_merge and vkattn_attention_merge */
VKA_OP_ENTRY_POINTS(attention_merge, vkattn_attention_merge_args, merge_call, check_merge,
                    record_merge)
