/* Tests for the .npy, .npz and CIFAR readers behind mw_dataset_open (worker/data/data_formats.h):
 * good files of every accepted version, shape and type, batch assembly (uint8 scaling, float32
 * as stored, CIFAR's channel-major records transposed), class counting, the memory mapping, and
 * a table of bad inputs per format (how the file is built, the status and the message parts:
 * the file, the field and what was expected). Archives are written with libzip, stored and
 * deflated; CIFAR files byte by byte. A mapped x_train.npy or stored .npz truncated while a
 * batch reads it ends the process with exit 3 and one line naming the file (common/mapguard.h),
 * where it died of SIGBUS (135) without the guard: each run in a child process. */
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zip.h>

#include "common/mapguard.h"
#include "common/status.h"
#include "tests/util.h"
#include "worker/data/data.h"
#include "worker/data/data_formats.h"
#include "worker/data/data_npy.h"
#include "worker/data/data_open.h"
#include "worker/data/data_zip.h"

/* ---- .npy bytes ---- */

/* A .npy file: magic, version (major, 0), header_len, the dict padded with spaces to a
 * multiple of 64 and a '\n', then data. Returns malloc'ed bytes, *n their count. */
static uint8_t *npy_make(int version, const char *dict, const void *data, size_t nbytes, size_t *n)
{
    size_t pre = version == 1 ? 10 : 12, dl = strlen(dict);
    size_t hlen = ((pre + dl + 1 + 63) / 64) * 64 - pre;
    uint8_t *b = malloc(pre + hlen + nbytes + 1);
    assert_non_null(b);
    memcpy(b, "\x93NUMPY", 6);
    b[6] = (uint8_t)version, b[7] = 0;
    for (size_t i = 0; i < pre - 8; i++)
        b[8 + i] = (uint8_t)(hlen >> (8 * i));
    memset(b + pre, ' ', hlen);
    memcpy(b + pre, dict, dl);
    b[pre + hlen - 1] = '\n';
    if (nbytes)
        memcpy(b + pre + hlen, data, nbytes);
    *n = pre + hlen + nbytes;
    return b;
}

/* The good set: x_train (4, 3, 2) uint8, y_train (4,) int64, x_test (2, 3, 2) uint8,
 * y_test (2,) uint8; labels 0..2, so 3 classes. */
static const char *const names[4] = {"x_train.npy", "y_train.npy", "x_test.npy", "y_test.npy"};
static const char *const good_dicts[4] = {
    "{'descr': '|u1', 'fortran_order': False, 'shape': (4, 3, 2), }",
    "{'descr': '<i8', 'fortran_order': False, 'shape': (4,), }",
    "{'descr': '|u1', 'fortran_order': False, 'shape': (2, 3, 2), }",
    "{'descr': '|u1', 'fortran_order': False, 'shape': (2,), }",
};
static uint8_t x_train[24], x_test[12], y_test[2] = {1, 0};
static int64_t y_train[4] = {0, 2, 1, 2};
static const void *good_data(int k, size_t *nbytes)
{
    static const size_t sizes[4] = {sizeof x_train, sizeof y_train, sizeof x_test, sizeof y_test};
    for (size_t i = 0; i < sizeof x_train; i++)
        x_train[i] = (uint8_t)(i * 37 + 5);
    for (size_t i = 0; i < sizeof x_test; i++)
        x_test[i] = (uint8_t)(i * 11 + 200);
    *nbytes = sizes[k];
    return k == 0   ? (const void *)x_train
           : k == 1 ? (const void *)y_train
           : k == 2 ? (const void *)x_test
                    : y_test;
}

/* What a case changes in one of the four arrays. */
typedef enum {
    D_GOOD,    /* the good data */
    D_SHORT,   /* one byte less */
    D_LONG,    /* one byte more */
    D_F32,     /* x_train as float32 values 0.5 (24 of them) */
    D_F32_NAN, /* the same with a NaN at element 7 (example 1) */
    D_F32_INF, /* with -inf at element 13 (example 2) */
    D_NEG,     /* y_train int64 with a -1 at example 3 */
    D_EMPTY,   /* no data bytes */
    D_RAW,     /* the whole file is .raw */
} data_kind;

typedef struct {
    const char *name;
    int file;         /* 0..3: which array is changed */
    int version;      /* 0: 1 */
    const char *dict; /* NULL: the good one */
    data_kind data;
    const char *raw; /* D_RAW: these bytes (rawlen) */
    size_t rawlen;
    int classes; /* --classes */
    mw_status want;
    const char *msg[4]; /* up to 3, NULL-terminated */
} npy_case;

/* File k of a case (or of the good set when c is NULL or changes another file). */
static uint8_t *case_file(const npy_case *c, int k, size_t *n)
{
    size_t nbytes;
    const void *data = good_data(k, &nbytes);
    if (!c || c->file != k)
        return npy_make(1, good_dicts[k], data, nbytes, n);
    if (c->data == D_RAW) {
        uint8_t *b = malloc(c->rawlen + 1);
        assert_non_null(b);
        memcpy(b, c->raw, c->rawlen);
        *n = c->rawlen;
        return b;
    }
    float f[24];
    int64_t neg[4] = {0, 1, 2, -1};
    for (int i = 0; i < 24; i++)
        f[i] = 0.5f;
    if (c->data == D_F32_NAN)
        f[7] = NAN;
    if (c->data == D_F32_INF)
        f[13] = -INFINITY;
    if (c->data == D_F32 || c->data == D_F32_NAN || c->data == D_F32_INF)
        data = f, nbytes = sizeof f;
    if (c->data == D_NEG)
        data = neg, nbytes = sizeof neg;
    if (c->data == D_SHORT)
        nbytes--;
    if (c->data == D_EMPTY)
        nbytes = 0;
    uint8_t big[64] = {0};
    if (c->data == D_LONG) {
        memcpy(big, data, nbytes);
        data = big, nbytes++;
    }
    return npy_make(c->version ? c->version : 1, c->dict ? c->dict : good_dicts[k], data, nbytes,
                    n);
}

static void write_npy_dir(const char *dir, const npy_case *c)
{
    for (int k = 0; k < 4; k++) {
        size_t n;
        uint8_t *b = case_file(c, k, &n);
        free(mw_test_write_file(dir, names[k], b, n));
        free(b);
    }
}

/* The four arrays as an .npz at dir/name: each member deflated when its bit in deflate is set;
 * skip: a member left out (-1: none); extra: a fifth member's name (NULL: none). */
static char *write_npz(const char *dir, const char *name, const npy_case *c, unsigned deflate,
                       int skip, const char *extra)
{
    char *path = malloc(strlen(dir) + strlen(name) + 2);
    assert_non_null(path);
    sprintf(path, "%s/%s", dir, name);
    int err = 0;
    zip_t *za = zip_open(path, ZIP_CREATE | ZIP_TRUNCATE, &err);
    assert_non_null(za);
    uint8_t *bufs[5] = {NULL, NULL, NULL, NULL, NULL};
    for (int k = 0; k < 5; k++) {
        if (k == skip || (k == 4 && !extra))
            continue;
        size_t n;
        bufs[k] = case_file(c, k < 4 ? k : 0, &n);
        zip_source_t *src = zip_source_buffer(za, bufs[k], n, 0);
        assert_non_null(src);
        zip_int64_t i = zip_file_add(za, k < 4 ? names[k] : extra, src, ZIP_FL_OVERWRITE);
        assert_true(i >= 0);
        assert_int_equal(
            zip_set_file_compression(za, (zip_uint64_t)i,
                                     (deflate >> k) & 1 ? ZIP_CM_DEFLATE : ZIP_CM_STORE, 0),
            0);
    }
    assert_int_equal(zip_close(za), 0);
    for (int k = 0; k < 5; k++)
        free(bufs[k]);
    return path;
}

static const mw_data_opts no_opts = {.cifar_fine = 1};

/* ---- good files ---- */

static void check_good_set(const mw_dataset *tr, const mw_dataset *te)
{
    assert_int_equal(tr->count, 4);
    assert_int_equal(te->count, 2);
    assert_int_equal(tr->rows, 3);
    assert_int_equal(tr->cols, 2);
    assert_int_equal(tr->channels, 1);
    assert_int_equal(tr->num_classes, 3); /* largest label 2, + 1 */
    assert_int_equal(te->num_classes, 3);
    int32_t want[4] = {0, 2, 1, 2};
    assert_memory_equal(tr->labels, want, sizeof want);
    float x[6];
    int32_t y;
    uint32_t id = 2;
    mw_dataset_batch(tr, x, &y, &id, 1);
    for (int j = 0; j < 6; j++)
        assert_true(x[j] == (float)(uint8_t)((12 + j) * 37 + 5) / 255.0f);
    assert_int_equal(y, 1);
}

static void test_npy_dir_good(void **state)
{
    const char *dir = *state;
    write_npy_dir(dir, NULL);
    mw_dataset tr, te;
    mw_dataset_init(&tr);
    mw_dataset_init(&te);
    expect_err(mw_dataset_open(&tr, &te, dir, &no_opts), MW_OK, "");
    check_good_set(&tr, &te);
    assert_non_null(tr.map); /* mapped, not copied */
    assert_non_null(te.map);
    mw_data_opts five = {.classes = 5, .cifar_fine = 1};
    expect_err(mw_dataset_open(&tr, &te, dir, &five), MW_OK, "");
    assert_int_equal(tr.num_classes, 5);
    mw_dataset_free(&tr);
    mw_dataset_free(&te);
    mw_dataset_free(&tr); /* twice is safe */
}

