/* vkattn_viz (tools/viz): pictures of known weights read back with cairo
 * and sampled at the centres of known cells: sizes, the colour map's ends
 * and middle, hidden cells, downsampling, SVG, and every refused input
 * naming its parameter without leaving a file behind. */
#include "test_util.h"
#include "viz/viz.h"

#include <cairo.h>
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char tmp_dir[256];

static int group_setup(void **state)
{
    (void)state;
    snprintf(tmp_dir, sizeof tmp_dir, "/tmp/vkattn-viz-XXXXXX");
    return mkdtemp(tmp_dir) ? 0 : -1;
}

static int group_teardown(void **state)
{
    (void)state;
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmp_dir);
    return system(cmd) == 0 ? 0 : -1;
}

static const char *path_of(const char *name)
{
    static char buf[4][512];
    static int next;
    char *p = buf[next++ % 4];
    snprintf(p, 512, "%s/%s", tmp_dir, name);
    return p;
}

/* The number of entries in the scratch directory (no temporaries left). */
static int files_in_tmp(void)
{
    DIR *d = opendir(tmp_dir);
    int n = 0;
    for (struct dirent *e; d && (e = readdir(d));)
        n += e->d_name[0] != '.' || (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."));
    if (d)
        closedir(d);
    return n;
}

/* A decoded PNG and its geometry. */
typedef struct picture {
    cairo_surface_t *img;
    vkattn_viz_geometry g;
} picture;

static picture render(const vkattn_viz_desc *d, const char *name)
{
    char err[512];
    picture p = {0};
    if (vkattn_viz_measure(d, &p.g, err, sizeof err) != VKATTN_VIZ_SUCCESS)
        fail_msg("measure: %s", err);
    if (vkattn_viz_write(d, path_of(name), err, sizeof err) != VKATTN_VIZ_SUCCESS)
        fail_msg("write %s: %s", name, err);
    p.img = cairo_image_surface_create_from_png(path_of(name));
    assert_int_equal(cairo_surface_status(p.img), CAIRO_STATUS_SUCCESS);
    assert_int_equal(cairo_image_surface_get_width(p.img), p.g.width);
    assert_int_equal(cairo_image_surface_get_height(p.img), p.g.height);
    return p;
}

/* The colour at the centre of cell (i, j) of tile t. */
static void cell_rgb(const picture *p, uint32_t t, uint32_t i, uint32_t j, uint8_t rgb[3])
{
    const vkattn_viz_geometry *g = &p->g;
    uint32_t x = g->tile_x0 + (t % g->cols) * g->tile_dx + j * g->cell_px + g->cell_px / 2;
    uint32_t y = g->tile_y0 + (t / g->cols) * g->tile_dy + i * g->cell_px + g->cell_px / 2;
    cairo_surface_flush(p->img);
    const unsigned char *data = cairo_image_surface_get_data(p->img);
    uint32_t px =
        *(const uint32_t *)(data + (size_t)y * cairo_image_surface_get_stride(p->img) + 4 * x);
    rgb[0] = (uint8_t)(px >> 16);
    rgb[1] = (uint8_t)(px >> 8);
    rgb[2] = (uint8_t)px;
}

/* Cell (i, j) of tile t has colour `want`, exactly or within 1 a channel. */
static void expect_cell(const picture *p, uint32_t t, uint32_t i, uint32_t j, const uint8_t want[3],
                        const char *what)
{
    uint8_t got[3];
    cell_rgb(p, t, i, j, got);
    for (int k = 0; k < 3; k++)
        if (abs((int)got[k] - (int)want[k]) > 1)
            fail_msg("%s: tile %u cell (%u, %u) is (%u, %u, %u), expected (%u, %u, %u)", what, t, i,
                     j, got[0], got[1], got[2], want[0], want[1], want[2]);
}

static void picture_free(picture *p) { cairo_surface_destroy(p->img); }

/* viridis' ends and middle (matplotlib's table, rounded to 8 bits). */
static const uint8_t VIRIDIS_LOW[3] = {68, 1, 84}, VIRIDIS_HIGH[3] = {253, 231, 37},
                     VIRIDIS_MID[3] = {33, 145, 140}, HIDDEN[3] = {200, 200, 200};

/* Two heads of 4 queries x 5 keys: head 0 with its max 0.8 at (1, 2) and
 * a 0 at (3, 4); head 1 the transpose-like other pattern; a middle value
 * 0.4 (half the max) at (2, 0) of head 0. */
static void two_heads(float w[2][4][5])
{
    for (int h = 0; h < 2; h++)
        for (int i = 0; i < 4; i++)
            for (int j = 0; j < 5; j++)
                w[h][i][j] = h == 0 ? 0.05f * (float)(i + j) / 7 : 0.1f * (float)(4 - j) / 4;
    w[0][1][2] = 0.8f;
    w[0][3][4] = 0.0f;
    w[0][2][0] = 0.4f;
}

static void test_png_size_and_colours(void **state)
{
    (void)state;
    float w[2][4][5];
    two_heads(w);
    vkattn_viz_desc d = {.weights = &w[0][0][0], .heads = 2, .q_len = 4, .k_len = 5};
    picture p = render(&d, "two.png");
    assert_int_equal(p.g.tiles, 2);
    assert_int_equal(p.g.cols, 2);
    assert_int_equal(p.g.rows, 1);
    assert_int_equal(p.g.q_block, 1);
    assert_true(p.g.cell_px >= 8);
    assert_float_equal(p.g.top, 0.8f, 0);
    assert_memory_equal(p.g.low_rgb, VIRIDIS_LOW, 3);
    assert_memory_equal(p.g.high_rgb, VIRIDIS_HIGH, 3);
    expect_cell(&p, 0, 1, 2, VIRIDIS_HIGH, "the max weight");
    expect_cell(&p, 0, 3, 4, VIRIDIS_LOW, "weight 0");
    expect_cell(&p, 0, 2, 0, VIRIDIS_MID, "half the max");
    /* the heads differ: so must their tiles, cell for cell where they do */
    int differing = 0;
    for (uint32_t i = 0; i < 4; i++)
        for (uint32_t j = 0; j < 5; j++) {
            uint8_t a[3], b[3];
            cell_rgb(&p, 0, i, j, a);
            cell_rgb(&p, 1, i, j, b);
            differing += memcmp(a, b, 3) != 0;
        }
    assert_true(differing >= 18);
    picture_free(&p);

    /* a fixed scale: 0.8 is no longer the top colour, 1 would be */
    d.scale = VKATTN_VIZ_SCALE_UNIT;
    p = render(&d, "unit.png");
    assert_float_equal(p.g.top, 1.0f, 0);
    uint8_t got[3];
    cell_rgb(&p, 0, 1, 2, got);
    assert_true(abs(got[0] - VIRIDIS_HIGH[0]) > 10);
    picture_free(&p);
}

static void test_average_and_hidden(void **state)
{
    (void)state;
    float w[2][4][5];
    two_heads(w);
    /* causal-like: key j hidden from query i when j > i + 1, in both heads */
    bool hidden[4][5];
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 5; j++)
            hidden[i][j] = j > i + 1;
    w[0][0][4] = w[1][0][4] = 0; /* hidden keys have weight 0 */
    vkattn_viz_desc d = {.weights = &w[0][0][0],
                         .heads = 2,
                         .q_len = 4,
                         .k_len = 5,
                         .hidden = &hidden[0][0],
                         .average = true};
    picture p = render(&d, "avg.png");
    assert_int_equal(p.g.tiles, 1);
    assert_memory_equal(p.g.hidden_rgb, HIDDEN, 3);
    expect_cell(&p, 0, 0, 4, HIDDEN, "a hidden key");
    expect_cell(&p, 0, 0, 2, HIDDEN, "a hidden key");
    /* the mean's max: (0.8 + 0.1 * 2/4) / 2 at (1, 2), visible */
    assert_float_equal(p.g.top, (0.8f + 0.05f) / 2, 1e-6);
    expect_cell(&p, 0, 1, 2, VIRIDIS_HIGH, "the mean's max");
    picture_free(&p);

    /* per head, hidden in head 1 only: head 0 shows its weight 0 as 0 */
    bool per_head[2][4][5] = {{{false}}};
    per_head[1][3][4] = true;
    d = (vkattn_viz_desc){.weights = &w[0][0][0],
                          .heads = 2,
                          .q_len = 4,
                          .k_len = 5,
                          .hidden = &per_head[0][0][0],
                          .hidden_heads = 2};
    p = render(&d, "per_head.png");
    expect_cell(&p, 0, 3, 4, VIRIDIS_LOW, "weight 0, visible");
    expect_cell(&p, 1, 3, 4, HIDDEN, "hidden in head 1");
    picture_free(&p);
}

