/* .npy reading and writing: round trips, numpy's exact header bytes, and
 * every malformed or unsupported file, written by hand into a temp dir. */
#include "test_files.h"
#include "test_util.h"

#include "npy/npy.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct npy_fixture {
    char dir[64];
} npy_fixture;

static int setup(void **state)
{
    npy_fixture *f = calloc(1, sizeof *f);
    if (!f)
        return -1;
    strcpy(f->dir, "/tmp/vkattn_npy_XXXXXX");
    if (!mkdtemp(f->dir)) {
        free(f);
        return -1;
    }
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    npy_fixture *f = *state;
    test_remove_tree(f->dir, 1); /* the tests make one subdir */
    free(f);
    return 0;
}

static void path_in(void **state, const char *name, char *out, size_t size)
{
    npy_fixture *f = *state;
    snprintf(out, size, "%s/%s", f->dir, name);
}

static bool exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0;
}

static void write_bytes(const char *path, const void *data, size_t n)
{
    FILE *fp = fopen(path, "wb");
    assert_non_null(fp);
    assert_int_equal(fwrite(data, 1, n, fp), n);
    assert_int_equal(fclose(fp), 0);
}

/* A v1.0 file: header text padded with spaces to a 64-byte preamble + '\n',
 * then `data_bytes` bytes 0, 1, 2, ... */
static void write_npy_text(const char *path, const char *header, size_t data_bytes)
{
    size_t hl = strlen(header);
    size_t total = 10 + hl + 1;
    size_t pad = (64 - total % 64) % 64;
    size_t n = total + pad + data_bytes;
    unsigned char *buf = malloc(n);
    assert_non_null(buf);
    memcpy(buf, "\x93NUMPY\x01\x00", 8);
    buf[8] = (unsigned char)((hl + 1 + pad) & 0xff);
    buf[9] = (unsigned char)((hl + 1 + pad) >> 8);
    memcpy(buf + 10, header, hl);
    memset(buf + 10 + hl, ' ', pad);
    buf[10 + hl + pad] = '\n';
    for (size_t i = 0; i < data_bytes; i++)
        buf[total + pad + i] = (unsigned char)i;
    write_bytes(path, buf, n);
    free(buf);
}

/* npy_read fails, names the file first and mentions `needle`; out stays
 * empty. A dtype it does not read is NPY_ERROR_DTYPE, anything else -1. */
static void expect_read_error(const char *path, const char *needle)
{
    char err[512] = "";
    npy_array a;
    memset(&a, 0xab, sizeof a);
    int r = npy_read(path, &a, err, sizeof err);
    assert_int_equal(r, strstr(err, "is not supported (expected") ? NPY_ERROR_DTYPE : -1);
    if (strncmp(err, path, strlen(path)) != 0 || !strstr(err, needle))
        fail_msg("message \"%s\" should start with \"%s\" and mention \"%s\"", err, path, needle);
    assert_null(a.data);
    assert_int_equal(a.nbytes, 0);
}