/* Versions 2 and 3, (N, H, W, C) float32 images used as stored, (N, 1) int32 labels. */
static void test_npy_versions_shapes(void **state)
{
    const char *dir = *state;
    for (int version = 1; version <= 3; version++) {
        float xf[4 * 2 * 2 * 3];
        int32_t yl[4] = {3, 0, 1, 0};
        for (int i = 0; i < 48; i++)
            xf[i] = (float)i * 0.25f - 3.0f;
        size_t n;
        uint8_t *b =
            npy_make(version, "{'descr': '<f4', 'fortran_order': False, 'shape': (4, 2, 2, 3)}", xf,
                     sizeof xf, &n);
        free(mw_test_write_file(dir, "x_train.npy", b, n));
        free(b);
        b = npy_make(version, "{\"descr\": \"<i4\", \"fortran_order\": False, \"shape\": (4, 1)}",
                     yl, sizeof yl, &n);
        free(mw_test_write_file(dir, "y_train.npy", b, n));
        free(b);
        b = npy_make(version, "{'descr': '<f4', 'fortran_order': False, 'shape': (1, 2, 2, 3)}", xf,
                     48, &n);
        free(mw_test_write_file(dir, "x_test.npy", b, n));
        free(b);
        b = npy_make(version, "{'descr': '|u1', 'fortran_order': False, 'shape': (1,)}", yl, 1, &n);
        free(mw_test_write_file(dir, "y_test.npy", b, n));
        free(b);
        mw_dataset tr, te;
        mw_dataset_init(&tr);
        mw_dataset_init(&te);
        expect_err(mw_dataset_open(&tr, &te, dir, &no_opts), MW_OK, "");
        assert_int_equal(tr.channels, 3);
        assert_int_equal(tr.type, MW_IMAGES_F32);
        assert_int_equal(tr.num_classes, 4);
        float x[24];
        int32_t y[2];
        uint32_t ids[2] = {3, 1};
        mw_dataset_batch(&tr, x, y, ids, 2);
        assert_memory_equal(x, xf + 36, 12 * sizeof(float));
        assert_memory_equal(x + 12, xf + 12, 12 * sizeof(float));
        assert_int_equal(y[0], 0);
        assert_int_equal(y[1], 0);
        mw_dataset_free(&tr);
        mw_dataset_free(&te);
    }
}

/* Tabular float32 features (N, F) read as (1, 1, F): a Keras Input((F,)); a uint8 (N, F) stays
 * refused (images_2d in the bad table). */
static void test_npy_features(void **state)
{
    const char *dir = *state;
    float xf[3 * 5];
    int32_t yl[3] = {1, 0, 1};
    for (int i = 0; i < 15; i++)
        xf[i] = (float)i * 0.5f - 2.0f;
    size_t n;
    uint8_t *b =
        npy_make(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (3, 5)}", xf, sizeof xf, &n);
    free(mw_test_write_file(dir, "x_train.npy", b, n));
    free(mw_test_write_file(dir, "x_test.npy", b, n));
    free(b);
    b = npy_make(1, "{'descr': '<i4', 'fortran_order': False, 'shape': (3,)}", yl, sizeof yl, &n);
    free(mw_test_write_file(dir, "y_train.npy", b, n));
    free(mw_test_write_file(dir, "y_test.npy", b, n));
    free(b);
    mw_dataset tr, te;
    mw_dataset_init(&tr);
    mw_dataset_init(&te);
    expect_err(mw_dataset_open(&tr, &te, dir, &no_opts), MW_OK, "");
    assert_int_equal(tr.rows, 1);
    assert_int_equal(tr.cols, 1);
    assert_int_equal(tr.channels, 5);
    assert_int_equal(tr.type, MW_IMAGES_F32);
    float x[5];
    int32_t y[1];
    uint32_t id = 2;
    mw_dataset_batch(&tr, x, y, &id, 1);
    assert_memory_equal(x, xf + 10, sizeof x);
    assert_int_equal(y[0], 1);
    mw_dataset_free(&tr);
    mw_dataset_free(&te);
}

/* Token ids (N, T) of each integer type: mapped, read as exact floats (65535 and 2^24 - 1
 * included), found by mw_dataset_find_token; a negative id, one of 2^24 and a 2-D float64
 * array are refused naming the file, the example and the position. */
static void write_tokens(const char *dir, const char *descr, const void *x, size_t nbytes)
{
    char dict[128];
    snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': False, 'shape': (2, 3)}", descr);
    const int32_t yl[2] = {1, 0};
    size_t n;
    uint8_t *b = npy_make(1, dict, x, nbytes, &n);
    free(mw_test_write_file(dir, "x_train.npy", b, n));
    free(mw_test_write_file(dir, "x_test.npy", b, n));
    free(b);
    b = npy_make(1, "{'descr': '<i4', 'fortran_order': False, 'shape': (2,)}", yl, sizeof yl, &n);
    free(mw_test_write_file(dir, "y_train.npy", b, n));
    free(mw_test_write_file(dir, "y_test.npy", b, n));
    free(b);
}

/* Labels per position (N, T) int: taken whole (the classes their largest + 1), assembled T
 * per example; the test set's T must be the training set's. */
static void test_npy_position_labels(void **state)
{
    const char *dir = *state;
    const uint16_t x[6] = {1, 2, 3, 4, 5, 6};
    const int32_t y[6] = {0, 1, 2, 2, 1, 0}, y3[3] = {0, 1, 2};
    write_tokens(dir, "<u2", x, sizeof x);
    size_t n;
    uint8_t *b =
        npy_make(1, "{'descr': '<i4', 'fortran_order': False, 'shape': (2, 3)}", y, sizeof y, &n);
    free(mw_test_write_file(dir, "y_train.npy", b, n));
    free(mw_test_write_file(dir, "y_test.npy", b, n));
    free(b);
    mw_dataset tr, te;
    mw_dataset_init(&tr);
    mw_dataset_init(&te);
    expect_err(mw_dataset_open(&tr, &te, dir, &no_opts), MW_OK, "");
    assert_int_equal(tr.label_width, 3);
    assert_int_equal(tr.num_classes, 3);
    assert_int_equal(mw_dataset_target_nbytes(&tr), 12);
    float xb[6];
    int32_t yb[6];
    const uint32_t ids[2] = {1, 0};
    mw_dataset_batch(&tr, xb, yb, ids, 2);
    assert_memory_equal(yb, y + 3, 3 * sizeof *yb);
    assert_memory_equal(yb + 3, y, 3 * sizeof *yb);
    mw_err_clear();
    expect_err(mw_dataset_labels_as_targets(&tr, "d"), MW_EDATA, "d: labels per position (N, 3)");
    mw_dataset_free(&tr);
    mw_dataset_free(&te);
    b = npy_make(1, "{'descr': '<i4', 'fortran_order': False, 'shape': (2, 1)}", y3, 8, &n);
    free(mw_test_write_file(dir, "y_test.npy", b, n));
    free(b);
    mw_dataset_init(&tr);
    mw_dataset_init(&te);
    mw_err_clear();
    expect_err(mw_dataset_open(&tr, &te, dir, &no_opts), MW_EDATA,
               "the training set has 3 label(s) per example, the test set 1");
    mw_dataset_free(&tr);
    mw_dataset_free(&te);
}

/* Labels per pixel (N, H, W): H x W per example, label_rows H; the test set's H must be the
 * training set's even where H x W agree. */
static void test_npy_pixel_labels(void **state)
{
    const char *dir = *state;
    const uint8_t x[12] = {0};
    const int32_t y[12] = {0, 1, 2, 3, 4, 5, 5, 4, 3, 2, 1, 0};
    size_t n;
    uint8_t *b = npy_make(1, "{'descr': '|u1', 'fortran_order': False, 'shape': (2, 2, 3)}", x,
                          sizeof x, &n);
    free(mw_test_write_file(dir, "x_train.npy", b, n));
    free(mw_test_write_file(dir, "x_test.npy", b, n));
    free(b);
    b = npy_make(1, "{'descr': '<i4', 'fortran_order': False, 'shape': (2, 2, 3)}", y, sizeof y,
                 &n);
    free(mw_test_write_file(dir, "y_train.npy", b, n));
    free(mw_test_write_file(dir, "y_test.npy", b, n));
    free(b);
    mw_dataset tr, te;
    mw_dataset_init(&tr);
    mw_dataset_init(&te);
    expect_err(mw_dataset_open(&tr, &te, dir, &no_opts), MW_OK, "");
    assert_int_equal(tr.label_width, 6);
    assert_int_equal(tr.label_rows, 2);
    assert_int_equal(tr.num_classes, 6);
    float xb[12];
    int32_t yb[12];
    const uint32_t ids[2] = {1, 0};
    mw_dataset_batch(&tr, xb, yb, ids, 2);
    assert_memory_equal(yb, y + 6, 6 * sizeof *yb);
    assert_memory_equal(yb + 6, y, 6 * sizeof *yb);
    mw_dataset_free(&tr);
    mw_dataset_free(&te);
    b = npy_make(1, "{'descr': '<i4', 'fortran_order': False, 'shape': (2, 3, 2)}", y, sizeof y,
                 &n);
    free(mw_test_write_file(dir, "y_test.npy", b, n));
    free(b);
    mw_dataset_init(&tr);
    mw_dataset_init(&te);
    mw_err_clear();
    expect_err(mw_dataset_open(&tr, &te, dir, &no_opts), MW_EDATA,
               "the training labels have 2 rows per example, the test labels 3");
    mw_dataset_free(&tr);
    mw_dataset_free(&te);
}

