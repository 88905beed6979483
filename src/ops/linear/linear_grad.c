/* The backward GEMMs (vka_cmd_gemm, linear.h): operands bound as windows of
 * 32-bit words, their dtypes and element strides in push constants of
 * shaders/gemm_grad.comp. */
#include "ops/linear/linear_internal.h"
#include "vka_spirv.h"

#include <string.h>

/* Push constants of gemm_grad.comp (60 bytes). */
typedef struct gemm_push {
    uint32_t m, n, k;
    uint32_t a_off, a_sm, a_sk;
    uint32_t b_off, b_sk, b_sn;
    uint32_t c_off, c_sm, c_sn;
    uint32_t bias_off;
    uint32_t types, flags;
} gemm_push;
_Static_assert(sizeof(gemm_push) == 60, "gemm_push mirrors gemm_grad.comp");

enum { T_F32 = 0, T_F16 = 1, T_BF16 = 2, T_ONES = 3 };
enum { FLAG_BIAS = 1, FLAG_ACCUMULATE = 2 };
#define GEMM_BM 64u
#define GEMM_BN 32u
#define GEMM_K_PIECE (1u << 19)

static const vka_kernel gemm_kernel = {
    .name = "gemm_grad",
    .spirv = &vka_spirv_gemm_grad,
    .binding_count = 4,
    .bindings = {VKA_BINDING_STORAGE, VKA_BINDING_STORAGE, VKA_BINDING_STORAGE,
                 VKA_BINDING_STORAGE},
    .push_size = sizeof(gemm_push),
};

static uint32_t type_code(vkattn_dtype d)
{
    return d == VKATTN_DTYPE_F16 ? T_F16 : d == VKATTN_DTYPE_BF16 ? T_BF16 : T_F32;
}

static bool float_dtype(vkattn_dtype d)
{
    return d == VKATTN_DTYPE_F32 || d == VKATTN_DTYPE_F16 || d == VKATTN_DTYPE_BF16;
}

/* Binds an operand of `rows` x `cols` elements: the window from its first to
 * its last element; *first is the first element's index in the window. */
static vkattn_result bind_operand(vkattn_context *ctx, const vka_gemm_operand *o, uint64_t rows,
                                  uint64_t cols, const char *what, const char *name,
                                  vka_binding *bind, uint32_t *first)
{
    const uint64_t es = vkattn_dtype_size(o->dtype);
    const uint64_t last = (rows - 1) * o->s0 + (cols - 1) * o->s1;
    vkattn_result r = vka_bind_window(ctx, o->buffer, o->offset, (last + 1) * es, es, bind, first);
    if (r != VKATTN_SUCCESS)
        return r;
    if ((uint64_t)*first + last > UINT32_MAX || o->s0 > UINT32_MAX || o->s1 > UINT32_MAX)
        return vka_fail(ctx, VKATTN_ERROR_UNSUPPORTED,
                        "%s: %s spans %llu elements: more than 32-bit indices reach", what, name,
                        (unsigned long long)(last + 1));
    return VKATTN_SUCCESS;
}

