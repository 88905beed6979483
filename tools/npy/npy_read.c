/* NumPy .npy reading (see npy.h). The header is a Python dict literal; only
 * what numpy.save produces for the six supported dtypes is accepted, and
 * every size in it is checked against the file before anything is allocated. */
#include "npy_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ------------------------------------------------------------- header parse */

typedef struct parser {
    const char *s, *end;
    const char *path;
    char *error;
    size_t error_size;
} parser;

static void skip_ws(parser *p)
{
    while (p->s < p->end && (*p->s == ' ' || *p->s == '\t' || *p->s == '\n' || *p->s == '\r'))
        p->s++;
}

static int malformed(parser *p, const char *what)
{
    return npy_fail(p->error, p->error_size, p->path, "malformed header: %s", what);
}

/* A quoted Python string without escapes, copied into buf. */
static int parse_string(parser *p, char *buf, size_t size)
{
    if (p->s >= p->end || (*p->s != '\'' && *p->s != '"'))
        return malformed(p, "expected a quoted string");
    char quote = *p->s++;
    size_t n = 0;
    while (p->s < p->end && *p->s != quote) {
        if (*p->s == '\\' || n + 1 >= size)
            return malformed(p, "string too long or with escapes");
        buf[n++] = *p->s++;
    }
    if (p->s >= p->end)
        return malformed(p, "unterminated string");
    p->s++;
    buf[n] = '\0';
    return 0;
}

static int parse_shape(parser *p, uint32_t *rank, int64_t *shape)
{
    if (p->s >= p->end || *p->s != '(')
        return malformed(p, "'shape' is not a tuple");
    p->s++;
    *rank = 0;
    for (;;) {
        skip_ws(p);
        if (p->s < p->end && *p->s == ')') {
            p->s++;
            return 0;
        }
        if (p->s >= p->end || *p->s < '0' || *p->s > '9')
            return malformed(p, "'shape' holds something other than non-negative integers");
        uint64_t v = 0;
        while (p->s < p->end && *p->s >= '0' && *p->s <= '9') {
            uint64_t d = (uint64_t)(*p->s++ - '0');
            /* checked before the arithmetic: after it, a value past 2^64
             * has already wrapped around to a small one */
            if (v > ((uint64_t)INT64_MAX - d) / 10)
                return npy_fail(p->error, p->error_size, p->path,
                                "shape dimension %u is too large (over %lld)", *rank,
                                (long long)INT64_MAX);
            v = v * 10 + d;
        }
        if (p->s < p->end && *p->s == 'L') /* Python 2 long */
            p->s++;
        if (*rank == NPY_MAX_RANK)
            return npy_fail(p->error, p->error_size, p->path,
                            "more than %d dimensions are not supported", NPY_MAX_RANK);
        shape[(*rank)++] = (int64_t)v;
        skip_ws(p);
        if (p->s < p->end && *p->s == ',') {
            p->s++;
        } else if (p->s >= p->end || *p->s != ')') {
            return malformed(p, "expected ',' or ')' in 'shape'");
        }
    }
}

typedef struct header_fields {
    char descr[32];
    bool fortran_order;
    uint32_t rank;
    int64_t shape[NPY_MAX_RANK];
} header_fields;

