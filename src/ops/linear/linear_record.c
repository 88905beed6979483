/* Recording of the linear op: the kernel variant of a configuration's plan
 * (linear_config.c), its input bindings, and the split of the work into
 * dispatches whose binding windows fit.
 *
 * Every dispatch covers rows [m0, m1) of x and output columns [n0, n1); its
 * bindings are windows over just the elements those touch. Kernels index with
 * absolute row/column numbers and wrapping uint arithmetic: a tensor's base in
 * the push constants is (the window's first element) - (the lowest address
 * the dispatch touches), so base + address lands inside the window. */
#include "ops/linear/linear_internal.h"
#include "vka_spirv.h"

#include <assert.h>
#include <string.h>

/* Shader input modes (INPUT_MODE of shaders/linear_io.glsl). */
enum { MODE_TEX, MODE_VEC, MODE_SCA, MODE_TEXP, MODE_COUNT };

#define KIND_f32 VKA_STORAGE_F32
#define KIND_f16 VKA_STORAGE_F16
#define KIND_f16p VKA_STORAGE_F16P
#define KIND_bf16 VKA_STORAGE_BF16
#define KIND_q8_0 4 /* weights only */
#define W_KINDS 5
#define IN_tex VKA_BINDING_TEXEL
#define IN_texp VKA_BINDING_TEXEL
#define IN_vec VKA_BINDING_STORAGE
#define IN_sca VKA_BINDING_STORAGE

/* Bindings: 0 x, 1 w (texel or storage), 2 bias, 3..5 the segments' dst (or
 * KV cache pools), 6 the KV cache step's metadata or the positions of the
 * heads epilogue (read only), 7 the heads epilogue's parameters. */
#define LINEAR_KERNEL(fam, mode, full, x, w)                                        \
    [KIND_##x][KIND_##w] = {.name = "linear_" #fam "_" #mode "_" #x "_" #w,         \
                            .spirv = &vka_spirv_linear_##fam##_##mode##_##x##_##w,  \
                            .binding_count = 8,                                     \
                            .bindings = {IN_##mode, IN_##mode, VKA_BINDING_STORAGE, \
                                         VKA_BINDING_STORAGE, VKA_BINDING_STORAGE,  \
                                         VKA_BINDING_STORAGE, VKA_BINDING_STORAGE,  \
                                         VKA_BINDING_STORAGE},                      \
                            .push_size = sizeof(linear_push),                       \
                            .full_subgroups = full}
/* Every operand pair but f32 x f32; a device uses one f16 path, so f16 and
 * f16p never meet. */
#define LINEAR_KERNELS_F16(fam, mode, full)                                                 \
    LINEAR_KERNEL(fam, mode, full, f32, f16), LINEAR_KERNEL(fam, mode, full, f32, f16p),    \
        LINEAR_KERNEL(fam, mode, full, f16, f32), LINEAR_KERNEL(fam, mode, full, f16, f16), \
        LINEAR_KERNEL(fam, mode, full, f16p, f32), LINEAR_KERNEL(fam, mode, full, f16p, f16p)
/* The pairs with a bf16 (storage modes, and texp: rgba32ui views of 8
 * bfloat16 a texel). */
#define LINEAR_KERNELS_BF16(fam, mode, full)                                                   \
    LINEAR_KERNEL(fam, mode, full, f32, bf16), LINEAR_KERNEL(fam, mode, full, f16, bf16),      \
        LINEAR_KERNEL(fam, mode, full, f16p, bf16), LINEAR_KERNEL(fam, mode, full, bf16, f32), \
        LINEAR_KERNEL(fam, mode, full, bf16, f16), LINEAR_KERNEL(fam, mode, full, bf16, f16p), \
        LINEAR_KERNEL(fam, mode, full, bf16, bf16)
#define LINEAR_KERNELS(fam, mode, full)                                               \
    {                                                                                 \
        LINEAR_KERNEL(fam, mode, full, f32, f32), LINEAR_KERNELS_F16(fam, mode, full) \
    }
#define LINEAR_KERNELS_STORAGE(fam, mode, full)                                        \
    {                                                                                  \
        LINEAR_KERNEL(fam, mode, full, f32, f32), LINEAR_KERNELS_F16(fam, mode, full), \
            LINEAR_KERNELS_BF16(fam, mode, full)                                       \
    }
