/* What test_attention_backward.c and its errors file share: a case, its
 * host data, and the forward's args on the device and the host. */
#ifndef VKATTN_TEST_ATTENTION_BACKWARD_H
#define VKATTN_TEST_ATTENTION_BACKWARD_H

#include "test_util.h"

enum { BWD_MASK_NONE, BWD_MASK_FLOAT, BWD_MASK_HIDE_ROW, BWD_MASK_ATTENDS, BWD_MASK_BLOCKS };

typedef struct bwd_case {
    uint32_t B, Hq, Hkv, Tq, Tk, Dk, Dv;
    vkattn_dtype dt, grad_dt; /* q, k, v, out, dout; dq, dk, dv */
    bool causal, top_left;
    uint32_t window;
    float softcap, scale, max_bias, dropout;
    bool sinks, slopes, padding;
    int mask; /* BWD_MASK_* */
} bwd_case;

/* Host data (rounded to the case's dtype), shapes as int64 arrays. */
typedef struct bwd_data {
    float *q, *k, *v, *dout, *mask, *sinks, *slopes;
    uint8_t *bmask, *pad;
    size_t nq, nk, nv, no, nm, nl;
    int64_t qs[4], ks[4], vs[4], os[4], ms[4], ls[3], hs[1], ps[2];
} bwd_data;

typedef struct bwd_buffers {
    vkattn_buffer *q, *k, *v, *out, *lse, *dout, *mask, *pad, *sinks, *slopes;
} bwd_buffers;

void bwd_make_data(const bwd_case *c, uint64_t seed, bwd_data *d);
void bwd_free_data(bwd_data *d);
/* Masks and modifiers of the case into both args (their buffers in bb). */
void bwd_forward_args(const bwd_case *c, const bwd_data *d, vkattn_context *ctx, bwd_buffers *bb,
                      vkattn_attention_args *a, vkattn_ref_attention_args *r);

/* test_attention_backward_errors.c */
void test_backward_errors(void **state);

#endif
