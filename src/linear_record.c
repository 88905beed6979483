/* Recording of the linear op: kernel family and tile sizes per device, and
 * the split of the work into dispatches whose binding windows fit.
 *
 * Every dispatch covers rows [m0, m1) of x and output columns [n0, n1); its
 * bindings are windows over just the elements those touch. Kernels index with
 * absolute row/column numbers and wrapping uint arithmetic: a tensor's base in
 * the push constants is (the window's first element) - (the lowest address
 * the dispatch touches), so base + address lands inside the window. */
#include "linear_plan.h"
#include "vkattn_spirv.h"

#include <string.h>

enum { FAM_SG, FAM_SH, FAM_GEMV_SG, FAM_GEMV_SH, FAM_COUNT };
enum { MODE_TEX, MODE_VEC, MODE_SCA, MODE_COUNT };

/* Up to this many rows go to the GEMV kernels (bandwidth-bound on W). */
#define GEMV_MAX_ROWS 8u

#define KIND_f32 VKATTN_STORAGE_F32
#define KIND_f16 VKATTN_STORAGE_F16
#define KIND_f16p VKATTN_STORAGE_F16P
#define IN_tex VKATTN_BINDING_TEXEL
#define IN_vec VKATTN_BINDING_STORAGE
#define IN_sca VKATTN_BINDING_STORAGE

/* Bindings: 0 x, 1 w (texel or storage), 2 bias, 3..5 the segments' dst (or
 * KV cache pools), 6 the KV cache step's metadata (read only). */
#define LINEAR_KERNEL(fam, mode, full, x, w)                                                \
    [KIND_##x][KIND_##w] = {.name = "linear_" #fam "_" #mode "_" #x "_" #w,                 \
                            .spirv = &vkattn_spirv_linear_##fam##_##mode##_##x##_##w,        \
                            .binding_count = 7,                                              \
                            .bindings = {IN_##mode, IN_##mode, VKATTN_BINDING_STORAGE,       \
                                         VKATTN_BINDING_STORAGE, VKATTN_BINDING_STORAGE,     \
                                         VKATTN_BINDING_STORAGE, VKATTN_BINDING_STORAGE},    \
                            .push_size = sizeof(linear_push),                                \
                            .full_subgroups = full}
#define LINEAR_KERNELS(fam, mode, full)                                                      \
    {                                                                                        \
        LINEAR_KERNEL(fam, mode, full, f32, f32), LINEAR_KERNEL(fam, mode, full, f32, f16),  \
            LINEAR_KERNEL(fam, mode, full, f32, f16p),                                       \
            LINEAR_KERNEL(fam, mode, full, f16, f32),                                        \
            LINEAR_KERNEL(fam, mode, full, f16, f16),                                        \
            LINEAR_KERNEL(fam, mode, full, f16p, f32),                                       \
            LINEAR_KERNEL(fam, mode, full, f16p, f16p)                                       \
    }
