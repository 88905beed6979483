/* Parity with PyTorch: the fixtures in tests/fixtures/ were written by
 * tools/gen_torch_fixtures.py from torch.nn.MultiheadAttention (batch_first),
 * torch's scaled dot-product attention, and decoder layers (Llama 3, Qwen3,
 * GPT-J, Gemma: RoPE, QK-norm, scale, positions) written with Hugging Face's
 * formulas in torch, and attention with score modifiers (Mistral's window,
 * Gemma 2's softcap, gpt-oss's sinks, BLOOM's ALiBi, SDPA's top-left causal,
 * LSE) and packed ragged sequences (their offsets, each sequence alone in
 * torch) written out in float64. The GPU (f32 and f16 storage) and the CPU
 * reference must both reproduce torch's outputs. No torch needed. */
#include "npy/npy.h"
#include "test_util.h"

#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#ifndef VKATTN_FIXTURE_DIR
#error "VKATTN_FIXTURE_DIR must point at tests/fixtures"
#endif

/* torch ran the layers in float64 (stored as float32): the reference
 * (double) must be this close */
#define TOL_REF_VS_TORCH 1e-6
/* attention fixtures are float64 rounded to f32, as the reference's are:
 * elementwise |got - want| <= tol (1 + |want|) */
#define TOL_REF_VS_F64 1e-6

typedef struct fixture {
    char dir[768];
    char kind[64];
    int heads, kv_heads, head_dim, bias, causal, cross, per_head, qk_norm;
    int add_zero_attn; /* torch's add_zero_attn (add_bias_kv: bias_k.npy) */
    int window, top_left;
    int mask_true_blocks; /* a bool mask's True hides (nn.MultiheadAttention) */
    double scale, norm_eps;
    float softcap, alibi_max_bias;
    vkattn_rope_desc rope; /* theta 0: none */
    npy_array a[32];
    const char *names[32];
    int count;
} fixture;

static npy_array *get(fixture *f, const char *name)
{
    for (int i = 0; i < f->count; i++)
        if (strcmp(f->names[i], name) == 0)
            return &f->a[i];
    return NULL;
}

static void load_fixture(fixture *f, const char *dir)
{
    memset(f, 0, sizeof *f);
    snprintf(f->dir, sizeof f->dir, "%s", dir);
    char path[1024], key[64];
    snprintf(path, sizeof path, "%s/case.txt", dir);
    FILE *meta = fopen(path, "r");
    if (!meta)
        fail_msg("cannot open %s", path);
    const struct {
        const char *key;
        int *value;
    } ints[] = {{"heads", &f->heads},
                {"kv_heads", &f->kv_heads},
                {"head_dim", &f->head_dim},
                {"bias", &f->bias},
                {"causal", &f->causal},
                {"cross", &f->cross},
                {"per_head", &f->per_head},
                {"qk_norm", &f->qk_norm},
                {"window", &f->window},
                {"mask_true_blocks", &f->mask_true_blocks},
                {"add_zero_attn", &f->add_zero_attn}};
    vkattn_rope_desc *r = &f->rope;
    const struct {
        const char *key;
        float *value;
    } floats[] = {{"rope_theta", &r->theta},
                  {"rope_factor", &r->factor},
                  {"rope_low_freq_factor", &r->low_freq_factor},
                  {"rope_high_freq_factor", &r->high_freq_factor},
                  {"softcap", &f->softcap},
                  {"alibi_max_bias", &f->alibi_max_bias}};
    char text[64];
    while (fscanf(meta, "%63s %63s", key, text) == 2) {
        if (strcmp(key, "kind") == 0)
            snprintf(f->kind, sizeof f->kind, "%s", text);
        else if (strcmp(key, "scale") == 0)
            f->scale = atof(text);
        else if (strcmp(key, "norm_eps") == 0)
            f->norm_eps = atof(text);
        else if (strcmp(key, "rope_dims") == 0)
            r->dims = (uint32_t)atof(text);
        else if (strcmp(key, "rope_original_max_positions") == 0)
            r->original_max_positions = (uint32_t)atof(text);
        else if (strcmp(key, "causal_align") == 0)
            f->top_left = strcmp(text, "top_left") == 0;
        else if (strcmp(key, "rope_style") == 0)
            r->style = strcmp(text, "gptj") == 0 ? VKATTN_ROPE_GPTJ : VKATTN_ROPE_NEOX;
        else if (strcmp(key, "rope_scaling") == 0)
            r->scaling = strcmp(text, "llama3") == 0   ? VKATTN_ROPE_SCALING_LLAMA3
                         : strcmp(text, "linear") == 0 ? VKATTN_ROPE_SCALING_LINEAR
                                                       : VKATTN_ROPE_SCALING_NONE;
        for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++)
            if (strcmp(key, ints[i].key) == 0)
                *ints[i].value = (int)atof(text);
        for (size_t i = 0; i < sizeof floats / sizeof floats[0]; i++)
            if (strcmp(key, floats[i].key) == 0)
                *floats[i].value = (float)atof(text);
    }
    fclose(meta);
    static const char *const all[] = {"x",
                                      "kv",
                                      "wq",
                                      "wk",
                                      "wv",
                                      "wo",
                                      "bq",
                                      "bk",
                                      "bv",
                                      "bo",
                                      "key_padding",
                                      "mask",
                                      "y",
                                      "weights",
                                      "q",
                                      "k",
                                      "v",
                                      "out",
                                      "positions",
                                      "q_norm",
                                      "k_norm",
                                      "sinks",
                                      "alibi_slopes",
                                      "lse",
                                      "value",
                                      "bias_k",
                                      "bias_v",
                                      "q_offsets",
                                      "k_offsets",
                                      "seq_offsets",
                                      "kv_offsets"};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
        const char *name = all[i];
        snprintf(path, sizeof path, "%s/%s.npy", dir, name);
        FILE *probe = fopen(path, "rb");
        if (!probe)
            continue;
        fclose(probe);
        char err[512];
        assert_true(f->count < 24);
        if (npy_read(path, &f->a[f->count], err, sizeof err) != 0)
            fail_msg("%s", err);
        f->names[f->count++] = name;
    }
}

