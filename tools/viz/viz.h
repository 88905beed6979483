/* vkattn_viz: pictures of attention weights (PNG or SVG through cairo).
 *
 * A small library beside libvkattn that needs none of it: it takes the
 * weights as host floats, as vkattn_attention's weights output or
 * vkattn.Context.attention(need_weights=True) gives them, and draws one
 * heatmap per head in a grid (or one of their mean), queries down and keys
 * across, with token labels, a viridis colour scale and its scale bar.
 *
 * Colours: a weight w is drawn with viridis at w / top, where top is the
 * largest weight shown in the picture (VKATTN_VIZ_SCALE_MAX, the default;
 * every tile shares it) or 1 (VKATTN_VIZ_SCALE_UNIT). Keys hidden from a
 * query (causal, a mask, padding) are drawn grey, never as weight 0, and the
 * legend says so.
 *
 * Long sequences: a tile shows at most max_cells cells per side; longer
 * sides are cut into blocks of ceil(T / max_cells) tokens and each block
 * drawn as one cell, the max (default) or the mean of its weights (hidden
 * weights count as 0 in the mean; a block is hidden only when all of it is).
 * The picture says so under the title.
 *
 * Errors: every function returns a vkattn_viz_result; on failure `err`
 * (when not NULL) holds a message naming the parameter and its value, and no
 * file is written: pictures are rendered in memory and written to a fresh
 * temporary beside the path that is renamed over it at the end.
 *
 * Thread safety: no global state; calls on different descs and buffers may
 * run at once. */
#ifndef VKATTN_VIZ_H
#define VKATTN_VIZ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#if defined(VKATTN_VIZ_BUILDING) && defined(__GNUC__)
#define VKATTN_VIZ_API __attribute__((visibility("default")))
#else
#define VKATTN_VIZ_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* Results: 0 success, negative errors. */
#define VKATTN_VIZ_RESULTS(X)                                                                    \
    X(VKATTN_VIZ_SUCCESS, 0, "success")                                                          \
    X(VKATTN_VIZ_ERROR_ARGUMENT, -1, "invalid argument (a NULL pointer, a bad shape or option)") \
    X(VKATTN_VIZ_ERROR_VALUE, -2, "a weight is NaN, infinite or negative")                       \
    X(VKATTN_VIZ_ERROR_FORMAT, -3, "the path's extension is not .png or .svg")                   \
    X(VKATTN_VIZ_ERROR_IO, -4, "the file cannot be written")                                     \
    X(VKATTN_VIZ_ERROR_MEMORY, -5, "out of memory")                                              \
    X(VKATTN_VIZ_ERROR_CAIRO, -6, "cairo failed to draw or encode the picture")

typedef enum vkattn_viz_result {
#define VKATTN_VIZ_ENUM_(name, value, text) name = value,
    VKATTN_VIZ_RESULTS(VKATTN_VIZ_ENUM_)
#undef VKATTN_VIZ_ENUM_
} vkattn_viz_result;

/* How blocks of cells are drawn when a side is longer than max_cells. */
typedef enum vkattn_viz_reduce {
    VKATTN_VIZ_REDUCE_MAX = 0,  /* the largest weight of the block: a lone peak stays visible */
    VKATTN_VIZ_REDUCE_MEAN = 1, /* their mean (hidden weights count as 0) */
} vkattn_viz_reduce;

/* What the top of the colour scale is. */
typedef enum vkattn_viz_scale {
    VKATTN_VIZ_SCALE_MAX = 0,  /* the largest weight shown (1 when all are 0) */
    VKATTN_VIZ_SCALE_UNIT = 1, /* 1: pictures of different layers compare */
} vkattn_viz_scale;

typedef enum vkattn_viz_format {
    VKATTN_VIZ_FORMAT_PNG = 0,
    VKATTN_VIZ_FORMAT_SVG = 1,
} vkattn_viz_format;

