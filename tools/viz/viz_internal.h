/* What the files of vkattn_viz share: the plan of one picture (its cells
 * after averaging and downsampling, and where everything goes), colours,
 * label text and error messages. Not exported: only vkattn_viz_* is. */
#ifndef VKATTN_VIZ_INTERNAL_H
#define VKATTN_VIZ_INTERNAL_H

#include "viz.h"

#include <cairo.h>

/* ---------------------------------------------------------------- errors */
/* Formats the message into err (when not NULL) and returns r. */
vkattn_viz_result viz_fail(char *err, size_t err_size, vkattn_viz_result r, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;

/* ---------------------------------------------------------------- colours */
/* viridis at t in [0, 1] (clamped), as 8-bit sRGB. */
void viz_viridis(double t, uint8_t rgb[3]);
/* Hidden cells: a neutral grey that viridis never reaches. */
extern const uint8_t viz_hidden_rgb[3];

/* ---------------------------------------------------------------- cells */
/* The cells of every tile: desc's weights averaged over heads (average),
 * cut into blocks of q_block x k_block tokens and reduced. */
typedef struct viz_cells {
    uint32_t tiles;            /* heads, or 1 */
    uint32_t q_cells, k_cells; /* per tile side */
    uint32_t q_block, k_block; /* tokens per cell */
    float *value;              /* [tiles, q_cells, k_cells] */
    bool *hidden;              /* same shape; NULL when nothing is hidden */
    float top;                 /* the weight drawn with the top colour */
} viz_cells;

/* The desc with its defaults resolved, checked: shapes, options, every
 * weight finite and >= 0, token arrays. */
vkattn_viz_result viz_check(const vkattn_viz_desc *desc, vkattn_viz_desc *out, char *err,
                            size_t err_size);
/* Builds the cells of a checked desc with at most `cap` cells per side. */
vkattn_viz_result viz_cells_build(const vkattn_viz_desc *d, uint32_t cap, viz_cells *out, char *err,
                                  size_t err_size);
void viz_cells_free(viz_cells *c);

/* ---------------------------------------------------------------- text */
/* Font sizes in pixels. */
enum { VIZ_TITLE_PX = 18, VIZ_TEXT_PX = 12, VIZ_LABEL_PX = 10 };
/* Up to `max_chars` characters of UTF-8 `text` into `out` (size bytes):
 * invalid bytes and control characters become '?', a longer text ends in
 * an ellipsis. cairo refuses invalid UTF-8, so every string drawn passes
 * through here. */
void viz_text_clean(const char *text, size_t max_chars, char *out, size_t size);
/* The label of cell `cell` of an axis: its token (a block's first token
 * followed by "+" when blocks hold several) or its index. */
void viz_text_label(const char *const *tokens, uint32_t cell, uint32_t block, char *out,
                    size_t size);
/* Tick values for a scale from 0 to top: 0, step, 2 step, ... <= top with
 * the largest step of 1, 2 or 5 times a power of ten giving at least 4
 * ticks (so at most 8). Returns the count (at most `cap`). */
int viz_text_ticks(double top, double *ticks, int cap);
/* A number for the scale bar ("0", "0.05", "1e-05"). */
void viz_text_number(double v, char *out, size_t size);
/* Text width in pixels with the context's current font. */
double viz_text_width(cairo_t *cr, const char *text);

/* ---------------------------------------------------------------- layout */
/* Spaces of the layout in pixels (viz_layout.c places, viz_draw.c draws). */
enum {
    VIZ_MARGIN = 16,
    VIZ_TITLE_LINE = 26,   /* the title's line */
    VIZ_TEXT_LINE = 17,    /* each line under it */
    VIZ_TILE_TITLE = 18,   /* "head h" over a tile */
    VIZ_GAP_X = 14,        /* between tiles in a row */
    VIZ_GAP_Y = 10,        /* between a tile and the next row's titles */
    VIZ_AXIS_CAPTION = 18, /* "query" / "key" beside the labels */
    VIZ_LABEL_GAP = 7,     /* tile edge to label: a 3-pixel tick, then space */
    VIZ_BAR_GAP = 28,      /* grid to scale bar */
    VIZ_BAR_W = 18,
    VIZ_BAR_MIN_H = 120,
    VIZ_BAR_MAX_H = 360,
    VIZ_LEGEND = 34, /* under the bar: the hidden swatch and its text */
    VIZ_MAX_CELL_PX = 48,
};
/* Where everything goes, in whole pixels. */
typedef struct viz_layout {
    uint32_t width, height;
    uint32_t cols, rows;
    uint32_t cell_px;
    uint32_t tile_w, tile_h;
    uint32_t grid_x, grid_y;   /* tile 0's top-left corner */
    uint32_t tile_dx, tile_dy; /* tile to tile */
    uint32_t q_step, k_step;   /* a label every this many cells */
    uint32_t bar_x, bar_y, bar_w, bar_h;
    uint32_t text_lines;   /* lines under the title */
    uint32_t key_labels_h; /* the rotated key labels' height */
} viz_layout;

/* The layout of cells `c` (their labels measured with `cr`); error
 * ARGUMENT when it cannot fit d->max_pixels even at one pixel per cell,
 * with *fit_cap the most cells per side that would fit (0: none). */
vkattn_viz_result viz_layout_plan(cairo_t *cr, const vkattn_viz_desc *d, const viz_cells *c,
                                  viz_layout *out, uint32_t *fit_cap, char *err, size_t err_size);
/* The lines under the title (count returned, at most 3, each < 256 bytes). */
int viz_layout_caption(const vkattn_viz_desc *d, const viz_cells *c, char lines[3][256]);

/* ---------------------------------------------------------------- plan */
/* Everything needed to draw: the checked desc, its cells and layout. */
typedef struct viz_plan {
    vkattn_viz_desc desc;
    viz_cells cells;
    viz_layout layout;
} viz_plan;
vkattn_viz_result viz_plan_make(const vkattn_viz_desc *desc, viz_plan *out, char *err,
                                size_t err_size);
void viz_plan_free(viz_plan *p);
/* Sets the font of a role: the title (bold), text, labels. */
void viz_font(cairo_t *cr, int px, bool bold);

/* Draws the plan onto a surface of layout.width x layout.height. */
vkattn_viz_result viz_draw(cairo_t *cr, const viz_plan *p, char *err, size_t err_size);

#endif