static void free_fixture(fixture *f)
{
    for (int i = 0; i < f->count; i++)
        npy_free(&f->a[i]);
}

static int64_t numel(const npy_array *a)
{
    int64_t n = 1;
    for (uint32_t i = 0; i < a->rank; i++)
        n *= a->shape[i];
    return n;
}

/* Packed ragged sequences (issue 30): the sequence count and offsets of
 * an int32 offsets array [B + 1], or 0 and NULL without one. */
static uint32_t packed(const npy_array *offsets, const int32_t **out)
{
    *out = offsets ? offsets->data : NULL;
    return offsets ? (uint32_t)(numel(offsets) - 1) : 0;
}

/* A device buffer of an array's f32 values in `dt` (u8 arrays as bytes). */
static vkattn_buffer *upload(vkattn_context *ctx, const npy_array *a, vkattn_dtype dt,
                             vkattn_tensor *t)
{
    int64_t n = numel(a);
    vkattn_buffer *b;
    if (a->dtype != NPY_F32 || dt == VKATTN_DTYPE_F32) {
        b = test_buffer_with(ctx, a->data, a->nbytes);
        dt = a->dtype == NPY_F32   ? VKATTN_DTYPE_F32
             : a->dtype == NPY_I32 ? VKATTN_DTYPE_I32
                                   : VKATTN_DTYPE_U8;
    } else {
        uint16_t *h = malloc((size_t)n * 2);
        for (int64_t i = 0; i < n; i++)
            h[i] = vkattn_f32_to_f16(((const float *)a->data)[i]);
        b = test_buffer_with(ctx, h, (uint64_t)n * 2);
        free(h);
    }
    *t = vkattn_tensor_make(b, 0, dt, a->rank, a->shape);
    return b;
}

/* A mask: float32 (additive), or bool/uint8 as u8. */
static vkattn_host_tensor host_mask(npy_array *a)
{
    vkattn_dtype dt = a && a->dtype != NPY_F32 ? VKATTN_DTYPE_U8 : VKATTN_DTYPE_F32;
    return vkattn_host_tensor_make(a ? a->data : NULL, dt, a ? a->rank : 0, a ? a->shape : NULL);
}

static vkattn_bool_mask bool_mask(const fixture *f)
{
    return f->mask_true_blocks ? VKATTN_BOOL_MASK_TRUE_BLOCKS : VKATTN_BOOL_MASK_TRUE_ATTENDS;
}