/* A text corpus (--sequence-length 4): 42 bytes make 10 windows of 4 + 1, the last one (a
 * tenth, rounded up) to validate; each window's ids its bytes, its labels the next bytes; 256
 * classes. Too short a text, and a byte at or above --classes, are errors naming the file. */
static void test_text_corpus(void **state)
{
    const char *dir = *state;
    char text[43];
    for (int i = 0; i < 42; i++)
        text[i] = (char)('a' + i % 26);
    text[42] = 0;
    char *path = mw_test_write_file(dir, "corpus.txt", text, 42);
    mw_data_opts o = {.cifar_fine = 1, .sequence_length = 4};
    mw_dataset tr, te;
    mw_dataset_init(&tr);
    mw_dataset_init(&te);
    expect_err(mw_dataset_open(&tr, &te, path, &o), MW_OK, "");
    assert_int_equal(tr.count, 9);
    assert_int_equal(te.count, 1);
    assert_int_equal(tr.type, MW_IMAGES_TOKENS);
    assert_int_equal(tr.channels, 4);
    assert_int_equal(tr.label_width, 4);
    assert_int_equal(tr.num_classes, 256);
    assert_int_equal(tr.tok_max, 'z');
    float x[4];
    int32_t y[4];
    const uint32_t id = 2;
    mw_dataset_batch(&tr, x, y, &id, 1);
    for (int t = 0; t < 4; t++) {
        assert_true(x[t] == (float)text[8 + t]);
        assert_int_equal(y[t], text[9 + t]);
    }
    const uint32_t first = 0;
    mw_dataset_batch(&te, x, y, &first, 1); /* window 9: bytes 36..40 */
    assert_true(x[0] == (float)text[36]);
    assert_int_equal(y[3], text[40]);
    mw_dataset_free(&tr);
    mw_dataset_free(&te);
    o.classes = 100; /* 'a'.. are 97..122 */
    mw_dataset_init(&tr);
    mw_dataset_init(&te);
    mw_err_clear();
    expect_err(mw_dataset_open(&tr, &te, path, &o), MW_EDATA, "corpus.txt", "expected 0..99");
    mw_dataset_free(&tr);
    mw_dataset_free(&te);
    o.classes = 0, o.sequence_length = 30; /* 41 / 30: one window */
    mw_dataset_init(&tr);
    mw_dataset_init(&te);
    mw_err_clear();
    expect_err(mw_dataset_open(&tr, &te, path, &o), MW_EDATA,
               "42 bytes make 1 window(s) of 30 + 1 bytes", "a shorter --sequence-length");
    mw_dataset_free(&tr);
    mw_dataset_free(&te);
    free(path);
}

static void test_npy_tokens(void **state)
{
    const char *dir = *state;
    const uint8_t u8[6] = {0, 1, 2, 255, 7, 9};
    const uint16_t u16[6] = {0, 65535, 3, 4, 5, 6};
    const int32_t i32[6] = {5, 4, 3, 2, 1, (1 << 24) - 1};
    const int64_t i64[6] = {9, 8, 7, 6, 5, 4};
    const struct {
        const char *descr;
        const void *x;
        size_t nbytes;
        float want[6];
    } good[] = {
        {"|u1", u8, sizeof u8, {0, 1, 2, 255, 7, 9}},
        {"<u2", u16, sizeof u16, {0, 65535, 3, 4, 5, 6}},
        {"<i4", i32, sizeof i32, {5, 4, 3, 2, 1, (float)((1 << 24) - 1)}},
        {"<i8", i64, sizeof i64, {9, 8, 7, 6, 5, 4}},
    };
    for (size_t c = 0; c < sizeof good / sizeof *good; c++) {
        write_tokens(dir, good[c].descr, good[c].x, good[c].nbytes);
        mw_dataset tr, te;
        mw_dataset_init(&tr);
        mw_dataset_init(&te);
        expect_err(mw_dataset_open(&tr, &te, dir, &no_opts), MW_OK, "");
        assert_int_equal(tr.type, MW_IMAGES_TOKENS);
        assert_int_equal(tr.channels, 3);
        assert_non_null(tr.map); /* mapped, as images are */
        float top = 0; /* the largest id, known from the read: no scan to check a vocabulary */
        for (int i = 0; i < 6; i++)
            top = good[c].want[i] > top ? good[c].want[i] : top;
        assert_true((float)tr.tok_max == top);
        float x[6];
        const uint32_t ids[2] = {0, 1};
        mw_dataset_batch(&tr, x, NULL, ids, 2);
        assert_memory_equal(x, good[c].want, sizeof x);
        uint32_t ex = 9, pos = 9;
        int64_t v = 0;
        assert_int_equal(mw_dataset_find_token(&tr, (int64_t)good[c].want[4] + 1, &ex, &pos, &v),
                         1);
        assert_true(v > good[c].want[4]); /* the first id above that limit */
        assert_int_equal(mw_dataset_find_token(&tr, INT64_C(1) << 24, &ex, &pos, &v), 0);
        mw_dataset_free(&tr);
        mw_dataset_free(&te);
    }
    const int32_t neg[6] = {1, 2, 3, 4, -5, 6}, big[6] = {1, 2, 1 << 24, 4, 5, 6};
    const double f8[6] = {0};
    const struct {
        const char *descr;
        const void *x;
        size_t nbytes;
        const char *sub1, *sub2;
    } bad[] = {
        {"<i4", neg, sizeof neg, "x_train.npy: example 1 has token id -5 at position 1",
         "expected an id in 0..16777215"},
        {"<i4", big, sizeof big, "x_train.npy: example 0 has token id 16777216 at position 2",
         NULL},
        {"<f8", f8, sizeof f8, "x_train.npy", "features of '<f8'; expected float32 ('<f4')"},
    };
    for (size_t c = 0; c < sizeof bad / sizeof *bad; c++) {
        write_tokens(dir, bad[c].descr, bad[c].x, bad[c].nbytes);
        mw_dataset tr, te;
        mw_dataset_init(&tr);
        mw_dataset_init(&te);
        mw_err_clear();
        expect_err(mw_dataset_open(&tr, &te, dir, &no_opts), MW_EDATA, bad[c].sub1, bad[c].sub2);
        mw_dataset_free(&tr);
        mw_dataset_free(&te);
    }
}

/* Float32 targets (N, K) (regression values, one-hot or multi-hot classes): read as they are,
 * assembled K per example; labels (N,) become (N, 1) targets for a loss of floats; a NaN
 * target, a train/test mismatch and int (N, K) arrays are refused naming the file. */
static void write_xy(const char *dir, const char *ydict_train, const void *ytr, size_t ntr,
                     const char *ydict_test, const void *yte, size_t nte)
{
    float xf[3 * 2] = {0, 1, 2, 3, 4, 5};
    size_t n;
    uint8_t *b =
        npy_make(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (3, 2)}", xf, sizeof xf, &n);
    free(mw_test_write_file(dir, "x_train.npy", b, n));
    free(mw_test_write_file(dir, "x_test.npy", b, n));
    free(b);
    b = npy_make(1, ydict_train, ytr, ntr, &n);
    free(mw_test_write_file(dir, "y_train.npy", b, n));
    free(b);
    b = npy_make(1, ydict_test, yte, nte, &n);
    free(mw_test_write_file(dir, "y_test.npy", b, n));
    free(b);
}

