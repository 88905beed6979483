/* Attention: cutting a call into dispatches whose bindings fit the device.
 *
 * Every dispatch binds windows of q, k, v, out (and the optional tensors)
 * that start at its chunk's first element. Large tensors are cut, coarsest
 * first: all at once; per batch; per batch and KV head (GQA packing kept);
 * per query head; then per range of queries. Only a single head's K or V (or
 * a single row of the mask or key padding) that exceeds a window cannot be
 * cut further. */
#include "ops/attention/attention_internal.h"

bool vka_att_texel_ok(const vka_att_problem *p)
{
    /* element-wise rows (head dims not multiples of 8) use storage buffers */
    return p->dims.q_dtype != VKATTN_DTYPE_BF16 && p->dims.kv_dtype != VKATTN_DTYPE_BF16 &&
           !vka_att_kv_any(p) && !vka_att_elem(p);
}

bool vka_att_octet_aligned(const vkattn_tensor *t)
{
    if (t->dtype != VKATTN_DTYPE_F16)
        return true;
    for (uint32_t d = 0; d + 1 < t->rank; d++)
        if (t->shape[d] > 1 && t->strides[d] % 8)
            return false;
    return t->offset % 16 == 0;
}

vka_box vka_att_chunk_box(const vka_att_problem *p, char which, uint32_t b0, uint32_t nb,
                          uint32_t h0, uint32_t nh, uint32_t i0, uint32_t nq)
{
    const vka_attention_dims *d = &p->dims;
    uint32_t group = d->num_heads / d->num_kv_heads;
    vka_box box = {{0}, {1, 1, 1, 1}};
#define BOX4(s0, c0, s1, c1, s2, c2, s3, c3)                                                \
    do {                                                                                    \
        box.start[0] = (s0), box.count[0] = (c0), box.start[1] = (s1), box.count[1] = (c1); \
        box.start[2] = (s2), box.count[2] = (c2), box.start[3] = (s3), box.count[3] = (c3); \
    } while (0)
    switch (which) {
    case 'q':
    case 'o':
        BOX4(b0, nb, h0, nh, i0, nq, 0, which == 'o' ? d->v_head_dim : d->head_dim);
        break;
    case 'k':
    case 'v': {
        uint32_t g0 = h0 / group, g1 = (h0 + nh - 1) / group;
        BOX4(b0, nb, g0, g1 - g0 + 1, 0, d->kv_len, 0, which == 'v' ? d->v_head_dim : d->head_dim);
        break;
    }
    case 'm': {
        /* rank 4; size-1 dimensions broadcast: their index stays 0 */
        const int64_t *ms = p->mask.shape;
        bool bb = ms[0] == 1, hb = ms[1] == 1, qb = ms[2] == 1, kb = ms[3] == 1;
        BOX4(bb ? 0 : b0, bb ? 1 : nb, hb ? 0 : h0, hb ? 1 : nh, qb ? 0 : i0, qb ? 1 : nq, 0,
             kb ? 1 : d->kv_len);
        break;
    }
    case 'p':
        box.start[0] = b0, box.count[0] = nb, box.start[1] = 0, box.count[1] = d->kv_len;
        break;
    case 'l':
        box.start[0] = b0, box.count[0] = nb, box.start[1] = h0, box.count[1] = nh;
        box.start[2] = i0, box.count[2] = nq;
        break;
    case 'w':
        if (p->weights.rank == 4) {
            BOX4(b0, nb, h0, nh, i0, nq, 0, d->kv_len);
        } else {
            box.start[0] = b0, box.count[0] = nb, box.start[1] = i0, box.count[1] = nq;
            box.start[2] = 0, box.count[2] = d->kv_len;
        }
        break;
    default:
        break;
    }
#undef BOX4
    return box;
}

/* Whether every window of a chunk of these counts fits (chunks at the start
 * are the largest: all have the same counts but the last ones). */
static bool chunk_fits(const vkattn_context *ctx, const vka_att_problem *p, const char *tensors,
                       const vka_att_chunks *c, uint32_t heads, bool texel)
{
    for (const char *w = tensors; *w; w++) {
        const vkattn_tensor *t = *w == 'q'   ? &p->q
                                 : *w == 'k' ? &p->k
                                 : *w == 'v' ? &p->v
                                 : *w == 'o' ? &p->out
                                 : *w == 'm' ? &p->mask
                                 : *w == 'p' ? &p->key_padding
                                 : *w == 'l' ? &p->lse
                                             : &p->weights;
        if (!t->buffer)
            continue;
        vka_box box = vka_att_chunk_box(p, *w, 0, c->nb, 0, heads, 0, c->nq);
        bool input = *w == 'q' || *w == 'k' || *w == 'v';
        if (!(texel && input ? vka_box_fits_texel(ctx, t, &box)
                             : vka_box_fits_storage(ctx, t, &box)))
            return false;
    }
    return true;
}

