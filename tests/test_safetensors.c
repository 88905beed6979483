/* The .safetensors reader (tools/safetensors) on files built byte by byte:
 * every rule of the format it checks (offsets inside the data, spans that
 * match dtype and shape, no overlap, no hole, no trailing byte, unique
 * names, the header cap, string metadata, known fields) refused with a
 * message naming the tensor, the good files read with every dtype's size,
 * and F16/BF16 widened to exactly the library's conversions (normals,
 * subnormals, zeros, infinities, NaN). The writer (st_write): what it
 * writes reads back with every tensor, shape, dtype, byte and metadata
 * entry; its header is padded to 8 bytes; bad tensors are refused naming
 * them, leaving no file. */
#include "safetensors/safetensors.h"
#include "test_util.h"

#include <math.h>
#include <stdio.h>
#include <unistd.h>
#include <stdlib.h>
#include <string.h>

/* A file: the 8-byte length of `json`, `json`, then `data`. */
static size_t make(unsigned char *buf, const char *json, const void *data, size_t data_size)
{
    size_t n = strlen(json);
    for (int b = 0; b < 8; b++)
        buf[b] = (unsigned char)((uint64_t)n >> (8 * b));
    memcpy(buf + 8, json, n);
    memcpy(buf + 8 + n, data, data_size);
    return 8 + n + data_size;
}

/* Parses and expects failure with `says` in the message (prefixed by the
 * path) and nothing left behind. */
static void expect_refused(const char *json, size_t data_size, const char *says)
{
    static unsigned char buf[4096], data[512];
    size_t size = make(buf, json, data, data_size);
    st_file f;
    char err[512] = "";
    if (st_parse(buf, size, "t.safetensors", &f, err, sizeof err) == 0)
        fail_msg("accepted: %s", json);
    if (strncmp(err, "t.safetensors: ", 15) != 0 || !strstr(err, says))
        fail_msg("%s\n -> \"%s\", expected \"%s\"", json, err, says);
    assert_null(f.tensors);
    assert_int_equal(f.count, 0);
}

static void test_refusals(void **state)
{
    (void)state;
    expect_refused("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 4,
                   "\"a\": data_offsets [0, 8] are not inside the data section (4 bytes)");
    expect_refused("{\"a\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,8]}}", 8,
                   "\"a\": data_offsets span 8 bytes but its dtype and shape need 12");
    expect_refused("{\"a\":{\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":[0,2]},"
                   "\"b\":{\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":[1,3]}}",
                   3, "tensor \"b\" overlaps tensor \"a\"");
    expect_refused("{\"a\":{\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":[2,4]}}", 4,
                   "bytes 0 to 2 of the data belong to no tensor (before \"a\")");
    expect_refused("{\"a\":{\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":[0,2]}}", 5,
                   "3 bytes after the last tensor");
    expect_refused("{\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]},"
                   "\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[1,2]}}",
                   2, "tensor \"a\" is named twice");
    expect_refused("{\"a\":{\"dtype\":\"F4\",\"shape\":[1],\"data_offsets\":[0,1]}}", 1,
                   "dtype \"F4\" is not one the format defines");
    expect_refused("{\"a\":{\"shape\":[1],\"data_offsets\":[0,1]}}", 1, "\"dtype\" is missing");
    expect_refused("{\"a\":{\"dtype\":\"U8\",\"shape\":[-1],\"data_offsets\":[0,1]}}", 1,
                   "shape[0] is not a non-negative integer");
    expect_refused("{\"a\":{\"dtype\":\"U8\",\"shape\":[1.5],\"data_offsets\":[0,1]}}", 1,
                   "shape[0] is not a non-negative integer");
    expect_refused("{\"a\":{\"dtype\":\"F64\",\"shape\":[4294967296,4294967296],"
                   "\"data_offsets\":[0,1]}}",
                   1, "its size overflows");
    expect_refused("{\"a\":{\"dtype\":\"U8\",\"shape\":[1,1,1,1,1,1,1,1,1],"
                   "\"data_offsets\":[0,1]}}",
                   1, "9 dimensions, more than 8");
    expect_refused("{\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[1,0]}}", 1,
                   "not inside the data section");
    expect_refused("{\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0]}}", 1,
                   "\"data_offsets\" is not [begin, end]");
    expect_refused("{\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1],\"x\":1}}", 1,
                   "unknown field \"x\"");
    expect_refused("{\"a\":[1]}", 0, "tensor \"a\": not an object");
    expect_refused("{\"__metadata__\":{\"k\":1}}", 0,
                   "\"__metadata__\" entry \"k\" is not a string");
    expect_refused("{\"__metadata__\":[]}", 0, "\"__metadata__\" is not an object");
    expect_refused("[]", 0, "not a JSON object");
    expect_refused("{\"a\":", 0, "not valid JSON");
    expect_refused("{} x", 0, "something other than spaces");

    unsigned char small[8] = {0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0};
    st_file f;
    char err[512];
    assert_int_equal(st_parse(small, 8, NULL, &f, err, sizeof err), -1);
    assert_non_null(strstr(err, "<memory>: header length 4294967295 is over the limit"));
    small[0] = 9, small[1] = small[2] = small[3] = 0;
    assert_int_equal(st_parse(small, 8, NULL, &f, err, sizeof err), -1);
    assert_non_null(strstr(err, "header length 9 runs past the end of the file (8 bytes)"));
    assert_int_equal(st_parse(small, 7, NULL, &f, err, sizeof err), -1);
    assert_non_null(strstr(err, "too short"));
}

