/* Tests for worker/data: the IDX reader on small generated files (plain and gzip), a table of
 * bad inputs (how each file is built, the status and the message parts it must produce), the
 * directory loader, batch scaling, the epoch order, and the real Fashion-MNIST files when the
 * Debian package is installed. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/rng.h"
#include "common/status.h"
#include "tests/util.h"
#include "worker/data/data.h"
#include "worker/data/data_idx.h"

/* ---- helpers ---- */

static char *xstrdup(const char *s)
{
    char *p = strdup(s);
    assert_non_null(p);
    return p;
}

/* An IDX file in memory: big-endian magic and dims, then body (NULL: zeros). Returns malloc'ed
 * bytes. */
static uint8_t *idx_bytes(uint32_t magic, const uint32_t *dims, int ndims, const void *body,
                          size_t body_nbytes, size_t *nbytes)
{
    size_t hdr = 4 + 4 * (size_t)ndims;
    uint8_t *buf = malloc(hdr + body_nbytes + 1);
    assert_non_null(buf);
    for (int i = 0; i <= ndims; i++) {
        uint32_t v = i == 0 ? magic : dims[i - 1];
        buf[4 * i] = (uint8_t)(v >> 24);
        buf[4 * i + 1] = (uint8_t)(v >> 16);
        buf[4 * i + 2] = (uint8_t)(v >> 8);
        buf[4 * i + 3] = (uint8_t)v;
    }
    if (body_nbytes && body)
        memcpy(buf + hdr, body, body_nbytes);
    else if (body_nbytes)
        memset(buf + hdr, 0, body_nbytes);
    *nbytes = hdr + body_nbytes;
    return buf;
}

/* Write an IDX file (gzip when gz) with the given header and body; returns the path. */
static char *write_idx(const char *dir, const char *name, int gz, uint32_t magic,
                       const uint32_t *dims, int ndims, const void *body, size_t body_nbytes)
{
    size_t nbytes;
    uint8_t *buf = idx_bytes(magic, dims, ndims, body, body_nbytes, &nbytes);
    char *path =
        gz ? mw_test_write_gz(dir, name, buf, nbytes) : mw_test_write_file(dir, name, buf, nbytes);
    free(buf);
    return path;
}

static char *write_images(const char *dir, const char *name, int gz, uint32_t count, uint32_t rows,
                          uint32_t cols, const uint8_t *pixels)
{
    uint32_t dims[3] = {count, rows, cols};
    return write_idx(dir, name, gz, MW_IDX_IMAGES_MAGIC, dims, 3, pixels,
                     (size_t)count * rows * cols);
}

static char *write_labels(const char *dir, const char *name, int gz, uint32_t count,
                          const uint8_t *labels)
{
    uint32_t dims[1] = {count};
    return write_idx(dir, name, gz, MW_IDX_LABELS_MAGIC, dims, 1, labels, count);
}

/* 3 images of 2x3 (non-square, so rows and cols cannot be swapped unnoticed). */
enum { N3 = 3, R3 = 2, C3 = 3 };
static const uint8_t labels3[N3] = {2, 0, 1};

static const uint8_t px3[N3 * R3 * C3] = {0,   15,  30,  45,  60,  75,  90,  105, 120,
                                          135, 150, 165, 180, 195, 210, 225, 240, 255};

/* Good image/label files named img/lbl in dir; paths returned malloc'ed. */
static void write_good(const char *dir, const char *img, const char *lbl, int gz, char **ip,
                       char **lp)
{
    *ip = write_images(dir, img, gz, N3, R3, C3, px3);
    *lp = write_labels(dir, lbl, gz, N3, labels3);
}

static void check_good(const mw_dataset *d)
{
    assert_int_equal(d->count, N3);
    assert_int_equal(d->rows, R3);
    assert_int_equal(d->cols, C3);
    assert_int_equal(d->num_classes, 3);
    assert_memory_equal(d->images, px3, sizeof px3);
    for (int i = 0; i < N3; i++)
        assert_int_equal(d->labels[i], labels3[i]);

    /* The batch in order: pixel / 255, so 255 -> 1.0 and 0 -> 0.0 exactly. */
    uint32_t ids[N3] = {0, 1, 2};
    float x[N3 * R3 * C3], ref[N3 * R3 * C3];
    int32_t y[N3];
    mw_dataset_batch(d, x, y, ids, N3);
    for (int i = 0; i < N3 * R3 * C3; i++)
        ref[i] = (float)px3[i] / 255.0f;
    expect_close(x, ref, N3 * R3 * C3, 0.0f, 0.0f);
    assert_true(x[0] == 0.0f);
    assert_true(x[N3 * R3 * C3 - 1] == 1.0f);
    for (int i = 0; i < N3; i++)
        assert_int_equal(y[i], labels3[i]);
}

