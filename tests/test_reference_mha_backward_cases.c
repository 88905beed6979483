/* The MHA layer reference backward's finite-difference cases: every
 * forward option of the layer (self and cross attention, a value input,
 * GQA and MQA, Dk != Dv, biases, packed Wqkv, QK-norm, RoPE NEOX and GPTJ
 * with partial dims, scalings and positions, causal in both alignments,
 * additive and boolean masks, key padding, window, softcap, ALiBi, sinks,
 * scale, dropout). Each case prints its worst relative error. */
#include "test_reference_mha_backward.h"

#include <stdio.h>

static void check_cases(const mbw_case *cases, size_t n)
{
    for (size_t c = 0; c < n; c++) {
        mbw_result r;
        mbw_check_case(&cases[c], &r);
        printf("  %-34s fd worst rel %.2e (d%s), forward vs vkattn_ref_mha rel %.2e\n",
               cases[c].name, r.worst_rel, r.worst_of ? r.worst_of : "-", r.fwd_rel);
    }
}

#define CHECK(...)                                             \
    do {                                                       \
        const mbw_case cases_[] = {__VA_ARGS__};               \
        check_cases(cases_, sizeof cases_ / sizeof cases_[0]); \
    } while (0)

static const vkattn_rope_desc neox = {.theta = 10000.0f};
static const vkattn_rope_desc gptj_partial = {
    .theta = 500.0f, .dims = 4, .style = VKATTN_ROPE_GPTJ};
static const vkattn_rope_desc llama3 = {.theta = 10000.0f,
                                        .scaling = VKATTN_ROPE_SCALING_LLAMA3,
                                        .factor = 8.0f,
                                        .low_freq_factor = 1.0f,
                                        .high_freq_factor = 4.0f,
                                        .original_max_positions = 16};
static const vkattn_rope_desc linear = {
    .theta = 100.0f, .dims = 2, .scaling = VKATTN_ROPE_SCALING_LINEAR, .factor = 2.0f};

static void test_heads_and_weights(void **state)
{
    (void)state;
    CHECK({.name = "mha bias", .B = 2, .Tq = 5, .Dm = 8, .Hq = 2, .Hkv = 2, .bias = true},
          {.name = "mha no bias, scale 0.35",
           .B = 1,
           .Tq = 4,
           .Dm = 6,
           .Hq = 3,
           .Hkv = 3,
           .scale = 0.35f},
          {.name = "gqa 4/2, Dk 4",
           .B = 2,
           .Tq = 4,
           .Dm = 8,
           .Hq = 4,
           .Hkv = 2,
           .Dk = 4,
           .bias = true},
          {.name = "mqa 4/1, packed wqkv + bqkv",
           .B = 1,
           .Tq = 5,
           .Dm = 8,
           .Hq = 4,
           .Hkv = 1,
           .Dk = 3,
           .bias = true,
           .packed = true},
          {.name = "Dk 4 != Dv 6, gqa 2/1",
           .B = 2,
           .Tq = 4,
           .Dm = 6,
           .Hq = 2,
           .Hkv = 1,
           .Dk = 4,
           .Dv = 6,
           .bias = true});
}

static void test_cross_attention(void **state)
{
    (void)state;
    CHECK({.name = "cross kv (Dkv 5)",
           .B = 2,
           .Tq = 3,
           .Tk = 6,
           .Dm = 8,
           .Hq = 2,
           .Hkv = 2,
           .Dkv = 5,
           .cross = true,
           .bias = true},
          {.name = "cross kv + value, Dv 3",
           .B = 1,
           .Tq = 4,
           .Tk = 5,
           .Dm = 6,
           .Hq = 2,
           .Hkv = 1,
           .Dk = 4,
           .Dv = 3,
           .Dkv = 5,
           .Dvin = 7,
           .cross = true,
           .value = true,
           .bias = true},
          {.name = "self + value input (Dvin 5)",
           .B = 2,
           .Tq = 4,
           .Dm = 6,
           .Hq = 2,
           .Hkv = 2,
           .Dvin = 5,
           .value = true,
           .bias = true},
          {.name = "cross causal bottom-right 3x6",
           .B = 1,
           .Tq = 3,
           .Tk = 6,
           .Dm = 8,
           .Hq = 2,
           .Hkv = 1,
           .cross = true,
           .causal = true},
          {.name = "cross causal top-left 5x3",
           .B = 2,
           .Tq = 5,
           .Tk = 3,
           .Dm = 4,
           .Hq = 2,
           .Hkv = 2,
           .cross = true,
           .causal = true,
           .top_left = true,
           .bias = true});
}

