/* The desc checked, and the weights turned into the cells a picture draws:
 * averaged over heads when asked, cut into blocks when a side is longer
 * than the cap, each block reduced to one value (max or mean). */
#include "viz_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Limits that keep a picture a picture: more heads than this make tiles of
 * a few pixels, and the product of the dimensions must fit a size_t. */
enum {
    VIZ_MAX_HEADS = 4096,
    VIZ_DEFAULT_CELLS = 256,
    VIZ_DEFAULT_PIXELS = 4096,
    VIZ_MIN_PIXELS = 256
};

static vkattn_viz_result check_tokens(const char *const *tokens, uint32_t n, const char *name,
                                      char *err, size_t err_size)
{
    for (uint32_t i = 0; tokens && i < n; i++)
        if (!tokens[i])
            return viz_fail(err, err_size, VKATTN_VIZ_ERROR_ARGUMENT,
                            "%s[%u] is NULL: give a string for every token (\"\" for none)", name,
                            i);
    return VKATTN_VIZ_SUCCESS;
}

static vkattn_viz_result check_shape(const vkattn_viz_desc *d, char *err, size_t err_size)
{
    const char *names[3] = {"heads", "q_len", "k_len"};
    const uint32_t dims[3] = {d->heads, d->q_len, d->k_len};
    for (int k = 0; k < 3; k++)
        if (dims[k] == 0)
            return viz_fail(err, err_size, VKATTN_VIZ_ERROR_ARGUMENT,
                            "%s is 0: the weights are [heads, q_len, k_len], each at least 1",
                            names[k]);
    if (d->heads > VIZ_MAX_HEADS)
        return viz_fail(err, err_size, VKATTN_VIZ_ERROR_ARGUMENT,
                        "heads is %u: at most %d tiles fit a picture", d->heads, VIZ_MAX_HEADS);
    if ((uint64_t)d->q_len * d->k_len > SIZE_MAX / sizeof(float) / d->heads)
        return viz_fail(err, err_size, VKATTN_VIZ_ERROR_ARGUMENT,
                        "heads %u x q_len %u x k_len %u weights do not fit in memory", d->heads,
                        d->q_len, d->k_len);
    if (d->hidden_heads > 1 && d->hidden_heads != d->heads)
        return viz_fail(err, err_size, VKATTN_VIZ_ERROR_ARGUMENT,
                        "hidden_heads is %u: expected 1 (one mask for every head) or heads (%u)",
                        d->hidden_heads, d->heads);
    return VKATTN_VIZ_SUCCESS;
}

static vkattn_viz_result check_options(const vkattn_viz_desc *d, char *err, size_t err_size)
{
    if ((unsigned)d->reduce > VKATTN_VIZ_REDUCE_MEAN)
        return viz_fail(err, err_size, VKATTN_VIZ_ERROR_ARGUMENT,
                        "reduce is %d: expected VKATTN_VIZ_REDUCE_MAX (0) or _MEAN (1)",
                        (int)d->reduce);
    if ((unsigned)d->scale > VKATTN_VIZ_SCALE_UNIT)
        return viz_fail(err, err_size, VKATTN_VIZ_ERROR_ARGUMENT,
                        "scale is %d: expected VKATTN_VIZ_SCALE_MAX (0) or _UNIT (1)",
                        (int)d->scale);
    if (d->pre_averaged && d->heads != 1)
        return viz_fail(err, err_size, VKATTN_VIZ_ERROR_ARGUMENT,
                        "pre_averaged with heads %u: weights averaged over heads have heads 1",
                        d->heads);
    if (d->max_pixels < VIZ_MIN_PIXELS)
        return viz_fail(err, err_size, VKATTN_VIZ_ERROR_ARGUMENT,
                        "max_pixels is %u: a picture needs at least %d pixels per side (0: %d)",
                        d->max_pixels, VIZ_MIN_PIXELS, VIZ_DEFAULT_PIXELS);
    return VKATTN_VIZ_SUCCESS;
}

vkattn_viz_result viz_check(const vkattn_viz_desc *desc, vkattn_viz_desc *out, char *err,
                            size_t err_size)
{
    if (!desc)
        return viz_fail(err, err_size, VKATTN_VIZ_ERROR_ARGUMENT, "desc is NULL");
    if (!desc->weights)
        return viz_fail(err, err_size, VKATTN_VIZ_ERROR_ARGUMENT, "weights is NULL");
    vkattn_viz_desc d = *desc;
    if (!d.max_cells)
        d.max_cells = VIZ_DEFAULT_CELLS;
    if (!d.max_pixels)
        d.max_pixels = VIZ_DEFAULT_PIXELS;
    if (!d.hidden)
        d.hidden_heads = 0;
    else if (!d.hidden_heads)
        d.hidden_heads = 1;
    if (!d.k_tokens && d.q_len == d.k_len)
        d.k_tokens = d.q_tokens;
    vkattn_viz_result r = check_shape(&d, err, err_size);
    if (r == VKATTN_VIZ_SUCCESS)
        r = check_options(&d, err, err_size);
    if (r == VKATTN_VIZ_SUCCESS)
        r = check_tokens(d.q_tokens, d.q_len, "q_tokens", err, err_size);
    if (r == VKATTN_VIZ_SUCCESS)
        r = check_tokens(d.k_tokens, d.k_len, "k_tokens", err, err_size);
    if (r != VKATTN_VIZ_SUCCESS)
        return r;
    size_t n = (size_t)d.heads * d.q_len * d.k_len;
    for (size_t e = 0; e < n; e++) {
        float w = d.weights[e];
        if (isfinite(w) && w >= 0)
            continue;
        size_t per_head = (size_t)d.q_len * d.k_len;
        return viz_fail(err, err_size, VKATTN_VIZ_ERROR_VALUE,
                        "weights[head %zu, query %zu, key %zu] is %g: weights must be finite "
                        "and >= 0",
                        e / per_head, e % per_head / d.k_len, e % d.k_len, (double)w);
    }
    *out = d;
    return VKATTN_VIZ_SUCCESS;
}

