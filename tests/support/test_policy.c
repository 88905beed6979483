/* The kernel policies of the tests (see test_policy.h). */
#include "test_policy.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const test_policy test_policies[TEST_POLICY_COUNT] = {
    {0, "subgroup+texel", "texel_subgroup"},
    {VKATTN_CONTEXT_NO_TEXEL_BUFFERS, "subgroup+storage", "storage_subgroup"},
    {VKATTN_CONTEXT_NO_SUBGROUP_KERNELS, "shared+texel", "texel_shared"},
    {VKATTN_CONTEXT_NO_SUBGROUP_KERNELS | VKATTN_CONTEXT_NO_TEXEL_BUFFERS, "shared+storage",
     "storage_shared"},
    {VKATTN_CONTEXT_COOPMAT_KERNELS, "coopmat", "coopmat"},
};

/* `var`_<IMPL> (the implementation ctest runs on, VKATTN_TEST_IMPL in upper
 * case) when set, so that one implementation can be narrowed alone, else
 * `var`. */
static const char *per_impl(const char *var)
{
    const char *impl = getenv("VKATTN_TEST_IMPL");
    if (impl && *impl) {
        char name[96];
        size_t n = (size_t)snprintf(name, sizeof name, "%s_", var);
        for (const char *c = impl; *c && n + 1 < sizeof name; c++)
            name[n++] = (char)toupper((unsigned char)*c);
        name[n] = '\0';
        const char *value = getenv(name);
        if (value && *value)
            return value;
    }
    return getenv(var);
}

static const char *policy_mask(void) { return per_impl("VKATTN_TEST_POLICY_FLAGS"); }

bool test_policy_selected(uint32_t policy)
{
    const char *list = per_impl("VKATTN_TEST_POLICIES");
    if (!list || !*list)
        return policy < TEST_POLICY_DEFAULT_COUNT;
    bool selected = false;
    for (const char *p = list; *p;) {
        size_t len = strcspn(p, ",");
        char item[32];
        snprintf(item, sizeof item, "%.*s", (int)len, p);
        int found = -1;
        for (uint32_t k = 0; k < TEST_POLICY_COUNT; k++) {
            char index[4];
            snprintf(index, sizeof index, "%u", k);
            if (strcmp(item, index) == 0 || strcmp(item, test_policies[k].group) == 0)
                found = (int)k;
        }
        if (found < 0) {
            fprintf(stderr,
                    "VKATTN_TEST_POLICIES: '%s' names no policy (0-4 or %s, %s, %s, %s, %s)\n",
                    item, test_policies[0].group, test_policies[1].group, test_policies[2].group,
                    test_policies[3].group, test_policies[4].group);
            exit(1);
        }
        selected |= (uint32_t)found == policy;
        p += len + (p[len] == ',');
    }
    return selected;
}

uint32_t test_policy_flags(uint32_t policy)
{
    const char *mask = policy_mask();
    uint32_t allowed = ~0u;
    if (mask && *mask) {
        /* A typo must not quietly narrow what the suite covers; exit, since a
         * cmocka group setup's failure is left out of the exit status. */
        char *end = NULL;
        unsigned long v = strtoul(mask, &end, 0);
        if (*end != '\0' || v > 0xffffffffUL) {
            fprintf(stderr, "test policy mask '%s' is not a number (VKATTN_TEST_POLICY_FLAGS*)\n",
                    mask);
            exit(1);
        }
        allowed = (uint32_t)v;
    }
    return test_policies[policy].flags & allowed;
}

int test_policy_suite_setup(void **state)
{
    test_policy_suite *s = calloc(1, sizeof *s);
    assert_non_null(s);
    for (uint32_t p = 0; p < TEST_POLICY_COUNT; p++)
        s->gpu[p] = test_policy_selected(p) ? test_gpu_open(test_policy_flags(p)) : NULL;
    *state = s;
    return test_policy_suite_first(s) ? 0 : -1;
}

test_gpu *test_policy_suite_first(const test_policy_suite *s)
{
    for (uint32_t p = 0; p < TEST_POLICY_COUNT; p++)
        if (s->gpu[p])
            return s->gpu[p];
    return NULL;
}

int test_policy_suite_teardown(void **state)
{
    test_policy_suite *s = *state;
    for (uint32_t p = 0; p < TEST_POLICY_COUNT; p++)
        if (s->gpu[p])
            test_gpu_close(s->gpu[p]);
    free(s);
    return 0;
}

void test_for_each_policy(uint32_t first,
                          void (*run)(test_gpu *g, uint32_t policy, const void *arg),
                          const void *arg)
{
    for (uint32_t p = first; p < TEST_POLICY_COUNT; p++) {
        if (!test_policy_selected(p))
            continue;
        test_gpu *g = test_gpu_open(test_policy_flags(p));
        run(g, p, arg);
        test_gpu_close(g);
    }
}

/* cmocka's group setup sees only *state: one function per policy. */
static int setup_policy(void **state, uint32_t p)
{
    *state = test_gpu_open(test_policy_flags(p));
    return 0;
}
static int setup_policy0(void **state) { return setup_policy(state, 0); }
static int setup_policy1(void **state) { return setup_policy(state, 1); }
static int setup_policy2(void **state) { return setup_policy(state, 2); }
static int setup_policy3(void **state) { return setup_policy(state, 3); }
static int setup_policy4(void **state) { return setup_policy(state, 4); }

int test_policy_run_group(const char *prefix, uint32_t policy, const struct CMUnitTest *tests,
                          size_t count)
{
    static const CMFixtureFunction setups[TEST_POLICY_COUNT] = {
        setup_policy0, setup_policy1, setup_policy2, setup_policy3, setup_policy4};
    if (!test_policy_selected(policy))
        return 0;
    char name[96];
    snprintf(name, sizeof name, "%s_%s", prefix, test_policies[policy].group);
    return _cmocka_run_group_tests(name, tests, count, setups[policy], test_gpu_teardown);
}
