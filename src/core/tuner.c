/* The tuner harness: times an op's candidate configurations on the device
 * (GPU timestamps, the median of repetitions after a warm-up) and makes the
 * random operands they run on. The ops' tuners (vkattn_*_tune) drive it and
 * store the winners in the tuning table. */
#include "core/tuner.h"

#include "core/buffer.h"
#include "core/host.h"
#include "core/submit.h"
#include "spec/size_math.h"

#include <stdlib.h>
#include <string.h>

static int compare_floats(const void *a, const void *b)
{
    float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

/* One run of a candidate between the timer's timestamps. */
typedef struct timed_run {
    vkattn_timer *timer;
    vka_tuner_record_fn record;
    const void *problem, *candidate;
} timed_run;

static vkattn_result record_timed(vkattn_context *ctx, VkCommandBuffer cmd, const void *job)
{
    const timed_run *run = job;
    VKA_TRY(vkattn_cmd_timer_begin(run->timer, cmd, 0));
    VKA_TRY(run->record(ctx, cmd, run->problem, run->candidate));
    return vkattn_cmd_timer_end(run->timer, cmd, 0);
}

vkattn_result vka_tuner_measure(vkattn_context *ctx, uint32_t count, uint32_t reps,
                                vka_tuner_record_fn record, const void *problem,
                                const void *candidates, size_t candidate_size, uint32_t *best,
                                float *best_ms, const vka_tune_report *report)
{
    vkattn_tune_progress progress = {
        report ? report->op : "", report ? report->shape : "", 0, count, false, 0.0f};
    if (reps < 1 || reps > 32)
        reps = 5;
    vkattn_timer *timer = NULL;
    vkattn_result r = vkattn_timer_create(ctx, 1, &timer);
    if (r != VKATTN_SUCCESS)
        return r;
    float times[32];
    *best = UINT32_MAX;
    *best_ms = 0;
    for (uint32_t c = 0; c < count; c++) {
        if (report && report->fn) {
            progress.candidate = c + 1;
            progress.best_ms = *best == UINT32_MAX ? 0.0f : *best_ms;
            report->fn(&progress, report->user);
        }
        uint32_t ok = 0;
        for (uint32_t i = 0; i <= reps; i++) { /* i == 0: warm-up */
            timed_run run = {timer, record, problem,
                             (const char *)candidates + (size_t)c * candidate_size};
            double ms = 0;
            r = vka_submit_and_wait(ctx, record_timed, &run);
            if (r == VKATTN_SUCCESS)
                r = vkattn_timer_read_ms(timer, 0, &ms);
            if (r != VKATTN_SUCCESS)
                break;
            if (i > 0)
                times[ok++] = (float)ms;
        }
        if (r == VKATTN_ERROR_DEVICE_LOST)
            break;
        if (ok < reps)
            continue; /* this candidate cannot run here */
        qsort(times, ok, sizeof times[0], compare_floats);
        float median = times[ok / 2];
        vka_log(ctx, VKATTN_LOG_DEBUG, "tuning: candidate %u: %.3f ms", c, median);
        if (*best == UINT32_MAX || median < *best_ms) {
            *best = c;
            *best_ms = median;
        }
    }
    vkattn_timer_destroy(timer);
    if (report && report->fn && *best != UINT32_MAX) {
        progress.candidate = count;
        progress.done = true;
        progress.best_ms = *best_ms;
        report->fn(&progress, report->user);
    }
    if (*best == UINT32_MAX)
        return r != VKATTN_SUCCESS
                   ? r
                   : vka_fail(ctx, VKATTN_ERROR_UNSUPPORTED, "tuning: no candidate could run");
    ctx->last_error[0] = '\0'; /* failures of skipped candidates are not this call's */
    return VKATTN_SUCCESS;
}

/* q8_0 blocks of random values in [-1, 1): scale 1/127, random int8. */
static vkattn_result random_q8_0(vkattn_context *ctx, uint64_t count, uint32_t seed,
                                 vkattn_buffer **out)
{
    uint64_t bytes = vkattn_dtype_row_bytes(VKATTN_DTYPE_Q8_0, count);
    if (!bytes)
        return vka_fail(ctx, VKATTN_ERROR_INVALID_ARGUMENT,
                        "tuning: %llu q8_0 values are not whole blocks of 32",
                        (unsigned long long)count);
    vkattn_buffer_desc d = {.size = bytes};
    vkattn_buffer *b = NULL;
    vkattn_result r = vkattn_buffer_create(ctx, &d, &b);
    if (r != VKATTN_SUCCESS)
        return r;
    enum { BLOCKS = 1 << 12, BLOCK_BYTES = 34 };
    uint8_t *host = vka_alloc(ctx, BLOCKS * BLOCK_BYTES);
    if (!host)
        r = vka_fail(ctx, VKATTN_ERROR_OUT_OF_HOST_MEMORY, "out of host memory");
    uint16_t scale = vkattn_f32_to_f16(1.0f / 127.0f);
    uint32_t s = seed;
    uint64_t blocks = count / 32;
    for (uint64_t at = 0; host && at < blocks && r == VKATTN_SUCCESS; at += BLOCKS) {
        uint64_t n = blocks - at < BLOCKS ? blocks - at : BLOCKS;
        for (uint64_t i = 0; i < n; i++) {
            uint8_t *blk = host + i * BLOCK_BYTES;
            memcpy(blk, &scale, 2);
            for (int j = 0; j < 32; j++) {
                s = s * 1664525u + 1013904223u;
                blk[2 + j] = (uint8_t)(s >> 24);
            }
        }
        r = vkattn_buffer_upload(b, at * BLOCK_BYTES, host, n * BLOCK_BYTES);
    }
    vka_free(ctx, host);
    if (r == VKATTN_SUCCESS)
        *out = b;
    else
        vkattn_buffer_destroy(b);
    return r;
}

vkattn_result vka_tuner_random_buffer(vkattn_context *ctx, uint64_t count, vkattn_dtype dt,
                                      uint32_t seed, vkattn_buffer **out)
{
    *out = NULL;
    if (dt == VKATTN_DTYPE_Q8_0)
        return random_q8_0(ctx, count, seed, out);
    size_t es = vkattn_dtype_size(dt);
    vkattn_buffer_desc d = {.size = 0};
    if (!vka_mul_u64(count, es, &d.size))
        return vka_fail(ctx, VKATTN_ERROR_OUT_OF_RANGE,
                        "tuning: %llu operand elements of %zu bytes exceed 2^64 bytes",
                        (unsigned long long)count, es);
    vkattn_buffer *b = NULL;
    vkattn_result r = vkattn_buffer_create(ctx, &d, &b);
    if (r != VKATTN_SUCCESS)
        return r;
    /* uploaded in slices: the host copy stays small for large weights */
    enum { SLICE = 1 << 16 };
    uint8_t *host = vka_alloc(ctx, SLICE * 4);
    if (!host)
        r = vka_fail(ctx, VKATTN_ERROR_OUT_OF_HOST_MEMORY, "out of host memory");
    uint32_t s = seed;
    for (uint64_t at = 0; host && at < count && r == VKATTN_SUCCESS; at += SLICE) {
        uint64_t n = count - at < SLICE ? count - at : SLICE;
        for (uint64_t i = 0; i < n; i++) {
            s = s * 1664525u + 1013904223u;
            float v = (float)(s >> 8) / 8388608.0f - 1.0f;
            if (dt == VKATTN_DTYPE_F16 || dt == VKATTN_DTYPE_BF16) {
                uint16_t h = dt == VKATTN_DTYPE_F16 ? vkattn_f32_to_f16(v) : vkattn_f32_to_bf16(v);
                memcpy(host + i * 2, &h, 2);
            } else {
                memcpy(host + i * 4, &v, 4);
            }
        }
        r = vkattn_buffer_upload(b, at * es, host, n * es);
    }
    vka_free(ctx, host);
    if (r == VKATTN_SUCCESS)
        *out = b;
    else
        vkattn_buffer_destroy(b); /* nothing half-made reaches the caller */
    return r;
}
