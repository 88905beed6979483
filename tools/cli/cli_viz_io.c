/* Pictures for the CLI's commands: token files, one batch row of per-head
 * weights rendered in memory, written whole, and the weights output of a
 * job made per head for them. */
#include "cli_viz.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* A token file: one token per line (a last newline ends the last token; a
 * "\r" before a newline is dropped). */
typedef struct viz_tokens {
    char *text;         /* the file, lines cut in place */
    const char **lines; /* count entries into text */
    int64_t count;
} viz_tokens;

/* More than this is not a token list (and would not be drawn anyway). */
#define TOKENS_MAX_BYTES (64l << 20)

static void tokens_free(viz_tokens *t)
{
    free(t->text);
    free((void *)t->lines);
    *t = (viz_tokens){0};
}

static int tokens_load(const char *option, const char *path, viz_tokens *out)
{
    *out = (viz_tokens){0};
    FILE *f = fopen(path, "rb");
    struct stat st;
    if (!f || fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode) || st.st_size > TOKENS_MAX_BYTES) {
        int e = errno;
        const char *why = !f                     ? strerror(e)
                          : !S_ISREG(st.st_mode) ? "not a regular file"
                                                 : "over 64 MiB: expected one token per line";
        cli_error("%s %s: cannot read the tokens: %s", option, path, why);
        if (f)
            fclose(f);
        return -1;
    }
    size_t size = (size_t)st.st_size;
    out->text = malloc(size + 1);
    size_t got = out->text ? fread(out->text, 1, size, f) : 0;
    fclose(f);
    if (!out->text || got != size) {
        cli_error("%s %s: %s", option, path, out->text ? "read failed" : "out of memory");
        tokens_free(out);
        return -1;
    }
    out->text[size] = '\0';
    int64_t lines = 0;
    for (size_t k = 0; k < size; k++)
        lines += out->text[k] == '\n';
    lines += size && out->text[size - 1] != '\n'; /* a last line without its newline */
    out->lines = malloc((size_t)(lines ? lines : 1) * sizeof *out->lines);
    if (!out->lines) {
        cli_error("%s %s: out of memory", option, path);
        tokens_free(out);
        return -1;
    }
    char *p = out->text, *end = out->text + size;
    while (p < end) {
        char *nl = memchr(p, '\n', (size_t)(end - p));
        char *stop = nl ? nl : end;
        if (stop > p && stop[-1] == '\r')
            stop[-1] = '\0';
        *stop = '\0';
        out->lines[out->count++] = p;
        p = stop + 1;
    }
    return 0;
}

/* Points the desc's labels at the token files: --tokens has one token per
 * query (and per key when Tq == Tk), or one per key when there are more
 * keys than queries (queries are the last Tq, bottom-right as --causal
 * aligns them); --key-tokens one per key. -1 after printing. */
static int assign_tokens(const cli_viz_options *o, const viz_tokens *q, const viz_tokens *k,
                         vkattn_viz_desc *d)
{
    int64_t tq = d->q_len, tk = d->k_len;
    if (o->tokens_path) {
        if (q->count == tq)
            d->q_tokens = q->lines;
        else if (q->count == tk && tk > tq) {
            d->q_tokens = q->lines + (tk - tq);
            d->k_tokens = q->lines;
        } else {
            char keys[64] = "";
            if (tk > tq)
                snprintf(keys, sizeof keys, " or per key (%lld)", (long long)tk);
            cli_error("--tokens %s: %lld lines, expected one token per query (%lld)%s",
                      o->tokens_path, (long long)q->count, (long long)tq, keys);
            return -1;
        }
    }
    if (o->key_tokens_path) {
        if (k->count != tk) {
            cli_error("--key-tokens %s: %lld lines, expected one token per key (%lld)",
                      o->key_tokens_path, (long long)k->count, (long long)tk);
            return -1;
        }
        d->k_tokens = k->lines;
    }
    return 0;
}