static void test_round_trip_all_dtypes(void **state)
{
    const npy_dtype dtypes[] = {NPY_F32, NPY_F16, NPY_U8, NPY_BOOL, NPY_I32, NPY_I64};
    const int64_t shapes[][8] = {{7},   {2, 3}, {2, 1, 3}, {1, 2, 3, 2}, {2, 1, 1, 1, 1, 1, 1, 3},
                                 {0, 4}};
    const uint32_t ranks[] = {1, 2, 3, 4, 8, 2};
    test_rng r = test_rng_seed(51);
    for (size_t t = 0; t < sizeof dtypes / sizeof dtypes[0]; t++) {
        for (size_t s = 0; s < 6; s++) {
            size_t n = 1;
            for (uint32_t i = 0; i < ranks[s]; i++)
                n *= (size_t)shapes[s][i];
            size_t bytes = n * npy_dtype_size(dtypes[t]);
            uint8_t *data = malloc(bytes + 1);
            assert_non_null(data);
            for (size_t i = 0; i < bytes; i++)
                data[i] = (uint8_t)test_rng_below(&r, 256);
            char path[256], err[512] = "";
            path_in(state, "round.npy", path, sizeof path);
            if (npy_write(path, dtypes[t], ranks[s], shapes[s], data, err, sizeof err) != 0)
                fail_msg("npy_write: %s", err);
            assert_false(exists(strcat(strcpy(err, path), ".tmp")));
            npy_array a;
            if (npy_read(path, &a, err, sizeof err) != 0)
                fail_msg("npy_read: %s", err);
            assert_int_equal(a.dtype, dtypes[t]);
            assert_int_equal(a.rank, ranks[s]);
            assert_memory_equal(a.shape, shapes[s], ranks[s] * sizeof(int64_t));
            assert_int_equal(a.nbytes, bytes);
            assert_non_null(a.data);
            const uint8_t *got = a.data;
            for (size_t i = 0; i < bytes; i++) {
                uint8_t want = dtypes[t] == NPY_BOOL ? data[i] != 0 : data[i];
                if (got[i] != want)
                    fail_msg("dtype %s rank %u byte %zu: %u != %u", npy_dtype_name(dtypes[t]),
                             ranks[s], i, got[i], want);
            }
            npy_free(&a);
            assert_null(a.data);
            free(data);
        }
    }
}

/* The bytes numpy.save writes (numpy >= 1.24 format.py: dict, room for the
 * first axis to grow to 21 digits, space padding to 64 bytes, newline). */
static void test_header_bytes_match_numpy(void **state)
{
    static const char f32_2x3[] = "\x93NUMPY\x01\x00\x76\x00"
                                  "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }"
                                  "                    " /* 21 - 1 digits of growth room */
                                  "                                      \n";
    static const char b1_5[] = "\x93NUMPY\x01\x00\x76\x00"
                               "{'descr': '|b1', 'fortran_order': False, 'shape': (5,), }"
                               "                    "
                               "                                        \n";
    assert_int_equal(sizeof f32_2x3 - 1, 128);
    assert_int_equal(sizeof b1_5 - 1, 128);
    float data[6] = {1, 2, 3, 4, 5, 6};
    uint8_t bools[5] = {1, 0, 7, 0, 1};
    char path[256], err[512] = "";
    path_in(state, "hdr.npy", path, sizeof path);
    for (int c = 0; c < 2; c++) {
        const char *want = c ? b1_5 : f32_2x3;
        int64_t shape[2] = {c ? 5 : 2, 3};
        if (npy_write(path, c ? NPY_BOOL : NPY_F32, c ? 1 : 2, shape, c ? (void *)bools : data, err,
                      sizeof err) != 0)
            fail_msg("%s", err);
        FILE *fp = fopen(path, "rb");
        assert_non_null(fp);
        unsigned char got[256];
        size_t n = fread(got, 1, sizeof got, fp);
        fclose(fp);
        assert_int_equal(n, c ? 128 + 5 : 128 + 24);
        assert_memory_equal(got, want, 128);
        if (c) {
            const unsigned char want_bools[5] = {1, 0, 1, 0, 1};
            assert_memory_equal(got + 128, want_bools, 5);
        } else {
            assert_memory_equal(got + 128, data, 24);
        }
    }
}

