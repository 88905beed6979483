/* attention's packed ragged sequences (cli_offsets.h). */
#include "cli_offsets.h"
#include "cli.h"

#include <stdio.h>
#include <string.h>

const char cli_offsets_help[] =
    "Packed ragged sequences (FlashAttention's varlen form, cu_seqlens):\n"
    "  --q-offsets QO.npy    int32 (or int64) [B+1]: Q holds B sequences one after the\n"
    "                        other, [1,Hq,sum Tq,Dk], sequence i's queries at tokens\n"
    "                        [QO[i], QO[i+1]) (QO[0] 0, never decreasing, QO[B] sum Tq);\n"
    "                        each attends only to its own keys, as one batch row would\n"
    "                        (--causal and the modifiers apply per sequence); O and\n"
    "                        --lse-out are packed alike. Alone: self-attention, K and V\n"
    "                        [1,Hkv,sum Tq,D] split by QO too. Not with --mask,\n"
    "                        --key-padding or --weights-out; --head-mask may be [B,Hq]\n"
    "  --k-offsets KO.npy    int32 (or int64) [B+1]: K's and V's own offsets (cross-\n"
    "                        attention: K, V [1,Hkv,sum Tk,D]); needs --q-offsets\n";

static const char expected[] = "offsets are int32 (or int64) [B+1], sequence i's tokens "
                               "[offsets[i], offsets[i+1])";

int cli_offsets_check_given(const char *command, const cli_input *q_offsets,
                            const cli_input *k_offsets, const cli_offsets_conflict *conflicts,
                            int n_conflicts)
{
    if (k_offsets->path && !q_offsets->path) {
        cli_error("%s: %s needs %s: packed sequences are split by the queries' offsets, the "
                  "keys' (cross-attention) by %s too",
                  command, k_offsets->flag, q_offsets->flag, k_offsets->flag);
        return -1;
    }
    if (!q_offsets->path)
        return 0;
    for (int k = 0; k < n_conflicts; k++)
        if (conflicts[k].given) {
            cli_error("%s: %s cannot be combined with %s: %s", command, conflicts[k].flag,
                      q_offsets->flag, conflicts[k].why);
            return -1;
        }
    return 0;
}

/* One offsets file: int32, or int64 narrowed in its place; rank 1, at
 * least 2 values. */
static int load_one(cli_input *in)
{
    if (cli_read_npy(in, expected) != 0)
        return -1;
    npy_array *a = &in->array;
    if (a->dtype != NPY_I32 && a->dtype != NPY_I64) {
        cli_error("%s %s: dtype is %s; %s", in->flag, in->path, npy_dtype_name(a->dtype), expected);
        return -1;
    }
    if (a->rank != 1 || a->shape[0] < 2) {
        char shape[128];
        cli_shape_text(a, shape, sizeof shape);
        cli_error("%s %s: shape %s; %s, B >= 1", in->flag, in->path, shape, expected);
        return -1;
    }
    if (a->shape[0] - 1 > (int64_t)UINT32_MAX) {
        cli_error("%s %s: %lld sequences; at most %u", in->flag, in->path,
                  (long long)(a->shape[0] - 1), UINT32_MAX);
        return -1;
    }
    if (a->dtype == NPY_I32)
        return 0;
    const int64_t *wide = a->data;
    int32_t *narrow = a->data;
    for (int64_t i = 0; i < a->shape[0]; i++) {
        int64_t v = wide[i];
        if (v < INT32_MIN || v > INT32_MAX) {
            cli_error("%s %s: element %lld is %lld, past int32 (offsets are token indices)",
                      in->flag, in->path, (long long)i, (long long)v);
            return -1;
        }
        narrow[i] = (int32_t)v; /* in place: element i of int32 ends before element i of int64 */
    }
    a->dtype = NPY_I32;
    a->nbytes = (size_t)a->shape[0] * 4;
    return 0;
}

int cli_offsets_load(cli_input *q_offsets, cli_input *k_offsets, cli_offsets *out)
{
    *out = (cli_offsets){0};
    if (!q_offsets->path)
        return 0;
    if (load_one(q_offsets) != 0 || (k_offsets->path && load_one(k_offsets) != 0))
        return -1;
    int64_t n = q_offsets->array.shape[0];
    if (k_offsets->path && k_offsets->array.shape[0] != n) {
        cli_error("%s %s: %lld offsets (%lld sequences) but %s %s has %lld (%lld sequences): "
                  "the keys' offsets split K and V into as many sequences as the queries'",
                  k_offsets->flag, k_offsets->path, (long long)k_offsets->array.shape[0],
                  (long long)k_offsets->array.shape[0] - 1, q_offsets->flag, q_offsets->path,
                  (long long)n, (long long)n - 1);
        return -1;
    }
    out->sequences = (uint32_t)(n - 1);
    out->q = q_offsets->array.data;
    out->k = k_offsets->path ? k_offsets->array.data : NULL;
    return 0;
}

int cli_offsets_check_packed(const cli_input *in, const char *packed)
{
    const npy_array *a = &in->array;
    if (a->rank == 4 && a->shape[0] == 1)
        return 0;
    char shape[128];
    cli_shape_text(a, shape, sizeof shape);
    cli_error("%s %s: shape %s; with --q-offsets it is %s: the sequences lie one after the "
              "other along the tokens of one batch row",
              in->flag, in->path, shape, packed);
    return -1;
}

/* v within [1, hi] (hi >= 1), or 1. */
static int64_t clamp_tokens(int64_t v, int64_t hi) { return v < 1 ? 1 : v > hi ? hi : v; }

void cli_offsets_longest(const cli_offsets *o, int64_t q_total, int64_t k_total, int64_t *tq,
                         int64_t *tk)
{
    const int32_t *ko = o->k ? o->k : o->q;
    *tq = *tk = 0;
    for (uint32_t i = 0; i < o->sequences; i++) {
        int64_t nq = (int64_t)o->q[i + 1] - o->q[i], nk = (int64_t)ko[i + 1] - ko[i];
        *tq = nq > *tq ? nq : *tq;
        *tk = nk > *tk ? nk : *tk;
    }
    *tq = clamp_tokens(*tq, q_total > 1 ? q_total : 1);
    *tk = clamp_tokens(*tk, k_total > 1 ? k_total : 1);
}

const char cli_offsets_no_mask[] =
    "packed sequences take no mask (its shape has no packed form); each sequence attends only "
    "to its own keys, and --causal, --window and the other modifiers apply per sequence";
const char cli_offsets_no_padding[] =
    "packed sequences have no padding: the offsets say where each sequence's tokens are";
const char cli_offsets_no_weights[] = "the attention weights have no packed form";
