/* The self-test's probes (selftest.h): each dispatches one small shader of
 * shaders/selftest_*.comp on known inputs and compares what came back with
 * what the kernels rely on, check by check. */
#include "core/selftest.h"

#include "core/buffer.h"
#include "core/host.h"
#include "core/limits.h"
#include "core/pipeline.h"
#include "core/record.h"
#include "spec/error_text.h"
#include "vka_spirv.h"

#include <math.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

static const vka_kernel subgroup_kernel = {
    .name = "selftest_subgroup",
    .spirv = &vka_spirv_selftest_subgroup,
    .binding_count = 1,
    .bindings = {VKA_BINDING_STORAGE},
    .full_subgroups = true,
};
static const vka_kernel texel_kernel = {
    .name = "selftest_texel",
    .spirv = &vka_spirv_selftest_texel,
    .binding_count = 4,
    .bindings = {VKA_BINDING_TEXEL, VKA_BINDING_TEXEL, VKA_BINDING_TEXEL, VKA_BINDING_STORAGE},
    .push_size = 4,
};
static const vka_kernel storage16_kernel = {
    .name = "selftest_storage16",
    .spirv = &vka_spirv_selftest_storage16,
    .binding_count = 3,
    .bindings = {VKA_BINDING_STORAGE, VKA_BINDING_STORAGE, VKA_BINDING_STORAGE},
};
static const vka_kernel shared_kernel = {
    .name = "selftest_shared",
    .spirv = &vka_spirv_selftest_shared,
    .binding_count = 1,
    .bindings = {VKA_BINDING_STORAGE},
};

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

/* The probe's buffers: inputs uploaded, outputs read back. */
typedef struct probe {
    vkattn_buffer *buffers[4];
    uint32_t count;
    double started;
} probe;

static void probe_end(probe *p)
{
    for (uint32_t i = 0; i < p->count; i++)
        vkattn_buffer_destroy(p->buffers[i]);
}

/* A buffer of `size` bytes holding `data` (NULL: zeros), whole-bound. */
static vkattn_result probe_buffer(vkattn_context *ctx, probe *p, uint64_t size, const void *data,
                                  VkFormat format, vka_binding *out)
{
    vkattn_buffer_desc d = {.size = size};
    vkattn_buffer *b = NULL;
    VKA_TRY(vkattn_buffer_create(ctx, &d, &b));
    p->buffers[p->count++] = b;
    if (data)
        VKA_TRY(vkattn_buffer_upload(b, 0, data, size));
    *out = (vka_binding){.buffer = b, .offset = 0, .range = size, .format = format};
    return VKATTN_SUCCESS;
}

/* Marks the checks [first, first + n) checked, each passed unless it has a
 * detail already, with the probe's time. */
static void finish_checks(vkattn_self_test_check *checks, int first, int n, double ms)
{
    for (int k = first; k < first + n; k++) {
        checks[k].checked = true;
        checks[k].passed = checks[k].detail[0] == '\0';
        checks[k].ms = ms;
    }
}

/* All of the checks [first, first + n) failed for one reason. */
static void fail_checks(vkattn_self_test_check *checks, int first, int n, const char *why,
                        double ms)
{
    for (int k = first; k < first + n; k++)
        snprintf(checks[k].detail, sizeof checks[k].detail, "%s", why);
    finish_checks(checks, first, n, ms);
}

/* Creates the pipeline and runs one workgroup of it; `why` gets the reason
 * when the pipeline cannot be made (a check failure, not an error). */
static vkattn_result dispatch(vkattn_context *ctx, const vka_kernel *kernel, const uint32_t *spec,
                              uint32_t spec_count, const vka_binding *bindings, const void *push,
                              char *why, size_t why_size)
{
    vka_pipeline *pipeline = NULL;
    vkattn_result r = vka_pipeline_get(ctx, kernel, spec, spec_count, &pipeline);
    if (r != VKATTN_SUCCESS) {
        snprintf(why, why_size, "pipeline not created: %.130s", ctx->last_error);
        return r == VKATTN_ERROR_OUT_OF_HOST_MEMORY || r == VKATTN_ERROR_DEVICE_LOST
                   ? r
                   : VKATTN_SUCCESS;
    }
    VkCommandBuffer cmd;
    VKA_TRY(vkattn_commands_begin(ctx, &cmd));
    r = vka_cmd_dispatch(ctx, cmd, pipeline, bindings, push, 1, 1, 1);
    if (r != VKATTN_SUCCESS) {
        vkattn_commands_discard(ctx);
        return r;
    }
    return vkattn_commands_submit(ctx);
}

