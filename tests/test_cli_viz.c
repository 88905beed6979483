/* vkattn viz and attention --weights-png, run as a user would: pictures
 * decoded with cairo, their size checked against the layout of the CPU
 * reference's weights, known cells sampled (hidden keys grey, the causal
 * first row's single key at the top colour, each head's pattern where it
 * was built), bad flags exiting 2 and bad inputs 1, never leaving a file.
 *
 * It also draws THE EXAMPLE of issue 17: a causal GQA layer of 12 query
 * heads over 4 KV heads and 64 word tokens, each head built to attend in a
 * way a reader should see at once (previous token, the token itself, the
 * first token, sentence ends, ...), kept at VKATTN_VIZ_EXAMPLE (in the
 * build tree: tests/viz_example/gqa12_causal_64.png). */
#include "npy/npy.h"
#include "test_cli_util.h"
#include "test_util.h"
#include "viz/viz.h"

#include <cairo.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#ifndef VKATTN_VIZ_EXAMPLE
#error "VKATTN_VIZ_EXAMPLE must name where the example picture is kept"
#endif

enum { B = 1, HQ = 12, HKV = 4, T = 64, D = 32, PE = 24 };

/* 64 words of a few short sentences: the example's tokens. */
static const char *const sentences =
    "The cat sat on the mat . A dog ran into the park and barked . Birds sang in the old "
    "oak tree . She read a book by the window . The rain stopped before noon . We walked "
    "home along the quiet river . Children laughed as the kite rose . Nobody expected the "
    "boat to win . Everyone cheered loudly .";

static char words[T][16];

static void split_tokens(void)
{
    const char *p = sentences;
    for (int t = 0; t < T; t++) {
        size_t n = strcspn(p, " ");
        assert_true(n > 0 && n < sizeof words[t]);
        memcpy(words[t], p, n);
        words[t][n] = '\0';
        p += n + (p[n] == ' ');
    }
    assert_true(*p == '\0');
}

/* Position p's encoding: cosines and sines of 12 frequencies from pi
 * (period 2) down to pi / 45, so that dot(pe(a), pe(b)) peaks sharply at
 * a == b and falls off with |a - b|. */
static void pe(double p, float *out)
{
    for (int f = 0; f < PE / 2; f++) {
        double w = 3.14159265358979323846 * pow(2.0, -f / 2.0);
        out[2 * f] = (float)cos(w * p);
        out[2 * f + 1] = (float)sin(w * p);
    }
}

/* Keys: position, "first token" (dim 24), "end of sentence" (dim 25);
 * each KV head weighs them a little differently. */
static void build_k(float *k)
{
    for (int g = 0; g < HKV; g++)
        for (int j = 0; j < T; j++) {
            float *row = k + ((size_t)g * T + j) * D;
            memset(row, 0, D * sizeof *row);
            pe(j, row);
            for (int d = 0; d < PE; d++)
                row[d] *= 1.0f + 0.05f * (float)g;
            row[PE] = j == 0;
            row[PE + 1] = strcmp(words[j], ".") == 0;
        }
}

/* What each query head looks for (its KV head is h / 3): */
typedef struct head_kind {
    int shift;    /* the position it looks back to (-1: none) */
    float sharp;  /* how sharply (the position's weight in q) */
    float first;  /* the first token */
    float period; /* sentence ends */
} head_kind;
static const head_kind kinds[HQ] = {
    {1, 3.0f, 0, 0},     /* 0: the previous token */
    {0, 3.0f, 0, 0},     /* 1: the token itself */
    {-1, 0, 6.0f, 0},    /* 2: the first token (a sink) */
    {-1, 0, 0, 6.0f},    /* 3: sentence ends */
    {2, 3.0f, 0, 0},     /* 4: two back */
    {0, 0.8f, 0, 0},     /* 5: a broad local window */
    {1, 2.0f, 4.0f, 0},  /* 6: the first token and the previous one */
    {-1, 0, 0, 0},       /* 7: nothing: uniform over what it sees */
    {3, 3.0f, 0, 0},     /* 8: three back */
    {-1, 0, 4.0f, 5.0f}, /* 9: the first token and sentence ends */
    {0, 1.5f, 0, 0},     /* 10: the token itself, softly */
    {1, 1.0f, 0, 4.0f},  /* 11: sentence ends and the previous token, softly */
};