vkattn_result vka_cmd_gemm(vkattn_context *ctx, VkCommandBuffer cmd, const vka_gemm_args *g,
                           const char *what)
{
    if (!g->m || !g->n || !g->k)
        return VKATTN_SUCCESS;
    const vka_gemm_operand *ops[3] = {&g->a, &g->b, &g->c};
    for (int i = g->a_ones ? 1 : 0; i < 3; i++)
        if (!float_dtype(ops[i]->dtype))
            return vka_fail(ctx, VKATTN_ERROR_UNSUPPORTED_DTYPE,
                            "%s: an operand's dtype %d is not f32, f16 or bf16", what,
                            (int)ops[i]->dtype);
    const bool c16 = g->c.dtype != VKATTN_DTYPE_F32;
    gemm_push p;
    memset(&p, 0, sizeof p);
    p.m = g->m, p.n = g->n, p.k = g->k;
    vka_binding bind[4];
    uint32_t first = 0;
    if (g->a_ones) {
        VKA_TRY(vka_bind_dummy(ctx, VK_FORMAT_UNDEFINED, &bind[0]));
    } else {
        VKA_TRY(bind_operand(ctx, &g->a, g->m, g->k, what, "A", &bind[0], &first));
        p.a_off = first, p.a_sm = (uint32_t)g->a.s0, p.a_sk = (uint32_t)g->a.s1;
    }
    VKA_TRY(bind_operand(ctx, &g->b, g->k, g->n, what, "B", &bind[1], &first));
    p.b_off = first, p.b_sk = (uint32_t)g->b.s0, p.b_sn = (uint32_t)g->b.s1;
    VKA_TRY(bind_operand(ctx, &g->c, g->m, g->n, what, "C", &bind[3], &first));
    p.c_off = first, p.c_sm = (uint32_t)g->c.s0, p.c_sn = (uint32_t)g->c.s1;
    if (c16 && ((p.c_off | p.c_sm | p.n) & 1u || p.c_sn != 1))
        return vka_fail(ctx, VKATTN_ERROR_UNSUPPORTED,
                        "%s: a 16-bit C is written in whole words: it needs N (%u), its row "
                        "stride (%u) and its first element (%u) even and its columns contiguous",
                        what, p.n, p.c_sm, p.c_off);
    if (g->bias.buffer) {
        if (!float_dtype(g->bias.dtype))
            return vka_fail(ctx, VKATTN_ERROR_UNSUPPORTED_DTYPE,
                            "%s: the bias's dtype %d is not f32, f16 or bf16", what,
                            (int)g->bias.dtype);
        VKA_TRY(bind_operand(ctx, &g->bias, 1, g->n, what, "the bias", &bind[2], &first));
        p.bias_off = first;
        p.flags |= FLAG_BIAS;
    } else {
        VKA_TRY(vka_bind_dummy(ctx, VK_FORMAT_UNDEFINED, &bind[2]));
    }
    if (g->accumulate)
        p.flags |= FLAG_ACCUMULATE;
    p.types = (g->a_ones ? T_ONES : type_code(g->a.dtype)) | type_code(g->b.dtype) << 2 |
              (g->bias.buffer ? type_code(g->bias.dtype) : 0) << 4 | type_code(g->c.dtype) << 6;

    const uint32_t gx = vka_div_up(g->n, GEMM_BN), gy = vka_div_up(g->m, GEMM_BM);
    if (gx > ctx->info.max_workgroup_count[0] || gy > ctx->info.max_workgroup_count[1])
        return vka_fail(ctx, VKATTN_ERROR_UNSUPPORTED,
                        "%s: %u x %u outputs need %u x %u workgroups, more than the device's "
                        "maxComputeWorkGroupCount",
                        what, g->m, g->n, gx, gy);
    vka_pipeline *pipe;
    VKA_TRY(vka_pipeline_get(ctx, &gemm_kernel, NULL, 0, &pipe));
    /* K in pieces, each after the one before (accumulating): a shader
     * loop of lavapipe ends after 65535 iterations of BK values */
    for (uint32_t k0 = 0; k0 < g->k; k0 += GEMM_K_PIECE) {
        gemm_push piece = p;
        piece.k = g->k - k0 < GEMM_K_PIECE ? g->k - k0 : GEMM_K_PIECE;
        if (k0) {
            piece.a_off += g->a_ones ? 0 : k0 * p.a_sk;
            piece.b_off += k0 * p.b_sk;
            piece.flags = (p.flags & ~(uint32_t)FLAG_BIAS) | FLAG_ACCUMULATE;
            vka_cmd_compute_barrier(ctx, cmd);
        }
        VKA_TRY(vka_cmd_dispatch(ctx, cmd, pipe, bind, &piece, gx, gy, 1));
    }
    return VKATTN_SUCCESS;
}
