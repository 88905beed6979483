/* mha --report and info --layer: see cli_report.h. */
#include "cli_report.h"

#include "cli.h"
#include "cli_messages.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

/* The shapes beside each other: MHA, GQA (the layer's own KV heads when it
 * is GQA, else the divisor of Hq nearest Hq / 4 between 1 and Hq; none
 * when Hq has no such divisor) and MQA. */
typedef struct report_columns {
    int count;
    const char *names[3];
    uint32_t kv_heads[3];
    int own; /* the column of the layer itself */
} report_columns;

static report_columns columns_of(const vkattn_mha_desc *d)
{
    uint32_t h = d->num_heads, own = d->num_kv_heads ? d->num_kv_heads : h, gqa = 0;
    if (own > 1 && own < h) {
        gqa = own;
    } else {
        for (uint32_t g = 2; g < h; g++)
            if (h % g == 0 && (!gqa || labs((long)g * 4 - (long)h) < labs((long)gqa * 4 - (long)h)))
                gqa = g;
    }
    report_columns c = {0};
    const uint32_t kv[3] = {h, gqa, 1};
    const char *names[3] = {"MHA", "GQA", "MQA"};
    for (int k = 0; k < 3; k++) {
        if (kv[k] == 0 || (k == 2 && h == 1)) /* one head: MHA and MQA are one shape */
            continue;
        if (kv[k] == own)
            c.own = c.count;
        c.names[c.count] = names[k];
        c.kv_heads[c.count++] = kv[k];
    }
    return c;
}

/* A count with thousands separators, right-aligned in `width`. */
static void print_count(FILE *f, uint64_t v, int width)
{
    char digits[32], out[48];
    int n = snprintf(digits, sizeof digits, "%" PRIu64, v), o = 0;
    for (int i = 0; i < n; i++) {
        if (i && (n - i) % 3 == 0)
            out[o++] = ',';
        out[o++] = digits[i];
    }
    out[o] = '\0';
    fprintf(f, "%*s", width, out);
}

/* "1.5 MiB": a byte count for the eye ("" below 1 KiB: the count says it). */
static void human_size(uint64_t bytes, char *out, size_t size)
{
    static const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double v = (double)bytes;
    int u = 0;
    while (v >= 1024 && u < 4) {
        v /= 1024;
        u++;
    }
    if (u)
        snprintf(out, size, "%.3g %s", v, units[u]);
    else
        out[0] = '\0';
}

enum { LABEL = 28, COLUMN = 16 };

static void print_header(FILE *f, const char *title, const report_columns *c)
{
    fprintf(f, "%-*s", LABEL, title);
    for (int k = 0; k < c->count; k++) {
        char name[32];
        snprintf(name, sizeof name, "%s%s", c->names[k], k == c->own ? " (this)" : "");
        fprintf(f, "%*s", COLUMN, name);
    }
    fputc('\n', f);
}

/* One row of figures; a value of UINT64_MAX prints as "-" (refused). */
static void print_row(FILE *f, const char *label, const uint64_t *v, int n)
{
    fprintf(f, "  %-*s", LABEL - 2, label);
    for (int k = 0; k < n; k++) {
        if (v[k] == UINT64_MAX)
            fprintf(f, "%*s", COLUMN, "-");
        else
            print_count(f, v[k], COLUMN);
    }
    fputc('\n', f);
}

/* The desc with `kv_heads` KV heads (and the given storage types). */
static vkattn_mha_desc variant(const vkattn_mha_desc *d, uint32_t kv_heads, vkattn_dtype weights)
{
    vkattn_mha_desc v = *d;
    v.num_kv_heads = kv_heads;
    v.weight_dtype = weights;
    if (weights == VKATTN_DTYPE_F32)
        v.dtype = VKATTN_DTYPE_F32;
    else if (v.dtype == VKATTN_DTYPE_F32 && weights != VKATTN_DTYPE_Q8_0)
        v.dtype = weights;
    return v;
}

/* Parameters of each column, and the weight bytes per storage type (a
 * type the shape cannot take: "-", with the first reason in `why`). */