/* ---- good files ---- */

static void test_init_free(void **state)
{
    (void)state;
    mw_dataset d;
    mw_dataset_init(&d);
    mw_dataset_free(&d);
    mw_dataset_free(&d); /* twice is fine */
    assert_null(d.images);
    assert_int_equal(d.count, 0);
}

static void load_good(const char *dir, int gz)
{
    char *ip, *lp;
    write_good(dir, gz ? "img.gz" : "img", gz ? "lbl.gz" : "lbl", gz, &ip, &lp);
    mw_dataset d;
    mw_dataset_init(&d);
    mw_status rc = mw_dataset_load(&d, ip, lp, 3);
    expect_err(rc, MW_OK, "");
    check_good(&d);
    mw_dataset_free(&d);
    free(ip);
    free(lp);
}

static void test_load_plain(void **state)
{
    load_good(*state, 0);
}

static void test_load_gz(void **state)
{
    load_good(*state, 1);
}

static void test_batch_ids(void **state)
{
    /* 4 images of 1x2 with distinct values; ids out of order and repeated, y NULL. */
    const uint8_t px[8] = {0, 255, 1, 254, 128, 64, 255, 0};
    const uint8_t lb[4] = {3, 1, 2, 0};
    char *ip = write_images(*state, "img", 0, 4, 1, 2, px);
    char *lp = write_labels(*state, "lbl", 0, 4, lb);
    mw_dataset d;
    mw_dataset_init(&d);
    assert_int_equal(mw_dataset_load(&d, ip, lp, 4), MW_OK);

    const uint32_t ids[3] = {3, 0, 3};
    float x[6];
    int32_t y[3];
    mw_dataset_batch(&d, x, y, ids, 3);
    const float want[6] = {1.0f, 0.0f, 0.0f, 1.0f, 1.0f, 0.0f};
    expect_close(x, want, 6, 0.0f, 0.0f);
    assert_int_equal(y[0], 0);
    assert_int_equal(y[1], 3);
    assert_int_equal(y[2], 0);

    const uint32_t one[1] = {2};
    mw_dataset_batch(&d, x, NULL, one, 1);
    assert_true(x[0] == 128.0f / 255.0f);
    assert_true(x[1] == 64.0f / 255.0f);
    mw_dataset_batch(&d, x, y, one, 0); /* n = 0 touches nothing */

    mw_dataset_free(&d);
    free(ip);
    free(lp);
}

static void test_failed_load_keeps_set(void **state)
{
    char *ip, *lp;
    write_good(*state, "img", "lbl", 0, &ip, &lp);
    char *missing = xstrdup("/nonexistent/mwtrain/labels");
    mw_dataset d;
    mw_dataset_init(&d);
    assert_int_equal(mw_dataset_load(&d, ip, lp, 3), MW_OK);
    expect_err(mw_dataset_load(&d, ip, missing, 3), MW_EIO, missing);
    check_good(&d);                                          /* unchanged */
    assert_int_equal(mw_dataset_load(&d, ip, lp, 3), MW_OK); /* replaces, leaks nothing */
    check_good(&d);
    mw_dataset_free(&d);
    free(ip);
    free(lp);
    free(missing);
}

/* ---- bad files: a table ---- */

/* How one input file of a bad case is made: an IDX header (magic, ndims dims) and body (NULL:
 * zeros), cut to its first `keep` bytes when keep > 0, written plain or gzip'ed; a gzip file
 * may then be damaged. MISSING names a file that is not there; THE_DIR passes the case's
 * directory itself. The file is "<dir>/images" or "<dir>/labels" (by the slot it fills), with
 * ".gz" when gzip'ed and "no-such-" before it when missing. */