/* Grid limits of one dispatch: x query tiles, y heads, z batches. */
static bool grid_fits(const vkattn_context *ctx, uint64_t rows, uint32_t rows_per_group, uint32_t y,
                      uint32_t z)
{
    const uint32_t *max = ctx->info.max_workgroup_count;
    return vka_div_up64(rows, rows_per_group) <= max[0] && y <= max[1] && z <= max[2];
}

/* The largest nq in [1, q_len] for which `ok` holds (it is monotone). */
static uint32_t largest_nq(const vkattn_context *ctx, const vka_att_problem *p, const char *tensors,
                           vka_att_chunks c, uint32_t heads, uint32_t rows_per_group,
                           uint32_t grid_y)
{
    uint32_t lo = 0, hi = p->dims.q_len;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo + 1) / 2;
        c.nq = mid;
        if (chunk_fits(ctx, p, tensors, &c, heads, c.texel) &&
            grid_fits(ctx, (uint64_t)mid * c.nh, rows_per_group, grid_y, c.nb))
            lo = mid;
        else
            hi = mid - 1;
    }
    return lo;
}

/* The last resort: one head of one batch, as many queries as fit. */
static vkattn_result query_ranges(vkattn_context *ctx, const vka_att_problem *p,
                                  const char *tensors, vka_att_chunks c, uint32_t rows_per_group,
                                  const char *what, vka_att_chunks *out)
{
    c.nq = largest_nq(ctx, p, tensors, c, 1, rows_per_group, 1);
    if (c.nq == 0)
        return vka_fail(ctx, VKATTN_ERROR_UNSUPPORTED,
                        "%s: one query of one head does not fit the device's binding windows "
                        "(maxStorageBufferRange %llu)",
                        what, (unsigned long long)ctx->info.max_storage_buffer_range);
    *out = c;
    return VKATTN_SUCCESS;
}

vkattn_result vka_att_plan_main(vkattn_context *ctx, const vka_att_problem *p,
                                uint32_t rows_per_group, bool texel, bool octets,
                                vka_att_chunks *out)
{
    const vka_attention_dims *d = &p->dims;
    uint32_t group = d->num_heads / d->num_kv_heads;
    const vka_att_chunks levels[4] = {
        {d->batch, d->num_kv_heads, group, d->q_len, false},
        {1, d->num_kv_heads, group, d->q_len, false},
        {1, 1, group, d->q_len, false},
        {1, 1, 1, d->q_len, false},
    };
    const char *tensors = "qkvompl";
    texel = texel && vka_att_texel_ok(p);
    /* Texel inputs where asked for (and the kernel can read the rows that
     * way), as long as GQA packing survives. */
    if (octets && !(vka_att_octet_aligned(&p->q) && vka_att_octet_aligned(&p->k) &&
                    vka_att_octet_aligned(&p->v)))
        texel = false;
    for (int pass = texel ? 0 : 1; pass < 2; pass++) {
        bool tex = pass == 0;
        for (int l = 0; l < (tex ? 3 : 4); l++) {
            vka_att_chunks c = levels[l];
            c.texel = tex;
            uint32_t heads = c.ng * c.nh;
            if (chunk_fits(ctx, p, tensors, &c, heads, tex) &&
                grid_fits(ctx, (uint64_t)c.nq * c.nh, rows_per_group, c.ng, c.nb)) {
                *out = c;
                return VKATTN_SUCCESS;
            }
        }
    }
    return query_ranges(ctx, p, tensors, levels[3], rows_per_group, "attention", out);
}

vkattn_result vka_att_plan_weights(vkattn_context *ctx, const vka_att_problem *p,
                                   vka_att_chunks *out)
{
    const vka_attention_dims *d = &p->dims;
    /* Rank-3 weights add the heads up one dispatch at a time. */
    uint32_t heads = p->weights.rank == 4 ? d->num_heads : 1;
    const vka_att_chunks levels[3] = {
        {d->batch, 0, heads, d->q_len, false},
        {1, 0, heads, d->q_len, false},
        {1, 0, 1, d->q_len, false},
    };
    const char *tensors = "qkmpw";
    for (int pass = ctx->info.texel_inputs && vka_att_texel_ok(p) ? 0 : 1; pass < 2; pass++) {
        bool texel = pass == 0;
        for (int l = 0; l < 3; l++) {
            vka_att_chunks c = levels[l];
            c.texel = texel;
            /* one workgroup per query row and head */
            if (chunk_fits(ctx, p, tensors, &c, c.nh, texel) &&
                grid_fits(ctx, c.nq, 1, c.nh, c.nb)) {
                *out = c;
                return VKATTN_SUCCESS;
            }
        }
    }
    return query_ranges(ctx, p, tensors, levels[2], 1, "attention weights", out);
}