/* q8_0 weights (vec4 storage loads only), with x in any storage. */
#define LINEAR_KERNELS_Q8_0(fam, full)                                                  \
    LINEAR_KERNEL(fam, vec, full, f32, q8_0), LINEAR_KERNEL(fam, vec, full, f16, q8_0), \
        LINEAR_KERNEL(fam, vec, full, f16p, q8_0), LINEAR_KERNEL(fam, vec, full, bf16, q8_0)
#define LINEAR_KERNELS_VEC(fam, full)                                                \
    {                                                                                \
        LINEAR_KERNEL(fam, vec, full, f32, f32), LINEAR_KERNELS_F16(fam, vec, full), \
            LINEAR_KERNELS_BF16(fam, vec, full), LINEAR_KERNELS_Q8_0(fam, full)      \
    }
/* texp exists where an operand is f16 or bf16 (f32 x f32 reads like tex). */
#define LINEAR_KERNELS_TEXP(fam, full)                                            \
    {                                                                             \
        LINEAR_KERNELS_F16(fam, texp, full), LINEAR_KERNELS_BF16(fam, texp, full) \
    }
#define LINEAR_FAMILY(fam, full)                                                                 \
    {                                                                                            \
        [MODE_TEX] = LINEAR_KERNELS(fam, tex, full), [MODE_VEC] = LINEAR_KERNELS_VEC(fam, full), \
        [MODE_SCA] = LINEAR_KERNELS_STORAGE(fam, sca, full),                                     \
        [MODE_TEXP] = LINEAR_KERNELS_TEXP(fam, full)                                             \
    }
/* The GEMVs also read q8_0 weights through rgba32ui texels (mode tex). */
#define LINEAR_KERNELS_TEX_Q8_0(fam, full)                                                      \
    {                                                                                           \
        LINEAR_KERNEL(fam, tex, full, f32, f32), LINEAR_KERNELS_F16(fam, tex, full),            \
            LINEAR_KERNEL(fam, tex, full, f32, q8_0), LINEAR_KERNEL(fam, tex, full, f16, q8_0), \
            LINEAR_KERNEL(fam, tex, full, f16p, q8_0)                                           \
    }
#define LINEAR_FAMILY_GEMV(fam, full)                        \
    {                                                        \
        [MODE_TEX] = LINEAR_KERNELS_TEX_Q8_0(fam, full),     \
        [MODE_VEC] = LINEAR_KERNELS_VEC(fam, full),          \
        [MODE_SCA] = LINEAR_KERNELS_STORAGE(fam, sca, full), \
        [MODE_TEXP] = LINEAR_KERNELS_TEXP(fam, full)         \
    }
#define LINEAR_FAMILY_NO_TEXP(fam, full)                                                         \
    {                                                                                            \
        [MODE_TEX] = LINEAR_KERNELS(fam, tex, full), [MODE_VEC] = LINEAR_KERNELS_VEC(fam, full), \
        [MODE_SCA] = LINEAR_KERNELS_STORAGE(fam, sca, full)                                      \
    }

/* Mirrors the push constants of shaders/linear_io.glsl (128 bytes: the
 * minimum every device allows). A pool segment reuses the dst strides: sb is
 * the block stride, sh the head stride within a block, st the block size (in
 * tokens; token rows are hd apart). */
typedef struct linear_segment_push {
    uint32_t base, sb, sh, st, hd;
} linear_segment_push;

typedef struct linear_push {
    uint32_t x_base, x_sb, x_st;
    uint32_t w_base, w_sn;
    uint32_t b_base;
    uint32_t T;
    uint32_t m0, m_end;
    uint32_t n0, n_end;
    uint32_t K;
    uint32_t flags; /* bit 0: bias */
    uint32_t seg_end0, seg_end1;
    uint32_t batch, table_width; /* the step's metadata layout (pool segments) */
    linear_segment_push seg[3];
} linear_push;

_Static_assert(sizeof(linear_push) == 128, "linear push constants must fit 128 bytes");

/* [family][mode][x storage][w storage]; entries without SPIR-V (texp of the
 * shared-memory GEMM, texp of f32 x f32, mode tex with a bf16, q8_0
 * outside mode vec and the GEMVs' tex) are never chosen. */
#if VKATTN_HAVE_COOPMAT
/* The coopmat GEMM: storage modes, no f16p (it needs 16-bit storage). */
#define LINEAR_KERNELS_CM(mode)                                                             \
    LINEAR_KERNEL(cm, mode, true, f32, f32), LINEAR_KERNEL(cm, mode, true, f32, f16),       \
        LINEAR_KERNEL(cm, mode, true, f32, bf16), LINEAR_KERNEL(cm, mode, true, f16, f32),  \
        LINEAR_KERNEL(cm, mode, true, f16, f16), LINEAR_KERNEL(cm, mode, true, f16, bf16),  \
        LINEAR_KERNEL(cm, mode, true, bf16, f32), LINEAR_KERNEL(cm, mode, true, bf16, f16), \
        LINEAR_KERNEL(cm, mode, true, bf16, bf16)
