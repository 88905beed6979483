/* Contexts: standalone and borrowed, device choice, capabilities, two
 * contexts at once, the pipeline cache. Runs once per Vulkan implementation. */
#include "test_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

/* ----------------------------------------------------------- helpers */

/* Runs dst = 2 * src over n floats on the context and checks every value. */
static void run_convert_check(vkattn_context *ctx, int64_t n)
{
    float *host = malloc(n * sizeof *host), *back = malloc(n * sizeof *back);
    assert_non_null(host);
    assert_non_null(back);
    test_rng rng = test_rng_seed((uint64_t)n);
    test_fill_uniform(&rng, host, (size_t)n, -4.0f, 4.0f);
    vkattn_buffer *a = test_buffer_with(ctx, host, n * 4), *b = test_buffer_with(ctx, NULL, n * 4);
    vkattn_convert_args args = {vkattn_tensor_make(a, 0, VKATTN_DTYPE_F32, 1, &n),
                                vkattn_tensor_make(b, 0, VKATTN_DTYPE_F32, 1, &n), 2.0f};
    TEST_OK(ctx, vkattn_convert(ctx, &args));
    TEST_OK(ctx, vkattn_buffer_download(b, 0, back, n * 4));
    for (int64_t i = 0; i < n; i++)
        if (back[i] != 2.0f * host[i])
            fail_msg("element %lld: %g, expected %g", (long long)i, back[i], 2.0f * host[i]);
    TEST_DESTROY_BUFFERS(a, b);
    free(host);
    free(back);
}

static bool impl_is(const test_gpu *g, const char *name) { return strcmp(g->impl, name) == 0; }

/* ----------------------------------------------------------- standalone */

static void test_standalone_capabilities(void **state)
{
    (void)state;
    test_gpu *g = test_gpu_open(0);
    const vkattn_device_info *d = vkattn_context_device_info(g->ctx);
    assert_non_null(d);
    assert_true(d->supported);
    assert_true(d->subgroup_size >= 1 && d->subgroup_size <= 128);
    assert_true(d->max_storage_buffer_range >= (1u << 27) || impl_is(g, "default"));
    assert_true(d->max_shared_memory >= 16384);
    assert_true(d->api_version >= VK_API_VERSION_1_2);
    /* The CPU implementations are known quantities: a kernel that silently
     * assumed one of them would fail on another. */
    if (impl_is(g, "lavapipe") || impl_is(g, "lavapipe25")) {
        assert_non_null(strstr(d->name, "llvmpipe"));
        /* the third implementation really is the newer Mesa (tools/lavapipe25.sh) */
        const char *mesa = strstr(d->driver_info, "Mesa ");
        assert_non_null(mesa);
        if (impl_is(g, "lavapipe25"))
            assert_true(atoi(mesa + 5) >= 25);
        assert_int_equal(d->subgroup_size, 8);
        assert_true(d->storage_16bit);
        assert_int_equal(d->f16_path, VKATTN_F16_NATIVE);
        assert_int_equal(d->max_storage_buffer_range, 128u << 20);
    } else if (impl_is(g, "swiftshader")) {
        assert_non_null(strstr(d->name, "SwiftShader"));
        assert_int_equal(d->subgroup_size, 4);
        assert_false(d->storage_16bit);
        assert_false(d->fp16_arithmetic);
        assert_int_equal(d->f16_path, VKATTN_F16_PACKED);
        assert_int_equal(d->max_storage_buffer_range, 1u << 30);
    }
    vkattn_vulkan_handles h;
    vkattn_context_vulkan_handles(g->ctx, &h);
    assert_non_null(h.instance);
    assert_non_null(h.device);
    assert_non_null(h.queue);
    assert_non_null(h.get_device_proc_addr);
    run_convert_check(g->ctx, 1000);
    test_gpu_close(g);
}

