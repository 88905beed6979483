/* Frame budgets: cutting an attention call into pieces recorded separately,
 * and the work of each piece, so an engine can spread a long pass over
 * frames. Only views: a chunk is an ordinary attention call. */
#include "vkattn.h"

#include <stdio.h>
#include <string.h>

/* Default strides made explicit, so views can be taken. */
static vkattn_tensor with_strides(const vkattn_tensor *t)
{
    vkattn_tensor out = *t;
    bool all_zero = true;
    for (uint32_t i = 0; i < t->rank && i < VKATTN_MAX_RANK; i++)
        all_zero = all_zero && t->strides[i] == 0;
    if (all_zero && t->rank >= 1 && t->rank <= VKATTN_MAX_RANK) {
        /* overflowing shapes keep zero strides: the op refuses them */
        vkattn_tensor c = vkattn_tensor_make(t->buffer, t->offset, t->dtype, t->rank, t->shape);
        memcpy(out.strides, c.strides, sizeof out.strides);
    }
    return out;
}

/* Restricts dimension `dim` of a tensor to [begin, begin + count). */
static void narrow(vkattn_tensor *t, uint32_t dim, int64_t begin, int64_t count)
{
    /* unsigned, so any caller's numbers wrap instead of overflowing: the
     * chunk is an ordinary call, checked by the op that takes it */
    uint64_t skip = (uint64_t)begin * (uint64_t)t->strides[dim];
    /* (quantized k and v: strides count values, whole blocks) */
    t->offset += vkattn_dtype_block_size(t->dtype) > 1 ? vkattn_dtype_row_bytes(t->dtype, skip)
                                                       : skip * vkattn_dtype_size(t->dtype);
    t->shape[dim] = count;
}

