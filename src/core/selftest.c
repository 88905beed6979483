/* The start-up self-test (vkattn/selftest.h): which features the device
 * offers, the quirks that match it, the checks (selftest_probes.c) or their
 * cached result, and the features each context then uses. */
#include "core/selftest.h"

#include "core/host.h"
#include "core/coopmat.h"
#include "core/quirks.h"
#include "spec/error_text.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

/* What a check is called and what it guards. */
static const struct {
    const char *name;
    vkattn_feature feature;
} check_info[VKA_CHECK_COUNT] = {
    [VKA_CHECK_SG_ADD_ONE] = {"subgroup.add_one", VKATTN_FEATURE_SUBGROUP_KERNELS},
    [VKA_CHECK_SG_IDS] = {"subgroup.ids", VKATTN_FEATURE_SUBGROUP_KERNELS},
    [VKA_CHECK_SG_REDUCE] = {"subgroup.reduce", VKATTN_FEATURE_SUBGROUP_KERNELS},
    [VKA_CHECK_SG_BROADCAST] = {"subgroup.broadcast", VKATTN_FEATURE_SUBGROUP_KERNELS},
    [VKA_CHECK_SG_SHUFFLE] = {"subgroup.shuffle", VKATTN_FEATURE_SUBGROUP_KERNELS},
    [VKA_CHECK_SG_SHUFFLE_XOR] = {"subgroup.shuffle_xor", VKATTN_FEATURE_SUBGROUP_KERNELS},
    [VKA_CHECK_SHARED] = {"shared.barrier", VKATTN_FEATURE_SHARED_KERNELS},
    [VKA_CHECK_TEXEL_RGBA32F] = {"texel.rgba32f", VKATTN_FEATURE_TEXEL_INPUTS},
    [VKA_CHECK_TEXEL_RGBA16F] = {"texel.rgba16f", VKATTN_FEATURE_TEXEL_INPUTS},
    [VKA_CHECK_TEXEL_RGBA32UI] = {"texel.rgba32ui", VKATTN_FEATURE_TEXEL_INPUTS},
    [VKA_CHECK_STORAGE16] = {"storage16.load_store", VKATTN_FEATURE_STORAGE_16BIT},
    [VKA_CHECK_COOPMAT] = {"coopmat.muladd", VKATTN_FEATURE_COOPMAT_KERNELS},
};

/* Bumped whenever a check changes: results of older checks are not taken. */
#define CHECKS_VERSION 2u
static const char trailer_magic[8] = {'V', 'K', 'A', 'S', 'E', 'L', 'F', '1'};

struct vka_self_test {
    vkattn_self_test_report report;
    uint32_t offered;         /* 1 << vkattn_feature */
    uint32_t quirked;         /* features the matching quirks switch off */
    bool subgroup_by_default; /* the device's own kernel choice */
    bool coopmat_by_default;
    uint64_t key; /* device, driver and vkattn, for cached results */
    bool cached;  /* a trailer with this key was read */
    uint32_t cached_checked, cached_passed;
};

const char *vkattn_feature_name(vkattn_feature feature)
{
    static const char *const names[VKATTN_FEATURE_COUNT] = {
        "subgroup kernels", "shared-memory kernels", "texel-buffer inputs", "16-bit storage",
        "coopmat kernels"};
    return (unsigned)feature < VKATTN_FEATURE_COUNT ? names[feature] : "?";
}

/* FNV-1a, 64 bits. */
static uint64_t hash(uint64_t h, const void *data, size_t size)
{
    const unsigned char *p = data;
    for (size_t i = 0; i < size; i++)
        h = (h ^ p[i]) * 1099511628211ull;
    return h;
}

static void put32(unsigned char *b, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        b[i] = (unsigned char)(v >> (8 * i));
}

