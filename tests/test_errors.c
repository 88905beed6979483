/* Error paths: every bad input returns its code, names the parameter, and
 * leaves nothing behind. destroy(NULL) is a no-op everywhere. */
#include "test_util.h"

#include <stdio.h>

typedef struct log_capture {
    char last[1024];
    int errors;
} log_capture;

static void capture(void *user, vkattn_log_level level, const char *message)
{
    log_capture *c = user;
    if (level == VKATTN_LOG_ERROR) {
        c->errors++;
        snprintf(c->last, sizeof c->last, "%s", message);
    }
}

static void test_destroy_null_is_noop(void **state)
{
    (void)state;
    vkattn_context_destroy(NULL);
    vkattn_buffer_destroy(NULL);
    vkattn_timer_destroy(NULL);
}

static void test_create_argument_errors(void **state)
{
    (void)state;
    assert_int_equal(vkattn_context_create(NULL, NULL), VKATTN_ERROR_INVALID_ARGUMENT);

    log_capture cap = {0};
    vkattn_allocator half = {.allocate = NULL, .free = NULL};
    vkattn_context_desc desc = {.allocator = &half, .log = capture, .log_user = &cap};
    vkattn_context *ctx = (vkattn_context *)&cap; /* must be reset to NULL */
    assert_int_equal(vkattn_context_create(&desc, &ctx), VKATTN_ERROR_INVALID_ARGUMENT);
    assert_null(ctx);
    assert_non_null(strstr(cap.last, "desc->allocator"));
}

static void test_impossible_device(void **state)
{
    (void)state;
    log_capture cap = {0};
    vkattn_context_desc desc = {.device = "99", .log = capture, .log_user = &cap};
    vkattn_context *ctx = (vkattn_context *)&cap;
    assert_int_equal(vkattn_context_create(&desc, &ctx), VKATTN_ERROR_DEVICE_NOT_FOUND);
    assert_null(ctx);
    assert_non_null(strstr(cap.last, "device index 99 does not exist"));

    desc.device = "no-such-gpu-name";
    assert_int_equal(vkattn_context_create(&desc, &ctx), VKATTN_ERROR_DEVICE_NOT_FOUND);
    assert_null(ctx);
    assert_non_null(strstr(cap.last, "no-such-gpu-name"));

    uint32_t count = 0, chosen = 0;
    assert_int_equal(vkattn_list_devices("99", NULL, 0, &count, &chosen, NULL, NULL),
                     VKATTN_SUCCESS);
    assert_true(count >= 1);
    assert_int_equal(chosen, UINT32_MAX);
    assert_int_equal(vkattn_list_devices(NULL, NULL, 0, NULL, NULL, NULL, NULL),
                     VKATTN_ERROR_INVALID_ARGUMENT);
}

static void test_borrow_errors(void **state)
{
    (void)state;
    log_capture cap = {0};
    vkattn_vulkan_borrow borrow = {0};
    vkattn_context_desc desc = {.borrow = &borrow, .log = capture, .log_user = &cap};
    vkattn_context *ctx = NULL;
    assert_int_equal(vkattn_context_create(&desc, &ctx), VKATTN_ERROR_INVALID_ARGUMENT);
    assert_null(ctx);
    assert_non_null(strstr(cap.last, "desc->borrow"));
}

static void test_null_arguments(void **state)
{
    test_gpu *g = *state;
    vkattn_context *ctx = g->ctx;
    vkattn_buffer *b = NULL;
    assert_int_equal(vkattn_buffer_create(NULL, NULL, &b), VKATTN_ERROR_INVALID_ARGUMENT);
    TEST_FAILS(ctx, VKATTN_ERROR_INVALID_ARGUMENT, "desc is NULL",
               vkattn_buffer_create(ctx, NULL, &b));
    assert_null(b);
    vkattn_buffer_desc zero = {0};
    TEST_FAILS(ctx, VKATTN_ERROR_INVALID_ARGUMENT, "desc->size is 0",
               vkattn_buffer_create(ctx, &zero, &b));
    assert_null(b);
    vkattn_buffer_desc huge = {.size = 1ull << 50};
    TEST_FAILS(ctx, VKATTN_ERROR_OUT_OF_RANGE, "maxMemoryAllocationSize",
               vkattn_buffer_create(ctx, &huge, &b));
    assert_null(b);
    assert_int_equal(vkattn_buffer_upload(NULL, 0, "x", 1), VKATTN_ERROR_INVALID_ARGUMENT);
    TEST_FAILS(ctx, VKATTN_ERROR_INVALID_ARGUMENT, "vkattn_cmd_convert: cmd is NULL",
               vkattn_cmd_convert(ctx, VK_NULL_HANDLE, NULL));
    assert_int_equal(vkattn_convert(NULL, NULL), VKATTN_ERROR_INVALID_ARGUMENT);
    TEST_FAILS(ctx, VKATTN_ERROR_INVALID_ARGUMENT, "args is NULL", vkattn_convert(ctx, NULL));
    TEST_FAILS(ctx, VKATTN_ERROR_INVALID_ARGUMENT, "cmd is NULL", vkattn_commands_begin(ctx, NULL));
    TEST_FAILS(ctx, VKATTN_ERROR_INVALID_ARGUMENT, "no vkattn_commands_begin",
               vkattn_commands_submit(ctx));
    TEST_FAILS(ctx, VKATTN_ERROR_INVALID_ARGUMENT, "size is NULL",
               vkattn_context_pipeline_cache_data(ctx, NULL, NULL));
    TEST_FAILS(ctx, VKATTN_ERROR_INVALID_ARGUMENT, "path is empty",
               vkattn_context_save_pipeline_cache(ctx, ""));
    assert_string_equal(vkattn_context_last_error(NULL), "ctx is NULL");
    assert_null(vkattn_context_device_info(NULL));
}