static void build_q(float *q)
{
    for (int h = 0; h < HQ; h++)
        for (int i = 0; i < T; i++) {
            float *row = q + ((size_t)h * T + i) * D;
            memset(row, 0, D * sizeof *row);
            const head_kind *k = &kinds[h];
            if (k->shift >= 0) {
                pe(i - k->shift, row);
                for (int d = 0; d < PE; d++)
                    row[d] *= k->sharp;
            }
            /* the scale 1/sqrt(D) is undone so the weights mean what they say */
            row[PE] = k->first * sqrtf(D);
            row[PE + 1] = k->period * sqrtf(D);
        }
}

static float q_data[B * HQ * T * D], k_data[B * HKV * T * D], v_data[B * HKV * T * D];

static int group_setup(void **state)
{
    if (cli_setup(state) != 0)
        return -1;
    split_tokens();
    build_q(q_data);
    build_k(k_data);
    for (size_t e = 0; e < sizeof v_data / sizeof *v_data; e++)
        v_data[e] = (float)sin(0.37 * (double)e);
    int64_t qs[4] = {B, HQ, T, D}, ks[4] = {B, HKV, T, D};
    cli_write_npy("Q.npy", NPY_F32, 4, qs, q_data);
    cli_write_npy("K.npy", NPY_F32, 4, ks, k_data);
    cli_write_npy("V.npy", NPY_F32, 4, ks, v_data);
    FILE *f = fopen(cli_path_of("T.txt"), "w");
    assert_non_null(f);
    for (int t = 0; t < T; t++)
        fprintf(f, "%s\n", words[t]);
    fclose(f);
    f = fopen(cli_path_of("T63.txt"), "w"); /* one line short */
    assert_non_null(f);
    for (int t = 0; t < T - 1; t++)
        fprintf(f, "%s\n", words[t]);
    fclose(f);
    return 0;
}

/* The CPU reference's per-head weights [HQ, T, T] of the causal example. */
static float *reference_weights(void)
{
    static float out[B * HQ * T * D];
    float *w = malloc(sizeof(float) * HQ * T * T);
    assert_non_null(w);
    int64_t qs[4] = {B, HQ, T, D}, ks[4] = {B, HKV, T, D}, ws[4] = {B, HQ, T, T};
    vkattn_ref_attention_args a = {.q = vkattn_host_tensor_make(q_data, VKATTN_DTYPE_F32, 4, qs),
                                   .k = vkattn_host_tensor_make(k_data, VKATTN_DTYPE_F32, 4, ks),
                                   .v = vkattn_host_tensor_make(v_data, VKATTN_DTYPE_F32, 4, ks),
                                   .out = vkattn_host_tensor_make(out, VKATTN_DTYPE_F32, 4, qs),
                                   .weights = vkattn_host_tensor_make(w, VKATTN_DTYPE_F32, 4, ws),
                                   .causal = true};
    char err[512];
    if (vkattn_ref_attention(&a, err, sizeof err) != VKATTN_SUCCESS)
        fail_msg("reference: %s", err);
    return w;
}

/* The causal mask of the example: key j hidden from query i when j > i. */
static bool causal_hidden[T][T];

/* The layout the tool should have drawn for these weights (the reference's:
 * the causal first row's weight is 1 on the device too, so the scale's
 * text and the picture's size agree). */
static vkattn_viz_geometry expected_geometry(const float *w, bool tokens, const char *title,
                                             bool average)
{
    for (int i = 0; i < T; i++)
        for (int j = 0; j < T; j++)
            causal_hidden[i][j] = j > i;
    const char *labels[T];
    for (int t = 0; t < T; t++)
        labels[t] = words[t];
    vkattn_viz_desc d = {.weights = w,
                         .heads = HQ,
                         .q_len = T,
                         .k_len = T,
                         .hidden = &causal_hidden[0][0],
                         .q_tokens = tokens ? labels : NULL,
                         .title = title,
                         .average = average};
    vkattn_viz_geometry g;
    char err[512];
    if (vkattn_viz_measure(&d, &g, err, sizeof err) != VKATTN_VIZ_SUCCESS)
        fail_msg("measure: %s", err);
    return g;
}

/* A decoded PNG with the geometry it should have. */
typedef struct picture {
    cairo_surface_t *img;
    vkattn_viz_geometry g;
} picture;