/* Scalars (shape ()): written by numpy as np.save(p, np.float32(3.5)). */
static void test_rank0(void **state)
{
    char path[256], err[512] = "";
    path_in(state, "scalar.npy", path, sizeof path);
    unsigned char file[132];
    const char *header = "{'descr': '<f4', 'fortran_order': False, 'shape': (), }";
    memcpy(file, "\x93NUMPY\x01\x00\x76\x00", 10);
    memset(file + 10, ' ', 117);
    memcpy(file + 10, header, strlen(header));
    file[127] = '\n';
    float v = 3.5f;
    memcpy(file + 128, &v, 4);
    write_bytes(path, file, sizeof file);
    npy_array a;
    if (npy_read(path, &a, err, sizeof err) != 0)
        fail_msg("%s", err);
    assert_int_equal(a.rank, 0);
    assert_int_equal(a.dtype, NPY_F32);
    assert_int_equal(a.nbytes, 4);
    assert_float_equal(*(float *)a.data, 3.5f, 0.0f);
    npy_free(&a);
    /* Our writer produces the same bytes. */
    path_in(state, "scalar2.npy", path, sizeof path);
    assert_int_equal(npy_write(path, NPY_F32, 0, NULL, &v, err, sizeof err), 0);
    FILE *fp = fopen(path, "rb");
    assert_non_null(fp);
    unsigned char got[140];
    assert_int_equal(fread(got, 1, sizeof got, fp), sizeof file);
    fclose(fp);
    assert_memory_equal(got, file, sizeof file);
}

static void test_read_errors(void **state)
{
    char p[256];
    path_in(state, "missing.npy", p, sizeof p);
    expect_read_error(p, "cannot open");

    path_in(state, "bad.npy", p, sizeof p);
    write_bytes(p, "\x93NUM", 4);
    expect_read_error(p, "not a .npy file");
    write_bytes(p, "PK\x03\x04 this is a zip file......", 30);
    expect_read_error(p, "not a .npy file");
    write_bytes(p, "\x93NUMPY\x03\x00\x10\x00\x00\x00{}", 14);
    expect_read_error(p, "format version 3.0 is not supported");

    static const struct {
        const char *header;
        size_t data;
        const char *needle;
    } cases[] = {
        {"{'descr': '<f8', 'fortran_order': False, 'shape': (2,), }", 16,
         "dtype '<f8' is not supported (expected float32, float16, uint16, uint8, bool, int32 or "
         "int64)"},
        {"{'descr': '>f4', 'fortran_order': False, 'shape': (2,), }", 8, "big endian"},
        {"{'descr': '|O', 'fortran_order': False, 'shape': (2,), }", 16, "dtype '|O'"},
        {"{'descr': '<u4', 'fortran_order': False, 'shape': (2,), }", 8, "dtype '<u4'"},
        {"{'descr': '>i8', 'fortran_order': False, 'shape': (2,), }", 16, "big endian"},
        {"{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (2,), }", 8,
         "structured dtypes are not supported"},
        {"{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3), }", 24, "fortran_order"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), ", 24, "malformed header"},
        {"{'descr': '<f4', 'fortran_order': False, }", 4, "no 'shape'"},
        {"{'descr': '<f4', 'shape': (1,), }", 4, "no 'fortran_order'"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (1,), 'x': 1}", 4,
         "unexpected or repeated key 'x'"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (-1,), }", 4, "malformed header"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3.5), }", 4, "malformed header"},
        {"{'descr': '<f4', 'fortran_order': Nope, 'shape': (1,), }", 4, "fortran_order"},
        {"['descr', '<f4']", 4, "not a dict"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (1,), } x", 4, "text after"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,), }", 4,
         "too large"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (4611686018427387904, "
         "4611686018427387904), }",
         4, "too large"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (1, 1, 1, 1, 1, 1, 1, 1, 1), }", 4,
         "more than 8 dimensions"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", 20,
         "data is truncated: 20 bytes where shape (2, 3) of float32 needs 24"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", 28,
         "4 bytes follow the data"},
        {"{'descr': '<f2', 'fortran_order': False, 'shape': (), }", 0, "data is truncated"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        write_npy_text(p, cases[i].header, cases[i].data);
        expect_read_error(p, cases[i].needle);
    }

    /* Header length beyond the file, and a hostile 4 GiB v2.0 header length. */
    unsigned char shortf[20] = "\x93NUMPY\x01\x00\x76\x00{'descr'";
    write_bytes(p, shortf, sizeof shortf);
    expect_read_error(p, "file ends inside the 118-byte header");
    write_bytes(p, "\x93NUMPY\x02\x00\xff\xff\xff\xff{", 13);
    expect_read_error(p, "header length 4294967295 is over");
}

