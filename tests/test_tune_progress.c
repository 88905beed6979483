/* The tuners' progress callback (vkattn_tune_progress): every tuner calls
 * it before each candidate (1..count, in order) and once when each op's
 * measurement ends (candidate == count, done, best_ms > 0), with the op's
 * name, a non-empty shape and the user pointer given; the layer tuners
 * report each op they measure; a NULL callback is fine. */
#include "test_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* What the callback saw. */
typedef struct seen {
    char ops[16][16]; /* op of each measurement, in order */
    int measurements;
    uint32_t next; /* the candidate expected next (1-based; 0: a new op starts) */
    int calls;
    const void *user_seen;
    char error[256];
} seen;

static void on_progress(const vkattn_tune_progress *p, void *user)
{
    seen *s = user;
    s->calls++;
    s->user_seen = user;
    if (s->error[0])
        return;
    if (!p->op || !p->shape || !p->shape[0] || p->count == 0)
        snprintf(s->error, sizeof s->error, "empty op, shape or count");
    else if (p->done) {
        if (p->candidate != p->count || s->next != p->count + 1 || !(p->best_ms > 0.0f))
            snprintf(s->error, sizeof s->error, "%s done at %u/%u (expected after %u), best %g",
                     p->op, p->candidate, p->count, s->next - 1, (double)p->best_ms);
        else if (s->measurements < 16)
            snprintf(s->ops[s->measurements++], sizeof s->ops[0], "%s", p->op);
        s->next = 0;
    } else {
        uint32_t want = s->next ? s->next : 1;
        if (p->candidate != want || p->candidate > p->count)
            snprintf(s->error, sizeof s->error, "%s candidate %u/%u, expected %u", p->op,
                     p->candidate, p->count, want);
        s->next = p->candidate + 1;
    }
}

static void expect_ops(const seen *s, const char *const *ops, int n, const char *what)
{
    if (s->error[0])
        fail_msg("%s: %s", what, s->error);
    if (s->measurements != n || s->user_seen != s)
        fail_msg("%s: %d measurements reported (expected %d)", what, s->measurements, n);
    for (int i = 0; i < n; i++)
        if (strcmp(s->ops[i], ops[i]) != 0)
            fail_msg("%s: measurement %d is %s, expected %s", what, i, s->ops[i], ops[i]);
}

static void test_each_tuner(void **state)
{
    test_gpu *g = *state;
    vkattn_context *ctx = g->ctx;
    seen s = {0};
    TEST_OK(ctx,
            vkattn_linear_tune(
                ctx, &(vkattn_linear_tune_args){
                         .m = 4, .n = 64, .k = 32, .progress = on_progress, .progress_user = &s}));
    expect_ops(&s, (const char *[]){"linear"}, 1, "vkattn_linear_tune");
    memset(&s, 0, sizeof s);
    TEST_OK(ctx, vkattn_attention_tune(ctx, &(vkattn_attention_tune_args){.batch = 1,
                                                                          .num_heads = 2,
                                                                          .num_kv_heads = 1,
                                                                          .q_len = 8,
                                                                          .kv_len = 8,
                                                                          .head_dim = 16,
                                                                          .causal = true,
                                                                          .progress = on_progress,
                                                                          .progress_user = &s}));
    expect_ops(&s, (const char *[]){"attention"}, 1, "vkattn_attention_tune");

    vkattn_mha_desc md = {.embed_dim = 64, .num_heads = 2, .num_kv_heads = 1};
    vkattn_mha *m;
    TEST_OK(ctx, vkattn_mha_create(ctx, &md, &m));
    memset(&s, 0, sizeof s);
    TEST_OK(ctx, vkattn_mha_tune(m, &(vkattn_mha_tune_args){1, 8, 8, on_progress, &s}));
    expect_ops(&s, (const char *[]){"linear", "attention", "attention", "linear"}, 4,
               "vkattn_mha_tune");
    vkattn_kv_cache_desc cd = {
        .num_kv_heads = 1, .num_heads = 2, .head_dim = 32, .max_sequences = 1, .capacity = 32};
    vkattn_kv_cache *c;
    TEST_OK(ctx, vkattn_kv_cache_create(ctx, &cd, &c));
    memset(&s, 0, sizeof s);
    TEST_OK(ctx,
            vkattn_mha_step_tune(m, &(vkattn_mha_step_tune_args){c, 1, 1, 32, on_progress, &s}));
    expect_ops(&s, (const char *[]){"kv_attention", "linear", "linear"}, 3, "vkattn_mha_step_tune");
    /* no callback: the same tuners, silently */
    TEST_OK(ctx, vkattn_mha_step_tune(m, &(vkattn_mha_step_tune_args){c, 1, 1, 32}));
    vkattn_kv_cache_destroy(c);
    vkattn_mha_destroy(m);
    test_assert_no_validation_messages(ctx);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_each_tuner)};
    return cmocka_run_group_tests(tests, test_gpu_setup, test_gpu_teardown);
}
