/* CPU reference backward: every gradient against central finite differences
 * of L = sum(dout * out) through vkattn_ref_attention (the harness in
 * test_reference_backward_fd.c, the cases in test_reference_backward_cases.c),
 * and its refusals (test_reference_backward_errors.c). No device. */
#include "test_reference_backward.h"

int main(void)
{
    int failed = bwd_run_case_tests();
    failed += bwd_run_error_tests();
    return failed;
}