typedef enum { IDX, MISSING, THE_DIR } file_kind;
typedef enum {
    PLAIN,
    GZ,
    GZ_HALF,       /* the compressed file cut in the middle of the deflate stream */
    GZ_NO_TRAILER, /* all data, the 8-byte CRC/length trailer cut off */
    GZ_BAD_CRC,    /* the first byte of the stored CRC flipped */
} file_enc;

typedef struct {
    file_kind kind;
    file_enc enc;
    uint32_t magic;
    int ndims;
    uint32_t dims[3];
    const uint8_t *body;
    size_t body_nbytes;
    size_t keep;
} file_spec;

/* Well-formed files: n images of r x c (px NULL: zeros), an image header with no data, n
 * labels, and the good 3-example set. Others are spelled out with designated initializers;
 * IMAGES_HDR3 starts one with the good set's image header. */
#define IMAGES(enc, n, r, c, px)                                                                   \
    {                                                                                              \
        IDX, enc, MW_IDX_IMAGES_MAGIC, 3, {n, r, c}, px, (size_t)(n) * (r) * (c), 0                \
    }
#define IMAGE_HEADER(enc, n, r, c)                                                                 \
    {                                                                                              \
        IDX, enc, MW_IDX_IMAGES_MAGIC, 3, {n, r, c}, NULL, 0, 0                                    \
    }
#define LABELS(enc, n, lb)                                                                         \
    {                                                                                              \
        IDX, enc, MW_IDX_LABELS_MAGIC, 1, {n}, lb, n, 0                                            \
    }
#define GOOD_IMAGES(enc) IMAGES(enc, N3, R3, C3, px3)
#define GOOD_LABELS(enc) LABELS(enc, N3, labels3)
#define IMAGES_HDR3 .magic = MW_IDX_IMAGES_MAGIC, .ndims = 3, .dims = {N3, R3, C3}

enum { IN_IMAGES = 1, IN_LABELS = 2 }; /* the message names that file's path */

typedef struct {
    const char *name;
    file_spec images, labels; /* what mw_dataset_load gets as its image and label files */
    int num_classes;
    mw_status want;
    unsigned names;     /* IN_IMAGES | IN_LABELS */
    const char *msg[6]; /* parts of the message, up to 5 (NULL ends the list) */
} bad_case;

/* 64 images of 8x8 with noise, so the deflate stream is long enough to cut in the middle. */
enum { NB = 64, RB = 8, CB = 8 };
static uint8_t big_px[NB * RB * CB], big_lb[NB];

static void fill_big(void)
{
    uint32_t s = 12345;
    for (int i = 0; i < NB * RB * CB; i++) {
        s = s * 1103515245u + 12345u;
        big_px[i] = (uint8_t)(s >> 24);
    }
    for (int i = 0; i < NB; i++)
        big_lb[i] = (uint8_t)(i % 10);
}

static const uint8_t seven[1] = {7}, zero1[1] = {0}, lb01[2] = {0, 1}, lb0110[3] = {0, 1, 10};