static void test_select_by_index_and_name(void **state)
{
    (void)state;
    uint32_t count = 0, chosen = UINT32_MAX;
    assert_int_equal(vkattn_list_devices(NULL, NULL, 0, &count, &chosen, NULL, NULL),
                     VKATTN_SUCCESS);
    assert_true(count >= 1);
    assert_true(chosen < count);
    vkattn_device_info *infos = calloc(count, sizeof *infos);
    assert_int_equal(vkattn_list_devices(NULL, infos, count, &count, NULL, NULL, NULL),
                     VKATTN_SUCCESS);
    for (uint32_t i = 0; i < count; i++) {
        if (!infos[i].supported)
            continue;
        char sel[16];
        snprintf(sel, sizeof sel, "%u", i);
        vkattn_context_desc desc = {.device = sel, .flags = VKATTN_CONTEXT_VALIDATION};
        vkattn_context *ctx = NULL;
        assert_int_equal(vkattn_context_create(&desc, &ctx), VKATTN_SUCCESS);
        assert_string_equal(vkattn_context_device_info(ctx)->name, infos[i].name);
        test_assert_no_validation_messages(ctx);
        vkattn_context_destroy(ctx);

        /* a lower-case middle part of the name selects the same device */
        char part[8] = {0};
        for (int k = 0; k < 4 && infos[i].name[1 + k]; k++)
            part[k] = (char)(infos[i].name[1 + k] | 0x20);
        desc.device = part;
        assert_int_equal(vkattn_context_create(&desc, &ctx), VKATTN_SUCCESS);
        assert_non_null(strstr(vkattn_context_device_info(ctx)->name, infos[i].name));
        vkattn_context_destroy(ctx);
    }
    free(infos);
}

/* Two contexts in one process, used interleaved, do not interfere. */
static void test_two_contexts(void **state)
{
    (void)state;
    test_gpu *a = test_gpu_open(0);
    test_gpu *b = test_gpu_open(VKATTN_CONTEXT_TEST_FORCE_STAGING);
    run_convert_check(a->ctx, 777);
    run_convert_check(b->ctx, 1234);
    run_convert_check(a->ctx, 4096);
    test_gpu_close(b);
    run_convert_check(a->ctx, 33);
    test_gpu_close(a);
}

/* ------------------------------------------------------------- borrowed */

typedef struct host_vulkan {
    VkInstance instance;
    VkPhysicalDevice pd;
    VkDevice device;
    uint32_t family;
    VkDebugUtilsMessengerEXT messenger;
    uint32_t messages;
    bool storage16;
    VkPhysicalDeviceVulkan11Features f11;
    VkPhysicalDeviceFeatures2 features;
} host_vulkan;

static VKAPI_ATTR VkBool32 VKAPI_CALL
host_on_message(VkDebugUtilsMessageSeverityFlagBitsEXT sev, VkDebugUtilsMessageTypeFlagsEXT types,
                const VkDebugUtilsMessengerCallbackDataEXT *data, void *user)
{
    (void)types;
    host_vulkan *h = user;
    if (sev & (VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT |
               VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT)) {
        h->messages++;
        fprintf(stderr, "[host messenger] %s\n", data->pMessage);
    }
    return VK_FALSE;
}

/* What an engine does: its own instance (validation on, debug utils when
 * `debug_utils`), its own device with the features it wants. */
