/* What test_mha_backward.c and its errors file share: a case, its host
 * data with the reference's gradients, and the layer's args on the device. */
#ifndef VKATTN_TEST_MHA_BACKWARD_H
#define VKATTN_TEST_MHA_BACKWARD_H

#include "test_util.h"

typedef struct mbwd_case {
    uint32_t b, tq, tk, dm, dkv, dvin, hq, hkv, dh, dv;
    vkattn_dtype dtype;
    uint32_t cross; /* 0 self-attention, 1 kv, 2 kv and value */
    bool bias, qk_norm, rope, gptj, positions, causal, top_left, mask, padding, sinks, alibi;
    uint32_t window;
    float softcap, scale, dropout;
} mbwd_case;

/* The gradients, in the order the tests walk them. */
enum {
    MB_DX,
    MB_DKV,
    MB_DVALUE,
    MB_WQ,
    MB_WK,
    MB_WV,
    MB_WO,
    MB_BQ,
    MB_BK,
    MB_BV,
    MB_BO,
    MB_QN,
    MB_KN,
    MB_SINKS,
    MB_COUNT
};
extern const char *const mbwd_names[MB_COUNT];

typedef struct mbwd_data {
    vkattn_mha_desc desc;
    vkattn_mha_weights weights; /* f32, rounded to the layer's dtype */
    float *wq, *wk, *wv, *wo, *bq, *bk, *bv, *bo, *qn, *kn, *sinks;
    float *x, *kv, *value, *dy, *mask, *want_y;
    uint8_t *pad;
    int32_t *positions;
    size_t nx, nkv, nvalue;
    int64_t xs[3], kvs[3], vs[3], ms[2], ps[2];
    size_t n[MB_COUNT]; /* elements of each gradient (0: the case has none) */
    int64_t shape[MB_COUNT][3];
    uint32_t rank[MB_COUNT];
    float *want[MB_COUNT]; /* the reference's */
    vkattn_ref_mha_backward_args ref;
} mbwd_data;

void mbwd_make(const mbwd_case *c, uint64_t seed, mbwd_data *d);
void mbwd_free(mbwd_data *d);

typedef struct mbwd_device {
    vkattn_buffer *x, *kv, *value, *dy, *y, *mask, *pad, *positions;
    vkattn_buffer *grad[MB_COUNT]; /* NaN-filled, NULL where the case has none */
    vkattn_mha_forward_args fwd;
    vkattn_mha_backward_args bwd; /* bwd.forward = fwd, every gradient given */
} mbwd_device;

void mbwd_upload(vkattn_context *ctx, const mbwd_case *c, const mbwd_data *d, mbwd_device *dev);
void mbwd_device_free(mbwd_device *dev);

void test_mha_backward_errors(void **state);

#endif