static float *download(vkattn_context *ctx, vkattn_buffer *b, int64_t n, vkattn_dtype dt)
{
    float *out = malloc((size_t)n * 4);
    if (dt == VKATTN_DTYPE_F32) {
        TEST_OK(ctx, vkattn_buffer_download(b, 0, out, (uint64_t)n * 4));
    } else {
        uint16_t *h = malloc((size_t)n * 2);
        TEST_OK(ctx, vkattn_buffer_download(b, 0, h, (uint64_t)n * 2));
        for (int64_t i = 0; i < n; i++)
            out[i] = vkattn_f16_to_f32(h[i]);
        free(h);
    }
    return out;
}

/* The desc and weights of an mha fixture, with storage dtype `dt`. */
static void mha_layer(const fixture *f, vkattn_dtype dt, vkattn_mha_desc *desc,
                      vkattn_mha_weights *w)
{
    fixture *mf = (fixture *)f;
    const npy_array *x = get(mf, "x"), *wk = get(mf, "wk"), *wv = get(mf, "wv");
    vkattn_mha_desc d = {.embed_dim = (uint32_t)x->shape[2],
                         .num_heads = (uint32_t)f->heads,
                         .num_kv_heads = (uint32_t)f->kv_heads,
                         .head_dim = (uint32_t)f->head_dim,
                         .kv_dim = (uint32_t)wk->shape[1],
                         .value_dim = (uint32_t)wv->shape[1],
                         .bias = f->bias,
                         .dtype = dt,
                         .scale = (float)f->scale,
                         .rope = f->rope,
                         .qk_norm = f->qk_norm,
                         .norm_eps = (float)f->norm_eps,
                         .add_bias_kv = get(mf, "bias_k") != NULL,
                         .add_zero_attn = f->add_zero_attn};
    *desc = d;
    memset(w, 0, sizeof *w);
    const char *wn[10] = {"wq", "wk", "wv", "wo", "bq", "bk", "bv", "bo", "q_norm", "k_norm"};
    const float **ws[10] = {&w->wq, &w->wk, &w->wv, &w->wo,     &w->bq,
                            &w->bk, &w->bv, &w->bo, &w->q_norm, &w->k_norm};
    for (int i = 0; i < 10; i++)
        *ws[i] = get(mf, wn[i]) ? get(mf, wn[i])->data : NULL;
    w->bias_k = get(mf, "bias_k") ? get(mf, "bias_k")->data : NULL;
    w->bias_v = get(mf, "bias_v") ? get(mf, "bias_v")->data : NULL;
}

/* The CPU reference against torch. */
static void ref_mha(fixture *f)
{
    npy_array *x = get(f, "x"), *kv = get(f, "kv"), *y = get(f, "y"), *wts = get(f, "weights"),
              *pad = get(f, "key_padding"), *mask = get(f, "mask"), *pos = get(f, "positions"),
              *value = get(f, "value");
    vkattn_mha_desc desc;
    vkattn_mha_weights w;
    mha_layer(f, VKATTN_DTYPE_F32, &desc, &w);
    char what[1024];
    float *ref_y = malloc(y->nbytes), *ref_w = wts ? malloc(wts->nbytes) : NULL;
    vkattn_ref_mha_args ra = {.causal = f->causal, .bool_mask = bool_mask(f)};
    ra.sequences = packed(get(f, "seq_offsets"), &ra.q_offsets);
    packed(get(f, "kv_offsets"), &ra.k_offsets);
    ra.x = vkattn_host_tensor_make(x->data, VKATTN_DTYPE_F32, 3, x->shape);
    if (kv)
        ra.kv = vkattn_host_tensor_make(kv->data, VKATTN_DTYPE_F32, 3, kv->shape);
    if (value)
        ra.value = vkattn_host_tensor_make(value->data, VKATTN_DTYPE_F32, 3, value->shape);
    if (pad)
        ra.key_padding = vkattn_host_tensor_make(pad->data, VKATTN_DTYPE_U8, 2, pad->shape);
    if (mask)
        ra.mask = host_mask(mask);
    if (pos)
        ra.positions = vkattn_host_tensor_make(pos->data, VKATTN_DTYPE_I32, 2, pos->shape);
    ra.y = vkattn_host_tensor_make(ref_y, VKATTN_DTYPE_F32, 3, y->shape);
    if (wts) /* fixtures of torch's appended rows hold none */
        ra.weights = vkattn_host_tensor_make(ref_w, VKATTN_DTYPE_F32, wts->rank, wts->shape);
    char err[512];
    if (vkattn_ref_mha(&desc, &w, &ra, err, sizeof err) != VKATTN_SUCCESS)
        fail_msg("%s: reference: %s", f->dir, err);
    snprintf(what, sizeof what, "%s: CPU reference y vs torch", f->dir);
    test_assert_close(ref_y, y->data, (size_t)numel(y), TOL_REF_VS_TORCH, what);
    snprintf(what, sizeof what, "%s: CPU reference weights vs torch", f->dir);
    if (wts)
        test_assert_close(ref_w, wts->data, (size_t)numel(wts), TOL_REF_VS_TORCH, what);
    free(ref_y), free(ref_w);
}

