/* --rope-* options and positions files of attention and mha. */
#include "cli_rope.h"
#include "cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char cli_rope_help[] =
    "  --rope-theta F        rotary position embeddings (RoPE) of Q and K with base F (> 1;\n"
    "                        Llama 2: 10000, Llama 3: 500000); the other --rope-* options\n"
    "                        need it\n"
    "  --rope-dims R         rotate the first R dimensions of each head (even, at most the\n"
    "                        head dim; default all of them)\n"
    "  --rope-style neox|gptj  pairs (i, i + R/2) (default, HF Llama/Qwen) or (2i, 2i + 1)\n"
    "  --rope-linear FACTOR  linear position scaling (positions / FACTOR, FACTOR >= 1)\n"
    "  --rope-llama3 FACTOR,LOW,HIGH,ORIG  Llama 3.1 frequency scaling (rope_type\n"
    "                        \"llama3\"; Llama 3.1: 8,1,4,8192)\n";

/* An option's float value: finite, a normal float, and at least `min` (or
 * above it when `above`); -1 after printing, naming the flag. */
static int parse_min(const char *flag, const char *text, float min, bool above, float *out)
{
    if (cli_parse_float(flag, text, out) != 0)
        return -1;
    if (above ? *out > min : *out >= min)
        return 0;
    cli_error("%s \"%s\": expected a number %s %g", flag, text, above ? ">" : ">=", (double)min);
    return -1;
}

/* --rope-llama3 FACTOR,LOW,HIGH,ORIG */
static int parse_llama3(vkattn_rope_desc *r, const char *value)
{
    static const char flag[] = "--rope-llama3";
    char buf[256], *part[4];
    int n = 0;
    if (strlen(value) < sizeof buf) {
        memcpy(buf, value, strlen(value) + 1);
        part[n++] = buf;
        for (char *c = strchr(buf, ','); c && n <= 4; c = strchr(c + 1, ',')) {
            *c = '\0';
            if (n < 4)
                part[n] = c + 1;
            n++;
        }
    }
    if (n != 4) {
        cli_error("%s \"%s\": expected four values FACTOR,LOW,HIGH,ORIG (Llama 3.1: 8,1,4,8192)",
                  flag, value);
        return -1;
    }
    if (parse_min(flag, part[0], 1, false, &r->factor) != 0 ||
        parse_min(flag, part[1], 0, true, &r->low_freq_factor) != 0 ||
        parse_min(flag, part[2], 0, true, &r->high_freq_factor) != 0 ||
        cli_parse_uint(flag, part[3], &r->original_max_positions) != 0)
        return -1;
    if (r->high_freq_factor <= r->low_freq_factor) {
        cli_error("%s \"%s\": HIGH (%s) must be above LOW (%s)", flag, value, part[2], part[1]);
        return -1;
    }
    r->scaling = VKATTN_ROPE_SCALING_LLAMA3;
    return 0;
}