static const bad_case bad_cases[] = {
    {"missing_images",
     {.kind = MISSING},
     GOOD_LABELS(PLAIN),
     3,
     MW_EIO,
     IN_IMAGES,
     {"cannot open", "No such file"}},
    {"missing_labels",
     GOOD_IMAGES(GZ),
     {.kind = MISSING, .enc = GZ},
     3,
     MW_EIO,
     IN_LABELS,
     {"cannot open", "No such file"}},
    /* A directory is no IDX file: refused before it is opened (as a FIFO or a device is). */
    {"unreadable",
     {.kind = THE_DIR},
     GOOD_LABELS(PLAIN),
     3,
     MW_EIO,
     IN_IMAGES,
     {"is a directory, not a regular file", "expected an IDX file"}},
    {"bad_image_magic",
     {.magic = 0x12345678u, .ndims = 3, .dims = {1, 1, 1}, .body = seven, .body_nbytes = 1},
     LABELS(PLAIN, 1, zero1),
     3,
     MW_EDATA,
     IN_IMAGES,
     {"0x12345678", "0x00000803", "not an IDX image file"}},
    /* Float data (type 0x0d) is IDX but not what a label file holds. */
    {"bad_label_magic",
     IMAGES(GZ, 1, 1, 1, seven),
     {.enc = GZ, .magic = 0x00000d01u, .ndims = 1, .dims = {1}, .body_nbytes = 4},
     3,
     MW_EDATA,
     IN_LABELS,
     {"0x00000d01", "0x00000801", "not an IDX label file"}},
    {"image_ndims",
     {.magic = 0x00000802u, .ndims = 2, .dims = {1, 4}, .body_nbytes = 4},
     LABELS(PLAIN, 1, zero1),
     3,
     MW_EDATA,
     IN_IMAGES,
     {"0x00000802", "2 dimensions", "expected 3", "not an IDX image file"}},
    /* The two files swapped: the label file's magic says 1 dimension. */
    {"labels_as_images",
     GOOD_LABELS(PLAIN),
     GOOD_IMAGES(PLAIN),
     3,
     MW_EDATA,
     IN_IMAGES,
     {"0x00000801", "declares 1 dimension,", "expected 3", "not an IDX image file"}},
    {"label_ndims",
     GOOD_IMAGES(PLAIN),
     IMAGES(PLAIN, N3, R3, C3, NULL),
     3,
     MW_EDATA,
     IN_LABELS,
     {"0x00000803", "3 dimensions", "expected 1", "not an IDX label file"}},
    {"zero_rows",
     IMAGE_HEADER(PLAIN, 2, 0, 5),
     LABELS(PLAIN, 2, lb01),
     3,
     MW_EDATA,
     IN_IMAGES,
     {"bad image size 0x5", "1..4096"}},
    {"zero_cols",
     IMAGE_HEADER(GZ, 2, 5, 0),
     LABELS(GZ, 2, lb01),
     3,
     MW_EDATA,
     IN_IMAGES,
     {"bad image size 5x0", "1..4096"}},
    {"dim_too_large",
     IMAGE_HEADER(PLAIN, 1, 28, 4097),
     LABELS(PLAIN, 1, zero1),
     3,
     MW_EDATA,
     IN_IMAGES,
     {"bad image size 28x4097", "1..4096"}},
    /* 65537 * 256 * 256 = 2^32 + 65536 bytes: refused from the header alone (the file holds no
     * data, so a reader that allocated first would report truncation instead). */
    {"too_many_bytes",
     IMAGE_HEADER(PLAIN, 65537, 256, 256),
     LABELS(PLAIN, 1, zero1),
     3,
     MW_EDATA,
     IN_IMAGES,
     {"65537 images of 256x256", "4295032832 bytes", "limit 4294967296"}},
    /* 2^32-1 images of 4096x4096: the product overflows 32 and 48 bits, not 64. */
    {"overflowing_dims",
     IMAGE_HEADER(PLAIN, 0xffffffffu, 4096, 4096),
     LABELS(PLAIN, 1, zero1),
     3,
     MW_EDATA,
     IN_IMAGES,
     {"4294967295 images of 4096x4096", "72057594021150720 bytes", "limit"}},
    {"empty_set",
     IMAGE_HEADER(GZ, 0, 28, 28),
     LABELS(GZ, 0, NULL),
     3,
     MW_EDATA,
     IN_IMAGES,
     {"0 images", "empty"}},
    {"truncated_header",
     {IMAGES_HDR3, .keep = 10},
     GOOD_LABELS(PLAIN),
     3,
     MW_EDATA,
     IN_IMAGES,
     {"truncated header", "expected 16 bytes", "read 10"}},
    /* Shorter than the magic: still a truncated header, not a bad magic. */
    {"truncated_header_gz_before_magic",
     {IMAGES_HDR3, .enc = GZ, .keep = 2},
     GOOD_LABELS(PLAIN),
     3,
     MW_EDATA,
     IN_IMAGES,
     {"truncated header", "expected 16 bytes", "read 2"}},
    {"truncated_image_body",
     {IMAGES_HDR3, .body_nbytes = 10},
     GOOD_LABELS(PLAIN),
     3,
     MW_EDATA,
     IN_IMAGES,
     {"truncated image data", "expected 18 bytes", "read 10"}},
    {"truncated_label_body",
     GOOD_IMAGES(GZ),
     {.enc = GZ,
      .magic = MW_IDX_LABELS_MAGIC,
      .ndims = 1,
      .dims = {N3},
      .body = labels3,
      .body_nbytes = 1},
     3,
     MW_EDATA,
     IN_LABELS,
     {"truncated label data", "expected 3 bytes", "read 1"}},
    {"truncated_gzip",
     IMAGES(GZ_HALF, NB, RB, CB, big_px),
     LABELS(GZ, NB, big_lb),
     10,
     MW_EDATA,
     IN_IMAGES,
     {"truncated gzip stream", "image data", "expected 4096 bytes", "read "}},
    {"truncated_gzip_trailer",
     IMAGES(GZ, NB, RB, CB, big_px),
     LABELS(GZ_NO_TRAILER, NB, big_lb),
     10,
     MW_EDATA,
     IN_LABELS,
     {"truncated gzip stream", "trailer"}},
    {"corrupt_gzip_crc",
     IMAGES(GZ_BAD_CRC, NB, RB, CB, big_px),
     LABELS(GZ, NB, big_lb),
     10,
     MW_EDATA,
     IN_IMAGES,
     {"corrupt gzip stream", "incorrect data check"}},
    {"trailing_data",
     {IMAGES_HDR3, .body_nbytes = N3 * R3 * C3 + 5},
     GOOD_LABELS(PLAIN),
     3,
     MW_EDATA,
     IN_IMAGES,
     {"unexpected data after", "16 header + 18 data bytes"}},
    {"count_mismatch",
     GOOD_IMAGES(PLAIN),
     LABELS(PLAIN, 2, labels3),
     3,
     MW_EDATA,
     IN_IMAGES | IN_LABELS,
     {"3 images", "2 labels", "must match"}},
    {"label_out_of_range",
     GOOD_IMAGES(PLAIN),
     LABELS(PLAIN, N3, lb0110),
     10,
     MW_EDATA,
     IN_LABELS,
     {"example 2", "label 10", "0..9"}},
    /* labels3 holds a 2: fine for 3 classes, not for 2. */
    {"label_over_num_classes",
     GOOD_IMAGES(PLAIN),
     GOOD_LABELS(PLAIN),
     2,
     MW_EDATA,
     IN_LABELS,
     {"example 0", "label 2", "num_classes 2"}},
    {"bad_num_classes",
     GOOD_IMAGES(PLAIN),
     GOOD_LABELS(PLAIN),
     0,
     MW_EINVAL,
     0,
     {"num_classes is 0"}},
};

