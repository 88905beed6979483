/* vkattn mha's whole-head options: see cli_mha_heads.h. */
#include "cli_mha_heads.h"

#include "cli.h"
#include "safetensors/safetensors.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

int cli_parse_pruned_heads(const char *flag, const char *text, uint32_t heads, uint32_t **keep,
                           uint32_t *kept)
{
    *keep = NULL;
    *kept = 0;
    bool *removed = calloc(heads ? heads : 1, sizeof *removed);
    if (!removed) {
        cli_error("%s: out of memory", flag);
        return -1;
    }
    uint32_t n_removed = 0;
    const char *p = text;
    while (*p) {
        errno = 0;
        char *end;
        unsigned long long h = strtoull(p, &end, 10);
        if (end == p || *p == '-' || *p == '+' || errno || (*end && (*end != ',' || !end[1]))) {
            cli_error("%s \"%s\": expected head numbers separated by commas (e.g. 0,5,7)", flag,
                      text);
            free(removed);
            return -1;
        }
        if (h >= heads || removed[h]) {
            cli_error("%s \"%s\": head %llu %s", flag, text, h,
                      h >= heads ? "does not exist" : "is given twice");
            if (h >= heads)
                fprintf(stderr, "  (the layer has --heads %u: heads 0..%u)\n", heads, heads - 1);
            free(removed);
            return -1;
        }
        removed[h] = true;
        n_removed++;
        p = *end ? end + 1 : end;
    }
    if (n_removed == 0 || n_removed == heads) {
        cli_error("%s \"%s\": %s", flag, text,
                  n_removed ? "removes every head: at least one must stay" : "names no head");
        free(removed);
        return -1;
    }
    *keep = malloc((size_t)(heads - n_removed) * sizeof **keep);
    if (!*keep) {
        cli_error("%s: out of memory", flag);
        free(removed);
        return -1;
    }
    for (uint32_t h = 0; h < heads; h++)
        if (!removed[h])
            (*keep)[(*kept)++] = h;
    free(removed);
    return 0;
}

/* An f32 array of `rank` dims (malloc'd, zeroed). */
static int new_f32(npy_array *a, uint32_t rank, const int64_t *shape)
{
    *a = (npy_array){.dtype = NPY_F32, .rank = rank};
    size_t n = 1;
    for (uint32_t d = 0; d < rank; d++)
        n *= (size_t)(a->shape[d] = shape[d]);
    a->nbytes = n * 4;
    a->data = calloc(n ? n : 1, 4);
    return a->data ? 0 : -1;
}

int cli_check_head_mask(const cli_input *in, int64_t heads, int64_t batch, const char *heads_what)
{
    const npy_array *a = &in->array;
    if (!in->path)
        return 0;
    bool rank_ok = a->rank == 1 || a->rank == 2;
    if (!rank_ok || a->shape[a->rank - 1] != heads ||
        (a->rank == 2 && a->shape[0] != 1 && a->shape[0] != batch)) {
        char shape[64];
        cli_shape_text(a, shape, sizeof shape);
        cli_error("%s %s: shape %s; a head mask is float32 [H] or [B,H] (B may be 1) with H = "
                  "%lld (%s) and B = %lld",
                  in->flag, in->path, shape, (long long)heads, heads_what, (long long)batch);
        return -1;
    }
    return 0;
}

int cli_prune_head_mask(const npy_array *mask, const char *flag, const char *path, uint32_t heads,
                        const uint32_t *keep, uint32_t kept, npy_array *pruned, npy_array *masked)
{
    *pruned = *masked = (npy_array){0};
    (void)flag;
    (void)path; /* checked when loaded (cli_check_head_mask) */
    int64_t rows = mask && mask->rank == 2 ? mask->shape[0] : 1;
    uint32_t rank = mask ? mask->rank : 1;
    int64_t ps[2] = {rows, kept}, ms[2] = {rows, heads};
    if (new_f32(pruned, rank, rank == 2 ? ps : ps + 1) != 0 ||
        new_f32(masked, rank, rank == 2 ? ms : ms + 1) != 0) {
        npy_free(pruned);
        npy_free(masked);
        cli_error("%s: out of memory", flag);
        return -1;
    }
    const float *given = mask ? mask->data : NULL;
    float *p = pruned->data, *m = masked->data;
    for (int64_t b = 0; b < rows; b++)
        for (uint32_t k = 0; k < kept; k++) {
            float v = given ? given[b * heads + keep[k]] : 1.0f;
            p[b * kept + k] = v;
            m[b * heads + keep[k]] = v; /* the removed heads stay 0 */
        }
    return 0;
}

void cli_gather_head_weights(const float *all, const int64_t shape[4], const uint32_t *keep,
                             uint32_t kept, bool average, float *out)
{
    size_t plane = (size_t)(shape[2] * shape[3]);
    for (int64_t b = 0; b < shape[0]; b++) {
        const float *src = all + (size_t)b * (size_t)shape[1] * plane;
        float *dst = out + (size_t)b * (average ? 1 : kept) * plane;
        if (average)
            memset(dst, 0, plane * 4);
        for (uint32_t k = 0; k < kept; k++) {
            const float *head = src + keep[k] * plane;
            if (!average) {
                memcpy(dst + k * plane, head, plane * 4);
                continue;
            }
            for (size_t i = 0; i < plane; i++)
                dst[i] += head[i] / (float)kept;
        }
    }
}