static void test_npy_targets(void **state)
{
    const char *dir = *state;
    const char *f34 = "{'descr': '<f4', 'fortran_order': False, 'shape': (3, 4)}";
    float t[12];
    for (int i = 0; i < 12; i++)
        t[i] = (float)i * 0.25f - 1.0f;
    write_xy(dir, f34, t, sizeof t, f34, t, sizeof t);
    mw_dataset tr, te;
    mw_dataset_init(&tr);
    mw_dataset_init(&te);
    expect_err(mw_dataset_open(&tr, &te, dir, &no_opts), MW_OK, "");
    assert_null(tr.labels);
    assert_int_equal(tr.target_width, 4);
    assert_int_equal(mw_dataset_target_nbytes(&tr), 16);
    float x[2], y[4];
    uint32_t id = 1;
    mw_dataset_batch(&tr, x, y, &id, 1);
    assert_memory_equal(y, t + 4, sizeof y);
    mw_dataset_free(&tr);
    mw_dataset_free(&te);
    /* labels as targets (N, 1) */
    const int32_t lab[3] = {1, 0, 1};
    const char *i3 = "{'descr': '<i4', 'fortran_order': False, 'shape': (3,)}";
    write_xy(dir, i3, lab, sizeof lab, i3, lab, sizeof lab);
    expect_err(mw_dataset_open(&tr, &te, dir, &no_opts), MW_OK, "");
    expect_err(mw_dataset_labels_as_targets(&tr, "set"), MW_OK, "");
    assert_null(tr.labels);
    assert_int_equal(tr.target_width, 1);
    mw_dataset_batch(&tr, x, y, &id, 1);
    assert_true(y[0] == 0.0f);
    mw_dataset_free(&tr);
    mw_dataset_free(&te);
    /* a NaN target: the file, the example and the element */
    t[6] = NAN;
    write_xy(dir, f34, t, sizeof t, f34, t, sizeof t);
    mw_err_clear();
    expect_err(mw_dataset_open(&tr, &te, dir, &no_opts), MW_EDATA, "y_train.npy",
               "example 1 has NaN at element 2: targets must be finite");
    t[6] = 0.5f;
    /* float targets beside int labels, and widths that differ */
    write_xy(dir, f34, t, sizeof t, i3, lab, sizeof lab);
    mw_err_clear();
    expect_err(mw_dataset_open(&tr, &te, dir, &no_opts), MW_EDATA,
               "the training set has float32 targets but the test set has integer class labels");
    const char *f32 = "{'descr': '<f4', 'fortran_order': False, 'shape': (3, 2)}";
    write_xy(dir, f34, t, sizeof t, f32, t, 6 * sizeof(float));
    mw_err_clear();
    expect_err(mw_dataset_open(&tr, &te, dir, &no_opts), MW_EDATA,
               "training targets have 4 values per example, the test targets 2");
    /* sample weights: read per example; negative, NaN, a wrong count or integers refused */
    write_xy(dir, f34, t, sizeof t, f34, t, sizeof t);
    const double good_w[3] = {0.5, 0, 2};
    size_t n;
    uint8_t *b = npy_make(1, "{'descr': '<f8', 'fortran_order': False, 'shape': (3,)}", good_w,
                          sizeof good_w, &n);
    free(mw_test_write_file(dir, "sample_weight_train.npy", b, n));
    free(b);
    expect_err(mw_dataset_open(&tr, &te, dir, &no_opts), MW_OK, "");
    float w[1];
    id = 2;
    assert_true(mw_dataset_batch_weights(&tr, w, &id, 1) == w && w[0] == 2.0f);
    assert_null(mw_dataset_batch_weights(&te, w, &id, 1)); /* the test set has none */
    mw_dataset_free(&tr);
    mw_dataset_free(&te);
    static const struct {
        const char *dict;
        float v[4];
        size_t n;
        const char *want;
    } bad_w[] = {
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (3,)}",
         {1, -1, 1},
         3,
         "example 1 has sample weight -1; expected a finite weight >= 0"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (3,)}",
         {1, 1, NAN},
         3,
         "example 2 has sample weight nan"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (4,)}",
         {1, 1, 1, 1},
         4,
         "sample weights of shape (4,); expected (3,) or (3, 1), one per example"},
        {"{'descr': '<i4', 'fortran_order': False, 'shape': (3,)}",
         {0},
         3,
         "sample weights of '<i4'; expected float32 ('<f4') or float64 ('<f8')"},
    };
    for (size_t k = 0; k < sizeof bad_w / sizeof bad_w[0]; k++) {
        b = npy_make(1, bad_w[k].dict, bad_w[k].v, bad_w[k].n * 4, &n);
        free(mw_test_write_file(dir, "sample_weight_train.npy", b, n));
        free(b);
        mw_err_clear();
        expect_err(mw_dataset_open(&tr, &te, dir, &no_opts), MW_EDATA, "sample_weight_train.npy",
                   bad_w[k].want);
    }
    char *wp = NULL;
    assert_true(asprintf(&wp, "%s/sample_weight_train.npy", dir) > 0);
    unlink(wp);
    free(wp);
    /* integer (N, K) arrays are labels per position (test_npy_position_labels), not one-hot
     * targets: beside (N,) test labels, a mismatch */
    const int32_t hot[6] = {1, 0, 0, 1, 1, 0};
    write_xy(dir, "{'descr': '<i4', 'fortran_order': False, 'shape': (3, 2)}", hot, sizeof hot, i3,
             lab, sizeof lab);
    mw_err_clear();
    expect_err(mw_dataset_open(&tr, &te, dir, &no_opts), MW_EDATA,
               "the training set has 2 label(s) per example, the test set 1");
}

/* Stored, deflated and mixed members give the same set as the .npy directory. */
static void test_npz_good(void **state)
{
    const char *dir = *state;
    const unsigned modes[4] = {0x0, 0xf, 0x5, 0xa}; /* bit k: member k deflated */
    for (int i = 0; i < 4; i++) {
        char *path = write_npz(dir, "d.npz", NULL, modes[i], -1, NULL);
        mw_dataset tr, te;
        mw_dataset_init(&tr);
        mw_dataset_init(&te);
        expect_err(mw_dataset_open(&tr, &te, path, &no_opts), MW_OK, "");
        check_good_set(&tr, &te);
        /* stored images are mapped from the archive, deflated ones copied */
        assert_int_equal(tr.map != NULL, !(modes[i] & 1));
        assert_int_equal(te.map != NULL, !(modes[i] & 4));
        mw_dataset_free(&tr);
        mw_dataset_free(&te);
        free(path);
    }
}

/* ---- classes without a training example ---- */

static void test_unseen_classes(void **state)
{
    (void)state;
    int32_t tr_labels[4] = {0, 1, 2, 200}, te_labels[2] = {0, 12};
    mw_dataset tr, te;
    mw_dataset_init(&tr);
    mw_dataset_init(&te);
    tr.labels = tr_labels, tr.count = 4, tr.num_classes = 201;
    te.labels = te_labels, te.count = 1, te.num_classes = 201; /* the 0 only, at first */
    char note[1024];
    /* one stray training label: 201 classes, 197 never seen */
    assert_int_equal(mw_dataset_unseen_classes(&tr, &te, "d.npz", 0, note, sizeof note), 197);
    assert_string_equal(note, "data d.npz: 197 of the 201 classes have no training example: the "
                              "class count is the largest label + 1, and the largest is 200, in "
                              "the training set (a stray label?); the model cannot learn the "
                              "empty classes (fix the labels, or give --classes N if that many "
                              "is meant)");
    /* a test label above every training label */
    tr_labels[3] = 3, te.count = 2, tr.num_classes = te.num_classes = 13;
    assert_int_equal(mw_dataset_unseen_classes(&tr, &te, "d.npz", 0, note, sizeof note), 9);
    expect_contains(note, "9 of the 13 classes have no training example");
    expect_contains(note, "the largest is 12, in the test set");
    /* --classes more than the labels use */
    tr.num_classes = 10;
    assert_int_equal(mw_dataset_unseen_classes(&tr, NULL, "d", 1, note, sizeof note), 6);
    assert_string_equal(note, "data d: 6 of the 10 classes (--classes 10) have no training "
                              "example: the model cannot learn them");
    /* every class seen: no note */
    tr.num_classes = 4;
    assert_int_equal(mw_dataset_unseen_classes(&tr, &te, "d", 0, note, sizeof note), 0);
    assert_string_equal(note, "");
}

/* ---- a mapped file that shrinks ---- */

/* In a child: assemble example 0 of d (its file now truncated), unguarded when `unguard`.
 * Returns the child's wait status; its stderr goes to err (cap bytes). */
static int batch_in_child(const mw_dataset *d, int unguard, char *err, size_t cap)
{
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        dup2(fds[1], STDERR_FILENO);
        close(fds[0]);
        if (unguard) { /* as before the guard: no handler at all (cmocka has its own) */
            mw_mapguard_remove(d->map);
            signal(SIGBUS, SIG_DFL);
        }
        float x[8];
        uint32_t id = 0;
        mw_dataset_batch(d, x, NULL, &id, 1);
        _exit(0); /* the read succeeded: the file did not shrink under it */
    }
    close(fds[1]);
    size_t n = 0;
    ssize_t r;
    while (n + 1 < cap && (r = read(fds[0], err + n, cap - 1 - n)) > 0)
        n += (size_t)r;
    err[n] = '\0';
    close(fds[0]);
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    return status;
}

