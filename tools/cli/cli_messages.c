/* The library's messages in the CLI user's terms (cli_messages.h). */
#include "cli_messages.h"
#include "cli.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const cli_term cli_command_terms[] = {
    {"desc->num_kv_heads", "--kv-heads"},
    {"desc->num_heads", "--heads"},
    {"desc->embed_dim", "embed_dim (the last dimension of --x)"},
    {"desc->kv_dim", "kv_dim (the last dimension of --kv or --key)"},
    {"desc->value_dim", "value_dim (the last dimension of --value)"},
    {"desc->head_dim", "head_dim (rows of --wq / --heads)"},
    {"desc->v_head_dim", "v_head_dim (rows of --wv / --kv-heads)"},
    {"desc->rope.theta", "--rope-theta"},
    {"desc->rope.dims", "--rope-dims"},
    {"desc->rope.factor", "the --rope-linear or --rope-llama3 factor"},
    {"desc->scale", "--scale"},
    {"desc->norm_eps", "--norm-eps"},
    {"desc->window", "--window"},
    {"desc->softcap", "--softcap"},
    {"desc->alibi_max_bias", "--alibi-max-bias"},
    {"desc->weight_dtype", "--weight-dtype"},
    {"desc->dtype", "--dtype"},
    {"desc->block_size", "--paged-block"},
    {"desc->qk_norm", "--q-norm and --k-norm"},
    {"weights->sinks", "--sinks"},
    {"weights->bias_k", "--bias-k"},
    {"weights->bias_v", "--bias-v"},
    {"desc.add_bias_kv", "--bias-k"},
    {"desc->add_bias_kv", "--bias-k"},
    {"desc.add_zero_attn", "--add-zero-attn"},
    {"desc->add_zero_attn", "--add-zero-attn"},
    {"weights->alibi_slopes", "--alibi-slopes"},
    {"weights->wqkv", "--wq, --wk, --wv"},
    {"weights->wo", "--wo"},
    {"args->window", "--window"},
    {"args->softcap", "--softcap"},
    {"args->alibi_max_bias", "--alibi-max-bias"},
    {"args->causal_align", "--causal-top-left"},
    {"args->lse", "--lse-out"},
    {"args->out", "--out"},
    {"args->y", "--out"},
    {"args->weights", "--weights-out"},
    {"args->scale", "--scale"},
    {"args->dropout_p", "--dropout"},
    {"args->dy", "--grad-out"},
    {"args->forward.sequences", "the number of sequences (--seq-offsets)"},
    {"args->forward.head_mask", "--head-mask"},
    {"the layer's weight_dtype", "--weight-dtype"},
    {"add_bias_kv or add_zero_attn", "add_bias_kv or add_zero_attn (--bias-k, --add-zero-attn)"},
    {"args->rope.dims", "--rope-dims"},
    {"args->rope.theta", "--rope-theta"},
    {"args->kv_splits", "--kv-splits"},
    {"args->kv_cache_dtype", "--kv-dtype"},
    {"a q8_0 cache", "a q8_0 cache (--kv-dtype q8_0)"},
    {"a q4_0 cache", "a q4_0 cache (--kv-dtype q4_0)"},
    {"a q4_1 cache", "a q4_1 cache (--kv-dtype q4_1)"},
    {"a q5_0 cache", "a q5_0 cache (--kv-dtype q5_0)"},
    {"a q5_1 cache", "a q5_1 cache (--kv-dtype q5_1)"},
    {"a iq4_nl cache", "an iq4_nl cache (--kv-dtype iq4_nl)"},
    {NULL, NULL},
};

const cli_term cli_layer_terms[] = {
    {"desc->num_kv_heads", "Hkv"}, {"desc->num_heads", "H"},
    {"desc->embed_dim", "Dm"},     {"desc->kv_dim", "the keys' and values' features (Dm)"},
    {"desc->head_dim", "Dh"},      {"desc->v_head_dim", "Dv (Dh)"},
    {"desc->weight_dtype ", ""},   {NULL, NULL},
};