/* 600 x 600 weights of 0.001 with one 1.0: drawn in blocks of 3, the max
 * keeps the peak at the top colour, and the mean dilutes it. */
static void test_downsample_keeps_peak(void **state)
{
    (void)state;
    enum { T = 600 };
    float *w = malloc(sizeof(float) * T * T);
    assert_non_null(w);
    for (int e = 0; e < T * T; e++)
        w[e] = 0.001f;
    w[301 * T + 457] = 1.0f;
    vkattn_viz_desc d = {.weights = w, .heads = 1, .q_len = T, .k_len = T};
    picture p = render(&d, "peak.png");
    assert_int_equal(p.g.q_block, 3);
    assert_int_equal(p.g.k_block, 3);
    assert_int_equal(p.g.q_cells, 200);
    assert_float_equal(p.g.top, 1.0f, 0);
    expect_cell(&p, 0, 301 / 3, 457 / 3, VIRIDIS_HIGH, "the peak's block (max)");
    expect_cell(&p, 0, 0, 0, VIRIDIS_LOW, "a block of 0.001");
    picture_free(&p);

    d.reduce = VKATTN_VIZ_REDUCE_MEAN;
    d.max_cells = 100; /* blocks of 6 */
    p = render(&d, "peak_mean.png");
    assert_int_equal(p.g.q_block, 6);
    assert_float_equal(p.g.top, (1.0f + 35 * 0.001f) / 36, 1e-6);
    expect_cell(&p, 0, 301 / 6, 457 / 6, VIRIDIS_HIGH, "the peak's block (mean)");
    picture_free(&p);
    free(w);
}

