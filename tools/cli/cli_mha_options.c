/* vkattn mha's options against each other: the head report and pruning,
 * the modern decoder options, where the weights come from, their dtype. */
#include "cli_mha_job.h"

#include <stdio.h>
#include <string.h>

/* The options of --head-report, --report, --prune-heads, --save-weights
 * and --weights-png with the rest, and their files against every other
 * file: 0, or -1 after printing. */
int cli_mha_check_head_options(mha_job *m)
{
    if (cli_mha_measures_heads(m) && (m->prefill || m->in[HMASK].path)) {
        cli_error("mha: --head-report measures every head on the forward pass, unmasked: it "
                  "takes no %s",
                  m->prefill ? "--prefill" : "--head-mask");
        return -1;
    }
    if (m->context && !m->report) {
        cli_error("mha: --context needs --report");
        return -1;
    }
    const char *ext = m->save_weights ? strrchr(m->save_weights, '.') : NULL;
    if (m->save_weights && (!ext || strcmp(ext, ".safetensors") != 0)) {
        cli_error("mha: --save-weights \"%s\": expected a .safetensors path", m->save_weights);
        return -1;
    }
    if (m->weights_png && cli_viz_check_output("mha", "--weights-png", m->weights_png) != 0)
        return -1;
    return m->prune_text ? cli_parse_pruned_heads("--prune-heads", m->prune_text, m->heads,
                                                  &m->keep, &m->kept)
                         : 0;
}

/* The options of a modern decoder layer (QK-norm, RoPE, positions) with
 * each other and with the rest: 0, or -1 after printing. */
int cli_mha_check_layer_options(const mha_job *m)
{
    const cli_input *in = m->in;
    if (cli_rope_check_given(&m->rope, "mha", in[POS].path ? "--positions" : NULL) != 0)
        return -1;
    if (!in[QN].path != !in[KN].path) {
        cli_error("mha: %s needs %s: QK-norm normalises both Q and K",
                  in[QN].path ? "--q-norm" : "--k-norm", in[QN].path ? "--k-norm" : "--q-norm");
        return -1;
    }
    if (m->norm_eps > 0 && !in[QN].path) {
        cli_error("mha: --norm-eps needs --q-norm and --k-norm");
        return -1;
    }
    const char *decoder = m->rope.rope.theta > 0 ? "--rope-theta" : in[QN].path ? "--q-norm" : NULL;
    if (decoder && (in[KV].path || in[VALUE].path)) {
        cli_error("mha: %s is for self-attention layers: it takes no %s", decoder,
                  in[KV].path ? in[KV].flag : "--value");
        return -1;
    }
    if (in[POS].path && m->prefill) {
        cli_error("mha: --positions with --prefill: the decode steps take their positions from "
                  "the KV cache (cache length + t), so there are none to give");
        return -1;
    }
    if (m->job.lse_path) {
        cli_error("mha: --lse-out is for attention only: the layer's output projection mixes "
                  "the heads, so its rows have no single softmax (use vkattn attention)");
        return -1;
    }
    if (cli_mods_check_given(&m->mods, &m->job, &in[SLOPES]) != 0)
        return -1;
    if (m->job.causal_top_left && m->prefill) {
        cli_error("mha: --causal-top-left with --prefill: a KV cache's queries are its newest "
                  "tokens, so its steps are causal bottom-right aligned (use --causal)");
        return -1;
    }
    return 0;
}

/* The weights come from --weights or from --wq..--bo, not both; --prefix
 * only with --weights or --save-weights (the names it reads or writes),
 * --names only with --weights. 0, or -1 after printing. */
int cli_mha_check_weight_source(const mha_job *m)
{
    const cli_input *in = m->in;
    if (!in[WEIGHTS].path) {
        if ((m->prefix && !m->save_weights) || m->names != CLI_NAMES_AUTO) {
            cli_error("mha: %s needs --weights%s", m->prefix ? "--prefix" : "--names",
                      m->prefix ? " or --save-weights" : "");
            return -1;
        }
        return 0;
    }
    for (int k = WQ; k <= BO; k++)
        if (in[k].path) {
            cli_error("mha: --weights %s takes the weights and biases from the file: drop %s %s",
                      in[WEIGHTS].path, in[k].flag, in[k].path);
            return -1;
        }
    return 0;
}

/* --weight-dtype: one of f32 (with --dtype f32), f16, bf16, q8_0. */
int cli_mha_check_weight_dtype(const mha_job *m)
{
    const char *w = m->weight_dtype;
    if (!w)
        return 0;
    if (strcmp(w, "f32") && strcmp(w, "f16") && strcmp(w, "bf16") && strcmp(w, "q8_0")) {
        cli_error("mha: --weight-dtype \"%s\": expected f32, f16, bf16 or q8_0", w);
        return -1;
    }
    if (strcmp(w, "f32") == 0 && m->job.dtype != VKATTN_DTYPE_F32) {
        cli_error("mha: --weight-dtype f32 with --dtype %s: the layer then keeps its weights "
                  "in %s, bf16 or q8_0",
                  vkattn_dtype_name(m->job.dtype), vkattn_dtype_name(m->job.dtype));
        return -1;
    }
    return 0;
}

int cli_mha_key_value_options(mha_job *m)
{
    cli_input *in = m->in;
    if (in[KEY].path && in[KV].path) {
        cli_error("mha: --key and --kv both name the keys' input: give --kv C.npy (keys and "
                  "values from C) or --key K.npy --value V.npy (each from its own)");
        return -1;
    }
    if (in[VALUE].path && !in[KEY].path) {
        cli_error("mha: --value %s needs --key (the keys' input of the values' tokens)%s",
                  in[VALUE].path, in[KV].path ? ": --kv gives keys and values from one input" : "");
        return -1;
    }
    if (in[KEY].path) { /* from here on the keys' input, named as given */
        in[KV].path = in[KEY].path;
        in[KV].flag = in[KEY].flag;
        in[KEY].path = NULL;
    }
    return 0;
}