static void test_commands_state_errors(void **state)
{
    test_gpu *g = *state;
    vkattn_context *ctx = g->ctx;
    VkCommandBuffer cmd;
    TEST_OK(ctx, vkattn_commands_begin(ctx, &cmd));
    VkCommandBuffer again;
    TEST_FAILS(ctx, VKATTN_ERROR_INVALID_ARGUMENT, "already recording",
               vkattn_commands_begin(ctx, &again));
    vkattn_buffer *b = test_buffer_with(ctx, NULL, 16);
    uint8_t x[4] = {0};
    TEST_FAILS(ctx, VKATTN_ERROR_INVALID_ARGUMENT, "recording", vkattn_buffer_upload(b, 0, x, 4));
    vkattn_commands_discard(ctx);
    TEST_OK(ctx, vkattn_buffer_upload(b, 0, x, 4));
    TEST_OK(ctx, vkattn_commands_begin(ctx, &cmd));
    TEST_OK(ctx, vkattn_commands_submit(ctx));
    vkattn_buffer_destroy(b);
}

static void test_tensor_errors(void **state)
{
    test_gpu *g = *state;
    vkattn_context *ctx = g->ctx;
    vkattn_buffer *b = test_buffer_with(ctx, NULL, 1024);
    int64_t n = 16;
    vkattn_tensor good = vkattn_tensor_make(b, 0, VKATTN_DTYPE_F32, 1, &n);
    vkattn_convert_args args = {good, vkattn_tensor_make(b, 512, VKATTN_DTYPE_F32, 1, &n), 1.0f};

    vkattn_convert_args bad;
    const vkattn_result INVALID = VKATTN_ERROR_INVALID_ARGUMENT,
                        DTYPE = VKATTN_ERROR_UNSUPPORTED_DTYPE, SHAPE = VKATTN_ERROR_SHAPE_MISMATCH;
#define CASE(code, needle, change) \
    TEST_FAILS_CHANGED(ctx, bad, args, change, code, needle, vkattn_convert(ctx, &bad))
    CASE(INVALID, "args->src.buffer is NULL", bad.src.buffer = NULL);
    CASE(DTYPE, "args->dst.dtype 19", bad.dst.dtype = (vkattn_dtype)19);
    CASE(DTYPE, "args->dst.dtype is u8", bad.dst.dtype = VKATTN_DTYPE_U8);
    CASE(INVALID, "args->src.offset 2", bad.src.offset = 2);
    CASE(INVALID, "args->src.rank 0", bad.src.rank = 0);
    CASE(INVALID, "args->src.rank 5", bad.src.rank = 5);
    CASE(INVALID, "args->dst.shape[0] is 0", bad.dst.shape[0] = 0);
    CASE(INVALID, "args->dst.strides[0] is -1", bad.dst.strides[0] = -1);
    CASE(VKATTN_ERROR_OUT_OF_RANGE, "args->dst spans bytes 1000..1064", bad.dst.offset = 1000);
    CASE(SHAPE, "16 elements but args->dst has 15", bad.dst.shape[0] = 15);
    CASE(INVALID, "overlap", bad.dst.offset = 32);
    CASE(INVALID, "not contiguous",
         bad.src.strides[0] = 2); /* strided: convert takes contiguous tensors */

    /* a buffer of another context */
    test_gpu *other = test_gpu_open(0);
    vkattn_buffer *foreign = test_buffer_with(other->ctx, NULL, 1024);
    CASE(INVALID, "another context", bad.src.buffer = foreign);
    vkattn_buffer_destroy(foreign);
    test_gpu_close(other);

    /* nothing was dispatched by the failures: the good call still works */
    TEST_OK(ctx, vkattn_convert(ctx, &args));
    vkattn_buffer_destroy(b);
#undef CASE
}