/* Many large heads and a small max_pixels: more downsampling, never a
 * picture over the limit. */
static void test_max_pixels(void **state)
{
    (void)state;
    enum { H = 16, T = 200 };
    float *w = calloc((size_t)H * T * T, sizeof *w);
    assert_non_null(w);
    for (int h = 0; h < H; h++)
        w[((size_t)h * T + h) * T + h] = 1;
    vkattn_viz_desc d = {.weights = w, .heads = H, .q_len = T, .k_len = T, .max_pixels = 800};
    picture p = render(&d, "small.png");
    assert_true(p.g.width <= 800 && p.g.height <= 800);
    assert_int_equal(p.g.cols, 4);
    assert_true(p.g.q_block > 1);
    expect_cell(&p, 5, 5 / p.g.q_block, 5 / p.g.k_block, VIRIDIS_HIGH, "head 5's peak");
    picture_free(&p);
    free(w);
}

static void test_svg_and_labels(void **state)
{
    (void)state;
    float w[2][4][5];
    two_heads(w);
    /* labels with invalid UTF-8, control characters and a long word */
    const char *q[4] = {"The", "caf\xC3\xA9", "bad\xFF\xFE", "tab\there"};
    const char *k[5] = {"a", "b", "", "c", "antidisestablishmentarianism"};
    vkattn_viz_desc d = {.weights = &w[0][0][0],
                         .heads = 2,
                         .q_len = 4,
                         .k_len = 5,
                         .q_tokens = q,
                         .k_tokens = k,
                         .title = "labels \xC3\xA0 la carte"};
    picture p = render(&d, "labels.png");
    expect_cell(&p, 0, 1, 2, VIRIDIS_HIGH, "with labels");
    picture_free(&p);
    char err[512];
    assert_int_equal(vkattn_viz_write(&d, path_of("labels.SVG"), err, sizeof err),
                     VKATTN_VIZ_SUCCESS);
    FILE *f = fopen(path_of("labels.SVG"), "rb");
    assert_non_null(f);
    char head[64] = {0};
    size_t n = fread(head, 1, sizeof head - 1, f);
    fclose(f);
    assert_true(n > 5);
    assert_true(strncmp(head, "<?xml", 5) == 0 || strncmp(head, "<svg", 4) == 0);
}