static picture open_png(const char *path, vkattn_viz_geometry g)
{
    picture p = {cairo_image_surface_create_from_png(path), g};
    if (cairo_surface_status(p.img) != CAIRO_STATUS_SUCCESS)
        fail_msg("%s: not a PNG cairo can read: %s", path,
                 cairo_status_to_string(cairo_surface_status(p.img)));
    if (cairo_image_surface_get_width(p.img) != (int)g.width ||
        cairo_image_surface_get_height(p.img) != (int)g.height)
        fail_msg("%s: %d x %d pixels, expected %u x %u", path, cairo_image_surface_get_width(p.img),
                 cairo_image_surface_get_height(p.img), g.width, g.height);
    return p;
}

static void cell_rgb(const picture *p, uint32_t t, uint32_t i, uint32_t j, uint8_t rgb[3])
{
    const vkattn_viz_geometry *g = &p->g;
    uint32_t x = g->tile_x0 + (t % g->cols) * g->tile_dx + j * g->cell_px + g->cell_px / 2;
    uint32_t y = g->tile_y0 + (t / g->cols) * g->tile_dy + i * g->cell_px + g->cell_px / 2;
    const unsigned char *data = cairo_image_surface_get_data(p->img);
    uint32_t px =
        *(const uint32_t *)(data + (size_t)y * cairo_image_surface_get_stride(p->img) + 4 * x);
    rgb[0] = (uint8_t)(px >> 16);
    rgb[1] = (uint8_t)(px >> 8);
    rgb[2] = (uint8_t)px;
}

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

/* viridis' green rises with the weight: the brighter of two cells. */
static int green(const picture *p, uint32_t t, uint32_t i, uint32_t j)
{
    uint8_t rgb[3];
    cell_rgb(p, t, i, j, rgb);
    return rgb[1];
}

/* Row i of head t is brightest at key `at` among keys at-3 .. i. */
static void expect_peak(const picture *p, uint32_t t, uint32_t i, uint32_t at)
{
    for (uint32_t j = at >= 3 ? at - 3 : 0; j <= i; j++)
        if (j != at && green(p, t, i, j) >= green(p, t, i, at))
            fail_msg("head %u, query %u: key %u (green %d) is not below key %u (green %d)", t, i, j,
                     green(p, t, i, j), at, green(p, t, i, at));
}

/* Makes the directory of a path (one level), for the example. */
static void make_parent(const char *path)
{
    char dir[1024];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    assert_non_null(slash);
    *slash = '\0';
    assert_true(mkdir(dir, 0755) == 0 || access(dir, W_OK) == 0);
}

static const uint8_t HIGH[3] = {253, 231, 37}, HIDDEN[3] = {200, 200, 200};
static const char title[] = "causal GQA: 12 query heads over 4 KV heads, 64 tokens";

/* THE EXAMPLE: vkattn viz --q --k --v --causal --tokens into
 * VKATTN_VIZ_EXAMPLE, kept after the test. */
static void test_example(void **state)
{
    (void)state;
    const char *out = VKATTN_VIZ_EXAMPLE;
    make_parent(out);
    char args[4096];
    snprintf(args, sizeof args,
             "viz --validate --q %s --k %s --v %s --causal --tokens %s --title \"%s\" --out %s",
             cli_path_of("Q.npy"), cli_path_of("K.npy"), cli_path_of("V.npy"), cli_path_of("T.txt"),
             title, out);
    cli_expect_success(args);
    float *w = reference_weights();
    picture p = open_png(out, expected_geometry(w, true, title, false));
    free(w);
    /* readable at a glance: tiles of at least 160 pixels, a grid of 4 x 3 */
    assert_true(p.g.cell_px * T >= 160);
    assert_int_equal(p.g.cols, 4);
    assert_int_equal(p.g.rows, 3);
    assert_int_equal(p.g.q_block, 1);
    for (uint32_t t = 0; t < HQ; t++) {
        expect_cell(&p, t, 0, 0, HIGH, "query 0 sees only key 0");
        expect_cell(&p, t, 0, 1, HIDDEN, "a causally hidden key");
        expect_cell(&p, t, 40, 63, HIDDEN, "a causally hidden key");
    }
    /* each head's pattern where it was built */
    for (uint32_t i = 10; i < T; i += 13) {
        expect_peak(&p, 0, i, i - 1);
        expect_peak(&p, 1, i, i);
        expect_peak(&p, 4, i, i - 2);
        expect_peak(&p, 8, i, i - 3);
        assert_true(green(&p, 2, i, 0) > green(&p, 2, i, i)); /* the sink */
        assert_true(green(&p, 3, i, 6) > green(&p, 3, i, 5)); /* "." is token 6 */
    }
    cairo_surface_destroy(p.img);
}