static uint32_t get32(const unsigned char *b)
{
    return (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
}

/* The checks that can run on this device (those of offered features). */
static uint32_t runnable_checks(const struct vka_self_test *st)
{
    uint32_t mask = 0;
    for (int k = 0; k < VKA_CHECK_COUNT; k++)
        if (st->offered & (1u << check_info[k].feature))
            mask |= 1u << k;
    return mask;
}

vkattn_result vka_self_test_create(vkattn_context *ctx)
{
    struct vka_self_test *st = vka_alloc(ctx, sizeof *st);
    if (!st)
        return vka_fail(ctx, VKATTN_ERROR_OUT_OF_HOST_MEMORY, "self-test: out of host memory");
    ctx->self_test = st;
    const vkattn_device_info *info = &ctx->info;
    /* the subgroup family needs shuffles, arithmetic and a subgroup size
     * that the pipeline can pin or that cannot vary (vka_subgroup_families_allowed) */
    if (info->subgroup_shuffle && info->subgroup_arithmetic &&
        (info->subgroup_size_control || info->type == VKATTN_DEVICE_TYPE_CPU))
        st->offered |= 1u << VKATTN_FEATURE_SUBGROUP_KERNELS;
    st->offered |= 1u << VKATTN_FEATURE_SHARED_KERNELS;
    if (info->texel_inputs)
        st->offered |= 1u << VKATTN_FEATURE_TEXEL_INPUTS;
    if (info->storage_16bit)
        st->offered |= 1u << VKATTN_FEATURE_STORAGE_16BIT;
    st->subgroup_by_default = info->subgroup_kernels;
    if (vka_coopmat_offered(info))
        st->offered |= 1u << VKATTN_FEATURE_COOPMAT_KERNELS;
    st->coopmat_by_default = info->coopmat_kernels;

    VkPhysicalDeviceVulkan12Properties p12 = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_PROPERTIES};
    VkPhysicalDeviceVulkan11Properties p11 = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_PROPERTIES, .pNext = &p12};
    VkPhysicalDeviceProperties2 props = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2,
                                         .pNext = &p11};
    ctx->vk.vkGetPhysicalDeviceProperties2(ctx->physical_device, &props);
    const VkPhysicalDeviceProperties *p = &props.properties;
    uint32_t fields[7] = {CHECKS_VERSION,
                          p->driverVersion,
                          p->vendorID,
                          p->deviceID,
                          info->subgroup_size,
                          runnable_checks(st),
                          info->coopmat_shape.m | info->coopmat_shape.n << 10 |
                              info->coopmat_shape.k << 20};
    uint64_t key = hash(1469598103934665603ull, p11.driverUUID, VK_UUID_SIZE);
    key = hash(key, p->pipelineCacheUUID, VK_UUID_SIZE);
    key = hash(key, fields, sizeof fields);
    key = hash(key, p->deviceName, strlen(p->deviceName));
    const char *version = vkattn_version_string();
    st->key = hash(key, version, strlen(version));

    vka_quirk_target target = {p12.driverID, p->driverVersion, vka_host_cpu()};
    const vka_quirk *found[VKATTN_MAX_QUIRKS];
    uint32_t n = vka_quirks_matching(&target, found, VKATTN_MAX_QUIRKS);
    vkattn_self_test_report *rep = &st->report;
    for (uint32_t i = 0; i < n && i < VKATTN_MAX_QUIRKS; i++) {
        vkattn_quirk_info *q = &rep->quirks[rep->quirk_count++];
        snprintf(q->id, sizeof q->id, "%s", found[i]->id);
        snprintf(q->why, sizeof q->why, "%s", found[i]->why);
        snprintf(q->reproducer, sizeof q->reproducer, "%s", found[i]->reproducer);
        q->turns_off = found[i]->turns_off;
        q->applied = !(ctx->flags & VKATTN_CONTEXT_NO_QUIRKS);
        if (q->applied)
            st->quirked |= q->turns_off;
    }
    for (int k = 0; k < VKA_CHECK_COUNT; k++) {
        snprintf(rep->checks[k].name, sizeof rep->checks[k].name, "%s", check_info[k].name);
        rep->checks[k].feature = check_info[k].feature;
    }
    rep->check_count = VKA_CHECK_COUNT;
    return VKATTN_SUCCESS;
}

void vka_self_test_destroy(vkattn_context *ctx)
{
    vka_free(ctx, ctx->self_test);
    ctx->self_test = NULL;
}

/* Trailer layout (little-endian): key (8), checked mask (4), passed mask
 * (4), CHECKS_VERSION (4), its size (4), trailer_magic (8). */
size_t vka_self_test_take_trailer(vkattn_context *ctx, const void *data, size_t size)
{
    const unsigned char *t = (const unsigned char *)data + size - VKA_SELF_TEST_TRAILER_BYTES;
    if (!data || size < VKA_SELF_TEST_TRAILER_BYTES ||
        memcmp(t + 24, trailer_magic, sizeof trailer_magic) != 0 ||
        get32(t + 20) != VKA_SELF_TEST_TRAILER_BYTES)
        return size;
    struct vka_self_test *st = ctx->self_test;
    uint64_t key = (uint64_t)get32(t) | (uint64_t)get32(t + 4) << 32;
    if (st && key == st->key && get32(t + 16) == CHECKS_VERSION) {
        st->cached = true;
        st->cached_checked = get32(t + 8);
        st->cached_passed = get32(t + 12);
    }
    return size - VKA_SELF_TEST_TRAILER_BYTES;
}

