/* Score modifier options of attention and mha (see cli_mods.h). */
#include "cli_mods.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char cli_mods_help[] =
    "Score modifiers (see \"attention semantics\" in include/vkattn/ops.h; i' is query i's\n"
    "aligned position, i + Tk - Tq, or i with --causal-top-left):\n"
    "  --causal-top-left     causal with top-left alignment: key j visible iff j <= i\n"
    "                        (PyTorch SDPA's is_causal); instead of --causal\n"
    "  --window W            sliding window: key j visible iff i' - j < W (and, without\n"
    "                        causal, j - i' < W); W counts the query's own position\n"
    "                        (Mistral: 4096); 0: none\n"
    "  --softcap C           logit softcap C > 0: s = C * tanh(s / C) on the scaled\n"
    "                        score (Gemma 2: 50)\n"
    "  --sinks S.npy         float32 [Hq]: a sink logit per query head joining the\n"
    "                        softmax's denominator (gpt-oss)\n"
    "  --alibi-slopes A.npy  float32 [Hq]: ALiBi, score - slope_h * |i' - j| (finite)\n"
    "  --alibi-max-bias B    ALiBi with the standard slopes of max bias B > 0 (BLOOM: 8);\n"
    "                        not with --alibi-slopes\n";

/* --window: a whole non-negative integer that fits 32 bits. */
static int parse_window(const char *flag, const char *text, uint32_t *out)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(text, &end, 10);
    if (!*text || *end || errno || text[0] == '-' || text[0] == '+' || text[0] == ' ' ||
        v > UINT32_MAX) {
        cli_error("%s \"%s\": expected a whole number of tokens >= 0 (0: no window)", flag, text);
        return -1;
    }
    *out = (uint32_t)v;
    return 0;
}

int cli_mods_option(cli_mods *m, const char *flag, const char *value)
{
    if (strcmp(flag, "--window") == 0)
        return parse_window(flag, value, &m->window) != 0 ? -1 : 1;
    float *real = strcmp(flag, "--softcap") == 0          ? &m->softcap
                  : strcmp(flag, "--alibi-max-bias") == 0 ? &m->alibi_max_bias
                                                          : NULL;
    if (!real)
        return 0;
    return cli_parse_positive(flag, value, real) != 0 ? -1 : 1;
}

int cli_mods_check_given(const cli_mods *m, const cli_job *j, const cli_input *slopes)
{
    if (j->causal && j->causal_top_left) {
        cli_error("%s: --causal and --causal-top-left: give one (--causal-top-left is causal "
                  "with top-left alignment)",
                  j->command);
        return -1;
    }
    if (slopes->path && m->alibi_max_bias > 0) {
        cli_error("%s: --alibi-slopes and --alibi-max-bias: give one (the max bias derives "
                  "the standard slopes)",
                  j->command);
        return -1;
    }
    return 0;
}

int cli_mods_load_heads(cli_input *in)
{
    npy_array *a = &in->array;
    if (cli_read_npy(in, "expected float32 or float16 [Hq], one value per query head") != 0)
        return -1;
    if (a->dtype == NPY_F16 && cli_widen_f16(in) != 0)
        return -1;
    if (a->dtype != NPY_F32) {
        cli_error("%s %s: dtype is %s; expected float32 or float16 [Hq], one value per query "
                  "head",
                  in->flag, in->path, npy_dtype_name(a->dtype));
        return -1;
    }
    if (a->rank != 1 || a->shape[0] == 0) {
        cli_error("%s %s: has %u dimensions%s, expected 1 (float32 [Hq], one value per query "
                  "head)",
                  in->flag, in->path, a->rank, a->rank == 1 ? " of size 0" : "");
        return -1;
    }
    const float *f = a->data;
    for (int64_t h = 0; h < a->shape[0]; h++)
        if (!isfinite(f[h])) {
            cli_error("%s %s: element %lld (head %lld) is %s; expected finite values", in->flag,
                      in->path, (long long)h, (long long)h, isnan(f[h]) ? "NaN" : "infinite");
            return -1;
        }
    return 0;
}

int cli_mods_check_heads(const cli_input *in, int64_t heads, const char *what)
{
    if (!in->path || in->array.shape[0] == heads)
        return 0;
    cli_error("%s %s: shape (%lld,), expected (%lld,): one value per query head (%s)", in->flag,
              in->path, (long long)in->array.shape[0], (long long)heads, what);
    return -1;
}

vkattn_causal_align cli_mods_align(const cli_job *j)
{
    return j->causal_top_left ? VKATTN_CAUSAL_TOP_LEFT : VKATTN_CAUSAL_BOTTOM_RIGHT;
}

void cli_mods_attention(const cli_mods *m, const cli_job *j, vkattn_attention_args *args)
{
    args->causal = j->causal || j->causal_top_left;
    args->causal_align = cli_mods_align(j);
    args->window = m->window;
    args->softcap = m->softcap;
    args->alibi_max_bias = m->alibi_max_bias;
}

void cli_mods_reference(const cli_mods *m, const cli_job *j, vkattn_ref_attention_args *args)
{
    args->causal = j->causal || j->causal_top_left;
    args->causal_align = cli_mods_align(j);
    args->window = m->window;
    args->softcap = m->softcap;
    args->alibi_max_bias = m->alibi_max_bias;
}

void cli_mods_desc(const cli_mods *m, const cli_input *sinks, const cli_input *slopes,
                   vkattn_mha_desc *desc)
{
    desc->window = m->window;
    desc->softcap = m->softcap;
    desc->sinks = sinks->path != NULL;
    desc->alibi = slopes->path != NULL || m->alibi_max_bias > 0;
    desc->alibi_max_bias = m->alibi_max_bias;
}

int cli_mods_check_lse(const float *got, const float *want, int64_t n, double tol)
{
    double max = 0;
    int64_t worst = 0, bad = -1;
    for (int64_t i = 0; i < n && bad < 0; i++) {
        bool want_empty = isinf(want[i]) && want[i] < 0, got_empty = isinf(got[i]) && got[i] < 0;
        if (want_empty || got_empty) {
            if (want_empty != got_empty)
                bad = i;
            continue;
        }
        double e = fabs((double)got[i] - want[i]) / (1.0 + fabs((double)want[i]));
        if (!isfinite(got[i]) || isnan(e))
            bad = i;
        else if (e > max) {
            max = e;
            worst = i;
        }
    }
    if (bad >= 0) {
        printf("check: lse element %lld is %g, the reference's %g\n", (long long)bad,
               (double)got[bad], (double)want[bad]);
        cli_error("check failed: --lse-out differs from the CPU reference");
        return 1;
    }
    printf("check: lse max error %.3g (|got - want| / (1 + |want|), element %lld; tolerance "
           "%.3g)\n",
           max, (long long)worst, tol);
    if (max > tol) {
        cli_error("check failed: --lse-out differs from the CPU reference");
        return 1;
    }
    return 0;
}
