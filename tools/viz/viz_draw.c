/* Drawing a planned picture with cairo: header, tiles, labels, scale bar,
 * legend. Cells and the scale bar are images of exact pixels placed at
 * whole-pixel offsets, so a cell's colour is the colour map's, bit for bit
 * (the tests sample them). */
#include "viz_internal.h"

#include <math.h>
#include <stdio.h>

/* A quarter turn anticlockwise: rotated text reads upwards. (M_PI is not
 * ISO C.) */
#define VIZ_QUARTER_TURN 1.57079632679489661923

static void set_grey(cairo_t *cr, double v) { cairo_set_source_rgb(cr, v, v, v); }

/* Pixels of cairo's ARGB32 (premultiplied; opaque here). */
static uint32_t argb(const uint8_t rgb[3])
{
    return 0xFF000000u | (uint32_t)rgb[0] << 16 | (uint32_t)rgb[1] << 8 | rgb[2];
}

/* Paints an image at a whole-pixel position, pixel for pixel. */
static void paint_image(cairo_t *cr, cairo_surface_t *img, double x, double y, double w, double h)
{
    cairo_surface_mark_dirty(img);
    cairo_set_source_surface(cr, img, x, y);
    cairo_pattern_set_filter(cairo_get_source(cr), CAIRO_FILTER_NEAREST);
    cairo_rectangle(cr, x, y, w, h);
    cairo_fill(cr);
    /* a 1-pixel frame just outside, never over a cell */
    set_grey(cr, 0.55);
    cairo_set_line_width(cr, 1);
    cairo_rectangle(cr, x - 0.5, y - 0.5, w + 1, h + 1);
    cairo_stroke(cr);
}

/* The vertical offset that centres text of the current font on a line. */
static double centre_offset(cairo_t *cr)
{
    cairo_font_extents_t fe;
    cairo_font_extents(cr, &fe);
    return (fe.ascent - fe.descent) / 2;
}

static void draw_header(cairo_t *cr, const viz_plan *p)
{
    char text[512], lines[3][256];
    viz_font(cr, VIZ_TITLE_PX, true);
    set_grey(cr, 0.1);
    viz_text_clean(p->desc.title ? p->desc.title : "attention weights", 120, text, sizeof text);
    cairo_move_to(cr, VIZ_MARGIN, VIZ_MARGIN + VIZ_TITLE_PX);
    cairo_show_text(cr, text);
    viz_font(cr, VIZ_TEXT_PX, false);
    set_grey(cr, 0.3);
    int n = viz_layout_caption(&p->desc, &p->cells, lines);
    for (int k = 0; k < n; k++) {
        cairo_move_to(cr, VIZ_MARGIN,
                      VIZ_MARGIN + VIZ_TITLE_LINE + k * VIZ_TEXT_LINE + VIZ_TEXT_PX);
        cairo_show_text(cr, lines[k]);
    }
}

/* Tile t's cells as an image at (x, y). */
static vkattn_viz_result draw_cells(cairo_t *cr, const viz_plan *p, uint32_t t, double x, double y,
                                    char *err, size_t err_size)
{
    const viz_layout *l = &p->layout;
    const viz_cells *c = &p->cells;
    cairo_surface_t *img =
        cairo_image_surface_create(CAIRO_FORMAT_ARGB32, (int)l->tile_w, (int)l->tile_h);
    if (cairo_surface_status(img) != CAIRO_STATUS_SUCCESS) {
        cairo_surface_destroy(img);
        return viz_fail(err, err_size, VKATTN_VIZ_ERROR_MEMORY,
                        "cairo: no image of %u x %u pixels for a tile", l->tile_w, l->tile_h);
    }
    unsigned char *data = cairo_image_surface_get_data(img);
    int stride = cairo_image_surface_get_stride(img);
    for (uint32_t i = 0; i < c->q_cells; i++)
        for (uint32_t j = 0; j < c->k_cells; j++) {
            size_t e = ((size_t)t * c->q_cells + i) * c->k_cells + j;
            uint8_t rgb[3];
            if (c->hidden && c->hidden[e])
                rgb[0] = viz_hidden_rgb[0], rgb[1] = viz_hidden_rgb[1], rgb[2] = viz_hidden_rgb[2];
            else
                viz_viridis(c->value[e] / c->top, rgb);
            uint32_t px = argb(rgb);
            for (uint32_t dy = 0; dy < l->cell_px; dy++) {
                uint32_t *row = (uint32_t *)(data + (size_t)(i * l->cell_px + dy) * stride);
                for (uint32_t dx = 0; dx < l->cell_px; dx++)
                    row[j * l->cell_px + dx] = px;
            }
        }
    paint_image(cr, img, x, y, l->tile_w, l->tile_h);
    cairo_surface_destroy(img);
    return VKATTN_VIZ_SUCCESS;
}