static void test_mapped_file_shrinks(void **state)
{
    const char *dir = *state;
    char sub[600], xpath[700], want[900], err[2048];
    snprintf(sub, sizeof sub, "%s/npy", dir);
    assert_int_equal(mkdir(sub, 0755), 0);
    write_npy_dir(sub, NULL);
    char *npz = write_npz(dir, "d.npz", NULL, 0, -1, NULL); /* stored: mapped */
    for (int k = 0; k < 2; k++) {
        const char *path = k ? npz : sub;
        mw_dataset tr, te;
        mw_dataset_init(&tr);
        mw_dataset_init(&te);
        expect_err(mw_dataset_open(&tr, &te, path, &no_opts), MW_OK, "");
        assert_non_null(tr.map);
        snprintf(xpath, sizeof xpath, "%s/x_train.npy", sub);
        assert_int_equal(truncate(k ? npz : xpath, 0), 0); /* every page now past the end */
        int st = batch_in_child(&tr, 0, err, sizeof err);
        if (!WIFEXITED(st) || WEXITSTATUS(st) != 3)
            fail_msg("%s: the child ended with status 0x%x, expected exit 3; stderr: %s", path, st,
                     err);
        snprintf(want, sizeof want,
                 "mwtrain: error: %s%s: the memory-mapped file shrank while it "
                 "was read (truncated or rewritten during the run?): byte ",
                 k ? npz : xpath, k ? ": x_train.npy" : "");
        if (strncmp(err, want, strlen(want)) != 0 || !strstr(err, "-byte mapping is gone (SIGBUS)"))
            fail_msg("%s: stderr\n  %s\nexpected it to start\n  %s", path, err, want);
        /* the control: without the guard the same read dies of SIGBUS, without a word */
        st = batch_in_child(&tr, 1, err, sizeof err);
        assert_true(WIFSIGNALED(st) && WTERMSIG(st) == SIGBUS);
        assert_string_equal(err, "");
        mw_dataset_free(&tr);
        mw_dataset_free(&te);
    }
    free(npz);
}

/* ---- CIFAR ---- */

/* n records of CIFAR-10 (cifar100 0) or -100 into dir/name: image bytes (i * 3072 + j) * 7,
 * label(s) lab(i) (CIFAR-100: coarse lab/5, fine lab). */
static void write_cifar(const char *dir, const char *name, int n, int cifar100, int first,
                        int bad_label)
{
    const size_t rec = cifar100 ? 3074 : 3073;
    uint8_t *b = malloc(rec * (size_t)n + 1);
    assert_non_null(b);
    for (int i = 0; i < n; i++) {
        uint8_t *r = b + rec * (size_t)i;
        int lab = (first + i) % (cifar100 ? 100 : 10);
        if (cifar100)
            r[0] = (uint8_t)(lab / 5), r[1] = (uint8_t)lab;
        else
            r[0] = (uint8_t)lab;
        if (bad_label && i == n - 1)
            r[cifar100 ? 1 : 0] = (uint8_t)bad_label;
        for (int j = 0; j < 3072; j++)
            r[rec - 3072 + (size_t)j] = (uint8_t)(((first + i) * 3072 + j) * 7);
    }
    free(mw_test_write_file(dir, name, b, rec * (size_t)n));
    free(b);
}

static void write_cifar10(const char *dir)
{
    char nm[32];
    for (int k = 1; k <= 5; k++) {
        snprintf(nm, sizeof nm, "data_batch_%d.bin", k);
        write_cifar(dir, nm, 2, 0, 2 * (k - 1), 0);
    }
    write_cifar(dir, "test_batch.bin", 3, 0, 10, 0);
}

static void test_cifar10_good(void **state)
{
    const char *dir = *state;
    write_cifar10(dir);
    mw_dataset tr, te;
    mw_dataset_init(&tr);
    mw_dataset_init(&te);
    expect_err(mw_dataset_open(&tr, &te, dir, &no_opts), MW_OK, "");
    assert_int_equal(tr.count, 10);
    assert_int_equal(te.count, 3);
    assert_int_equal(tr.num_classes, 10); /* CIFAR-10's own count, not the largest label + 1 */
    assert_int_equal(tr.rows, 32);
    assert_int_equal(tr.channels, 3);
    float *x = malloc(3072 * sizeof *x);
    assert_non_null(x);
    int32_t y;
    uint32_t id = 7;
    mw_dataset_batch(&tr, x, &y, &id, 1);
    assert_int_equal(y, 7);
    /* (h, w, c) of the batch is byte c * 1024 + h * 32 + w of the record's image */
    for (int h = 0; h < 32; h += 5)
        for (int w = 0; w < 32; w += 3)
            for (int c = 0; c < 3; c++)
                assert_true(x[(h * 32 + w) * 3 + c] ==
                            (float)(uint8_t)((7 * 3072 + c * 1024 + h * 32 + w) * 7) / 255.0f);
    free(x);
    mw_dataset_free(&tr);
    mw_dataset_free(&te);
}

static void test_cifar100_labels(void **state)
{
    const char *dir = *state;
    write_cifar(dir, "train.bin", 4, 1, 97, 0);
    write_cifar(dir, "test.bin", 2, 1, 3, 0);
    mw_dataset tr, te;
    mw_dataset_init(&tr);
    mw_dataset_init(&te);
    expect_err(mw_dataset_open(&tr, &te, dir, &no_opts), MW_OK, "");
    assert_int_equal(tr.num_classes, 100);
    assert_int_equal(tr.labels[0], 97);
    assert_int_equal(tr.labels[3], 0);
    mw_data_opts coarse = {.cifar_fine = 0};
    expect_err(mw_dataset_open(&tr, &te, dir, &coarse), MW_OK, "");
    assert_int_equal(tr.num_classes, 20);
    assert_int_equal(tr.labels[0], 19);
    mw_dataset_free(&tr);
    mw_dataset_free(&te);
}

/* ---- bad inputs ---- */