#define LINEAR_FAMILY_CM                                                               \
    {                                                                                  \
        [MODE_VEC] = {LINEAR_KERNELS_CM(vec), LINEAR_KERNEL(cm, vec, true, f32, q8_0), \
                      LINEAR_KERNEL(cm, vec, true, f16, q8_0),                         \
                      LINEAR_KERNEL(cm, vec, true, bf16, q8_0)},                       \
        [MODE_SCA] = {LINEAR_KERNELS_CM(sca)},                                         \
    }
#else
#define LINEAR_FAMILY_CM \
    {                    \
        {                \
            {            \
                {        \
                    0    \
                }        \
            }            \
        }                \
    }
#endif

static const vka_kernel linear_kernels[LINEAR_FAM_COUNT][MODE_COUNT][4][W_KINDS] = {
    [LINEAR_FAM_CM] = LINEAR_FAMILY_CM,
    [LINEAR_FAM_SG] = LINEAR_FAMILY(sg, true),
    [LINEAR_FAM_SH] = LINEAR_FAMILY_NO_TEXP(sh, false),
    [LINEAR_FAM_GEMV_SG] = LINEAR_FAMILY_GEMV(gemvsg, true),
    [LINEAR_FAM_GEMV_SH] = LINEAR_FAMILY_GEMV(gemvsh, false),
};

/* Specialization constant ids (linear_io.glsl): the families' own use
 * 0..5; then the pool-segment mask and the heads epilogue's constants. */
enum {
    SPEC_POOLS = 6,
    SPEC_EPI_SEGS,
    SPEC_EPI_HD,
    SPEC_EPI_NORM,
    SPEC_EPI_EPS,
    SPEC_ROPE_DIMS,
    SPEC_ROPE_GPTJ,
    SPEC_POS_SOURCE,
    SPEC_EPI_ROWS,
    SPEC_EPI_COLS,
    SPEC_COUNT
};

/* ------------------------------------------------------------- windows */

/* Elements [lo, hi) of a tensor, relative to its offset. */
typedef struct span {
    uint64_t lo, hi;
    bool used;
} span;

/* Lowest and highest address of outer * so + inner * si over the flat indices
 * [i0, i1) (i = outer * n_inner + inner): addresses grow with both indices,
 * so the extremes sit at the ends and at the first/last full outer step. */
static void span2(uint64_t i0, uint64_t i1, uint64_t n_inner, uint64_t so, uint64_t si,
                  uint64_t *lo, uint64_t *max)
{
    uint64_t o0 = i0 / n_inner, in0 = i0 % n_inner;
    uint64_t o1 = (i1 - 1) / n_inner, in1 = (i1 - 1) % n_inner;
    *lo = o0 * so + in0 * si;
    *max = o1 * so + in1 * si;
    if (o1 > o0) {
        if ((o0 + 1) * so < *lo)
            *lo = (o0 + 1) * so;
        if ((o1 - 1) * so + (n_inner - 1) * si > *max)
            *max = (o1 - 1) * so + (n_inner - 1) * si;
    }
}

enum { SPAN_X, SPAN_W, SPAN_B, SPAN_DST, SPAN_COUNT = SPAN_DST + VKA_LINEAR_MAX_SEGMENTS };

/* What a dispatch over rows [m0, m1) and columns [n0, n1) touches. For each
 * dst, *row_part gets the extent of its row addresses (to know which cut
 * shrinks it). */