/* Whether query i's key j is hidden in head h (hidden_heads 1: every head). */
static bool is_hidden(const vkattn_viz_desc *d, uint32_t h, uint32_t i, uint32_t j)
{
    if (!d->hidden)
        return false;
    size_t head = d->hidden_heads == 1 ? 0 : h;
    return d->hidden[(head * d->q_len + i) * d->k_len + j];
}

/* One tile's source: head h's weights, or (average) their mean over heads,
 * and whether each cell is hidden (averaged: hidden in every head). */
static void tile_source(const vkattn_viz_desc *d, uint32_t h, float *w, bool *hid)
{
    size_t per_head = (size_t)d->q_len * d->k_len;
    uint32_t h0 = d->average ? 0 : h, h1 = d->average ? d->heads : h + 1;
    for (uint32_t i = 0; i < d->q_len; i++)
        for (uint32_t j = 0; j < d->k_len; j++) {
            double sum = 0;
            bool all_hidden = true;
            for (uint32_t g = h0; g < h1; g++) {
                sum += d->weights[g * per_head + (size_t)i * d->k_len + j];
                all_hidden = all_hidden && is_hidden(d, g, i, j);
            }
            w[(size_t)i * d->k_len + j] = (float)(sum / (h1 - h0));
            hid[(size_t)i * d->k_len + j] = all_hidden;
        }
}

/* Block (bi, bj) of a tile's source reduced to one cell; hidden only when
 * every token pair in it is. */
static float reduce_block(const vkattn_viz_desc *d, const viz_cells *c, const float *w,
                          const bool *hid, uint32_t bi, uint32_t bj, bool *hidden)
{
    uint32_t i0 = bi * c->q_block, j0 = bj * c->k_block;
    uint32_t i1 = i0 + c->q_block < d->q_len ? i0 + c->q_block : d->q_len;
    uint32_t j1 = j0 + c->k_block < d->k_len ? j0 + c->k_block : d->k_len;
    double acc = 0;
    uint32_t visible = 0;
    for (uint32_t i = i0; i < i1; i++)
        for (uint32_t j = j0; j < j1; j++) {
            size_t e = (size_t)i * d->k_len + j;
            if (hid[e])
                continue;
            visible++;
            acc = d->reduce == VKATTN_VIZ_REDUCE_MAX ? fmax(acc, w[e]) : acc + w[e];
        }
    *hidden = visible == 0;
    if (d->reduce == VKATTN_VIZ_REDUCE_MEAN)
        acc /= (double)(i1 - i0) * (j1 - j0); /* hidden ones count as 0 */
    return (float)acc;
}

static uint32_t ceil_div(uint32_t a, uint32_t b) { return (uint32_t)(((uint64_t)a + b - 1) / b); }

vkattn_viz_result viz_cells_build(const vkattn_viz_desc *d, uint32_t cap, viz_cells *out, char *err,
                                  size_t err_size)
{
    viz_cells c = {.tiles = d->average ? 1 : d->heads};
    if (cap > d->max_cells)
        cap = d->max_cells;
    c.q_block = ceil_div(d->q_len, cap);
    c.k_block = ceil_div(d->k_len, cap);
    c.q_cells = ceil_div(d->q_len, c.q_block);
    c.k_cells = ceil_div(d->k_len, c.k_block);
    size_t per_tile = (size_t)c.q_cells * c.k_cells, per_head = (size_t)d->q_len * d->k_len;
    c.value = malloc(per_tile * c.tiles * sizeof *c.value);
    c.hidden = malloc(per_tile * c.tiles * sizeof *c.hidden);
    float *w = malloc(per_head * sizeof *w);
    bool *hid = malloc(per_head * sizeof *hid);
    if (!c.value || !c.hidden || !w || !hid) {
        free(w);
        free(hid);
        viz_cells_free(&c);
        return viz_fail(err, err_size, VKATTN_VIZ_ERROR_MEMORY,
                        "out of memory for %u tiles of %u x %u weights", c.tiles, d->q_len,
                        d->k_len);
    }
    bool any_hidden = false;
    float top = 0;
    for (uint32_t t = 0; t < c.tiles; t++) {
        tile_source(d, t, w, hid);
        for (uint32_t bi = 0; bi < c.q_cells; bi++)
            for (uint32_t bj = 0; bj < c.k_cells; bj++) {
                size_t e = (t * (size_t)c.q_cells + bi) * c.k_cells + bj;
                c.value[e] = reduce_block(d, &c, w, hid, bi, bj, &c.hidden[e]);
                any_hidden = any_hidden || c.hidden[e];
                if (!c.hidden[e] && c.value[e] > top)
                    top = c.value[e];
            }
    }
    free(w);
    free(hid);
    if (!any_hidden) { /* lets the legend leave the hidden swatch out */
        free(c.hidden);
        c.hidden = NULL;
    }
    c.top = d->scale == VKATTN_VIZ_SCALE_UNIT || top <= 0 ? 1.0f : top;
    *out = c;
    return VKATTN_VIZ_SUCCESS;
}

void viz_cells_free(viz_cells *c)
{
    free(c->value);
    free(c->hidden);
    c->value = NULL;
    c->hidden = NULL;
}
