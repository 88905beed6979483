/* The cases' random inputs and their counts of visible pairs, shared by
 * the forward cases (bench_cases.c) and the backward ones
 * (bench_backward.c). */
#include "bench_runner.h"
#include "bench_common.h"

#include <stdlib.h>

/* A buffer of n random values in [-1, 1) stored as dtype, owned by r. */
vkattn_buffer *bench_random_buffer(bench_runner *r, uint64_t n, vkattn_dtype dt, uint64_t seed)
{
    bool q8 = dt == VKATTN_DTYPE_Q8_0; /* f32 values quantized (n: whole blocks) */
    size_t es = q8 ? 4 : vkattn_dtype_size(dt);
    uint64_t bytes = q8 ? vkattn_dtype_row_bytes(dt, n) : n * es;
    void *host = malloc(n * es);
    if (!host)
        bench_die(NULL, "out of host memory");
    for (uint64_t i = 0; i < n; i++) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        float v = (float)(seed >> 40) / (float)(1u << 24) * 2.0f - 1.0f;
        if (dt == VKATTN_DTYPE_F16)
            ((uint16_t *)host)[i] = vkattn_f32_to_f16(v);
        else if (dt == VKATTN_DTYPE_BF16)
            ((uint16_t *)host)[i] = vkattn_f32_to_bf16(v);
        else
            ((float *)host)[i] = v;
    }
    if (q8) {
        void *blocks = malloc(bytes);
        char err[256];
        if (!blocks || vkattn_ref_quantize(dt, host, n, blocks, err, sizeof err) != VKATTN_SUCCESS)
            bench_die(NULL, "quantizing a q8_0 operand");
        free(host);
        host = blocks;
    }
    vkattn_buffer *b = NULL;
    vkattn_buffer_desc d = {.size = bytes};
    if (r->nbuffers == (int)(sizeof r->buffers / sizeof r->buffers[0]))
        bench_die(NULL, "too many buffers for one case");
    BENCH_CHECK(r->ctx, vkattn_buffer_create(r->ctx, &d, &b), "creating a buffer");
    BENCH_CHECK(r->ctx, vkattn_buffer_upload(b, 0, host, bytes), "uploading a buffer");
    free(host);
    r->buffers[r->nbuffers++] = b;
    return b;
}

vkattn_tensor bench_random_tensor(bench_runner *r, vkattn_dtype dt, uint32_t rank,
                                  const int64_t *shape, uint64_t seed)
{
    uint64_t n = 1;
    for (uint32_t i = 0; i < rank; i++)
        n *= (uint64_t)shape[i];
    return vkattn_tensor_make(bench_random_buffer(r, n, dt, seed), 0, dt, rank, shape);
}

/* Visible (query, key) pairs of one head under bottom-right causality and
 * a sliding window (0: none): query i at i' = i + tk - tq sees key j iff
 * j <= i' (causal) and i' - j < window (and, without causal, j - i' <
 * window). */
double bench_visible_pairs(uint32_t tq, uint32_t tk, bool causal, uint32_t window)
{
    if (!causal && !window)
        return (double)tq * tk;
    double pairs = 0;
    for (uint32_t i = 0; i < tq; i++) {
        int64_t pos = (int64_t)i + tk - tq;
        int64_t first = window ? pos - window + 1 : 0;
        int64_t last = causal ? pos : window ? pos + window - 1 : (int64_t)tk - 1;
        first = first < 0 ? 0 : first;
        last = last > (int64_t)tk - 1 ? (int64_t)tk - 1 : last;
        pairs += last < first ? 0 : (double)(last - first + 1);
    }
    return pairs;
}