/* Every dtype's element size, scalars, empty tensors, metadata, trailing
 * spaces; the tensors point into the data. */
static void test_good_file(void **state)
{
    (void)state;
    static const struct {
        const char *name;
        size_t size;
    } sizes[] = {{"F64", 8}, {"F32", 4}, {"F16", 2}, {"BF16", 2}, {"I64", 8},     {"I32", 4},
                 {"I16", 2}, {"I8", 1},  {"U8", 1},  {"BOOL", 1}, {"F8_E4M3", 1}, {"F8_E5M2", 1}};
    char json[4096];
    size_t o = 0, at = 0;
    o += (size_t)snprintf(json + o, sizeof json - o, "{\"__metadata__\":{\"format\":\"pt\"}");
    for (size_t i = 0; i < 12; i++) {
        o += (size_t)snprintf(json + o, sizeof json - o,
                              ",\"t%zu\":{\"dtype\":\"%s\",\"shape\":[3,1],\"data_offsets\":[%zu,"
                              "%zu]}",
                              i, sizes[i].name, at, at + 3 * sizes[i].size);
        at += 3 * sizes[i].size;
    }
    o +=
        (size_t)snprintf(json + o, sizeof json - o,
                         ",\"s\":{\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":[%zu,%zu]},"
                         "\"e\":{\"dtype\":\"F32\",\"shape\":[0,5],\"data_offsets\":[%zu,%zu]}}   ",
                         at, at + 4, at + 4, at + 4);
    at += 4;
    unsigned char data[256];
    for (size_t i = 0; i < at; i++)
        data[i] = (unsigned char)i;
    static unsigned char buf[8192];
    size_t size = make(buf, json, data, at);
    st_file f;
    char err[512];
    if (st_parse(buf, size, "g", &f, err, sizeof err) != 0)
        fail_msg("%s", err);
    assert_int_equal(f.count, 14);
    size_t offset = 0;
    for (size_t i = 0; i < 12; i++) {
        char name[8];
        snprintf(name, sizeof name, "t%zu", i);
        const st_tensor *t = st_find(&f, name);
        assert_non_null(t);
        assert_string_equal(st_dtype_name(t->dtype), sizes[i].name);
        assert_int_equal(st_dtype_size(t->dtype), sizes[i].size);
        assert_int_equal(t->rank, 2);
        assert_int_equal(t->shape[0], 3);
        assert_int_equal(t->nbytes, 3 * sizes[i].size);
        assert_ptr_equal(t->data, buf + size - at + offset);
        offset += t->nbytes;
    }
    assert_int_equal(st_find(&f, "s")->rank, 0);
    assert_int_equal(st_find(&f, "e")->nbytes, 0);
    assert_null(st_find(&f, "__metadata__"));
    st_close(&f);
    assert_null(f.tensors);
}

/* F16 and BF16 widen exactly as the library's own conversions. */
static void test_widening(void **state)
{
    (void)state;
    enum { N = 65536 };
    uint16_t *bits = malloc(N * 2);
    float *got = malloc(N * 4);
    assert_true(bits && got);
    for (uint32_t i = 0; i < N; i++)
        bits[i] = (uint16_t)i;
    st_tensor t = {"h", ST_F16, 1, {N}, bits, N * 2};
    for (int pass = 0; pass < 2; pass++) {
        t.dtype = pass ? ST_BF16 : ST_F16;
        assert_int_equal(st_to_f32(&t, got, N), 0);
        for (uint32_t i = 0; i < N; i++) {
            float want = pass ? vkattn_bf16_to_f32((uint16_t)i) : vkattn_f16_to_f32((uint16_t)i);
            if (isnan(want) ? !isnan(got[i]) : memcmp(&want, &got[i], 4) != 0)
                fail_msg("%s 0x%04x: %a, expected %a", pass ? "BF16" : "F16", i, got[i], want);
        }
    }
    t.dtype = ST_I16;
    assert_int_equal(st_to_f32(&t, got, N), -1);
    free(bits);
    free(got);
}