int cli_rope_option(cli_rope_options *o, const char *flag, const char *value)
{
    vkattn_rope_desc *r = &o->rope;
    if (strcmp(flag, "--rope-theta") == 0) {
        if (cli_parse_float(flag, value, &r->theta) != 0)
            return -1;
        if (!(r->theta > 1)) {
            cli_error("%s \"%s\": expected a number > 1 (Llama 2: 10000, Llama 3: 500000)", flag,
                      value);
            return -1;
        }
        return 1;
    }
    if (strncmp(flag, "--rope-", 7) != 0)
        return 0;
    int rc = 0;
    if (strcmp(flag, "--rope-dims") == 0) {
        rc = cli_parse_uint(flag, value, &r->dims);
        if (rc == 0 && r->dims % 2) {
            cli_error("%s \"%s\": the rotary dimensions come in pairs: expected an even number",
                      flag, value);
            rc = -1;
        }
    } else if (strcmp(flag, "--rope-style") == 0) {
        if (strcmp(value, "neox") == 0)
            r->style = VKATTN_ROPE_NEOX;
        else if (strcmp(value, "gptj") == 0)
            r->style = VKATTN_ROPE_GPTJ;
        else {
            cli_error("%s \"%s\": expected neox or gptj", flag, value);
            rc = -1;
        }
    } else if (strcmp(flag, "--rope-linear") == 0 || strcmp(flag, "--rope-llama3") == 0) {
        if (o->scaling_flag) {
            cli_error("%s: only one scaling: %s was given already", flag, o->scaling_flag);
            return -1;
        }
        o->scaling_flag = strcmp(flag, "--rope-linear") == 0 ? "--rope-linear" : "--rope-llama3";
        if (strcmp(flag, "--rope-linear") == 0) {
            rc = parse_min(flag, value, 1, false, &r->factor);
            r->scaling = VKATTN_ROPE_SCALING_LINEAR;
        } else
            rc = parse_llama3(r, value);
    } else
        return 0;
    if (!o->first_flag)
        o->first_flag = strcmp(flag, "--rope-dims") == 0    ? "--rope-dims"
                        : strcmp(flag, "--rope-style") == 0 ? "--rope-style"
                                                            : o->scaling_flag;
    return rc != 0 ? -1 : 1;
}

int cli_rope_check_given(const cli_rope_options *o, const char *command, const char *positions)
{
    const char *without = o->first_flag ? o->first_flag : positions;
    if (o->rope.theta > 0 || !without)
        return 0;
    cli_error("%s: %s needs --rope-theta (rotary position embeddings are off without it)", command,
              without);
    return -1;
}

int cli_rope_check_head_dim(const cli_rope_options *o, int64_t head_dim, const char *source)
{
    if (o->rope.dims <= head_dim)
        return 0;
    cli_error("--rope-dims %u: more than the head dim %lld (%s)", o->rope.dims, (long long)head_dim,
              source);
    return -1;
}

int cli_load_positions(cli_input *in)
{
    npy_array *a = &in->array;
    if (cli_read_npy(in, "positions are int32 or int64 [batch, tokens]") != 0)
        return -1;
    if (a->dtype != NPY_I32 && a->dtype != NPY_I64) {
        cli_error("%s %s: dtype is %s; positions are int32 or int64 [batch, tokens]", in->flag,
                  in->path, npy_dtype_name(a->dtype));
        return -1;
    }
    if (a->rank != 2) {
        cli_error("%s %s: has %u dimensions, expected 2 ([batch, tokens])", in->flag, in->path,
                  a->rank);
        return -1;
    }
    int64_t n = cli_numel(a);
    int32_t *p = a->data;
    for (int64_t i = 0; i < n; i++) {
        int64_t v = a->dtype == NPY_I64 ? ((const int64_t *)a->data)[i] : p[i];
        if (v < 0 || v > VKATTN_ROPE_MAX_POSITION) {
            cli_error("%s %s: element %lld (batch %lld, token %lld) is %lld; positions are "
                      "integers in [0, %d]",
                      in->flag, in->path, (long long)i, (long long)(i / a->shape[1]),
                      (long long)(i % a->shape[1]), (long long)v, VKATTN_ROPE_MAX_POSITION);
            return -1;
        }
        p[i] = (int32_t)v; /* in place: element i of int32 ends before element i of int64 */
    }
    a->dtype = NPY_I32;
    a->nbytes = (size_t)n * 4;
    return 0;
}

int cli_check_positions_shape(const cli_input *in, int64_t batch, int64_t tokens, const char *what)
{
    const int64_t *s = in->array.shape;
    if (s[0] == batch && s[1] == tokens)
        return 0;
    cli_error("%s %s: shape (%lld, %lld), expected (%lld, %lld): [batch, %s]", in->flag, in->path,
              (long long)s[0], (long long)s[1], (long long)batch, (long long)tokens, what);
    return -1;
}