/* Damage the gzip file at path as enc says (rewriting it); 0 when it cannot be done. */
static int damage(const char *dir, const char *name, const char *path, file_enc enc)
{
    size_t n = 0;
    char *gz = mw_test_read_file(path, &n);
    if (!gz || n < 18) {
        free(gz);
        return 0;
    }
    if (enc == GZ_HALF) {
        if (n <= 1000) { /* noise does not compress: the stream must be long */
            free(gz);
            return 0;
        }
        n /= 2;
    } else if (enc == GZ_NO_TRAILER) {
        n -= 8;
    } else if (enc == GZ_BAD_CRC) {
        gz[n - 8] ^= (char)0xff;
    }
    free(mw_test_write_file(dir, name, gz, n));
    free(gz);
    return 1;
}

/* Make one input file of case c in dir; returns its path (malloc'ed), NULL when the file
 * could not be made as asked. */
static char *make_file(const char *dir, const char *slot, const file_spec *f)
{
    char name[64];
    if (f->kind == THE_DIR)
        return xstrdup(dir);
    snprintf(name, sizeof name, "%s%s%s", f->kind == MISSING ? "no-such-" : "", slot,
             f->enc != PLAIN ? ".gz" : "");
    if (f->kind == MISSING) {
        char path[700];
        snprintf(path, sizeof path, "%s/%s", dir, name);
        return xstrdup(path);
    }
    size_t nbytes;
    uint8_t *buf = idx_bytes(f->magic, f->dims, f->ndims, f->body, f->body_nbytes, &nbytes);
    if (f->keep) {
        assert_true(f->keep <= nbytes);
        nbytes = f->keep;
    }
    char *path = f->enc != PLAIN ? mw_test_write_gz(dir, name, buf, nbytes)
                                 : mw_test_write_file(dir, name, buf, nbytes);
    free(buf);
    if (f->enc >= GZ_HALF && !damage(dir, name, path, f->enc)) {
        free(path);
        return NULL;
    }
    return path;
}