/* The device against torch. */
static void run_mha(vkattn_context *ctx, fixture *f, vkattn_dtype dt)
{
    npy_array *x = get(f, "x"), *kv = get(f, "kv"), *y = get(f, "y"), *wts = get(f, "weights"),
              *pad = get(f, "key_padding"), *mask = get(f, "mask"), *pos = get(f, "positions"),
              *value = get(f, "value");
    vkattn_mha_desc desc;
    vkattn_mha_weights w;
    mha_layer(f, dt, &desc, &w);
    char what[1024];

    /* the device against torch */
    vkattn_mha *layer = test_mha_create(ctx, &desc, &w);
    vkattn_mha_forward_args fa = {.causal = f->causal, .bool_mask = bool_mask(f)};
    fa.sequences = packed(get(f, "seq_offsets"), &fa.q_offsets);
    packed(get(f, "kv_offsets"), &fa.k_offsets);
    vkattn_buffer *bx = upload(ctx, x, dt, &fa.x), *bkv = kv ? upload(ctx, kv, dt, &fa.kv) : NULL;
    vkattn_buffer *bpad = pad ? upload(ctx, pad, dt, &fa.key_padding) : NULL;
    vkattn_buffer *bmask = mask ? upload(ctx, mask, VKATTN_DTYPE_F32, &fa.mask) : NULL;
    vkattn_buffer *bpos = pos ? upload(ctx, pos, dt, &fa.positions) : NULL;
    vkattn_buffer *bvalue = value ? upload(ctx, value, dt, &fa.value) : NULL;
    size_t es = vkattn_dtype_size(dt);
    vkattn_buffer *by = test_buffer_with(ctx, NULL, (uint64_t)numel(y) * es);
    vkattn_buffer *bw = wts ? test_buffer_with(ctx, NULL, wts->nbytes) : NULL;
    fa.y = vkattn_tensor_make(by, 0, dt, 3, y->shape);
    if (wts)
        fa.weights = vkattn_tensor_make(bw, 0, VKATTN_DTYPE_F32, wts->rank, wts->shape);
    TEST_OK(ctx, vkattn_mha_forward(layer, &fa));
    float *gy = download(ctx, by, numel(y), dt),
          *gw = wts ? download(ctx, bw, numel(wts), VKATTN_DTYPE_F32) : NULL;
    double tol = dt == VKATTN_DTYPE_F16 ? TEST_TOL_F16 : TEST_TOL_F32;
    snprintf(what, sizeof what, "%s (%s): GPU y vs torch", f->dir, vkattn_dtype_name(dt));
    test_assert_close(gy, y->data, (size_t)numel(y), tol, what);
    snprintf(what, sizeof what, "%s (%s): GPU weights vs torch", f->dir, vkattn_dtype_name(dt));
    if (wts)
        test_assert_close(gw, wts->data, (size_t)numel(wts), tol, what);
    vkattn_buffer *bufs[] = {bx, bkv, bpad, bmask, bpos, bvalue, by, bw};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        vkattn_buffer_destroy(bufs[i]);
    vkattn_mha_destroy(layer);
    free(gy), free(gw);
}

/* Whether an attention fixture uses a score modifier or the LSE. */
static bool has_mods(fixture *f)
{
    return f->causal || f->top_left || f->window || f->softcap != 0.0f ||
           f->alibi_max_bias != 0.0f || get(f, "sinks") || get(f, "alibi_slopes") || get(f, "lse");
}

/* |got - want| <= tol (1 + |want|) everywhere; equal infinities (an LSE
 * of -inf) match. */
