#include "cli_io.h"
#include "cli.h"

#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int64_t cli_numel(const npy_array *a)
{
    int64_t n = 1;
    for (uint32_t i = 0; i < a->rank; i++)
        n *= a->shape[i];
    return n;
}

void cli_shape_text(const npy_array *a, char *buf, size_t size)
{
    int n = snprintf(buf, size, "(");
    for (uint32_t i = 0; i < a->rank && n > 0 && (size_t)n < size; i++)
        n += snprintf(buf + n, size - n, i ? ", %lld" : "%lld", (long long)a->shape[i]);
    if (n > 0 && (size_t)n < size)
        snprintf(buf + n, size - n, ")");
}

/* What each loader takes, for a file of another dtype. */
#define F32_TAKES "inputs are float32 or float16 (or uint16 bf16 bits with --input-bf16)"
#define MASK_TAKES                                                                     \
    "a mask is float32 or float16 (additive, -inf hides) or bool/uint8 (boolean: see " \
    "--mask-true-blocks)"
#define PAD_TAKES "a key-padding mask is uint8 or bool (1 = token, 0 = padding)"

int cli_read_npy(cli_input *in, const char *accepted)
{
    char err[512];
    int r = npy_read(in->path, &in->array, err, sizeof err);
    if (r == NPY_ERROR_DTYPE) { /* what this input takes, not what .npy files can hold */
        char *list = strstr(err, " (expected");
        if (list)
            *list = '\0';
        cli_error("%s: %s; %s", in->flag, err, accepted);
    } else if (r != 0) {
        cli_error("%s: %s", in->flag, err);
    }
    return r != 0 ? -1 : 0;
}

static int load(cli_input *in, const char *accepted)
{
    if (cli_read_npy(in, accepted) != 0)
        return -1;
    for (uint32_t i = 0; i < in->array.rank; i++)
        if (in->array.shape[i] == 0) {
            char s[128];
            cli_shape_text(&in->array, s, sizeof s);
            cli_error("%s %s: shape %s has a zero-sized dimension %u", in->flag, in->path, s, i);
            return -1;
        }
    return 0;
}

int cli_widen_f16(cli_input *in)
{
    npy_array *a = &in->array;
    size_t n = a->nbytes / 2;
    float *f = malloc(n ? n * sizeof *f : 1);
    if (!f) {
        cli_error("%s %s: out of memory", in->flag, in->path);
        return -1;
    }
    const uint16_t *h = a->data;
    bool bf16 = a->dtype == NPY_U16; /* --input-bf16's bits */
    for (size_t i = 0; i < n; i++)
        f[i] = bf16 ? vkattn_bf16_to_f32(h[i]) : vkattn_f16_to_f32(h[i]);
    free(a->data);
    a->data = f;
    a->nbytes = n * sizeof *f;
    a->dtype = NPY_F32;
    return 0;
}

int cli_load_f32(cli_input *in, uint32_t rank)
{
    if (load(in, F32_TAKES) != 0)
        return -1;
    if (in->bf16_bits && !in->keep_f32 && in->array.dtype != NPY_U16) {
        cli_error("%s %s: dtype is %s; with --input-bf16 the tensors are uint16 arrays of bf16 "
                  "bits (torch's t.view(torch.int16).numpy().view('<u2'))",
                  in->flag, in->path, npy_dtype_name(in->array.dtype));
        return -1;
    }
    bool bits = in->array.dtype == NPY_U16 && in->bf16_bits;
    if ((in->array.dtype == NPY_F16 || bits) && cli_widen_f16(in) != 0)
        return -1;
    if (in->array.dtype != NPY_F32) {
        cli_error("%s %s: dtype is %s; inputs must be float32 or float16%s (--dtype sets the "
                  "device's storage)",
                  in->flag, in->path, npy_dtype_name(in->array.dtype),
                  in->array.dtype == NPY_U16 ? ", or uint16 bf16 bits with --input-bf16" : "");
        return -1;
    }
    if ((rank && in->array.rank != rank) || in->array.rank == 0 || in->array.rank > 4) {
        char s[128];
        cli_shape_text(&in->array, s, sizeof s);
        if (rank)
            cli_error("%s %s: shape %s has %u dimensions, expected %u", in->flag, in->path, s,
                      in->array.rank, rank);
        else
            cli_error("%s %s: shape %s has %u dimensions, expected 1 to 4", in->flag, in->path, s,
                      in->array.rank);
        return -1;
    }
    return 0;
}