/* ---------------------------------------------------------------- subgroups */

/* The invocation of subgroup g at lane l, from what the invocations said. */
static int member(const float *ids, const float *lanes, uint32_t n, uint32_t g, uint32_t l)
{
    for (uint32_t i = 0; i < n; i++)
        if (ids[i] == (float)g && lanes[i] == (float)l)
            return (int)i;
    return -1;
}

/* Compares what the subgroup probe wrote (see selftest_subgroup.comp). */
static void judge_subgroup(const float *o, uint32_t n, uint32_t sg, uint32_t sg_log2,
                           vkattn_self_test_check *c, bool fail_on_purpose)
{
    const float *ids = o, *lanes = o + n;
    /* full subgroups of sg lanes, each lane once */
    for (uint32_t g = 0; g < n / sg && !c[VKA_CHECK_SG_IDS].detail[0]; g++)
        for (uint32_t l = 0; l < sg; l++)
            if (member(ids, lanes, n, g, l) < 0) {
                snprintf(c[VKA_CHECK_SG_IDS].detail, sizeof c[0].detail,
                         "no invocation is lane %u of subgroup %u: %u invocations are not %u "
                         "full subgroups of %u",
                         l, g, n, n / sg, sg);
                break;
            }
    for (uint32_t i = 0; i < n; i++)
        if (o[2 * n + i] != (float)sg || (fail_on_purpose && i == 0)) {
            snprintf(
                c[VKA_CHECK_SG_ADD_ONE].detail, sizeof c[0].detail,
                "subgroupAdd(1.0) gave %g in a pipeline built for %u lanes%s", o[2 * n + i], sg,
                fail_on_purpose ? " (failed on purpose: VKATTN_CONTEXT_TEST_FAIL_CHECKS)" : "");
            break;
        }
    if (c[VKA_CHECK_SG_IDS].detail[0]) {
        const char *why = "not judged: the lanes are not full subgroups (subgroup.ids)";
        for (int k = VKA_CHECK_SG_REDUCE; k <= VKA_CHECK_SG_SHUFFLE_XOR; k++)
            snprintf(c[k].detail, sizeof c[k].detail, "%s", why);
        return;
    }
    const float *shuffles = o + 7 * n, *xors = shuffles + (size_t)n * sg;
    for (uint32_t i = 0; i < n; i++) {
        uint32_t g = (uint32_t)ids[i], lane = (uint32_t)lanes[i];
        float sum = 0, max = 0;
        for (uint32_t l = 0; l < sg; l++) {
            float v = (float)(3 * member(ids, lanes, n, g, l) + 1);
            sum += v;
            max = v > max ? v : max;
        }
#define VALUE_AT(l) ((float)(3 * member(ids, lanes, n, g, (l)) + 1))
        if (!c[VKA_CHECK_SG_REDUCE].detail[0] && (o[3 * n + i] != sum || o[4 * n + i] != max))
            snprintf(c[VKA_CHECK_SG_REDUCE].detail, sizeof c[0].detail,
                     "invocation %u: subgroupAdd(v) %g, subgroupMax(v) %g; expected %g and %g", i,
                     o[3 * n + i], o[4 * n + i], sum, max);
        if (!c[VKA_CHECK_SG_BROADCAST].detail[0] &&
            (o[5 * n + i] != VALUE_AT(0) || o[6 * n + i] != VALUE_AT(sg - 1)))
            snprintf(c[VKA_CHECK_SG_BROADCAST].detail, sizeof c[0].detail,
                     "invocation %u: subgroupBroadcast from lanes 0 and %u gave %g and %g; "
                     "expected %g and %g",
                     i, sg - 1, o[5 * n + i], o[6 * n + i], VALUE_AT(0), VALUE_AT(sg - 1));
        for (uint32_t k = 0; k < sg && !c[VKA_CHECK_SG_SHUFFLE].detail[0]; k++) {
            uint32_t from = (lane + k) % sg;
            if (shuffles[(size_t)i * sg + k] != VALUE_AT(from))
                snprintf(c[VKA_CHECK_SG_SHUFFLE].detail, sizeof c[0].detail,
                         "lane %u of subgroup %u: subgroupShuffle from lane %u gave %g, "
                         "expected %g",
                         lane, g, from, shuffles[(size_t)i * sg + k], VALUE_AT(from));
        }
        for (uint32_t j = 0; j < sg_log2 && !c[VKA_CHECK_SG_SHUFFLE_XOR].detail[0]; j++) {
            uint32_t from = lane ^ (1u << j);
            if (xors[(size_t)i * sg_log2 + j] != VALUE_AT(from))
                snprintf(c[VKA_CHECK_SG_SHUFFLE_XOR].detail, sizeof c[0].detail,
                         "lane %u of subgroup %u: subgroupShuffleXor by %u gave %g, expected %g",
                         lane, g, 1u << j, xors[(size_t)i * sg_log2 + j], VALUE_AT(from));
        }
#undef VALUE_AT
    }
}