static void assert_elementwise(const float *got, const float *want, size_t n, double tol,
                               const char *what)
{
    for (size_t i = 0; i < n; i++) {
        double g = got[i], w = want[i];
        if (g == w)
            continue;
        if (!isfinite(g) || !isfinite(w) || fabs(g - w) > tol * (1.0 + fabs(w)))
            fail_msg("%s[%zu]: got %.9g, want %.9g (tolerance %g (1 + |want|))", what, i, g, w,
                     tol);
    }
}

static vkattn_host_tensor host_f32(npy_array *a)
{
    return vkattn_host_tensor_make(a ? a->data : NULL, VKATTN_DTYPE_F32, a ? a->rank : 0,
                                   a ? a->shape : NULL);
}

/* The CPU reference against torch (float64): out and LSE. */
static void ref_attention(fixture *f)
{
    npy_array *out = get(f, "out"), *lse = get(f, "lse");
    vkattn_ref_attention_args a = {.scale = (float)f->scale,
                                   .causal = f->causal,
                                   .causal_align = f->top_left ? VKATTN_CAUSAL_TOP_LEFT
                                                               : VKATTN_CAUSAL_BOTTOM_RIGHT,
                                   .window = (uint32_t)f->window,
                                   .softcap = f->softcap,
                                   .alibi_max_bias = f->alibi_max_bias};
    a.q = host_f32(get(f, "q")), a.k = host_f32(get(f, "k")), a.v = host_f32(get(f, "v"));
    a.sequences = packed(get(f, "q_offsets"), &a.q_offsets);
    packed(get(f, "k_offsets"), &a.k_offsets);
    a.mask = host_mask(get(f, "mask"));
    a.bool_mask = bool_mask(f);
    a.sinks = host_f32(get(f, "sinks"));
    a.alibi_slopes = host_f32(get(f, "alibi_slopes"));
    float *got = malloc(out->nbytes), *got_lse = lse ? malloc(lse->nbytes) : NULL;
    a.out = vkattn_host_tensor_make(got, VKATTN_DTYPE_F32, 4, out->shape);
    if (lse)
        a.lse = vkattn_host_tensor_make(got_lse, VKATTN_DTYPE_F32, 3, lse->shape);
    char err[512], what[1024];
    if (vkattn_ref_attention(&a, err, sizeof err) != VKATTN_SUCCESS)
        fail_msg("%s: reference: %s", f->dir, err);
    snprintf(what, sizeof what, "%s: CPU reference out vs torch", f->dir);
    assert_elementwise(got, out->data, (size_t)numel(out), TOL_REF_VS_F64, what);
    if (lse) {
        snprintf(what, sizeof what, "%s: CPU reference lse vs torch", f->dir);
        assert_elementwise(got_lse, lse->data, (size_t)numel(lse), TOL_REF_VS_F64, what);
    }
    free(got), free(got_lse);
}

/* The device against torch: out (max_rel per dtype) and LSE (elementwise,
 * the same tolerance). */
static void run_attention(vkattn_context *ctx, fixture *f, vkattn_dtype dt)
{
    npy_array *q = get(f, "q"), *k = get(f, "k"), *v = get(f, "v"), *out = get(f, "out"),
              *mask = get(f, "mask"), *sinks = get(f, "sinks"), *slopes = get(f, "alibi_slopes"),
              *lse = get(f, "lse");
    vkattn_attention_args a = {.scale = (float)f->scale,
                               .causal = f->causal,
                               .causal_align = f->top_left ? VKATTN_CAUSAL_TOP_LEFT
                                                           : VKATTN_CAUSAL_BOTTOM_RIGHT,
                               .window = (uint32_t)f->window,
                               .softcap = f->softcap,
                               .alibi_max_bias = f->alibi_max_bias,
                               .bool_mask = bool_mask(f)};
    a.sequences = packed(get(f, "q_offsets"), &a.q_offsets);
    packed(get(f, "k_offsets"), &a.k_offsets);
    vkattn_buffer *bq = upload(ctx, q, dt, &a.q), *bk = upload(ctx, k, dt, &a.k),
                  *bv = upload(ctx, v, dt, &a.v);
    vkattn_buffer *bm = mask ? upload(ctx, mask, VKATTN_DTYPE_F32, &a.mask) : NULL;
    vkattn_buffer *bs = sinks ? upload(ctx, sinks, VKATTN_DTYPE_F32, &a.sinks) : NULL;
    vkattn_buffer *ba = slopes ? upload(ctx, slopes, VKATTN_DTYPE_F32, &a.alibi_slopes) : NULL;
    vkattn_buffer *bl = lse ? test_buffer_with(ctx, NULL, lse->nbytes) : NULL;
    if (lse)
        a.lse = vkattn_tensor_make(bl, 0, VKATTN_DTYPE_F32, 3, lse->shape);
    vkattn_buffer *bo = test_buffer_with(ctx, NULL, (uint64_t)numel(out) * vkattn_dtype_size(dt));
    a.out = vkattn_tensor_make(bo, 0, dt, 4, out->shape);
    TEST_OK(ctx, vkattn_attention(ctx, &a));
    float *got = download(ctx, bo, numel(out), dt);
    const double tol = dt == VKATTN_DTYPE_F16 ? TEST_TOL_F16 : TEST_TOL_F32;
    char what[1024];
    snprintf(what, sizeof what, "%s (%s): GPU out vs torch", f->dir, vkattn_dtype_name(dt));
    test_assert_close(got, out->data, (size_t)numel(out), tol, what);
    if (lse) {
        float *got_lse = download(ctx, bl, numel(lse), VKATTN_DTYPE_F32);
        snprintf(what, sizeof what, "%s (%s): GPU lse vs torch", f->dir, vkattn_dtype_name(dt));
        assert_elementwise(got_lse, lse->data, (size_t)numel(lse), tol, what);
        free(got_lse);
    }
    vkattn_buffer *bufs[] = {bq, bk, bv, bm, bs, ba, bl, bo};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        vkattn_buffer_destroy(bufs[i]);
    free(got);
}

