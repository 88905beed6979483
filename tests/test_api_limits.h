/* Shared by the API-abuse suite (test_api_limits*.c). */
#ifndef VKATTN_TEST_API_LIMITS_H
#define VKATTN_TEST_API_LIMITS_H

#include "test_util.h"

#define P31 (1ull << 31)
#define P32 (1ull << 32)
#define P62 (1ull << 62)
#define P63 (1ull << 63)
#define I64MAX ((uint64_t)INT64_MAX)
/* any error code will do (which one depends on the device's limits), but
 * the message must still name the parameter */
#define ANY_ERROR ((vkattn_result)1)

/* One call checked against its expectation: 0 when it matches, else 1 with
 * the mismatch printed, so a table reports every bad case at once. */
int limits_expect(const char *label, vkattn_result got, vkattn_result want, const char *needle,
                  const char *message);

/* Output buffers hold SENTINEL bytes before a refused call and after it. */
#define SENTINEL 0xa5
vkattn_buffer *limits_sentinel_buffer(vkattn_context *ctx, size_t bytes);
void limits_sentinel_fill(vkattn_context *ctx, vkattn_buffer *b);
/* 0 when every byte is still SENTINEL, else 1 with `label` printed. */
int limits_sentinel_intact(vkattn_context *ctx, vkattn_buffer *b, const char *label);

/* test_api_limits_layers.c: KV cache and MHA descs, KV attention's scale
 * (cmocka tests on the group's test_gpu). */
void test_kv_cache_desc_limits(void **state);
void test_convert_limits(void **state);
void test_attention_limits(void **state);
void test_linear_limits(void **state);
void test_kv_attention_scale(void **state);
void test_mha_desc_limits(void **state);

/* test_api_limits_io.c: its own cmocka group; the number of failures. */
int test_api_limits_io_run(void);

#endif