/* Query labels left of a tile (right-aligned, a tick each). */
static void draw_query_labels(cairo_t *cr, const viz_plan *p, double x, double y)
{
    const viz_layout *l = &p->layout;
    char text[128];
    viz_font(cr, VIZ_LABEL_PX, false);
    double off = centre_offset(cr);
    for (uint32_t i = 0; i < p->cells.q_cells; i += l->q_step) {
        double yc = y + i * l->cell_px + l->cell_px / 2.0;
        set_grey(cr, 0.55);
        cairo_move_to(cr, x - 3, yc);
        cairo_line_to(cr, x - 1, yc);
        cairo_stroke(cr);
        viz_text_label(p->desc.q_tokens, i, p->cells.q_block, text, sizeof text);
        set_grey(cr, 0.15);
        cairo_move_to(cr, x - VIZ_LABEL_GAP - viz_text_width(cr, text), yc + off);
        cairo_show_text(cr, text);
    }
}

/* Key labels under a tile, rotated to read upwards, ending at the tile. */
static void draw_key_labels(cairo_t *cr, const viz_plan *p, double x, double y)
{
    const viz_layout *l = &p->layout;
    char text[128];
    viz_font(cr, VIZ_LABEL_PX, false);
    double off = centre_offset(cr), bottom = y + l->tile_h;
    for (uint32_t j = 0; j < p->cells.k_cells; j += l->k_step) {
        double xc = x + j * l->cell_px + l->cell_px / 2.0;
        set_grey(cr, 0.55);
        cairo_move_to(cr, xc, bottom + 1);
        cairo_line_to(cr, xc, bottom + 3);
        cairo_stroke(cr);
        viz_text_label(p->desc.k_tokens, j, p->cells.k_block, text, sizeof text);
        set_grey(cr, 0.15);
        cairo_save(cr);
        cairo_translate(cr, xc + off, bottom + VIZ_LABEL_GAP + viz_text_width(cr, text));
        cairo_rotate(cr, -VIZ_QUARTER_TURN);
        cairo_move_to(cr, 0, 0);
        cairo_show_text(cr, text);
        cairo_restore(cr);
    }
}

static void tile_title(const viz_plan *p, uint32_t t, char *out, size_t size)
{
    const vkattn_viz_desc *d = &p->desc;
    if (d->average)
        snprintf(out, size, "mean of %u heads", d->heads);
    else if (d->pre_averaged)
        snprintf(out, size, "mean over heads");
    else
        snprintf(out, size, "head %u", t);
}

/* "query" up the left side, "key" under the grid. */
static void draw_axis_captions(cairo_t *cr, const viz_plan *p, double key_labels_h)
{
    const viz_layout *l = &p->layout;
    double grid_w = l->cols * l->tile_w + (l->cols - 1) * (double)VIZ_GAP_X;
    double grid_h = l->rows * (double)l->tile_dy - VIZ_GAP_Y - VIZ_TILE_TITLE;
    viz_font(cr, VIZ_TEXT_PX, false);
    set_grey(cr, 0.3);
    /* arrows along the axes: "<- query" turned to read upwards points down */
    const char *q = "\xE2\x86\x90 query", *k = "key \xE2\x86\x92";
    cairo_save(cr);
    cairo_translate(cr, VIZ_MARGIN + VIZ_TEXT_PX,
                    l->grid_y + grid_h / 2 + viz_text_width(cr, q) / 2);
    cairo_rotate(cr, -VIZ_QUARTER_TURN);
    cairo_move_to(cr, 0, 0);
    cairo_show_text(cr, q);
    cairo_restore(cr);
    cairo_move_to(cr, l->grid_x + grid_w / 2 - viz_text_width(cr, k) / 2,
                  l->grid_y + grid_h + VIZ_LABEL_GAP + key_labels_h + VIZ_TEXT_PX + 2);
    cairo_show_text(cr, k);
}

