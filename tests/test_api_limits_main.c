/* The API-abuse suite's tests in one group (test_api_limits.c has the
 * shared helpers; the io file runs its own group with its own setup). */
#include "test_api_limits.h"

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_kv_cache_desc_limits), cmocka_unit_test(test_convert_limits),
        cmocka_unit_test(test_attention_limits),     cmocka_unit_test(test_linear_limits),
        cmocka_unit_test(test_kv_attention_scale),   cmocka_unit_test(test_mha_desc_limits),
    };
    int failed =
        cmocka_run_group_tests_name("api_limits", tests, test_gpu_setup, test_gpu_teardown);
    return failed + test_api_limits_io_run();
}