void cli_element_text(uint32_t rank, const int64_t *shape, int64_t flat, char *buf, size_t size)
{
    int64_t index[8] = {0};
    for (uint32_t d = rank; d-- > 0;) {
        index[d] = shape[d] ? flat % shape[d] : 0;
        flat = shape[d] ? flat / shape[d] : 0;
    }
    int n = snprintf(buf, size, "[");
    for (uint32_t d = 0; d < rank && n > 0 && (size_t)n < size; d++)
        n += snprintf(buf + n, size - n, d ? ", %lld" : "%lld", (long long)index[d]);
    if (n > 0 && (size_t)n < size)
        snprintf(buf + n, size - n, "]");
}

int64_t cli_first_nonfinite(const float *data, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        if (!isfinite(data[i]))
            return i;
    return -1;
}

int cli_check_finite(const cli_input *in, const char *rule)
{
    const npy_array *a = &in->array;
    int64_t i = a->dtype == NPY_F32 ? cli_first_nonfinite(a->data, cli_numel(a)) : -1;
    if (i < 0)
        return 0;
    char at[160];
    cli_element_text(a->rank, a->shape, i, at, sizeof at);
    float v = ((const float *)a->data)[i];
    cli_error("%s %s: element %s is %s; %s", in->flag, in->path, at,
              isnan(v) ? "NaN"
              : v > 0  ? "inf"
                       : "-inf",
              rule);
    return -1;
}

int cli_load_mask(cli_input *in)
{
    if (load(in, MASK_TAKES) != 0)
        return -1;
    if (in->array.dtype == NPY_F16 && cli_widen_f16(in) != 0)
        return -1;
    npy_dtype dt = in->array.dtype;
    if (dt != NPY_F32 && dt != NPY_U8 && dt != NPY_BOOL) {
        cli_error("%s %s: dtype is %s; a mask is float32 or float16 (additive, -inf hides) or "
                  "bool/uint8 (boolean: see --mask-true-blocks)",
                  in->flag, in->path, npy_dtype_name(dt));
        return -1;
    }
    if (in->array.rank < 2 || in->array.rank > 4) {
        cli_error("%s %s: has %u dimensions, expected 2 to 4 ([Tq,Tk], [B*H,Tq,Tk] or "
                  "[B,H,Tq,Tk], any of them 1 to broadcast)",
                  in->flag, in->path, in->array.rank);
        return -1;
    }
    return 0;
}

int cli_load_mask_u8(cli_input *in)
{
    if (load(in, PAD_TAKES) != 0)
        return -1;
    if (in->array.dtype != NPY_U8 && in->array.dtype != NPY_BOOL) {
        cli_error(
            "%s %s: dtype is %s; a key-padding mask is uint8 or bool (1 = token, 0 = padding)",
            in->flag, in->path, npy_dtype_name(in->array.dtype));
        return -1;
    }
    if (in->array.rank != 2) {
        cli_error("%s %s: has %u dimensions, expected 2 ([batch, kv_len])", in->flag, in->path,
                  in->array.rank);
        return -1;
    }
    return 0;
}

int cli_expect_dim(const cli_input *in, uint32_t dim, int64_t want, const char *what)
{
    if (want < 0 || in->array.shape[dim] == want)
        return 0;
    char s[128];
    cli_shape_text(&in->array, s, sizeof s);
    cli_error("%s %s: shape %s: dimension %u is %lld but %s is %lld", in->flag, in->path, s, dim,
              (long long)in->array.shape[dim], what, (long long)want);
    return -1;
}

/* The f16 maximum: larger values round to inf on the device. */
#define F16_MAX 65504.0f

/* Before storing f32 data as f16: a value f16 cannot hold would turn the
 * result into inf/NaN with exit 0, so it is refused, naming the input. */
static int check_f16_range(const cli_input *in)
{
    const float *f = in->array.data;
    int64_t n = cli_numel(&in->array);
    double largest = 0;
    for (int64_t i = 0; i < n; i++) {
        if (!isfinite(f[i])) {
            cli_error("%s %s: element %lld is %s; --dtype f16 needs finite inputs", in->flag,
                      in->path, (long long)i, isnan(f[i]) ? "NaN" : "infinite");
            return -1;
        }
        if (fabs(f[i]) > largest)
            largest = fabs(f[i]);
    }
    if (largest > F16_MAX) {
        cli_error("%s %s: largest |value| %g is above the f16 maximum %g: --dtype f16 would "
                  "store it as inf (use --dtype f32 or scale the input)",
                  in->flag, in->path, largest, (double)F16_MAX);
        return -1;
    }
    return 0;
}