/* st_write's file read back by st_open: names, dtypes, shapes, bytes,
 * metadata, a scalar and an empty tensor; an 8-byte aligned header. */
static void test_write_round_trip(void **state)
{
    (void)state;
    char path[] = "/tmp/vkattn-st-write-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    float f32[6] = {1, -2, 3.5f, 0, -0.0f, 1e30f};
    uint16_t bf16[4] = {0x3f80, 0xbf80, 0x7f80, 0x0001};
    int64_t i64 = -7;
    const st_tensor t[4] = {{"model.q_proj.weight", ST_F32, 2, {2, 3}, f32, sizeof f32},
                            {"k", ST_BF16, 1, {4}, bf16, sizeof bf16},
                            {"step", ST_I64, 0, {0}, &i64, 8},
                            {"none", ST_F16, 2, {0, 5}, NULL, 0}};
    const char *meta[4] = {"format", "pt", "num_heads", "3"};
    char err[512] = "";
    if (st_write(path, t, 4, meta, 2, err, sizeof err) != 0)
        fail_msg("%s", err);
    st_file f;
    if (st_open(path, &f, err, sizeof err) != 0)
        fail_msg("%s", err);
    assert_int_equal(f.count, 4);
    for (int k = 0; k < 4; k++) {
        const st_tensor *g = &f.tensors[k];
        assert_string_equal(g->name, t[k].name);
        assert_int_equal(g->dtype, t[k].dtype);
        assert_int_equal(g->rank, t[k].rank);
        assert_memory_equal(g->shape, t[k].shape, sizeof(int64_t) * t[k].rank);
        assert_int_equal(g->nbytes, t[k].nbytes);
        if (t[k].nbytes)
            assert_memory_equal(g->data, t[k].data, t[k].nbytes);
    }
    const unsigned char *bytes = f.map;
    uint64_t header = 0;
    for (int b = 0; b < 8; b++)
        header |= (uint64_t)bytes[b] << (8 * b);
    assert_int_equal(header % 8, 0);
    char *json = calloc(1, header + 1);
    assert_non_null(json);
    memcpy(json, bytes + 8, header);
    assert_non_null(strstr(json, "\"__metadata__\":{\"format\":\"pt\",\"num_heads\":\"3\"}"));
    free(json);
    st_close(&f);

    /* refused, naming the tensor; the file written before stays as it was */
    const struct {
        st_tensor t;
        const char *says;
    } bad[] = {
        {{"a", ST_F32, 1, {2}, f32, 4}, "\"a\": 4 bytes given, its dtype F32 and shape hold 8"},
        {{"__metadata__", ST_F32, 1, {1}, f32, 4}, "reserved for the metadata"},
        {{"", ST_F32, 1, {1}, f32, 4}, "is empty"},
        {{"n", ST_F32, 1, {-1}, f32, 0}, "\"n\": shape[0] -1 is negative"},
        {{"d", ST_DTYPE_COUNT, 1, {1}, f32, 4}, "\"d\": dtype 12 is not an st_dtype"},
        {{"z", ST_F32, 1, {1}, NULL, 4}, "\"z\": no data for 4 bytes"}};
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        err[0] = '\0';
        assert_int_equal(st_write(path, &bad[k].t, 1, NULL, 0, err, sizeof err), -1);
        if (!strstr(err, bad[k].says) || strncmp(err, path, strlen(path)) != 0)
            fail_msg("\"%s\", expected \"%s\"", err, bad[k].says);
    }
    const st_tensor twice[2] = {t[0], t[0]};
    assert_int_equal(st_write(path, twice, 2, NULL, 0, err, sizeof err), -1);
    assert_non_null(strstr(err, "given twice"));
    if (st_open(path, &f, err, sizeof err) != 0)
        fail_msg("the earlier file was damaged: %s", err);
    assert_int_equal(f.count, 4);
    st_close(&f);
    unlink(path);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_good_file),
        cmocka_unit_test(test_widening),
        cmocka_unit_test(test_write_round_trip),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
