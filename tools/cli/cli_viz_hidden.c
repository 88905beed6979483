/* Which keys a query cannot see, from the options and masks a command was
 * given, so that pictures draw them as hidden: a hidden key's weight is 0,
 * and so can a visible one's be, so the weights alone cannot tell. The
 * rules are those of "attention semantics" in include/vkattn/ops.h. */
#include "cli_viz.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

cli_viz_masks cli_viz_job_masks(const cli_job *j, int mask, int key_padding, uint32_t window)
{
    const cli_input *in = j->inputs;
    return (cli_viz_masks){
        .causal = j->causal || j->causal_top_left,
        .align = j->causal_top_left ? VKATTN_CAUSAL_TOP_LEFT : VKATTN_CAUSAL_BOTTOM_RIGHT,
        .window = window,
        .mask = mask >= 0 && in[mask].path ? &in[mask] : NULL,
        .mask_true_blocks = j->mask_true_blocks,
        .key_padding = key_padding >= 0 && in[key_padding].path ? &in[key_padding] : NULL,
    };
}

/* The mask's strides (in elements) over [B, H, Tq, Tk], 0 where it
 * broadcasts; -1 after printing when its shape does not fit. */
static int mask_strides(const cli_input *in, const int64_t shape[4], int64_t strides[4])
{
    const npy_array *a = &in->array;
    /* the dimension of [B, H, Tq, Tk] each of the mask's stands for: rank
     * 3 is [B*H, Tq, Tk] (row b*H + h) */
    uint32_t r = a->rank;
    bool ok = r >= 2 && r <= 4;
    for (uint32_t d = 0; ok && d < r; d++) {
        int64_t full = r == 3 && d == 0 ? shape[0] * shape[1] : shape[4 - r + d];
        ok = a->shape[d] == full || a->shape[d] == 1;
    }
    if (!ok) {
        char s[96];
        cli_shape_text(a, s, sizeof s);
        cli_error("%s %s: shape %s does not broadcast to the weights' [B,H,Tq,Tk] = "
                  "[%lld,%lld,%lld,%lld] (masks are [Tq,Tk], [B*H,Tq,Tk] or [B,H,Tq,Tk], any "
                  "dimension 1)",
                  in->flag, in->path, s, (long long)shape[0], (long long)shape[1],
                  (long long)shape[2], (long long)shape[3]);
        return -1;
    }
    int64_t own[4] = {0}, step = 1;
    for (int d = (int)r - 1; d >= 0; d--) {
        own[d] = a->shape[d] == 1 ? 0 : step;
        step *= a->shape[d];
    }
    for (int d = 0; d < 4; d++)
        strides[d] = 0;
    if (r == 3) { /* row b*H + h: b moves H rows, h one */
        strides[0] = own[0] ? own[0] * shape[1] : 0;
        strides[1] = own[0];
    }
    for (uint32_t d = r == 3 ? 1 : 0; d < r; d++)
        strides[4 - r + d] = own[d];
    return 0;
}

/* Whether the mask's element hides its key. */
static bool mask_hides(const npy_array *a, int64_t e, bool true_blocks)
{
    if (a->dtype == NPY_F32) {
        float v = ((const float *)a->data)[e];
        return isinf(v) && v < 0;
    }
    bool set = ((const uint8_t *)a->data)[e] != 0;
    return true_blocks ? set : !set;
}

static int check_padding(const cli_input *in, const int64_t shape[4])
{
    const npy_array *a = &in->array;
    if (a->rank == 2 && a->shape[0] == shape[0] && a->shape[1] == shape[3])
        return 0;
    char s[96];
    cli_shape_text(a, s, sizeof s);
    cli_error("%s %s: shape %s, expected [B,Tk] = [%lld,%lld] for these weights", in->flag,
              in->path, s, (long long)shape[0], (long long)shape[3]);
    return -1;
}

int cli_viz_hidden(const cli_viz_masks *m, const int64_t shape[4], uint32_t batch_row, bool **out)
{
    *out = NULL;
    if (!m || (!m->causal && !m->window && !m->mask && !m->key_padding))
        return 0;
    int64_t strides[4] = {0};
    if ((m->mask && mask_strides(m->mask, shape, strides) != 0) ||
        (m->key_padding && check_padding(m->key_padding, shape) != 0))
        return -1;
    int64_t heads = shape[1], tq = shape[2], tk = shape[3], b = batch_row;
    bool *hidden = malloc((size_t)(heads * tq * tk));
    if (!hidden) {
        cli_error("out of memory for the hidden keys of %lld heads x %lld x %lld", (long long)heads,
                  (long long)tq, (long long)tk);
        return -1;
    }
    const uint8_t *pad = m->key_padding ? m->key_padding->array.data : NULL;
    for (int64_t h = 0; h < heads; h++)
        for (int64_t i = 0; i < tq; i++) {
            /* the query's aligned position (causal, window) */
            int64_t at = m->align == VKATTN_CAUSAL_TOP_LEFT ? i : i + tk - tq;
            for (int64_t j = 0; j < tk; j++) {
                bool hide = (m->causal && j > at) ||
                            (m->window && (at - j >= m->window ||
                                           (!m->causal && j - at >= (int64_t)m->window))) ||
                            (pad && pad[b * tk + j] == 0);
                if (!hide && m->mask) {
                    int64_t e = b * strides[0] + h * strides[1] + i * strides[2] + j * strides[3];
                    hide = mask_hides(&m->mask->array, e, m->mask_true_blocks);
                }
                hidden[(h * tq + i) * tk + j] = hide;
            }
        }
    *out = hidden;
    return 0;
}
