/* The tuner harness (tuner.c). */
#ifndef VKA_TUNER_H
#define VKA_TUNER_H

#include "core/context.h"

/* Times the candidates of an op on the device: candidate i is
 * `candidates` + i * candidate_size (the op's configuration type), recorded
 * with `problem` by `record` into the context's command buffer between GPU
 * timestamps, run once to warm up (pipeline creation) and `reps` times; the
 * smallest median wins. A candidate whose record fails (not possible on this
 * device) is skipped; it is an error only when all fail. */
typedef vkattn_result (*vka_tuner_record_fn)(vkattn_context *ctx, VkCommandBuffer cmd,
                                             const void *problem, const void *candidate);
/* Where a measurement reports its progress (vkattn_tune_progress): the
 * caller's callback (NULL: none), the op's name and its shape's text. */
typedef struct vka_tune_report {
    vkattn_tune_progress_fn fn;
    void *user;
    const char *op;
    char shape[128];
} vka_tune_report;
vkattn_result vka_tuner_measure(vkattn_context *ctx, uint32_t count, uint32_t reps,
                                vka_tuner_record_fn record, const void *problem,
                                const void *candidates, size_t candidate_size, uint32_t *best,
                                float *best_ms, const vka_tune_report *report);

/* A new device buffer of `count` random values in [-1, 1) of dtype `dt`
 * (deterministic for a seed): the operands tuners time candidates on. */
vkattn_result vka_tuner_random_buffer(vkattn_context *ctx, uint64_t count, vkattn_dtype dt,
                                      uint32_t seed, vkattn_buffer **out);

#endif
