/* Layer weights from a .safetensors file, found by their usual names. */
#include "cli_weights.h"
#include "cli.h"
#include "safetensors/safetensors.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int cli_parse_weight_names(const char *text, cli_weight_names *out)
{
    if (strcmp(text, "torch") == 0)
        *out = CLI_NAMES_TORCH;
    else if (strcmp(text, "hf") == 0)
        *out = CLI_NAMES_HF;
    else {
        cli_error("--names \"%s\": expected torch (nn.MultiheadAttention's in_proj_weight, "
                  "out_proj.weight, ...) or hf (q_proj.weight, k_proj.weight, ...)",
                  text);
        return -1;
    }
    return 0;
}

/* What one file is searched with. */
typedef struct weight_search {
    const char *file, *prefix;
    const st_file *st;
} weight_search;

/* The tensor <prefix><name>, or NULL. */
static const st_tensor *find(const weight_search *s, const char *name)
{
    char full[1024];
    if (snprintf(full, sizeof full, "%s%s", s->prefix, name) >= (int)sizeof full)
        return NULL;
    return st_find(s->st, full);
}

/* Rows [row0, row0 + rows) of a rank-`rank` tensor (rank 1: elements) as
 * the f32 array of input `in`, labelled with the tensor's name. */
static int take(const weight_search *s, const st_tensor *t, uint32_t rank, int64_t row0,
                int64_t rows, cli_input *in, char **label)
{
    if (t->rank != rank) {
        cli_error("--weights %s: tensor \"%s\" has %u dimensions; a %s has %u", s->file, t->name,
                  t->rank, rank == 2 ? "weight" : "bias", rank);
        return -1;
    }
    if (t->dtype != ST_F32 && t->dtype != ST_F16 && t->dtype != ST_BF16) {
        cli_error("--weights %s: tensor \"%s\" is %s; weights and biases must be F32, F16 or BF16",
                  s->file, t->name, st_dtype_name(t->dtype));
        return -1;
    }
    int64_t cols = rank == 2 ? t->shape[1] : 1;
    if (rows == 0 || cols == 0) {
        cli_error("--weights %s: tensor \"%s\" is empty", s->file, t->name);
        return -1;
    }
    size_t n = (size_t)(rows * cols), es = st_dtype_size(t->dtype);
    float *data = malloc(n * sizeof *data);
    size_t label_size = strlen(s->file) + strlen(t->name) + 2;
    *label = malloc(label_size);
    if (!data || !*label) {
        free(data);
        cli_error("--weights %s: out of memory for tensor \"%s\"", s->file, t->name);
        return -1;
    }
    snprintf(*label, label_size, "%s:%s", s->file, t->name);
    st_tensor part = *t;
    part.data = (const unsigned char *)t->data + (size_t)(row0 * cols) * es;
    st_to_f32(&part, data, n);
    int64_t bad = cli_first_nonfinite(data, (int64_t)n);
    if (bad >= 0) { /* named by its place in the whole tensor (a packed one's thirds) */
        char at[160];
        cli_element_text(t->rank, t->shape, row0 * cols + bad, at, sizeof at);
        cli_error("--weights %s: tensor \"%s\" element %s is %s; weights and biases must be "
                  "finite",
                  s->file, t->name, at,
                  isnan(data[bad]) ? "NaN"
                  : data[bad] > 0  ? "inf"
                                   : "-inf");
        free(data);
        return -1;
    }
    in->flag = "--weights";
    in->path = *label;
    in->array = (npy_array){.dtype = NPY_F32, .rank = rank, .data = data, .nbytes = n * 4};
    in->array.shape[0] = rows;
    in->array.shape[1] = cols;
    return 0;
}

/* A tensor that must exist. */
static const st_tensor *require(const weight_search *s, const char *name)
{
    const st_tensor *t = find(s, name);
    if (!t)
        cli_error("--weights %s: no tensor \"%s%s\"", s->file, s->prefix, name);
    return t;
}

/* Hugging Face names: one tensor per projection. */
static int load_hf(const weight_search *s, cli_input *w, char **labels)
{
    static const char *const proj[4] = {"q_proj", "k_proj", "v_proj", "o_proj"};
    for (int k = 0; k < 4; k++) {
        char name[32];
        snprintf(name, sizeof name, "%s.weight", proj[k]);
        const st_tensor *t = require(s, name);
        if (!t || take(s, t, 2, 0, t->shape[0], &w[k], &labels[k]) != 0)
            return -1;
        snprintf(name, sizeof name, "%s.bias", proj[k]);
        if ((t = find(s, name)) && take(s, t, 1, 0, t->shape[0], &w[4 + k], &labels[4 + k]) != 0)
            return -1;
    }
    return 0;
}