static void host_create(host_vulkan *h, bool debug_utils, bool enable_16bit)
{
    memset(h, 0, sizeof *h);
    VkApplicationInfo app = {.sType = VK_STRUCTURE_TYPE_APPLICATION_INFO,
                             .apiVersion = VK_API_VERSION_1_3};
    const char *layers[] = {"VK_LAYER_KHRONOS_validation"};
    const char *exts[] = {VK_EXT_DEBUG_UTILS_EXTENSION_NAME};
    VkInstanceCreateInfo ici = {
        .sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO,
        .pApplicationInfo = &app,
        .enabledLayerCount = 1,
        .ppEnabledLayerNames = layers,
        .enabledExtensionCount = debug_utils ? 1 : 0,
        .ppEnabledExtensionNames = exts,
    };
    assert_int_equal(vkCreateInstance(&ici, NULL, &h->instance), VK_SUCCESS);
    if (debug_utils) {
        VkDebugUtilsMessengerCreateInfoEXT mi = {
            .sType = VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT,
            .messageSeverity = VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT |
                               VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT,
            .messageType = VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT |
                           VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT,
            .pfnUserCallback = host_on_message,
            .pUserData = h,
        };
        PFN_vkCreateDebugUtilsMessengerEXT create =
            (PFN_vkCreateDebugUtilsMessengerEXT)vkGetInstanceProcAddr(
                h->instance, "vkCreateDebugUtilsMessengerEXT");
        assert_non_null(create);
        assert_int_equal(create(h->instance, &mi, NULL, &h->messenger), VK_SUCCESS);
    }
    uint32_t n = 1;
    VkResult vr = vkEnumeratePhysicalDevices(h->instance, &n, &h->pd);
    assert_true(vr == VK_SUCCESS || vr == VK_INCOMPLETE);
    assert_true(n >= 1);
    VkQueueFamilyProperties fams[16];
    uint32_t nf = 16;
    vkGetPhysicalDeviceQueueFamilyProperties(h->pd, &nf, fams);
    h->family = UINT32_MAX;
    for (uint32_t i = 0; i < nf && h->family == UINT32_MAX; i++)
        if (fams[i].queueFlags & VK_QUEUE_COMPUTE_BIT)
            h->family = i;
    assert_true(h->family != UINT32_MAX);

    VkPhysicalDeviceVulkan11Features supported11 = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES};
    VkPhysicalDeviceFeatures2 supported = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2,
                                           .pNext = &supported11};
    vkGetPhysicalDeviceFeatures2(h->pd, &supported);
    h->storage16 = enable_16bit && supported11.storageBuffer16BitAccess;
    h->f11 = (VkPhysicalDeviceVulkan11Features){
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES,
        .storageBuffer16BitAccess = h->storage16};
    h->features = (VkPhysicalDeviceFeatures2){.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2,
                                              .pNext = &h->f11};
    float prio = 1.0f;
    VkDeviceQueueCreateInfo qci = {.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO,
                                   .queueFamilyIndex = h->family,
                                   .queueCount = 1,
                                   .pQueuePriorities = &prio};
    VkDeviceCreateInfo dci = {.sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO,
                              .pNext = &h->features,
                              .queueCreateInfoCount = 1,
                              .pQueueCreateInfos = &qci};
    assert_int_equal(vkCreateDevice(h->pd, &dci, NULL, &h->device), VK_SUCCESS);
}

static void host_destroy(host_vulkan *h)
{
    vkDestroyDevice(h->device, NULL);
    if (h->messenger) {
        PFN_vkDestroyDebugUtilsMessengerEXT destroy =
            (PFN_vkDestroyDebugUtilsMessengerEXT)vkGetInstanceProcAddr(
                h->instance, "vkDestroyDebugUtilsMessengerEXT");
        destroy(h->instance, h->messenger, NULL);
    }
    vkDestroyInstance(h->instance, NULL);
}

/* The host's objects as a borrow, without an enabled-features chain. */
static vkattn_vulkan_borrow borrow_of(const host_vulkan *h)
{
    vkattn_vulkan_borrow b = {
        .instance = h->instance,
        .physical_device = h->pd,
        .device = h->device,
        .queue_family_index = h->family,
        .get_instance_proc_addr = vkGetInstanceProcAddr,
    };
    return b;
}

static void test_borrowed_device(void **state)
{
    (void)state;
    host_vulkan h;
    host_create(&h, true, true);
    vkattn_vulkan_borrow borrow = borrow_of(&h);
    borrow.enabled_features = &h.features;
    vkattn_context_desc desc = {.borrow = &borrow, .flags = VKATTN_CONTEXT_VALIDATION};
    vkattn_context *ctx = NULL;
    assert_int_equal(vkattn_context_create(&desc, &ctx), VKATTN_SUCCESS);
    vkattn_vulkan_handles handles;
    vkattn_context_vulkan_handles(ctx, &handles);
    assert_ptr_equal(handles.device, h.device);
    assert_ptr_equal(handles.instance, h.instance);
    /* vkattn uses 16-bit storage only if the host enabled it */
    assert_int_equal(vkattn_context_device_info(ctx)->storage_16bit, h.storage16);
    run_convert_check(ctx, 2048);
    test_assert_no_validation_messages(ctx);
    vkattn_context_destroy(ctx);

    /* The host's device is untouched and still works after the context. */
    VkBufferCreateInfo bci = {.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO,
                              .size = 256,
                              .usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT};
    VkBuffer buf;
    assert_int_equal(vkCreateBuffer(h.device, &bci, NULL, &buf), VK_SUCCESS);
    vkDestroyBuffer(h.device, buf, NULL);
    assert_int_equal(h.messages, 0);
    host_destroy(&h);
}