static void test_timer_errors(void **state)
{
    test_gpu *g = *state;
    vkattn_context *ctx = g->ctx;
    vkattn_timer *t = (vkattn_timer *)g;
    TEST_FAILS(ctx, VKATTN_ERROR_INVALID_ARGUMENT, "intervals is 0",
               vkattn_timer_create(ctx, 0, &t));
    assert_null(t);
    if (!vkattn_context_device_info(ctx)->timestamps)
        return;
    TEST_OK(ctx, vkattn_timer_create(ctx, 2, &t));
    VkCommandBuffer cmd;
    TEST_OK(ctx, vkattn_commands_begin(ctx, &cmd));
    TEST_FAILS(ctx, VKATTN_ERROR_OUT_OF_RANGE, "interval 2 does not exist",
               vkattn_cmd_timer_begin(t, cmd, 2));
    TEST_FAILS(ctx, VKATTN_ERROR_INVALID_ARGUMENT, "cmd is NULL",
               vkattn_cmd_timer_end(t, VK_NULL_HANDLE, 0));
    vkattn_commands_discard(ctx);
    double ms;
    TEST_FAILS(ctx, VKATTN_ERROR_INVALID_ARGUMENT, "ms is NULL", vkattn_timer_read_ms(t, 0, NULL));
    (void)ms;
    vkattn_timer_destroy(t);
}

/* Validation on a borrowed instance needs VK_EXT_debug_utils there. */
static void test_borrowed_validation_needs_debug_utils(void **state)
{
    (void)state;
    VkApplicationInfo app = {.sType = VK_STRUCTURE_TYPE_APPLICATION_INFO,
                             .apiVersion = VK_API_VERSION_1_2};
    VkInstanceCreateInfo ici = {.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO,
                                .pApplicationInfo = &app};
    VkInstance instance;
    assert_int_equal(vkCreateInstance(&ici, NULL, &instance), VK_SUCCESS);
    uint32_t n = 1;
    VkPhysicalDevice pd;
    VkResult vr = vkEnumeratePhysicalDevices(instance, &n, &pd);
    assert_true(vr == VK_SUCCESS || vr == VK_INCOMPLETE);
    float prio = 1.0f;
    VkDeviceQueueCreateInfo qci = {.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO,
                                   .queueFamilyIndex = 0,
                                   .queueCount = 1,
                                   .pQueuePriorities = &prio};
    VkDeviceCreateInfo dci = {.sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO,
                              .queueCreateInfoCount = 1,
                              .pQueueCreateInfos = &qci};
    VkDevice device;
    assert_int_equal(vkCreateDevice(pd, &dci, NULL, &device), VK_SUCCESS);

    log_capture cap = {0};
    vkattn_vulkan_borrow borrow = {.instance = instance,
                                   .physical_device = pd,
                                   .device = device,
                                   .get_instance_proc_addr = vkGetInstanceProcAddr};
    vkattn_context_desc desc = {
        .borrow = &borrow, .flags = VKATTN_CONTEXT_VALIDATION, .log = capture, .log_user = &cap};
    vkattn_context *ctx = NULL;
    assert_int_equal(vkattn_context_create(&desc, &ctx), VKATTN_ERROR_LAYER_NOT_PRESENT);
    assert_null(ctx);
    assert_non_null(strstr(cap.last, "VK_EXT_debug_utils"));

    borrow.queue_family_index = 77;
    desc.flags = 0;
    assert_int_equal(vkattn_context_create(&desc, &ctx), VKATTN_ERROR_INVALID_ARGUMENT);
    assert_non_null(strstr(cap.last, "queue_family_index 77"));
    borrow.queue_family_index = 0;
    borrow.queue_index = 5;
    assert_int_equal(vkattn_context_create(&desc, &ctx), VKATTN_ERROR_INVALID_ARGUMENT);
    assert_non_null(strstr(cap.last, "queue_index 5"));

    /* the host's objects survive every failed attempt */
    vkDestroyDevice(device, NULL);
    vkDestroyInstance(instance, NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_destroy_null_is_noop),
        cmocka_unit_test(test_create_argument_errors),
        cmocka_unit_test(test_impossible_device),
        cmocka_unit_test(test_borrow_errors),
        cmocka_unit_test(test_null_arguments),
        cmocka_unit_test(test_commands_state_errors),
        cmocka_unit_test(test_tensor_errors),
        cmocka_unit_test(test_timer_errors),
        cmocka_unit_test(test_borrowed_validation_needs_debug_utils),
    };
    return cmocka_run_group_tests(tests, test_gpu_setup, test_gpu_teardown);
}