vkattn_result vka_probe_subgroup(vkattn_context *ctx, vkattn_self_test_check *checks,
                                 bool fail_on_purpose)
{
    const int first = VKA_CHECK_SG_ADD_ONE, count = VKA_CHECK_SG_SHUFFLE_XOR - first + 1;
    probe p = {.started = now_ms()};
    uint32_t sg = vka_subgroup_size(ctx), sg_log2 = 0;
    while ((1u << sg_log2) < sg)
        sg_log2++;
    uint32_t n = 2 * sg <= vka_max_workgroup(ctx) ? 2 * sg : sg; /* two subgroups */
    uint64_t floats = 7ull * n + (uint64_t)n * sg + (uint64_t)n * sg_log2;
    vka_binding out;
    vkattn_result r = probe_buffer(ctx, &p, floats * 4, NULL, VK_FORMAT_UNDEFINED, &out);
    char why[160] = "";
    uint32_t spec[3] = {n, sg, sg_log2};
    if (r == VKATTN_SUCCESS)
        r = dispatch(ctx, &subgroup_kernel, spec, 3, &out, NULL, why, sizeof why);
    float *o = r == VKATTN_SUCCESS && !why[0] ? vka_alloc(ctx, floats * 4) : NULL;
    if (r == VKATTN_SUCCESS && !why[0] && !o)
        r = vka_fail(ctx, VKATTN_ERROR_OUT_OF_HOST_MEMORY, "self-test: out of host memory");
    if (o)
        r = vkattn_buffer_download(p.buffers[0], 0, o, floats * 4);
    if (r == VKATTN_SUCCESS && why[0])
        fail_checks(checks, first, count, why, now_ms() - p.started);
    else if (r == VKATTN_SUCCESS) {
        judge_subgroup(o, n, sg, sg_log2, checks, fail_on_purpose);
        finish_checks(checks, first, count, now_ms() - p.started);
    }
    vka_free(ctx, o);
    probe_end(&p);
    return r;
}

/* ---------------------------------------------------------------- texel buffers */

enum { TEXEL_FIRST = 3 }; /* invocation 0 reads this texel: not only from 0 */

