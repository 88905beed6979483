/* vkattn mha --prefill: the layer's forward pass as decode steps through a
 * KV cache. */
#include "cli_mha_steps.h"

#include <stdlib.h>

vkattn_result cli_mha_run_steps(vkattn_context *ctx, vkattn_mha *layer,
                                const vkattn_mha_forward_args *fa, vkattn_dtype dtype,
                                vkattn_dtype kv_dtype, uint32_t prefill, uint32_t paged_block,
                                uint32_t kv_splits, const cli_device_options *o)
{
    const vkattn_mha_desc *d = vkattn_mha_config(layer);
    uint32_t batch = (uint32_t)fa->x.shape[0], tq = (uint32_t)fa->x.shape[1];
    vkattn_kv_cache_desc cd = {.num_kv_heads = d->num_kv_heads,
                               .num_heads = d->num_heads,
                               .head_dim = d->head_dim,
                               .v_head_dim = d->v_head_dim,
                               .dtype = kv_dtype,
                               .max_sequences = batch,
                               .capacity = tq,
                               .block_size = paged_block};
    if (paged_block && d->window) {
        /* A windowed layer's paged cache gives back the blocks that fell out
         * of the window. Its default pool is sized for steps of at most a
         * block; the prefill step may be longer: a sequence then holds the
         * W - 1 tokens before the last step, that step and the next, which
         * span one block more than they fill (kv_cache.h). */
        uint64_t step = prefill > paged_block ? prefill : paged_block;
        uint64_t per = ((uint64_t)d->window - 1 + 2 * step + paged_block - 1) / paged_block + 1;
        uint64_t width = ((uint64_t)tq + paged_block - 1) / paged_block;
        cd.window = d->window;
        cd.num_blocks = (uint32_t)((per < width ? per : width) * batch);
    }
    vkattn_kv_cache *cache = NULL;
    vkattn_result r = vkattn_kv_cache_create(ctx, &cd, &cache);
    uint32_t *seqs = calloc(batch, sizeof *seqs);
    if (!seqs)
        r = VKATTN_ERROR_OUT_OF_HOST_MEMORY;
    for (uint32_t b = 0; seqs && b < batch; b++)
        seqs[b] = b;
    if (r == VKATTN_SUCCESS && o->tune) {
        vkattn_tune_progress_fn progress = cli_tune_progress(o);
        r = vkattn_mha_step_tune(
            layer, &(vkattn_mha_step_tune_args){cache, batch, prefill, prefill, progress});
        if (r == VKATTN_SUCCESS && tq > prefill)
            r = vkattn_mha_step_tune(layer,
                                     &(vkattn_mha_step_tune_args){cache, batch, 1, tq, progress});
        if (r == VKATTN_SUCCESS)
            r = cli_save_tuning(ctx, o);
    }
    size_t es = vkattn_dtype_size(dtype);
    for (uint32_t t = 0; r == VKATTN_SUCCESS && t < tq; t = t ? t + 1 : prefill) {
        uint32_t n = t ? 1 : prefill;
        vkattn_mha_step_args sa = {.cache = cache,
                                   .batch = batch,
                                   .sequences = seqs,
                                   .x = fa->x,
                                   .y = fa->y,
                                   .kv_splits = kv_splits,
                                   .head_mask = fa->head_mask};
        /* [B, n, Dm] views of the full [B, Tq, Dm] tensors at token t,
         * through their strides (--seq-first's [Tq, B, Dm] storage), or
         * the contiguous ones where they have the defaults */
        for (int k = 0; k < 2; k++) {
            vkattn_tensor *v = k ? &sa.y : &sa.x;
            if (v->strides[0] == 0 && v->strides[1] == 0 && v->strides[2] == 0) {
                v->strides[0] = (int64_t)tq * d->embed_dim;
                v->strides[1] = d->embed_dim;
                v->strides[2] = 1;
            }
            v->shape[1] = n;
            v->offset += (uint64_t)t * v->strides[1] * es;
        }
        r = vkattn_mha_step(layer, &sa);
    }
    free(seqs);
    vkattn_kv_cache_destroy(cache);
    return r;
}