static int parse_header(parser *p, header_fields *h)
{
    bool have_descr = false, have_order = false, have_shape = false;
    skip_ws(p);
    if (p->s >= p->end || *p->s != '{')
        return malformed(p, "it is not a dict");
    p->s++;
    for (;;) {
        skip_ws(p);
        if (p->s < p->end && *p->s == '}')
            break;
        char key[32];
        if (parse_string(p, key, sizeof key))
            return -1;
        skip_ws(p);
        if (p->s >= p->end || *p->s != ':')
            return malformed(p, "expected ':' after a key");
        p->s++;
        skip_ws(p);
        if (strcmp(key, "descr") == 0 && !have_descr) {
            if (p->s < p->end && *p->s == '[')
                return npy_fail(p->error, p->error_size, p->path,
                                "structured dtypes are not supported (expected float32, float16, "
                                "uint8, bool, int32 or int64)");
            if (parse_string(p, h->descr, sizeof h->descr))
                return -1;
            have_descr = true;
        } else if (strcmp(key, "fortran_order") == 0 && !have_order) {
            size_t left = (size_t)(p->end - p->s);
            if (left >= 4 && memcmp(p->s, "True", 4) == 0) {
                h->fortran_order = true;
                p->s += 4;
            } else if (left >= 5 && memcmp(p->s, "False", 5) == 0) {
                h->fortran_order = false;
                p->s += 5;
            } else {
                return malformed(p, "'fortran_order' is neither True nor False");
            }
            have_order = true;
        } else if (strcmp(key, "shape") == 0 && !have_shape) {
            if (parse_shape(p, &h->rank, h->shape))
                return -1;
            have_shape = true;
        } else {
            char what[80];
            snprintf(what, sizeof what, "unexpected or repeated key '%s'", key);
            return malformed(p, what);
        }
        skip_ws(p);
        if (p->s < p->end && *p->s == ',')
            p->s++;
        else if (p->s >= p->end || *p->s != '}')
            return malformed(p, "expected ',' or '}' after a value");
    }
    p->s++; /* '}' */
    skip_ws(p);
    if (p->s != p->end)
        return malformed(p, "text after the dict");
    if (!have_descr || !have_order || !have_shape)
        return malformed(p, !have_descr   ? "no 'descr'"
                            : !have_order ? "no 'fortran_order'"
                                          : "no 'shape'");
    return 0;
}

/* ------------------------------------------------------------------ read */

static int read_body(FILE *f, const char *path, npy_array *a, char *error, size_t error_size)
{
    unsigned char pre[NPY_MAGIC_LEN + 2];
    if (fread(pre, 1, sizeof pre, f) != sizeof pre || memcmp(pre, NPY_MAGIC, NPY_MAGIC_LEN) != 0)
        return npy_fail(error, error_size, path, "not a .npy file (no \\x93NUMPY magic)");
    unsigned major = pre[6], minor = pre[7];
    if ((major != 1 && major != 2) || minor != 0)
        return npy_fail(error, error_size, path,
                        "format version %u.%u is not supported (1.0 and 2.0 are)", major, minor);
    unsigned char len_bytes[4];
    size_t len_size = major == 1 ? 2 : 4;
    if (fread(len_bytes, 1, len_size, f) != len_size)
        return npy_fail(error, error_size, path, "file ends inside the header length");
    uint32_t header_len = (uint32_t)len_bytes[0] | (uint32_t)len_bytes[1] << 8;
    if (len_size == 4)
        header_len |= (uint32_t)len_bytes[2] << 16 | (uint32_t)len_bytes[3] << 24;
    if (header_len > NPY_MAX_HEADER)
        return npy_fail(error, error_size, path, "header length %u is over the %u-byte limit",
                        header_len, NPY_MAX_HEADER);
    char *text = malloc(header_len + 1u);
    if (!text)
        return npy_fail(error, error_size, path, "out of memory for a %u-byte header", header_len);
    if (fread(text, 1, header_len, f) != header_len) {
        free(text);
        return npy_fail(error, error_size, path, "file ends inside the %u-byte header", header_len);
    }
    text[header_len] = '\0';
    header_fields h;
    memset(&h, 0, sizeof h);
    parser p = {text, text + header_len, path, error, error_size};
    int rc = parse_header(&p, &h);
    free(text);
    if (rc)
        return -1;

    if (strcmp(h.descr, "<f4") == 0)
        a->dtype = NPY_F32;
    else if (strcmp(h.descr, "<f2") == 0)
        a->dtype = NPY_F16;
    else if (strcmp(h.descr, "|u1") == 0)
        a->dtype = NPY_U8;
    else if (strcmp(h.descr, "|b1") == 0)
        a->dtype = NPY_BOOL;
    else if (strcmp(h.descr, "<i4") == 0)
        a->dtype = NPY_I32;
    else if (strcmp(h.descr, "<i8") == 0)
        a->dtype = NPY_I64;
    else if (strcmp(h.descr, "<u2") == 0)
        a->dtype = NPY_U16;
    else if (h.descr[0] == '>')
        return npy_fail(error, error_size, path,
                        "dtype '%s' is big endian: only little endian is supported", h.descr);
    else {
        npy_fail(error, error_size, path,
                 "dtype '%s' is not supported (expected float32, float16, uint16, uint8, bool, "
                 "int32 or int64)",
                 h.descr);
        return NPY_ERROR_DTYPE;
    }
    if (h.fortran_order)
        return npy_fail(error, error_size, path,
                        "fortran_order is True: only C-order arrays are supported");
    a->rank = h.rank;
    memcpy(a->shape, h.shape, sizeof h.shape);

    char shape_buf[256];
    npy_shape_text(a->rank, a->shape, shape_buf, sizeof shape_buf);
    size_t need;
    if (!npy_array_bytes(a->rank, a->shape, npy_dtype_size(a->dtype), &need))
        return npy_fail(error, error_size, path, "shape %s of %s is too large", shape_buf,
                        npy_dtype_name(a->dtype));
    /* Compare with the bytes actually there before allocating anything. */
    long start = ftell(f);
    if (start < 0 || fseek(f, 0, SEEK_END) != 0)
        return npy_fail(error, error_size, path, "cannot seek: %s", strerror(errno));
    long end = ftell(f);
    if (end < start || fseek(f, start, SEEK_SET) != 0)
        return npy_fail(error, error_size, path, "cannot seek: %s", strerror(errno));
    uint64_t have = (uint64_t)(end - start);
    if (have < need)
        return npy_fail(error, error_size, path,
                        "data is truncated: %llu bytes where shape %s of %s needs %llu",
                        (unsigned long long)have, shape_buf, npy_dtype_name(a->dtype),
                        (unsigned long long)need);
    if (have > need)
        return npy_fail(error, error_size, path,
                        "%llu bytes follow the data of shape %s of %s (%llu bytes): size mismatch",
                        (unsigned long long)(have - need), shape_buf, npy_dtype_name(a->dtype),
                        (unsigned long long)need);
    a->data = malloc(need ? need : 1);
    if (!a->data)
        return npy_fail(error, error_size, path, "out of memory for %zu bytes of data", need);
    a->nbytes = need;
    if (fread(a->data, 1, need, f) != need)
        return npy_fail(error, error_size, path, "read error: %s", strerror(errno));
    if (a->dtype == NPY_BOOL) {
        uint8_t *b = a->data;
        for (size_t i = 0; i < need; i++)
            b[i] = b[i] != 0;
    }
    return 0;
}