vkattn_result vka_probe_texel(vkattn_context *ctx, vkattn_self_test_check *checks,
                              bool fail_on_purpose)
{
    const int first = VKA_CHECK_TEXEL_RGBA32F, count = 3;
    probe p = {.started = now_ms()};
    uint32_t n = vka_workgroup_size(ctx, 64), texels = TEXEL_FIRST + n;
    /* f32 quarters, halves of every exponent range kernels see, 32-bit patterns */
    float *f32 = vka_alloc(ctx, texels * 16);
    uint16_t *f16 = vka_alloc(ctx, texels * 8);
    uint32_t *u32 = vka_alloc(ctx, texels * 16), *o = vka_alloc(ctx, 3ull * n * 16);
    vkattn_result r = f32 && f16 && u32 && o ? VKATTN_SUCCESS
                                             : vka_fail(ctx, VKATTN_ERROR_OUT_OF_HOST_MEMORY,
                                                        "self-test: out of host memory");
    for (uint32_t e = 0; r == VKATTN_SUCCESS && e < texels * 4; e++) {
        f32[e] = (float)e * 0.25f - 7.5f;
        f16[e] = vkattn_f32_to_f16(ldexpf((float)(e % 13) - 6.0f, (int)(e % 25) - 14));
        u32[e] = e * 2654435761u;
    }
    vka_binding b[4];
    if (r == VKATTN_SUCCESS)
        r = probe_buffer(ctx, &p, texels * 16, f32, VK_FORMAT_R32G32B32A32_SFLOAT, &b[0]);
    if (r == VKATTN_SUCCESS)
        r = probe_buffer(ctx, &p, texels * 8, f16, VK_FORMAT_R16G16B16A16_SFLOAT, &b[1]);
    if (r == VKATTN_SUCCESS)
        r = probe_buffer(ctx, &p, texels * 16, u32, VK_FORMAT_R32G32B32A32_UINT, &b[2]);
    if (r == VKATTN_SUCCESS)
        r = probe_buffer(ctx, &p, 3ull * n * 16, NULL, VK_FORMAT_UNDEFINED, &b[3]);
    char why[160] = "";
    uint32_t push = TEXEL_FIRST;
    if (r == VKATTN_SUCCESS)
        r = dispatch(ctx, &texel_kernel, &n, 1, b, &push, why, sizeof why);
    if (r == VKATTN_SUCCESS && !why[0])
        r = vkattn_buffer_download(p.buffers[3], 0, o, 3ull * n * 16);
    static const char *const format[3] = {"rgba32f", "rgba16f", "rgba32ui"};
    for (uint32_t f = 0; r == VKATTN_SUCCESS && !why[0] && f < 3; f++)
        for (uint32_t e = 0; e < n * 4; e++) {
            uint32_t src = TEXEL_FIRST * 4 + e, got = o[f * n * 4 + e], want;
            float as_float = f == 1 ? vkattn_f16_to_f32(f16[src]) : f32[src];
            memcpy(&want, &as_float, 4);
            if (f == 2)
                want = u32[src];
            if (got != want || (fail_on_purpose && f == 0 && e == 0)) {
                snprintf(checks[first + f].detail, sizeof checks[0].detail,
                         "invocation %u, component %u of an %s texel: bits 0x%08x, expected "
                         "0x%08x%s",
                         e / 4, e % 4, format[f], got, want,
                         fail_on_purpose && f == 0 ? " (failed on purpose)" : "");
                break;
            }
        }
    if (r == VKATTN_SUCCESS && why[0])
        fail_checks(checks, first, count, why, now_ms() - p.started);
    else if (r == VKATTN_SUCCESS)
        finish_checks(checks, first, count, now_ms() - p.started);
    vka_free(ctx, f32);
    vka_free(ctx, f16);
    vka_free(ctx, u32);
    vka_free(ctx, o);
    probe_end(&p);
    return r;
}

/* ---------------------------------------------------------------- 16-bit storage */