/* Run one case in its own directory under root: the load fails with the status and a
 * message holding every string (and the paths asked for), and leaves the set empty. Prints
 * what differs, by case name; returns 1 when all holds. */
static int run_bad_case(const char *root, const bad_case *c)
{
    char dir[600], who[96];
    snprintf(dir, sizeof dir, "%s/%s", root, c->name);
    snprintf(who, sizeof who, "case %s", c->name);
    assert_int_equal(mkdir(dir, 0777), 0);
    char *img = make_file(dir, "images", &c->images);
    char *lbl = make_file(dir, "labels", &c->labels);
    if (!img || !lbl) {
        fprintf(stderr, "%s: cannot build its %s file as the table says\n", who,
                img ? "label" : "image");
        free(img);
        free(lbl);
        return 0;
    }
    const char *subs[2 + 6 + 1];
    int k = 0;
    if (c->names & IN_IMAGES)
        subs[k++] = img;
    if (c->names & IN_LABELS)
        subs[k++] = lbl;
    for (int i = 0; i < 5 && c->msg[i]; i++)
        subs[k++] = c->msg[i];
    subs[k] = NULL;

    mw_dataset d;
    mw_dataset_init(&d);
    mw_err_clear();
    mw_status rc = mw_dataset_load(&d, img, lbl, c->num_classes);
    int ok = mw_test_err_matches(who, rc, c->want, subs);
    if (d.images || d.labels || d.count) {
        fprintf(stderr, "%s: the set holds %u examples after the load; want it left empty\n", who,
                d.count);
        ok = 0;
    }
    mw_dataset_free(&d);
    mw_err_clear();
    free(img);
    free(lbl);
    return ok;
}

/* Every row of bad_cases, each reported by name when it fails. */
static void test_bad_files(void **state)
{
    const size_t n = sizeof bad_cases / sizeof bad_cases[0];
    fill_big();
    int bad = 0;
    for (size_t i = 0; i < n; i++)
        bad += !run_bad_case(*state, &bad_cases[i]);
    printf("%zu bad-file cases, %d failed\n", n, bad);
    if (bad)
        fail_msg("%d of %zu bad-file cases failed (see above)", bad, n);
}

/* ---- directories ---- */

static void write_dir(const char *dir, int gz)
{
    char names[4][64];
    for (int i = 0; i < 4; i++)
        snprintf(names[i], sizeof names[i], "%s-%s%s", i < 2 ? "train" : "t10k",
                 i % 2 ? "labels-idx1-ubyte" : "images-idx3-ubyte", gz ? ".gz" : "");
    char *p[4];
    write_good(dir, names[0], names[1], gz, &p[0], &p[1]);
    uint8_t px[2 * R3 * C3] = {255, 0};
    p[2] = write_images(dir, names[2], gz, 2, R3, C3, px);
    p[3] = write_labels(dir, names[3], gz, 2, (const uint8_t[]){1, 1});
    for (int i = 0; i < 4; i++)
        free(p[i]);
}

static void check_dir(const mw_dataset *train, const mw_dataset *test)
{
    check_good(train);
    assert_int_equal(test->count, 2);
    assert_int_equal(test->rows, R3);
    assert_int_equal(test->cols, C3);
    assert_int_equal(test->images[0], 255);
    assert_int_equal(test->labels[1], 1);
}

static void load_dir(const char *dir, int gz)
{
    write_dir(dir, gz);
    mw_dataset train, test;
    mw_dataset_init(&train);
    mw_dataset_init(&test);
    expect_err(mw_dataset_load_dir(&train, &test, dir, 3), MW_OK, "");
    check_dir(&train, &test);
    mw_dataset_free(&train);
    mw_dataset_free(&test);
}

static void test_load_dir_gz(void **state)
{
    load_dir(*state, 1);
}

static void test_load_dir_plain(void **state)
{
    load_dir(*state, 0);
}

static void test_load_dir_prefers_gz(void **state)
{
    /* Good .gz files beside plain files that would fail (labels out of range). */
    write_dir(*state, 1);
    const char *plain[4] = {"train-images-idx3-ubyte", "train-labels-idx1-ubyte",
                            "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"};
    for (int i = 0; i < 4; i++)
        free(write_labels(*state, plain[i], 0, 1, (const uint8_t[]){200}));
    char with_slash[600];
    snprintf(with_slash, sizeof with_slash, "%s/", (const char *)*state);
    mw_dataset train, test;
    mw_dataset_init(&train);
    mw_dataset_init(&test);
    expect_err(mw_dataset_load_dir(&train, &test, with_slash, 3), MW_OK, "");
    check_dir(&train, &test);
    mw_dataset_free(&train);
    mw_dataset_free(&test);
}

