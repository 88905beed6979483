/* A picture from its desc: planned (checked, cells, layout), drawn with
 * cairo onto an image (PNG) or a vector surface (SVG), encoded in memory. */
#include "viz_internal.h"

#include <cairo-svg.h>
#include <stdlib.h>
#include <string.h>

void viz_plan_free(viz_plan *p) { viz_cells_free(&p->cells); }

/* The layout needs text measured: a 1-pixel surface is enough. */
static vkattn_viz_result plan_layout(viz_plan *p, uint32_t *fit_cap, char *err, size_t err_size)
{
    cairo_surface_t *s = cairo_image_surface_create(CAIRO_FORMAT_ARGB32, 1, 1);
    cairo_t *cr = cairo_create(s);
    vkattn_viz_result r =
        cairo_status(cr) == CAIRO_STATUS_SUCCESS
            ? viz_layout_plan(cr, &p->desc, &p->cells, &p->layout, fit_cap, err, err_size)
            : viz_fail(err, err_size, VKATTN_VIZ_ERROR_MEMORY, "cairo: %s",
                       cairo_status_to_string(cairo_status(cr)));
    cairo_destroy(cr);
    cairo_surface_destroy(s);
    return r;
}

vkattn_viz_result viz_plan_make(const vkattn_viz_desc *desc, viz_plan *out, char *err,
                                size_t err_size)
{
    viz_plan p = {0};
    vkattn_viz_result r = viz_check(desc, &p.desc, err, err_size);
    uint32_t cap = r == VKATTN_VIZ_SUCCESS ? p.desc.max_cells : 0;
    /* a picture too large for max_pixels even at a pixel a cell: fewer
     * cells (more downsampling) until it fits, or the layout says none can */
    while (r == VKATTN_VIZ_SUCCESS) {
        r = viz_cells_build(&p.desc, cap, &p.cells, err, err_size);
        uint32_t fit = 0;
        if (r == VKATTN_VIZ_SUCCESS)
            r = plan_layout(&p, &fit, err, err_size);
        uint32_t now = p.cells.q_cells > p.cells.k_cells ? p.cells.q_cells : p.cells.k_cells;
        if (r != VKATTN_VIZ_ERROR_ARGUMENT || !fit || fit >= now)
            break;
        viz_cells_free(&p.cells);
        cap = fit;
        r = VKATTN_VIZ_SUCCESS;
    }
    if (r != VKATTN_VIZ_SUCCESS) {
        viz_plan_free(&p);
        return r;
    }
    *out = p;
    return VKATTN_VIZ_SUCCESS;
}

/* A growing buffer cairo's stream writers append to. */
typedef struct viz_buffer {
    unsigned char *data;
    size_t size, capacity;
} viz_buffer;

static cairo_status_t append(void *closure, const unsigned char *data, unsigned int length)
{
    viz_buffer *b = closure;
    if (b->size + length > b->capacity) {
        size_t cap = b->capacity ? b->capacity : 65536;
        while (cap < b->size + length)
            cap *= 2;
        unsigned char *grown = realloc(b->data, cap);
        if (!grown)
            return CAIRO_STATUS_NO_MEMORY;
        b->data = grown;
        b->capacity = cap;
    }
    memcpy(b->data + b->size, data, length);
    b->size += length;
    return CAIRO_STATUS_SUCCESS;
}

static vkattn_viz_result cairo_failed(cairo_status_t s, const char *what, char *err,
                                      size_t err_size)
{
    return viz_fail(err, err_size,
                    s == CAIRO_STATUS_NO_MEMORY ? VKATTN_VIZ_ERROR_MEMORY : VKATTN_VIZ_ERROR_CAIRO,
                    "cairo: %s: %s", what, cairo_status_to_string(s));
}

/* Draws the plan onto `surface` and finishes it (an SVG is written out
 * then). */
static vkattn_viz_result draw_on(cairo_surface_t *surface, const viz_plan *p, char *err,
                                 size_t err_size)
{
    if (cairo_surface_status(surface) != CAIRO_STATUS_SUCCESS)
        return cairo_failed(cairo_surface_status(surface), "creating the surface", err, err_size);
    cairo_t *cr = cairo_create(surface);
    vkattn_viz_result r = viz_draw(cr, p, err, err_size);
    cairo_destroy(cr);
    cairo_surface_flush(surface);
    return r;
}

