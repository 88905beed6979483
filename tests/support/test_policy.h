/* The four kernel policies every op is tested under: the subgroup or the
 * shared-memory kernel family, each with texel-buffer or storage-buffer
 * inputs; and a fifth, the coopmat family forced (cooperative matrices, for
 * the ops it implements), which runs only where named (VKATTN_TEST_POLICIES:
 * the implementations that offer it, tests/CMakeLists.txt). Selected by
 * context flags. */
#ifndef VKATTN_TEST_POLICY_H
#define VKATTN_TEST_POLICY_H

#include "test_util.h"

enum {
    TEST_POLICY_STORAGE_SHARED = 3, /* the last of the four */
    TEST_POLICY_COOPMAT = 4,
    TEST_POLICY_COUNT = 5,
    TEST_POLICY_DEFAULT_COUNT = 4 /* what runs when VKATTN_TEST_POLICIES is unset */
};

typedef struct test_policy {
    uint32_t flags;    /* the context flags that select it */
    const char *name;  /* "subgroup+texel", ...: in failure messages */
    const char *group; /* "texel_subgroup", ...: in cmocka group names */
} test_policy;

/* Policy 0 is the default (no flag), 3 has both flags, 4 forces coopmat. */
extern const test_policy test_policies[TEST_POLICY_COUNT];

/* The context flags a policy's contexts are opened with: its flags, less
 * those that VKATTN_TEST_POLICY_FLAGS (a number; unset: all) leaves out;
 * VKATTN_TEST_POLICY_FLAGS_<IMPL> (e.g. _LAVAPIPE25) overrides it on that
 * implementation. With 0 every policy runs the device's built-in kernels:
 * the same cases, far fewer pipelines to compile (for a slow compiler such as
 * Mesa 25's lavapipe on a cold shader cache; docs/drivers.md). */
uint32_t test_policy_flags(uint32_t policy);

/* Whether policy `policy` runs in this process: a way to run one policy of
 * a suite (or a few) on its own. VKATTN_TEST_POLICIES_<IMPL> (as for the
 * flags) overrides VKATTN_TEST_POLICIES, a comma-separated list of policy
 * indexes (0-4) or group names ("storage_shared", "coopmat"); unset or
 * empty: the four (0-3; the coopmat one only where named). An
 * entry that names no policy exits the process: a typo must not quietly
 * narrow what the suite covers. */
bool test_policy_selected(uint32_t policy);

/* One context per policy, for suites that spread their cases over them;
 * NULL for a policy that is not selected (their loops skip it). */
typedef struct test_policy_suite {
    test_gpu *gpu[TEST_POLICY_COUNT];
} test_policy_suite;
/* The first selected policy's context (cases that run once). */
test_gpu *test_policy_suite_first(const test_policy_suite *s);

/* cmocka group setup/teardown storing a test_policy_suite in *state. */
int test_policy_suite_setup(void **state);
int test_policy_suite_teardown(void **state);

/* Runs `run` once per selected policy from `first` on, each time on a
 * context of its own with that policy's flags (opened before, closed and
 * checked after). */
void test_for_each_policy(uint32_t first,
                          void (*run)(test_gpu *g, uint32_t policy, const void *arg),
                          const void *arg);

/* Runs the `count` tests as the cmocka group "<prefix>_<policy group>",
 * sharing one context of that policy (a test_gpu in *state), when the
 * policy is selected. Returns the number of failed tests. */
int test_policy_run_group(const char *prefix, uint32_t policy, const struct CMUnitTest *tests,
                          size_t count);

#endif