#define RAW(s) D_RAW, s, sizeof s - 1
static const npy_case npy_cases[] = {
    {"magic",
     0,
     0,
     NULL,
     RAW("\x93NUMPX\x01\x00\x10\x00{}              \n"),
     0,
     MW_EDATA,
     {"x_train.npy", "npy magic", "\\x93NUMPY"}},
    {"short_file",
     1,
     0,
     NULL,
     RAW("\x93NUM"),
     0,
     MW_EDATA,
     {"y_train.npy", "npy magic", "shorter than 10 bytes"}},
    {"version_4",
     0,
     4,
     NULL,
     D_GOOD,
     NULL,
     0,
     0,
     MW_EDATA,
     {"x_train.npy", "npy version 4.0", "expected 1.0, 2.0 or 3.0"}},
    {"version_minor",
     0,
     0,
     NULL,
     RAW("\x93NUMPY\x01\x01\x10\x00{}              \n"),
     0,
     MW_EDATA,
     {"npy version 1.1"}},
    {"header_len_past_end",
     2,
     0,
     NULL,
     RAW("\x93NUMPY\x01\x00\xff\x00{'descr': '|u1'"),
     0,
     MW_EDATA,
     {"x_test.npy", "npy header_len 255", "only 25 bytes"}},
    {"not_a_dict",
     0,
     0,
     "[1, 2]",
     D_GOOD,
     NULL,
     0,
     0,
     MW_EDATA,
     {"x_train.npy", "npy header", "expected a Python dict"}},
    {"missing_shape",
     0,
     0,
     "{'descr': '|u1', 'fortran_order': False}",
     D_GOOD,
     NULL,
     0,
     0,
     MW_EDATA,
     {"x_train.npy", "key 'shape' is missing"}},
    {"extra_key",
     3,
     0,
     "{'descr': '|u1', 'fortran_order': False, 'shape': (2,), 'x': 1}",
     D_GOOD,
     NULL,
     0,
     0,
     MW_EDATA,
     {"y_test.npy", "unexpected key 'x'", "'descr', 'fortran_order'"}},
    {"duplicate_key",
     3,
     0,
     "{'descr': '|u1', 'descr': '|u1', 'fortran_order': False}",
     D_GOOD,
     NULL,
     0,
     0,
     MW_EDATA,
     {"y_test.npy", "key 'descr' appears twice"}},
    {"unterminated_dict",
     3,
     0,
     "{'descr': '|u1', 'fortran_order': False, 'shape': (2,)",
     D_GOOD,
     NULL,
     0,
     0,
     MW_EDATA,
     {"y_test.npy", "expected ',' or '}' after 'shape'"}},
    {"descr_big_endian",
     1,
     0,
     "{'descr': '>i8', 'fortran_order': False, 'shape': (4,)}",
     D_GOOD,
     NULL,
     0,
     0,
     MW_EDATA,
     {"y_train.npy", "field 'descr'", "big-endian"}},
    {"descr_complex",
     0,
     0,
     "{'descr': '<c8', 'fortran_order': False, 'shape': (4, 3, 2)}",
     D_GOOD,
     NULL,
     0,
     0,
     MW_EDATA,
     {"field 'descr'", "integer or float type", "'<c8'"}},
    {"descr_structured",
     0,
     0,
     "{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (4, 3, 2)}",
     D_GOOD,
     NULL,
     0,
     0,
     MW_EDATA,
     {"field 'descr'", "structured dtype is not supported"}},
    {"fortran_true",
     0,
     0,
     "{'descr': '|u1', 'fortran_order': True, 'shape': (4, 3, 2)}",
     D_GOOD,
     NULL,
     0,
     0,
     MW_EDATA,
     {"x_train.npy", "field 'fortran_order'", "expected False"}},
    {"fortran_other",
     0,
     0,
     "{'descr': '|u1', 'fortran_order': 0, 'shape': (4, 3, 2)}",
     D_GOOD,
     NULL,
     0,
     0,
     MW_EDATA,
     {"field 'fortran_order'", "expected False", "\"0"}},
    {"shape_list",
     0,
     0,
     "{'descr': '|u1', 'fortran_order': False, 'shape': [4, 3, 2]}",
     D_GOOD,
     NULL,
     0,
     0,
     MW_EDATA,
     {"field 'shape'", "expected a tuple"}},
    {"shape_negative",
     0,
     0,
     "{'descr': '|u1', 'fortran_order': False, 'shape': (-4, 3, 2)}",
     D_GOOD,
     NULL,
     0,
     0,
     MW_EDATA,
     {"field 'shape'", "non-negative integer sizes"}},
    {"shape_not_tuple", /* Python's (24) is 24, which numpy.load refuses as a shape */
     0,
     0,
     "{'descr': '|u1', 'fortran_order': False, 'shape': (24)}",
     D_GOOD,
     NULL,
     0,
     0,
     MW_EDATA,
     {"x_train.npy: npy header field 'shape': expected a tuple; a 1-D shape is written (N,) (got "
      "(24), the integer 24)"}},
    {"shape_many_dims",
     0,
     0,
     "{'descr': '|u1', 'fortran_order': False, 'shape': (1, 1, 1, 1, 1, 1, 1, 1, 24)}",
     D_GOOD,
     NULL,
     0,
     0,
     MW_EDATA,
     {"field 'shape'", "too many dimensions"}},
    {"data_truncated",
     0,
     0,
     NULL,
     D_SHORT,
     NULL,
     0,
     0,
     MW_EDATA,
     {"x_train.npy", "need 24 data bytes", "truncated"}},
    {"data_extra",
     2,
     0,
     NULL,
     D_LONG,
     NULL,
     0,
     0,
     MW_EDATA,
     {"x_test.npy", "has 13", "extra bytes at the end"}},
    /* a 2-D uint8 array is token ids now (test_npy_tokens); float64 is neither features nor
     * ids */
    {"images_2d",
     0,
     0,
     "{'descr': '<f8', 'fortran_order': False, 'shape': (1, 3)}",
     D_GOOD,
     NULL,
     0,
     0,
     MW_EDATA,
     {"x_train.npy", "features of '<f8'", "expected float32 ('<f4')"}},
    {"images_int32",
     0,
     0,
     "{'descr': '<i4', 'fortran_order': False, 'shape': (2, 3, 1)}",
     D_GOOD,
     NULL,
     0,
     0,
     MW_EDATA,
     {"x_train.npy", "images of '<i4'", "uint8 ('|u1') or float32"}},
    {"images_empty",
     0,
     0,
     "{'descr': '|u1', 'fortran_order': False, 'shape': (0, 3, 2)}",
     D_EMPTY,
     NULL,
     0,
     0,
     MW_EDATA,
     {"x_train.npy", "holds 0 images", "1.."}},
    {"images_no_channels",
     0,
     0,
     "{'descr': '|u1', 'fortran_order': False, 'shape': (4, 3, 2, 0)}",
     D_EMPTY,
     NULL,
     0,
     0,
     MW_EDATA,
     {"x_train.npy", "1..4096 channels"}},
    /* (N, T) labels per position and (N, H, W) per pixel are read (test_npy_position_labels,
     * test_npy_pixel_labels); 4-D labels are not */
    {"labels_4d",
     1,
     0,
     "{'descr': '<i8', 'fortran_order': False, 'shape': (2, 1, 2, 1)}",
     D_GOOD,
     NULL,
     0,
     0,
     MW_EDATA,
     {"y_train.npy", "labels of shape (2, 1, 2, 1)", "(N, H, W) per pixel"}},
    {"labels_float",
     1,
     0,
     "{'descr': '<f8', 'fortran_order': False, 'shape': (4,)}",
     D_GOOD,
     NULL,
     0,
     0,
     MW_EDATA,
     {"y_train.npy", "labels of '<f8'", "int32 ('<i4') or int64"}},
    {"count_mismatch",
     1,
     0,
     "{'descr': '<i4', 'fortran_order': False, 'shape': (8,)}",
     D_GOOD,
     NULL,
     0,
     0,
     MW_EDATA,
     {"x_train.npy has 4 images but", "y_train.npy has 8 labels"}},
    {"label_negative",
     1,
     0,
     NULL,
     D_NEG,
     NULL,
     0,
     0,
     MW_EDATA,
     {"y_train.npy", "example 3 has label -1", "expected a class index"}},
    {"label_over_classes",
     1,
     0,
     NULL,
     D_GOOD,
     NULL,
     0,
     2,
     MW_EDATA,
     {"y_train.npy", "example 1 has label 2", "expected 0..1 (--classes 2)"}},
    {"image_nan",
     0,
     0,
     "{'descr': '<f4', 'fortran_order': False, 'shape': (4, 3, 2)}",
     D_F32_NAN,
     NULL,
     0,
     0,
     MW_EDATA,
     {"x_train.npy", "example 1 has NaN at element 1", "finite"}},
    {"image_inf",
     0,
     0,
     "{'descr': '<f4', 'fortran_order': False, 'shape': (4, 3, 2)}",
     D_F32_INF,
     NULL,
     0,
     0,
     MW_EDATA,
     {"x_train.npy", "example 2 has an infinity at element 1"}},
    {"test_shape_differs",
     2,
     0,
     "{'descr': '|u1', 'fortran_order': False, 'shape': (2, 2, 3)}",
     D_GOOD,
     NULL,
     0,
     0,
     MW_EDATA,
     {"test images are 2x3x1", "train images are 3x2x1"}},
};

/* Each case as a .npy directory, then (same bytes) as members of an .npz, stored. */
static void test_bad_npy(void **state)
{
    const char *dir = *state;
    int failed = 0;
    for (size_t i = 0; i < sizeof npy_cases / sizeof *npy_cases; i++) {
        const npy_case *c = &npy_cases[i];
        for (int npz = 0; npz < 2; npz++) {
            char sub[4096];
            snprintf(sub, sizeof sub, "%s/%s%s", dir, c->name, npz ? "_npz" : "");
            assert_int_equal(mkdir(sub, 0755), 0);
            char *path = NULL;
            if (npz)
                path = write_npz(sub, "d.npz", c, 0, -1, NULL);
            else
                write_npy_dir(sub, c);
            mw_dataset tr, te;
            mw_dataset_init(&tr);
            mw_dataset_init(&te);
            mw_data_opts o = {.classes = c->classes, .cifar_fine = 1};
            mw_err_clear();
            mw_status rc = mw_dataset_open(&tr, &te, npz ? path : sub, &o);
            char who[256];
            snprintf(who, sizeof who, "case %s%s", c->name, npz ? " (npz)" : "");
            if (!mw_test_err_matches(who, rc, c->want, c->msg))
                failed++;
            if (npz && rc != MW_OK && !strstr(mw_err_msg(), "d.npz: ")) {
                fprintf(stderr, "%s: the message does not name the archive\n", who);
                failed++;
            }
            if (tr.images || tr.labels || te.images || tr.count) {
                fprintf(stderr, "%s: a failed open changed the sets\n", who);
                failed++;
            }
            mw_err_clear();
            free(path);
        }
    }
    printf("%zu npy cases, each as a directory and as an .npz\n",
           sizeof npy_cases / sizeof *npy_cases);
    assert_int_equal(failed, 0);
}

/* Archive structure: what libzip and the member checks refuse. */
typedef enum {
    Z_MISSING,
    Z_EXTRA,
    Z_TRUNCATED,
    Z_CORRUPT_STORED,
    Z_CORRUPT_DEFLATED,
    Z_GARBAGE,
    Z_NOT_ZIP,
    Z_SINGLE_NPY,
    Z_DUPLICATE
} zip_fault;
typedef struct {
    const char *name;
    zip_fault fault;
    mw_status want;
    const char *msg[4]; /* up to 3, NULL-terminated */
} npz_case;
static const npz_case npz_cases[] = {
    {"missing_member", Z_MISSING, MW_EDATA, {"d.npz", "member 'y_test.npy' is missing"}},
    {"extra_member", Z_EXTRA, MW_EDATA, {"d.npz", "unexpected member 'z_extra.npy'"}},
    {"truncated", Z_TRUNCATED, MW_EDATA, {"d.npz", "not a readable zip archive"}},
    {"corrupt_stored", Z_CORRUPT_STORED, MW_EDATA, {"d.npz: x_train.npy", "CRC"}},
    {"corrupt_deflated", Z_CORRUPT_DEFLATED, MW_EDATA, {"d.npz: x_train.npy", "corrupt member"}},
    {"garbage_after_signature", Z_GARBAGE, MW_EDATA, {"d.npz", "not a readable zip archive"}},
    {"not_zip", Z_NOT_ZIP, MW_EDATA, {"d.npz", "not a zip archive", "\"PK\""}},
    {"single_npy", Z_SINGLE_NPY, MW_EDATA, {"d.npz", "a single .npy array", "x_train.npy"}},
    {"duplicate_member",
     Z_DUPLICATE,
     MW_EDATA,
     {"d.npz", "the member name 'x_train.npy' appears twice in the archive"}},
};

/* Offset of the first occurrence of needle in the file's bytes, for corrupting a member. */
static size_t find_bytes(const uint8_t *b, size_t n, const void *needle, size_t len)
{
    for (size_t i = 0; i + len <= n; i++)
        if (!memcmp(b + i, needle, len))
            return i;
    fail_msg("pattern not found in the archive");
    return 0;
}