/* No enabled-features chain: vkattn may not assume 16-bit storage, and f16
 * still works through the packed path. */
static void test_borrowed_without_features_uses_packed_f16(void **state)
{
    (void)state;
    host_vulkan h;
    host_create(&h, true, false);
    vkattn_vulkan_borrow borrow = borrow_of(&h); /* no enabled_features */
    vkattn_context_desc desc = {.borrow = &borrow, .flags = VKATTN_CONTEXT_VALIDATION};
    vkattn_context *ctx = NULL;
    assert_int_equal(vkattn_context_create(&desc, &ctx), VKATTN_SUCCESS);
    assert_false(vkattn_context_device_info(ctx)->storage_16bit);
    assert_int_equal(vkattn_context_device_info(ctx)->f16_path, VKATTN_F16_PACKED);
    int64_t n = 9;
    float in[9] = {1, -2, 3.5f, 0.25f, 100, -0.125f, 7, 8, 65504};
    uint16_t out[9];
    vkattn_buffer *a = test_buffer_with(ctx, in, sizeof in),
                  *b = test_buffer_with(ctx, NULL, sizeof out);
    vkattn_convert_args args = {vkattn_tensor_make(a, 0, VKATTN_DTYPE_F32, 1, &n),
                                vkattn_tensor_make(b, 0, VKATTN_DTYPE_F16, 1, &n), 1.0f};
    TEST_OK(ctx, vkattn_convert(ctx, &args));
    TEST_OK(ctx, vkattn_buffer_download(b, 0, out, sizeof out));
    for (int i = 0; i < 9; i++)
        assert_int_equal(out[i], vkattn_f32_to_f16(in[i]));
    TEST_DESTROY_BUFFERS(a, b);
    test_assert_no_validation_messages(ctx);
    vkattn_context_destroy(ctx);
    assert_int_equal(h.messages, 0);
    host_destroy(&h);
}

/* ------------------------------------------------------- validation works */

static void count_only(void *user, vkattn_log_level level, const char *message)
{
    (void)message;
    if (level >= VKATTN_LOG_WARNING)
        ++*(int *)user;
}

/* The zero counts every other test asserts mean something only if a real
 * mistake is seen: make one (a buffer with no usage bits) on purpose. */
static void test_validation_messages_are_counted(void **state)
{
    (void)state;
    int logged = 0;
    vkattn_context_desc desc = {.flags = VKATTN_CONTEXT_VALIDATION,
                                .log = count_only,
                                .log_user = &logged,
                                .device = getenv("VKATTN_DEVICE")};
    vkattn_context *ctx = NULL;
    assert_int_equal(vkattn_context_create(&desc, &ctx), VKATTN_SUCCESS);
    test_assert_no_validation_messages(ctx);
    vkattn_vulkan_handles h;
    vkattn_context_vulkan_handles(ctx, &h);
    PFN_vkCreateBuffer create =
        (PFN_vkCreateBuffer)h.get_device_proc_addr(h.device, "vkCreateBuffer");
    PFN_vkDestroyBuffer destroy =
        (PFN_vkDestroyBuffer)h.get_device_proc_addr(h.device, "vkDestroyBuffer");
    VkBufferCreateInfo bci = {
        .sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO, .size = 64, .usage = 0};
    VkBuffer buf = VK_NULL_HANDLE;
    VkResult vr = create(h.device, &bci, NULL, &buf);
    if (vr == VK_SUCCESS)
        destroy(h.device, buf, NULL);
    uint32_t errors = 0, warnings = 0;
    vkattn_context_validation_counts(ctx, &errors, &warnings);
    assert_true(errors >= 1);
    assert_true(logged >= 1);
    vkattn_context_destroy(ctx);
}