static void chunk_spans(const vka_linear_problem *p, uint64_t m0, uint64_t m1, uint64_t n0,
                        uint64_t n1, span s[SPAN_COUNT], uint64_t row_part[3])
{
    memset(s, 0, SPAN_COUNT * sizeof *s);
    uint64_t lo, max;
    span2(m0, m1, p->T, p->x_sb, p->x_st, &lo, &max);
    s[SPAN_X] = (span){lo, max + p->K, true};
    s[SPAN_W] = (span){n0 * p->w_sn, (n1 - 1) * p->w_sn + p->K, true};
    if (p->b.buffer)
        s[SPAN_B] = (span){n0, n1, true};
    for (uint32_t i = 0; i < p->segment_count; i++) {
        uint64_t c0 = p->seg_start[i], c1 = p->seg_start[i + 1];
        if (n1 <= c0 || n0 >= c1)
            continue;
        if (p->pool_segments & (1u << i)) { /* the whole pool (validated to fit) */
            s[SPAN_DST + i] = (span){0, (uint64_t)p->dst[i].shape[0], true};
            row_part[i] = 0;
            continue;
        }
        c0 = n0 > c0 ? n0 - c0 : 0;
        c1 = (n1 < c1 ? n1 : c1) - p->seg_start[i];
        const int64_t *st = p->dst[i].strides;
        uint64_t rlo, rmax, clo, cmax;
        span2(m0, m1, p->T, (uint64_t)st[0], (uint64_t)st[2], &rlo, &rmax);
        span2(c0, c1, p->head_dim[i], (uint64_t)st[1], 1, &clo, &cmax);
        s[SPAN_DST + i] = (span){rlo + clo, rmax + cmax + 1, true};
        row_part[i] = rmax - rlo;
    }
}

/* How one tensor is bound: a storage window, a texel view of 4 elements of
 * its dtype (rgba32f / rgba16f), or a uint view of 8 halves per texel. */
enum { BIND_STORAGE, BIND_TEXEL, BIND_PACKED };

uint64_t vka_linear_block_align(const vkattn_context *ctx)
{
    uint64_t a = ctx->info.min_storage_buffer_offset_alignment,
             t = ctx->info.min_texel_buffer_offset_alignment;
    a = a > t ? a : t;
    return a < 16 ? 16 : a;
}

/* q8_0 weights: the window starts at the block-aligned element *lo0 at or
 * below s.lo whose byte offset is a multiple of the binding alignment A (a
 * power of two: 16 A values are A / 2 blocks of 34 bytes, 17 A bytes), and
 * ends where s ends (a row end: an even number of blocks). */
static void quant_window(const vkattn_context *ctx, const vkattn_tensor *t, span s, uint64_t *lo0,
                         uint64_t *off, uint64_t *bytes)
{
    uint64_t g = 16 * vka_linear_block_align(ctx);
    *lo0 = s.lo / g * g;
    *off = t->offset + vkattn_dtype_row_bytes(t->dtype, *lo0);
    *bytes = vkattn_dtype_row_bytes(t->dtype, s.hi - *lo0);
}

static bool window_fits(const vkattn_context *ctx, const vkattn_tensor *t, span s, int kind)
{
    if (vka_dtype_is_quantized(t->dtype)) {
        uint64_t lo0, off, bytes;
        quant_window(ctx, t, s, &lo0, &off, &bytes);
        if (kind == BIND_PACKED) /* 16-byte uint texels */
            return t->buffer->texel_ok &&
                   bytes / 16 <= vka_min_u64(ctx->info.max_texel_buffer_elements, 1ull << 30);
        return bytes <= vka_min_u64(ctx->info.max_storage_buffer_range, 1ull << 32);
    }
    if (kind != BIND_STORAGE &&
        !t->buffer->texel_ok) /* a host buffer without uniform-texel usage */
        return false;
    uint64_t es = vkattn_dtype_size(t->dtype);
    uint64_t off = t->offset + s.lo * es, bytes = (s.hi - s.lo) * es;
    if (kind != BIND_STORAGE) {
        uint64_t texel_bytes = kind == BIND_PACKED ? 16 : 4 * es;
        uint64_t align = ctx->info.min_texel_buffer_offset_alignment;
        if (align < texel_bytes)
            align = texel_bytes;
        uint64_t limit = vka_min_u64(ctx->info.max_texel_buffer_elements, 1ull << 30);
        uint64_t range = vka_align_up(off - vka_align_down(off, align) + bytes, texel_bytes);
        return range / texel_bytes <= limit;
    }
    uint64_t align = ctx->info.min_storage_buffer_offset_alignment < 16
                         ? 16
                         : ctx->info.min_storage_buffer_offset_alignment;
    uint64_t limit = vka_min_u64(ctx->info.max_storage_buffer_range, 1ull << 32);
    return vka_align_up(off - vka_align_down(off, align) + bytes, 4) <= limit;
}