static void test_load_dir_mixed(void **state)
{
    /* Each file may independently be compressed or not. */
    write_dir(*state, 0);
    char old[600], new[600];
    snprintf(old, sizeof old, "%s/t10k-images-idx3-ubyte", (const char *)*state);
    snprintf(new, sizeof new, "%s/t10k-images-idx3-ubyte.gz", (const char *)*state);
    assert_int_equal(rename(old, new), 0); /* plain bytes under a .gz name: zlib reads it */
    mw_dataset train, test;
    mw_dataset_init(&train);
    mw_dataset_init(&test);
    expect_err(mw_dataset_load_dir(&train, &test, *state, 3), MW_OK, "");
    check_dir(&train, &test);
    mw_dataset_free(&train);
    mw_dataset_free(&test);
}

static void expect_dir_fails(const char *dir, mw_status want, const char *s1, const char *s2,
                             const char *s3)
{
    mw_dataset train, test;
    mw_dataset_init(&train);
    mw_dataset_init(&test);
    mw_err_clear();
    mw_status rc = mw_dataset_load_dir(&train, &test, dir, 3);
    assert_null(train.images);
    assert_null(test.images);
    assert_null(train.labels);
    assert_null(test.labels);
    expect_err(rc, want, s1, s2, s3);
}

static void test_load_dir_missing_dir(void **state)
{
    char path[600];
    snprintf(path, sizeof path, "%s/no-such-dir", (const char *)*state);
    expect_dir_fails(path, MW_EIO, "data directory", path, "No such file");
}

static void test_load_dir_not_a_dir(void **state)
{
    char *p = mw_test_write_file(*state, "file", "x", 1);
    expect_dir_fails(p, MW_EIO, "data directory", p, "not a directory");
    free(p);
}

static void test_load_dir_missing_file(void **state)
{
    write_dir(*state, 1);
    char path[600];
    snprintf(path, sizeof path, "%s/t10k-labels-idx1-ubyte.gz", (const char *)*state);
    assert_int_equal(unlink(path), 0);
    expect_dir_fails(*state, MW_EIO, (const char *)*state, "t10k-labels-idx1-ubyte.gz",
                     "nor t10k-labels-idx1-ubyte");
}

static void test_load_dir_bad_test_set(void **state)
{
    /* The train set loads, the test set fails: neither output is touched, nothing leaks. */
    write_dir(*state, 1);
    free(write_labels(*state, "t10k-labels-idx1-ubyte.gz", 1, 2, (const uint8_t[]){0, 7}));
    expect_dir_fails(*state, MW_EDATA, "t10k-labels-idx1-ubyte.gz", "example 1", "label 7");
}

static void test_load_dir_size_mismatch(void **state)
{
    write_dir(*state, 1);
    uint8_t px[2 * C3 * R3] = {0};
    free(write_images(*state, "t10k-images-idx3-ubyte.gz", 1, 2, C3, R3, px)); /* 3x2 */
    expect_dir_fails(*state, MW_EDATA, "test images are 3x2", "train images in", "are 2x3");
}

/* ---- epoch order ---- */

static void test_epoch_order_permutation(void **state)
{
    (void)state;
    enum { N = 1000 };
    uint32_t ids[N];
    uint8_t seen[N] = {0};
    mw_dataset_epoch_order(ids, N, 42, 0);
    int moved = 0;
    for (uint32_t i = 0; i < N; i++) {
        assert_true(ids[i] < N);
        assert_int_equal(seen[ids[i]], 0);
        seen[ids[i]] = 1;
        moved += ids[i] != i;
    }
    assert_true(moved > N / 2); /* actually shuffled */

    uint32_t one = 99;
    mw_dataset_epoch_order(&one, 1, 42, 3);
    assert_int_equal(one, 0);
    mw_dataset_epoch_order(NULL, 0, 42, 3); /* n = 0 touches nothing */
}