/* The heads in order of importance, most first (ties: lower head first). */
static uint32_t *ranking(const cli_head_report *r)
{
    uint32_t *order = malloc((r->count ? r->count : 1) * sizeof *order);
    if (!order)
        return NULL;
    for (uint32_t i = 0; i < r->count; i++)
        order[i] = i;
    for (uint32_t i = 1; i < r->count; i++) /* insertion sort: a few hundred heads at most */
        for (uint32_t j = i; j > 0 && r->importance[order[j]] > r->importance[order[j - 1]]; j--) {
            uint32_t t = order[j];
            order[j] = order[j - 1];
            order[j - 1] = t;
        }
    return order;
}

static uint32_t head_number(const cli_head_report *r, uint32_t i)
{
    return r->keep ? r->keep[i] : i;
}

static double total_importance(const cli_head_report *r)
{
    double sum = 0;
    for (uint32_t i = 0; i < r->count; i++)
        sum += r->importance[i];
    return sum;
}

void cli_print_head_report(FILE *f, const cli_head_report *r)
{
    uint32_t *order = ranking(r);
    if (!order) {
        cli_error("--head-report: out of memory");
        return;
    }
    double sum = total_importance(r);
    fprintf(f,
            "head importance: RMS change of the layer's output when the head alone is masked\n"
            "(its share of the output); %u of %u heads%s, least important last\n",
            r->count, r->heads, r->keep ? " (after --prune-heads)" : "");
    fprintf(f, "%6s %6s %8s %14s %8s\n", "rank", "head", "kv head", "importance", "share");
    for (uint32_t k = 0; k < r->count; k++) {
        uint32_t i = order[k];
        fprintf(f, "%6u %6u %8u %14.6g %7.2f%%\n", k + 1, head_number(r, i),
                head_number(r, i) / r->group, r->importance[i],
                sum > 0 ? 100.0 * r->importance[i] / sum : 0.0);
    }
    fprintf(f, "to prune the %s: --prune-heads %u\n", r->count > 1 ? "least important" : "head",
            head_number(r, order[r->count - 1]));
    free(order);
}

/* Appends to a growing string; false when out of memory. */
static bool append(char **s, size_t *len, size_t *cap, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;
static bool append(char **s, size_t *len, size_t *cap, const char *fmt, ...)
{
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(*s ? *s + *len : NULL, *s ? *cap - *len : 0, fmt, ap);
        va_end(ap);
        if (n < 0)
            return false;
        if (*s && *len + (size_t)n < *cap) {
            *len += (size_t)n;
            return true;
        }
        size_t want = (*cap ? *cap * 2 : 1024) + (size_t)n;
        char *grown = realloc(*s, want);
        if (!grown)
            return false;
        *s = grown;
        *cap = want;
    }
}

char *cli_head_report_json(const cli_head_report *r)
{
    uint32_t *order = ranking(r);
    if (!order)
        return NULL;
    char *s = NULL;
    size_t len = 0, cap = 0;
    double sum = total_importance(r);
    bool ok = append(&s, &len, &cap,
                     "{\"measure\": \"rms_output_change_when_masked\", \"heads\": %u, "
                     "\"kept_heads\": %u, \"ranking\": [",
                     r->heads, r->count);
    for (uint32_t k = 0; ok && k < r->count; k++) {
        uint32_t i = order[k];
        double v = r->importance[i];
        ok = append(&s, &len, &cap,
                    "%s{\"rank\": %u, \"head\": %u, \"kv_head\": %u, \"importance\": %.9g, "
                    "\"share\": %.6g}",
                    k ? ", " : "", k + 1, head_number(r, i), head_number(r, i) / r->group,
                    isfinite(v) ? v : 0.0, sum > 0 ? v / sum : 0.0);
    }
    ok = ok && append(&s, &len, &cap, "]}\n");
    free(order);
    if (!ok) {
        free(s);
        return NULL;
    }
    return s;
}

void cli_saved_weights_free(cli_saved_weights *w)
{
    for (int k = 0; k < 8; k++) {
        free(w->names[k]);
        free(w->data[k]);
    }
    free(w->kept_heads);
    *w = (cli_saved_weights){0};
}

/* "0,1,4": the kept heads (malloc'd), or NULL when out of memory. */
static char *head_list(const uint32_t *keep, uint32_t kept)
{
    char *s = malloc((size_t)kept * 11 + 1);
    if (!s)
        return NULL;
    size_t o = 0;
    s[0] = '\0';
    for (uint32_t k = 0; k < kept; k++)
        o += (size_t)sprintf(s + o, "%s%u", k ? "," : "", keep[k]);
    return s;
}