/* A packed [3E, ...] tensor's thirds into inputs w[0], w[1], w[2]. */
static int take_thirds(const weight_search *s, const st_tensor *t, uint32_t rank, cli_input *w,
                       char **labels)
{
    if (t->rank >= 1 && t->shape[0] % 3 != 0) {
        cli_error("--weights %s: tensor \"%s\" has %lld rows, not 3 equal parts (q, k, v)", s->file,
                  t->name, (long long)t->shape[0]);
        return -1;
    }
    int64_t third = t->rank >= 1 ? t->shape[0] / 3 : 0;
    for (int k = 0; k < 3; k++)
        if (take(s, t, rank, k * third, third, &w[k], &labels[k]) != 0)
            return -1;
    return 0;
}

/* add_bias_kv's bias_k and bias_v ([1, 1, E] in torch), flattened, into
 * rows[0] and rows[1] when the file has them. */
static int load_bias_rows(const weight_search *s, cli_input *rows, char **labels)
{
    static const char *const names[2] = {"bias_k", "bias_v"};
    for (int k = 0; k < 2; k++) {
        const st_tensor *t = find(s, names[k]);
        if (!t)
            continue;
        st_tensor flat = *t;
        flat.rank = 1;
        for (uint32_t d = 1; d < t->rank; d++)
            flat.shape[0] *= t->shape[d];
        if (take(s, &flat, 1, 0, flat.shape[0], &rows[k], &labels[k]) != 0)
            return -1;
    }
    return 0;
}

/* nn.MultiheadAttention's names: in_proj_weight [3E, E] packed, or
 * q/k/v_proj_weight when kdim/vdim differ; in_proj_bias [3E]; bias_k and
 * bias_v (add_bias_kv). */
static int load_torch(const weight_search *s, cli_input *w, cli_input *rows, char **labels)
{
    if (load_bias_rows(s, rows, labels + 8) != 0)
        return -1;
    const st_tensor *packed = find(s, "in_proj_weight"), *t;
    if (packed) {
        if (take_thirds(s, packed, 2, w, labels) != 0)
            return -1;
    } else {
        static const char *const sep[3] = {"q_proj_weight", "k_proj_weight", "v_proj_weight"};
        for (int k = 0; k < 3; k++)
            if (!(t = require(s, sep[k])) || take(s, t, 2, 0, t->shape[0], &w[k], &labels[k]))
                return -1;
    }
    if (!(t = require(s, "out_proj.weight")) || take(s, t, 2, 0, t->shape[0], &w[3], &labels[3]))
        return -1;
    if ((t = find(s, "in_proj_bias")) && take_thirds(s, t, 1, &w[4], &labels[4]) != 0)
        return -1;
    if ((t = find(s, "out_proj.bias")) && take(s, t, 1, 0, t->shape[0], &w[7], &labels[7]) != 0)
        return -1;
    return 0;
}

/* Neither name set fits: say which names the file has under the prefix. */
static void report_no_layer(const weight_search *s)
{
    char seen[512] = "";
    size_t len = 0, plen = strlen(s->prefix);
    uint32_t shown = 0, matching = 0;
    for (uint32_t i = 0; i < s->st->count; i++) {
        const char *name = s->st->tensors[i].name;
        if (strncmp(name, s->prefix, plen) != 0)
            continue;
        matching++;
        if (shown < 6 && len + strlen(name) + 8 < sizeof seen) {
            len += (size_t)snprintf(seen + len, sizeof seen - len, "%s\"%s\"", shown ? ", " : "",
                                    name);
            shown++;
        }
    }
    if (!matching)
        cli_error("--weights %s: no tensor name starts with --prefix \"%s\" (%u tensors in the "
                  "file)",
                  s->file, s->prefix, s->st->count);
    else
        cli_error("--weights %s: under prefix \"%s\" there is neither q_proj.weight (hf names) "
                  "nor in_proj_weight / q_proj_weight (torch names); the file has %s%s",
                  s->file, s->prefix, seen, matching > shown ? ", ..." : "");
}

int cli_load_weight_file(const char *file, const char *prefix, cli_weight_names names, cli_input *w,
                         cli_input *bias_rows, char **labels)
{
    st_file st;
    char err[512];
    if (st_open(file, &st, err, sizeof err) != 0) {
        cli_error("--weights %s", err);
        return -1;
    }
    weight_search s = {file, prefix ? prefix : "", &st};
    if (names == CLI_NAMES_AUTO) {
        if (find(&s, "q_proj.weight"))
            names = CLI_NAMES_HF;
        else if (find(&s, "in_proj_weight") || find(&s, "q_proj_weight"))
            names = CLI_NAMES_TORCH;
    }
    int status = -1;
    if (names == CLI_NAMES_AUTO)
        report_no_layer(&s);
    else
        status =
            names == CLI_NAMES_HF ? load_hf(&s, w, labels) : load_torch(&s, w, bias_rows, labels);
    st_close(&st);
    return status;
}
