/* vkattn mha --seq-offsets / --kv-offsets: packed ragged sequences through
 * the layer (vkattn_mha_forward_args.sequences). X holds B sequences one
 * after the other, [1, sum T, Dm], and Y likewise; C (--kv, or --key and
 * --value) [1, sum Tk, ...] split by --kv-offsets (default --seq-offsets).
 * The offsets' values are the library's to check; here what it cannot
 * see: the files, and the options that have no packed form. */
#include "cli_mha_job.h"

#include <stdio.h>

const char cli_mha_packed_help[] =
    "Packed ragged sequences (FlashAttention's varlen form, cu_seqlens):\n"
    "  --seq-offsets O.npy   int32 (or int64) [B+1]: X holds B sequences one after the\n"
    "                        other, [1,sum T,Dm], sequence i's tokens at [O[i], O[i+1])\n"
    "                        (O[0] 0, never decreasing, O[B] sum T); Y [1,sum T,Dm] alike.\n"
    "                        Each attends only to its own keys (--causal, the modifiers\n"
    "                        and the appended rows per sequence; RoPE positions restart\n"
    "                        at 0 with each, or --positions [1,sum T]); --head-mask may\n"
    "                        be [B,H]. Not with --mask, --key-padding, --weights-out,\n"
    "                        --weights-png, --seq-first, --prefill, --head-report,\n"
    "                        --head-report-json or --prune-heads\n"
    "  --kv-offsets KO.npy   int32 (or int64) [B+1]: with --kv (or --key/--value) C\n"
    "                        [1,sum Tk,Dkv], sequence i's keys at [KO[i], KO[i+1]);\n"
    "                        default --seq-offsets (then C has X's token count)\n";

int cli_mha_packed_check_given(const mha_job *m)
{
    const cli_input *in = m->in;
    static const char untested[] = "not with --seq-offsets yet (head importance over packed "
                                   "sequences is untested)";
    const cli_offsets_conflict conflicts[] = {
        {"--mask", in[MASK].path != NULL, cli_offsets_no_mask},
        {"--key-padding", in[PAD].path != NULL, cli_offsets_no_padding},
        {"--weights-out", m->job.weights_path != NULL, cli_offsets_no_weights},
        {"--weights-png", m->weights_png != NULL, cli_offsets_no_weights},
        {"--seq-first", m->job.seq_first,
         "packed X is one batch row, [1,sum T,Dm], read batch first (not yet through "
         "--seq-first's strides)"},
        {"--prefill", m->prefill != 0,
         "the KV cache's steps decode batch rows; packed sequences through them are not "
         "supported yet"},
        {"--head-report", m->head_report, untested},
        {"--head-report-json", m->report_json != NULL, untested},
        {"--prune-heads", m->prune_text != NULL, untested},
    };
    if (cli_offsets_check_given("mha", &in[SEQOFF], &in[KVOFF], conflicts,
                                (int)(sizeof conflicts / sizeof conflicts[0])) != 0)
        return -1;
    if (in[KVOFF].path && !in[KV].path) {
        cli_error("mha: --kv-offsets needs --kv (or --key and --value): in self-attention the "
                  "keys are X's own tokens, split by --seq-offsets");
        return -1;
    }
    return 0;
}

/* A loaded X, C or V (`in`) is one batch row, [1, tokens, features]. */
static int check_one_row(const cli_input *in, const char *packed)
{
    const npy_array *a = &in->array;
    if (!in->path || (a->rank == 3 && a->shape[0] == 1))
        return 0;
    char shape[128];
    cli_shape_text(a, shape, sizeof shape);
    cli_error("%s %s: shape %s; with --seq-offsets it is %s: the sequences lie one after the "
              "other along the tokens of one batch row",
              in->flag, in->path, shape, packed);
    return -1;
}

int cli_mha_packed_load(mha_job *m)
{
    cli_input *in = m->in;
    if (cli_offsets_load(&in[SEQOFF], &in[KVOFF], &m->offsets) != 0)
        return -1;
    if (!m->offsets.sequences)
        return 0;
    return check_one_row(&in[X], "[1,sum T,Dm]") || check_one_row(&in[KV], "[1,sum Tk,Dkv]") ||
                   check_one_row(&in[VALUE], "[1,sum Tk,Dvin]")
               ? -1
               : 0;
}
