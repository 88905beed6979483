/* attention's --q-offsets and --k-offsets: packed ragged sequences
 * (FlashAttention's cu_seqlens; vkattn_attention_args.sequences). Q holds
 * B sequences one after the other along its token axis, [1,Hq,sum Tq,Dk],
 * K and V theirs, [1,Hkv,sum Tk,D]; sequence i's queries are tokens
 * [QO[i], QO[i+1]) and its keys [KO[i], KO[i+1]) (KO: QO without
 * --k-offsets). The offsets' values are the library's to check (starting
 * at 0, never decreasing, ending at the token count); the CLI checks what
 * the library cannot see: the files' dtypes and lengths. */
#ifndef VKATTN_CLI_OFFSETS_H
#define VKATTN_CLI_OFFSETS_H

#include "cli_io.h"

#include <stdbool.h>

/* The loaded offsets, as the library takes them. */
typedef struct cli_offsets {
    uint32_t sequences; /* B; 0: not packed */
    const int32_t *q;   /* [B + 1], --q-offsets' data */
    const int32_t *k;   /* [B + 1], --k-offsets' data; NULL: q (self-attention) */
} cli_offsets;

/* An option a packed call cannot take: its flag, whether it was given and
 * why it cannot be. */
typedef struct cli_offsets_conflict {
    const char *flag;
    bool given;
    const char *why;
} cli_offsets_conflict;

/* After parsing: --k-offsets only with --q-offsets, and none of the
 * `conflicts` with them. 0, or -1 after printing, naming both flags. */
int cli_offsets_check_given(const char *command, const cli_input *q_offsets,
                            const cli_input *k_offsets, const cli_offsets_conflict *conflicts,
                            int n_conflicts);
/* Loads --q-offsets and (when given) --k-offsets into their arrays: int32,
 * or int64 narrowed to int32 (every value must fit), rank 1 of B + 1 >= 2
 * values, both of one length; *out then points at them. 0, or -1 after
 * printing, naming the flag and the file. */
int cli_offsets_load(cli_input *q_offsets, cli_input *k_offsets, cli_offsets *out);
/* A loaded Q or K (`in`) is one batch row of rank 4, as packed sequences
 * are (`packed` says the shape: "[1,Hq,sum Tq,Dk]"). 0, or -1 after
 * printing, naming the file and --q-offsets. */
int cli_offsets_check_packed(const cli_input *in, const char *packed);
/* The longest sequence's queries and keys (for the tuner, before the
 * library checked the offsets: each kept within 1 and its total). */
void cli_offsets_longest(const cli_offsets *o, int64_t q_total, int64_t k_total, int64_t *tq,
                         int64_t *tk);

extern const char cli_offsets_help[];
/* Why --mask, --key-padding and the weights' outputs cannot go with
 * offsets (the conflicts both commands list). */
extern const char cli_offsets_no_mask[], cli_offsets_no_padding[], cli_offsets_no_weights[];

#endif