static void test_qk_norm_rope(void **state)
{
    (void)state;
    CHECK({.name = "qk_norm",
           .B = 2,
           .Tq = 4,
           .Dm = 8,
           .Hq = 2,
           .Hkv = 1,
           .qk_norm = true,
           .bias = true},
          {.name = "qk_norm eps 0.25 + rope neox",
           .B = 1,
           .Tq = 5,
           .Dm = 8,
           .Hq = 2,
           .Hkv = 2,
           .qk_norm = true,
           .norm_eps = 0.25f,
           .rope = neox,
           .causal = true},
          {.name = "rope gptj dims 4 of 6, positions",
           .B = 2,
           .Tq = 4,
           .Dm = 12,
           .Hq = 2,
           .Hkv = 2,
           .rope = gptj_partial,
           .positions = true,
           .bias = true},
          {.name = "rope llama3 + qk_norm, gqa, positions",
           .B = 2,
           .Tq = 5,
           .Dm = 8,
           .Hq = 2,
           .Hkv = 1,
           .Dk = 6,
           .qk_norm = true,
           .rope = llama3,
           .positions = true,
           .causal = true},
          {.name = "rope linear dims 2, packed",
           .B = 1,
           .Tq = 6,
           .Dm = 8,
           .Hq = 2,
           .Hkv = 2,
           .rope = linear,
           .packed = true,
           .bias = true});
}

static void test_masks(void **state)
{
    (void)state;
    CHECK({.name = "additive mask [B,Hq,Tq,Tk] + padding",
           .B = 2,
           .Tq = 4,
           .Dm = 8,
           .Hq = 2,
           .Hkv = 2,
           .mask = MBW_MASK_ADD,
           .key_padding = true,
           .bias = true},
          {.name = "additive [Tq,Tk], a dead row",
           .B = 1,
           .Tq = 5,
           .Tk = 4,
           .Dm = 6,
           .Hq = 3,
           .Hkv = 1,
           .cross = true,
           .mask = MBW_MASK_ADD_2D},
          {.name = "u8 mask, true attends",
           .B = 2,
           .Tq = 5,
           .Dm = 8,
           .Hq = 2,
           .Hkv = 1,
           .mask = MBW_MASK_ATTENDS,
           .bias = true},
          {.name = "u8 [B*Hq,Tq,Tk], true blocks",
           .B = 2,
           .Tq = 4,
           .Dm = 8,
           .Hq = 2,
           .Hkv = 2,
           .mask = MBW_MASK_BLOCKS,
           .causal = true});
}

static void test_score_mods(void **state)
{
    (void)state;
    CHECK(
        {.name = "window 2 causal",
         .B = 1,
         .Tq = 6,
         .Dm = 8,
         .Hq = 2,
         .Hkv = 2,
         .window = 2,
         .causal = true,
         .bias = true},
        {.name = "window 2 + softcap 1.5",
         .B = 2,
         .Tq = 5,
         .Dm = 8,
         .Hq = 2,
         .Hkv = 1,
         .window = 2,
         .softcap = 1.5f},
        {.name = "softcap 0.8, scale 1.3",
         .B = 1,
         .Tq = 4,
         .Dm = 8,
         .Hq = 2,
         .Hkv = 2,
         .softcap = 0.8f,
         .scale = 1.3f,
         .bias = true},
        {.name = "alibi slopes", .B = 2, .Tq = 4, .Dm = 8, .Hq = 2, .Hkv = 1, .alibi = 1},
        {.name = "alibi standard, causal top-left",
         .B = 1,
         .Tq = 3,
         .Tk = 5,
         .Dm = 6,
         .Hq = 3,
         .Hkv = 3,
         .cross = true,
         .alibi = 2,
         .causal = true,
         .top_left = true},
        {.name = "sinks", .B = 2, .Tq = 4, .Dm = 8, .Hq = 2, .Hkv = 2, .sinks = true, .bias = true},
        {.name = "sinks + gqa + mask + padding",
         .B = 2,
         .Tq = 4,
         .Dm = 8,
         .Hq = 4,
         .Hkv = 2,
         .Dk = 2,
         .sinks = true,
         .mask = MBW_MASK_ADD,
         .key_padding = true});
}

static void test_dropout(void **state)
{
    (void)state;
    CHECK({.name = "dropout 0.3",
           .B = 2,
           .Tq = 5,
           .Dm = 8,
           .Hq = 2,
           .Hkv = 2,
           .dropout_p = 0.3f,
           .bias = true},
          {.name = "dropout 0.5 + everything",
           .B = 2,
           .Tq = 5,
           .Dm = 8,
           .Hq = 2,
           .Hkv = 1,
           .dropout_p = 0.5f,
           .qk_norm = true,
           .rope = neox,
           .positions = true,
           .causal = true,
           .sinks = true,
           .softcap = 2.0f,
           .alibi = 1,
           .window = 3,
           .bias = true,
           .packed = true});
}

int mbw_run_case_tests(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_heads_and_weights), cmocka_unit_test(test_cross_attention),
        cmocka_unit_test(test_qk_norm_rope),      cmocka_unit_test(test_masks),
        cmocka_unit_test(test_score_mods),        cmocka_unit_test(test_dropout),
    };
    return cmocka_run_group_tests_name("reference mha backward: finite differences", tests, NULL,
                                       NULL);
}