/* --------------------------------------------------------- pipeline cache */

static void test_pipeline_cache_round_trip(void **state)
{
    (void)state;
    char path[] = "/tmp/vkattn-cache-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);

    test_gpu *g = test_gpu_open(0);
    /* the self-test's probes made theirs already */
    uint32_t probes = vkattn_context_pipeline_count(g->ctx);
    run_convert_check(g->ctx, 100);
    assert_int_equal(vkattn_context_pipeline_count(g->ctx), probes + 1);
    run_convert_check(g->ctx, 200); /* same variant: cached, not rebuilt */
    assert_int_equal(vkattn_context_pipeline_count(g->ctx), probes + 1);
    size_t size = 0;
    TEST_OK(g->ctx, vkattn_context_pipeline_cache_data(g->ctx, NULL, &size));
    assert_true(size >= 16 + VK_UUID_SIZE);
    void *bytes = malloc(size);
    TEST_OK(g->ctx, vkattn_context_pipeline_cache_data(g->ctx, bytes, &size));
    TEST_OK(g->ctx, vkattn_context_save_pipeline_cache(g->ctx, path));
    test_gpu_close(g);

    /* from the file */
    vkattn_context_desc desc = {.flags = VKATTN_CONTEXT_VALIDATION,
                                .pipeline_cache_path = path,
                                .device = getenv("VKATTN_DEVICE")};
    vkattn_context *ctx = NULL;
    assert_int_equal(vkattn_context_create(&desc, &ctx), VKATTN_SUCCESS);
    run_convert_check(ctx, 300);
    test_assert_no_validation_messages(ctx);
    vkattn_context_destroy(ctx);

    /* from bytes */
    desc.pipeline_cache_path = NULL;
    desc.pipeline_cache_data = bytes;
    desc.pipeline_cache_size = size;
    assert_int_equal(vkattn_context_create(&desc, &ctx), VKATTN_SUCCESS);
    run_convert_check(ctx, 300);
    vkattn_context_destroy(ctx);

    /* garbage is ignored, not handed to the driver */
    memset(bytes, 0xab, size);
    assert_int_equal(vkattn_context_create(&desc, &ctx), VKATTN_SUCCESS);
    run_convert_check(ctx, 17);
    test_assert_no_validation_messages(ctx);
    vkattn_context_destroy(ctx);

    /* a missing file is an empty cache */
    desc.pipeline_cache_data = NULL;
    desc.pipeline_cache_path = "/nonexistent/dir/cache.bin";
    assert_int_equal(vkattn_context_create(&desc, &ctx), VKATTN_SUCCESS);
    /* saving where nothing can be written fails cleanly, naming the path */
    TEST_FAILS(ctx, VKATTN_ERROR_IO, "/nonexistent/dir/cache.bin",
               vkattn_context_save_pipeline_cache(ctx, "/nonexistent/dir/cache.bin"));
    assert_int_equal(access("/nonexistent/dir/cache.bin.tmp", F_OK), -1);
    vkattn_context_destroy(ctx);
    /* a directory (fopen takes it; its size reads as ~LONG_MAX on Linux) is
     * an empty cache too, and cannot be saved over */
    char dir[] = "/tmp/vkattn-cachedir-XXXXXX";
    assert_non_null(mkdtemp(dir));
    desc.pipeline_cache_path = dir;
    desc.tuning_path = dir;
    assert_int_equal(vkattn_context_create(&desc, &ctx), VKATTN_SUCCESS);
    run_convert_check(ctx, 33);
    /* the temporary file written first is removed when the rename fails */
    char tmp_path[sizeof dir + 4];
    snprintf(tmp_path, sizeof tmp_path, "%s.tmp", dir);
    TEST_FAILS(ctx, VKATTN_ERROR_IO, dir, vkattn_context_save_pipeline_cache(ctx, dir));
    assert_int_equal(access(tmp_path, F_OK), -1);
    TEST_FAILS(ctx, VKATTN_ERROR_IO, dir, vkattn_context_save_tuning(ctx, dir));
    assert_int_equal(access(tmp_path, F_OK), -1);
    test_assert_no_validation_messages(ctx);
    vkattn_context_destroy(ctx);
    rmdir(dir);
    free(bytes);
    unlink(path);
}