vkattn_result vka_probe_storage16(vkattn_context *ctx, vkattn_self_test_check *checks)
{
    probe p = {.started = now_ms()};
    uint32_t n = vka_workgroup_size(ctx, 64);
    uint16_t *in = vka_alloc(ctx, 5ull * n * 2), *o = vka_alloc(ctx, 5ull * n * 2);
    vkattn_result r =
        in && o ? VKATTN_SUCCESS
                : vka_fail(ctx, VKATTN_ERROR_OUT_OF_HOST_MEMORY, "self-test: out of host memory");
    for (uint32_t e = 0; r == VKATTN_SUCCESS && e < 5 * n; e++) /* quads, then scalars */
        in[e] = vkattn_f32_to_f16(ldexpf((float)(e % 11) - 5.0f, (int)(e % 23) - 11));
    vka_binding b[3];
    if (r == VKATTN_SUCCESS)
        r = probe_buffer(ctx, &p, 4ull * n * 2, in, VK_FORMAT_UNDEFINED, &b[0]);
    if (r == VKATTN_SUCCESS)
        r = probe_buffer(ctx, &p, (uint64_t)n * 2, in + 4 * n, VK_FORMAT_UNDEFINED, &b[1]);
    if (r == VKATTN_SUCCESS)
        r = probe_buffer(ctx, &p, 5ull * n * 2, NULL, VK_FORMAT_UNDEFINED, &b[2]);
    char why[160] = "";
    if (r == VKATTN_SUCCESS)
        r = dispatch(ctx, &storage16_kernel, &n, 1, b, NULL, why, sizeof why);
    if (r == VKATTN_SUCCESS && !why[0])
        r = vkattn_buffer_download(p.buffers[2], 0, o, 5ull * n * 2);
    for (uint32_t i = 0; r == VKATTN_SUCCESS && !why[0] && i < n; i++) {
        uint16_t want[5] = {in[4 * n + i], in[4 * i + 3], in[4 * i + 2], in[4 * i + 1], in[4 * i]};
        uint16_t got[5] = {o[i], o[n + 4 * i], o[n + 4 * i + 1], o[n + 4 * i + 2],
                           o[n + 4 * i + 3]};
        if (memcmp(want, got, sizeof want) != 0) {
            snprintf(checks[VKA_CHECK_STORAGE16].detail, sizeof checks[0].detail,
                     "invocation %u: float16_t copied as 0x%04x (expected 0x%04x), f16vec4 "
                     "read back as 0x%04x 0x%04x 0x%04x 0x%04x (expected 0x%04x 0x%04x 0x%04x "
                     "0x%04x)",
                     i, got[0], want[0], got[1], got[2], got[3], got[4], want[1], want[2], want[3],
                     want[4]);
            break;
        }
    }
    if (r == VKATTN_SUCCESS && why[0])
        fail_checks(checks, VKA_CHECK_STORAGE16, 1, why, now_ms() - p.started);
    else if (r == VKATTN_SUCCESS)
        finish_checks(checks, VKA_CHECK_STORAGE16, 1, now_ms() - p.started);
    vka_free(ctx, in);
    vka_free(ctx, o);
    probe_end(&p);
    return r;
}

/* ---------------------------------------------------------------- shared memory */

vkattn_result vka_probe_shared(vkattn_context *ctx, vkattn_self_test_check *checks)
{
    probe p = {.started = now_ms()};
    uint32_t n = vka_workgroup_size(ctx, 64); /* at most 64 */
    /* 16 KiB, the least every device has, in whole rows of the workgroup */
    uint32_t tile = 4096u / n * n;
    float o[2 * 64];
    vka_binding b;
    vkattn_result r = probe_buffer(ctx, &p, 2ull * n * 4, NULL, VK_FORMAT_UNDEFINED, &b);
    char why[160] = "";
    uint32_t spec[2] = {n, tile};
    if (r == VKATTN_SUCCESS)
        r = dispatch(ctx, &shared_kernel, spec, 2, &b, NULL, why, sizeof why);
    if (r == VKATTN_SUCCESS && !why[0])
        r = vkattn_buffer_download(p.buffers[0], 0, o, 2ull * n * 4);
    for (uint32_t i = 0; r == VKATTN_SUCCESS && !why[0] && i < n; i++) {
        double sum = 0;
        for (uint32_t t = n - 1 - i; t < tile; t += n)
            sum += t;
        float again = (float)(2u * ((i * 7u + 3u) % tile) + 1u);
        if (o[i] != (float)sum || o[n + i] != again) {
            snprintf(checks[VKA_CHECK_SHARED].detail, sizeof checks[0].detail,
                     "invocation %u read %g and %g from shared memory after barriers; expected "
                     "%g and %g",
                     i, o[i], o[n + i], sum, again);
            break;
        }
    }
    if (r == VKATTN_SUCCESS && why[0])
        fail_checks(checks, VKA_CHECK_SHARED, 1, why, now_ms() - p.started);
    else if (r == VKATTN_SUCCESS)
        finish_checks(checks, VKA_CHECK_SHARED, 1, now_ms() - p.started);
    probe_end(&p);
    return r;
}

/* ---------------------------------------------------------------- cooperative matrices */

#if VKATTN_HAVE_COOPMAT
static const vka_kernel coopmat_kernel = {
    .name = "selftest_coopmat",
    .spirv = &vka_spirv_selftest_coopmat,
    .binding_count = 2,
    .bindings = {VKA_BINDING_STORAGE, VKA_BINDING_STORAGE},
    .full_subgroups = true,
};