/* The same layer's mean over heads as SVG, and batch row and tokens files
 * taken from a weights .npy written by attention --weights-out. */
static void test_from_weights_file(void **state)
{
    (void)state;
    char args[4096];
    snprintf(args, sizeof args,
             "attention --validate --q %s --k %s --v %s --causal --out %s --weights-out %s "
             "--per-head",
             cli_path_of("Q.npy"), cli_path_of("K.npy"), cli_path_of("V.npy"), cli_path_of("O.npy"),
             cli_path_of("W.npy"));
    cli_expect_success(args);
    snprintf(args, sizeof args, "viz --weights %s --causal --tokens %s --title \"%s\" --out %s",
             cli_path_of("W.npy"), cli_path_of("T.txt"), title, cli_path_of("fromfile.png"));
    cli_expect_success(args);
    float *w = reference_weights();
    picture p = open_png(cli_path_of("fromfile.png"), expected_geometry(w, true, title, false));
    expect_cell(&p, 5, 0, 1, HIDDEN, "hidden (--causal with --weights)");
    expect_cell(&p, 5, 0, 0, HIGH, "weight 1");
    cairo_surface_destroy(p.img);
    /* --average: one tile */
    snprintf(args, sizeof args, "viz --weights %s --causal --average --title \"%s\" --out %s",
             cli_path_of("W.npy"), title, cli_path_of("mean.png"));
    cli_expect_success(args);
    p = open_png(cli_path_of("mean.png"), expected_geometry(w, false, title, true));
    assert_int_equal(p.g.tiles, 1);
    expect_cell(&p, 0, 20, 21, HIDDEN, "hidden in the mean");
    cairo_surface_destroy(p.img);
    free(w);
    /* SVG of the averaged [B,Tq,Tk] weights attention writes by default */
    snprintf(args, sizeof args,
             "attention --validate --q %s --k %s --v %s --causal --out %s --weights-out %s",
             cli_path_of("Q.npy"), cli_path_of("K.npy"), cli_path_of("V.npy"), cli_path_of("O.npy"),
             cli_path_of("Wavg.npy"));
    cli_expect_success(args);
    snprintf(args, sizeof args, "viz --weights %s --out %s", cli_path_of("Wavg.npy"),
             cli_path_of("mean.svg"));
    cli_expect_success(args);
    char text[64];
    assert_true(cli_read_text(cli_path_of("mean.svg"), text, sizeof text) > 5);
    assert_true(strncmp(text, "<?xml", 5) == 0 || strncmp(text, "<svg", 4) == 0);
}

/* attention --weights-png: the picture, and --weights-out as it was. */
static void test_attention_weights_png(void **state)
{
    (void)state;
    char args[4096];
    const char *png = cli_path_of("attn.png");
    snprintf(args, sizeof args,
             "attention --validate --q %s --k %s --v %s --causal --out %s --weights-png %s",
             cli_path_of("Q.npy"), cli_path_of("K.npy"), cli_path_of("V.npy"), cli_path_of("O.npy"),
             png);
    cli_expect_success(args);
    float *w = reference_weights();
    picture p = open_png(
        png, expected_geometry(w, false, "vkattn attention: weights of batch row 0", false));
    free(w);
    expect_cell(&p, 11, 0, 1, HIDDEN, "hidden (--causal)");
    expect_cell(&p, 11, 0, 0, HIGH, "weight 1");
    cairo_surface_destroy(p.img);
    /* with --weights-out (averaged, as without the picture) and --check */
    snprintf(args, sizeof args,
             "attention --validate --q %s --k %s --v %s --causal --out %s --weights-out %s "
             "--weights-png %s --check",
             cli_path_of("Q.npy"), cli_path_of("K.npy"), cli_path_of("V.npy"), cli_path_of("O.npy"),
             cli_path_of("Wpng.npy"), cli_path_of("attn.svg"));
    cli_expect_success(args);
    assert_true(cli_exists(cli_path_of("attn.svg")));
    npy_array a = cli_read_npy("Wpng.npy");
    assert_int_equal(a.rank, 3);
    assert_int_equal(a.shape[0], B);
    assert_int_equal(a.shape[1], T);
    assert_int_equal(a.shape[2], T);
    npy_free(&a);
    snprintf(args, sizeof args,
             "attention --validate --q %s --k %s --v %s --causal --out %s --weights-out %s",
             cli_path_of("Q.npy"), cli_path_of("K.npy"), cli_path_of("V.npy"), cli_path_of("O.npy"),
             cli_path_of("Wplain.npy"));
    cli_expect_success(args);
    cli_compare_outputs("Wpng.npy", "Wplain.npy", 1e-6, false, "--weights-out with --weights-png");
}