static vkattn_viz_result draw_scale_bar(cairo_t *cr, const viz_plan *p, char *err, size_t err_size)
{
    const viz_layout *l = &p->layout;
    cairo_surface_t *img =
        cairo_image_surface_create(CAIRO_FORMAT_ARGB32, (int)l->bar_w, (int)l->bar_h);
    if (cairo_surface_status(img) != CAIRO_STATUS_SUCCESS) {
        cairo_surface_destroy(img);
        return viz_fail(err, err_size, VKATTN_VIZ_ERROR_MEMORY, "cairo: no image for the bar");
    }
    unsigned char *data = cairo_image_surface_get_data(img);
    int stride = cairo_image_surface_get_stride(img);
    for (uint32_t r = 0; r < l->bar_h; r++) {
        uint8_t rgb[3];
        viz_viridis(1.0 - (double)r / (l->bar_h - 1), rgb); /* the top row is the top colour */
        uint32_t *row = (uint32_t *)(data + (size_t)r * stride);
        for (uint32_t x = 0; x < l->bar_w; x++)
            row[x] = argb(rgb);
    }
    paint_image(cr, img, l->bar_x, l->bar_y, l->bar_w, l->bar_h);
    cairo_surface_destroy(img);
    viz_font(cr, VIZ_TEXT_PX, false);
    set_grey(cr, 0.3);
    cairo_move_to(cr, l->bar_x, l->bar_y - 6);
    cairo_show_text(cr, "weight");
    double ticks[8];
    int n = viz_text_ticks(p->cells.top, ticks, 8);
    viz_font(cr, VIZ_LABEL_PX, false);
    double off = centre_offset(cr);
    for (int k = 0; k < n; k++) {
        double y = l->bar_y + (l->bar_h - 1) * (1 - ticks[k] / p->cells.top) + 0.5;
        char text[32];
        viz_text_number(ticks[k], text, sizeof text);
        set_grey(cr, 0.55);
        cairo_move_to(cr, l->bar_x + l->bar_w + 1, y);
        cairo_line_to(cr, l->bar_x + l->bar_w + 5, y);
        cairo_stroke(cr);
        set_grey(cr, 0.15);
        cairo_move_to(cr, l->bar_x + l->bar_w + 8, y + off);
        cairo_show_text(cr, text);
    }
    if (p->cells.hidden) { /* the legend of hidden cells */
        double y = l->bar_y + l->bar_h + 14;
        cairo_set_source_rgb(cr, viz_hidden_rgb[0] / 255.0, viz_hidden_rgb[1] / 255.0,
                             viz_hidden_rgb[2] / 255.0);
        cairo_rectangle(cr, l->bar_x, y, 14, 14);
        cairo_fill_preserve(cr);
        set_grey(cr, 0.55);
        cairo_stroke(cr);
        viz_font(cr, VIZ_TEXT_PX, false);
        set_grey(cr, 0.15);
        cairo_move_to(cr, l->bar_x + 20, y + 11);
        cairo_show_text(cr, "hidden");
    }
    return VKATTN_VIZ_SUCCESS;
}

vkattn_viz_result viz_draw(cairo_t *cr, const viz_plan *p, char *err, size_t err_size)
{
    const viz_layout *l = &p->layout;
    cairo_set_source_rgb(cr, 1, 1, 1);
    cairo_paint(cr);
    draw_header(cr, p);
    for (uint32_t t = 0; t < p->cells.tiles; t++) {
        uint32_t col = t % l->cols, row = t / l->cols;
        double x = l->grid_x + col * (double)l->tile_dx, y = l->grid_y + row * (double)l->tile_dy;
        char title[64];
        tile_title(p, t, title, sizeof title);
        viz_font(cr, VIZ_TEXT_PX, true);
        set_grey(cr, 0.15);
        cairo_move_to(cr, x, y - 6);
        cairo_show_text(cr, title);
        vkattn_viz_result r = draw_cells(cr, p, t, x, y, err, err_size);
        if (r != VKATTN_VIZ_SUCCESS)
            return r;
        if (col == 0)
            draw_query_labels(cr, p, x, y);
        if (t + l->cols >= p->cells.tiles) /* the bottom tile of its column */
            draw_key_labels(cr, p, x, y);
    }
    draw_axis_captions(cr, p, l->key_labels_h);
    vkattn_viz_result r = draw_scale_bar(cr, p, err, err_size);
    if (r != VKATTN_VIZ_SUCCESS)
        return r;
    if (cairo_status(cr) != CAIRO_STATUS_SUCCESS)
        return viz_fail(err, err_size, VKATTN_VIZ_ERROR_CAIRO, "cairo: %s",
                        cairo_status_to_string(cairo_status(cr)));
    return VKATTN_VIZ_SUCCESS;
}
