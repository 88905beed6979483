/* Result codes, names and messages; version; host f16 conversion. No device. */
#include "test_util.h"

#include <math.h>
#include <stdio.h>

static void test_result_names_are_unique_and_complete(void **state)
{
    (void)state;
    const vkattn_result all[] = {
#define CODE_(name, value, message) VKATTN_##name,
        VKATTN_RESULT_LIST(CODE_)
#undef CODE_
    };
    const size_t n = sizeof all / sizeof all[0];
    assert_true(n >= 10);
    assert_int_equal(all[0], 0);
    assert_string_equal(vkattn_result_name(VKATTN_SUCCESS), "VKATTN_SUCCESS");
    for (size_t i = 0; i < n; i++) {
        if (i > 0)
            assert_true(all[i] < 0); /* errors are negative */
        assert_non_null(strstr(vkattn_result_name(all[i]), "VKATTN_"));
        assert_true(strlen(vkattn_result_message(all[i])) > 5);
        for (size_t j = 0; j < i; j++) {
            assert_int_not_equal(all[i], all[j]);
            assert_string_not_equal(vkattn_result_name(all[i]), vkattn_result_name(all[j]));
        }
    }
    assert_string_equal(vkattn_result_name(VKATTN_ERROR_INVALID_ARGUMENT),
                        "VKATTN_ERROR_INVALID_ARGUMENT");
    assert_string_equal(vkattn_result_name((vkattn_result)-9999), "VKATTN_UNKNOWN_RESULT");
    assert_string_equal(vkattn_result_message((vkattn_result)12345), "unknown result");
}

static void test_version(void **state)
{
    (void)state;
    char want[32];
    snprintf(want, sizeof want, "%d.%d.%d", VKATTN_VERSION_MAJOR, VKATTN_VERSION_MINOR,
             VKATTN_VERSION_PATCH);
    assert_string_equal(vkattn_version_string(), want);
    assert_int_equal(vkattn_version(), VKATTN_VERSION);
}

static void test_dtype_helpers(void **state)
{
    (void)state;
    assert_int_equal(vkattn_dtype_size(VKATTN_DTYPE_F32), 4);
    assert_int_equal(vkattn_dtype_size(VKATTN_DTYPE_F16), 2);
    assert_int_equal(vkattn_dtype_size(VKATTN_DTYPE_U8), 1);
    assert_int_equal(vkattn_dtype_size((vkattn_dtype)77), 0);
    assert_null(vkattn_dtype_name((vkattn_dtype)77));
    int64_t shape[3] = {2, 3, 5};
    vkattn_tensor t = vkattn_tensor_make(NULL, 8, VKATTN_DTYPE_F16, 3, shape);
    assert_int_equal(t.strides[0], 15);
    assert_int_equal(t.strides[1], 5);
    assert_int_equal(t.strides[2], 1);
    assert_int_equal(vkattn_tensor_numel(&t), 30);
}

/* Known binary16 encodings, including rounding ties and subnormals. `exact`:
 * the float is itself a half, so converting back gives it again. */
static void test_f16_known_values(void **state)
{
    (void)state;
    struct {
        float f;
        uint16_t h;
        int exact;
    } cases[] = {
        {0.0f, 0x0000, 1},
        {-0.0f, 0x8000, 1},
        {1.0f, 0x3c00, 1},
        {-2.0f, 0xc000, 1},
        {65504.0f, 0x7bff, 1},
        {65520.0f, 0x7c00, 0}, /* halfway to the next binade: rounds to inf */
        {0.333251953125f, 0x3555, 1},
        {5.9604644775390625e-08f, 0x0001, 1},  /* smallest subnormal */
        {6.103515625e-05f, 0x0400, 1},         /* smallest normal */
        {1.00048828125f, 0x3c00, 0},           /* tie 0x3c00 / 0x3c01 -> even */
        {1.00146484375f, 0x3c02, 0},           /* tie 0x3c01 / 0x3c02 -> even */
        {2.98023223876953125e-08f, 0x0000, 0}, /* half the smallest subnormal -> 0 */
        {INFINITY, 0x7c00, 1},
        {-INFINITY, 0xfc00, 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        assert_int_equal(vkattn_f32_to_f16(cases[i].f), cases[i].h);
        if (cases[i].exact)
            assert_true(vkattn_f16_to_f32(cases[i].h) == cases[i].f);
    }
    assert_true(isnan(vkattn_f16_to_f32(vkattn_f32_to_f16(NAN))));
}

/* Every half converts to float and back unchanged (NaNs stay NaN). */
static void test_f16_round_trip_all(void **state)
{
    (void)state;
    for (uint32_t h = 0; h < 0x10000; h++) {
        float f = vkattn_f16_to_f32((uint16_t)h);
        if (isnan(f))
            assert_true((h & 0x7c00) == 0x7c00 && (h & 0x3ff));
        else
            assert_int_equal(vkattn_f32_to_f16(f), h);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_result_names_are_unique_and_complete),
        cmocka_unit_test(test_version),
        cmocka_unit_test(test_dtype_helpers),
        cmocka_unit_test(test_f16_known_values),
        cmocka_unit_test(test_f16_round_trip_all),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