/* Runs the tool; it must exit `code`, say `needle`, and leave no `file`. */
static void expect_exit(const char *args, int code, const char *needle, const char *file)
{
    unlink(file);
    char err[4096];
    int got = cli_run_with("", args, err, sizeof err);
    if (got != code || !strstr(err, needle))
        fail_msg("vkattn %s: exit %d, expected %d with \"%s\":\n%s", args, got, code, needle, err);
    if (cli_exists(file))
        fail_msg("vkattn %s: failed but wrote %s", args, file);
}

/* Copies of paths in the scratch directory (cli_path_of's buffers are
 * reused, by cli_run_with too). */
typedef struct paths {
    char q[512], k[512], w[512], p[512], o[512];
} paths;

static paths scratch_paths(void)
{
    paths s;
    snprintf(s.q, sizeof s.q, "%s", cli_path_of("Q.npy"));
    snprintf(s.k, sizeof s.k, "%s", cli_path_of("K.npy"));
    snprintf(s.w, sizeof s.w, "%s", cli_path_of("W.npy"));
    snprintf(s.p, sizeof s.p, "%s", cli_path_of("P.png"));
    snprintf(s.o, sizeof s.o, "%s", cli_path_of("O2.npy"));
    return s;
}

static void test_bad_flags(void **state)
{
    (void)state;
    paths s = scratch_paths();
    const char *q = s.q, *k = s.k, *p = s.p, *w = s.w, *o = s.o;
    char args[4096];
    snprintf(args, sizeof args, "viz --q %s --k %s", q, k);
    expect_exit(args, 2, "--out is required", p);
    snprintf(args, sizeof args, "viz --q %s --k %s --out %s.jpg", q, k, p);
    expect_exit(args, 2, "extension \".jpg\"", p);
    snprintf(args, sizeof args, "viz --weights %s --q %s --k %s --out %s", w, q, k, p);
    expect_exit(args, 2, "not both", p);
    snprintf(args, sizeof args, "viz --q %s --out %s", q, p);
    expect_exit(args, 2, "--q needs --k", p);
    snprintf(args, sizeof args, "viz --q %s --k %s --out %s --downsample median", q, k, p);
    expect_exit(args, 2, "--downsample \"median\"", p);
    snprintf(args, sizeof args, "viz --q %s --k %s --out %s --max-cells 0", q, k, p);
    expect_exit(args, 2, "--max-cells \"0\"", p);
    snprintf(args, sizeof args, "viz --q %s --k %s --out %s --batch -1", q, k, p);
    expect_exit(args, 2, "--batch \"-1\"", p);
    snprintf(args, sizeof args, "viz --q %s --k %s --out %s --frobnicate 1", q, k, p);
    expect_exit(args, 2, "unknown option \"--frobnicate\"", p);
    snprintf(args, sizeof args, "viz --weights %s --scale 2 --out %s", w, p);
    expect_exit(args, 2, "--scale", p);
    snprintf(args, sizeof args, "viz --q %s --k %s --causal --causal-top-left --out %s", q, k, p);
    expect_exit(args, 2, "--causal-top-left", p);
    snprintf(args, sizeof args, "viz --q %s --k %s --tokens %s --out %s", q, k, p, p);
    expect_exit(args, 2, "name the same file", p);
    snprintf(args, sizeof args, "attention --q %s --k %s --v %s --out %s --weights-png %s.bmp", q,
             k, k, o, p);
    expect_exit(args, 2, "--weights-png: path", o);
    snprintf(args, sizeof args, "attention --q %s --k %s --v %s --out %s --weights-png %s", q, k, k,
             o, q);
    expect_exit(args, 2, "--weights-png", o);
    snprintf(args, sizeof args,
             "attention --q %s --k %s --v %s --out %s --weights-png %s "
             "--weights-out %s",
             q, k, k, o, p, p);
    expect_exit(args, 2, "name the same file", o);
}

