/* The start-up self-test (selftest.c, the probes in selftest_probes.c) and
 * its result's place in the pipeline cache data (vkattn/selftest.h). */
#ifndef VKA_SELFTEST_H
#define VKA_SELFTEST_H

#include "core/context.h"

/* The checks, in report order. */
enum {
    VKA_CHECK_SG_ADD_ONE,
    VKA_CHECK_SG_IDS,
    VKA_CHECK_SG_REDUCE,
    VKA_CHECK_SG_BROADCAST,
    VKA_CHECK_SG_SHUFFLE,
    VKA_CHECK_SG_SHUFFLE_XOR,
    VKA_CHECK_SHARED,
    VKA_CHECK_TEXEL_RGBA32F,
    VKA_CHECK_TEXEL_RGBA16F,
    VKA_CHECK_TEXEL_RGBA32UI,
    VKA_CHECK_STORAGE16,
    VKA_CHECK_COOPMAT,
    VKA_CHECK_COUNT
};

/* The bytes appended to the driver's pipeline cache data. */
enum { VKA_SELF_TEST_TRAILER_BYTES = 32 };

/* Before the pipeline cache is read: what the device offers, which quirks
 * match, and the key a cached result must carry. */
vkattn_result vka_self_test_create(vkattn_context *ctx);
void vka_self_test_destroy(vkattn_context *ctx);
/* The size of `data`'s part that is the driver's: a trailer at its end is
 * taken off, and remembered when it holds this device's result. */
size_t vka_self_test_take_trailer(vkattn_context *ctx, const void *data, size_t size);
/* The trailer for the context's result into `out`; 0 when there is none
 * to keep (the checks were skipped), else VKA_SELF_TEST_TRAILER_BYTES. */
size_t vka_self_test_trailer(const vkattn_context *ctx, unsigned char *out);
/* Last in context creation: the checks (or the cached result, or none
 * with VKATTN_CONTEXT_NO_SELF_TEST), then the features decided and set in
 * ctx->info. Fails only on a device error, or when a family the flags
 * force did not pass. */
vkattn_result vka_self_test_start(vkattn_context *ctx);

/* The probes (selftest_probes.c): each runs its checks into `checks`
 * (indexed by VKA_CHECK_*), marking them checked, passed or failed with a
 * detail; a pipeline that cannot be created fails its checks. An error
 * only for what ends the context (device lost, out of memory). With
 * `fail_on_purpose` (VKATTN_CONTEXT_TEST_FAIL_CHECKS) subgroup.add_one and
 * texel.rgba32f fail whatever was seen. */
vkattn_result vka_probe_subgroup(vkattn_context *ctx, vkattn_self_test_check *checks,
                                 bool fail_on_purpose);
vkattn_result vka_probe_texel(vkattn_context *ctx, vkattn_self_test_check *checks,
                              bool fail_on_purpose);
vkattn_result vka_probe_storage16(vkattn_context *ctx, vkattn_self_test_check *checks);
vkattn_result vka_probe_shared(vkattn_context *ctx, vkattn_self_test_check *checks);
/* At the context's coopmat shape (vkattn_device_info.coopmat_shape). */
vkattn_result vka_probe_coopmat(vkattn_context *ctx, vkattn_self_test_check *checks);

#endif