int cli_saved_weights_read(vkattn_mha *layer, const char *prefix, const uint32_t *keep,
                           uint32_t kept, cli_saved_weights *out)
{
    *out = (cli_saved_weights){0};
    const vkattn_mha_desc *d = vkattn_mha_config(layer);
    vkattn_dtype wt = d->weight_dtype;
    bool q8 = wt == VKATTN_DTYPE_Q8_0;
    uint64_t hq = d->num_heads, hkv = d->num_kv_heads, dk = d->head_dim, dv = d->v_head_dim;
    const int64_t rows[8] = {hq * dk, hkv * dk, hkv * dv, d->embed_dim,
                             hq * dk, hkv * dk, hkv * dv, d->embed_dim};
    const int64_t cols[4] = {d->embed_dim, d->kv_dim, d->kv_dim, (int64_t)(hq * dv)};
    static const char *const names[8] = {"q_proj.weight", "k_proj.weight", "v_proj.weight",
                                         "o_proj.weight", "q_proj.bias",   "k_proj.bias",
                                         "v_proj.bias",   "o_proj.bias"};
    out->count = d->bias ? 8 : 4;
    out->dtype = wt == VKATTN_DTYPE_F16 ? ST_F16 : wt == VKATTN_DTYPE_BF16 ? ST_BF16 : ST_F32;
    vkattn_dtype bias_type = q8 ? VKATTN_DTYPE_F32 : wt;
    void *device_copy[8] = {0}; /* q8_0 blocks before they are dequantized */
    bool ok = true;
    for (uint32_t k = 0; ok && k < out->count; k++) {
        bool weight = k < 4;
        int64_t n = weight ? rows[k] * cols[k] : rows[k];
        size_t held = weight ? (size_t)rows[k] * vkattn_dtype_row_bytes(wt, (uint64_t)cols[k])
                             : (size_t)n * vkattn_dtype_size(bias_type);
        out->nbytes[k] = (size_t)n * st_dtype_size((st_dtype)out->dtype);
        out->shapes[k][0] = rows[k];
        out->shapes[k][1] = weight ? cols[k] : 0;
        size_t name_len = (prefix ? strlen(prefix) : 0) + strlen(names[k]) + 1;
        out->names[k] = malloc(name_len);
        device_copy[k] = malloc(held ? held : 1);
        ok = out->names[k] && device_copy[k];
        if (ok)
            snprintf(out->names[k], name_len, "%s%s", prefix ? prefix : "", names[k]);
    }
    if (!ok) {
        cli_error("--save-weights: out of memory");
    } else {
        vkattn_mha_weight_copy dst = {device_copy[0], device_copy[1], device_copy[2],
                                      device_copy[3], device_copy[4], device_copy[5],
                                      device_copy[6], device_copy[7]};
        vkattn_result r = vkattn_mha_get_weights(layer, &dst);
        if (r != VKATTN_SUCCESS) {
            cli_error("--save-weights: reading the layer's weights failed: %s",
                      vkattn_result_message(r));
            ok = false;
        }
    }
    for (uint32_t k = 0; ok && k < out->count; k++) {
        if (!(q8 && k < 4)) {
            out->data[k] = device_copy[k];
            device_copy[k] = NULL;
            continue;
        }
        char err[256];
        out->data[k] = malloc(out->nbytes[k] ? out->nbytes[k] : 1);
        ok = out->data[k] &&
             vkattn_ref_dequantize(VKATTN_DTYPE_Q8_0, device_copy[k], (uint64_t)(rows[k] * cols[k]),
                                   out->data[k], err, sizeof err) == VKATTN_SUCCESS;
        if (!ok)
            cli_error("--save-weights: dequantizing %s failed", names[k]);
    }
    for (int k = 0; k < 8; k++)
        free(device_copy[k]);
    const uint64_t values[4] = {hq, hkv, dk, dv};
    for (int k = 0; k < 4; k++)
        snprintf(out->values[k], sizeof out->values[k], "%llu", (unsigned long long)values[k]);
    if (ok && keep && !(out->kept_heads = head_list(keep, kept))) {
        cli_error("--save-weights: out of memory");
        ok = false;
    }
    if (!ok)
        cli_saved_weights_free(out);
    return ok ? 0 : -1;
}

int cli_saved_weights_write(const cli_saved_weights *w, const char *path)
{
    st_tensor t[8];
    for (uint32_t k = 0; k < w->count; k++)
        t[k] = (st_tensor){.name = w->names[k],
                           .dtype = (st_dtype)w->dtype,
                           .rank = k < 4 ? 2 : 1,
                           .shape = {w->shapes[k][0], w->shapes[k][1]},
                           .data = w->data[k],
                           .nbytes = w->nbytes[k]};
    const char *meta[12] = {"format",       "pt",         "num_heads",  w->values[0],
                            "num_kv_heads", w->values[1], "head_dim",   w->values[2],
                            "v_head_dim",   w->values[3], "kept_heads", w->kept_heads};
    char err[1024];
    if (st_write(path, t, w->count, meta, w->kept_heads ? 6 : 5, err, sizeof err) != 0) {
        cli_error("--save-weights %s", err);
        return -1;
    }
    return 0;
}