static void print_parameters(FILE *f, const vkattn_mha_desc *d, const report_columns *c, char *why,
                             size_t why_size)
{
    vkattn_mha_param_counts p[3];
    char err[512];
    for (int k = 0; k < c->count; k++) {
        vkattn_mha_desc v = variant(d, c->kv_heads[k], VKATTN_DTYPE_F32);
        v.dtype = d->dtype;
        v.weight_dtype = 0;
        vkattn_mha_param_count(&v, &p[k], err, sizeof err); /* checked by the caller */
    }
    print_header(f, "parameters", c);
    uint64_t kv[3] = {0}, row[3] = {0};
    for (int k = 0; k < c->count; k++)
        kv[k] = c->kv_heads[k];
    print_row(f, "kv heads", kv, c->count);
#define ROW(label, field)                   \
    do {                                    \
        for (int k = 0; k < c->count; k++)  \
            row[k] = p[k].field;            \
        print_row(f, label, row, c->count); \
    } while (0)
    ROW("Wq [Hq*Dk, Dm]", wq);
    ROW("Wk [Hkv*Dk, Dkv]", wk);
    ROW("Wv [Hkv*Dv, Dkv]", wv);
    ROW("Wo [Dm, Hq*Dv]", wo);
    for (int k = 0; k < c->count; k++)
        row[k] = p[k].wq + p[k].wk + p[k].wv;
    print_row(f, "(Wqkv packed = Wq+Wk+Wv)", row, c->count);
    ROW("weights", weights);
    ROW("biases (bq, bk, bv, bo)", biases);
    ROW("total", total);
#undef ROW
    fputc('\n', f);
    print_header(f, "weight bytes (biases incl.)", c);
    static const vkattn_dtype types[3] = {VKATTN_DTYPE_F32, VKATTN_DTYPE_F16, VKATTN_DTYPE_Q8_0};
    static const char *labels[3] = {"f32", "f16 / bf16", "q8_0 (biases f32)"};
    for (int t = 0; t < 3; t++) {
        for (int k = 0; k < c->count; k++) {
            vkattn_mha_desc v = variant(d, c->kv_heads[k], types[t]);
            vkattn_mha_param_counts q;
            row[k] = vkattn_mha_param_count(&v, &q, err, sizeof err) == VKATTN_SUCCESS ? q.bytes
                                                                                       : UINT64_MAX;
            if (row[k] == UINT64_MAX && !why[0])
                snprintf(why, why_size, "%s weights: %s", vkattn_dtype_name(types[t]), err);
        }
        print_row(f, labels[t], row, c->count);
    }
}

/* KV-cache bytes per token and the device memory of a cache of one
 * sequence of `context` tokens (its bookkeeping included), per cache dtype. */
static void print_cache(FILE *f, const vkattn_mha_desc *d, const report_columns *c,
                        uint64_t context, char *why, size_t why_size)
{
    enum { TYPES = 8 };
    static const vkattn_dtype types[TYPES] = {
        VKATTN_DTYPE_F32,  VKATTN_DTYPE_F16,  VKATTN_DTYPE_Q8_0, VKATTN_DTYPE_Q5_1,
        VKATTN_DTYPE_Q5_0, VKATTN_DTYPE_Q4_1, VKATTN_DTYPE_Q4_0, VKATTN_DTYPE_IQ4_NL};
    static const char *labels[TYPES] = {"f32",  "f16 / bf16", "q8_0", "q5_1",
                                        "q5_0", "q4_1",       "q4_0", "iq4_nl"};
    uint64_t per_token[TYPES][3], total[TYPES][3];
    uint32_t dh = d->head_dim ? d->head_dim : d->embed_dim / d->num_heads;
    uint32_t cap = context > UINT32_MAX ? UINT32_MAX : (uint32_t)context;
    for (int t = 0; t < TYPES; t++)
        for (int k = 0; k < c->count; k++) {
            vkattn_kv_cache_desc cd = {.num_kv_heads = c->kv_heads[k],
                                       .num_heads = d->num_heads,
                                       .head_dim = dh,
                                       .v_head_dim = d->v_head_dim,
                                       .dtype = types[t],
                                       .max_sequences = 1,
                                       .capacity = cap};
            char err[512];
            if (vkattn_kv_cache_memory(&cd, &per_token[t][k], &total[t][k], err, sizeof err) !=
                VKATTN_SUCCESS) {
                per_token[t][k] = total[t][k] = UINT64_MAX;
                if (!why[0])
                    snprintf(why, why_size, "%s cache: %s", labels[t], err);
            }
        }
    print_header(f, "KV cache bytes per token", c);
    for (int t = 0; t < TYPES; t++)
        print_row(f, labels[t], per_token[t], c->count);
    fputc('\n', f);
    char title[64];
    snprintf(title, sizeof title, "KV cache of %" PRIu64 " tokens", context);
    print_header(f, title, c);
    for (int t = 0; t < TYPES; t++) {
        print_row(f, labels[t], total[t], c->count);
        if (total[t][0] == UINT64_MAX)
            continue; /* refused for every column alike: no sizes to show */
        fprintf(f, "  %-*s", LABEL - 2, "");
        for (int k = 0; k < c->count; k++) {
            char human[32] = "";
            if (total[t][k] != UINT64_MAX)
                human_size(total[t][k], human, sizeof human);
            fprintf(f, "%*s", COLUMN, human);
        }
        fputc('\n', f);
    }
}