/* A refused desc or path: result `want`, a message with `needle`, and no
 * file (nor temporary) in the scratch directory. */
static void expect_refused(const vkattn_viz_desc *d, const char *path, vkattn_viz_result want,
                           const char *needle)
{
    int before = files_in_tmp();
    char err[512] = "";
    vkattn_viz_result r = vkattn_viz_write(d, path, err, sizeof err);
    if (r != want || !strstr(err, needle))
        fail_msg("%s: result %s (%s), expected %s with \"%s\"", path, vkattn_viz_result_name(r),
                 err, vkattn_viz_result_name(want), needle);
    assert_int_equal(files_in_tmp(), before);
    assert_false(access(path, F_OK) == 0);
}

static void test_errors(void **state)
{
    (void)state;
    float w[2][4][5];
    two_heads(w);
    vkattn_viz_desc good = {.weights = &w[0][0][0], .heads = 2, .q_len = 4, .k_len = 5};
    vkattn_viz_desc d = good;
    w[1][2][3] = NAN;
    expect_refused(&d, path_of("nan.png"), VKATTN_VIZ_ERROR_VALUE,
                   "weights[head 1, query 2, key 3] is nan");
    w[1][2][3] = -0.5f;
    expect_refused(&d, path_of("neg.png"), VKATTN_VIZ_ERROR_VALUE, "is -0.5");
    two_heads(w);
    d.q_len = 0;
    expect_refused(&d, path_of("shape.png"), VKATTN_VIZ_ERROR_ARGUMENT, "q_len is 0");
    d = good;
    d.weights = NULL;
    expect_refused(&d, path_of("null.png"), VKATTN_VIZ_ERROR_ARGUMENT, "weights is NULL");
    d = good;
    bool hidden[3][4][5] = {{{false}}};
    d.hidden = &hidden[0][0][0];
    d.hidden_heads = 3;
    expect_refused(&d, path_of("hid.png"), VKATTN_VIZ_ERROR_ARGUMENT, "hidden_heads is 3");
    d = good;
    d.max_pixels = 100;
    expect_refused(&d, path_of("px.png"), VKATTN_VIZ_ERROR_ARGUMENT, "max_pixels is 100");
    d = good;
    const char *q[4] = {"a", NULL, "c", "d"};
    d.q_tokens = q;
    expect_refused(&d, path_of("tok.png"), VKATTN_VIZ_ERROR_ARGUMENT, "q_tokens[1] is NULL");
    expect_refused(&good, path_of("pic.jpg"), VKATTN_VIZ_ERROR_FORMAT, "extension \".jpg\"");
    expect_refused(&good, path_of("noext"), VKATTN_VIZ_ERROR_FORMAT, "is not .png or .svg");
    expect_refused(&good, path_of("missing/dir/pic.png"), VKATTN_VIZ_ERROR_IO,
                   "missing/dir/pic.png");
    /* a directory named like a picture is refused, never replaced */
    const char *dir = path_of("dir.png");
    assert_int_equal(mkdir(dir, 0700), 0);
    char err[512];
    assert_int_equal(vkattn_viz_write(&good, dir, err, sizeof err), VKATTN_VIZ_ERROR_IO);
    assert_non_null(strstr(err, "a directory"));
    assert_int_equal(rmdir(dir), 0);
    /* an existing picture is replaced whole */
    FILE *f = fopen(path_of("old.png"), "wb");
    assert_non_null(f);
    fputs("not a png", f);
    fclose(f);
    picture p = render(&good, "old.png");
    picture_free(&p);
    assert_string_equal(vkattn_viz_result_name(VKATTN_VIZ_ERROR_IO), "VKATTN_VIZ_ERROR_IO");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_png_size_and_colours),  cmocka_unit_test(test_average_and_hidden),
        cmocka_unit_test(test_downsample_keeps_peak), cmocka_unit_test(test_max_pixels),
        cmocka_unit_test(test_svg_and_labels),        cmocka_unit_test(test_errors),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