/* Which fixtures a pass runs. */
typedef enum fixture_set { ALL, PLAIN, MODS } fixture_set;

/* Calls `fn` on every fixture folder of `set`; returns how many ran. */
static int for_each_fixture(void (*fn)(vkattn_context *, fixture *), vkattn_context *ctx,
                            fixture_set set)
{
    DIR *d = opendir(VKATTN_FIXTURE_DIR);
    assert_non_null(d);
    int cases = 0;
    for (struct dirent *e; (e = readdir(d));) {
        if (e->d_name[0] == '.')
            continue;
        char dir[768];
        snprintf(dir, sizeof dir, "%s/%s", VKATTN_FIXTURE_DIR, e->d_name);
        fixture f;
        load_fixture(&f, dir);
        if (strcmp(f.kind, "mha") != 0 && strcmp(f.kind, "attention") != 0)
            fail_msg("%s: unknown kind \"%s\"", dir, f.kind);
        bool mods = strcmp(f.kind, "attention") == 0 && has_mods(&f);
        if (set == ALL || (set == MODS) == mods) {
            fn(ctx, &f);
            cases++;
        }
        free_fixture(&f);
    }
    closedir(d);
    return cases;
}

static void reference_case(vkattn_context *ctx, fixture *f)
{
    (void)ctx;
    if (strcmp(f->kind, "mha") == 0)
        ref_mha(f);
    else
        ref_attention(f);
}

static void gpu_case(vkattn_context *ctx, fixture *f)
{
    for (int t = 0; t < 2; t++) {
        vkattn_dtype dt = t ? VKATTN_DTYPE_F16 : VKATTN_DTYPE_F32;
        if (strcmp(f->kind, "mha") == 0)
            run_mha(ctx, f, dt);
        else
            run_attention(ctx, f, dt);
    }
}

/* The CPU reference first, on every fixture, so a GPU failure does not
 * hide a reference one. */
static void test_reference_fixtures(void **state)
{
    test_gpu *g = *state;
    /* a lost fixture folder must not pass silently */
    assert_true(for_each_fixture(reference_case, g->ctx, ALL) >= 22);
}

static void test_gpu_fixtures(void **state)
{
    test_gpu *g = *state;
    assert_true(for_each_fixture(gpu_case, g->ctx, PLAIN) >= 16);
}

/* Attention with score modifiers and LSE on the device: its own test, so
 * the plain fixtures' result stands apart from it. */
static void test_gpu_modifier_fixtures(void **state)
{
    test_gpu *g = *state;
    assert_true(for_each_fixture(gpu_case, g->ctx, MODS) >= 6);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reference_fixtures),
        cmocka_unit_test(test_gpu_fixtures),
        cmocka_unit_test(test_gpu_modifier_fixtures),
    };
    return cmocka_run_group_tests(tests, test_gpu_setup, test_gpu_teardown);
}