/* The binding kinds of x and w in a shader input mode. */
static int input_kind(int mode, vkattn_dtype dt)
{
    if (dt == VKATTN_DTYPE_Q8_0) /* blocks as rgba32ui texels, or words */
        return mode == MODE_TEX ? BIND_PACKED : BIND_STORAGE;
    if (mode == MODE_TEXP)
        return dt == VKATTN_DTYPE_F16 || dt == VKATTN_DTYPE_BF16 ? BIND_PACKED : BIND_TEXEL;
    return mode == MODE_TEX ? BIND_TEXEL : BIND_STORAGE;
}

/* Checks every dispatch of a split into mc rows x nc columns. Returns -1 when
 * all windows fit, else which chunk size to cut: 0 rows, 1 columns. */
static int split_check(const vkattn_context *ctx, const vka_linear_problem *p, int mode,
                       uint64_t mc, uint64_t nc)
{
    int kx = input_kind(mode, p->x.dtype), kw = input_kind(mode, p->w.dtype);
    for (uint64_t m0 = 0; m0 < p->M; m0 += mc)
        for (uint64_t n0 = 0; n0 < p->N; n0 += nc) {
            uint64_t m1 = vka_min_u64(m0 + mc, p->M), n1 = vka_min_u64(n0 + nc, p->N);
            span s[SPAN_COUNT];
            uint64_t row_part[3] = {0};
            chunk_spans(p, m0, m1, n0, n1, s, row_part);
            if (!window_fits(ctx, &p->x, s[SPAN_X], kx))
                return 0;
            if (!window_fits(ctx, &p->w, s[SPAN_W], kw))
                return 1;
            if (s[SPAN_B].used && !window_fits(ctx, &p->b, s[SPAN_B], BIND_STORAGE))
                return 1;
            for (uint32_t i = 0; i < p->segment_count; i++)
                if (s[SPAN_DST + i].used && !(p->pool_segments & (1u << i)) &&
                    !window_fits(ctx, &p->dst[i], s[SPAN_DST + i], BIND_STORAGE))
                    return 2 * row_part[i] >= s[SPAN_DST + i].hi - s[SPAN_DST + i].lo ? 0 : 1;
        }
    return -1;
}

static uint64_t halve(uint64_t v, uint64_t tile, uint64_t granule)
{
    uint64_t h = v / 2;
    if (h >= tile)
        h = vka_align_up(h, tile);
    h = h / granule * granule;
    return h < granule ? granule : h;
}

/* Finds chunk sizes (*mc rows, *nc columns) whose windows all fit. */
static bool split_find(const vkattn_context *ctx, const vka_linear_problem *p,
                       const vka_linear_plan *c, int mode, uint64_t *mc, uint64_t *nc)
{
    /* columns in pairs (a packed-f16 word never spans two dispatches), or
     * with the heads epilogue in whole tiles of whole heads */
    uint64_t granule = vka_linear_has_heads(p) ? c->tile_n : 2;
    *mc = vka_min_u64(p->M, c->max_rows);
    *nc = vka_min_u64(p->N, c->max_cols);
    if (*nc < p->N)
        *nc = *nc / granule * granule;
    if (*nc == 0)
        return false;
    for (int iter = 0; iter < 256; iter++) {
        int cut = split_check(ctx, p, mode, *mc, *nc);
        if (cut < 0)
            return true;
        if (cut == 0 && *mc > 1)
            *mc = halve(*mc, c->tile_m, 1);
        else if (*nc > granule)
            *nc = halve(*nc, c->tile_n, granule);
        else if (*mc > 1)
            *mc = halve(*mc, c->tile_m, 1);
        else
            return false;
    }
    return false;
}

/* ------------------------------------------------------------- record */

static vkattn_result bind(vkattn_context *ctx, const vkattn_tensor *t, span s, int kind,
                          vka_binding *b, uint32_t *base)
{
    size_t es = vkattn_dtype_size(t->dtype);
    uint32_t first = 0;
    vkattn_result r;
    if (vka_dtype_is_quantized(t->dtype)) {
        /* the shader's element e is value e of the window (whole blocks) */
        uint64_t lo0, off, bytes;
        quant_window(ctx, t, s, &lo0, &off, &bytes);
        if (kind == BIND_PACKED) {
            r = vka_bind_texel_window(ctx, t->buffer, off, vka_align_up(bytes, 16),
                                      VKATTN_DTYPE_F32, b, &first);
            b->format = VK_FORMAT_R32G32B32A32_UINT;
        } else {
            r = vka_bind_window(ctx, t->buffer, off, bytes, 4, b, &first);
        }
        assert(r != VKATTN_SUCCESS || first == 0); /* off is aligned */
        *base = (uint32_t)0 - (uint32_t)lo0;
        return r;
    }
    if (kind == BIND_PACKED) {
        /* 16-byte texels over the halves: a float view's window, read as uint */
        r = vka_bind_texel_window(ctx, t->buffer, t->offset + s.lo * es, (s.hi - s.lo) * es,
                                  VKATTN_DTYPE_F32, b, &first);
        b->format = VK_FORMAT_R32G32B32A32_UINT;
        first *= 2; /* floats -> halves */
    } else if (kind == BIND_TEXEL) {
        r = vka_bind_texel_window(ctx, t->buffer, t->offset + s.lo * es, (s.hi - s.lo) * es,
                                  t->dtype, b, &first);
    } else {
        r = vka_bind_window(ctx, t->buffer, t->offset + s.lo * es, (s.hi - s.lo) * es, es, b,
                            &first);
    }
    *base = first - (uint32_t)s.lo; /* wraps: see the top of this file */
    return r;
}