static void make_npz_case(const char *sub, const npz_case *c, char **path)
{
    size_t n = 0;
    uint8_t *b = NULL;
    switch (c->fault) {
    case Z_MISSING:
        *path = write_npz(sub, "d.npz", NULL, 0, 3, NULL);
        return;
    case Z_EXTRA:
        *path = write_npz(sub, "d.npz", NULL, 0, -1, "z_extra.npy");
        return;
    case Z_NOT_ZIP:
        *path = mw_test_write_file(sub, "d.npz", "hello, world\n", 13);
        return;
    case Z_GARBAGE:
        *path = mw_test_write_file(sub, "d.npz", "PK\x03\x04garbage garbage garbage", 27);
        return;
    case Z_SINGLE_NPY:
        b = case_file(NULL, 0, &n);
        *path = mw_test_write_file(sub, "d.npz", b, n);
        free(b);
        return;
    case Z_DUPLICATE: /* a fifth member renamed x_train.npy in its local and central headers */
        *path = write_npz(sub, "d.npz", NULL, 0, -1, "z_extra.npy");
        b = (uint8_t *)mw_test_read_file(*path, &n);
        for (size_t at = 0; at + 11 <= n; at++)
            if (!memcmp(b + at, "z_extra.npy", 11))
                memcpy(b + at, "x_train.npy", 11);
        free(mw_test_write_file(sub, "d.npz", b, n));
        free(b);
        return;
    default:
        break;
    }
    *path = write_npz(sub, "d.npz", NULL, c->fault == Z_CORRUPT_DEFLATED ? 0xf : 0, -1, NULL);
    b = (uint8_t *)mw_test_read_file(*path, &n);
    assert_non_null(b);
    if (c->fault == Z_TRUNCATED) {
        n -= 30; /* into the end of central directory record */
    } else if (c->fault == Z_CORRUPT_STORED) {
        size_t at = find_bytes(b, n, x_train, sizeof x_train);
        b[at + 5] ^= 0x40;
    } else { /* deflated: the member's compressed bytes follow its local header and name */
        size_t at = find_bytes(b, n, "x_train.npy", 11) + 11;
        b[at + 4] ^= 0xff, b[at + 5] ^= 0xff, b[at + 6] ^= 0xff;
    }
    free(mw_test_write_file(sub, "d.npz", b, n));
    free(b);
}

static void test_bad_npz(void **state)
{
    const char *dir = *state;
    int failed = 0;
    good_data(0, &(size_t){0}); /* x_train's bytes, which Z_CORRUPT_STORED looks for */
    for (size_t i = 0; i < sizeof npz_cases / sizeof *npz_cases; i++) {
        const npz_case *c = &npz_cases[i];
        char sub[4096], *path = NULL;
        snprintf(sub, sizeof sub, "%s/%s", dir, c->name);
        assert_int_equal(mkdir(sub, 0755), 0);
        make_npz_case(sub, c, &path);
        mw_dataset tr, te;
        mw_dataset_init(&tr);
        mw_dataset_init(&te);
        mw_err_clear();
        mw_status rc = mw_dataset_open(&tr, &te, path, &no_opts);
        char who[128];
        snprintf(who, sizeof who, "case %s", c->name);
        if (!mw_test_err_matches(who, rc, c->want, c->msg))
            failed++;
        mw_dataset_free(&tr);
        mw_dataset_free(&te);
        mw_err_clear();
        free(path);
    }
    assert_int_equal(failed, 0);
}

typedef enum {
    C_SIZE,
    C_EMPTY,
    C_MISSING,
    C_LABEL10,
    C_FINE100,
    C_COARSE20,
    C_100_SIZE,
    C_CLASSES
} cifar_fault;
typedef struct {
    const char *name;
    cifar_fault fault;
    mw_status want;
    const char *msg[4]; /* up to 3, NULL-terminated */
} cifar_case;
static const cifar_case cifar_cases[] = {
    {"record_size", C_SIZE, MW_EDATA, {"data_batch_2.bin", "file size 6147", "3073-byte records"}},
    {"empty_file", C_EMPTY, MW_EDATA, {"test_batch.bin", "file size 0", "not a CIFAR-10 file"}},
    {"missing_batch", C_MISSING, MW_EIO, {"data_batch_3.bin", "No such file"}},
    {"label_over_10",
     C_LABEL10,
     MW_EDATA,
     {"data_batch_4.bin", "example 1 has label 10", "expected 0..9 (CIFAR-10 has 10 classes)"}},
    {"fine_over_100",
     C_FINE100,
     MW_EDATA,
     {"train.bin", "label 100", "CIFAR-100 (fine labels) has 100 classes"}},
    {"coarse_over_20",
     C_COARSE20,
     MW_EDATA,
     {"test.bin", "label 20", "CIFAR-100 (coarse labels) has 20 classes"}},
    {"cifar100_record_size", C_100_SIZE, MW_EDATA, {"train.bin", "3074-byte records"}},
    {"over_classes_flag", C_CLASSES, MW_EDATA, {"data_batch_1.bin", "(--classes 1)"}},
};

static void test_bad_cifar(void **state)
{
    const char *dir = *state;
    int failed = 0;
    for (size_t i = 0; i < sizeof cifar_cases / sizeof *cifar_cases; i++) {
        const cifar_case *c = &cifar_cases[i];
        char sub[4096], p[4200];
        snprintf(sub, sizeof sub, "%s/%s", dir, c->name);
        assert_int_equal(mkdir(sub, 0755), 0);
        mw_data_opts o = {.classes = c->fault == C_CLASSES ? 1 : 0,
                          .cifar_fine = c->fault != C_COARSE20};
        if (c->fault == C_FINE100 || c->fault == C_COARSE20 || c->fault == C_100_SIZE) {
            write_cifar(sub, "train.bin", 3, 1, 0, c->fault == C_FINE100 ? 100 : 0);
            write_cifar(sub, "test.bin", 2, 1, 0, 0);
            if (c->fault == C_COARSE20) { /* coarse byte of the last record */
                write_cifar(sub, "test.bin", 2, 1, 0, 0);
                snprintf(p, sizeof p, "%s/test.bin", sub);
                size_t n;
                uint8_t *b = (uint8_t *)mw_test_read_file(p, &n);
                b[3074] = 20;
                free(mw_test_write_file(sub, "test.bin", b, n));
                free(b);
            }
            if (c->fault == C_100_SIZE)
                write_cifar(sub, "train.bin", 2, 0, 0, 0);
        } else {
            write_cifar10(sub);
            if (c->fault == C_SIZE)
                free(mw_test_write_file(sub, "data_batch_2.bin", (uint8_t[6147]){0}, 6147));
            if (c->fault == C_EMPTY)
                free(mw_test_write_file(sub, "test_batch.bin", "", 0));
            if (c->fault == C_MISSING) {
                snprintf(p, sizeof p, "%s/data_batch_3.bin", sub);
                assert_int_equal(unlink(p), 0);
            }
            if (c->fault == C_LABEL10)
                write_cifar(sub, "data_batch_4.bin", 2, 0, 0, 10);
        }
        mw_dataset tr, te;
        mw_dataset_init(&tr);
        mw_dataset_init(&te);
        mw_err_clear();
        mw_status rc = mw_dataset_open(&tr, &te, sub, &o);
        char who[128];
        snprintf(who, sizeof who, "case %s", c->name);
        if (!mw_test_err_matches(who, rc, c->want, c->msg))
            failed++;
        mw_dataset_free(&tr);
        mw_dataset_free(&te);
        mw_err_clear();
    }
    assert_int_equal(failed, 0);
}

static void test_detect(void **state)
{
    const char *dir = *state;
    mw_dataset tr, te;
    mw_dataset_init(&tr);
    mw_dataset_init(&te);
    char p[4200];
    snprintf(p, sizeof p, "%s/nowhere", dir);
    expect_err(mw_dataset_open(&tr, &te, p, &no_opts), MW_EIO, "data ", "nowhere", "No such file");
    mw_err_clear();
    /* an empty directory is taken for IDX, whose reader names the files it looked for */
    expect_err(mw_dataset_open(&tr, &te, dir, &no_opts), MW_EIO, "train-images-idx3-ubyte");
    mw_err_clear();
}

/* The header parser on its own: the data offset of each version, and a header that ends
 * before its declared length. */
static void test_parse_header(void **state)
{
    (void)state;
    for (int v = 1; v <= 3; v++) {
        size_t n;
        uint8_t *b = npy_make(v, good_dicts[0], x_train, 24, &n);
        mw_npy_header h;
        expect_err(mw_npy_parse_header(&h, b, n, n, "a.npy"), MW_OK, "");
        assert_int_equal(h.data_offset, n - 24); /* padded to 64: np.save's alignment */
        assert_int_equal(h.data_offset % 64, 0);
        assert_int_equal(h.ndim, 3);
        assert_int_equal(h.count, 24);
        assert_int_equal(h.kind, 'u');
        expect_err(mw_npy_parse_header(&h, b, 40, n, "a.npy"), MW_EDATA, "a.npy", "npy header_len",
                   "only 40 bytes");
        mw_err_clear();
        free(b);
    }
}