/* Small integers (|A|, |B| <= 3, K <= 64): every product and sum is exact. */
static float cm_a(uint32_t i, uint32_t k) { return (float)((i + 2 * k) % 7) - 3.0f; }
static float cm_b(uint32_t k, uint32_t j) { return (float)((3 * k + j) % 5) - 2.0f; }
static float cm_c(uint32_t i, uint32_t j) { return (float)i - (float)j; }

vkattn_result vka_probe_coopmat(vkattn_context *ctx, vkattn_self_test_check *checks)
{
    probe p = {.started = now_ms()};
    vkattn_coopmat_shape s = ctx->info.coopmat_shape;
    uint32_t sg = vka_subgroup_size(ctx);
    uint64_t na = (uint64_t)s.m * s.k, nb = (uint64_t)s.k * s.n, nc = (uint64_t)s.m * s.n;
    float *in = vka_alloc(ctx, (na + nb + nc) * 4), *o = vka_alloc(ctx, nc * 4);
    vkattn_result r =
        in && o ? VKATTN_SUCCESS
                : vka_fail(ctx, VKATTN_ERROR_OUT_OF_HOST_MEMORY, "self-test: out of host memory");
    for (uint32_t i = 0; r == VKATTN_SUCCESS && i < s.m; i++)
        for (uint32_t k = 0; k < s.k; k++)
            in[i * s.k + k] = cm_a(i, k);
    for (uint32_t j = 0; r == VKATTN_SUCCESS && j < s.n; j++) /* B column-major: B^T rows */
        for (uint32_t k = 0; k < s.k; k++)
            in[na + j * s.k + k] = cm_b(k, j);
    for (uint32_t i = 0; r == VKATTN_SUCCESS && i < s.m; i++)
        for (uint32_t j = 0; j < s.n; j++)
            in[na + nb + i * s.n + j] = cm_c(i, j);
    vka_binding b[2];
    if (r == VKATTN_SUCCESS)
        r = probe_buffer(ctx, &p, (na + nb + nc) * 4, in, VK_FORMAT_UNDEFINED, &b[0]);
    if (r == VKATTN_SUCCESS)
        r = probe_buffer(ctx, &p, nc * 4, NULL, VK_FORMAT_UNDEFINED, &b[1]);
    char why[160] = "";
    uint32_t spec[19] = {sg};
    spec[16] = s.m;
    spec[17] = s.n;
    spec[18] = s.k;
    if (r == VKATTN_SUCCESS)
        r = dispatch(ctx, &coopmat_kernel, spec, 19, b, NULL, why, sizeof why);
    if (r == VKATTN_SUCCESS && !why[0])
        r = vkattn_buffer_download(p.buffers[1], 0, o, nc * 4);
    for (uint32_t e = 0; r == VKATTN_SUCCESS && !why[0] && e < nc; e++) {
        uint32_t i = (uint32_t)(e / s.n), j = (uint32_t)(e % s.n);
        double want = cm_c(i, j);
        for (uint32_t k = 0; k < s.k; k++)
            want += (double)cm_a(i, k) * cm_b(k, j);
        if (o[e] != (float)want) {
            snprintf(checks[VKA_CHECK_COOPMAT].detail, sizeof checks[0].detail,
                     "%ux%ux%u coopMatMulAdd: D[%u][%u] = %g, expected %g", s.m, s.n, s.k, i, j,
                     o[e], want);
            break;
        }
    }
    if (r == VKATTN_SUCCESS && why[0])
        fail_checks(checks, VKA_CHECK_COOPMAT, 1, why, now_ms() - p.started);
    else if (r == VKATTN_SUCCESS)
        finish_checks(checks, VKA_CHECK_COOPMAT, 1, now_ms() - p.started);
    vka_free(ctx, in);
    vka_free(ctx, o);
    probe_end(&p);
    return r;
}
#else
vkattn_result vka_probe_coopmat(vkattn_context *ctx, vkattn_self_test_check *checks)
{
    (void)ctx;
    (void)checks; /* never offered: the device record says the build lacks them */
    return VKATTN_SUCCESS;
}
#endif