vkattn_result vkattn_attention_chunk(const vkattn_attention_args *args, uint32_t q_begin,
                                     uint32_t q_end, vkattn_attention_args *chunk, char *error,
                                     size_t error_size)
{
#define FAIL(...)                                     \
    do {                                              \
        if (error)                                    \
            snprintf(error, error_size, __VA_ARGS__); \
        return VKATTN_ERROR_INVALID_ARGUMENT;         \
    } while (0)
    if (!args || !chunk)
        FAIL("vkattn_attention_chunk: %s is NULL", !args ? "args" : "chunk");
    if (args->q.rank != 4 || args->k.rank != 4 || args->out.rank != 4)
        FAIL("vkattn_attention_chunk: q, k and out must be rank 4 (got %u, %u, %u)", args->q.rank,
             args->k.rank, args->out.rank);
    int64_t tq = args->q.shape[2], tk = args->k.shape[2];
    if (q_begin >= q_end || (int64_t)q_end > tq)
        FAIL("vkattn_attention_chunk: queries [%u, %u) are not a non-empty part of 0..%lld",
             q_begin, q_end, (long long)tq);
    /* Keys [lo, hi) are all the chunk's rows can see; query i sits at
     * i + shift. The chunk keeps every i' - j: bottom-right aligned with K
     * ending at key q_end + shift (any start), or top-left with K starting
     * at key q_begin + shift (any end). */
    const int64_t shift = args->causal_align == VKATTN_CAUSAL_TOP_LEFT ? 0 : tk - tq;
    const int64_t w = args->window, qb = q_begin, qe = q_end;
    const bool alibi = args->alibi_slopes.buffer || args->alibi_max_bias > 0.0f;
    int64_t lo = w ? qb + shift - w + 1 : 0, hi = tk;
    lo = lo < 0 ? 0 : lo;
    if (args->causal)
        hi = qe + shift;
    else if (w)
        hi = qe - 1 + shift + w;
    hi = hi > tk ? tk : hi;
    vkattn_causal_align align = args->causal_align;
    bool causal = args->causal;
    int64_t k0 = 0, k1 = tk;
    if (!causal && !w && !alibi) {
        /* positions do not matter: every key, as the whole call */
    } else if (causal && !w && !alibi && qb + shift >= tk - 1) {
        causal = false; /* every row sees every key */
    } else if (qe + shift <= tk && qe + shift >= hi) {
        align = VKATTN_CAUSAL_BOTTOM_RIGHT, k0 = lo, k1 = qe + shift;
        if (k1 < 1) /* a call needs a key; the whole-call rule is kept by any chunk reaching one */
            FAIL("vkattn_attention_chunk: queries [%u, %u) see no key (the call has %lld more "
                 "queries than keys): let the chunk end after query %lld",
                 q_begin, q_end, (long long)(tq - tk), (long long)(tq - tk));
    } else if (qb + shift >= 0 && qb + shift <= lo && hi > qb + shift) {
        align = VKATTN_CAUSAL_TOP_LEFT, k0 = qb + shift, k1 = hi;
    } else {
        FAIL("vkattn_attention_chunk: queries [%u, %u) cannot be a call of their own: a "
             "narrowed call cannot place them at their positions (%lld..%lld) and still reach "
             "keys %lld..%lld (a non-causal window or ALiBi); chunk causal calls, or compute "
             "this one whole",
             q_begin, q_end, (long long)(qb + shift), (long long)(qe - 1 + shift), (long long)lo,
             (long long)hi - 1);
    }
    const bool cut = k0 > 0 || k1 < tk;
    if (args->weights.buffer && (args->causal || cut))
        FAIL("vkattn_attention_chunk: a %s call's weights cannot be chunked (a chunk does not "
             "write the weights of the keys it does not see); compute them unchunked",
             args->causal ? "causal" : "windowed");
    *chunk = *args;
    chunk->causal = causal;
    chunk->causal_align = align;
    int64_t rows = (int64_t)q_end - q_begin, keys = k1 - k0;
    chunk->q = with_strides(&args->q);
    narrow(&chunk->q, 2, q_begin, rows);
    chunk->out = with_strides(&args->out);
    narrow(&chunk->out, 2, q_begin, rows);
    chunk->k = with_strides(&args->k);
    narrow(&chunk->k, 2, k0, keys);
    chunk->v = with_strides(&args->v);
    narrow(&chunk->v, 2, k0, keys);
    if (args->mask.buffer) {
        uint32_t r = args->mask.rank;
        if (r < 2 || r > 4)
            FAIL("vkattn_attention_chunk: args->mask.rank %u is not 2, 3 or 4", r);
        chunk->mask = with_strides(&args->mask);
        if (chunk->mask.shape[r - 2] != 1) /* size 1 broadcasts: kept whole */
            narrow(&chunk->mask, r - 2, q_begin, rows);
        if (chunk->mask.shape[r - 1] != 1)
            narrow(&chunk->mask, r - 1, k0, keys);
    }
    if (args->key_padding.buffer) {
        if (args->key_padding.rank != 2)
            FAIL("vkattn_attention_chunk: args->key_padding.rank %u is not 2",
                 args->key_padding.rank);
        chunk->key_padding = with_strides(&args->key_padding);
        narrow(&chunk->key_padding, 1, k0, keys);
    }
    if (args->weights.buffer) { /* whole rows */
        uint32_t r = args->weights.rank;
        if (r != 3 && r != 4)
            FAIL("vkattn_attention_chunk: args->weights.rank %u is not 3 or 4", r);
        chunk->weights = with_strides(&args->weights);
        narrow(&chunk->weights, r - 2, q_begin, rows);
    }
    if (args->lse.buffer) { /* sinks and slopes are per head: whole */
        if (args->lse.rank != 3)
            FAIL("vkattn_attention_chunk: args->lse.rank %u is not 3", args->lse.rank);
        chunk->lse = with_strides(&args->lse);
        narrow(&chunk->lse, 2, q_begin, rows);
    }
    return VKATTN_SUCCESS;
#undef FAIL
}

double vkattn_attention_flops(const vkattn_attention_args *args, uint32_t q_begin, uint32_t q_end)
{
    if (!args || args->q.rank != 4 || args->k.rank != 4 || q_begin >= q_end)
        return 0;
    /* Q.K^T: 2 Dk per pair, P.V: 2 Dv (v's head dim may differ) */
    double b = (double)args->q.shape[0], hq = (double)args->q.shape[1],
           d = 2.0 * (double)args->q.shape[3] +
               2.0 * (double)(args->v.rank == 4 ? args->v.shape[3] : args->q.shape[3]);
    int64_t tq = args->q.shape[2], tk = args->k.shape[2];
    const int64_t shift = args->causal_align == VKATTN_CAUSAL_TOP_LEFT ? 0 : tk - tq;
    const int64_t w = args->window;
    double pairs = 0;
    for (int64_t i = q_begin; i < (int64_t)q_end && i < tq; i++) {
        int64_t pos = i + shift, lo = w ? pos - w + 1 : 0, hi = tk;
        if (args->causal)
            hi = pos + 1;
        else if (w)
            hi = pos + w;
        lo = lo < 0 ? 0 : lo;
        hi = hi > tk ? tk : hi;
        pairs += hi > lo ? (double)(hi - lo) : 0.0;
    }
    return b * hq * d * pairs;
}