/* Opened without blocking (a FIFO with no writer would wait forever), then
 * refused unless a regular file, then read with blocking reads. */
static FILE *open_regular(const char *path, char *error, size_t error_size)
{
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (fd < 0) {
        npy_fail(error, error_size, path, "cannot open: %s", strerror(errno));
        return NULL;
    }
    struct stat st;
    int flags = fcntl(fd, F_GETFL);
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || flags < 0 ||
        fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) != 0) {
        int e = errno;
        if (fstat(fd, &st) == 0 && !S_ISREG(st.st_mode))
            npy_fail(error, error_size, path, "not a regular file");
        else
            npy_fail(error, error_size, path, "cannot open: %s", strerror(e));
        close(fd);
        return NULL;
    }
    FILE *f = fdopen(fd, "rb");
    if (!f) {
        npy_fail(error, error_size, path, "cannot open: %s", strerror(errno));
        close(fd);
    }
    return f;
}

int npy_read(const char *path, npy_array *out, char *error, size_t error_size)
{
    if (!out)
        return npy_fail(error, error_size, path, "no output array given");
    memset(out, 0, sizeof *out);
    if (!path)
        return npy_fail(error, error_size, path, "no path given");
    FILE *f = open_regular(path, error, error_size);
    if (!f)
        return -1;
    int rc = read_body(f, path, out, error, error_size);
    fclose(f);
    if (rc)
        npy_free(out);
    return rc;
}

void npy_free(npy_array *a)
{
    if (!a)
        return;
    free(a->data);
    memset(a, 0, sizeof *a);
}