int cli_round_to_dtype(cli_input *in, vkattn_dtype dtype)
{
    npy_array *a = &in->array;
    if (dtype == VKATTN_DTYPE_F32 || a->dtype != NPY_F32 || !a->data || in->keep_f32)
        return 0;
    float *f = a->data;
    if (dtype == VKATTN_DTYPE_BF16) { /* the f32 range: nothing overflows but its edge */
        for (int64_t i = 0; i < cli_numel(a); i++)
            f[i] = vkattn_bf16_to_f32(vkattn_f32_to_bf16(f[i]));
        return 0;
    }
    if (check_f16_range(in) != 0)
        return -1;
    for (int64_t i = 0; i < cli_numel(a); i++)
        f[i] = vkattn_f16_to_f32(vkattn_f32_to_f16(f[i]));
    return 0;
}

vkattn_buffer *cli_upload(vkattn_context *ctx, const npy_array *a, vkattn_dtype dtype)
{
    int64_t n = cli_numel(a);
    size_t es = vkattn_dtype_size(cli_array_dtype(a, dtype));
    void *host = a->data, *converted = NULL;
    if (a->dtype == NPY_F32 && (dtype == VKATTN_DTYPE_F16 || dtype == VKATTN_DTYPE_BF16)) {
        uint16_t *h = converted = malloc((size_t)n * 2);
        if (!h) {
            cli_error("out of memory");
            return NULL;
        }
        const float *f = a->data;
        for (int64_t i = 0; i < n; i++)
            h[i] = dtype == VKATTN_DTYPE_F16 ? vkattn_f32_to_f16(f[i]) : vkattn_f32_to_bf16(f[i]);
        host = h;
    }
    vkattn_buffer *b = NULL;
    vkattn_buffer_desc d = {.size = (uint64_t)n * es};
    vkattn_result r = vkattn_buffer_create(ctx, &d, &b);
    if (r == VKATTN_SUCCESS)
        r = vkattn_buffer_upload(b, 0, host, d.size);
    free(converted);
    if (r != VKATTN_SUCCESS) {
        cli_error("%s", vkattn_context_last_error(ctx));
        vkattn_buffer_destroy(b);
        return NULL;
    }
    return b;
}

vkattn_dtype cli_array_dtype(const npy_array *a, vkattn_dtype f32_as)
{
    return a->dtype == NPY_F32 ? f32_as : a->dtype == NPY_I32 ? VKATTN_DTYPE_I32 : VKATTN_DTYPE_U8;
}

vkattn_tensor cli_tensor(vkattn_buffer *b, const npy_array *a, vkattn_dtype dtype)
{
    return vkattn_tensor_make(b, 0, cli_array_dtype(a, dtype), a->rank, a->shape);
}

float *cli_download_f32(vkattn_context *ctx, vkattn_buffer *b, int64_t count, vkattn_dtype dtype)
{
    size_t es = vkattn_dtype_size(dtype);
    void *raw = malloc((size_t)count * es);
    float *out = dtype == VKATTN_DTYPE_F32 ? raw : malloc((size_t)count * 4);
    if (!raw || !out || vkattn_buffer_download(b, 0, raw, (uint64_t)count * es) != VKATTN_SUCCESS) {
        cli_error("reading the result back failed: %s", vkattn_context_last_error(ctx));
        if (out != raw)
            free(out);
        free(raw);
        return NULL;
    }
    if (dtype == VKATTN_DTYPE_F16 || dtype == VKATTN_DTYPE_BF16) {
        const uint16_t *h = raw;
        for (int64_t i = 0; i < count; i++)
            out[i] = dtype == VKATTN_DTYPE_F16 ? vkattn_f16_to_f32(h[i]) : vkattn_bf16_to_f32(h[i]);
        free(raw);
    }
    return out;
}

int cli_write_f32(const char *path, uint32_t rank, const int64_t *shape, const float *data)
{
    char err[512];
    if (npy_write(path, NPY_F32, rank, shape, data, err, sizeof err) != 0) {
        cli_error("%s", err);
        return -1;
    }
    return 0;
}

double cli_tolerance(vkattn_dtype dtype) { return dtype == VKATTN_DTYPE_F32 ? 2e-4 : 1.5e-2; }

vkattn_dtype cli_dtype_named(const char *name, vkattn_dtype fallback)
{
    static const struct {
        const char *name;
        vkattn_dtype dtype;
    } names[] = {
        {"f32", VKATTN_DTYPE_F32},   {"f16", VKATTN_DTYPE_F16},   {"bf16", VKATTN_DTYPE_BF16},
        {"q8_0", VKATTN_DTYPE_Q8_0}, {"q4_0", VKATTN_DTYPE_Q4_0}, {"q4_1", VKATTN_DTYPE_Q4_1},
        {"q5_0", VKATTN_DTYPE_Q5_0}, {"q5_1", VKATTN_DTYPE_Q5_1}, {"iq4_nl", VKATTN_DTYPE_IQ4_NL}};
    for (size_t i = 0; name && i < sizeof names / sizeof names[0]; i++)
        if (strcmp(name, names[i].name) == 0)
            return names[i].dtype;
    return fallback;
}