/* A picture to draw; zero means default in every field. */
typedef struct vkattn_viz_desc {
    /* f32 [heads, q_len, k_len], C order: one batch row of per-head weights,
     * or heads 1 for weights already averaged over heads. Finite, >= 0. */
    const float *weights;
    uint32_t heads, q_len, k_len; /* each >= 1 */
    /* Optional: true where key j is hidden from query i, [hidden_heads,
     * q_len, k_len]; hidden_heads 1 (or 0) for one mask of every head, else
     * equal to heads. */
    const bool *hidden;
    uint32_t hidden_heads;
    /* Optional token labels: q_len strings for the rows, k_len for the
     * columns (UTF-8; invalid bytes and control characters are drawn as '?',
     * long ones cut with an ellipsis). k_tokens NULL: q_tokens for the keys
     * too when q_len == k_len. */
    const char *const *q_tokens;
    const char *const *k_tokens;
    const char *title;        /* drawn on top; NULL: "attention weights" */
    bool average;             /* one heatmap of the mean over heads, not one per head */
    bool pre_averaged;        /* heads 1 holds weights averaged already: its tile says so */
    vkattn_viz_reduce reduce; /* see above; default max */
    vkattn_viz_scale scale;   /* see above; default the largest weight shown */
    uint32_t max_cells;       /* most cells per tile side; 0: 256 */
    uint32_t max_pixels;      /* most pixels per side of the picture, >= 256; 0: 4096 */
} vkattn_viz_desc;

/* The result's name ("VKATTN_VIZ_ERROR_VALUE") and message; unknown values
 * give "unknown result". */
VKATTN_VIZ_API const char *vkattn_viz_result_name(vkattn_viz_result r);
VKATTN_VIZ_API const char *vkattn_viz_result_message(vkattn_viz_result r);

/* The format a path's extension names (.png, .svg, any case); error FORMAT
 * for anything else. */
VKATTN_VIZ_API vkattn_viz_result vkattn_viz_format_of(const char *path, vkattn_viz_format *out,
                                                      char *err, size_t err_size);

/* Draws the picture into memory: *data (free with vkattn_viz_free) holds
 * *size bytes of a PNG or SVG file. On failure *data is NULL. */
VKATTN_VIZ_API vkattn_viz_result vkattn_viz_render(const vkattn_viz_desc *desc,
                                                   vkattn_viz_format format, void **data,
                                                   size_t *size, char *err, size_t err_size);
VKATTN_VIZ_API void vkattn_viz_free(void *data);

/* Writes `size` bytes to `path` whole or not at all: a fresh temporary
 * beside it (O_EXCL | O_NOFOLLOW), renamed over it. A directory or special
 * file at `path` is refused. */
VKATTN_VIZ_API vkattn_viz_result vkattn_viz_save(const char *path, const void *data, size_t size,
                                                 char *err, size_t err_size);

/* vkattn_viz_render in the format of `path`'s extension, then
 * vkattn_viz_save. */
VKATTN_VIZ_API vkattn_viz_result vkattn_viz_write(const vkattn_viz_desc *desc, const char *path,
                                                  char *err, size_t err_size);

/* What a picture of this desc would look like, without drawing it (for
 * tests and callers that place the picture): its size in pixels, the grid,
 * the cells per tile side after downsampling, the pixels per cell, and each
 * tile's top-left corner via vkattn_viz_tile_origin. */
typedef struct vkattn_viz_geometry {
    uint32_t width, height;          /* the picture */
    uint32_t tiles, cols, rows;      /* tiles: heads, or 1 with average */
    uint32_t q_cells, k_cells;       /* cells per tile side (rows, columns) */
    uint32_t q_block, k_block;       /* tokens per cell: 1 without downsampling */
    uint32_t cell_px;                /* pixels per cell side */
    uint32_t tile_x0, tile_y0;       /* tile 0's top-left corner */
    uint32_t tile_dx, tile_dy;       /* from one tile to the next in a row / column */
    uint8_t hidden_rgb[3];           /* the colour of hidden cells */
    uint8_t low_rgb[3], high_rgb[3]; /* the scale's bottom (0) and top colours */
    float top;                       /* the weight drawn with the top colour */
} vkattn_viz_geometry;
VKATTN_VIZ_API vkattn_viz_result vkattn_viz_measure(const vkattn_viz_desc *desc,
                                                    vkattn_viz_geometry *out, char *err,
                                                    size_t err_size);

#ifdef __cplusplus
}
#endif

#endif