/* x and w rows may be fetched `n` elements at a time (n = 4: texel or vec4;
 * n = 8: packed halves, required of the f16 operands only). */
static bool rows_aligned(const vka_linear_problem *p, uint64_t n)
{
    uint64_t xe = p->x.offset / vkattn_dtype_size(p->x.dtype);
    uint64_t nx = p->x.dtype == VKATTN_DTYPE_F16 ? n : 4,
             nw = p->w.dtype == VKATTN_DTYPE_F16 ? n : 4;
    bool x_ok = p->K % n == 0 && xe % nx == 0 && p->x_sb % nx == 0 && p->x_st % nx == 0;
    if (vka_dtype_is_quantized(p->w.dtype)) /* whole blocks: always aligned */
        return x_ok;
    uint64_t we = p->w.offset / vkattn_dtype_size(p->w.dtype);
    return x_ok && we % nw == 0 && p->w_sn % nw == 0;
}

/* The kernel table's index of w's storage. */
static uint32_t w_kind(const vkattn_context *ctx, vkattn_dtype dtype)
{
    return dtype == VKATTN_DTYPE_Q8_0 ? KIND_q8_0 : vka_storage_kind(ctx, dtype);
}

static bool has_kernel(const vkattn_context *ctx, const vka_linear_problem *p, uint32_t family,
                       int mode)
{
    return linear_kernels[family][mode][vka_storage_kind(ctx, p->x.dtype)][w_kind(ctx, p->w.dtype)]
               .spirv != NULL;
}

/* The heads epilogue's positions [B, T] at binding 6 (whole: a dispatch's
 * rows may be any of them); *base gets the element of positions[0, 0]. */
static vkattn_result bind_positions(vkattn_context *ctx, const vka_linear_problem *p,
                                    vka_binding *b, uint32_t *base)
{
    const vkattn_tensor *t = &p->heads.positions;
    return vka_bind_window(ctx, t->buffer, t->offset, p->B * p->T * 4, 4, b, base);
}

/* The shader input mode and the split for a plan: the preferred binding
 * where alignment allows and its windows fit in no more dispatches than
 * storage windows need, else storage (vec4 loads where rows are aligned). */
static bool choose_mode(vkattn_context *ctx, const vka_linear_problem *p, const vka_linear_plan *c,
                        int *mode, uint64_t *mc, uint64_t *nc)
{
    *mode = rows_aligned(p, 4) ? MODE_VEC : MODE_SCA;
    if (!split_find(ctx, p, c, *mode, mc, nc))
        return false;
    if (c->input == LINEAR_INPUT_STORAGE || !ctx->info.texel_inputs || *mode != MODE_VEC)
        return true;
    uint64_t dispatches = vka_div_up64(p->M, *mc) * vka_div_up64(p->N, *nc);
    int tries[2] = {MODE_TEXP, MODE_TEX};
    for (int i = c->input == LINEAR_INPUT_TEXEL_PACKED ? 0 : 1; i < 2; i++) {
        uint64_t tmc, tnc;
        if (tries[i] == MODE_TEXP && !rows_aligned(p, 8))
            continue;
        /* q8_0 texels: the GEMV's groups of 8 blocks */
        if (p->w.dtype == VKATTN_DTYPE_Q8_0 && p->K % 256)
            continue;
        if (!has_kernel(ctx, p, c->family, tries[i]) ||
            !split_find(ctx, p, c, tries[i], &tmc, &tnc))
            continue;
        if (vka_div_up64(p->M, tmc) * vka_div_up64(p->N, tnc) <= dispatches) {
            *mode = tries[i];
            *mc = tmc;
            *nc = tnc;
            return true;
        }
    }
    return true;
}