static bool ident_char(char c) { return isalnum((unsigned char)c) || c == '_'; }

/* Whether `msg` starts with `name` as a whole name (not the start of a
 * longer identifier). */
static bool starts_with_name(const char *msg, const char *name, size_t len)
{
    return strncmp(msg, name, len) == 0 && !(ident_char(name[len - 1]) && ident_char(msg[len]));
}

/* "args->x" followed by ".shape[d]", ".rank" or ".dtype" where x is an
 * input the user gave: written in its terms; the bytes of msg taken, or 0. */
static size_t input_name(const char *msg, const cli_input *inputs, int n_inputs, char *out,
                         size_t size)
{
    if (strncmp(msg, "args->", 6) != 0)
        return 0;
    for (int i = 0; i < n_inputs; i++) {
        if (!inputs[i].path)
            continue;
        char canon[32]; /* "--key-padding" -> "key_padding" */
        snprintf(canon, sizeof canon, "%s", inputs[i].arg ? inputs[i].arg : inputs[i].flag + 2);
        for (char *c = canon; *c; c++)
            if (*c == '-')
                *c = '_';
        size_t len = strlen(canon);
        if (!starts_with_name(msg + 6, canon, len))
            continue;
        const char *rest = msg + 6 + len;
        const cli_input *in = &inputs[i];
        unsigned d;
        int used = 0;
        if (sscanf(rest, ".shape[%u]%n", &d, &used) == 1 && used > 0) {
            /* the library's dimension d is the file's after a swap */
            int file_d = (int)d == in->swapped[0]   ? in->swapped[1]
                         : (int)d == in->swapped[1] ? in->swapped[0]
                                                    : (int)d;
            snprintf(out, size, "dimension %d of %s (%s)", file_d, in->flag, in->path);
            return 6 + len + (size_t)used;
        }
        if (sscanf(rest, "[%u]%n", &d, &used) == 1 && used > 0) { /* the offsets' */
            snprintf(out, size, "element %u of %s (%s)", d, in->flag, in->path);
            return 6 + len + (size_t)used;
        }
        const char *field = strncmp(rest, ".rank", 5) == 0    ? "rank"
                            : strncmp(rest, ".dtype", 6) == 0 ? "dtype"
                                                              : NULL;
        if (field) {
            snprintf(out, size, "the %s of %s (%s)", field, in->flag, in->path);
            return 6 + len + 1 + strlen(field);
        }
        snprintf(out, size, "%s (%s)", in->flag, in->path);
        return 6 + len;
    }
    return 0;
}

void cli_translate(const char *msg, const cli_input *inputs, int n_inputs, const cli_term *terms,
                   char *out, size_t size)
{
    static const char *const structs[] = {"args->", "desc->", "weights->"};
    size_t o = 0;
    out[0] = '\0';
    while (*msg && o + 1 < size) {
        char piece[1024] = "";
        size_t took = input_name(msg, inputs, n_inputs, piece, sizeof piece);
        for (int t = 0; !took && terms && terms[t].library; t++) {
            size_t len = strlen(terms[t].library);
            if (starts_with_name(msg, terms[t].library, len)) {
                snprintf(piece, sizeof piece, "%s", terms[t].user);
                took = len;
            }
        }
        for (size_t s = 0; !took && s < sizeof structs / sizeof structs[0]; s++)
            if (strncmp(msg, structs[s], strlen(structs[s])) == 0)
                took = strlen(structs[s]); /* a name with no term: without its struct */
        if (!took) {
            piece[0] = *msg;
            piece[1] = '\0';
            took = 1;
        }
        o += (size_t)snprintf(out + o, size - o, "%s", piece);
        msg += took;
    }
}

void cli_report_error(vkattn_context *ctx, vkattn_result r, const cli_input *inputs, int n_inputs)
{
    char out[2048];
    cli_translate(vkattn_context_last_error(ctx), inputs, n_inputs, cli_command_terms, out,
                  sizeof out);
    cli_error("%s [%s]", out, vkattn_result_name(r));
}