#define LINEAR_FAMILY(fam, full)                                                             \
    {                                                                                        \
        [MODE_TEX] = LINEAR_KERNELS(fam, tex, full), [MODE_VEC] = LINEAR_KERNELS(fam, vec, full), \
        [MODE_SCA] = LINEAR_KERNELS(fam, sca, full)                                          \
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

static const vkattn_kernel linear_kernels[FAM_COUNT][MODE_COUNT][3][3] = {
    [FAM_SG] = LINEAR_FAMILY(sg, true),
    [FAM_SH] = LINEAR_FAMILY(sh, false),
    [FAM_GEMV_SG] = LINEAR_FAMILY(gemvsg, true),
    [FAM_GEMV_SH] = LINEAR_FAMILY(gemvsh, false),
};

/* Specialization constant id of the pool-segment mask (linear_io.glsl); the
 * families' own constants use ids 0..5. */
#define SPEC_POOLS 6

/* The kernel family, its constants and the work one workgroup covers. */
typedef struct linear_config {
    int family;
    uint32_t spec[SPEC_POOLS + 1]; /* unused ids stay 0 (a shader ignores them) */
    uint32_t spec_count;
    uint64_t tile_m, tile_n; /* rows / columns of y per workgroup */
    uint64_t max_rows;       /* rows one dispatch may cover */
    uint64_t max_cols;
} linear_config;

static uint32_t pow2_at_most(uint32_t v)
{
    uint32_t p = 1;
    while (p * 2 <= v)
        p *= 2;
    return p;
}

/* Tile sizes from the device's limits (see the shaders for their meaning). */
static void choose_config(const vkattn_context *ctx, uint64_t M, linear_config *c)
{
    const vkattn_device_info *in = &ctx->info;
    uint32_t sg = in->subgroup_size ? in->subgroup_size : 1;
    uint32_t max_wg = in->max_workgroup_invocations < in->max_workgroup_size[0]
                          ? in->max_workgroup_invocations : in->max_workgroup_size[0];
    bool gemv = M <= GEMV_MAX_ROWS;
    memset(c, 0, sizeof *c);
    if (gemv) {
        uint32_t mr = 1;
        while (mr < M)
            mr *= 2;
        if (in->subgroup_kernels) {
            /* Four subgroups per workgroup, 4 W rows per subgroup, K split
             * across its lanes, 4 vec4 steps per loop trip. */
            uint32_t wg = sg * 4 <= max_wg ? sg * 4 : sg;
            c->family = FAM_GEMV_SG;
            c->spec_count = 5;
            memcpy(c->spec, (uint32_t[]){wg, sg, mr, 4, 4}, 5 * sizeof(uint32_t));
            c->tile_n = (uint64_t)(wg / sg) * 4;
        } else {
            /* One workgroup per 2 W rows, K split across it, a shared-memory
             * tree reduction (power-of-two size). */
            uint32_t wg = pow2_at_most(max_wg < 128 ? max_wg : 128);
            c->family = FAM_GEMV_SH;
            c->spec_count = 5;
            memcpy(c->spec, (uint32_t[]){wg, sg, mr, 2, 2}, 5 * sizeof(uint32_t));
            c->tile_n = 2;
        }
        c->tile_m = mr;
        c->max_rows = mr;
    } else if (in->subgroup_kernels) {
        /* Workgroup of 32 invocations (whole subgroups); a subgroup owns 32
         * rows (4 row groups of 8 on lavapipe), each lane 4 columns. */
        uint32_t wg = sg >= 32 ? sg : 32 / sg * sg;
        uint32_t groups = sg >= 32 ? 1 : 32 / sg, tn = 4;
        c->family = FAM_SG;
        c->spec_count = 4;
        memcpy(c->spec, (uint32_t[]){wg, sg, groups, tn}, 4 * sizeof(uint32_t));
        c->tile_m = (uint64_t)groups * sg;
        c->tile_n = (uint64_t)wg * tn;
    } else {
        /* 128x128 blocks and 8x8 register tiles where workgroups of 256 and
         * 20 KiB of shared memory are available (GPUs); 32x32 and 4x4
         * otherwise. BK = 16. */
        bool big = max_wg >= 256 && in->max_shared_memory >= 32768 && sg >= 16;
        uint32_t bm = big ? 128 : 32, t = big ? 8 : 4, wg = (bm / t) * (bm / t);
        c->family = FAM_SH;
        c->spec_count = 6;
        memcpy(c->spec, (uint32_t[]){wg, bm, bm, 16, t, t}, 6 * sizeof(uint32_t));
        c->tile_m = bm;
        c->tile_n = bm;
    }
    if (!gemv)
        c->max_rows = c->tile_m * in->max_workgroup_count[1];
    c->max_cols = c->tile_n * in->max_workgroup_count[0];
}

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

enum { SPAN_X, SPAN_W, SPAN_B, SPAN_DST, SPAN_COUNT = SPAN_DST + VKATTN_LINEAR_MAX_SEGMENTS };

/* What a dispatch over rows [m0, m1) and columns [n0, n1) touches. For each
 * dst, *row_part gets the extent of its row addresses (to know which cut
 * shrinks it). */
static void chunk_spans(const vkattn_linear_problem *p, uint64_t m0, uint64_t m1, uint64_t n0,
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

static bool window_fits(const vkattn_context *ctx, const vkattn_tensor *t, span s, bool texel)
{
    if (texel && !t->buffer->texel_ok) /* a host buffer without uniform-texel usage */
        return false;
    uint64_t es = vkattn_dtype_size(t->dtype);
    uint64_t off = t->offset + s.lo * es, bytes = (s.hi - s.lo) * es;
    if (texel) {
        uint64_t texel_bytes = 4 * es, align = ctx->info.min_texel_buffer_offset_alignment;
        if (align < texel_bytes)
            align = texel_bytes;
        uint64_t limit = vkattn_min_u64(ctx->info.max_texel_buffer_elements, 1ull << 30);
        uint64_t range = vkattn_align_up(off - vkattn_align_down(off, align) + bytes, texel_bytes);
        return range / texel_bytes <= limit;
    }
    uint64_t align = ctx->info.min_storage_buffer_offset_alignment < 16
                         ? 16 : ctx->info.min_storage_buffer_offset_alignment;
    uint64_t limit = vkattn_min_u64(ctx->info.max_storage_buffer_range, 1ull << 32);
    return vkattn_align_up(off - vkattn_align_down(off, align) + bytes, 4) <= limit;
}

/* Checks every dispatch of a split into mc rows x nc columns. Returns -1 when
 * all windows fit, else which chunk size to cut: 0 rows, 1 columns. */
static int split_check(const vkattn_context *ctx, const vkattn_linear_problem *p, bool texel,
                       uint64_t mc, uint64_t nc)
{
    for (uint64_t m0 = 0; m0 < p->M; m0 += mc)
        for (uint64_t n0 = 0; n0 < p->N; n0 += nc) {
            uint64_t m1 = vkattn_min_u64(m0 + mc, p->M), n1 = vkattn_min_u64(n0 + nc, p->N);
            span s[SPAN_COUNT];
            uint64_t row_part[3] = {0};
            chunk_spans(p, m0, m1, n0, n1, s, row_part);
            if (!window_fits(ctx, &p->x, s[SPAN_X], texel))
                return 0;
            if (!window_fits(ctx, &p->w, s[SPAN_W], texel))
                return 1;
            if (s[SPAN_B].used && !window_fits(ctx, &p->b, s[SPAN_B], false))
                return 1;
            for (uint32_t i = 0; i < p->segment_count; i++)
                if (s[SPAN_DST + i].used && !(p->pool_segments & (1u << i)) &&
                    !window_fits(ctx, &p->dst[i], s[SPAN_DST + i], false))
                    return 2 * row_part[i] >= s[SPAN_DST + i].hi - s[SPAN_DST + i].lo ? 0 : 1;
        }
    return -1;
}

static uint64_t halve(uint64_t v, uint64_t tile, uint64_t granule)
{
    uint64_t h = v / 2;
    if (h >= tile)
        h = vkattn_align_up(h, tile);
    h = h / granule * granule;
    return h < granule ? granule : h;
}

/* Finds chunk sizes (*mc rows, *nc columns) whose windows all fit. */
static bool split_find(const vkattn_context *ctx, const vkattn_linear_problem *p,
                       const linear_config *c, bool texel, uint64_t *mc, uint64_t *nc)
{
    *mc = vkattn_min_u64(p->M, c->max_rows);
    *nc = vkattn_min_u64(p->N, c->max_cols);
    if (*nc < p->N) /* even: a packed-f16 word never spans two dispatches' columns */
        *nc = *nc / 2 * 2;
    for (int iter = 0; iter < 256; iter++) {
        int cut = split_check(ctx, p, texel, *mc, *nc);
        if (cut < 0)
            return true;
        if (cut == 0 && *mc > 1)
            *mc = halve(*mc, c->tile_m, 1);
        else if (*nc > 2)
            *nc = halve(*nc, c->tile_n, 2);
        else if (*mc > 1)
            *mc = halve(*mc, c->tile_m, 1);
        else
            return false;
    }
    return false;
}

/* ------------------------------------------------------------- record */

static vkattn_result bind(vkattn_context *ctx, const vkattn_tensor *t, span s, bool texel,
                          vkattn_binding *b, uint32_t *base)
{
    size_t es = vkattn_dtype_size(t->dtype);
    uint32_t first = 0;
    vkattn_result r =
        texel ? vkattn_bind_texel_window(ctx, t->buffer, t->offset + s.lo * es, (s.hi - s.lo) * es,
                                         t->dtype, b, &first)
              : vkattn_bind_window(ctx, t->buffer, t->offset + s.lo * es, (s.hi - s.lo) * es, es,
                                   b, &first);
    *base = first - (uint32_t)s.lo; /* wraps: see the top of this file */
    return r;
}

/* x and w rows may be fetched 4 elements at a time (texel or vec4). */
static bool rows_aligned(const vkattn_linear_problem *p)
{
    uint64_t xe = p->x.offset / vkattn_dtype_size(p->x.dtype);
    uint64_t we = p->w.offset / vkattn_dtype_size(p->w.dtype);
    return p->K % 4 == 0 && xe % 4 == 0 && we % 4 == 0 && p->x_sb % 4 == 0 &&
           p->x_st % 4 == 0 && p->w_sn % 4 == 0;
}

vkattn_result vkattn_linear_record(vkattn_context *ctx, VkCommandBuffer cmd,
                                   const vkattn_linear_problem *p)
{
    linear_config c;
    choose_config(ctx, p->M, &c);
    int mode = rows_aligned(p) ? MODE_VEC : MODE_SCA;
    uint64_t mc, nc;
    if (!split_find(ctx, p, &c, false, &mc, &nc))
        return vkattn_fail(ctx, VKATTN_ERROR_OUT_OF_RANGE,
                           "linear: no split of %llux%llux%llu fits the device's "
                           "maxStorageBufferRange %llu (a single row is too long)",
                           (unsigned long long)p->M, (unsigned long long)p->N,
                           (unsigned long long)p->K,
                           (unsigned long long)ctx->info.max_storage_buffer_range);
    /* Texel inputs where the windows fit without more dispatches. */
    uint64_t tmc, tnc;
    if (mode == MODE_VEC && ctx->info.texel_inputs && split_find(ctx, p, &c, true, &tmc, &tnc) &&
        vkattn_div_up64(p->M, tmc) * vkattn_div_up64(p->N, tnc) <=
            vkattn_div_up64(p->M, mc) * vkattn_div_up64(p->N, nc)) {
        mode = MODE_TEX;
        mc = tmc;
        nc = tnc;
    }
    const vkattn_kernel *kernel = &linear_kernels[c.family][mode][vkattn_storage_kind(ctx, p->x.dtype)]
                                                 [vkattn_storage_kind(ctx, p->w.dtype)];
    vkattn_pipeline *pipeline;
    if (p->pool_segments) { /* plain GEMMs keep their pipelines (no pool code at all) */
        c.spec[SPEC_POOLS] = p->pool_segments;
        c.spec_count = SPEC_POOLS + 1;
    }
    vkattn_result r = vkattn_pipeline_get(ctx, kernel, c.spec, c.spec_count, &pipeline);
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
            /* [num_blocks, Hkv, block_size, Dh]: fits 32 bits (one binding) */
            const vkattn_kv_cache_desc *d = &p->cache->d;
            push.seg[i].hd = d->head_dim;
            push.seg[i].sb = d->num_kv_heads * d->block_size * d->head_dim;
            push.seg[i].sh = d->block_size * d->head_dim;
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
    bool texel = mode == MODE_TEX;
    bool first = true;
    for (uint64_t m0 = 0; m0 < p->M; m0 += mc)
        for (uint64_t n0 = 0; n0 < p->N; n0 += nc) {
            uint64_t m1 = vkattn_min_u64(m0 + mc, p->M), n1 = vkattn_min_u64(n0 + nc, p->N);
            span s[SPAN_COUNT];
            uint64_t row_part[3];
            chunk_spans(p, m0, m1, n0, n1, s, row_part);
            vkattn_binding b[7];
            r = bind(ctx, &p->x, s[SPAN_X], texel, &b[0], &push.x_base);
            if (r == VKATTN_SUCCESS)
                r = bind(ctx, &p->w, s[SPAN_W], texel, &b[1], &push.w_base);
            if (r == VKATTN_SUCCESS)
                r = s[SPAN_B].used ? bind(ctx, &p->b, s[SPAN_B], false, &b[2], &push.b_base)
                                   : vkattn_bind_dummy(ctx, VK_FORMAT_UNDEFINED, &b[2]);
            if (r == VKATTN_SUCCESS && p->cache)
                b[6] = p->meta;
            else if (r == VKATTN_SUCCESS)
                r = vkattn_bind_dummy(ctx, VK_FORMAT_UNDEFINED, &b[6]);
            int used = -1;
            for (uint32_t i = 0; i < 3 && r == VKATTN_SUCCESS; i++)
                if (i < p->segment_count && s[SPAN_DST + i].used) {
                    r = bind(ctx, &p->dst[i], s[SPAN_DST + i], false, &b[3 + i], &push.seg[i].base);
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
            uint32_t gx = (uint32_t)vkattn_div_up64(n1 - n0, c.tile_n);
            uint32_t gy = c.family == FAM_GEMV_SG || c.family == FAM_GEMV_SH
                              ? 1 : (uint32_t)vkattn_div_up64(m1 - m0, c.tile_m);
            if (!first) /* windows of consecutive dispatches may overlap */
                vkattn_cmd_compute_barrier(ctx, cmd);
            first = false;
            r = vkattn_cmd_dispatch(ctx, cmd, pipeline, b, &push, gx, gy, 1);
            if (r != VKATTN_SUCCESS)
                return r;
        }
    return VKATTN_SUCCESS;
}