vkattn_result vka_linear_record(vkattn_context *ctx, VkCommandBuffer cmd,
                                const vka_linear_problem *p, const vka_linear_config *cfg)
{
    vka_linear_config chosen;
    if (!cfg) {
        vka_linear_config_choose(ctx, p, &chosen);
        cfg = &chosen;
    } else if (!vka_linear_config_valid(ctx, p, cfg)) {
        return vka_fail(ctx, VKATTN_ERROR_UNSUPPORTED,
                        "linear: configuration (family %u, input %u, preset %u) cannot run "
                        "%llux%llux%llu on this device",
                        cfg->family, cfg->input, cfg->preset, (unsigned long long)p->M,
                        (unsigned long long)p->N, (unsigned long long)p->K);
    }
    vka_linear_plan c;
    vka_linear_plan_make(ctx, p, cfg, &c);
    int mode;
    uint64_t mc, nc;
    if (!choose_mode(ctx, p, &c, &mode, &mc, &nc))
        return vka_fail(ctx, VKATTN_ERROR_OUT_OF_RANGE,
                        "linear: no split of %llux%llux%llu fits the device's "
                        "maxStorageBufferRange %llu (a single row is too long)",
                        (unsigned long long)p->M, (unsigned long long)p->N,
                        (unsigned long long)p->K,
                        (unsigned long long)ctx->info.max_storage_buffer_range);
    const vka_kernel *kernel =
        &linear_kernels[c.family][mode][vka_storage_kind(ctx, p->x.dtype)][w_kind(ctx, p->w.dtype)];
    vka_pipeline *pipeline;
    if (p->pool_segments) { /* plain GEMMs keep their pipelines (no pool code at all) */
        c.spec[SPEC_POOLS] = p->pool_segments;
        c.spec_count = SPEC_POOLS + 1;
    }
    if (vka_linear_has_heads(p)) {
        const vka_linear_heads *h = &p->heads;
        c.spec[SPEC_POOLS] = p->pool_segments;
        c.spec[SPEC_EPI_SEGS] = h->segments;
        c.spec[SPEC_EPI_HD] = (uint32_t)p->head_dim[0];
        c.spec[SPEC_EPI_NORM] = h->norm;
        memcpy(&c.spec[SPEC_EPI_EPS], &h->eps, 4);
        c.spec[SPEC_ROPE_DIMS] = h->rope_dims;
        c.spec[SPEC_ROPE_GPTJ] = h->rope_gptj;
        c.spec[SPEC_POS_SOURCE] = (uint32_t)h->position_source;
        c.spec[SPEC_EPI_ROWS] = c.epi_rows;
        c.spec[SPEC_EPI_COLS] = c.epi_cols;
        c.spec_count = SPEC_COUNT;
    }
    if (c.family == LINEAR_FAM_CM) /* its shape constants follow (16..18) */
        c.spec_count = 19;
    vkattn_result r = vka_pipeline_get(ctx, kernel, c.spec, c.spec_count, &pipeline);
    if (r != VKATTN_SUCCESS)
        return r;

    linear_push push;
    memset(&push, 0, sizeof push);
    push.x_sb = (uint32_t)p->x_sb;
    push.x_st = (uint32_t)p->x_st;
    push.w_sn = (uint32_t)p->w_sn;
    push.T = (uint32_t)p->T;
    push.K = (uint32_t)p->K;
    push.flags = p->b.buffer ? 1u : 0u;
    push.seg_end0 = (uint32_t)p->seg_start[p->segment_count > 1 ? 1 : p->segment_count];
    push.seg_end1 = (uint32_t)p->seg_start[p->segment_count > 2 ? 2 : p->segment_count];
    for (uint32_t i = 0; i < 3; i++) {
        push.seg[i].hd = 1;
        if (i < p->segment_count && (p->pool_segments & (1u << i))) {
            /* [num_blocks, Hkv, block_size, D] (D: the pool's head dim, its
             * rows unpadded - checked): fits 32 bits (one binding) */
            const vkattn_kv_cache_desc *d = &p->cache->d;
            const uint32_t dh = (uint32_t)p->head_dim[i];
            push.seg[i].hd = dh;
            push.seg[i].sb = d->num_kv_heads * d->block_size * dh;
            push.seg[i].sh = d->block_size * dh;
            push.seg[i].st = d->block_size;
        } else if (i < p->segment_count) {
            push.seg[i].hd = (uint32_t)p->head_dim[i];
            push.seg[i].sb = (uint32_t)p->dst[i].strides[0];
            push.seg[i].sh = (uint32_t)p->dst[i].strides[1];
            push.seg[i].st = (uint32_t)p->dst[i].strides[2];
        }
    }
    if (p->cache) {
        push.batch = p->batch;
        push.table_width = p->cache->table_width;
    }
    int kx = input_kind(mode, p->x.dtype), kw = input_kind(mode, p->w.dtype);
    bool gemv = c.family == LINEAR_FAM_GEMV_SG || c.family == LINEAR_FAM_GEMV_SH;
    bool first = true;
    for (uint64_t m0 = 0; m0 < p->M; m0 += mc)
        for (uint64_t n0 = 0; n0 < p->N; n0 += nc) {
            uint64_t m1 = vka_min_u64(m0 + mc, p->M), n1 = vka_min_u64(n0 + nc, p->N);
            span s[SPAN_COUNT];
            uint64_t row_part[3];
            chunk_spans(p, m0, m1, n0, n1, s, row_part);
            vka_binding b[8];
            r = bind(ctx, &p->x, s[SPAN_X], kx, &b[0], &push.x_base);
            if (r == VKATTN_SUCCESS)
                r = bind(ctx, &p->w, s[SPAN_W], kw, &b[1], &push.w_base);
            if (r == VKATTN_SUCCESS)
                r = s[SPAN_B].used ? bind(ctx, &p->b, s[SPAN_B], BIND_STORAGE, &b[2], &push.b_base)
                                   : vka_bind_dummy(ctx, VK_FORMAT_UNDEFINED, &b[2]);
            if (r == VKATTN_SUCCESS && p->cache)
                b[6] = p->meta;
            else if (r == VKATTN_SUCCESS && p->heads.position_source == VKA_POSITIONS_TENSOR)
                r = bind_positions(ctx, p, &b[6], &push.table_width);
            else if (r == VKATTN_SUCCESS)
                r = vka_bind_dummy(ctx, VK_FORMAT_UNDEFINED, &b[6]);
            uint32_t params_first = 0; /* the shader indexes params from 0 */
            if (r == VKATTN_SUCCESS && vka_linear_has_heads(p))
                r = vka_bind_window(ctx, p->heads.params, p->heads.params_offset,
                                    p->params_floats * 4, 4, &b[7], &params_first);
            else if (r == VKATTN_SUCCESS)
                r = vka_bind_dummy(ctx, VK_FORMAT_UNDEFINED, &b[7]);
            if (r == VKATTN_SUCCESS && params_first != 0)
                return vka_fail(ctx, VKATTN_ERROR_INVALID_ARGUMENT,
                                "linear: heads parameters at offset %llu are not aligned to a "
                                "binding's start",
                                (unsigned long long)p->heads.params_offset);
            int used = -1;
            for (uint32_t i = 0; i < 3 && r == VKATTN_SUCCESS; i++)
                if (i < p->segment_count && s[SPAN_DST + i].used) {
                    r = bind(ctx, &p->dst[i], s[SPAN_DST + i], BIND_STORAGE, &b[3 + i],
                             &push.seg[i].base);
                    used = (int)i;
                }
            if (r != VKATTN_SUCCESS)
                return r;
            /* Segments this dispatch does not write get another segment's
             * window (never the shared dummy buffer, which would make
             * unrelated dispatches look like writers of one range). */
            for (uint32_t i = 0; i < 3; i++)
                if (i >= p->segment_count || !s[SPAN_DST + i].used)
                    b[3 + i] = b[3 + used];
            push.m0 = (uint32_t)m0;
            push.m_end = (uint32_t)m1;
            push.n0 = (uint32_t)n0;
            push.n_end = (uint32_t)n1;
            uint32_t col_blocks = (uint32_t)vka_div_up64(n1 - n0, c.tile_n);
            uint32_t row_blocks = gemv ? 1 : (uint32_t)vka_div_up64(m1 - m0, c.tile_m);
            if (!first) /* windows of consecutive dispatches may overlap */
                vka_cmd_compute_barrier(ctx, cmd);
            first = false;
            r = c.rows_in_x
                    ? vka_cmd_dispatch(ctx, cmd, pipeline, b, &push, row_blocks, col_blocks, 1)
                    : vka_cmd_dispatch(ctx, cmd, pipeline, b, &push, col_blocks, row_blocks, 1);
            if (r != VKATTN_SUCCESS)
                return r;
        }
    return VKATTN_SUCCESS;
}