size_t vka_self_test_trailer(const vkattn_context *ctx, unsigned char *out)
{
    const struct vka_self_test *st = ctx->self_test;
    if (!st || st->report.source == VKATTN_SELF_TEST_SKIPPED)
        return 0;
    uint32_t checked = 0, passed = 0;
    for (int k = 0; k < VKA_CHECK_COUNT; k++) {
        checked |= (uint32_t)st->report.checks[k].checked << k;
        passed |= (uint32_t)st->report.checks[k].passed << k;
    }
    put32(out, (uint32_t)st->key);
    put32(out + 4, (uint32_t)(st->key >> 32));
    put32(out + 8, checked);
    put32(out + 12, passed);
    put32(out + 16, CHECKS_VERSION);
    put32(out + 20, VKA_SELF_TEST_TRAILER_BYTES);
    memcpy(out + 24, trailer_magic, sizeof trailer_magic);
    return VKA_SELF_TEST_TRAILER_BYTES;
}

/* Runs every check of the offered features into the report. */
static vkattn_result run_checks(vkattn_context *ctx, struct vka_self_test *st)
{
    vkattn_self_test_report *rep = &st->report;
    for (int k = 0; k < VKA_CHECK_COUNT; k++) {
        vkattn_self_test_check *c = &rep->checks[k];
        c->checked = c->passed = false;
        c->ms = 0;
        c->detail[0] = '\0';
    }
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    bool fail = ctx->flags & VKATTN_CONTEXT_TEST_FAIL_CHECKS;
    vkattn_self_test_check *c = rep->checks;
    vkattn_result r = vka_probe_shared(ctx, c);
    /* what a quirk switches off is not run: it may be what crashes */
    bool runs[VKATTN_FEATURE_COUNT];
    for (int f = 0; f < VKATTN_FEATURE_COUNT; f++)
        runs[f] = (st->offered & (1u << f)) && !(st->quirked & (1u << f));
    if (r == VKATTN_SUCCESS && runs[VKATTN_FEATURE_SUBGROUP_KERNELS])
        r = vka_probe_subgroup(ctx, c, fail);
    if (r == VKATTN_SUCCESS && runs[VKATTN_FEATURE_TEXEL_INPUTS])
        r = vka_probe_texel(ctx, c, fail);
    if (r == VKATTN_SUCCESS && runs[VKATTN_FEATURE_STORAGE_16BIT])
        r = vka_probe_storage16(ctx, c);
    if (r == VKATTN_SUCCESS && runs[VKATTN_FEATURE_COOPMAT_KERNELS])
        r = vka_probe_coopmat(ctx, c);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    rep->ms = (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6;
    rep->source = VKATTN_SELF_TEST_RAN;
    return r;
}

/* The cached result into the report. */
static void take_cached(struct vka_self_test *st)
{
    vkattn_self_test_report *rep = &st->report;
    for (int k = 0; k < VKA_CHECK_COUNT; k++) {
        vkattn_self_test_check *c = &rep->checks[k];
        c->checked = st->cached_checked >> k & 1u;
        c->passed = st->cached_passed >> k & 1u;
        c->ms = 0;
        snprintf(c->detail, sizeof c->detail, "%s",
                 c->checked && !c->passed
                     ? "failed when the result was cached (vkattn_context_run_self_test "
                       "tells how)"
                     : "");
    }
    rep->source = VKATTN_SELF_TEST_CACHED;
    rep->ms = 0;
}

/* Why feature f does not work, into `why` (empty: it works). */
static void not_working(const vkattn_context *ctx, const struct vka_self_test *st, int f, char *why,
                        size_t size)
{
    why[0] = '\0';
    const vkattn_self_test_report *rep = &st->report;
    if (!(st->offered & (1u << f)) && f == VKATTN_FEATURE_COOPMAT_KERNELS) {
        snprintf(why, size, "%s", ctx->info.coopmat_why);
        return;
    }
    if (!(st->offered & (1u << f))) {
        static const char *const lacks[VKATTN_FEATURE_COUNT] = {
            [VKATTN_FEATURE_SUBGROUP_KERNELS] = ("the device has no subgroup shuffles and "
                                                 "arithmetic in compute shaders, or cannot pin "
                                                 "the subgroup size"),
            [VKATTN_FEATURE_SHARED_KERNELS] = "",
            [VKATTN_FEATURE_TEXEL_INPUTS] = "the device cannot read rgba32f and rgba16f uniform "
                                            "texel buffers",
            [VKATTN_FEATURE_STORAGE_16BIT] = "the device has no 16-bit storage "
                                             "(storageBuffer16BitAccess)",
            [VKATTN_FEATURE_COOPMAT_KERNELS] = ""};
        snprintf(why, size, "%s", lacks[f]);
        return;
    }
    for (uint32_t q = 0; q < rep->quirk_count; q++)
        if (rep->quirks[q].applied && (rep->quirks[q].turns_off & (1u << f))) {
            snprintf(why, size, "quirk %s: %s", rep->quirks[q].id, rep->quirks[q].why);
            return;
        }
    for (int k = 0; k < VKA_CHECK_COUNT; k++) {
        const vkattn_self_test_check *c = &rep->checks[k];
        if ((int)c->feature == f && c->checked && !c->passed) {
            snprintf(why, size, "check %s failed: %s", c->name, c->detail);
            return;
        }
    }
}

/* The coopmat family: an overlay on the other two (the ops it implements
 * take it, the rest keep their family), on by default where the device
 * record says so (GPUs), forced or refused by the flags. */
static vkattn_result decide_coopmat(vkattn_context *ctx, struct vka_self_test *st)
{
    vkattn_feature_report *f = &st->report.features[VKATTN_FEATURE_COOPMAT_KERNELS];
    uint32_t flags = ctx->flags;
    if ((flags & VKATTN_CONTEXT_COOPMAT_KERNELS) && (flags & VKATTN_CONTEXT_NO_COOPMAT_KERNELS))
        return vka_fail(ctx, VKATTN_ERROR_INVALID_ARGUMENT,
                        "desc->flags: VKATTN_CONTEXT_COOPMAT_KERNELS and "
                        "VKATTN_CONTEXT_NO_COOPMAT_KERNELS contradict each other");
    if ((flags & VKATTN_CONTEXT_COOPMAT_KERNELS) && !f->works)
        return vka_fail(ctx, VKATTN_ERROR_UNSUPPORTED,
                        "the coopmat kernels (VKATTN_CONTEXT_COOPMAT_KERNELS) do not work on "
                        "\"%s\": %s",
                        ctx->info.name, f->why);
    bool on = f->works && !(flags & VKATTN_CONTEXT_NO_COOPMAT_KERNELS) &&
              ((flags & VKATTN_CONTEXT_COOPMAT_KERNELS) || st->coopmat_by_default);
    ctx->info.coopmat_kernels = f->on = on;
    ctx->coopmat_works = f->works;
    if (!on && f->works)
        snprintf(f->why, sizeof f->why, "%s",
                 flags & VKATTN_CONTEXT_NO_COOPMAT_KERNELS
                     ? "VKATTN_CONTEXT_NO_COOPMAT_KERNELS"
                     : "CPU drivers emulate cooperative matrices slower than their scalar "
                       "kernels run (VKATTN_CONTEXT_COOPMAT_KERNELS takes them)");
    return VKATTN_SUCCESS;
}

/* The features the context uses, from what works and the flags; an error
 * when a family the flags force does not work. */
static vkattn_result decide(vkattn_context *ctx, struct vka_self_test *st)
{
    vkattn_self_test_report *rep = &st->report;
    vkattn_feature_report *f = rep->features;
    for (int i = 0; i < VKATTN_FEATURE_COUNT; i++) {
        not_working(ctx, st, i, f[i].why, sizeof f[i].why);
        f[i].offered = st->offered & (1u << i);
        f[i].works = !f[i].why[0];
    }
    bool sg_works = f[VKATTN_FEATURE_SUBGROUP_KERNELS].works;
    bool sh_works = f[VKATTN_FEATURE_SHARED_KERNELS].works;
    rep->every_op_has_a_family = sg_works || sh_works;
    uint32_t flags = ctx->flags;
    const char *forced = flags & VKATTN_CONTEXT_SUBGROUP_KERNELS      ? "subgroup"
                         : flags & VKATTN_CONTEXT_NO_SUBGROUP_KERNELS ? "shared"
                                                                      : NULL;
    bool subgroup = forced ? flags & VKATTN_CONTEXT_SUBGROUP_KERNELS : st->subgroup_by_default;
    int chosen = subgroup ? VKATTN_FEATURE_SUBGROUP_KERNELS : VKATTN_FEATURE_SHARED_KERNELS;
    if (forced && !f[chosen].works)
        return vka_fail(
            ctx, VKATTN_ERROR_UNSUPPORTED, "the %s kernels (%s) do not work on \"%s\": %s", forced,
            flags & VKATTN_CONTEXT_SUBGROUP_KERNELS ? "VKATTN_CONTEXT_SUBGROUP_KERNELS"
                                                    : "VKATTN_CONTEXT_NO_SUBGROUP_KERNELS",
            ctx->info.name, f[chosen].why);
    if (!forced && !f[chosen].works && (subgroup ? sh_works : sg_works))
        subgroup = !subgroup; /* the other family passed: it serves every op */
    ctx->info.subgroup_kernels = subgroup;
    ctx->subgroup_families_off = !sg_works;
    f[VKATTN_FEATURE_SUBGROUP_KERNELS].on = subgroup;
    f[VKATTN_FEATURE_SHARED_KERNELS].on = !subgroup;
    bool texel = f[VKATTN_FEATURE_TEXEL_INPUTS].works && !(flags & VKATTN_CONTEXT_NO_TEXEL_BUFFERS);
    ctx->info.texel_inputs = f[VKATTN_FEATURE_TEXEL_INPUTS].on = texel;
    bool s16 = f[VKATTN_FEATURE_STORAGE_16BIT].works;
    ctx->info.storage_16bit = f[VKATTN_FEATURE_STORAGE_16BIT].on = s16;
    ctx->info.f16_path = s16 ? VKATTN_F16_NATIVE : VKATTN_F16_PACKED;
    VKA_TRY(decide_coopmat(ctx, st));
    /* the reason a working feature is not on */
    for (int i = 0; i < VKATTN_FEATURE_COUNT; i++) {
        if (f[i].on || !f[i].works || i == VKATTN_FEATURE_COOPMAT_KERNELS)
            continue;
        const char *why = i == VKATTN_FEATURE_TEXEL_INPUTS ? "VKATTN_CONTEXT_NO_TEXEL_BUFFERS"
                          : forced ? (subgroup ? "VKATTN_CONTEXT_SUBGROUP_KERNELS"
                                               : "VKATTN_CONTEXT_NO_SUBGROUP_KERNELS")
                          : i == VKATTN_FEATURE_SUBGROUP_KERNELS
                              ? "this device's kernel choice is the shared-memory family "
                                "(GPUs; VKATTN_CONTEXT_SUBGROUP_KERNELS takes the subgroup one)"
                              : "the subgroup family serves every op on this device";
        snprintf(f[i].why, sizeof f[i].why, "%s", why);
    }
    if (!rep->every_op_has_a_family)
        vka_log(ctx, VKATTN_LOG_WARNING,
                "self-test: neither kernel family works on \"%s\" (%s; %s): results cannot be "
                "trusted",
                ctx->info.name, f[VKATTN_FEATURE_SUBGROUP_KERNELS].why,
                f[VKATTN_FEATURE_SHARED_KERNELS].why);
    /* a check that failed now (quirks are the caller's to tell: the report) */
    for (int i = 0; rep->source == VKATTN_SELF_TEST_RAN && i < VKATTN_FEATURE_COUNT; i++)
        if (f[i].offered && !f[i].works && strncmp(f[i].why, "check ", 6) == 0)
            vka_log(ctx, VKATTN_LOG_WARNING, "%s off on \"%s\": %s", vkattn_feature_name(i),
                    ctx->info.name, f[i].why);
    return VKATTN_SUCCESS;
}

vkattn_result vka_self_test_start(vkattn_context *ctx)
{
    struct vka_self_test *st = ctx->self_test;
    if (ctx->flags & VKATTN_CONTEXT_NO_SELF_TEST)
        st->report.source = VKATTN_SELF_TEST_SKIPPED;
    else if (st->cached)
        take_cached(st);
    else
        VKA_TRY(run_checks(ctx, st));
    return decide(ctx, st);
}

vkattn_result vkattn_context_self_test(const vkattn_context *ctx, vkattn_self_test_report *out)
{
    if (!ctx || !out)
        return VKATTN_ERROR_INVALID_ARGUMENT;
    *out = ctx->self_test->report;
    return VKATTN_SUCCESS;
}

vkattn_result vkattn_context_run_self_test(vkattn_context *ctx, vkattn_self_test_report *out)
{
    if (!ctx)
        return VKATTN_ERROR_INVALID_ARGUMENT;
    struct vka_self_test *st = ctx->self_test;
    vkattn_result r = run_checks(ctx, st);
    if (r == VKATTN_SUCCESS)
        r = decide(ctx, st);
    if (out)
        *out = st->report;
    return r;
}