/* A stored member's data offset from hand-built archives: a plain central directory entry, one
 * whose local header offset is in its zip64 extra field (0xffffffff in the entry), a zip64 end
 * of central directory, and broken ones (0: the caller copies the member instead). */
static size_t put(uint8_t *b, size_t at, uint64_t v, int n)
{
    for (int i = 0; i < n; i++)
        b[at + (size_t)i] = (uint8_t)(v >> (8 * i));
    return at + (size_t)n;
}

static size_t build_zip(uint8_t *b, int zip64_offset, int zip64_end, size_t local_extra)
{
    memset(b, 0, 512);
    size_t at = 7; /* the member's local header does not start the file */
    memcpy(b + at, "PK\x03\x04", 4);
    put(b, at + 26, 5, 2);           /* name length */
    put(b, at + 28, local_extra, 2); /* extra length */
    memcpy(b + at + 30, "a.npy", 5);
    size_t data = at + 30 + 5 + local_extra, cd = data + 16;
    memcpy(b + cd, "PK\x01\x02", 4);
    put(b, cd + 20, 16, 4), put(b, cd + 24, 16, 4); /* sizes */
    put(b, cd + 28, 5, 2);
    put(b, cd + 30, zip64_offset ? 12 : 0, 2);
    put(b, cd + 42, zip64_offset ? 0xffffffffu : at, 4);
    memcpy(b + cd + 46, "a.npy", 5);
    size_t end = cd + 46 + 5;
    if (zip64_offset) { /* extra 0x0001: only the saturated field, the offset */
        put(b, end, 1, 2), put(b, end + 2, 8, 2), put(b, end + 4, at, 8);
        end += 12;
    }
    size_t cd_len = end - cd;
    if (zip64_end) {
        size_t z = end;
        memcpy(b + z, "PK\x06\x06", 4);
        put(b, z + 32, 1, 8), put(b, z + 40, cd_len, 8), put(b, z + 48, cd, 8);
        memcpy(b + z + 56, "PK\x06\x07", 4);
        put(b, z + 56 + 8, z, 8);
        end = z + 56 + 20;
    }
    memcpy(b + end, "PK\x05\x06", 4);
    put(b, end + 10, zip64_end ? 0xffff : 1, 2);
    put(b, end + 16, zip64_end ? 0xffffffffu : cd, 4);
    return end + 22;
}

static void test_zip_data_offset(void **state)
{
    (void)state;
    uint8_t b[512];
    for (int z64o = 0; z64o < 2; z64o++)
        for (int z64e = 0; z64e < 2; z64e++) {
            size_t n = build_zip(b, z64o, z64e, 20);
            assert_int_equal(mw_data_zip_data_offset(b, n, "a.npy"), 7 + 30 + 5 + 20);
            assert_int_equal(mw_data_zip_data_offset(b, n, "b.npy"), 0);     /* not there */
            assert_int_equal(mw_data_zip_data_offset(b, n - 1, "a.npy"), 0); /* no end record */
        }
    size_t n = build_zip(b, 0, 0, 0);
    assert_int_equal(mw_data_zip_data_offset(b, n, "a.npy"), 42);
    b[7] = 'X'; /* the local header's signature */
    assert_int_equal(mw_data_zip_data_offset(b, n, "a.npy"), 0);
    n = build_zip(b, 1, 0, 0);
    put(b, 42 + 16 + 46 + 5 + 2, 4, 2); /* the zip64 extra field too short for the offset */
    assert_int_equal(mw_data_zip_data_offset(b, n, "a.npy"), 0);
}

/* A masked loss's weights (mw_dataset_set_mask, mw_dataset_mask_batches, batch_weights) on a
 * token set built in memory, against the rule computed here position by position: a position
 * counts unless its id is 0 (pad) or its label is the ignored one; each global batch's
 * factor is its positions / the ones that count there, in float32 (Keras 3.15's apply_mask),
 * times the sample weight; a batch with none gets 0, never an infinity. Then one label per
 * example (ignore_class alone), and no mask at all. */
static void test_mask_weights(void **state)
{
    (void)state;
    enum { N = 5, T = 4 };
    int32_t ids[N][T] = {{3, 4, 0, 0}, {5, 0, 0, 0}, {1, 2, 3, 4}, {0, 0, 0, 0}, {7, 7, 7, 0}};
    int32_t labels[N][T] = {{1, 2, 0, 0}, {2, 2, 2, 2}, {2, 0, 1, 2}, {0, 1, 2, 0}, {2, 2, 2, 2}};
    float sw[N] = {1.0f, 0.5f, 2.0f, 1.0f, 3.0f};
    mw_dataset d;
    mw_dataset_init(&d);
    d.images = (uint8_t *)ids, d.labels = &labels[0][0], d.weights = sw;
    d.count = N, d.rows = 1, d.cols = T, d.channels = 1, d.label_width = T;
    d.type = MW_IMAGES_TOKENS, d.tok_size = 4, d.tok_signed = 1;
    const uint32_t order[N] = {4, 0, 2, 1, 3}; /* global batches of 2: {4, 0}, {2, 1}, {3} */
    for (int pad = 0; pad <= 1; pad++)
        for (int ignore = 0; ignore <= 1; ignore++) {
            expect_err(mw_dataset_set_mask(&d, ignore, 2, pad, "the set"), MW_OK, "");
            if (!pad && !ignore) {
                assert_null(d.mask_w);
                continue;
            }
            mw_dataset_mask_batches(&d, order, N, 2);
            for (int b = 0; b < N; b += 2) {
                const int nb = N - b < 2 ? N - b : 2;
                int valid = 0, counts[2][T];
                for (int i = 0; i < nb; i++)
                    for (int t = 0; t < T; t++) {
                        const uint32_t id = order[b + i];
                        counts[i][t] = !(pad && ids[id][t] == 0) && !(ignore && labels[id][t] == 2);
                        valid += counts[i][t];
                    }
                float w[2 * T];
                assert_true(mw_dataset_batch_weights(&d, w, order + b, nb) == w);
                const float f = valid ? (float)(nb * T) / (float)valid : 0.0f;
                for (int i = 0; i < nb; i++)
                    for (int t = 0; t < T; t++)
                        if (w[i * T + t] != (counts[i][t] ? sw[order[b + i]] * f : 0.0f))
                            fail_msg("pad %d ignore %d: example %u position %d weight %g, want "
                                     "%g (valid %d of the batch's %d)",
                                     pad, ignore, order[b + i], t, (double)w[i * T + t],
                                     (double)(counts[i][t] ? sw[order[b + i]] * f : 0.0f), valid,
                                     nb * T);
            }
        }
    /* the last batch, example 3 alone, is all padding: 0 with the mask, not 0/0 */
    float w[T];
    assert_true(mw_dataset_batch_weights(&d, w, &order[4], 1) == w);
    for (int t = 0; t < T; t++)
        assert_true(w[t] == 0.0f);
    /* one label per example: the examples labelled 2 count for nothing, the others 4/2 here */
    expect_err(mw_dataset_set_mask(&d, 0, 0, 0, "the set"), MW_OK, "");
    d.label_width = 1, d.weights = NULL;
    int32_t one[N] = {2, 0, 2, 1, 2};
    d.labels = one;
    expect_err(mw_dataset_set_mask(&d, 1, 2, 0, "the set"), MW_OK, "");
    const uint32_t all[4] = {0, 1, 2, 3};
    mw_dataset_mask_batches(&d, all, 4, 4);
    assert_true(mw_dataset_batch_weights(&d, w, all, 4) == w);
    assert_true(w[0] == 0.0f && w[1] == 2.0f && w[2] == 0.0f && w[3] == 2.0f);
    expect_err(mw_dataset_set_mask(&d, 0, 0, 0, "the set"), MW_OK, "");
    assert_null(mw_dataset_batch_weights(&d, w, all, 4)); /* no mask, no weights */
    d.images = NULL, d.labels = NULL;                     /* the arrays are this test's */
    mw_dataset_free(&d);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_header),
        mw_test_in_tmpdir(test_npy_dir_good),
        mw_test_in_tmpdir(test_npy_versions_shapes),
        mw_test_in_tmpdir(test_npy_features),
        mw_test_in_tmpdir(test_npy_targets),
        mw_test_in_tmpdir(test_npz_good),
        mw_test_in_tmpdir(test_mapped_file_shrinks),
        cmocka_unit_test(test_unseen_classes),
        mw_test_in_tmpdir(test_npy_tokens),
        mw_test_in_tmpdir(test_text_corpus),
        mw_test_in_tmpdir(test_npy_position_labels),
        mw_test_in_tmpdir(test_npy_pixel_labels),
        cmocka_unit_test(test_mask_weights),
        mw_test_in_tmpdir(test_cifar10_good),
        mw_test_in_tmpdir(test_cifar100_labels),
        mw_test_in_tmpdir(test_bad_npy),
        mw_test_in_tmpdir(test_bad_npz),
        mw_test_in_tmpdir(test_bad_cifar),
        mw_test_in_tmpdir(test_detect),
        cmocka_unit_test(test_zip_data_offset),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