static void test_epoch_order_deterministic(void **state)
{
    (void)state;
    enum { N = 500 };
    uint32_t a[N], b[N];
    mw_dataset_epoch_order(a, N, 7, 5);
    mw_dataset_epoch_order(b, N, 7, 5);
    assert_memory_equal(a, b, sizeof a);

    /* Pinned: the order is part of the layout-independence contract, so a change to it (or
     * to the generator) must be deliberate. */
    mw_dataset_epoch_order(a, 10, 1, 0);
    uint32_t c[10];
    mw_rng r;
    mw_rng_seed(&r, 1, 0x5eed0000u);
    for (uint32_t i = 0; i < 10; i++)
        c[i] = i;
    mw_rng_shuffle(&r, c, 10);
    assert_memory_equal(a, c, sizeof c);
}

static void test_epoch_order_differs(void **state)
{
    (void)state;
    enum { N = 500 };
    uint32_t a[N], b[N], c[N];
    mw_dataset_epoch_order(a, N, 7, 0);
    mw_dataset_epoch_order(b, N, 7, 1);
    mw_dataset_epoch_order(c, N, 8, 0);
    assert_memory_not_equal(a, b, sizeof a); /* epochs */
    assert_memory_not_equal(a, c, sizeof a); /* seeds */
}

/* ---- the real data set ---- */

static void test_fashion_mnist(void **state)
{
    (void)state;
    struct stat st;
    if (stat(MW_DATA_DEFAULT_DIR, &st) != 0) {
        fprintf(stderr, "%s absent (Debian package dataset-fashion-mnist): skipped\n",
                MW_DATA_DEFAULT_DIR);
        skip();
    }
    mw_dataset train, test;
    mw_dataset_init(&train);
    mw_dataset_init(&test);
    expect_err(mw_dataset_load_dir(&train, &test, MW_DATA_DEFAULT_DIR, 10), MW_OK, "");
    assert_int_equal(train.count, 60000);
    assert_int_equal(test.count, 10000);
    assert_int_equal(train.rows, 28);
    assert_int_equal(train.cols, 28);
    assert_int_equal(test.rows, 28);
    assert_int_equal(test.cols, 28);

    /* Balanced classes (6000 / 1000 each) and the known first labels. */
    int train_hist[10] = {0}, test_hist[10] = {0};
    for (uint32_t i = 0; i < train.count; i++)
        train_hist[train.labels[i]]++;
    for (uint32_t i = 0; i < test.count; i++)
        test_hist[test.labels[i]]++;
    for (int c = 0; c < 10; c++) {
        assert_int_equal(train_hist[c], 6000);
        assert_int_equal(test_hist[c], 1000);
    }
    const int32_t train_first[4] = {9, 0, 0, 3}, test_first[4] = {9, 2, 1, 1};
    assert_memory_equal(train.labels, train_first, sizeof train_first);
    assert_memory_equal(test.labels, test_first, sizeof test_first);

    /* The first image (an ankle boot) scales into [0, 1] and is not blank. */
    float x[28 * 28];
    int32_t y;
    const uint32_t id0 = 0;
    mw_dataset_batch(&train, x, &y, &id0, 1);
    float mx = 0.0f;
    for (int i = 0; i < 28 * 28; i++) {
        assert_true(x[i] >= 0.0f && x[i] <= 1.0f);
        mx = x[i] > mx ? x[i] : mx;
    }
    assert_true(mx > 0.5f);
    assert_int_equal(y, 9);

    mw_dataset_free(&train);
    mw_dataset_free(&test);
}

#define T(name) mw_test_in_tmpdir(name)

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(test_init_free),
        T(test_load_plain),
        T(test_load_gz),
        T(test_batch_ids),
        T(test_failed_load_keeps_set),
        T(test_bad_files),
        T(test_load_dir_gz),
        T(test_load_dir_plain),
        T(test_load_dir_prefers_gz),
        T(test_load_dir_mixed),
        T(test_load_dir_missing_dir),
        T(test_load_dir_not_a_dir),
        T(test_load_dir_missing_file),
        T(test_load_dir_bad_test_set),
        T(test_load_dir_size_mismatch),
        T(test_epoch_order_permutation),
        T(test_epoch_order_deterministic),
        T(test_epoch_order_differs),
        T(test_fashion_mnist),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
