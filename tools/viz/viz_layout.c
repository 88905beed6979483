/* Where a picture's parts go, in whole pixels so that every cell is a
 * block of identical pixels (nothing blurred, colours exact):
 *
 *   title, the lines that say what is shown
 *   query labels | tile grid (one "head h" title over each tile) | scale bar
 *                  key labels (rotated) under the bottom row       legend
 *
 * Query labels sit left of the first column and key labels under the
 * bottom row only: shared axes keep the tiles large. A label every few
 * cells when cells are smaller than the text. */
#include "viz_internal.h"

#include <math.h>
#include <stdio.h>

void viz_font(cairo_t *cr, int px, bool bold)
{
    cairo_select_font_face(cr, "DejaVu Sans", CAIRO_FONT_SLANT_NORMAL,
                           bold ? CAIRO_FONT_WEIGHT_BOLD : CAIRO_FONT_WEIGHT_NORMAL);
    cairo_set_font_size(cr, px);
}

int viz_layout_caption(const vkattn_viz_desc *d, const viz_cells *c, char lines[3][256])
{
    int n = 0;
    char top[32];
    viz_text_number(c->top, top, sizeof top);
    const char *scale = d->scale == VKATTN_VIZ_SCALE_UNIT ? "a fixed scale" : "the largest shown";
    if (d->average)
        snprintf(lines[n++], 256,
                 "mean of %u heads, %u queries x %u keys; colour: weight 0 to %s (%s)", d->heads,
                 d->q_len, d->k_len, top, scale);
    else
        snprintf(lines[n++], 256, "%u head%s, %u queries x %u keys; colour: weight 0 to %s (%s)",
                 d->heads, d->heads == 1 ? "" : "s", d->q_len, d->k_len, top, scale);
    if (c->q_block > 1 || c->k_block > 1)
        snprintf(lines[n++], 256,
                 "downsampled: %u x %u cells per tile, each the %s over %u queries x %u keys",
                 c->q_cells, c->k_cells, d->reduce == VKATTN_VIZ_REDUCE_MEAN ? "mean" : "max",
                 c->q_block, c->k_block);
    if (c->hidden)
        snprintf(lines[n++], 256,
                 "grey: keys hidden from the query (causal, mask or padding), not weight 0");
    return n;
}

/* The widest label of an axis with the label font. */
static double widest_label(cairo_t *cr, const char *const *tokens, uint32_t cells, uint32_t block)
{
    double w = 0;
    char text[128];
    for (uint32_t i = 0; i < cells; i++) {
        viz_text_label(tokens, i, block, text, sizeof text);
        w = fmax(w, viz_text_width(cr, text));
    }
    return w;
}

/* The widest text of the header, at its font. */
static double header_width(cairo_t *cr, const vkattn_viz_desc *d, const viz_cells *c,
                           uint32_t *lines)
{
    char text[256], caption[3][256];
    viz_font(cr, VIZ_TITLE_PX, true);
    viz_text_clean(d->title ? d->title : "attention weights", 120, text, sizeof text);
    double w = viz_text_width(cr, text);
    viz_font(cr, VIZ_TEXT_PX, false);
    *lines = (uint32_t)viz_layout_caption(d, c, caption);
    for (uint32_t k = 0; k < *lines; k++)
        w = fmax(w, viz_text_width(cr, caption[k]));
    return w;
}

/* The scale bar's column: bar, tick labels, legend. */
static double bar_column_width(cairo_t *cr, const viz_cells *c)
{
    double ticks[8];
    int n = viz_text_ticks(c->top, ticks, 8);
    char text[32];
    double w = 0;
    viz_font(cr, VIZ_LABEL_PX, false);
    for (int k = 0; k < n; k++) {
        viz_text_number(ticks[k], text, sizeof text);
        w = fmax(w, viz_text_width(cr, text));
    }
    viz_font(cr, VIZ_TEXT_PX, false);
    double col = fmax(VIZ_BAR_W + 8 + w, viz_text_width(cr, "weight"));
    if (c->hidden)
        col = fmax(col, 14 + 6 + viz_text_width(cr, "hidden"));
    return col;
}