int cli_parse_dtype(const char *text, vkattn_dtype *dtype)
{
    if (strcmp(text, "f32") == 0)
        *dtype = VKATTN_DTYPE_F32;
    else if (strcmp(text, "f16") == 0)
        *dtype = VKATTN_DTYPE_F16;
    else if (strcmp(text, "bf16") == 0)
        *dtype = VKATTN_DTYPE_BF16;
    else {
        cli_error("--dtype \"%s\": expected f32, f16 or bf16", text);
        return -1;
    }
    return 0;
}

int cli_parse_float(const char *flag, const char *text, float *out)
{
    char *end;
    errno = 0;
    double v = strtod(text, &end);
    if (!*text || *end || !isfinite(v)) {
        cli_error("%s \"%s\": expected a finite number", flag, text);
        return -1;
    }
    /* the float the library gets, not the double: 1e39 is inf as a float,
     * and 1e-50 would silently become 0 (for --scale: the default) */
    float f = (float)v;
    if (!isfinite(f) || (errno == ERANGE && fabs(v) > 1)) {
        cli_error("%s \"%s\": out of float range (largest %g)", flag, text, (double)FLT_MAX);
        return -1;
    }
    if ((v != 0 || errno == ERANGE) && !isnormal(f)) {
        cli_error("%s \"%s\": too close to 0 for a float (smallest normal %g)", flag, text,
                  (double)FLT_MIN);
        return -1;
    }
    *out = f;
    return 0;
}

int cli_parse_positive(const char *flag, const char *text, float *out)
{
    if (cli_parse_float(flag, text, out) != 0)
        return -1;
    if (*out > 0)
        return 0;
    cli_error("%s \"%s\": expected a number > 0", flag, text);
    return -1;
}

int cli_parse_uint(const char *flag, const char *text, uint32_t *out)
{
    char *end;
    errno = 0;
    unsigned long v = strtoul(text, &end, 10);
    if (!*text || *end || errno || v == 0 || v > UINT32_MAX || text[0] == '-') {
        cli_error("%s \"%s\": expected a positive integer", flag, text);
        return -1;
    }
    *out = (uint32_t)v;
    return 0;
}

double cli_max_rel_error(const float *got, const float *want, int64_t n, bool *nonfinite)
{
    double worst = 0;
    *nonfinite = false;
    for (int64_t i = 0; i < n; i++) {
        if (!isfinite(got[i])) {
            *nonfinite = true;
            continue;
        }
        /* each element against its own magnitude: a bad small element next
         * to large ones is not hidden */
        double e = fabs((double)got[i] - want[i]) / (1.0 + fabs((double)want[i]));
        if (e > worst)
            worst = e;
    }
    return worst;
}

int cli_check_report(const float *out, const float *ref, int64_t n, const float *weights,
                     const float *ref_weights, int64_t weights_n, vkattn_dtype dtype)
{
    bool bad_o, bad_w = false;
    double e = cli_max_rel_error(out, ref, n, &bad_o), ew = 0;
    if (weights)
        ew = cli_max_rel_error(weights, ref_weights, weights_n, &bad_w);
    double tol = cli_tolerance(dtype);
    printf("check: max elementwise error |got-exp|/(1+|exp|) %.3g%s (tolerance %.3g)", e,
           bad_o ? " and non-finite values" : "", tol);
    if (weights)
        printf(", weights %.3g%s", ew, bad_w ? " and non-finite values" : "");
    printf("\n");
    if (bad_o || bad_w || e > tol || ew > tol) {
        cli_error("check failed: the device's result differs from the CPU reference");
        return 1;
    }
    return 0;
}

int cli_write_outputs(const cli_output_file *files, int n)
{
    for (int k = 0; k < n; k++)
        if (files[k].data &&
            cli_write_f32(files[k].path, files[k].rank, files[k].shape, files[k].data) != 0)
            return 1;
    return 0;
}

void cli_input_swap_dims(cli_input *in, int i, int j)
{
    cli_swap_dims(in->array.shape, i, j);
    in->swapped[0] = (int8_t)i;
    in->swapped[1] = (int8_t)j;
}

void cli_swap_dims(int64_t *shape, int i, int j)
{
    int64_t t = shape[i];
    shape[i] = shape[j];
    shape[j] = t;
}

void cli_swapped_strides(const int64_t *shape, uint32_t rank, int i, int j, int64_t *strides)
{
    int64_t stored[8];
    memcpy(stored, shape, rank * sizeof *stored);
    cli_swap_dims(stored, i, j);
    int64_t step = 1;
    for (uint32_t d = rank; d-- > 0;) {
        strides[d] = step;
        step *= stored[d];
    }
    cli_swap_dims(strides, i, j);
}