int cli_layer_report(FILE *f, const vkattn_mha_desc *desc, uint64_t context, const char *source,
                     const cli_term *terms)
{
    vkattn_mha_param_counts own;
    char err[512], said[1024];
    if (vkattn_mha_param_count(desc, &own, err, sizeof err) != VKATTN_SUCCESS) {
        cli_translate(err, NULL, 0, terms, said, sizeof said);
        cli_error("%s: %s", source, said);
        return -1;
    }
    if (context == 0 || context > UINT32_MAX) {
        cli_error("--context %" PRIu64 ": expected 1..%u tokens", context, UINT32_MAX);
        return -1;
    }
    const vkattn_mha_desc *d = desc;
    uint32_t kv = d->num_kv_heads ? d->num_kv_heads : d->num_heads;
    uint32_t dh = d->head_dim ? d->head_dim : d->embed_dim / d->num_heads;
    uint32_t dv = d->v_head_dim ? d->v_head_dim : dh;
    fprintf(f,
            "layer: embed_dim %u, query heads %u, KV heads %u (%s), head_dim %u, v_head_dim %u, "
            "kv_dim %u, %s, weights %s\n\n",
            d->embed_dim, d->num_heads, kv,
            kv == d->num_heads ? "MHA"
            : kv == 1          ? "MQA"
                               : "GQA",
            dh, dv, d->kv_dim ? d->kv_dim : d->embed_dim, d->bias ? "biases" : "no biases",
            vkattn_dtype_name(d->weight_dtype ? d->weight_dtype : d->dtype));
    report_columns c = columns_of(d);
    char why_weights[640] = "", why_cache[640] = "";
    print_parameters(f, d, &c, why_weights, sizeof why_weights);
    fputc('\n', f);
    print_cache(f, d, &c, context, why_cache, sizeof why_cache);
    char said_weights[1024], said_cache[1024];
    cli_translate(why_weights, NULL, 0, terms, said_weights, sizeof said_weights);
    cli_translate(why_cache, NULL, 0, terms, said_cache, sizeof said_cache);
    if (why_weights[0] || why_cache[0])
        fprintf(f, "\n-: not possible for this shape, e.g.\n");
    if (why_weights[0])
        fprintf(f, "   %s\n", said_weights);
    if (why_cache[0])
        fprintf(f, "   %s\n", said_cache);
    return 0;
}

/* One positive integer of --layer's list at *p, then the separator. */
static int parse_field(const char **p, const char *text, const char *what, uint32_t *out)
{
    errno = 0;
    char *end;
    unsigned long long v = strtoull(*p, &end, 10);
    if (end == *p || **p == '-' || **p == '+' || errno || v == 0 || v > UINT32_MAX ||
        (*end && (*end != ',' || !end[1]))) {
        cli_error("--layer \"%s\": %s must be an integer of 1..%u (expected Dm,H,Hkv[,Dh])", text,
                  what, UINT32_MAX);
        return -1;
    }
    *out = (uint32_t)v;
    *p = *end ? end + 1 : end;
    return 0;
}

int cli_parse_layer(const char *text, vkattn_mha_desc *out)
{
    static const char *what[4] = {"Dm (embed_dim)", "H (heads)", "Hkv (KV heads)", "Dh (head_dim)"};
    uint32_t v[4] = {0};
    const char *p = text;
    int n = 0;
    for (; n < 4 && *p; n++)
        if (parse_field(&p, text, what[n], &v[n]) != 0)
            return -1;
    if (n < 3 || *p) {
        cli_error("--layer \"%s\": expected Dm,H,Hkv or Dm,H,Hkv,Dh (e.g. 4096,32,8,128)", text);
        return -1;
    }
    *out = (vkattn_mha_desc){
        .embed_dim = v[0], .num_heads = v[1], .num_kv_heads = v[2], .head_dim = v[3]};
    return 0;
}