/* Everything but the tiles' size, then the whole picture for cell size p. */
static void place(viz_layout *l, const viz_cells *c, uint32_t p, double qlab, double klab,
                  double header_w, double bar_col)
{
    l->cell_px = p;
    l->tile_w = c->k_cells * p;
    l->tile_h = c->q_cells * p;
    l->q_step = (uint32_t)ceil((VIZ_LABEL_PX + 2.0) / p);
    l->k_step = l->q_step;
    l->tile_dx = l->tile_w + VIZ_GAP_X;
    l->tile_dy = l->tile_h + VIZ_GAP_Y + VIZ_TILE_TITLE;
    l->grid_x = VIZ_MARGIN + VIZ_AXIS_CAPTION + (uint32_t)ceil(qlab) + VIZ_LABEL_GAP;
    l->grid_y = VIZ_MARGIN + VIZ_TITLE_LINE + l->text_lines * VIZ_TEXT_LINE + 8 + VIZ_TILE_TITLE;
    uint32_t grid_w = l->cols * l->tile_w + (l->cols - 1) * VIZ_GAP_X;
    uint32_t grid_h = l->rows * l->tile_h + (l->rows - 1) * (VIZ_GAP_Y + VIZ_TILE_TITLE);
    l->bar_x = l->grid_x + grid_w + VIZ_BAR_GAP;
    l->bar_y = l->grid_y;
    l->bar_w = VIZ_BAR_W;
    l->bar_h = grid_h < VIZ_BAR_MIN_H   ? VIZ_BAR_MIN_H
               : grid_h > VIZ_BAR_MAX_H ? VIZ_BAR_MAX_H
                                        : grid_h;
    double right = l->bar_x + bar_col + VIZ_MARGIN;
    l->width = (uint32_t)ceil(fmax(right, 2 * VIZ_MARGIN + header_w));
    l->key_labels_h = (uint32_t)ceil(klab);
    uint32_t below_grid = l->grid_y + grid_h + VIZ_LABEL_GAP + l->key_labels_h + VIZ_AXIS_CAPTION;
    uint32_t below_bar = l->bar_y + l->bar_h + (c->hidden ? VIZ_LEGEND : 8);
    l->height = (below_grid > below_bar ? below_grid : below_bar) + VIZ_MARGIN;
}

vkattn_viz_result viz_layout_plan(cairo_t *cr, const vkattn_viz_desc *d, const viz_cells *c,
                                  viz_layout *out, uint32_t *fit_cap, char *err, size_t err_size)
{
    viz_layout l = {0};
    *fit_cap = 0;
    l.cols = (uint32_t)ceil(sqrt((double)c->tiles));
    l.rows = (c->tiles + l.cols - 1) / l.cols;
    double header_w = header_width(cr, d, c, &l.text_lines);
    viz_font(cr, VIZ_LABEL_PX, false);
    double qlab = widest_label(cr, d->q_tokens, c->q_cells, c->q_block);
    double klab = widest_label(cr, d->k_tokens, c->k_cells, c->k_block);
    double bar_col = bar_column_width(cr, c);
    /* a tile of about this many pixels a side: one heatmap alone gets more */
    uint32_t target = c->tiles == 1 ? 640 : c->tiles <= 4 ? 480 : 384;
    uint32_t n = c->q_cells > c->k_cells ? c->q_cells : c->k_cells;
    uint32_t p = target / n;
    p = p < 1 ? 1 : p > VIZ_MAX_CELL_PX ? VIZ_MAX_CELL_PX : p;
    for (;; p--) {
        place(&l, c, p, qlab, klab, header_w, bar_col);
        if (l.width <= d->max_pixels && l.height <= d->max_pixels) {
            *out = l;
            return VKATTN_VIZ_SUCCESS;
        }
        if (p == 1)
            break;
    }
    /* at one pixel per cell: how many cells per side the room left holds */
    int64_t room_w = (int64_t)d->max_pixels - (l.width - l.cols * l.tile_w);
    int64_t room_h = (int64_t)d->max_pixels - (l.height - l.rows * l.tile_h);
    int64_t fit_w = room_w / (int64_t)l.cols, fit_h = room_h / (int64_t)l.rows;
    int64_t fit = fit_w < fit_h ? fit_w : fit_h;
    if (l.width > d->max_pixels && 2 * VIZ_MARGIN + header_w > d->max_pixels)
        fit = 0; /* the text alone is too wide */
    *fit_cap = fit >= 2 ? (uint32_t)fit : 0;
    return viz_fail(err, err_size, VKATTN_VIZ_ERROR_ARGUMENT,
                    "max_pixels is %u: %u tile%s of %u x %u cells with their labels need %u x %u "
                    "pixels",
                    d->max_pixels, c->tiles, c->tiles == 1 ? "" : "s", c->q_cells, c->k_cells,
                    l.width, l.height);
}