static void test_bad_inputs(void **state)
{
    (void)state;
    paths s = scratch_paths();
    const char *q = s.q, *k = s.k, *p = s.p;
    char args[4096], other[512], missing[512];
    snprintf(other, sizeof other, "%s", cli_path_of("O3.npy"));
    snprintf(missing, sizeof missing, "%s", cli_path_of("missing/W.png"));
    snprintf(args, sizeof args, "viz --q %s --k %s --causal --tokens %s --out %s", q, k,
             cli_path_of("T63.txt"), p);
    expect_exit(args, 1, "63 lines, expected one token per query (64)", p);
    snprintf(args, sizeof args, "viz --q %s --k %s --batch 3 --out %s", q, k, p);
    expect_exit(args, 1, "--batch 3", p);
    int64_t s2[2] = {T, T}, s4[4] = {1, 2, 3, 4}, m[2] = {5, 7};
    float *zeros = calloc(T * T, sizeof *zeros);
    assert_non_null(zeros);
    cli_write_npy("W2.npy", NPY_F32, 2, s2, zeros);
    snprintf(args, sizeof args, "viz --weights %s --out %s", cli_path_of("W2.npy"), p);
    expect_exit(args, 1, "has 2 dimensions", p);
    zeros[7] = NAN;
    cli_write_npy("Wnan.npy", NPY_F32, 4, s4, zeros);
    snprintf(args, sizeof args, "viz --weights %s --out %s", cli_path_of("Wnan.npy"), p);
    expect_exit(args, 1, "query 1, key 3] is nan", p);
    zeros[7] = 0;
    cli_write_npy("Wok.npy", NPY_F32, 4, s4, zeros);
    cli_write_npy("M57.npy", NPY_F32, 2, m, zeros);
    snprintf(args, sizeof args, "viz --weights %s --mask %s --out %s", cli_path_of("Wok.npy"),
             cli_path_of("M57.npy"), p);
    expect_exit(args, 1, "does not broadcast", p);
    free(zeros);
    /* a picture that cannot be written: attention's other outputs go too */
    snprintf(args, sizeof args, "attention --q %s --k %s --v %s --out %s --weights-png %s", q, k, k,
             other, missing);
    expect_exit(args, 1, "missing/W.png", other);
}

static void test_help(void **state)
{
    (void)state;
    char err[512], out[16384];
    assert_int_equal(cli_run_with("", "viz --help", err, sizeof err), 0);
    cli_read_text(cli_path_of("stdout.txt"), out, sizeof out);
    const char *flags[] = {"--weights",   "--q",          "--k",           "--v",
                           "--causal",    "--mask",       "--key-padding", "--out",
                           "--tokens",    "--key-tokens", "--average",     "--downsample",
                           "--max-cells", "--title",      "--batch",       NULL};
    for (int i = 0; flags[i]; i++)
        if (!strstr(out, flags[i]))
            fail_msg("viz --help does not list %s:\n%s", flags[i], out);
    assert_int_equal(cli_run_with("", "attention --help", err, sizeof err), 0);
    cli_read_text(cli_path_of("stdout.txt"), out, sizeof out);
    assert_non_null(strstr(out, "--weights-png"));
    assert_int_equal(cli_run_with("", "--help", err, sizeof err), 0);
    cli_read_text(cli_path_of("stdout.txt"), out, sizeof out);
    assert_non_null(strstr(out, "  viz "));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_example),
        cmocka_unit_test(test_from_weights_file),
        cmocka_unit_test(test_attention_weights_png),
        cmocka_unit_test(test_bad_flags),
        cmocka_unit_test(test_bad_inputs),
        cmocka_unit_test(test_help),
    };
    return cmocka_run_group_tests(tests, group_setup, cli_teardown);
}