/* Tuning data travels as a file or as bytes, and only to the same device. */
static void test_tuning_data_round_trip(void **state)
{
    (void)state;
    test_gpu *g = test_gpu_open(0);
    size_t size = 0;
    TEST_OK(g->ctx, vkattn_context_tuning_data(g->ctx, NULL, &size));
    char *empty = calloc(1, size + 1);
    TEST_OK(g->ctx, vkattn_context_tuning_data(g->ctx, empty, &size));
    assert_non_null(strstr(empty, "vkattn-tuning 1\ndevice "));
    /* an entry for this device, and one under another device's line */
    const char *entry = "2 128 4 3 1 0 0 0 1 2 3 0 12.5000\n";
    size_t cap = 2 * size + 256;
    char *text = calloc(1, cap);
    snprintf(text, cap,
             "%s%sdevice 1 2 3 00000000000000000000000000000000\n7 0 0 0 0 0 0 0 9 9 9 9 1.0\n",
             empty, entry);
    vkattn_context_desc desc = {.flags = VKATTN_CONTEXT_VALIDATION,
                                .device = getenv("VKATTN_DEVICE"),
                                .tuning_data = text,
                                .tuning_size = strlen(text)};
    vkattn_context *ctx = NULL;
    assert_int_equal(vkattn_context_create(&desc, &ctx), VKATTN_SUCCESS);
    size_t n = 0;
    TEST_OK(ctx, vkattn_context_tuning_data(ctx, NULL, &n));
    char *back = calloc(1, n + 1);
    TEST_OK(ctx, vkattn_context_tuning_data(ctx, back, &n));
    assert_non_null(strstr(back, entry)); /* kept: same device */
    assert_null(strstr(back, "7 0 0 0")); /* dropped: another device */
    size_t small = 4;
    TEST_FAILS(ctx, VKATTN_ERROR_OUT_OF_RANGE, "*size 4",
               vkattn_context_tuning_data(ctx, back, &small));

    char path[] = "/tmp/vkattn-tuning-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    TEST_OK(ctx, vkattn_context_save_tuning(ctx, path));
    vkattn_context_destroy(ctx);
    desc.tuning_data = NULL;
    desc.tuning_path = path;
    assert_int_equal(vkattn_context_create(&desc, &ctx), VKATTN_SUCCESS);
    size_t m = 0;
    TEST_OK(ctx, vkattn_context_tuning_data(ctx, NULL, &m));
    char *again = calloc(1, m + 1);
    TEST_OK(ctx, vkattn_context_tuning_data(ctx, again, &m));
    assert_string_equal(again, back);
    test_assert_no_validation_messages(ctx);
    vkattn_context_destroy(ctx);
    /* not tuning data at all: ignored */
    desc.tuning_path = NULL;
    desc.tuning_data = "hello";
    desc.tuning_size = 5;
    assert_int_equal(vkattn_context_create(&desc, &ctx), VKATTN_SUCCESS);
    vkattn_context_destroy(ctx);
    unlink(path);
    free(empty), free(text), free(back), free(again);
    test_gpu_close(g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_standalone_capabilities),
        cmocka_unit_test(test_select_by_index_and_name),
        cmocka_unit_test(test_two_contexts),
        cmocka_unit_test(test_borrowed_device),
        cmocka_unit_test(test_borrowed_without_features_uses_packed_f16),
        cmocka_unit_test(test_pipeline_cache_round_trip),
        cmocka_unit_test(test_validation_messages_are_counted),
        cmocka_unit_test(test_tuning_data_round_trip),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