int cli_viz_render(const char *option, const char *path, const cli_viz_options *o,
                   const float *weights, const int64_t shape[4], uint32_t batch_row,
                   const bool *hidden, cli_viz_picture *out)
{
    *out = (cli_viz_picture){0};
    char err[512];
    vkattn_viz_format format;
    if (vkattn_viz_format_of(path, &format, err, sizeof err) != VKATTN_VIZ_SUCCESS) {
        cli_error("%s: %s", option, err);
        return -1;
    }
    for (int d = 1; d < 4; d++)
        if (shape[d] > UINT32_MAX) {
            cli_error("%s %s: weights of shape [%lld,%lld,%lld,%lld] are too large to draw", option,
                      path, (long long)shape[0], (long long)shape[1], (long long)shape[2],
                      (long long)shape[3]);
            return -1;
        }
    int64_t per_row = shape[1] * shape[2] * shape[3];
    vkattn_viz_desc d = {.weights = weights + (int64_t)batch_row * per_row,
                         .heads = (uint32_t)shape[1],
                         .q_len = (uint32_t)shape[2],
                         .k_len = (uint32_t)shape[3],
                         .hidden = hidden,
                         .hidden_heads = (uint32_t)shape[1],
                         .title = o->title,
                         .average = o->average && shape[1] > 1,
                         .pre_averaged = o->pre_averaged,
                         .reduce = o->reduce,
                         .max_cells = o->max_cells};
    viz_tokens q = {0}, k = {0};
    int status = -1;
    if ((o->tokens_path && tokens_load("--tokens", o->tokens_path, &q) != 0) ||
        (o->key_tokens_path && tokens_load("--key-tokens", o->key_tokens_path, &k) != 0) ||
        assign_tokens(o, &q, &k, &d) != 0)
        goto done;
    vkattn_viz_result r = vkattn_viz_render(&d, format, &out->data, &out->size, err, sizeof err);
    if (r != VKATTN_VIZ_SUCCESS)
        cli_error("%s %s: no picture: %s", option, path, err);
    else
        status = 0;
done:
    tokens_free(&q);
    tokens_free(&k);
    return status;
}

void cli_viz_picture_free(cli_viz_picture *pic)
{
    vkattn_viz_free(pic->data);
    *pic = (cli_viz_picture){0};
}

int cli_viz_save(const char *option, const char *path, cli_viz_picture *pic)
{
    char err[512];
    vkattn_viz_result r = vkattn_viz_save(path, pic->data, pic->size, err, sizeof err);
    cli_viz_picture_free(pic);
    if (r == VKATTN_VIZ_SUCCESS)
        return 0;
    cli_error("%s: %s", option, err);
    return -1;
}

int cli_viz_write_weights(const char *path, const float *weights, const int64_t shape[4],
                          uint32_t batch_row, const bool *hidden, const char *tokens_path,
                          const char *title)
{
    cli_viz_options o = {.tokens_path = tokens_path, .title = title};
    cli_viz_picture pic;
    if (batch_row >= shape[0]) {
        cli_error("%s: batch row %u, but the weights have %lld", path, batch_row,
                  (long long)shape[0]);
        return -1;
    }
    if (cli_viz_render("--weights-png", path, &o, weights, shape, batch_row, hidden, &pic) != 0)
        return -1;
    return cli_viz_save("--weights-png", path, &pic);
}

void cli_viz_shape_weights(cli_job *j, int64_t batch, int64_t heads, int64_t tq, int64_t tk)
{
    cli_outputs *r = &j->out;
    const int64_t ws[4] = {batch, heads, tq, tk};
    r->weights_rank = 4;
    memcpy(r->weights_shape, ws, sizeof ws);
    r->weights_n = batch * heads * tq * tk;
}

int cli_viz_average_weights(cli_job *j)
{
    cli_outputs *r = &j->out;
    int64_t b = r->weights_shape[0], h = r->weights_shape[1], tq = r->weights_shape[2],
            tk = r->weights_shape[3], plane = tq * tk;
    float *mean = malloc((size_t)(b * plane) * sizeof *mean);
    if (!mean) {
        cli_error("%s: out of memory averaging the weights over heads", j->command);
        return -1;
    }
    for (int64_t n = 0; n < b; n++)
        for (int64_t e = 0; e < plane; e++) {
            double sum = 0;
            for (int64_t g = 0; g < h; g++)
                sum += r->weights[(n * h + g) * plane + e];
            mean[n * plane + e] = (float)(sum / (double)h);
        }
    free(r->weights);
    r->weights = mean;
    r->weights_rank = 3;
    const int64_t ws[4] = {b, tq, tk, 0};
    memcpy(r->weights_shape, ws, sizeof ws);
    r->weights_n = b * plane;
    return 0;
}

int cli_viz_draw_job_weights(cli_job *j, const char *path, const char *title, int mask,
                             int key_padding, uint32_t window, cli_viz_picture *png)
{
    cli_outputs *r = &j->out;
    cli_viz_masks masks = cli_viz_job_masks(j, mask, key_padding, window);
    cli_viz_options o = {.title = title};
    bool *hidden = NULL;
    int status = cli_viz_hidden(&masks, r->weights_shape, 0, &hidden);
    if (status == 0)
        status =
            cli_viz_render("--weights-png", path, &o, r->weights, r->weights_shape, 0, hidden, png);
    free(hidden);
    if (status != 0)
        return -1;
    if (!j->weights_path) { /* nothing else wants them: nothing to write or check */
        free(r->weights);
        r->weights = NULL;
        return 0;
    }
    return j->per_head ? 0 : cli_viz_average_weights(j);
}

int cli_viz_check_output(const char *command, const char *option, const char *path)
{
    char err[512];
    vkattn_viz_format format;
    if (vkattn_viz_format_of(path, &format, err, sizeof err) == VKATTN_VIZ_SUCCESS)
        return 0;
    cli_error("%s: %s: %s", command, option, err);
    return -1;
}