/* Version 2.0 (4-byte header length) reads like 1.0. */
static void test_read_v2(void **state)
{
    char p[256], err[512];
    path_in(state, "v2.npy", p, sizeof p);
    const char *h = "{'descr': '|u1', 'fortran_order': False, 'shape': (3,), }";
    unsigned char file[128 + 3];
    size_t hl = 128 - 12;
    memcpy(file, "\x93NUMPY\x02\x00", 8);
    file[8] = (unsigned char)hl, file[9] = file[10] = file[11] = 0;
    memset(file + 12, ' ', hl);
    memcpy(file + 12, h, strlen(h));
    file[127] = '\n';
    file[128] = 9, file[129] = 8, file[130] = 7;
    write_bytes(p, file, sizeof file);
    npy_array a;
    if (npy_read(p, &a, err, sizeof err) != 0)
        fail_msg("%s", err);
    assert_int_equal(a.dtype, NPY_U8);
    assert_int_equal(a.rank, 1);
    assert_int_equal(a.shape[0], 3);
    assert_memory_equal(a.data, file + 128, 3);
    npy_free(&a);
    npy_free(NULL);
}

static void test_write_errors_leave_no_file(void **state)
{
    char p[256], tmp[270], err[512];
    float data[4] = {1, 2, 3, 4};
    int64_t shape[2] = {2, 2};

    /* The directory does not exist. */
    path_in(state, "no_such_dir/x.npy", p, sizeof p);
    assert_int_equal(npy_write(p, NPY_F32, 2, shape, data, err, sizeof err), -1);
    assert_true(strncmp(err, p, strlen(p)) == 0 && strstr(err, "cannot create"));
    assert_false(exists(p));

    /* The target is a directory: the temporary is written, the rename fails,
     * and the temporary is removed. */
    path_in(state, "adir", p, sizeof p);
    assert_int_equal(mkdir(p, 0700), 0);
    assert_int_equal(npy_write(p, NPY_F32, 2, shape, data, err, sizeof err), -1);
    assert_non_null(strstr(err, "cannot rename"));
    snprintf(tmp, sizeof tmp, "%s.tmp", p);
    assert_false(exists(tmp));

    /* Bad arguments create nothing. */
    path_in(state, "args.npy", p, sizeof p);
    int64_t big[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1}, neg[2] = {2, -1};
    assert_int_equal(npy_write(p, NPY_F32, 9, big, data, err, sizeof err), -1);
    assert_non_null(strstr(err, "rank 9"));
    assert_int_equal(npy_write(p, NPY_F32, 2, neg, data, err, sizeof err), -1);
    assert_non_null(strstr(err, "shape[1] is -1"));
    assert_int_equal(npy_write(p, (npy_dtype)7, 2, shape, data, err, sizeof err), -1);
    assert_non_null(strstr(err, "dtype 7"));
    assert_int_equal(npy_write(p, NPY_F32, 2, shape, NULL, err, sizeof err), -1);
    assert_non_null(strstr(err, "no data"));
    assert_false(exists(p));

    /* Overwriting replaces the old file whole. */
    assert_int_equal(npy_write(p, NPY_F32, 2, shape, data, err, sizeof err), 0);
    int64_t one = 1;
    assert_int_equal(npy_write(p, NPY_U8, 1, &one, "\x05", err, sizeof err), 0);
    npy_array a;
    assert_int_equal(npy_read(p, &a, err, sizeof err), 0);
    assert_int_equal(a.dtype, NPY_U8);
    assert_int_equal(a.nbytes, 1);
    assert_int_equal(((uint8_t *)a.data)[0], 5);
    npy_free(&a);
    snprintf(tmp, sizeof tmp, "%s.tmp", p);
    assert_false(exists(tmp));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip_all_dtypes),
        cmocka_unit_test(test_header_bytes_match_numpy),
        cmocka_unit_test(test_rank0),
        cmocka_unit_test(test_read_errors),
        cmocka_unit_test(test_read_v2),
        cmocka_unit_test(test_write_errors_leave_no_file),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