static vkattn_viz_result render_png(const viz_plan *p, viz_buffer *b, char *err, size_t err_size)
{
    cairo_surface_t *s =
        cairo_image_surface_create(CAIRO_FORMAT_RGB24, (int)p->layout.width, (int)p->layout.height);
    vkattn_viz_result r = draw_on(s, p, err, err_size);
    if (r == VKATTN_VIZ_SUCCESS) {
        cairo_status_t st = cairo_surface_write_to_png_stream(s, append, b);
        if (st != CAIRO_STATUS_SUCCESS)
            r = cairo_failed(st, "encoding the PNG", err, err_size);
    }
    cairo_surface_destroy(s);
    return r;
}

static vkattn_viz_result render_svg(const viz_plan *p, viz_buffer *b, char *err, size_t err_size)
{
    cairo_surface_t *s =
        cairo_svg_surface_create_for_stream(append, b, p->layout.width, p->layout.height);
    vkattn_viz_result r = draw_on(s, p, err, err_size);
    cairo_surface_finish(s); /* writes the document */
    if (r == VKATTN_VIZ_SUCCESS && cairo_surface_status(s) != CAIRO_STATUS_SUCCESS)
        r = cairo_failed(cairo_surface_status(s), "writing the SVG", err, err_size);
    cairo_surface_destroy(s);
    return r;
}

vkattn_viz_result vkattn_viz_render(const vkattn_viz_desc *desc, vkattn_viz_format format,
                                    void **data, size_t *size, char *err, size_t err_size)
{
    if (!data || !size)
        return viz_fail(err, err_size, VKATTN_VIZ_ERROR_ARGUMENT, "%s is NULL",
                        !data ? "data" : "size");
    *data = NULL;
    *size = 0;
    if (format != VKATTN_VIZ_FORMAT_PNG && format != VKATTN_VIZ_FORMAT_SVG)
        return viz_fail(err, err_size, VKATTN_VIZ_ERROR_FORMAT,
                        "format is %d: expected VKATTN_VIZ_FORMAT_PNG (0) or _SVG (1)",
                        (int)format);
    viz_plan p;
    vkattn_viz_result r = viz_plan_make(desc, &p, err, err_size);
    if (r != VKATTN_VIZ_SUCCESS)
        return r;
    viz_buffer b = {0};
    r = format == VKATTN_VIZ_FORMAT_PNG ? render_png(&p, &b, err, err_size)
                                        : render_svg(&p, &b, err, err_size);
    viz_plan_free(&p);
    if (r != VKATTN_VIZ_SUCCESS) {
        free(b.data);
        return r;
    }
    *data = b.data;
    *size = b.size;
    return VKATTN_VIZ_SUCCESS;
}

void vkattn_viz_free(void *data) { free(data); }

vkattn_viz_result vkattn_viz_measure(const vkattn_viz_desc *desc, vkattn_viz_geometry *out,
                                     char *err, size_t err_size)
{
    if (!out)
        return viz_fail(err, err_size, VKATTN_VIZ_ERROR_ARGUMENT, "out is NULL");
    viz_plan p;
    vkattn_viz_result r = viz_plan_make(desc, &p, err, err_size);
    if (r != VKATTN_VIZ_SUCCESS)
        return r;
    const viz_layout *l = &p.layout;
    vkattn_viz_geometry g = {
        .width = l->width,
        .height = l->height,
        .tiles = p.cells.tiles,
        .cols = l->cols,
        .rows = l->rows,
        .q_cells = p.cells.q_cells,
        .k_cells = p.cells.k_cells,
        .q_block = p.cells.q_block,
        .k_block = p.cells.k_block,
        .cell_px = l->cell_px,
        .tile_x0 = l->grid_x,
        .tile_y0 = l->grid_y,
        .tile_dx = l->tile_dx,
        .tile_dy = l->tile_dy,
        .top = p.cells.top,
    };
    memcpy(g.hidden_rgb, viz_hidden_rgb, 3);
    viz_viridis(0, g.low_rgb);
    viz_viridis(1, g.high_rgb);
    viz_plan_free(&p);
    *out = g;
    return VKATTN_VIZ_SUCCESS;
}
